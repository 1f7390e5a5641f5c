package provision

import (
	"context"
	"fmt"
)

// ReconcileResult is what re-applying one plan did: each object's outcome
// (as Apply reports them), the RoleBindings removed because the plan does
// not contain them, and the error that stopped it.
type ReconcileResult struct {
	Steps  []StepResult
	Pruned []string
	Err    error
}

// Reconcile re-applies many plans from one Snapshot (one list per kind, see
// snapshot.go) and removes the RoleBindings of their namespaces that they
// do not contain, as a re-apply job does (ReapplySteps). An object whose
// listed copy Covers its plan is Unchanged without a request; only an
// object that differs or that the lists did not return is applied (Apply's
// GET and server-side apply, with its checks: a foreign namespace is
// refused, HyperPod's objects are not forced). A plan stops at its first
// failure, as Apply does (the rest Skipped, no pruning); the other plans go
// on. The error is the snapshot's: then nothing was applied.
func (a *Applier) Reconcile(ctx context.Context, plans []Plan) ([]ReconcileResult, error) {
	snap, err := a.Snapshot(ctx, plans)
	if err != nil {
		return nil, err
	}
	out := make([]ReconcileResult, len(plans))
	for i, p := range plans {
		out[i] = a.reconcile(ctx, snap, p)
	}
	return out, nil
}

func (a *Applier) reconcile(ctx context.Context, snap *Snapshot, p Plan) ReconcileResult {
	r := ReconcileResult{Steps: make([]StepResult, len(p.Objects))}
	for i, o := range p.Objects {
		r.Steps[i] = StepResult{Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, Outcome: Skipped}
	}
	keep := map[string]bool{}
	for i, o := range p.Objects {
		if o.Kind == "RoleBinding" && o.Namespace == p.Namespace {
			keep[o.Name] = true
		}
		if rv, ok := snap.unchanged(a, o); ok {
			r.Steps[i].Outcome, r.Steps[i].ResourceVersion = Unchanged, rv
			continue
		}
		rv, outcome, err := a.apply(ctx, o)
		r.Steps[i].Outcome, r.Steps[i].ResourceVersion = outcome, rv
		if err != nil {
			r.Err = fmt.Errorf("provision: apply %s %s: %w", o.Kind, o.Ref(), err)
			r.Steps[i].Outcome, r.Steps[i].Err = Failed, r.Err
			return r
		}
	}
	if p.Namespace == "" {
		return r
	}
	r.Pruned, r.Err = a.deleteBindings(ctx, p.Namespace, snap.bindings[p.Namespace], keep)
	return r
}

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
