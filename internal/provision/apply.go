package provision

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// Outcome is what applying one object did.
type Outcome string

// Outcomes of a step.
const (
	Created    Outcome = "created"    // the object did not exist
	Configured Outcome = "configured" // it existed and the apply changed it
	Unchanged  Outcome = "unchanged"  // it existed as desired: nothing was written
	Failed     Outcome = "failed"     // see StepResult.Err
	Skipped    Outcome = "skipped"    // not attempted: an earlier step failed
)

// StepResult is the outcome of one object of a plan, to be recorded.
type StepResult struct {
	Kind      string
	Namespace string
	Name      string
	Outcome   Outcome
	// ResourceVersion is the object's after the step ("" unless applied).
	ResourceVersion string
	Err             error
}

// RESTMapper is the part of meta.RESTMapper that Apply needs: from a kind
// to its resource and scope. A restmapper.DeferredDiscoveryRESTMapper (see
// NewApplier) rereads discovery when a kind is unknown, so a CRD installed
// after the portal started is found.
type RESTMapper interface {
	RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error)
}

// Applier applies plans with server-side apply. Client is client-go's
// dynamic client (dynamic.Interface is a one-method interface, so a test
// double fits as well as the real client).
type Applier struct {
	Client dynamic.Interface
	Mapper RESTMapper
	// FieldManager owns the applied fields; default ManagedBy. Keep it
	// stable: a second manager would conflict with the first.
	FieldManager string
	// REST, when set, is a client of the same API server that ApplyNew
	// sends its applies through (it needs the response's status code,
	// which the dynamic client does not return). NewApplier sets it.
	REST rest.Interface
}

// WithPortalRate is cfg with the client-side rate limit the portal's
// Kubernetes clients run at (cmd/portal), for tests to run at the same:
// client-go's default of 5 requests/s (burst 10) would make reconciling
// many tenants take minutes, and the approval page's drift check of a
// namespace the portal has not provisioned yet (36 requests: a GET of
// each planned object the label-selected lists did not return) overrun its
// 5 s deadline.
func WithPortalRate(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.QPS, out.Burst = 50, 100
	return out
}

// NewApplier builds an Applier on cfg: a dynamic client and a discovery
// based RESTMapper. Client-side rate limits are cfg's (QPS, Burst).
func NewApplier(cfg *rest.Config) (*Applier, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("provision: dynamic client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("provision: discovery client: %w", err)
	}
	// An unversioned client as the dynamic client builds its own
	// (client-go dynamic.NewForConfigAndClient).
	rcfg := dynamic.ConfigFor(cfg)
	rcfg.GroupVersion = nil
	rc, err := rest.UnversionedRESTClientFor(rcfg)
	if err != nil {
		return nil, fmt.Errorf("provision: REST client: %w", err)
	}
	return &Applier{
		Client:       dyn,
		Mapper:       restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)),
		FieldManager: ManagedBy,
		REST:         rc,
	}, nil
}

// Apply server-side applies the plan's objects in order, forcing ownership
// of the fields the portal sets on its own objects (the portal's word wins
// over a hand edit, which drift detection reports). Objects HyperPod owns
// (Object.Owner) are waited for, not created: the namespace gets the
// portal's labels without force (a field HyperPod manages is never taken:
// the conflict is permanent), the LocalQueue is only checked. Applying the
// same plan again writes nothing: every step is Unchanged.
//
// It stops at the first failure, because later objects depend on earlier
// ones and access (RoleBindings) must never land without the guardrails
// before it; the remaining steps are Skipped. The error names the step and
// wraps the API error: IsPermanent tells whether retrying can help. Apply
// does not retry; the job that runs it does, with backoff.
func (a *Applier) Apply(ctx context.Context, p Plan) ([]StepResult, error) {
	results := make([]StepResult, len(p.Objects))
	for i, o := range p.Objects {
		results[i] = StepResult{Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, Outcome: Skipped}
	}
	for i, o := range p.Objects {
		rv, outcome, err := a.apply(ctx, o)
		results[i].Outcome, results[i].ResourceVersion = outcome, rv
		if err != nil {
			err = fmt.Errorf("provision: apply %s %s: %w", o.Kind, o.Ref(), err)
			results[i].Outcome, results[i].Err = Failed, err
			return results, err
		}
	}
	return results, nil
}

func (a *Applier) apply(ctx context.Context, o Object) (string, Outcome, error) {
	if err := ctx.Err(); err != nil {
		return "", Failed, err
	}
	ri, err := a.resourceOf(o)
	if err != nil {
		return "", Failed, err
	}

	// The resourceVersion before and after tells created, configured and
	// unchanged apart: the API server does not write (nor bump the version
	// of) an apply that changes nothing. A status update by a controller
	// between the two requests moves the version too (kube-controller-
	// manager's validatingadmissionpolicy-status-controller does, after a
	// policy is applied): an object that differs from what was read only in
	// its status, version and managedFields is unchanged (sameButStatus).
	before := ""
	live, err := ri.Get(ctx, o.Name, metav1.GetOptions{})
	switch {
	case err == nil:
		before = live.GetResourceVersion()
		// A namespace that exists and that neither the portal (for this
		// team) nor HyperPod created is taken over only when an admin
		// adopted it at approval; the check runs on every attempt, so a
		// namespace created by someone else between the approval and
		// the apply is refused too (issue 10 item 14).
		if o.Kind == "Namespace" && !o.Adopt && ForeignNamespace(live.GetLabels(), o.Obj.GetLabels()[LabelTeam]) {
			return "", Failed, foreignNamespaceError(o.Name, o.Obj.GetLabels()[LabelTeam])
		}
	case apierrors.IsNotFound(err) && o.Owner != OwnerPortal:
		// HyperPod makes it from the compute quota, a little after the
		// quota is created: transient, the job retries with backoff.
		return "", Failed, &waitingError{o}
	case apierrors.IsNotFound(err):
	default:
		return "", Failed, err
	}
	if o.Owner == OwnerHyperPodChecked {
		return before, Unchanged, nil // HyperPod's: checked, never written
	}
	// Force only on the portal's own objects: on HyperPod's, an apply of
	// the portal's labels that conflicts with a field HyperPod manages
	// fails (409 Conflict) instead of taking the field over.
	out, err := ri.Apply(ctx, o.Name, o.Obj, metav1.ApplyOptions{FieldManager: a.fieldManager(), Force: o.Owner == OwnerPortal})
	if apierrors.IsConflict(err) && o.Owner == OwnerHyperPod {
		return "", Failed, permanent(fmt.Errorf("%w: HyperPod task governance owns %s %s and manages a field the portal would set; the portal does not take it over", err, o.Kind, o.Ref()))
	}
	if err != nil {
		return "", Failed, err
	}
	after := out.GetResourceVersion()
	switch {
	case before == "":
		return after, Created, nil
	case before == after, sameButStatus(live, out):
		return after, Unchanged, nil
	default:
		return after, Configured, nil
	}
}

// waitingError is a HyperPod-owned object that does not exist yet.
type waitingError struct{ o Object }

func (e *waitingError) Error() string {
	return fmt.Sprintf("waiting for HyperPod task governance to create %s %s from the team's compute quota", e.o.Kind, e.o.Ref())
}

// permanentError marks an error of the portal's own making that no retry
// can fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func permanent(err error) error { return &permanentError{err} }

// IsPermanent reports whether retrying the step that failed with err cannot
// help until someone changes the plan, the settings or the cluster:
//   - the object is invalid (Invalid, BadRequest: a name or a value the API
//     server or a CRD's schema rejects);
//   - it is Forbidden (RBAC of the portal's identity, or an admission
//     webhook or policy), except while its namespace is terminating;
//   - the kind is not served (a CRD not installed), or the resource path is
//     NotFound, except for a namespace deleted between steps, which
//     re-applying the plan recreates;
//   - the request itself is unacceptable (method, media type, size).
//
// Everything else is transient and worth retrying with backoff: timeouts,
// throttling (429), conflicts (409), server errors (5xx), Unauthorized
// (credentials may be refreshed), network errors and unknown errors, so
// that a job is never abandoned on an error nobody classified. A cancelled
// or expired context is not permanent either.
func IsPermanent(err error) bool {
	if err == nil {
		return false
	}
	var pe *permanentError
	if errors.As(err, &pe) {
		return true
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if meta.IsNoMatchError(err) {
		return true
	}
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return false
	}
	switch {
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsForbidden(err),
		apierrors.IsMethodNotSupported(err), apierrors.IsNotAcceptable(err),
		apierrors.IsUnsupportedMediaType(err), apierrors.IsRequestEntityTooLargeError(err):
		return true
	case apierrors.IsNotFound(err):
		var st apierrors.APIStatus
		if errors.As(err, &st) {
			if d := st.Status().Details; d != nil && d.Kind == "namespaces" {
				return false
			}
		}
		return true
	}
	return false
}

// sameButStatus reports whether before and after are the same object but
// for status, resourceVersion and managedFields.
func sameButStatus(before, after *unstructured.Unstructured) bool {
	if before == nil || after == nil {
		return false
	}
	strip := func(u *unstructured.Unstructured) map[string]any {
		c := u.DeepCopy().Object
		delete(c, "status")
		if m, ok := c["metadata"].(map[string]any); ok {
			delete(m, "resourceVersion")
			delete(m, "managedFields")
		}
		return c
	}
	return equality.Semantic.DeepEqual(strip(before), strip(after))
}
