package web

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Holds (workflow/hold.go): the connection page shows a hold panel while
// the connection has one, and an independent admin's steps on it; the
// admin queue lists proposed holds. One route takes every step:
// POST /connections/:id/hold with step=confirm|drain|release|decline and a
// reason (a drain also needs the team's name typed as its confirmation).

// holdSteps are the admin's steps, each with the action that allows it.
var holdSteps = []struct {
	step   workflow.HoldStep
	action workflow.Action
	label  string
	danger bool
}{
	{workflow.HoldStepConfirm, workflow.ActionConfirmHold, "Confirm hold (no new admissions)", true},
	{workflow.HoldStepDrain, workflow.ActionConfirmHold, "Confirm hold and drain (evict running work)", true},
	{workflow.HoldStepRelease, workflow.ActionReleaseHold, "Release hold", false},
	{workflow.HoldStepDecline, workflow.ActionConfirmHold, "Decline the proposed hold", false},
}

func holdStepOf(step string) (workflow.HoldStep, workflow.Action, bool) {
	for _, h := range holdSteps {
		if string(h.step) == step {
			return h.step, h.action, true
		}
	}
	return "", "", false
}

// holdPanel fills the hold panel of a connection that has a hold.
// approved is the approved version, when the page loaded it (nil: the
// queue's wording).
func (s *Server) holdPanel(p workflow.Principal, conn store.Connection, obj workflow.Object, approved *store.Version, d *views.ConnectionDetail) {
	if conn.Hold == workflow.HoldNone || !conn.State.Live() {
		return // a revoked connection's hold is history (its audit events)
	}
	h := &views.HoldView{State: string(conn.Hold), Label: conn.Hold.Label(), By: conn.HoldBy, Reason: conn.HoldReason,
		At: fmtWhen(conn.HoldAt), DrainWord: conn.Team, DrainEffect: "running work will be evicted"}
	slurmConn := approved != nil && approved.Contract.Orchestrator == workflow.OrchestratorSlurm
	if slurmConn {
		h.Explain = slurmHoldExplain(conn.Hold, approved.Contract)
		h.DrainEffect = "the running jobs of account " + strings.ToLower(approved.Contract.SlurmScope.Account) + " will be cancelled (scancel)"
	} else if !s.opts.Cluster.ClusterQueueManagedByPortal {
		// HyperPod task governance created the team's LocalQueue; the hold
		// job forces spec.stopPolicy alone (provision.StopPolicy).
		h.Ownership = fmt.Sprintf("The team's LocalQueue is HyperPod task governance's (it created it, and owns Kueue's defaulted stopPolicy None). "+
			"A hold job takes over that one field, spec.stopPolicy, under the portal's field manager %s, and writes nothing else of HyperPod's queue. "+
			"Should HyperPod or anyone set it back, the drift check reports the queue.", provision.HoldFieldManager)
	}
	for _, st := range holdSteps {
		if workflow.HoldAllows(conn.Hold, st.step) && workflow.Decide(p, st.action, obj).Allowed {
			label := st.label
			if slurmConn && st.step == workflow.HoldStepDrain {
				label = "Confirm hold and drain (cancel running jobs)"
			}
			if st.step == workflow.HoldStepConfirm && approved != nil {
				label = "Confirm hold (" + workflow.HoldConfirmEffect(approved.Contract.Orchestrator) + ")"
			}
			h.Steps = append(h.Steps, views.HoldStepView{Step: string(st.step), Label: label, Danger: st.danger})
		}
	}
	if len(h.Steps) > 0 {
		h.URL = fmt.Sprintf("/connections/%d/hold", conn.ID)
	} else if p.HasRole(workflow.RoleAdmin) {
		act := workflow.ActionConfirmHold
		if conn.Hold.Applied() {
			act = workflow.ActionReleaseHold
		}
		h.Note = "You cannot decide this hold: " + workflow.Decide(p, act, obj).Reason + "."
	}
	d.Hold = h
}

// decideHold takes an admin's hold step.
func (s *Server) decideHold(c echo.Context) error {
	p, conn, obj, err := s.loadConnection(c)
	if err != nil {
		return err
	}
	if c.FormValue("step") == "retry" {
		return s.retryHold(c, p, conn, obj)
	}
	// Authorization first: an unknown step is checked as a confirmation,
	// so that nobody learns more than "not allowed" from a bad form.
	step, action, ok := holdStepOf(c.FormValue("step"))
	if !ok {
		action = workflow.ActionConfirmHold
	}
	if err := allowed(p, action, obj); err != nil {
		return err
	}
	if !ok {
		return &userError{page: views.ErrorPage{Status: http.StatusBadRequest, Title: "Unknown step",
			Message: "Choose one of the hold panel's buttons."}, err: fmt.Errorf("hold step %q", c.FormValue("step"))}
	}
	reason := strings.TrimSpace(c.FormValue("reason"))
	confirm := strings.TrimSpace(c.FormValue("confirm"))
	msg := reasonProblem(reason, "Give a reason: it is recorded in the connection's history and shown to the team.")
	if msg == "" && step == workflow.HoldStepDrain && confirm != conn.Team {
		msg = fmt.Sprintf("Hold and drain %s: type the team's name (%s) to confirm it.", workflow.HoldDrainEffect(s.orchestratorOf(c, conn)), conn.Team)
	}
	if msg == "" {
		_, _, err = s.opts.DB.DecideHold(c.Request().Context(), conn.ID, step, actor(p), confirm == conn.Team, reason, s.opts.Now())
		if err == nil {
			return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/connections/%d", conn.ID))
		}
		var he *workflow.HoldError
		switch {
		case errors.As(err, &he), errors.Is(err, workflow.ErrHoldNotLive), errors.Is(err, workflow.ErrNotIndependent):
			why := workflow.ErrNotIndependent.Error()
			switch {
			case he != nil:
				why = he.Error()
			case errors.Is(err, workflow.ErrHoldNotLive):
				why = workflow.ErrHoldNotLive.Error()
			}
			return &userError{page: views.ErrorPage{Status: http.StatusConflict, Title: "That is no longer possible",
				Message: "Nothing was changed: " + why + ". Reload the connection to see where it stands.",
				Action:  "Back to the connection", ActionURL: fmt.Sprintf("/connections/%d", conn.ID)}, err: err}
		case errors.Is(err, workflow.ErrHoldReason):
			msg = err.Error()
		case errors.Is(err, workflow.ErrDrainUnconfirmed):
			// In the words of the connection's orchestrator (evicts on
			// EKS, scancel on Slurm), without the store's prefix.
			msg = workflow.ErrDrainUnconfirmed.Error()
			if de := (*workflow.DrainUnconfirmedError)(nil); errors.As(err, &de) {
				msg = de.Error()
			}
		default:
			return s.lifecycleError(err)
		}
	}
	d, err := s.detail(c, p, conn, obj)
	if err != nil {
		return err
	}
	if d.Hold != nil {
		d.Hold.Step, d.Hold.Input, d.Hold.Confirm, d.Hold.Error = string(step), reason, confirm, msg
	}
	return s.renderDetail(c, http.StatusUnprocessableEntity, conn.ID, d)
}

// holdRows are the proposed holds for the admin queue.
func (s *Server) holdRows(c echo.Context) ([]views.HoldRow, error) {
	conns, err := s.opts.DB.HoldQueue(c.Request().Context(), 200)
	if err != nil {
		return nil, err
	}
	rows := make([]views.HoldRow, 0, len(conns))
	for _, h := range conns {
		rows = append(rows, views.HoldRow{ID: h.ID, Href: fmt.Sprintf("/connections/%d#hold", h.ID), Team: h.Team, Purpose: h.Purpose,
			By: h.HoldBy, Reason: h.HoldReason, Waiting: age(s.opts.Now().Sub(h.HoldAt))})
	}
	return rows, nil
}

// retryHold queues a failed hold job again (the progress panel's "Try
// again"): it applies the stopPolicy the connection's hold says now.
func (s *Server) retryHold(c echo.Context, p workflow.Principal, conn store.Connection, obj workflow.Object) error {
	if err := allowed(p, workflow.ActionRetryHold, obj); err != nil {
		return err
	}
	if _, err := s.opts.DB.EnqueueHold(c.Request().Context(), conn.ID, actor(p), "retry after the hold job failed", s.opts.Now()); err != nil {
		if errors.Is(err, store.ErrJobOpen) {
			return &userError{page: views.ErrorPage{Status: http.StatusConflict, Title: "Already queued",
				Message: "A hold job of this connection is already queued or running.", Action: "Back to the connection",
				ActionURL: fmt.Sprintf("/connections/%d", conn.ID)}, err: err}
		}
		return s.lifecycleError(err)
	}
	return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/connections/%d", conn.ID))
}

// orchestratorOf is the orchestrator of conn's approved version ("" when
// it cannot be read: the EKS wording).
func (s *Server) orchestratorOf(c echo.Context, conn store.Connection) workflow.Orchestrator {
	if conn.ApprovedVersion == 0 {
		return ""
	}
	v, err := s.opts.DB.Version(c.Request().Context(), conn.ID, conn.ApprovedVersion)
	if err != nil {
		return ""
	}
	return v.Contract.Orchestrator
}

// slurmHoldExplain is the hold panel's wording for a Slurm connection: what
// the hold does to the team's account (provision.SlurmHoldWording).
func slurmHoldExplain(hold workflow.Hold, c workflow.Contract) string {
	account := strings.ToLower(c.SlurmScope.Account)
	switch hold {
	case workflow.HoldProposed:
		return "Nothing is stopped yet. Confirming sets " + provision.SlurmHoldWording(workflow.StopHold, account) +
			". Hold and drain also cancels the running jobs. Release clears the limit."
	case workflow.HoldOn:
		return "In effect: " + provision.SlurmHoldWording(workflow.StopHold, account) +
			". Hold and drain also cancels the running jobs (scancel). Release clears the limit: the plan's limits alone again."
	}
	return "In effect: " + provision.SlurmHoldWording(workflow.StopHoldAndDrain, account) +
		". Release clears the limit: the plan's limits alone again; cancelled jobs are not brought back."
}

// slurmHoldCommands adds to a Slurm connection's section what its hold in
// effect ran on top of the plan (provision.SlurmHoldCommands).
func (s *Server) slurmHoldCommands(conn store.Connection, approved *store.Version, v *views.SlurmView) {
	if v == nil || approved == nil || !conn.Hold.Applied() || !conn.State.Live() {
		return
	}
	p, _, err := provision.SlurmPlan(approved.Contract, s.opts.Cluster)
	if err != nil {
		return // the section says why there is no plan
	}
	v.Hold = conn.Hold.Label()
	for _, c := range provision.SlurmHoldCommands(&p, conn.Hold.StopPolicy()) {
		v.HoldCommands = append(v.HoldCommands, views.SlurmStepView{What: c.Why, Command: c.Command})
	}
}
