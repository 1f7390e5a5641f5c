// Package workflow is the portal's domain: who a principal is, what they may
// do, and the connection contract a team and the platform agree on, through
// its whole life.
//
//   - Principal (principal.go): roles and team memberships from the identity
//     provider's groups.
//   - Contract (contract.go): one version of a connection contract, with its
//     typed enums, each with Valid, Label and a Choices list for forms.
//     Normalize gives the canonical form; Validate (validate.go) checks every
//     rule and returns FieldErrors, user input errors kept apart from system
//     errors, keyed by JSON path ("scheduling.guaranteed[0].count") with
//     FieldLabel for people. ValidationEnv brings in what lies outside the
//     contract: the clock, the configured instance types, and the store's
//     answers to "does this owner exist" and "is this namespace taken".
//   - The field table (fields.go, fieldkit.go): the one list of the
//     contract's fields. Each row is built from an accessor of one Contract
//     field and gives it its label (Diff, FieldLabel), its tidying
//     (Normalize, Validate), its size caps (Limits) and its form codec:
//     input name and kind, help and example, and the functions between the
//     contract and the form's raw values (Fields, FieldFor). README "Adding
//     a contract field" lists what a new field takes.
//   - Limits (limits.go): the size cap of every text and list of the
//     contract, in one table that validation (LimitErrors, which drafts must
//     pass too, and Validate), the form's help and the README read, and
//     MaxVersions, the versions one connection keeps.
//   - Canonical JSON, Hash, DecodeContract and Diff (canonical.go): a
//     version's identity is the SHA-256 of its canonical JSON, approvals bind
//     to it, and Diff shows two versions field by field.
//   - Lifecycle (lifecycle.go): Transition is the state machine, a pure
//     function of state, event and time; the decisions the mission leaves
//     open are written beside the transitions table. Amendments (amend.go):
//     a live connection's change request has a lifecycle of its own
//     (AmendTransition), driven by the same events, while the connection
//     keeps running on its approved version.
//   - Commands (effect.go, commands.go, jobevents.go): every change to a
//     connection (Create, Edit, Submit, Withdraw, SendBack, Approve, Revoke,
//     QueueJob, PersonTransition, the worker's OnJobStarted, OnJobCompleted,
//     OnJobFailed, and the schedulers' OnReviewEvent, ScheduleMissingReview
//     and EndDateReached) is a pure function of the connection as it is (Conn), the actor, the
//     input, the facts its rules need and the clock, returning an Effect:
//     the next state, the version, decision and job to record, the audit
//     events and the notifications; or the refusal (the Err* values,
//     *StaleError, *TransitionError, *AmendmentError). internal/store loads
//     the facts and applies the effect in one transaction; nothing else
//     decides a connection's state.
//   - Policy (policy.go): Decide is the authorization policy, a pure
//     function of principal, action and object, including the separation of
//     duties around approval (ApprovalsNeeded).
//   - Exceptions (exception.go): who may grant a live connection a
//     time-bound exception from its contract (MayDecideException: its
//     exception owner or an admin, never someone of the team), the grant's
//     limits, the early revocation, and the automatic revert at the end.
//   - Capacity (capacity.go): CheckCapacity is the approval page's math,
//     guaranteed capacity against the cluster inventory per instance type.
//   - Jobs (job.go, drift.go, awsrecord.go): what internal/store keeps and
//     internal/provision works on, one type each so that neither package
//     converts the other's: a Job (its JobKind, JobState and JobSteps), a
//     DriftItem the drift check found, an AWSRecord of an AWS resource a job
//     made or removed. Job.CheckLease and Job.CheckReady are the rules
//     every write of the worker and every completion check.
//   - State sets: LiveStates (State.Live: runs on the cluster, may be
//     amended) and CommittedStates (State.Committed: holds namespaces and
//     capacity, approval until revoked), with CommittedAmendments; the
//     store builds its SQL from these lists.
//   - ExampleContract (example.go): a complete valid contract for tests and
//     form hints.
//
// Everything here is pure and can be read without knowing HTTP, SQL,
// Kubernetes or AWS: it imports only the standard library, and must never
// import internal/web, internal/views, internal/store, internal/provision,
// echo, client-go or the AWS SDK. The clock is always passed in, never read.
package workflow
