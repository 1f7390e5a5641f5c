package provision

import (
	"context"
	"fmt"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// AmendSteps are the steps of an amendment job (workflow.JobAmend), which
// changes a live connection in place from the plan of its approved version
// (old) to the plan of the amended one (new):
//
//  1. the new plan, applied exactly as a provisioning job applies it
//     (ApplySteps): the compute quota first, updated in place with
//     UpdateComputeQuota and the TargetVersion it read
//     (awsprov.EnsureComputeQuota), then every object server-side applied
//     (an existing object is updated in place, an unchanged one is not
//     written), then the access calls (access entries' groups and policies,
//     the Pod Identity association's role, updated in place);
//  2. the removal of what the old plan has and the new one does not
//     (AmendRemovals): a dropped egress rule's NetworkPolicy, the access
//     entry of a role the contract no longer names.
//
// Every step is idempotent, as a provisioning job's: a resumed attempt runs
// them all again, and what an earlier attempt did is found done (an apply
// Unchanged, a quota already at the desired config is not updated again, a
// deleted object is Absent). A Slurm plan's amendment is SlurmAmendSteps.
// AmendSteps is pure.
func AmendSteps(old, new Plan) []Step {
	if new.Slurm != nil {
		return SlurmAmendSteps(old, new)
	}
	return append(ApplySteps(new), AmendRemovals(old, new)...)
}

// AmendRemovals are the steps that remove what old has and new does not:
// DiffPlans(old, new).DeleteSteps(), which identifies objects by group,
// kind, namespace and name and AWS resources as their APIs do, and follows
// the rules revocation follows (RevocationPlan), restricted to what an
// amendment may remove:
//
//   - shared objects (WorkloadPriorityClasses, ResourceFlavors) are never
//     removed: other teams use them;
//   - objects HyperPod task governance owns (Object.Owner: the team
//     namespace and LocalQueue) are never removed by the portal: they go
//     with the compute quota;
//   - the namespace is never removed (it holds the team's work; an
//     amendment cannot change it, workflow refuses);
//   - an AWS resource kept on revocation (a team domain with
//     studio.on_revoke keep) is kept;
//   - each Kubernetes object is deleted with ActionDelete, which deletes it
//     only while it carries the portal's managed-by label and this
//     connection's label (Applier.Delete: anything else of that name is
//     Kept, a missing one is Absent);
//   - AWS resources go through the runner's Remove, which leaves what this
//     connection did not make (NotOursError: Kept);
//   - the order is revocation's: access first (Pod Identity, access
//     entries), then the Kubernetes objects in revocationOrder (RoleBindings
//     and the rest of access, queues, quotas, defaults, network policies),
//     then the other AWS resources (awsprov.RevocationOrder).
//
// An access entry is keyed by its principal: EKS cannot change the
// principal of an entry (UpdateAccessEntry names it in the URI and takes
// only kubernetesGroups and username in the body; API_UpdateAccessEntry,
// https://docs.aws.amazon.com/eks/latest/APIReference/API_UpdateAccessEntry.html),
// so a contract naming another role creates the new role's entry (in
// ApplySteps) and removes the old role's here. A Pod Identity association
// is keyed by its namespace and service account, which an amendment cannot
// change; its role is updated in place ("Only the IAM role can be changed;
// an association can't be moved between clusters, namespaces, or service
// accounts": API_UpdatePodIdentityAssociation,
// https://docs.aws.amazon.com/eks/latest/APIReference/API_UpdatePodIdentityAssociation.html).
func AmendRemovals(old, new Plan) []Step {
	return DiffPlans(old, new).DeleteSteps()
}

// amendSteps are an amend job's steps: new is the amended version's plan,
// already checked as a provisioning job checks it (pinned hash, preflight,
// namespace); the old plan is the approved version's, the one the
// amendment replaces.
func (w *Worker) amendSteps(ctx context.Context, job workflow.Job, new Plan) ([]Step, error) {
	if job.FromVersion <= 0 || job.FromVersion == job.Version {
		return nil, permanent(fmt.Errorf("provision: amend job %d names no approved version to change from (from %d to %d)", job.ID, job.FromVersion, job.Version))
	}
	old, err := w.Plans(ctx, job.ConnectionID, job.FromVersion)
	if err != nil {
		return nil, fmt.Errorf("provision: the approved version %d this amendment replaces: %w", job.FromVersion, err)
	}
	steps := AmendSteps(old, new)
	if w.Connection != nil && len(steps) > 0 && steps[0].SlurmFrom != nil {
		facts, err := w.Connection(ctx, job.ConnectionID)
		if err != nil {
			return nil, fmt.Errorf("provision: amend job %d: read its connection: %w", job.ID, err)
		}
		steps[0].SlurmHeld = facts.Hold.Applied()
	}
	return steps, nil
}
