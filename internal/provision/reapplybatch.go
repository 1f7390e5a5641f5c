package provision

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Re-apply jobs in batches (issue 15, "no-op reconcile"). An admin's
// Re-apply of many connections queues one re-apply job each. Run one by
// one, each job read its namespace and listed every kind for its own plan,
// so 100 tenants cost 100 × (kinds + 1) requests where the drift checker,
// with one snapshot per batch of plans, needs one list per kind. The worker
// therefore runs the due re-apply jobs together: one snapshot of all their
// plans (the drift checker's Snapshot, snapshot.go). Each job's rows and
// audit events are those of a job run alone, so that its page and the
// audit trail read the same; when the store can (BatchRecorder), it writes
// them for all the jobs at once, a transaction for their starts, one for
// the steps the snapshot answered, one for their completions.

// ReapplyBatch bounds the re-apply jobs one worker claims and runs from
// one snapshot. It is the drift checker's batch (DriftBatch), for the same
// reasons: it bounds the objects held at once (about 20 per connection)
// and the length of the lists' label selector (a connection ID each).
const ReapplyBatch = DriftBatch

// JobBatchClaimer is a JobStore that can also claim several due jobs of
// one kind at once, in one transaction, each as ClaimJob claims one
// (*store.DB is one). Without it a re-apply job runs as a batch of one.
type JobBatchClaimer interface {
	ClaimJobs(ctx context.Context, owner string, kind workflow.JobKind, now time.Time, lease time.Duration, limit int) ([]workflow.Job, error)
}

// StepsRecorder is a JobStore that can also record several steps as run
// and done in one transaction, each as StartStep then StepFinished would
// (*store.DB is one). The worker uses it for a batch's steps that its
// snapshot answers without a request (answerer).
type StepsRecorder interface {
	StepsDone(ctx context.Context, jobID int64, owner string, steps []workflow.JobStep, now time.Time, lease time.Duration) error
}

// BatchRecorder is a JobStore that can also record many jobs' starts,
// answered steps and completions, each in one transaction, exactly as
// StartJob, StepsDone and CompleteJob record one job's (*store.DB is one).
// It may refuse a batch, writing nothing (a job whose start or completion
// does more than audit, a lost lease); the worker then records each job on
// its own, which settles each as before. The re-apply batch uses it: on
// PostgreSQL every statement is a round trip, and three transactions a job
// were most of a no-op re-apply's time (issue 15).
type BatchRecorder interface {
	StartJobs(ctx context.Context, owner string, starts []workflow.JobStart, dryRun bool, now time.Time) error
	StepsDoneAll(ctx context.Context, owner string, steps []workflow.JobStep, now time.Time, lease time.Duration) error
	CompleteJobs(ctx context.Context, owner string, ids []int64, now time.Time) error
}

// answered is the run of r's next steps that r's applier answers without
// a request (Kubernetes steps up to pause or the next AWS step, none a
// fresh namespace's), each as the step it records; none when the store
// cannot record them together (StepsRecorder) or in a dry run.
func (w *Worker) answered(r *jobRun, pause func(Step) bool) []workflow.JobStep {
	_, ok := w.Store.(StepsRecorder)
	a, ok2 := r.apply.(answerer)
	if !ok || !ok2 || w.DryRun {
		return nil
	}
	var group []workflow.JobStep
	for seq := r.next; seq < len(r.steps); seq++ {
		st := r.steps[seq]
		if st.AWS != nil || (pause != nil && pause(st)) || r.fresh.holds(st) {
			break
		}
		outcome, detail, ok := a.answer(st)
		if !ok {
			break
		}
		group = append(group, workflow.JobStep{JobID: r.job.ID, Seq: seq, Name: r.names[seq], Outcome: string(outcome), Detail: detail})
	}
	return group
}

// runAnswered records, in one transaction, r's answered steps (answered),
// when there are some; it calls AfterStep after each as runSteps does. ran
// says it recorded some; err (the attempt then ended) is the store's or
// AfterStep's.
func (w *Worker) runAnswered(sctx context.Context, r *jobRun, pause func(Step) bool) (ran bool, err error) {
	group := w.answered(r, pause)
	if len(group) == 0 {
		return false, nil
	}
	if err := w.Store.(StepsRecorder).StepsDone(sctx, r.job.ID, w.Owner, group, w.now(), w.lease()); err != nil {
		return true, err
	}
	for _, s := range group {
		r.stepDone(s)
		if w.AfterStep != nil {
			if err := w.AfterStep(s.Seq); err != nil {
				r.died = true
				return true, err
			}
		}
	}
	return true, nil
}

// stepDone notes that step s of r is recorded done: r goes on after it.
func (r *jobRun) stepDone(s workflow.JobStep) {
	r.log.Debug("step done", "step", s.Seq, "name", s.Name, "outcome", s.Outcome)
	r.next = s.Seq + 1
}

// batchRecorder is the store as a BatchRecorder when the worker may record
// jobs together: not with AfterStep set (a test's crash after a given
// step must find the steps before it recorded one job at a time).
func (w *Worker) batchRecorder() (BatchRecorder, bool) {
	br, ok := w.Store.(BatchRecorder)
	return br, ok && w.AfterStep == nil
}

// startAll starts the live jobs, in one transaction when the store can
// (BatchRecorder), else, or when it refuses, each on its own (start). It
// returns the jobs that started; end gets each that did not.
func (w *Worker) startAll(sctx context.Context, live []*jobRun, end func(*jobRun, error) bool) []*jobRun {
	if br, ok := w.batchRecorder(); ok && len(live) > 1 {
		starts := make([]workflow.JobStart, len(live))
		for i, r := range live {
			starts[i] = workflow.JobStart{JobID: r.job.ID, PlanHash: r.hash, Steps: r.names}
		}
		err := br.StartJobs(sctx, w.Owner, starts, w.DryRun, w.now())
		if err == nil {
			return live
		}
		w.log().Info("starting the re-apply jobs one by one", "jobs", len(live), "reason", err.Error())
	}
	started := live[:0]
	for _, r := range live {
		if ended, err := w.start(sctx, r); ended {
			end(r, err)
			continue
		}
		started = append(started, r)
	}
	return started
}

// answerAll records the answered steps (answered) of every live job in one
// transaction when the store can (BatchRecorder) and more than one job has
// some. When it cannot, or the store refuses, it records nothing: each
// job's runSteps then records its own (runAnswered).
func (w *Worker) answerAll(sctx context.Context, live []*jobRun, pause func(Step) bool) {
	br, ok := w.batchRecorder()
	if !ok {
		return
	}
	var steps []workflow.JobStep
	ran := map[int64]*jobRun{}
	for _, r := range live {
		if r.ctx.Err() != nil {
			continue // runSteps hands it back
		}
		if group := w.answered(r, pause); len(group) > 0 {
			steps = append(steps, group...)
			ran[r.job.ID] = r
		}
	}
	if len(ran) < 2 {
		return
	}
	if err := br.StepsDoneAll(sctx, w.Owner, steps, w.now(), w.lease()); err != nil {
		w.log().Info("recording the re-apply jobs' steps one by one", "jobs", len(ran), "reason", err.Error())
		return
	}
	for _, s := range steps {
		ran[s.JobID].stepDone(s)
	}
}

// completeAll completes the jobs whose steps are all done, in one
// transaction when the store can (BatchRecorder), else, or when it
// refuses, each on its own (complete). errs[i] is runs[i]'s.
func (w *Worker) completeAll(sctx context.Context, runs []*jobRun) []error {
	errs := make([]error, len(runs))
	if br, ok := w.batchRecorder(); ok && len(runs) > 1 {
		ids := make([]int64, len(runs))
		for i, r := range runs {
			r.release()
			ids[i] = r.job.ID
		}
		err := br.CompleteJobs(sctx, w.Owner, ids, w.now())
		if err == nil {
			for _, r := range runs {
				w.succeeded(r)
			}
			return errs
		}
		w.log().Info("completing the re-apply jobs one by one", "jobs", len(runs), "reason", err.Error())
	}
	for i, r := range runs {
		errs[i] = w.complete(sctx, r)
	}
	return errs
}

// runReapplyBatch runs the re-apply job first, claimed by RunOnce, with the
// other due re-apply jobs it claims now (up to ReapplyBatch in all), when
// Apply is a SnapshotApplier:
//
//  1. each job's plan is built and checked as a single job's is (its pinned
//     hash, Preflight); a job that fails there settles on its own;
//  2. the namespace check of every job (a foreign namespace nobody adopted
//     stops a job before its first step) is answered from one snapshot:
//     when no job has an AWS step before its Kubernetes ones, that snapshot
//     is of every object the jobs' Kubernetes steps apply, and it serves
//     those steps too (nothing but the jobs' own start runs between it and
//     them); otherwise it is of the namespaces alone;
//  3. each job starts (StartJob) and runs its AWS steps up to its first
//     Kubernetes step;
//  4. then, after every job's AWS steps, one snapshot of all the jobs' next
//     Kubernetes steps is taken, at the first of those steps (never before
//     an AWS step: an AWS step can take minutes, and an object edited
//     meanwhile must not be called unchanged from an older reading), and
//     each job runs its Kubernetes steps from it up to its next AWS step;
//  5. 3 and 4 repeat while steps remain (a plan's AWS access steps come
//     after its objects, and the RoleBinding prune after them: the prune
//     gets a snapshot taken after those AWS steps).
//
// Every job has its own steps, outcomes and completion as a single job
// does; the store records them for all the jobs together when it can
// (startAll, answerAll, completeAll), else job by job. A job whose step
// fails settles (a retry or a failure) on its own; the others go on. The heartbeat renews every job's lease until the job's
// last write; a lost lease stops that job alone. A shutdown (ctx
// cancelled) hands every unfinished job back to the queue. An error from
// AfterStep stops the whole batch at once, as if the process had died.
// The error returned joins the errors that stopped jobs unsettled.
func (w *Worker) runReapplyBatch(ctx context.Context, first workflow.Job, sa SnapshotApplier) error {
	jobs := []workflow.Job{first}
	if bc, ok := w.Store.(JobBatchClaimer); ok {
		more, err := bc.ClaimJobs(ctx, w.Owner, workflow.JobReapply, w.now(), w.lease(), ReapplyBatch-1)
		if err != nil {
			// The first job is claimed: run it alone.
			w.log().Warn("claiming more re-apply jobs failed; running one", "err", err.Error())
		}
		jobs = append(jobs, more...)
	}
	sctx := context.WithoutCancel(ctx)
	held := newLeases()
	runs := make([]*jobRun, len(jobs))
	cancels := make([]context.CancelCauseFunc, len(jobs))
	for i, job := range jobs {
		log := w.jobLog(job)
		rctx, cancel := context.WithCancelCause(ctx)
		cancels[i] = cancel
		held.hold(job.ID, cancel, log)
		runs[i] = w.newRun(rctx, job, log)
		runs[i].release = func() { held.release(job.ID) }
	}
	defer func() {
		for _, c := range cancels {
			c(nil)
		}
	}()
	if len(jobs) > 1 {
		w.log().Info("re-apply jobs claimed together", "jobs", len(jobs))
	}
	stopBeat := w.heartbeat(ctx, held)
	defer stopBeat()

	var errs []error
	// end notes how a job's attempt ended; false when the batch must stop
	// now (AfterStep).
	end := func(r *jobRun, err error) bool {
		r.release() // also when a store error stopped it unsettled: its lease then expires
		if err != nil {
			errs = append(errs, leaseLostCause(r.ctx, fmt.Errorf("job %d: %w", r.job.ID, err)))
		}
		return !r.died
	}
	result := func() error { return errors.Join(errs...) }

	// 1. Plans and steps.
	var admitted []*jobRun
	for _, r := range runs {
		if ended, err := w.admit(sctx, r.job, r.log); ended {
			end(r, err)
			continue
		}
		admitted = append(admitted, r)
	}
	plans, planErrs := w.plansOf(ctx, admitted)
	var live []*jobRun
	for i, r := range admitted {
		if r.ctx.Err() != nil {
			end(r, w.handBackRun(sctx, r))
			continue
		}
		plan, err := plans[i], planErrs[i]
		hash := ""
		if err == nil {
			hash, err = w.checkPlan(r.ctx, r.job, plan)
		}
		if err != nil {
			end(r, w.notStarted(sctx, r, err))
			continue
		}
		if plan.Slurm != nil {
			// A Slurm connection has no namespace and nothing in the
			// snapshot: it runs on its own, here.
			r.setSteps(ReapplySteps(plan), hash)
			r.apply = w.Apply
			if !end(r, w.runAlone(sctx, r)) {
				return result()
			}
			continue
		}
		r.plan = plan
		r.setSteps(ReapplySteps(plan.Adopting(r.job.AdoptNamespace)), hash)
		live = append(live, r)
	}

	// 2. The namespace check, from one snapshot.
	var shared StepApplier
	if nc := w.namespaceChecker(); nc != nil && len(live) > 0 {
		awsFirst := slices.ContainsFunc(live, func(r *jobRun) bool { return len(r.steps) > 0 && r.steps[0].AWS != nil })
		plans := make([]Plan, len(live))
		for i, r := range live {
			if awsFirst {
				plans[i] = namespaceOf(r.plan)
			} else {
				plans[i] = kubeStretch(r)
			}
		}
		snapCtx, cancel := context.WithTimeout(ctx, w.stepTimeout())
		snap, err := sa.ForPlans(snapCtx, plans)
		cancel()
		if err != nil {
			err = fmt.Errorf("provision: before applying: reading the plans' objects: %w", err)
			for _, r := range live {
				end(r, w.notStarted(sctx, r, err))
			}
			return result()
		}
		if c, ok := snap.(NamespaceChecker); ok {
			nc = c
		}
		if !awsFirst {
			shared = snap
		}
		started := live[:0]
		for _, r := range live {
			if err := w.checkNamespace(r.ctx, r.job, r.plan, nc); err != nil {
				end(r, w.notStarted(sctx, r, err))
				continue
			}
			started = append(started, r)
		}
		live = started
	}
	live = w.startAll(sctx, live, end)

	// 3-5. AWS stretches, then Kubernetes stretches from one snapshot each.
	isKube := func(st Step) bool { return st.AWS == nil }
	isAWS := func(st Step) bool { return st.AWS != nil }
	// advanceAll runs each live job's steps until pause; a job that ended
	// leaves live, and the jobs whose steps are all done complete
	// together once the others have run theirs. false: the batch must
	// stop now (AfterStep).
	advanceAll := func(pause func(Step) bool) bool {
		w.answerAll(sctx, live, pause)
		next := live[:0]
		var finished []*jobRun
		completeFinished := func() {
			for i, err := range w.completeAll(sctx, finished) {
				end(finished[i], err)
			}
		}
		for _, r := range live {
			ended, err := w.runSteps(sctx, r, pause)
			switch {
			case !ended && r.done():
				finished = append(finished, r)
			case !ended:
				next = append(next, r)
			case !end(r, err):
				completeFinished()
				return false
			}
		}
		completeFinished()
		live = next
		return true
	}
	for len(live) > 0 {
		if !advanceAll(isKube) || len(live) == 0 {
			break
		}
		if shared == nil {
			plans := make([]Plan, len(live))
			for i, r := range live {
				plans[i] = kubeStretch(r)
			}
			shared = &lazySnapshot{sa: sa, plans: plans}
		}
		for _, r := range live {
			r.apply = shared
		}
		if !advanceAll(isAWS) {
			break
		}
		shared = nil // the next stretch comes after AWS steps: read again
	}
	return result()
}

// plansOf builds the plans of runs' jobs (plansOfJobs), each with its
// team's ClusterQueue recomputed (Worker.TeamQueue).
func (w *Worker) plansOf(ctx context.Context, runs []*jobRun) ([]Plan, []error) {
	plans, errs := w.plansOfJobs(ctx, runs)
	if w.TeamQueue == nil {
		return plans, errs
	}
	for i, r := range runs {
		if errs[i] == nil && r.ctx.Err() == nil {
			plans[i], errs[i] = w.TeamQueue(r.ctx, plans[i], true)
		}
	}
	return plans, errs
}

// plansOfJobs builds the plans of runs' jobs: all at once with PlansAll
// when the worker has it and it answers, else each with Plans.
func (w *Worker) plansOfJobs(ctx context.Context, runs []*jobRun) ([]Plan, []error) {
	if w.PlansAll != nil && len(runs) > 1 {
		refs := make([]ConnVersion, len(runs))
		for i, r := range runs {
			refs[i] = ConnVersion{r.job.ConnectionID, r.job.Version}
		}
		plans, errs, err := w.PlansAll(ctx, refs)
		if err == nil && len(plans) == len(runs) && len(errs) == len(runs) {
			return plans, errs
		}
		w.log().Info("planning the re-apply jobs one by one", "jobs", len(runs), "reason", fmt.Sprint(err))
	}
	plans, errs := make([]Plan, len(runs)), make([]error, len(runs))
	for i, r := range runs {
		if r.ctx.Err() == nil {
			plans[i], errs[i] = w.Plans(r.ctx, r.job.ConnectionID, r.job.Version)
		}
	}
	return plans, errs
}

// notStarted ends the attempt of a job that failed before it started: it
// is handed back when the worker is stopping, else settled.
func (w *Worker) notStarted(sctx context.Context, r *jobRun, err error) error {
	if r.ctx.Err() != nil {
		return w.handBackRun(sctx, r)
	}
	return w.settleRun(sctx, r, stop{retry: !IsPermanent(err), err: err})
}

// namespaceOf is the part of p the namespace check reads: its Namespace
// object alone (no RoleBindings, no other kind).
func namespaceOf(p Plan) Plan {
	out := Plan{ConnectionID: p.ConnectionID, Team: p.Team}
	for _, o := range p.Objects {
		if o.Kind == "Namespace" && o.Name == p.Namespace {
			out.Objects = append(out.Objects, o)
		}
	}
	return out
}

// kubeStretch is what r's Kubernetes steps from r.next up to its next AWS
// step read: the objects they apply, and the namespace whose RoleBindings
// a prune step removes.
func kubeStretch(r *jobRun) Plan {
	p := Plan{ConnectionID: r.job.ConnectionID, Team: r.plan.Team}
	for _, st := range r.steps[r.next:] {
		if st.AWS != nil {
			break
		}
		switch st.Action {
		case ActionApply:
			p.Objects = append(p.Objects, st.Object)
		case ActionPrune:
			p.Namespace = st.Object.Namespace
		}
	}
	return p
}

// lazySnapshot is the StepApplier of a stretch of Kubernetes steps of a
// batch's jobs: it takes the snapshot of their plans
// (SnapshotApplier.ForPlans) when the first of those steps runs, and runs
// that step and the others from it. A failed snapshot fails that step; the
// next step tries again.
type lazySnapshot struct {
	sa    SnapshotApplier
	plans []Plan
	steps StepApplier // nil until the first step
}

func (l *lazySnapshot) get(ctx context.Context) (StepApplier, error) {
	if l.steps == nil {
		a, err := l.sa.ForPlans(ctx, l.plans)
		if err != nil {
			return nil, fmt.Errorf("provision: reading the plan's objects before re-applying: %w", err)
		}
		l.steps = a
	}
	return l.steps, nil
}

// ApplyObject applies o from the snapshot, taken now if not yet.
func (l *lazySnapshot) ApplyObject(ctx context.Context, o Object) (Outcome, string, error) {
	a, err := l.get(ctx)
	if err != nil {
		return Failed, "", err
	}
	return a.ApplyObject(ctx, o)
}

// answer is the snapshot's answer to st once it is taken (before, none:
// the stretch's first step takes it).
func (l *lazySnapshot) answer(st Step) (Outcome, string, bool) {
	if a, ok := l.steps.(answerer); ok {
		return a.answer(st)
	}
	return "", "", false
}

// RunStep runs st from the snapshot, taken now if not yet.
func (l *lazySnapshot) RunStep(ctx context.Context, st Step) (Outcome, string, error) {
	a, err := l.get(ctx)
	if err != nil {
		return Failed, "", err
	}
	r, ok := a.(RevocationApplier)
	if !ok {
		return Failed, "", permanent(fmt.Errorf("provision: the re-apply applier (%T) cannot %s objects", a, st.Action))
	}
	return r.RunStep(ctx, st)
}
