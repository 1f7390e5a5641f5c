package provision

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Exceptions with an expiry (workflow/exception.go). An exception in
// effect is a parameter change: the team's admission parameters
// (NameAdmissionParams, admission.go) are the contract's values plus the
// priority classes of the connection's exceptions in effect, so that rule
// 2 lets a job labelled with such a class in while the exception lasts. The
// worker's plans and the drift check's carry them (PlansWithExceptions);
// when an exception ends, the store takes it out of effect and queues a
// reapply job, whose plan no longer has the class.
//
// An exception is not part of the approved contract: the plan's Hash is
// taken over the parameter object as the contract alone makes it
// (Object.Approved), so that an approval's pinned plan (an amendment's)
// still matches while an exception is in effect.

// ExceptionDataKey is the parameter object's key that lists the exceptions
// in effect, for whoever reads the ConfigMap ("" when none). The policy
// reads only priorityClasses.
const ExceptionDataKey = "exceptions"

// MaxExceptionDays bounds the cluster setting ExceptionMaxDays: an
// exception is temporary; a longer need is an amendment of the contract.
const MaxExceptionDays = 90

// ExceptionLookup looks up the exceptions in effect of connections (by
// connection id): store.DB.ExceptionsInEffect.
type ExceptionLookup func(ctx context.Context, connIDs []int64) (map[int64][]workflow.Exception, error)

// PriorityClassNames are the names of the cluster's priority classes (the
// classes an exception may grant).
func (s ClusterSettings) PriorityClassNames() []string {
	var out []string
	for _, pc := range s.withDefaults().PriorityClasses {
		out = append(out, pc.Name)
	}
	return out
}

// ExceptionMaxDaysOrDefault is the cluster's longest exception.
func (s ClusterSettings) ExceptionMaxDaysOrDefault() int {
	if s.ExceptionMaxDays <= 0 {
		return workflow.DefaultExceptionMaxDays
	}
	return s.ExceptionMaxDays
}

// WithExceptions is p with the priority classes of xs (the connection's
// exceptions in effect) added to its admission parameter object. p is not
// changed; a plan without that object (none of the plans built before the
// admission rules) is returned as it is.
func (p Plan) WithExceptions(xs []workflow.Exception, s ClusterSettings) Plan {
	var in []workflow.Exception
	for _, x := range xs {
		if x.InEffect() && x.ConnectionID == p.ConnectionID {
			in = append(in, x)
		}
	}
	if len(in) == 0 {
		return p
	}
	slices.SortFunc(in, func(a, b workflow.Exception) int { return int(a.ID - b.ID) })
	i := slices.IndexFunc(p.Objects, func(o Object) bool {
		return o.Kind == "ConfigMap" && o.Name == NameAdmissionParams && o.Namespace == p.Namespace
	})
	if i < 0 {
		return p
	}
	o := p.Objects[i]
	obj := o.Obj.DeepCopy()
	classes, _, _ := unstructured.NestedString(obj.Object, "data", "priorityClasses")
	list := strings.Split(classes, ",")
	var notes []string
	for _, x := range in {
		k := s.KueuePriorityClass(x.PriorityClass)
		if !slices.Contains(list, k) {
			list = append(list, k)
		}
		notes = append(notes, fmt.Sprintf("%s until %s (exception #%d)", k, x.End.UTC().Format(time.RFC3339), x.ID))
	}
	if err := unstructured.SetNestedField(obj.Object, strings.Join(list, ","), "data", "priorityClasses"); err != nil {
		return p // data is a map of strings (admissionParams)
	}
	if err := unstructured.SetNestedField(obj.Object, strings.Join(notes, "; "), "data", ExceptionDataKey); err != nil {
		return p
	}
	if o.Approved == nil {
		o.Approved = o.Obj
	}
	o.Obj = obj
	o.Detail += "; with exceptions: " + strings.Join(notes, "; ")
	out := p
	out.Objects = slices.Clone(p.Objects)
	out.Objects[i] = o
	out.Exceptions = in
	return out
}

// PlansWithExceptions is plans with each plan's exceptions in effect added
// (WithExceptions), looked up with ex (nil: plans as it is).
func PlansWithExceptions(plans func(ctx context.Context, connID int64, version int) (Plan, error), ex ExceptionLookup, s ClusterSettings) func(context.Context, int64, int) (Plan, error) {
	if ex == nil {
		return plans
	}
	return func(ctx context.Context, connID int64, version int) (Plan, error) {
		p, err := plans(ctx, connID, version)
		if err != nil {
			return p, err
		}
		xs, err := ex(ctx, []int64{connID})
		if err != nil {
			return Plan{}, fmt.Errorf("provision: exceptions of connection %d: %w", connID, err)
		}
		return p.WithExceptions(xs[connID], s), nil
	}
}

// PlanBatchWithExceptions is a Worker.PlansAll with each plan's exceptions
// in effect added, looked up at once.
func PlanBatchWithExceptions(all func(ctx context.Context, refs []ConnVersion) ([]Plan, []error, error), ex ExceptionLookup, s ClusterSettings) func(context.Context, []ConnVersion) ([]Plan, []error, error) {
	if ex == nil || all == nil {
		return all
	}
	return func(ctx context.Context, refs []ConnVersion) ([]Plan, []error, error) {
		plans, errs, err := all(ctx, refs)
		if err != nil {
			return plans, errs, err
		}
		ids := make([]int64, 0, len(refs))
		for _, r := range refs {
			ids = append(ids, r.ConnectionID)
		}
		xs, err := ex(ctx, ids)
		if err != nil {
			return nil, nil, fmt.Errorf("provision: exceptions: %w", err)
		}
		for i := range plans {
			if errs[i] == nil {
				plans[i] = plans[i].WithExceptions(xs[plans[i].ConnectionID], s)
			}
		}
		return plans, errs, nil
	}
}
