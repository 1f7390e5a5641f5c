package web

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// planView builds the provisioning plan of a version for display; with
// preview, each AWS call is looked up on AWS (Options.AWSPreview). Without
// full (owners and members), a failure's client-go text is reduced to the
// step and the kind of failure (publicFailure's words). It also returns the
// plan it built, nil when there is none.
func (s *Server) planView(ctx context.Context, conn store.Connection, v store.Version, preview, full bool) (*views.PlanView, *provision.Plan) {
	id := conn.ID
	pv := &views.PlanView{DryRun: s.dryRunFor(v.Contract.Orchestrator)}
	if fe := v.Contract.Validate(workflow.ValidationEnv{Now: s.opts.Now()}); len(fe) > 0 {
		pv.Error = "No plan yet: the contract is incomplete (" + strconv.Itoa(len(fe)) + " field(s) to complete)."
		return pv, nil
	}
	built, err := s.builtPlan(id, v)
	if err != nil {
		pv.Error = "No plan: " + err.Error()
		return pv, nil
	}
	plan := built.plan
	// The plan is shared (planTextCache): its warnings are copied before
	// this view appends its own.
	pv.Summary, pv.Warnings = plan.Summary(), slices.Clone(plan.Warnings)
	pv.YAML, pv.Hash = built.yaml, built.hash
	if plan = s.withExceptions(ctx, conn, v, plan, pv); len(plan.Exceptions) > 0 {
		pv.Summary, pv.YAML = plan.Summary(), plan.YAML()
	}
	if preview && s.opts.ClusterCheck != nil {
		s.readinessWarnings(ctx, pv)
	}
	s.awsCallsView(ctx, plan, preview, pv)
	// Before approval, say what each object would do on the cluster as it
	// is now: create, update (which fields), or nothing.
	if s.opts.Live != nil && !conn.State.Committed() {
		s.liveComparison(ctx, plan, full, pv)
	}
	return pv, &plan
}

// readinessWarnings adds what the cluster serves and enforces now (the
// readiness page's checks): an old Kueue would fail the job, and
// unenforced NetworkPolicies void the plan's isolation.
func (s *Server) readinessWarnings(ctx context.Context, pv *views.PlanView) {
	markLive(ctx)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, ch := range s.opts.ClusterCheck.PlanReadiness(rctx).Checks {
		if ch.Status == provision.CheckFailing && (ch.Name == provision.CheckKueueAPI || ch.Name == provision.CheckNetworkPolicies) {
			pv.Warnings = append(pv.Warnings, "Cluster readiness, "+ch.Name+": "+ch.Detail+" "+ch.Todo)
		}
	}
}

// awsCallsView lists the plan's AWS calls, before and after the cluster's
// steps; with preview, each as AWS has it now (a few reads per call).
func (s *Server) awsCallsView(ctx context.Context, plan provision.Plan, preview bool, pv *views.PlanView) {
	var actx context.Context
	if s.opts.AWSPreview != nil && preview {
		markLive(ctx)
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	for _, call := range plan.AWS {
		cv := views.AWSCallView{Service: call.Service, Kind: string(call.Kind), Name: call.Name, Operations: call.Operations}
		if actx != nil {
			now := s.opts.AWSPreview.PreviewCall(actx, call)
			cv.Now, cv.NowDetail = now.State, now.Detail
			switch {
			case now.Stops:
				pv.Warnings = append(pv.Warnings, "On AWS now, "+call.Title()+" would stop the job: "+now.Detail)
			case now.Unknown:
				pv.Warnings = append(pv.Warnings, "Could not look up "+call.Title()+" on AWS: "+now.Detail)
			}
			pv.Warnings = append(pv.Warnings, now.Warnings...)
		}
		for _, f := range call.Fields {
			cv.Fields = append(cv.Fields, [2]string{f.Name, f.Value})
		}
		for _, g := range call.Grants() {
			cv.Grants = append(cv.Grants, views.AWSGrantView{Policy: g.Policy, Scope: g.Scope, Allows: g.Allows})
		}
		if provision.BeforeCluster(call) {
			pv.AWSBefore = append(pv.AWSBefore, cv)
		} else {
			pv.AWSAfter = append(pv.AWSAfter, cv)
		}
	}
}

// liveComparison marks each object of the plan with what applying it would
// do on the cluster now, warns of objects the namespace has beyond the
// plan, and of a namespace someone else created.
func (s *Server) liveComparison(ctx context.Context, plan provision.Plan, full bool, pv *views.PlanView) {
	markLive(ctx)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	items, err := s.opts.Live.Drift(cctx, plan)
	if err != nil {
		detail := err.Error()
		if !full {
			detail = failureKind(detail) + ". The platform team sees the full error"
		}
		pv.Warnings = append(pv.Warnings, "Could not compare the plan with the cluster: "+detail)
		return
	}
	byRef := map[string]workflow.DriftItem{}
	for _, it := range items {
		byRef[it.Kind+" "+it.Ref] = it
	}
	for i, o := range plan.Objects {
		it, ok := byRef[o.Kind+" "+o.Ref()]
		switch {
		case !ok:
			pv.Summary[i] = "unchanged · " + pv.Summary[i]
		case it.What == "deleted" && o.Owner != provision.OwnerPortal:
			pv.Summary[i] = "made by HyperPod · " + pv.Summary[i]
		case it.What == "deleted":
			pv.Summary[i] = "create · " + pv.Summary[i]
		default:
			pv.Summary[i] = "update " + strings.Join(it.Fields, ", ") + " · " + pv.Summary[i]
		}
	}
	for _, it := range items {
		if it.What == "extra" {
			pv.Warnings = append(pv.Warnings, "The namespace already has "+it.Kind+" "+it.Ref+" ("+it.Detail+"), which this plan does not contain.")
		}
	}
	nc, err := s.opts.Live.CheckNamespace(cctx, plan)
	switch {
	case err != nil:
		pv.Warnings = append(pv.Warnings, "Could not check who created namespace "+plan.Namespace+": "+err.Error())
	case nc.Foreign:
		pv.ForeignNamespace = nc.Namespace
		pv.Warnings = append(pv.Warnings, "Namespace "+nc.Namespace+" already exists, and neither the portal nor HyperPod created it: approving needs the explicit adoption below.")
	}
}

// planTextCache keeps the plans the detail page showed, with their YAML
// and hash (issue 15: building the plan for the plan and access panels and
// rendering its YAML twice, once to show and once to hash, were most of
// the page's time). A plan is a pure function of the
// connection's id, its contract version (named by its number and hash) and
// the process's cluster settings (Options.Cluster, fixed for the process's
// life), so an entry never goes stale and each replica may keep its own.
// It holds at most planTextCacheMax entries and starts over when full.
type planTextCache struct {
	mu sync.Mutex
	m  map[planKey]planText
}

// planKey names a plan: the connection, the version and the version's hash.
type planKey struct {
	id      int64
	version int
	hash    string
}

type planText struct {
	plan       provision.Plan
	yaml, hash string
}

const planTextCacheMax = 1024

// get returns the plan key names with its YAML and hash, from the cache
// when it has key, else built by build (an error is not cached). The plan
// is shared by every caller: read it, never change it.
func (c *planTextCache) get(key planKey, build func() (provision.Plan, error)) (planText, error) {
	c.mu.Lock()
	t, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return t, nil
	}
	plan, err := build()
	if err != nil {
		return planText{}, err
	}
	t = planText{plan: plan, yaml: plan.YAML(), hash: plan.Hash()}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= planTextCacheMax {
		c.m = map[planKey]planText{}
	}
	c.m[key] = t
	c.mu.Unlock()
	return t, nil
}

// builtPlan is provision.BuildPlan of version v of connection id with the
// process's cluster settings, with its YAML and hash, built once per
// version (planTextCache). Shared: read it, never change it.
func (s *Server) builtPlan(id int64, v store.Version) (planText, error) {
	return s.planTexts.get(planKey{id, v.Version, v.Hash}, func() (provision.Plan, error) {
		return provision.BuildPlan(id, v.Version, v.Hash, v.Contract, s.opts.Cluster)
	})
}

// len is the number of cached plans (for tests).
func (c *planTextCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// withExceptions is the approved version's plan of a live connection with
// its exceptions in effect (provision.WithExceptions: the parameter object
// the cluster has), each noted in pv with its end; any other plan as it
// is. The hash stays the approved plan's.
func (s *Server) withExceptions(ctx context.Context, conn store.Connection, v store.Version, plan provision.Plan, pv *views.PlanView) provision.Plan {
	if !conn.State.Live() || v.Version != conn.ApprovedVersion {
		return plan
	}
	xs, err := s.opts.DB.ExceptionsInEffect(ctx, []int64{conn.ID})
	if err != nil {
		pv.Warnings = append(pv.Warnings, "Could not read the connection's exceptions: the plan shows the contract's values only.")
		return plan
	}
	plan = plan.WithExceptions(xs[conn.ID], s.opts.Cluster)
	for _, x := range plan.Exceptions {
		pv.Exceptions = append(pv.Exceptions, fmt.Sprintf("priority class %s (label %s) in ConfigMap %s, key priorityClasses: from exception #%d, until %s",
			x.PriorityClass, s.opts.Cluster.KueuePriorityClass(x.PriorityClass), provision.NameAdmissionParams, x.ID, fmtWhen(x.End)))
	}
	return plan
}

// dryRunFor says whether the jobs of a connection on orch are recorded
// rather than run (provision.RunsDry, the worker's rule).
func (s *Server) dryRunFor(orch workflow.Orchestrator) bool {
	return provision.RunsDry(orch == workflow.OrchestratorSlurm, s.opts.DryRun, s.opts.SlurmTransport)
}
