// Package provision turns an approved connection contract into Kubernetes
// and AWS objects: pure builder functions produce the desired objects (a
// plan that can be printed and diffed), and idempotent steps apply them
// through client-go (server-side apply) and aws-sdk-go-v2, recorded in
// durable jobs.
//
// Ownership: with a compute quota (ClusterSettings.ClusterQueueManagedByPortal
// false), HyperPod task governance creates and owns the team namespace
// hyperpod-ns-<team> and its LocalQueue (Owner). The portal waits for the
// namespace and server-side applies only its own labels to it without
// force, never writes the queue (it only checks it exists), refuses a
// contract naming another namespace, and revocation removes access, then
// the portal's objects, then the compute quota, leaving both to HyperPod.
// The drift check (DriftOf, DriftAllOf) reads the cluster and, through an
// AWSDrifter, the plan's AWS resources; re-applying the plan fixes both.
// The cluster is read with one list per kind for many plans at once
// (Snapshot) and compared in memory (Covers): only what differs or is
// missing costs a request of its own (snapshot.go), for the drift check
// and for the re-apply jobs the worker runs together (ForPlans,
// reapplybatch.go) alike.
//
// The team's ClusterQueue (ClusterQueueManagedByPortal true) is one per
// team and cluster, shared by the team's connections (teamqueue.go): it
// sums their guarantees and selects their namespaces by team label, carries
// the team's labels (Object.Team), and each job rebuilds it from the store
// when it runs (Worker.TeamQueue, TeamQueuesFrom); the last connection's
// revocation deletes it. Plan hashes name it without its body.
//
// Admission rules (admission.go): every plan holds the contract's rules
// for the API server itself to enforce, with Kubernetes'
// ValidatingAdmissionPolicy: one policy and one binding per roll-out mode
// (ClusterSettings.AdmissionMode: warn, audit, deny), shared by every
// team, and the team's values in a ConfigMap in its namespace, which
// revocation deletes. The contract's approved workload types map to
// Kubernetes kinds in one table (kinds.go), which rule 3 of the policy,
// the submitter Role and the access role's EKS access policies follow.
// Rule 5 (admission_accel.go: accelerators only on the guaranteed instance
// types) adds its own variables and validation. The readiness checks
// (readiness_admission.go) read Kueue's configuration (are jobs without a
// queue name managed?) and the API server's counts of the policy's
// warnings and denials from its /metrics. The connection's exceptions in
// effect (exception.go, workflow's Exception) add their priority classes
// to that ConfigMap (Plan.WithExceptions, PlansWithExceptions) without
// changing the plan's Hash.
//
// Amendments: DiffPlans compares the plan of a connection's approved
// version with the plan of its amended one (what is created, updated,
// deleted, kept), ignoring the contract version and hash each version
// stamps; what it deletes follows revocation's rules and order.
//
// Jobs: a provisioning job applies the approved version's plan
// (ApplySteps), a reapply job re-applies it and prunes extra RoleBindings
// (ReapplySteps), a revocation job runs its RevocationPlan, and an amend job
// changes a live connection in place (AmendSteps): the amended version's
// plan applied as provisioning applies it, then the removal of what only the
// approved version's plan has (AmendRemovals: DiffPlans' DeleteSteps).
//
// It may import internal/workflow (the approved contract is its input); it
// must never import internal/web or internal/views.
package provision
