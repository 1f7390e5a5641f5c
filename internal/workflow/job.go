package workflow

import (
	"errors"
	"fmt"
	"time"
)

// JobKind is what a provisioning job does to a connection's objects. Jobs
// are queued by the effects of commands (an approval queues provision, a
// revocation revoke, a drift fix reapply) and run by internal/provision;
// internal/store keeps them.
type JobKind string

// The job kinds.
const (
	JobProvision JobKind = "provision"
	// JobRevoke jobs run the revocation plan of the approved version's
	// plan: the store moved the connection to revoking when it queued one,
	// and completing it moves it to revoked.
	JobRevoke JobKind = "revoke"
	// JobReapply jobs re-apply the approved version's plan to a live
	// connection and prune RoleBindings beyond it (the fix for drift).
	JobReapply JobKind = "reapply"
	// JobAmend applies an approved amendment in place: its version's plan,
	// and the removal of what the approved version's plan had and the new
	// one does not.
	JobAmend JobKind = "amend"
	// JobScheduler is a cluster job, not a connection's: it reconciles the
	// cluster's HyperPod task governance scheduler config with the
	// portal's settings (an admin queues it on /admin/scheduler).
	JobScheduler JobKind = "scheduler"
	// JobHold server-side applies the Kueue stopPolicy of a live
	// connection's hold (Job.StopPolicy) to its LocalQueue, and to its
	// ClusterQueue when the portal manages it (see hold.go).
	JobHold JobKind = "hold"
)

// JobState is where a job is in the queue.
type JobState string

// The job states. succeeded and failed are final.
const (
	JobQueued    JobState = "queued"
	JobRunning   JobState = "running"
	JobSucceeded JobState = "succeeded"
	JobFailed    JobState = "failed"
)

// StepState is where one step of a job is.
type StepState string

// The step states.
const (
	StepPending StepState = "pending"
	StepRunning StepState = "running"
	StepDone    StepState = "done"
	StepFailed  StepState = "failed"
)

// ErrLeaseLost: a worker no longer holds the job it runs: its lease was
// taken over by another worker after it expired, or the job is no longer
// running. The store returns it (wrapped) from every write on such a job;
// the worker's heartbeat stops the running step with it.
var ErrLeaseLost = errors.New("store: job lease lost")

// ErrStepsNotDone is the readiness gate: a job completes only when every
// step of its plan is done (CheckReady).
var ErrStepsNotDone = errors.New("store: complete job: not every step is done")

// ErrJobOpen refuses to queue a job while the connection has an
// unfinished job of that kind.
var ErrJobOpen = errors.New("store: the connection already has an unfinished job of this kind")

// Job is one durable unit of provisioning work on a connection: the store
// keeps it (jobs table), the provisioning worker claims and runs it.
type Job struct {
	ID           int64
	ConnectionID int64  // 0 for a cluster job (JobScheduler)
	Cluster      string // a cluster job's cluster (its ARN); "" for a connection's job
	Kind         JobKind
	Version      int // the contract version the job applies
	// PlanHash is the plan an approver pinned; "" when not pinned. A pinned
	// job refuses to apply any other plan. AppliedPlanHash is the plan the
	// last attempt ran.
	PlanHash        string
	AppliedPlanHash string
	// AdoptNamespace is the existing namespace an admin adopted when
	// approving the job's version ("" for none): the only foreign namespace
	// the job may take over.
	AdoptNamespace string
	// FromVersion, for an amend job, is the approved version the amendment
	// replaces (0 otherwise).
	FromVersion int
	// StopPolicy, for a hold job, is the stopPolicy it applies.
	StopPolicy string
	State      JobState
	Attempts   int // claims so far, this one included
	Steps      int // steps of the applied plan
	LeaseOwner string
	LeaseUntil time.Time // zero unless running
	NotBefore  time.Time
	LastError  string
	DryRun     bool
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// PreviousOwner is set by a claim only: the worker whose expired lease
	// this claim took over ("" for a queued job).
	PreviousOwner string
}

// JobStart is an attempt's start as the worker records it: the plan the
// job runs, its hash and its steps' names.
type JobStart struct {
	JobID    int64
	PlanHash string
	Steps    []string
}

// JobStep is one step of a job: one plan object (or AWS call), in apply
// order.
type JobStep struct {
	JobID      int64
	Seq        int
	Name       string
	State      StepState
	Outcome    string
	Detail     string
	Attempts   int
	StartedAt  time.Time // zero until first started
	FinishedAt time.Time // zero unless done or failed
}

// CheckLease is the rule of every write on a job by the worker that runs
// it: the job is running and owner holds its lease. Otherwise
// ErrLeaseLost: the lease was taken over after it expired, or the job
// ended meanwhile, and the worker must stop without writing anything else.
func (j Job) CheckLease(owner string) error {
	if j.State != JobRunning || j.LeaseOwner != owner {
		return fmt.Errorf("%w: job %d is %s, leased to %q, not %q", ErrLeaseLost, j.ID, j.State, j.LeaseOwner, owner)
	}
	return nil
}

// CheckReady is the readiness gate of a job's completion: its plan has
// steps and every one of them is done (done: how many of the plan's steps
// are). ErrStepsNotDone otherwise.
func (j Job) CheckReady(done int) error {
	if j.Steps == 0 || done != j.Steps {
		return fmt.Errorf("%w: %d of %d steps done", ErrStepsNotDone, done, j.Steps)
	}
	return nil
}
