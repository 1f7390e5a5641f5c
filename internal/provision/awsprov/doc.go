// Package awsprov holds the AWS half of provisioning: what a contract needs
// on AWS, as calls a plan carries (PlanFor: compute quota, Studio domain and
// Identity Center assignments or a Unified Studio connection, EKS access
// entries scoped to the team namespace, Pod Identity), and the steps that
// make them through the real aws-sdk-go-v2 clients (Runner, and Ensure* /
// Delete* per resource). Each step is idempotent (look up, then create or
// update) so that a job retried after a crash or a throttling storm never
// creates a resource twice; IsPermanent tells the errors retrying cannot fix.
//
// Ownership (ownership.go): the steps tag what they create with
// TagConnection and check the tag before they update or delete (EKS access
// entries: their Tags; compute quotas and domains: SageMaker ListTags). What
// another connection or a person made is a permanent *NotOursError, left as
// it is and recorded as kept on revocation; a compute quota for the team
// made outside the portal is a *ForeignQuotaError until an admin adopts it
// (AdoptComputeQuota). Runner.Drift compares the calls' resources with AWS,
// read-only, for the drift check.
//
// It also resolves Identity Center groups (the login's GroupSource is bound
// to UserGroups in cmd/portal) and reconciles the cluster's task-governance
// scheduler config (EnsureSchedulerConfig, from the admins' page). For the
// readiness page it reads, never changes, the HyperPod and EKS clusters
// and their add-ons (cluster.go) and the VPC endpoints of the EKS
// cluster's VPC (vpcendpoints.go).
//
// Actions lists every IAM action the steps call: the one source of `portal
// iam-policy`. Package awstest has the local endpoints the tests run the
// clients against.
//
// It may import internal/workflow only (provision imports it, not the other
// way round).
package awsprov
