package provision

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// AWSDrifter compares the AWS half of a plan with AWS, read-only;
// *awsprov.Runner is one.
type AWSDrifter interface {
	Drift(ctx context.Context, calls []awsprov.Call) ([]awsprov.Finding, error)
}

// DriftOf is the drift check of a plan: the cluster's objects (a; nil
// skips them) and then the plan's AWS resources (cloud; nil skips them:
// the compute quota, the Studio domain, the access entries with their
// policies and scopes, the Pod Identity association), as one list of
// items. Re-applying the plan fixes both halves.
func DriftOf(a *Applier, cloud AWSDrifter) func(context.Context, Plan) ([]workflow.DriftItem, error) {
	return func(ctx context.Context, p Plan) ([]workflow.DriftItem, error) {
		var out []workflow.DriftItem
		if a != nil {
			items, err := a.Drift(ctx, p)
			if err != nil {
				return nil, err
			}
			out = items
		}
		if cloud == nil || len(p.AWS) == 0 {
			return out, nil
		}
		findings, err := cloud.Drift(ctx, p.AWS)
		if err != nil {
			return nil, fmt.Errorf("provision: %w", err)
		}
		for _, f := range findings {
			out = append(out, workflow.DriftItem{Kind: f.Call.Service + " " + strings.ReplaceAll(string(f.Call.Kind), "-", " "),
				Ref: f.Call.Name, What: f.What, Fields: f.Fields, Detail: f.Detail})
		}
		return out, nil
	}
}

// DriftAllOf is DriftOf for many plans at once, as DriftChecker.CheckAll
// takes them: the cluster's objects of every plan from one Snapshot
// (Applier.DriftAllWith, its unselected lists from the pass's ListCache),
// then each plan's AWS resources. A plan whose cluster
// check failed is not checked on AWS: its result is the error.
func DriftAllOf(a *Applier, cloud AWSDrifter) func(context.Context, []Plan, *ListCache) []DriftResult {
	one := DriftOf(nil, cloud)
	return func(ctx context.Context, plans []Plan, lists *ListCache) []DriftResult {
		out := make([]DriftResult, len(plans))
		if a != nil {
			out = a.DriftAllWith(ctx, plans, lists)
		}
		for i, p := range plans {
			if out[i].Err != nil {
				continue
			}
			items, err := one(ctx, p)
			if err != nil {
				out[i].Err = err
				continue
			}
			out[i].Items = append(out[i].Items, items...)
		}
		return out
	}
}

var roleBindings = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}

// Drift compares the live cluster with the plan, writing nothing: an object
// that is gone, an object whose portal-managed fields differ from the plan
// (found with a server-side apply dry run, so defaults and formatting
// never show as drift), and RoleBindings in the team namespace that the
// plan does not contain, since those grant access the contract does not.
// It reads the cluster as DriftAll does.
func (a *Applier) Drift(ctx context.Context, p Plan) ([]workflow.DriftItem, error) {
	r := a.DriftAll(ctx, []Plan{p})[0]
	return r.Items, r.Err
}

// DriftResult is the drift of one plan of a DriftAll, or why it could not
// be checked.
type DriftResult struct {
	Items []workflow.DriftItem
	Err   error
}

// DriftAll is Drift for many plans from one Snapshot (one list per kind,
// see snapshot.go): an object whose listed copy Covers its plan is
// unchanged without a request of its own; only one that differs is
// confirmed with the dry-run apply (which tells a default the API server
// added from a change), and only one the lists did not return is read with
// a GET. A failed snapshot fails every plan's check.
func (a *Applier) DriftAll(ctx context.Context, plans []Plan) []DriftResult {
	return a.DriftAllWith(ctx, plans, nil)
}

// DriftAllWith is DriftAll taking the lists without a label selector
// across namespaces from lists, shared by the batches of one drift check
// pass (nil: listed for these plans alone).
func (a *Applier) DriftAllWith(ctx context.Context, plans []Plan, lists *ListCache) []DriftResult {
	out := make([]DriftResult, len(plans))
	snap, err := a.snapshot(ctx, plans, lists)
	if err != nil {
		for i := range out {
			out[i].Err = fmt.Errorf("provision: drift: %w", err)
		}
		return out
	}
	for i, p := range plans {
		out[i].Items, out[i].Err = a.driftFrom(ctx, snap, p)
	}
	return out
}

func (a *Applier) driftFrom(ctx context.Context, snap *Snapshot, p Plan) ([]workflow.DriftItem, error) {
	var out []workflow.DriftItem
	planned := map[string]bool{}
	for _, o := range p.Objects {
		if o.Kind == "RoleBinding" {
			planned[o.Namespace+"/"+o.Name] = true
		}
		live := snap.live(a, o)
		if live != nil && p.StopPolicy != "" && IsQueue(o) {
			if it := StopPolicyDrift(o, live, p.StopPolicy); it != nil {
				out = append(out, *it)
			}
		}
		if live != nil && o.Owner != OwnerHyperPodChecked && len(Covers(live, o.Obj, a.fieldManager())) == 0 {
			continue // as planned: no request
		}
		if snap.absentFrom(o) {
			out = append(out, deletedItem(o)) // its namespace does not exist
			continue
		}
		it, err := a.driftObject(ctx, o, live)
		if err != nil {
			return nil, err
		}
		if it != nil {
			out = append(out, *it)
		}
	}
	if p.Namespace != "" {
		for _, rb := range snap.bindings[p.Namespace] {
			if planned[p.Namespace+"/"+rb.GetName()] {
				continue
			}
			out = append(out, workflow.DriftItem{Kind: "RoleBinding", Ref: p.Namespace + "/" + rb.GetName(), What: "extra", Detail: bindingSummary(rb)})
		}
	}
	return out, nil
}

// driftObject is the drift of one object, nil if none: live is its listed
// copy, or nil to read it with a GET.
func (a *Applier) driftObject(ctx context.Context, o Object, live *unstructured.Unstructured) (*workflow.DriftItem, error) {
	ri, err := a.resourceOf(o)
	if err != nil {
		return nil, fmt.Errorf("provision: drift %s %s: %w", o.Kind, o.Ref(), err)
	}
	if live == nil {
		live, err = ri.Get(ctx, o.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			it := deletedItem(o)
			return &it, nil
		}
		if err != nil {
			return nil, fmt.Errorf("provision: drift %s %s: %w", o.Kind, o.Ref(), err)
		}
	}
	if o.Owner == OwnerHyperPodChecked {
		// HyperPod's: the portal only reads where it queues to.
		want, _, _ := unstructured.NestedString(o.Obj.Object, "spec", "clusterQueue")
		got, _, _ := unstructured.NestedString(live.Object, "spec", "clusterQueue")
		if want != got {
			return &workflow.DriftItem{Kind: o.Kind, Ref: o.Ref(), What: "changed", Fields: []string{"spec.clusterQueue"},
				Detail: fmt.Sprintf("HyperPod's queue points at %q, not %q", got, want)}, nil
		}
		return nil, nil
	}
	want, err := ri.Apply(ctx, o.Name, o.Obj, metav1.ApplyOptions{FieldManager: a.fieldManager(), Force: o.Owner == OwnerPortal, DryRun: []string{metav1.DryRunAll}})
	if apierrors.IsConflict(err) && o.Owner == OwnerHyperPod {
		return &workflow.DriftItem{Kind: o.Kind, Ref: o.Ref(), What: "changed", Detail: "HyperPod manages a field the portal sets: " + err.Error()}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("provision: drift %s %s: %w", o.Kind, o.Ref(), err)
	}
	if fields := differences(live.Object, want.Object); len(fields) > 0 {
		return &workflow.DriftItem{Kind: o.Kind, Ref: o.Ref(), What: "changed", Fields: fields}, nil
	}
	return nil, nil
}

// deletedItem is the drift of o when it does not exist.
func deletedItem(o Object) workflow.DriftItem {
	it := workflow.DriftItem{Kind: o.Kind, Ref: o.Ref(), What: "deleted"}
	if o.Owner != OwnerPortal {
		it.Detail = "HyperPod task governance owns it and has not created it (or removed it)"
	}
	return it
}

// PruneExtraBindings deletes the RoleBindings in the team namespace that the
// plan does not contain, and returns their refs. Re-applying a plan calls it
// so that access granted by hand is taken back.
func (a *Applier) PruneExtraBindings(ctx context.Context, p Plan) ([]string, error) {
	keep := map[string]bool{}
	for _, o := range p.Objects {
		if o.Kind == "RoleBinding" {
			keep[o.Name] = true
		}
	}
	list, err := a.Client.Resource(roleBindings).Namespace(p.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("provision: prune: list role bindings: %w", err)
	}
	return a.deleteBindings(ctx, p.Namespace, list.Items, keep)
}

// deleteBindings deletes those of bindings, the RoleBindings of namespace
// ns, whose names keep does not hold, and returns their refs: the one place
// RoleBindings a plan does not contain are removed (PruneExtraBindings, a
// re-apply job's prune step from its snapshot).
func (a *Applier) deleteBindings(ctx context.Context, ns string, bindings []unstructured.Unstructured, keep map[string]bool) ([]string, error) {
	ri := a.Client.Resource(roleBindings).Namespace(ns)
	var pruned []string
	for _, rb := range bindings {
		if keep[rb.GetName()] {
			continue
		}
		if err := ri.Delete(ctx, rb.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return pruned, fmt.Errorf("provision: prune %s/%s: %w", ns, rb.GetName(), err)
		}
		pruned = append(pruned, ns+"/"+rb.GetName())
	}
	return pruned, nil
}

// noExtraBindings is the detail of a prune step that removed nothing.
const noExtraBindings = "no role binding beyond the plan's"

// pruneStep runs an ActionPrune step: the RoleBindings of its namespace
// other than st.Keep are deleted, those snap listed when there is a
// snapshot (a batch of re-apply jobs'), else listed now.
func (a *Applier) pruneStep(ctx context.Context, st Step, snap *Snapshot) (Outcome, string, error) {
	ns := st.Object.Namespace
	var pruned []string
	var err error
	if snap != nil {
		keep := map[string]bool{}
		for _, n := range st.Keep {
			keep[n] = true
		}
		pruned, err = a.deleteBindings(ctx, ns, snap.bindings[ns], keep)
	} else {
		pruned, err = a.PruneExtraBindings(ctx, Plan{Namespace: ns, Objects: st.keep()})
	}
	if err != nil {
		return Failed, "", err
	}
	if len(pruned) == 0 {
		return Unchanged, noExtraBindings, nil
	}
	return Deleted, "removed " + strings.Join(pruned, ", "), nil
}

func bindingSummary(rb unstructured.Unstructured) string {
	role, _, _ := unstructured.NestedString(rb.Object, "roleRef", "name")
	subjects, _, _ := unstructured.NestedSlice(rb.Object, "subjects")
	var who []string
	for _, s := range subjects {
		if m, ok := s.(map[string]any); ok {
			who = append(who, fmt.Sprintf("%v %v", m["kind"], m["name"]))
		}
	}
	return fmt.Sprintf("grants %s to %s", role, strings.Join(who, ", "))
}

// ignored are fields that change without anyone changing the object's
// substance.
var ignored = []string{"metadata.managedFields", "metadata.resourceVersion", "metadata.generation",
	"metadata.creationTimestamp", "metadata.uid", "metadata.selfLink", "status"}

// differences lists the dotted paths where live and want differ, ignoring
// bookkeeping fields, at most a few levels deep.
func differences(live, want map[string]any) []string {
	var out []string
	var walk func(path string, a, b any, depth int)
	walk = func(path string, a, b any, depth int) {
		if slices.Contains(ignored, path) {
			return
		}
		am, aok := a.(map[string]any)
		bm, bok := b.(map[string]any)
		if aok && bok && depth < 3 {
			keys := map[string]bool{}
			for k := range am {
				keys[k] = true
			}
			for k := range bm {
				keys[k] = true
			}
			sorted := make([]string, 0, len(keys))
			for k := range keys {
				sorted = append(sorted, k)
			}
			sort.Strings(sorted)
			for _, k := range sorted {
				p := k
				if path != "" {
					p = path + "." + k
				}
				walk(p, am[k], bm[k], depth+1)
			}
			return
		}
		if !reflect.DeepEqual(a, b) {
			out = append(out, path)
		}
	}
	walk("", live, want, 0)
	return out
}
