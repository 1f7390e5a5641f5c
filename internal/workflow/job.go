package workflow

// JobKind is what a provisioning job does to a connection's objects. Jobs
// are queued by the effects of commands (an approval queues provision, a
// revocation revoke, a drift fix reapply) and run by internal/provision;
// internal/store keeps them.
type JobKind string

// The job kinds.
const (
	JobProvision JobKind = "provision"
	JobRevoke    JobKind = "revoke"
	JobReapply   JobKind = "reapply"
	// JobScheduler is a cluster job, not a connection's: it reconciles the
	// cluster's HyperPod task governance scheduler config with the
	// portal's settings (an admin queues it on /admin/scheduler).
	JobScheduler JobKind = "scheduler"
)
