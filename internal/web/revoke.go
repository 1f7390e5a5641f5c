package web

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// revokeForm offers the revocation form to an admin while the
// connection's state allows it, saying what it will do on the cluster.
func (s *Server) revokeForm(p workflow.Principal, obj workflow.Object, orch workflow.Orchestrator, d *views.ConnectionDetail) {
	if !workflow.Decide(p, workflow.ActionRevoke, obj).Allowed {
		return
	}
	d.RevokeURL = fmt.Sprintf("/connections/%d/revoke", d.ID)
	if orch == workflow.OrchestratorSlurm {
		d.RevokeNote = "Revoking removes the team from Slurm's accounting database (sacctmgr): its account's coordinators and its members' associations, then the account and its QoS. " +
			"Every step is recorded; the connection ends revoked, its history kept."
		if s.dryRunFor(orch) {
			d.RevokeNote += " No Slurm transport is configured: the steps are recorded in dry-run mode and nothing is removed."
		}
		return
	}
	namespace := "kept and locked (zero quota, labelled " + provision.LabelRevoked + "=true), with what the team left in it"
	if s.opts.Cluster.OnRevoke == provision.RevokeDelete {
		namespace = "deleted, with everything in it"
	}
	d.RevokeNote = "Revoking removes the team's access first (RoleBindings, Roles, ServiceAccount), then its queue, quota and " +
		"network policies; the namespace is " + namespace + ". Every step is recorded; the connection ends revoked, its history kept."
	if s.opts.DryRun {
		d.RevokeNote += " No cluster is configured: the steps are recorded in dry-run mode and nothing is removed."
	}
}

// revoke starts an admin's revocation of a connection, with a reason.
func (s *Server) revoke(c echo.Context) error {
	p, conn, obj, err := s.loadConnection(c)
	if err != nil {
		return err
	}
	if err := allowed(p, workflow.ActionRevoke, obj); err != nil {
		return err
	}
	reason := strings.TrimSpace(c.FormValue("reason"))
	msg := reasonProblem(reason, "Give a reason: it is recorded in the connection's history and shown to the team.")
	if msg != "" {
		d, err := s.detail(c, p, conn, obj)
		if err != nil {
			return err
		}
		d.RevokeReason, d.RevokeError = reason, msg
		return s.renderDetail(c, http.StatusUnprocessableEntity, conn.ID, d)
	}
	if _, _, err := s.opts.DB.Revoke(c.Request().Context(), conn.ID, actor(p), reason, s.opts.Now()); err != nil {
		return s.lifecycleError(err)
	}
	return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/connections/%d", conn.ID))
}

// maxReasonLen caps the reason of every decision form (approvals,
// revocations, holds, reviews, cost policies).
const maxReasonLen = 2000

// reasonProblem is what is wrong with a decision's reason, "" when
// nothing: needed is the message when it is missing (it says why a reason
// is asked for).
func reasonProblem(reason, needed string) string {
	switch {
	case reason == "":
		return needed
	case len(reason) > maxReasonLen:
		return fmt.Sprintf("Keep the reason under %d characters.", maxReasonLen)
	}
	return ""
}
