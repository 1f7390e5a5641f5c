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
	// JobAmend applies an approved amendment in place: its version's plan,
	// and the removal of what the approved version's plan had and the new
	// one does not.
	JobAmend JobKind = "amend"
)
