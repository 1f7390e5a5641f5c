package provision

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hyperpod-governance/portal/internal/slurm"
	"github.com/hyperpod-governance/portal/internal/workflow"

	"k8s.io/apimachinery/pkg/api/equality"
)

// JobStore is the durable queue the worker runs on: *store.DB in the portal,
// as it is (the job is a workflow.Job, which internal/store keeps). Every
// method but ClaimJob checks that owner still holds the job's lease and
// fails when it does not; the worker then stops without writing anything
// else, since another worker has taken the job over.
//
// StartJob and CompleteJob return a *workflow.TransitionError when the
// connection is in a state that does not allow the change (revoked while the
// job waited, say); the worker fails the job with it.
type JobStore interface {
	ClaimJob(ctx context.Context, owner string, now time.Time, lease time.Duration) (workflow.Job, bool, error)
	ExtendLease(ctx context.Context, jobID int64, owner string, now time.Time, lease time.Duration) error
	StartJob(ctx context.Context, jobID int64, owner, planHash string, steps []string, dryRun bool, now time.Time) error
	// StartStep extends the lease and marks a step running, in one
	// transaction: the worker's one write before each step.
	StartStep(ctx context.Context, jobID int64, owner string, seq int, name string, now time.Time, lease time.Duration) error
	StepFinished(ctx context.Context, jobID int64, owner string, seq int, name, outcome, detail string, now time.Time) error
	StepFailed(ctx context.Context, jobID int64, owner string, seq int, name, errText string, now time.Time) error
	RetryJob(ctx context.Context, jobID int64, owner string, notBefore time.Time, errText string, now time.Time) error
	FailJob(ctx context.Context, jobID int64, owner, errText string, now time.Time) error
	CompleteJob(ctx context.Context, jobID int64, owner string, now time.Time) error
}

// StepApplier applies one plan object idempotently and says what it did and
// a detail worth recording. Its errors are classified by IsPermanent.
type StepApplier interface {
	ApplyObject(ctx context.Context, o Object) (Outcome, string, error)
}

// ApplierSteps adapts an Applier to StepApplier: each object is applied as
// a plan of one, so the outcome and errors are exactly Apply's.
type ApplierSteps struct{ Applier *Applier }

// ApplyObject applies o with server-side apply.
func (a ApplierSteps) ApplyObject(ctx context.Context, o Object) (Outcome, string, error) {
	res, err := a.Applier.Apply(ctx, Plan{Objects: []Object{o}})
	if len(res) != 1 {
		return Failed, "", errors.Join(err, fmt.Errorf("provision: apply %s %s: %d results for one object", o.Kind, o.Ref(), len(res)))
	}
	detail := ""
	if res[0].ResourceVersion != "" {
		detail = "resourceVersion " + res[0].ResourceVersion
	}
	return res[0].Outcome, detail, err
}

// CheckNamespace reads the plan's namespace (see Applier.CheckNamespace):
// ApplierSteps is a NamespaceChecker.
func (a ApplierSteps) CheckNamespace(ctx context.Context, p Plan) (NamespaceCheck, error) {
	return a.Applier.CheckNamespace(ctx, p)
}

// NamespaceChecker is a StepApplier that can also read a plan's namespace;
// the worker then refuses a foreign namespace nobody adopted before the
// job's first step.
type NamespaceChecker interface {
	CheckNamespace(ctx context.Context, p Plan) (NamespaceCheck, error)
}

// DryRunOutcome is the outcome recorded for every step of a dry run.
const DryRunOutcome Outcome = "dry-run"

// Permanent marks err as one that retrying cannot fix (IsPermanent reports
// true), for callers outside this package, e.g. a Plans function whose
// contract cannot be planned.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent(err)
}

// PlansFrom is a Worker.Plans that builds the plan of a contract version
// looked up by version. The plan is pure, so an error building it (a Slurm
// contract, an instance type missing from the settings) is permanent; an
// error looking the version up is not.
func PlansFrom(version func(ctx context.Context, connID int64, version int) (c workflow.Contract, hash string, err error), s ClusterSettings) func(context.Context, int64, int) (Plan, error) {
	return func(ctx context.Context, connID int64, v int) (Plan, error) {
		c, hash, err := version(ctx, connID, v)
		return planOf(ConnVersion{connID, v}, ContractVersion{c, hash}, err, s)
	}
}

// ContractVersion is a contract version's body and hash, as a plan is
// built from them.
type ContractVersion struct {
	Contract workflow.Contract
	Hash     string
}

// errNoVersion: a batch lookup found no such version.
var errNoVersion = errors.New("no such version")

// PlanBatchFrom is a Worker.PlansAll that looks the versions up at once
// with versions (a ref absent from its map has no version) and builds each
// plan as PlansFrom does.
func PlanBatchFrom(versions func(ctx context.Context, refs []ConnVersion) (map[ConnVersion]ContractVersion, error), s ClusterSettings) func(context.Context, []ConnVersion) ([]Plan, []error, error) {
	return func(ctx context.Context, refs []ConnVersion) ([]Plan, []error, error) {
		found, err := versions(ctx, refs)
		if err != nil {
			return nil, nil, err
		}
		plans, errs := make([]Plan, len(refs)), make([]error, len(refs))
		for i, r := range refs {
			cv, ok := found[r]
			var lookup error
			if !ok {
				lookup = errNoVersion
			}
			plans[i], errs[i] = planOf(r, cv, lookup, s)
		}
		return plans, errs, nil
	}
}

// planOf is the plan of version r, looked up as cv (or lookup says why
// not): a lookup error is retried, a plan that cannot be built is
// permanent.
func planOf(r ConnVersion, cv ContractVersion, lookup error, s ClusterSettings) (Plan, error) {
	if lookup != nil {
		return Plan{}, fmt.Errorf("provision: version %d of connection %d: %w", r.Version, r.ConnectionID, lookup)
	}
	p, err := BuildPlan(r.ConnectionID, r.Version, cv.Hash, cv.Contract, s)
	if err != nil {
		return Plan{}, Permanent(err)
	}
	return p, nil
}

// The job lease and its heartbeat, in one place. A claim holds a job for
// JobLease; while the job runs (slow AWS waits included), a heartbeat
// renews it every JobHeartbeat, so a live worker keeps its job however long
// a step takes, and a worker that died (kill -9, a lost node) stops renewing:
// another worker claims the job once JobLease has passed since the last
// beat. With the worker's PollInterval (2 s) that resumes a dead holder's
// job within JobLease + PollInterval = 12 s, under the 15 s the replicas
// promise (docs/replicas.md). Three beats fit in a lease, so one slow
// write (a busy database) does not lose it.
const (
	JobLease     = 10 * time.Second
	JobHeartbeat = 3 * time.Second
	// DefaultStepTimeout bounds one step (an apply, an AWS call and its
	// wait); a longer wait is the job's retry. It no longer depends on the
	// lease: the heartbeat keeps the lease while a step runs.
	DefaultStepTimeout = time.Minute
	// DefaultPollInterval is how long Run waits when the queue is empty.
	DefaultPollInterval = 2 * time.Second
)

// ErrLeaseLost: the worker no longer holds the job (another worker took
// it over after the lease expired, or it is no longer running). The store
// returns it (wrapped) from every write on such a job; the heartbeat
// cancels the running step with it.
var ErrLeaseLost = workflow.ErrLeaseLost

// DefaultOwner names this process for leases: host, pid and a random
// suffix, so that two workers never share an owner.
func DefaultOwner() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b)
}

// Worker turns queued jobs into applied plans: it claims a job with a
// lease, builds the plan of the approved version, applies each object in
// order as one recorded step, and completes the job (the connection becomes
// active), schedules a retry with backoff (transient errors) or fails it
// (permanent errors, or too many attempts).
//
// Revocation jobs run the same way, with the same leases, recording,
// retries and dry run: their steps are the RevocationPlan of the approved
// version's plan, run through Apply's RevocationApplier side (ApplierSteps
// has one). Every step is idempotent (a delete of what is gone is Absent),
// so a resumed revocation simply runs them all again.
//
// Amend jobs (workflow.JobAmend) run the same way too: their steps are
// AmendSteps from the plan of job.FromVersion (the approved version) to the
// plan of job.Version, which is checked like a provisioning job's (pinned
// hash, preflight, namespace) before the first step.
//
// Re-apply jobs (workflow.JobReapply), when Apply is a SnapshotApplier and
// the worker does not run dry, run in batches: the first one claimed
// claims the other due ones (JobBatchClaimer, up to ReapplyBatch), and all
// are run from one snapshot of the cluster, each recording its own steps,
// settling on its own and handed back on its own (reapplybatch.go).
//
// Every step is applied on every attempt, including those a crashed attempt
// already did: server-side apply is idempotent, and the readiness gate then
// rests on what this attempt saw. A worker that dies leaves its job running
// with a lease that expires; the next claim resumes it.
type Worker struct {
	Store JobStore
	// Plans builds the plan of a connection's approved contract version.
	// Wrap errors no retry can fix with Permanent (PlansFrom does).
	Plans func(ctx context.Context, connID int64, version int) (Plan, error)
	// PlansAll, when set, builds the plans of many versions at once, for
	// a re-apply batch (PlanBatchFrom builds one): plans[i] is refs[i]'s,
	// or errs[i] says why not, as Plans would. An error for the whole call
	// makes the batch use Plans, job by job.
	PlansAll func(ctx context.Context, refs []ConnVersion) (plans []Plan, errs []error, err error)
	// TeamQueue, when set, rebuilds a plan's team ClusterQueue (the
	// portal manages the ClusterQueues) from the store as the job runs:
	// the team's other counted connections and, withSelf, the plan's own
	// share (TeamQueuesFrom builds one; teamqueue.go). Provisioning,
	// amend and re-apply jobs apply it with their own share, revocation
	// jobs without it (and delete it when no other connection counts).
	// Nil: the plan's queue holds its own share alone, as BuildPlan made
	// it (one connection per team).
	TeamQueue func(ctx context.Context, p Plan, withSelf bool) (Plan, error)
	Apply     StepApplier // unused in dry-run mode
	// Connection, when set, reads what a Slurm hold or amendment job needs
	// of its connection when it starts (ConnectionFacts): the hold the
	// portal has confirmed, and which versions' accounts may be on the
	// cluster. Nil: a hold job holds its own version's account, and an
	// amendment reads the hold from the cluster alone.
	Connection func(ctx context.Context, connID int64) (ConnectionFacts, error)
	// AWS makes the plans' AWS calls (unused in dry-run mode). Nil: a plan
	// with AWS calls fails at its first one, saying AWS is not configured.
	AWS AWSRunner
	// DryRun: no cluster calls. Each step records DryRunOutcome and the
	// object's summary line; the job succeeds and the connection stays
	// approved (see the store's CompleteJob). A revocation's dry run
	// records its steps the same way; the store decides whether the
	// connection may be called revoked.
	DryRun bool
	Clock  func() time.Time // default time.Now
	// Owner names this worker in leases; unique per worker (DefaultOwner).
	Owner string
	// Lease is how long a claim holds a job without news; it is extended
	// before every step and by the heartbeat while the job runs. Default
	// JobLease.
	Lease time.Duration
	// Heartbeat is how often the lease is renewed while a job runs.
	// Default JobHeartbeat (or a third of Lease, when that is shorter).
	Heartbeat time.Duration
	// HeartbeatTicks, when set, drives the heartbeat instead of a ticker
	// of Heartbeat: one renewal per receive (a test hook, with Clock).
	HeartbeatTicks <-chan time.Time
	// StepTimeout bounds one step. Default DefaultStepTimeout.
	StepTimeout time.Duration
	// Backoff is the delay before the second attempt, doubled for each
	// further one up to MaxBackoff. Defaults 10 seconds and 10 minutes.
	Backoff, MaxBackoff time.Duration
	// MaxAttempts caps the attempts of a job (default 8); the last
	// transient error then fails it.
	MaxAttempts int
	// PollInterval is how long Run waits when the queue is empty or the
	// store fails. Default DefaultPollInterval.
	PollInterval time.Duration
	Logger       *slog.Logger // default: discard
	// Preflight, when set, checks a provisioning or reapply plan against
	// the cluster before the job starts (ClusterReader.RequireServed: every
	// API version the plan applies is served). Its error fails the job
	// before anything is applied; IsPermanent decides whether it retries.
	// Hold jobs are checked too, on their queues alone. Not called in
	// dry-run mode nor for revocations.
	Preflight func(ctx context.Context, p Plan) error
	// AfterStep, when set, is called after step seq is recorded. An error
	// aborts the run at once without another write, as if the process had
	// died there: a test hook for crash recovery.
	AfterStep func(seq int) error
	// Slurm runs Slurm's commands on the cluster of the Slurm
	// connections (slurm.Local where the portal runs beside the Slurm
	// client commands; docs/configuration.md). Nil: a Slurm job fails,
	// saying the portal has no Slurm transport.
	Slurm slurm.Runner
	// Scheduler runs the cluster's scheduler config jobs
	// (schedulerjob.go); nil fails them, saying the portal does not run
	// them.
	Scheduler *SchedulerJobs
}

func (w *Worker) now() time.Time {
	if w.Clock != nil {
		return w.Clock()
	}
	return time.Now()
}

func orDefault[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

func (w *Worker) lease() time.Duration { return orDefault(w.Lease, JobLease) }

func (w *Worker) stepTimeout() time.Duration { return orDefault(w.StepTimeout, DefaultStepTimeout) }

func (w *Worker) heartbeatEvery() time.Duration {
	return orDefault(w.Heartbeat, min(JobHeartbeat, w.lease()/3))
}

// leases are the jobs one run holds (one job, or a batch of re-apply
// jobs), each with the cancel of its own run context: the heartbeat renews
// each, and stops the run of one whose lease is lost.
type leases struct {
	mu   sync.Mutex // held while a job's lease is renewed, so release waits for it
	held map[int64]heldJob
}

type heldJob struct {
	cancel context.CancelCauseFunc
	log    *slog.Logger
}

func newLeases() *leases { return &leases{held: map[int64]heldJob{}} }

func (l *leases) hold(id int64, cancel context.CancelCauseFunc, log *slog.Logger) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held[id] = heldJob{cancel: cancel, log: log}
}

// release stops renewing job id's lease; when it returns, no renewal of it
// is under way. A batch releases each job before its last write (its
// completion, retry or failure), after which the store would call the
// lease lost.
func (l *leases) release(id int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.held, id)
}

func (l *leases) ids() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Sorted(maps.Keys(l.held))
}

// heartbeat renews the lease of every job held on every beat until the
// returned stop is called (stop waits for it to end). When the store says
// a job's lease is lost it cancels that job's run with ErrLeaseLost: the
// step in flight stops, and the run's next write fails, so the worker
// writes nothing more for it. Any other error (a busy database) is logged
// and the next beat tries again.
func (w *Worker) heartbeat(ctx context.Context, held *leases) (stop func()) {
	ticks, tickerStop := w.HeartbeatTicks, func() {}
	if ticks == nil {
		t := time.NewTicker(w.heartbeatEvery())
		ticks, tickerStop = t.C, t.Stop
	}
	renew := func(id int64) {
		held.mu.Lock()
		defer held.mu.Unlock()
		h, ok := held.held[id]
		if !ok {
			return // released meanwhile
		}
		err := w.Store.ExtendLease(context.WithoutCancel(ctx), id, w.Owner, w.now(), w.lease())
		switch {
		case errors.Is(err, ErrLeaseLost):
			h.log.Warn("job lease lost: another worker holds the job; stopping", "err", err.Error())
			delete(held.held, id)
			h.cancel(err)
		case err != nil:
			h.log.Warn("job lease heartbeat failed; retrying at the next beat", "err", err.Error())
		}
	}
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		defer tickerStop()
		for {
			select {
			case <-done:
				return
			case <-ticks:
			}
			for _, id := range held.ids() {
				renew(id)
			}
		}
	}()
	return func() { close(done); <-ended }
}

func (w *Worker) maxAttempts() int { return orDefault(w.MaxAttempts, 8) }

func (w *Worker) log() *slog.Logger {
	if w.Logger != nil {
		return w.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// backoff is the delay after the given (1-based) failed attempt.
func (w *Worker) backoff(attempt int) time.Duration {
	d, ceiling := orDefault(w.Backoff, 10*time.Second), orDefault(w.MaxBackoff, 10*time.Minute)
	for i := 1; i < attempt && d < ceiling; i++ {
		d *= 2
	}
	return min(d, ceiling)
}

func (w *Worker) check() error {
	switch {
	case w.Store == nil, w.Plans == nil:
		return errors.New("provision: worker needs a Store and Plans")
	case w.Apply == nil && !w.DryRun:
		return errors.New("provision: worker needs an Apply unless it runs dry")
	case w.Owner == "":
		return errors.New("provision: worker needs an Owner (see DefaultOwner)")
	}
	return nil
}

// RunOnce claims one due job and runs it until it completes, is scheduled
// for a retry or fails. It reports whether it claimed a job. An error means
// the run stopped without settling the job (the store failed, the lease was
// lost, AfterStep said so): the job's lease expires and a later claim
// resumes it.
//
// A re-apply job, when Apply is a SnapshotApplier and the worker does not
// run dry, is run with the other due re-apply jobs, claimed with it (up to
// ReapplyBatch): see runReapplyBatch.
func (w *Worker) RunOnce(ctx context.Context) (bool, error) {
	if err := w.check(); err != nil {
		return false, err
	}
	job, ok, err := w.Store.ClaimJob(ctx, w.Owner, w.now(), w.lease())
	if err != nil || !ok {
		return false, err
	}
	if sa, ok := w.Apply.(SnapshotApplier); ok && job.Kind == workflow.JobReapply && !w.DryRun {
		return true, w.runReapplyBatch(ctx, job, sa)
	}
	log := w.jobLog(job)
	// Bookkeeping outlives a shutdown: once a step has run, its outcome
	// and the job's fate are recorded even if ctx is cancelled meanwhile.
	// The database's busy timeout bounds these writes.
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	held := newLeases()
	held.hold(job.ID, cancel, log)
	stopBeat := w.heartbeat(ctx, held)
	err = w.run(runCtx, context.WithoutCancel(ctx), job, log)
	stopBeat()
	return true, leaseLostCause(runCtx, err)
}

// jobLog is the logger of a claimed job's run.
func (w *Worker) jobLog(job workflow.Job) *slog.Logger {
	log := w.log().With("job_id", job.ID, "connection_id", job.ConnectionID, "attempt", job.Attempts)
	if job.PreviousOwner != "" {
		log.Info("resuming a job whose lease expired", "previous_owner", job.PreviousOwner)
	}
	return log
}

// leaseLostCause names a lost lease as the cause of err when it is.
func leaseLostCause(runCtx context.Context, err error) error {
	if cause := context.Cause(runCtx); err != nil && errors.Is(cause, ErrLeaseLost) && !errors.Is(err, ErrLeaseLost) {
		return fmt.Errorf("%w (%v)", cause, err)
	}
	return err
}

// stop is how a run ends without a store error.
type stop struct {
	retry bool // schedule another attempt; else fail the job
	err   error
}

// jobRun is one attempt of a claimed job as the worker runs it: its steps
// and how far it got. A batch of re-apply jobs runs each a stretch at a
// time (runReapplyBatch); a single job runs all its steps at once.
type jobRun struct {
	job workflow.Job
	log *slog.Logger
	// ctx is the job's run: cancelled on shutdown, or when its lease is
	// lost (the heartbeat).
	ctx   context.Context
	plan  Plan // a batched re-apply job's plan (before Adopting)
	steps []Step
	names []string
	hash  string
	apply StepApplier
	fresh freshNamespaces
	next  int // the step to run next
	// release stops renewing the job's lease (a batch's; a single job's
	// heartbeat stops with its run): called before the job's last write.
	release func()
	// died: AfterStep said to stop as if the process had died.
	died bool
	// dry: the steps are recorded, not run (Worker.dryRun).
	dry bool
}

func (w *Worker) newRun(ctx context.Context, job workflow.Job, log *slog.Logger) *jobRun {
	r := &jobRun{job: job, log: log, ctx: ctx, release: func() {}}
	if a, ok := w.Apply.(NewObjectApplier); ok {
		r.fresh.applier = a
	}
	return r
}

func (r *jobRun) setSteps(steps []Step, hash string) {
	r.steps, r.hash = steps, hash
	r.names = make([]string, len(steps))
	for i, st := range steps {
		r.names[i] = st.Name()
	}
}

func (r *jobRun) done() bool { return r.next >= len(r.steps) }

// dryRun says whether steps are recorded rather than run. A Slurm
// connection's steps (their Slurm plan set) run whenever the worker has a
// Slurm transport, DryRun or not: a portal for a HyperPod Slurm cluster has
// no Kubernetes cluster to apply to (no --kubeconfig, so DryRun), and its
// Slurm connections are provisioned, held and revoked all the same. Without
// a transport they run dry in dry-run mode, and otherwise fail at their
// first step, saying so (runSlurm). Every other job runs dry exactly when
// the worker does.
func (w *Worker) dryRun(steps []Step) bool {
	slurmSteps := len(steps) > 0
	for _, st := range steps {
		slurmSteps = slurmSteps && st.Slurm != nil
	}
	return RunsDry(slurmSteps, w.DryRun, w.Slurm != nil)
}

// RunsDry is the rule of Worker.dryRun, for the worker and the pages that
// say what a job will do: a Slurm connection's steps run whenever a Slurm
// transport is configured; everything else runs dry exactly when the
// portal does (no Kubernetes cluster).
func RunsDry(slurmSteps, dryRun, slurmTransport bool) bool {
	if slurmSteps && slurmTransport {
		return false
	}
	return dryRun
}

func (w *Worker) run(ctx, sctx context.Context, job workflow.Job, log *slog.Logger) error {
	if ended, err := w.admit(sctx, job, log); ended {
		return err
	}
	if job.Kind == workflow.JobScheduler {
		return w.runScheduler(ctx, sctx, job, log)
	}
	steps, hash, err := w.steps(ctx, job)
	if err != nil {
		return w.settle(sctx, job, log, stop{retry: !IsPermanent(err), err: err})
	}
	r := w.newRun(ctx, job, log)
	r.setSteps(steps, hash)
	r.dry = w.dryRun(steps)
	r.apply = w.Apply
	if ended, err := w.start(sctx, r); ended {
		return err
	}
	if ended, err := w.runSteps(sctx, r, nil); ended {
		return err
	}
	return w.complete(sctx, r)
}

// admit settles a job this worker cannot run (a kind it does not know) or
// that has used up its attempts; ended says it did.
func (w *Worker) admit(sctx context.Context, job workflow.Job, log *slog.Logger) (ended bool, err error) {
	if job.Kind != workflow.JobProvision && job.Kind != workflow.JobRevoke && job.Kind != workflow.JobReapply && job.Kind != workflow.JobAmend &&
		job.Kind != workflow.JobScheduler && job.Kind != workflow.JobHold {
		return true, w.settle(sctx, job, log, stop{err: fmt.Errorf("provision: %s jobs are not run by this version of the portal", job.Kind)})
	}
	if job.Attempts > w.maxAttempts() {
		// Claims that never settled (crashes, lost leases) count too: a job
		// that kills its worker must not loop forever.
		return true, w.settle(sctx, job, log, stop{err: fmt.Errorf("provision: gave up after %d attempts; last error: %s", job.Attempts-1, orNone(job.LastError))})
	}
	return false, nil
}

// start records the attempt's steps (StartJob); a start the lifecycle
// refuses fails the job.
func (w *Worker) start(sctx context.Context, r *jobRun) (ended bool, err error) {
	if err := w.Store.StartJob(sctx, r.job.ID, w.Owner, r.hash, r.names, r.dry, w.now()); err != nil {
		if te := (*workflow.TransitionError)(nil); errors.As(err, &te) {
			return true, w.settleRun(sctx, r, stop{err: err})
		}
		return true, err
	}
	return false, nil
}

// runSteps runs r's steps from r.next, each recorded, until they are all
// done or, when pause is set, until the next step is one pause names (not
// run). ended says the job's attempt ended here (settled, handed back, or
// stopped by a store error, which err is).
func (w *Worker) runSteps(sctx context.Context, r *jobRun, pause func(Step) bool) (ended bool, err error) {
	job := r.job
	for r.next < len(r.steps) {
		seq, st := r.next, r.steps[r.next]
		if pause != nil && pause(st) {
			return false, nil
		}
		if r.ctx.Err() != nil {
			return true, w.handBackRun(sctx, r)
		}
		if ran, err := w.runAnswered(sctx, r, pause); err != nil {
			return true, err
		} else if ran {
			continue
		}
		if err := w.Store.StartStep(sctx, job.ID, w.Owner, seq, r.names[seq], w.now(), w.lease()); err != nil {
			return true, err
		}
		outcome, detail, applyErr := DryRunOutcome, st.Detail, error(nil)
		var rec *workflow.AWSRecord
		if !r.dry {
			stepCtx, cancel := context.WithTimeout(r.ctx, w.stepTimeout())
			switch {
			case st.AWS != nil:
				outcome, detail, rec, applyErr = w.runAWS(stepCtx, st)
			case r.fresh.holds(st):
				outcome, detail, applyErr = r.fresh.apply(stepCtx, st.Object)
			default:
				outcome, detail, applyErr = w.runStep(stepCtx, job, r.apply, st)
				if applyErr == nil && st.Action == ActionApply && isTeamQueue(st.Object) {
					outcome, detail, applyErr = w.settleTeamQueue(stepCtx, r, st.Object, outcome, detail)
				}
			}
			cancel()
		}
		if applyErr != nil {
			if err := w.Store.StepFailed(sctx, job.ID, w.Owner, seq, r.names[seq], applyErr.Error(), w.now()); err != nil {
				return true, err
			}
			if r.ctx.Err() != nil {
				// The step was cut short by a shutdown, not by the cluster.
				return true, w.handBackRun(sctx, r)
			}
			return true, w.settleRun(sctx, r, stop{retry: !IsPermanent(applyErr), err: applyErr})
		}
		r.fresh.saw(st, outcome)
		if rs, ok := w.Store.(AWSRecorder); ok && rec != nil {
			rec.ConnectionID = job.ConnectionID
			if err := rs.RecordAWSResource(sctx, job.ID, w.Owner, *rec, w.now()); err != nil {
				return true, err
			}
		}
		if err := w.Store.StepFinished(sctx, job.ID, w.Owner, seq, r.names[seq], string(outcome), detail, w.now()); err != nil {
			return true, err
		}
		r.log.Debug("step done", "step", seq, "name", r.names[seq], "outcome", string(outcome))
		if w.AfterStep != nil {
			if err := w.AfterStep(seq); err != nil {
				r.died = true
				return true, err
			}
		}
		r.next++
	}
	return false, nil
}

// complete ends an attempt whose steps are all done: the job succeeds.
func (w *Worker) complete(sctx context.Context, r *jobRun) error {
	r.release()
	if err := w.Store.CompleteJob(sctx, r.job.ID, w.Owner, w.now()); err != nil {
		if te := (*workflow.TransitionError)(nil); errors.As(err, &te) {
			return w.settle(sctx, r.job, r.log, stop{err: err})
		}
		return err
	}
	w.succeeded(r)
	return nil
}

// succeeded logs that r's job succeeded.
func (w *Worker) succeeded(r *jobRun) {
	r.log.Info("job succeeded", "kind", r.job.Kind, "steps", len(r.steps), "dry_run", r.dry, "plan_hash", r.hash)
}

// settleRun is settle for a run, its lease released first.
func (w *Worker) settleRun(sctx context.Context, r *jobRun, s stop) error {
	r.release()
	return w.settle(sctx, r.job, r.log, s)
}

// handBackRun is handBack for a run stopping before step r.next (before
// its first step when its steps are not known yet), its lease released
// first.
func (w *Worker) handBackRun(sctx context.Context, r *jobRun) error {
	r.release()
	if r.next >= len(r.names) {
		now := w.now()
		r.log.Info("worker stopping; job handed back before its first step")
		return w.Store.RetryJob(sctx, r.job.ID, w.Owner, now, "interrupted before its first step: the worker stopped", now)
	}
	return w.handBack(sctx, r.job, r.log, r.next, r.names[r.next])
}

// steps are what a job does, and the hash recorded as the plan it ran: a
// provisioning job applies the plan of the approved version (only the one
// an approver pinned, when one was); a revocation job runs the plan's
// RevocationPlan, in the settings' mode; an amend job runs AmendSteps to
// the plan of its version (pinned likewise, and recorded as the plan it
// ran).
func (w *Worker) steps(ctx context.Context, job workflow.Job) ([]Step, string, error) {
	plan, err := w.Plans(ctx, job.ConnectionID, job.Version)
	if job.Kind == workflow.JobRevoke {
		if err != nil {
			return nil, "", err
		}
		if plan.Slurm != nil {
			s := RevocationPlan(plan, plan.OnRevoke)
			return s, StepsHash(s), nil
		}
		if plan, err = w.teamQueue(ctx, plan, false); err != nil {
			return nil, "", err
		}
		mode := plan.OnRevoke
		if mode == RevokeDelete && job.AdoptNamespace != "" && job.AdoptNamespace == plan.Namespace {
			// An adopted namespace existed before the connection, with
			// whatever runs there: revocation locks it, never deletes it.
			mode = RevokeLock
		}
		s := RevocationPlan(plan, mode)
		return s, StepsHash(s), nil
	}
	if err != nil {
		return nil, "", err
	}
	if job.Kind == workflow.JobHold {
		// A hold job sets the stopPolicy of the approved plan's queues
		// (hold.go); it is not pinned, as it applies no plan.
		if job.StopPolicy == "" {
			return nil, "", permanent(fmt.Errorf("provision: hold job %d names no stopPolicy", job.ID))
		}
		if plan.Slurm != nil {
			// The job limit of the team's accounts (slurmhold.go): its
			// version's, and an amendment's that renames it.
			plans, err := w.slurmHoldPlans(ctx, job, plan.Slurm)
			if err != nil {
				return nil, "", err
			}
			s := SlurmHoldSteps(plans, job.StopPolicy)
			return s, StepsHash(s), nil
		}
		s := HoldSteps(plan, job.StopPolicy)
		if len(s) == 0 {
			return nil, "", permanent(fmt.Errorf("provision: the plan of version %d has no Kueue queue to hold", job.Version))
		}
		// The queues' API version must be served, as a provisioning job
		// checks its plan's (Preflight): on a cluster whose Kueue is older
		// the job fails at once, naming the add-on version needed.
		if w.Preflight != nil && !w.DryRun {
			queues := Plan{ConnectionID: plan.ConnectionID, Namespace: plan.Namespace}
			for _, st := range s {
				queues.Objects = append(queues.Objects, st.Object)
			}
			if err := w.Preflight(ctx, queues); err != nil {
				return nil, "", fmt.Errorf("provision: before holding: %w", err)
			}
		}
		return s, StepsHash(s), nil
	}
	hash, err := w.checkPlan(ctx, job, plan)
	if err != nil {
		return nil, "", err
	}
	if plan.Slurm != nil {
		// One step, slurmprov.Apply, for provisioning, re-apply and
		// amendment alike: it adds, restores and removes what differs
		// from the plan (an amendment's dropped members included); an
		// amendment renaming the account or QoS then retires the old ones
		// (AmendSteps: SlurmAmendSteps).
		if job.Kind == workflow.JobAmend {
			s, err := w.amendSteps(ctx, job, plan)
			return s, hash, err
		}
		return ApplySteps(plan), hash, nil
	}
	if plan, err = w.teamQueue(ctx, plan, true); err != nil {
		return nil, "", err
	}
	if err := w.checkNamespace(ctx, job, plan, w.namespaceChecker()); err != nil {
		return nil, "", err
	}
	plan = plan.Adopting(job.AdoptNamespace)
	if job.Kind == workflow.JobReapply {
		return ReapplySteps(plan), hash, nil
	}
	if job.Kind == workflow.JobAmend {
		// The amended version's plan, checked above like a provisioning
		// job's (pinned hash, preflight, namespace), then the removal of
		// what the approved version's plan has and it does not.
		s, err := w.amendSteps(ctx, job, plan)
		return s, hash, err
	}
	return ApplySteps(plan), hash, nil
}

// teamQueue is plan with its team ClusterQueue rebuilt (TeamQueue), or
// plan as it is without one.
func (w *Worker) teamQueue(ctx context.Context, plan Plan, withSelf bool) (Plan, error) {
	if w.TeamQueue == nil {
		return plan, nil
	}
	return w.TeamQueue(ctx, plan, withSelf)
}

// checkPlan checks the plan of a provisioning, re-apply or amend job
// before anything is applied, and returns its hash: the plan must be the
// one an approver pinned, when one was, and pass Preflight.
func (w *Worker) checkPlan(ctx context.Context, job workflow.Job, plan Plan) (string, error) {
	hash := plan.Hash()
	if job.PlanHash != "" && job.PlanHash != hash {
		return "", permanent(fmt.Errorf(
			"provision: the plan (%s) is not the one approved (%s): the cluster settings changed since the approval", hash, job.PlanHash))
	}
	if w.Preflight != nil && !w.DryRun && plan.Slurm == nil {
		if err := w.Preflight(ctx, plan); err != nil {
			return "", fmt.Errorf("provision: before applying: %w", err)
		}
	}
	return hash, nil
}

// namespaceChecker is Apply when it reads namespaces and the worker does
// not run dry; else nil (no check).
func (w *Worker) namespaceChecker() NamespaceChecker {
	if nc, ok := w.Apply.(NamespaceChecker); ok && !w.DryRun {
		return nc
	}
	return nil
}

// checkNamespace refuses, before the job's first step (AWS ones
// included), a foreign namespace nobody adopted; Apply checks again at the
// namespace step itself. nc reads the namespace (nil: no check).
func (w *Worker) checkNamespace(ctx context.Context, job workflow.Job, plan Plan, nc NamespaceChecker) error {
	if nc == nil {
		return nil
	}
	c, err := nc.CheckNamespace(ctx, plan)
	if err != nil {
		return fmt.Errorf("provision: before applying: %w", err)
	}
	if c.Foreign && job.AdoptNamespace != plan.Namespace {
		return fmt.Errorf("provision: before applying: %w", foreignNamespaceError(plan.Namespace, plan.Team))
	}
	return nil
}

// teamQueueRechecks bounds settleTeamQueue's rounds: each is one read of
// the team's connections and, when they changed, one apply.
const teamQueueRechecks = 3

// settleTeamQueue runs after the team's ClusterQueue (applied, as the
// job's steps built it from the store) was applied: it reads the team's
// counted connections again and applies the queue again while what it
// applied is not what the store sums now. Two jobs of one team (any
// replica's: no process lock orders them) each read the store before
// applying; without this, the job whose read came before the other's
// change but whose apply came after it would leave the older sum on the
// cluster. The job that changed the store applies after its change, and a
// job that applied after that apply sees the change here, so the last
// apply on the cluster is of a read made after every change it followed
// (issue 31 item 6's review). The step's detail says when it re-applied.
func (w *Worker) settleTeamQueue(ctx context.Context, r *jobRun, applied Object, outcome Outcome, detail string) (Outcome, string, error) {
	if w.TeamQueue == nil {
		return outcome, detail, nil
	}
	for range teamQueueRechecks {
		plan, err := w.Plans(ctx, r.job.ConnectionID, r.job.Version)
		if err != nil {
			return outcome, detail, err
		}
		// A revocation's queue is the others' sum (steps: withSelf false).
		if plan, err = w.TeamQueue(ctx, plan, r.job.Kind != workflow.JobRevoke); err != nil {
			return outcome, detail, err
		}
		i := slices.IndexFunc(plan.Objects, isTeamQueue)
		if i < 0 || len(plan.Objects[i].TeamMembers) == 0 || equality.Semantic.DeepEqual(plan.Objects[i].Obj.Object, applied.Obj.Object) {
			return outcome, detail, nil
		}
		now := plan.Objects[i]
		// w.Apply, not r.apply: a re-apply batch's applier answers from
		// a snapshot taken before this job applied, which would call the
		// newer queue Unchanged without applying it.
		if outcome, detail, err = w.runStep(ctx, r.job, w.Apply, Step{Action: ActionApply, Object: now}); err != nil {
			return outcome, detail, err
		}
		detail = fmt.Sprintf("%s (re-applied: the team's connections changed while this job ran; it now sums connections %s)", detail, now.Obj.GetAnnotations()[AnnotationTeamConnections])
		applied = now
	}
	return outcome, detail, nil
}

// runStep runs one step on the cluster: an apply with Apply, any other
// action with Apply's RevocationApplier side.
func (w *Worker) runStep(ctx context.Context, job workflow.Job, apply StepApplier, st Step) (Outcome, string, error) {
	switch st.Action {
	case ActionApply:
		return apply.ApplyObject(ctx, st.Object)
	case ActionNone:
		return Absent, st.Detail, nil
	case ActionSlurmApply, ActionSlurmRevoke, ActionSlurmRetire:
		return w.runSlurm(ctx, st)
	case ActionSlurmHold, ActionSlurmDrain:
		return w.runSlurmHold(ctx, st)
	}
	r, ok := apply.(RevocationApplier)
	if !ok {
		return Failed, "", permanent(fmt.Errorf("provision: job %d: the worker's applier (%T) cannot %s objects", job.ID, apply, st.Action))
	}
	return r.RunStep(ctx, st)
}

// settle records how an attempt ended: a retry with backoff for a transient
// error with attempts left, else the job's failure.
func (w *Worker) settle(sctx context.Context, job workflow.Job, log *slog.Logger, s stop) error {
	now := w.now()
	if s.retry && job.Attempts < w.maxAttempts() {
		at := now.Add(w.backoff(job.Attempts))
		log.Warn("attempt failed; retrying", "error", s.err.Error(), "not_before", at)
		return w.Store.RetryJob(sctx, job.ID, w.Owner, at, s.err.Error(), now)
	}
	msg := s.err.Error()
	if s.retry {
		msg = fmt.Sprintf("gave up after %d attempts: %s", job.Attempts, msg)
	}
	log.Error("job failed", "error", msg)
	return w.Store.FailJob(sctx, job.ID, w.Owner, msg, now)
}

// handBack returns a job to the queue, due now, when the worker stops
// before step seq: the next worker resumes it at once. The attempt counts.
func (w *Worker) handBack(sctx context.Context, job workflow.Job, log *slog.Logger, seq int, name string) error {
	log.Info("worker stopping; job handed back", "next_step", seq)
	now := w.now()
	return w.Store.RetryJob(sctx, job.ID, w.Owner, now, fmt.Sprintf("interrupted at step %d (%s): the worker stopped", seq+1, name), now)
}

func orNone(s string) string {
	if s == "" {
		return "none recorded"
	}
	return s
}

// Run claims and runs jobs until ctx is done, waiting PollInterval when the
// queue is empty or the store fails. A cancelled ctx stops it between steps:
// the current job is handed back to the queue.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.check(); err != nil {
		return err
	}
	poll := orDefault(w.PollInterval, DefaultPollInterval)
	for ctx.Err() == nil {
		did, err := w.RunOnce(ctx)
		if err != nil {
			w.log().Error("provisioning worker", "error", err.Error())
		}
		if did && err == nil {
			continue // drain the queue before waiting
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
	return nil
}
