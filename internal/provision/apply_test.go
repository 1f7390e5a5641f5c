package provision

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

func TestIsPermanent(t *testing.T) {
	gr := schema.GroupResource{Group: "kueue.x-k8s.io", Resource: "clusterqueues"}
	terminating := &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
		Message: `namespaces "x" is being terminated`,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}},
	}}
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "kueue.x-k8s.io", Kind: "ClusterQueue"}, "q",
		field.ErrorList{field.Invalid(field.NewPath("spec"), "x", "borrowingLimit must be nil when cohort is empty")})
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"invalid", invalid, true},
		{"invalid, wrapped", fmt.Errorf("provision: apply ClusterQueue q: %w", invalid), true},
		{"bad request", apierrors.NewBadRequest("no"), true},
		{"forbidden by RBAC or admission", apierrors.NewForbidden(gr, "q", errors.New("denied")), true},
		{"forbidden: namespace terminating", terminating, false},
		{"kind not served (CRD missing)", &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "kubeflow.org", Kind: "PyTorchJob"}}, true},
		{"resource not found", apierrors.NewNotFound(gr, "q"), true},
		{"namespace not found (deleted between steps)", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "x"), false},
		{"method not supported", apierrors.NewMethodNotSupported(gr, "patch"), true},
		{"conflict", apierrors.NewConflict(gr, "q", errors.New("modified")), false},
		{"already exists", apierrors.NewAlreadyExists(gr, "q"), false},
		{"throttled", apierrors.NewTooManyRequests("slow down", 1), false},
		{"server timeout", apierrors.NewServerTimeout(gr, "patch", 1), false},
		{"timeout", apierrors.NewTimeoutError("slow", 1), false},
		{"internal error", apierrors.NewInternalError(errors.New("etcd")), false},
		{"unavailable", apierrors.NewServiceUnavailable("restarting"), false},
		{"unauthorized (credentials may refresh)", apierrors.NewUnauthorized("expired"), false},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), false},
		{"cancelled", context.Canceled, false},
		{"unknown error", errors.New("connection reset by peer"), false},
		{"portal's own", permanent(errors.New("no object")), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsPermanent(tc.err); got != tc.want {
				t.Errorf("IsPermanent(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// fakeCluster is a dynamic client double for what a real API server cannot
// be made to do on demand: fail one chosen step.
type fakeCluster struct {
	failName string
	failErr  error
	applied  []string
	live     map[string]string // "ns/name" -> resourceVersion
	// labels of a live object ("ns/name"); without an entry, an object
	// carries the portal's labels for team red.
	labels map[string]map[string]string
}

func (f *fakeCluster) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return &fakeResource{f: f}
}

// fakeResource implements Get, Apply and Namespace; the embedded nil
// interface panics on anything else Apply might call by mistake.
type fakeResource struct {
	dynamic.NamespaceableResourceInterface
	f  *fakeCluster
	ns string
}

func (r *fakeResource) Namespace(ns string) dynamic.ResourceInterface {
	return &fakeResource{f: r.f, ns: ns}
}

func (r *fakeResource) Get(_ context.Context, name string, _ metav1.GetOptions, _ ...string) (*unstructured.Unstructured, error) {
	rv, ok := r.f.live[r.ns+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{}, name)
	}
	u := &unstructured.Unstructured{}
	u.SetResourceVersion(rv)
	l, ok := r.f.labels[r.ns+"/"+name]
	if !ok {
		l = map[string]string{LabelManagedBy: ManagedBy, LabelTeam: "red"}
	}
	u.SetLabels(l)
	return u, nil
}

func (r *fakeResource) Apply(_ context.Context, name string, obj *unstructured.Unstructured, opts metav1.ApplyOptions, _ ...string) (*unstructured.Unstructured, error) {
	if opts.FieldManager != ManagedBy || !opts.Force {
		return nil, fmt.Errorf("apply options %+v, want field manager %s, forced", opts, ManagedBy)
	}
	if name == r.f.failName {
		return nil, r.f.failErr
	}
	r.f.applied = append(r.f.applied, obj.GetKind()+" "+name)
	out := obj.DeepCopy()
	rv, ok := r.f.live[r.ns+"/"+name]
	if !ok {
		rv = "1"
		r.f.live[r.ns+"/"+name] = rv
	}
	out.SetResourceVersion(rv)
	return out, nil
}

func staticMapper(p Plan) meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for _, o := range p.Objects {
		scope := meta.RESTScopeNamespace
		if o.Namespace == "" {
			scope = meta.RESTScopeRoot
		}
		m.Add(o.Obj.GroupVersionKind(), scope)
	}
	return m
}

func TestApplyStopsAtTheFirstFailure(t *testing.T) {
	c := workflow.ExampleContract()
	p, err := BuildPlan(1, 1, c.Hash(), c, managedSettings())
	if err != nil {
		t.Fatal(err)
	}
	failAt := slices.IndexFunc(p.Objects, func(o Object) bool { return o.Name == NameSubmitterRole })
	for _, tc := range []struct {
		name      string
		err       error
		permanent bool
	}{
		{"transient", apierrors.NewServiceUnavailable("restarting"), false},
		{"permanent", apierrors.NewForbidden(schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "roles"}, NameSubmitterRole, errors.New("escalation")), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeCluster{failName: NameSubmitterRole, failErr: tc.err, live: map[string]string{"/" + p.Namespace: "7"}}
			a := &Applier{Client: f, Mapper: staticMapper(p)}
			results, err := a.Apply(t.Context(), p)
			if !errors.Is(err, tc.err) {
				t.Fatalf("Apply error = %v, want it to wrap %v", err, tc.err)
			}
			if IsPermanent(err) != tc.permanent {
				t.Errorf("IsPermanent(%v) = %v, want %v", err, !tc.permanent, tc.permanent)
			}
			if len(results) != len(p.Objects) {
				t.Fatalf("%d results for %d objects", len(results), len(p.Objects))
			}
			for i, r := range results {
				want := Created
				switch {
				case i == 0:
					want = Unchanged // the namespace existed at version 7
				case i == failAt:
					want = Failed
				case i > failAt:
					want = Skipped
				}
				if r.Outcome != want {
					t.Errorf("step %d (%s %s): %s, want %s", i, r.Kind, r.Name, r.Outcome, want)
				}
				if (r.Err != nil) != (i == failAt) {
					t.Errorf("step %d (%s %s): error %v", i, r.Kind, r.Name, r.Err)
				}
			}
			if len(f.applied) != failAt {
				t.Errorf("%d objects applied before the failure, want %d: %v", len(f.applied), failAt, f.applied)
			}
			for _, a := range f.applied {
				if strings.HasPrefix(a, "RoleBinding ") {
					t.Errorf("a RoleBinding was applied although an earlier step failed: %s", a)
				}
			}
		})
	}
}

func TestApplyUnknownKindIsPermanent(t *testing.T) {
	c := workflow.ExampleContract()
	p, err := BuildPlan(1, 1, c.Hash(), c, DefaultClusterSettings())
	if err != nil {
		t.Fatal(err)
	}
	a := &Applier{Client: &fakeCluster{live: map[string]string{}}, Mapper: meta.NewDefaultRESTMapper(nil)}
	results, err := a.Apply(t.Context(), p)
	if !IsPermanent(err) || !meta.IsNoMatchError(err) {
		t.Fatalf("Apply with a mapper that knows no kinds: %v, want a permanent no-match error", err)
	}
	if results[0].Outcome != Failed || results[1].Outcome != Skipped {
		t.Errorf("outcomes %s, %s; want failed, skipped", results[0].Outcome, results[1].Outcome)
	}
}

func TestForeignNamespace(t *testing.T) {
	for _, tc := range []struct {
		name    string
		labels  map[string]string
		foreign bool
	}{
		{"no labels (made by hand, or by another tool)", nil, true},
		{"the portal's, this team", map[string]string{LabelManagedBy: ManagedBy, LabelTeam: "red"}, false},
		{"the portal's, another team", map[string]string{LabelManagedBy: ManagedBy, LabelTeam: "blue"}, true},
		{"team label without the portal's managed-by", map[string]string{LabelManagedBy: "helm", LabelTeam: "red"}, true},
		{"HyperPod task governance's", map[string]string{LabelHyperPodManagedQueue: "true", "sagemaker.amazonaws.com/quota-allocation-id": "red"}, false},
		{"HyperPod's label, not true", map[string]string{LabelHyperPodManagedQueue: "false"}, true},
	} {
		if got := ForeignNamespace(tc.labels, "red"); got != tc.foreign {
			t.Errorf("%s: ForeignNamespace = %v, want %v", tc.name, got, tc.foreign)
		}
	}
}

// An existing namespace that neither the portal nor HyperPod created is
// not taken over unless the plan carries an admin's adoption (issue 10
// item 14): Apply stops at the namespace, permanently, having written
// nothing.
func TestApplyRefusesAForeignNamespaceUnlessAdopted(t *testing.T) {
	c := workflow.ExampleContract()
	c.Namespaces = []string{"red-batch"}
	p, err := BuildPlan(1, 1, c.Normalize().Hash(), c.Normalize(), managedSettings())
	if err != nil {
		t.Fatal(err)
	}
	foreign := func() *fakeCluster {
		return &fakeCluster{live: map[string]string{"/red-batch": "7"}, labels: map[string]map[string]string{"/red-batch": {"app": "batch"}}}
	}
	f := foreign()
	results, err := (&Applier{Client: f, Mapper: staticMapper(p)}).Apply(t.Context(), p)
	if err == nil || !IsPermanent(err) || !strings.Contains(err.Error(), "adopts it explicitly") {
		t.Fatalf("Apply into a foreign namespace: %v, want a permanent refusal", err)
	}
	if results[0].Outcome != Failed || len(f.applied) != 0 {
		t.Errorf("namespace step %s, applied %v; want failed with nothing applied", results[0].Outcome, f.applied)
	}
	if p.Adopting("other-ns").Objects[0].Adopt || p.Objects[0].Adopt {
		t.Error("Adopting marked a namespace it does not name, or changed the plan it was given")
	}
	adopted := p.Adopting("red-batch")
	if adopted.Hash() != p.Hash() {
		t.Error("the adoption mark changes the plan's hash")
	}
	f = foreign()
	if _, err := (&Applier{Client: f, Mapper: staticMapper(p)}).Apply(t.Context(), adopted); err != nil {
		t.Errorf("Apply of an adopted namespace: %v", err)
	}
	// HyperPod's namespace is not foreign.
	f = &fakeCluster{live: map[string]string{"/red-batch": "7"}, labels: map[string]map[string]string{"/red-batch": {LabelHyperPodManagedQueue: "true"}}}
	if _, err := (&Applier{Client: f, Mapper: staticMapper(p)}).Apply(t.Context(), p); err != nil {
		t.Errorf("Apply into HyperPod's namespace: %v", err)
	}
}
