package provision

import (
	"context"
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// Fresh provisioning without a read before each write (issue 15).
//
// Apply reads every object before applying it: the resourceVersion before
// and after tells created, configured and unchanged apart. On a job's first
// attempt almost every object is new, and the read is wasted: the apply's
// own answer says whether it created the object. The Kubernetes API server
// answers a PATCH that created its object with 201 Created and one that
// updated (or left) an existing object with 200 OK (k8s.io/apiserver
// pkg/endpoints/handlers/patch.go, PatchResource: "status :=
// http.StatusOK; if wasCreated { status = http.StatusCreated }"; a
// server-side apply is a PATCH of type application/apply-patch, which
// creates a missing object: https://kubernetes.io/docs/reference/using-api/server-side-apply/).
//
// The worker uses this only for objects of the portal's own (OwnerPortal)
// inside a namespace its attempt has just created (the namespace step's
// outcome was Created): no object of that namespace existed a moment
// before, so a read could only have said "not found". The namespace itself,
// objects HyperPod owns and cluster-scoped objects are still read first:
// the namespace's foreign-ownership check and HyperPod's objects need what
// is live, and a cluster-scoped object may already exist (shared ones, or
// a resumed attempt's). A resumed attempt finds its namespace existing, so
// all its steps take the reading path and report unchanged exactly.

// NewObjectApplier is a StepApplier that can apply an object that did not
// exist a moment ago without reading it first (ApplierSteps is one).
type NewObjectApplier interface {
	ApplyNewObject(ctx context.Context, o Object) (Outcome, string, error)
}

// ApplyNewObject applies o with Applier.ApplyNew, recording its
// resourceVersion as ApplyObject does; without a REST client (a test
// double's Applier) it is ApplyObject.
func (a ApplierSteps) ApplyNewObject(ctx context.Context, o Object) (Outcome, string, error) {
	if a.Applier.REST == nil || o.Owner != OwnerPortal {
		return a.ApplyObject(ctx, o)
	}
	rv, outcome, err := a.Applier.ApplyNew(ctx, o)
	if err != nil {
		return Failed, "", fmt.Errorf("provision: apply %s %s: %w", o.Kind, o.Ref(), err)
	}
	return outcome, "resourceVersion " + rv, nil
}

// ApplyNew server-side applies o, one of the portal's own objects, with
// force, in one request and without reading it first: Created when the API
// server answers 201 Created. An object that existed after all (someone
// made it between its namespace's creation and this apply) answers 200; it
// is reported Configured, since without a read before the apply nobody
// can say that it was already as desired.
func (a *Applier) ApplyNew(ctx context.Context, o Object) (string, Outcome, error) {
	if err := ctx.Err(); err != nil {
		return "", Failed, err
	}
	if o.Owner != OwnerPortal {
		return "", Failed, fmt.Errorf("provision: %s %s is not the portal's own: it must be read before it is applied", o.Kind, o.Ref())
	}
	m, err := a.Mapper.RESTMapping(o.Obj.GroupVersionKind().GroupKind(), o.Obj.GroupVersionKind().Version)
	if err != nil {
		return "", Failed, err
	}
	body, err := o.Obj.MarshalJSON()
	if err != nil {
		return "", Failed, err
	}
	// The path the dynamic client builds (client-go dynamic/simple.go,
	// makeURLSegments).
	gvr := m.Resource
	path := []string{"apis", gvr.Group, gvr.Version}
	if gvr.Group == "" {
		path = []string{"api", gvr.Version}
	}
	if o.Namespace != "" {
		path = append(path, "namespaces", o.Namespace)
	}
	path = append(path, gvr.Resource, o.Name)
	res := a.REST.Patch(types.ApplyPatchType).AbsPath(path...).
		Param("fieldManager", a.fieldManager()).Param("force", "true").
		Body(body).Do(ctx)
	var code int
	res.StatusCode(&code)
	if err := res.Error(); err != nil {
		// Error, not Raw's error: it decodes the server's Status (the
		// message IsPermanent and the job's record need), as the dynamic
		// client's Into does.
		return "", Failed, err
	}
	raw, _ := res.Raw()
	var out unstructured.Unstructured
	if err := out.UnmarshalJSON(raw); err != nil {
		return "", Failed, fmt.Errorf("provision: the API server's answer to applying %s %s: %w", o.Kind, o.Ref(), err)
	}
	if code == http.StatusCreated {
		return out.GetResourceVersion(), Created, nil
	}
	return out.GetResourceVersion(), Configured, nil
}

// freshNamespaces are the namespaces a worker's attempt created (their
// apply step's outcome was Created): the portal's own objects in them are
// applied with ApplyNewObject, without a read first.
type freshNamespaces struct {
	applier NewObjectApplier // nil: never
	names   map[string]bool
}

// saw notes the outcome of step st.
func (f *freshNamespaces) saw(st Step, outcome Outcome) {
	if f.applier == nil || st.Action != ActionApply || st.AWS != nil || st.Object.Kind != "Namespace" || outcome != Created {
		return
	}
	if f.names == nil {
		f.names = map[string]bool{}
	}
	f.names[st.Object.Name] = true
}

// holds says whether st applies one of the portal's own objects in a
// namespace this attempt created.
func (f *freshNamespaces) holds(st Step) bool {
	return f.applier != nil && st.Action == ActionApply && st.AWS == nil && st.Object.Owner == OwnerPortal &&
		st.Object.Namespace != "" && f.names[st.Object.Namespace]
}

func (f *freshNamespaces) apply(ctx context.Context, o Object) (Outcome, string, error) {
	return f.applier.ApplyNewObject(ctx, o)
}
