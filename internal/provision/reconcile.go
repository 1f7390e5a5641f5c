package provision

import (
	"context"
	"slices"
)

// SnapshotApplier is a StepApplier that can read many plans' objects at
// once before their steps run; ApplierSteps is one. The worker uses it for
// re-apply jobs, a batch of them at a time (Worker, ReapplyBatch).
type SnapshotApplier interface {
	// ForPlans reads the objects of plans together and returns the
	// StepApplier of their re-apply steps (any plan's), which serves one
	// attempt of those jobs and is then dropped.
	ForPlans(ctx context.Context, plans []Plan) (StepApplier, error)
}

// ForPlan is ForPlans of one plan: the StepApplier of one re-apply job.
func (a ApplierSteps) ForPlan(ctx context.Context, p Plan) (StepApplier, error) {
	return a.ForPlans(ctx, []Plan{p})
}

// ForPlans takes one Snapshot of plans (one list per kind for all of
// them, snapshot.go, as the drift checker takes for a batch of plans) and
// returns the StepApplier of their re-apply jobs: an object the snapshot
// shows as planned is Unchanged without a request, anything else is
// applied as ApplyObject does; a prune step removes the extra RoleBindings
// the snapshot listed in its namespace. It is also a NamespaceChecker that
// answers from the snapshot. The snapshot serves these jobs' attempt only.
func (a ApplierSteps) ForPlans(ctx context.Context, plans []Plan) (StepApplier, error) {
	snap, err := a.Applier.Snapshot(ctx, plans)
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
// shows o as planned (answer), else ApplierSteps' apply.
func (s snapshotSteps) ApplyObject(ctx context.Context, o Object) (Outcome, string, error) {
	return s.RunStep(ctx, Step{Action: ActionApply, Object: o})
}

// RunStep runs a re-apply job's steps from the snapshot: what it answers
// without a request (answer), else the apply, or the prune of the
// RoleBindings it listed.
func (s snapshotSteps) RunStep(ctx context.Context, st Step) (Outcome, string, error) {
	if outcome, detail, ok := s.answer(st); ok {
		return outcome, detail, nil
	}
	switch st.Action {
	case ActionApply:
		return s.ApplierSteps.ApplyObject(ctx, st.Object)
	case ActionPrune:
		return s.Applier.pruneStep(ctx, st, s.snap)
	}
	return s.ApplierSteps.RunStep(ctx, st)
}

// answerer is a StepApplier that can tell, without a request, what a step
// does when its snapshot answers it alone (an object listed as planned, a
// prune with nothing to remove): the worker records a run of such steps
// in one transaction (StepsRecorder) instead of two each.
type answerer interface {
	answer(st Step) (Outcome, string, bool)
}

// answer is what RunStep would do with st, when that takes no request:
// Unchanged for an object the snapshot shows as planned, and for a prune
// whose namespace has no RoleBinding beyond st.Keep.
func (s snapshotSteps) answer(st Step) (Outcome, string, bool) {
	switch {
	case st.AWS != nil:
	case st.Action == ActionApply:
		if rv, ok := s.snap.unchanged(s.Applier, st.Object); ok {
			return Unchanged, "resourceVersion " + rv, true
		}
	case st.Action == ActionPrune:
		for _, rb := range s.snap.bindings[st.Object.Namespace] {
			if !slices.Contains(st.Keep, rb.GetName()) {
				return "", "", false // pruneStep deletes it
			}
		}
		return Unchanged, noExtraBindings, true
	}
	return "", "", false
}

// CheckNamespace is Applier.CheckNamespace answered from the snapshot when
// it listed the plan's namespace (or found that it does not exist); a
// namespace the lists did not return (one without the portal's labels for
// this connection: foreign, or relabelled by hand) is read with a GET, as
// Applier.CheckNamespace reads it.
func (s snapshotSteps) CheckNamespace(ctx context.Context, p Plan) (NamespaceCheck, error) {
	if s.snap.absent != "" && s.snap.absent == p.Namespace {
		return NamespaceCheck{Namespace: p.Namespace}, nil
	}
	if live := s.snap.objs[snapKey{namespacesGVR, "", p.Namespace}]; live != nil {
		return NamespaceCheck{Namespace: p.Namespace, Exists: true, Foreign: ForeignNamespace(live.GetLabels(), p.Team)}, nil
	}
	return s.ApplierSteps.CheckNamespace(ctx, p)
}
