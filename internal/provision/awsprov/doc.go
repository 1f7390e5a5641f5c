// Package awsprov holds the AWS half of provisioning: what a contract needs
// on AWS, as calls a plan carries (PlanFor: compute quota, Studio domain and
// Identity Center assignments or a Unified Studio connection, EKS access
// entries scoped to the team namespace, Pod Identity), and the steps that
// make them through the real aws-sdk-go-v2 clients (Runner, and Ensure* /
// Delete* per resource). Each step is idempotent (look up, then create or
// update) so that a job retried after a crash or a throttling storm never
// creates a resource twice; IsPermanent tells the errors retrying cannot fix.
//
// It also resolves Identity Center groups (the login's GroupSource is bound
// to UserGroups in cmd/portal) and reconciles the cluster's task-governance
// scheduler config (EnsureSchedulerConfig, from the admins' page).
//
// Actions lists every IAM action the steps call: the one source of `portal
// iam-policy`. Package awstest has the local endpoints the tests run the
// clients against.
//
// It may import internal/workflow only (provision imports it, not the other
// way round).
package awsprov
