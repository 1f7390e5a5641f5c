package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// decisionInput is one admin decision on a connection's version: from the
// page's decide form, or from the API's approve, reject and
// request-changes routes (apidecide.go). It names exactly what it decides
// on: the version and the contract hash, and for an approval the plan hash
// the admin saw and the namespace they adopt ("" for none).
type decisionInput struct {
	kind                          string // approve, reject or request_changes
	version                       int
	hash, planHash, adopt, reason string
}

// decisionKinds are the decisions an admin makes on a submitted version.
var decisionKinds = map[string]workflow.Action{"approve": workflow.ActionApprove, "reject": workflow.ActionReject, "request_changes": workflow.ActionRequestChanges}

// decide records an admin's approval, rejection or change request of the
// exact version and hash shown on the page (runDecision).
func (s *Server) decide(c echo.Context) error {
	p, conn, obj, err := s.loadConnection(c)
	if err != nil {
		return err
	}
	if s.decideHooks.loaded != nil {
		s.decideHooks.loaded() // before the body is read (decideHooks)
	}
	version, _ := strconv.Atoi(c.FormValue("version"))
	in := decisionInput{kind: c.FormValue("decision"), version: version, hash: c.FormValue("hash"), planHash: c.FormValue("plan_hash"),
		adopt: c.FormValue("adopt_namespace"), reason: strings.TrimSpace(c.FormValue("reason"))}
	if _, ok := decisionKinds[in.kind]; !ok {
		return echo.NewHTTPError(http.StatusBadRequest)
	}
	refused, err := s.runDecision(c, p, conn, obj, in)
	switch {
	case err != nil:
		return err
	case refused == nil:
		return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/connections/%d", conn.ID))
	}
	rerender := s.rerenderDetail(c, p, conn.ID, obj, in.reason)
	if refused.field == "reason" {
		return rerender(refused.status, "", refused.notice)
	}
	return rerender(refused.status, refused.notice, "")
}

// runDecision is the command behind both doors: it authorizes p's decision
// (workflow.Decide), checks the reason and the pin, learns the cluster's
// facts for an approval, and records it through the store, whose
// transaction decides again against the rows as they are then. A refusal
// the admin can act on is returned as such (the page shows it on the
// connection, the API as a problem document); a refusal of the rules is
// the error.
func (s *Server) runDecision(c echo.Context, p workflow.Principal, conn store.Connection, obj workflow.Object, in decisionInput) (*refusal, error) {
	act := decisionKinds[in.kind]
	in.reason = strings.TrimSpace(in.reason)
	// An approval that lost a race to another admin's is said as that
	// (409, workflow.LostApprovalRace), not as the policy's refusal.
	if act == workflow.ActionApprove && workflow.LostApprovalRace(p, obj, in.version, conn.CurrentVersion) {
		last, err := s.opts.DB.LastApproval(c.Request().Context(), conn.ID, in.version)
		if err != nil {
			return nil, err
		}
		already := &workflow.AlreadyApprovedError{Version: in.version, Last: last}
		return &refusal{status: http.StatusConflict, notice: alreadyApprovedNotice(already), cause: already}, nil
	}
	if err := allowed(p, act, obj); err != nil {
		return nil, err
	}
	if msg := reasonProblem(in.reason, "Give a reason: it is recorded with the decision and shown to the requester."); msg != "" {
		return &refusal{status: http.StatusUnprocessableEntity, notice: msg, field: "reason"}, nil
	}
	// Without the version and hash a decision would apply to whatever is
	// current (and an approval would queue an unpinned job). The store
	// refuses an unpinned approval again inside its transaction.
	if in.version <= 0 || in.hash == "" {
		return &refusal{status: http.StatusBadRequest, notice: "Not recorded: a decision must name the version and the contract hash it decides on. Reload the page and decide again."}, nil
	}
	expect := store.Expect{Version: in.version, Hash: in.hash, PlanHash: in.planHash}
	var cluster workflow.ClusterFacts
	if act == workflow.ActionApprove {
		var refused *refusal
		var err error
		if cluster, refused, err = s.approvalFacts(c, conn, &expect, in.adopt); err != nil || refused != nil {
			return refused, err
		}
	}
	// Everything above was read before the store's transaction: the
	// workflow's command decides inside it, against the rows as they are
	// then.
	if s.decideHooks.checked != nil {
		s.decideHooks.checked()
	}
	ctx := c.Request().Context()
	var err error
	switch act {
	case workflow.ActionApprove:
		_, _, err = s.opts.DB.Approve(ctx, conn.ID, actor(p), expect, in.reason, cluster, s.opts.Now())
	case workflow.ActionReject:
		_, err = s.opts.DB.Transition(ctx, conn.ID, workflow.EventReject, actor(p), in.reason, expect, s.opts.Now())
	case workflow.ActionRequestChanges:
		_, err = s.opts.DB.Transition(ctx, conn.ID, workflow.EventRequestChanges, actor(p), in.reason, expect, s.opts.Now())
	}
	if err == nil {
		return nil, nil
	}
	if refused := s.decisionRefusal(c, conn.ID, err, cluster); refused != nil {
		refused.cause = err
		return refused, nil
	}
	if errors.Is(err, workflow.ErrNotIndependent) {
		// The handler's own check passed: the request was filed, edited or
		// submitted by this user since it read the connection.
		return nil, &userError{page: views.ErrorPage{Status: http.StatusForbidden, Title: "Not allowed",
			Message: "Nothing was recorded: nobody decides on a request they filed, submitted or edited, and you did. Another admin must decide.",
			Action:  "Back to the request", ActionURL: fmt.Sprintf("/connections/%d", conn.ID)}, err: err}
	}
	return nil, s.lifecycleError(err)
}

// rerenderDetail returns what shows the connection's page again, as it is
// now, with a notice or the reason's error and the reason typed kept.
func (s *Server) rerenderDetail(c echo.Context, p workflow.Principal, id int64, obj workflow.Object, reason string) func(status int, notice, reasonErr string) error {
	return func(status int, notice, reasonErr string) error {
		fresh, err := s.opts.DB.Connection(c.Request().Context(), id)
		if err != nil {
			return err
		}
		obj.State = fresh.State
		d, err := s.detail(c, p, fresh, obj)
		if err != nil {
			return err
		}
		d.Notice, d.ReasonError, d.Reason = notice, reasonErr, reason
		return s.renderDetail(c, status, id, d)
	}
}

// refusal is a decision not recorded: the page again, with this status and
// notice (or, with field "reason", the reason's message), or the API's
// problem document. cause is the store's error or the stale version behind
// it, if any (the API answers a *store.StaleError 412).
type refusal struct {
	status int
	notice string
	field  string
	cause  error
}

// approvalFacts learns what the approval's rules need from the cluster,
// before the store's transaction, about the version the approval names
// (the body may have been read after an edit). workflow.Approve checks,
// inside that transaction, that it is still the current version, and every
// other rule (independence, approvals needed, capacity, claims, Slurm)
// against the rows as they are then. A refusal: the version changed, or the
// cluster could not be read.
func (s *Server) approvalFacts(c echo.Context, conn store.Connection, expect *store.Expect, adopt string) (workflow.ClusterFacts, *refusal, error) {
	ctx := c.Request().Context()
	var cluster workflow.ClusterFacts
	cur, err := s.opts.DB.Version(ctx, conn.ID, expect.Version)
	if errors.Is(err, store.ErrNotFound) || err == nil && cur.Hash != expect.Hash {
		fresh, ferr := s.opts.DB.Connection(ctx, conn.ID)
		if ferr != nil {
			return cluster, nil, ferr
		}
		stale := &store.StaleError{WantVersion: expect.Version, WantHash: expect.Hash, Current: fresh}
		return cluster, &refusal{status: http.StatusConflict, notice: s.staleNotice(c, conn.ID, stale), cause: stale}, nil
	}
	if err != nil {
		return cluster, nil, err
	}
	plan, perr := provision.BuildPlan(conn.ID, cur.Version, cur.Hash, cur.Contract, s.opts.Cluster)
	cluster.PlanError = perr
	if perr != nil {
		return cluster, nil, nil
	}
	// The approval pins the plan the admin read; the job would refuse to
	// apply any other (JobOrder.PlanHash), so an approval naming another
	// plan than the version's now is refused before it is recorded.
	if expect.PlanHash != "" && expect.PlanHash != plan.Hash() {
		return cluster, &refusal{status: http.StatusConflict, notice: "Not approved: the provisioning plan you approved is not this version's plan as the portal builds it now (the cluster's settings changed, or the plan hash is wrong). Review the plan and decide again.",
			cause: workflow.ErrUnpinned}, nil
	}
	// An existing namespace that neither the portal nor HyperPod
	// created is taken over only when the admin adopts it here,
	// explicitly (issue 10 item 14); the worker checks again before
	// it applies anything.
	if s.opts.Live != nil && plan.Slurm == nil {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		nc, err := s.opts.Live.CheckNamespace(cctx, plan)
		cancel()
		if err != nil {
			s.opts.Logger.Warn("approval: namespace check", "connection_id", conn.ID, "error", err.Error())
			return cluster, &refusal{status: http.StatusServiceUnavailable, notice: "Not approved: the portal could not read namespace " + plan.Namespace + " on the cluster, to check whether someone else created it. Try again in a moment."}, nil
		}
		if nc.Foreign {
			cluster.ForeignNamespace = nc.Namespace
			if adopt == nc.Namespace {
				expect.Adopt = nc.Namespace
			}
		}
	}
	// A project-facing role must not manage the cluster: IAM's policy
	// simulation of the project and access roles, for every cluster
	// lifecycle action (provision.ClusterLifecycleChecker).
	if s.opts.LifecycleCheck != nil {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		cluster.ManagesCluster, cluster.MissingRoles, err = s.opts.LifecycleCheck.ManagesCluster(lctx, []string{cur.Contract.ProjectRoleARN, cur.Contract.AccessRoleARN})
		cancel()
		if err != nil {
			s.opts.Logger.Warn("approval: cluster lifecycle simulation", "connection_id", conn.ID, "error", err.Error())
			cluster.LifecycleUnchecked = "IAM's policy simulation of the project and access roles did not answer"
		}
	}
	return cluster, nil, nil
}

// decisionRefusal says why the store did not record a decision, for the
// refusals the admin can act on; nil for the others.
func (s *Server) decisionRefusal(c echo.Context, id int64, err error, cluster workflow.ClusterFacts) *refusal {
	var stale *store.StaleError
	var already *workflow.AlreadyApprovedError
	conflict := func(notice string) *refusal { return &refusal{status: http.StatusConflict, notice: notice} }
	switch {
	case errors.As(err, &already):
		return conflict(alreadyApprovedNotice(already))
	case errors.As(err, &stale):
		return conflict(s.staleNotice(c, id, stale))
	case errors.Is(err, workflow.ErrUnpinned):
		return &refusal{status: http.StatusBadRequest, notice: "Not approved: an approval must name the version, the contract hash and the plan hash it approves. Reload the page and decide again."}
	case errors.Is(err, workflow.ErrNotProvisionable):
		return conflict("Not approved: " + err.Error() + ". Request changes instead.")
	case errors.Is(err, workflow.ErrForeignNamespace):
		ns := cluster.ForeignNamespace
		return conflict("Not approved: namespace " + ns + " already exists on the cluster, and neither the portal nor HyperPod created it. " +
			"Approving would force the team's default-deny NetworkPolicy, quota and RoleBindings onto whatever runs there. " +
			"Tick \"Adopt the existing namespace " + ns + "\" to hand it to the team deliberately, or request changes.")
	case errors.Is(err, workflow.ErrOverCapacity):
		return conflict("Not approved: the request no longer fits the cluster's free capacity.")
	case errors.Is(err, workflow.ErrManagesCluster):
		return conflict("Not approved: the contract's roles may manage the cluster, which a project-facing role must never do (" +
			strings.TrimPrefix(err.Error(), workflow.ErrManagesCluster.Error()+": ") + "). Remove these permissions from the roles' IAM policies, or request changes.")
	case errors.Is(err, workflow.ErrRoleMissing):
		return conflict("Not approved: IAM has no role " + strings.Join(cluster.MissingRoles, ", ") + ", so the portal cannot check that it may not manage the cluster (a role made after the approval could be given any permission). " +
			"Create the role, without cluster lifecycle permissions, and approve again; or request changes.")
	case errors.Is(err, workflow.ErrChecksDown) && cluster.LifecycleUnchecked != "":
		return &refusal{status: http.StatusServiceUnavailable, notice: "Not approved: the portal could not check with IAM that the project and access roles cannot manage the cluster (IAM's policy simulation did not answer). Nothing was recorded; try again in a minute."}
	case errors.Is(err, workflow.ErrChecksDown):
		s.logFailure(c, err)
		return &refusal{status: http.StatusServiceUnavailable, notice: "Not approved: the portal could not check the request's namespaces and roles against the other connections just now (its database did not answer). Nothing was recorded; try again in a minute."}
	case errors.Is(err, workflow.ErrClaimTaken):
		return conflict("Not approved: " + strings.TrimPrefix(err.Error(), workflow.ErrClaimTaken.Error()+": ") + ".")
	case errors.Is(err, workflow.ErrAlreadyDecided):
		return conflict("You already approved this version; it needs another admin's approval.")
	}
	return nil
}

// alreadyApprovedNotice tells the loser of a race of approvals who won.
func alreadyApprovedNotice(e *workflow.AlreadyApprovedError) string {
	return "Nothing was recorded: " + e.Error() + ", which was all the approval it needed. Nothing is left to approve."
}

// slurmView is what the portal sets up for a Slurm contract on this
// cluster (provision.SlurmPlan's exact commands; the approval pins the
// plan's hash, which covers them) and what it does not.
func (s *Server) slurmView(c workflow.Contract) *views.SlurmView {
	v := &views.SlurmView{Template: s.opts.Cluster.Slurm.UserTemplate}
	if v.Template == "" {
		v.Template = provision.DefaultSlurmUserTemplate
	}
	if p, _, err := provision.SlurmPlan(c, s.opts.Cluster); err != nil {
		v.Error = err.Error()
	} else {
		v.Cluster = p.Cluster
		for _, cmd := range p.Commands() {
			v.Commands = append(v.Commands, views.SlurmStepView{What: cmd.Why, Command: cmd.String()})
		}
	}
	for _, st := range workflow.SlurmManualSteps(c) {
		v.Steps = append(v.Steps, views.SlurmStepView{What: st.What, Command: st.Command})
	}
	return v
}

// staleNotice says what changed between the version the admin saw and now.
func (s *Server) staleNotice(c echo.Context, id int64, st *store.StaleError) string {
	msg := fmt.Sprintf("Nothing was recorded: the contract changed after you opened it (you saw version %d, it is now version %d, %s).",
		st.WantVersion, st.Current.CurrentVersion, st.Current.State.Label())
	old, err1 := s.opts.DB.Version(c.Request().Context(), id, st.WantVersion)
	cur, err2 := s.opts.DB.Version(c.Request().Context(), id, st.Current.CurrentVersion)
	if err1 == nil && err2 == nil {
		var parts []string
		for _, ch := range workflow.Diff(old.Contract, cur.Contract) {
			parts = append(parts, fmt.Sprintf("%s: %q → %q", ch.Label, ch.Old, ch.New))
		}
		if len(parts) > 0 {
			msg += " What changed: " + strings.Join(parts, "; ") + "."
		}
	}
	return msg + " Review the current version below and decide again."
}
