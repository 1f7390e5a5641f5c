package provision

import (
	"context"
)

// SnapshotApplier is a StepApplier that can read a plan's objects at once
// before its steps run; ApplierSteps is one. The worker uses it for a
// re-apply job.
type SnapshotApplier interface {
	ForPlan(ctx context.Context, p Plan) (StepApplier, error)
}

// ForPlan takes a Snapshot of p and returns the StepApplier of one re-apply
// job: an object the snapshot shows as planned is Unchanged without a
// request, anything else is applied as ApplyObject does; the prune step
// removes the extra RoleBindings the snapshot listed. The snapshot serves
// this job's attempt only.
func (a ApplierSteps) ForPlan(ctx context.Context, p Plan) (StepApplier, error) {
	snap, err := a.Applier.Snapshot(ctx, []Plan{p})
	if err != nil {
		return nil, err
	}
	return snapshotSteps{ApplierSteps: a, snap: snap}, nil
}

type snapshotSteps struct {
	ApplierSteps
	snap *Snapshot
}

// ApplyObject is Unchanged at the listed resourceVersion when the snapshot
// shows o as planned, else ApplierSteps' apply.
func (s snapshotSteps) ApplyObject(ctx context.Context, o Object) (Outcome, string, error) {
	if rv, ok := s.snap.unchanged(s.Applier, o); ok {
		return Unchanged, "resourceVersion " + rv, nil
	}
	return s.ApplierSteps.ApplyObject(ctx, o)
}

// RunStep runs a re-apply job's steps from the snapshot.
func (s snapshotSteps) RunStep(ctx context.Context, st Step) (Outcome, string, error) {
	switch st.Action {
	case ActionApply:
		return s.ApplyObject(ctx, st.Object)
	case ActionPrune:
		return s.Applier.pruneStep(ctx, st, s.snap)
	}
	return s.ApplierSteps.RunStep(ctx, st)
}
