package web

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

func driftView(r store.DriftReport) views.DriftView {
	v := views.DriftView{ConnectionID: r.ConnectionID, Href: fmt.Sprintf("/connections/%d", r.ConnectionID),
		Team: r.Team, CheckedAt: fmtWhen(r.CheckedAt), Error: r.Error}
	for _, it := range r.Items {
		v.Items = append(v.Items, it.String())
	}
	return v
}

// connectionDrift is the drift panel of a connection, or nil before any check.
func (s *Server) connectionDrift(c echo.Context, p workflow.Principal, conn store.Connection, obj workflow.Object) (*views.DriftView, error) {
	r, err := s.opts.DB.Drift(c.Request().Context(), conn.ID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	v := driftView(r)
	if len(v.Items) > 0 && workflow.Decide(p, workflow.ActionReapply, obj).Allowed {
		v.ReapplyURL = fmt.Sprintf("/connections/%d/reapply", conn.ID)
	}
	return &v, nil
}

// driftOverview lists the connections with drift, for admins.
func (s *Server) driftOverview(c echo.Context) error {
	if _, err := authorize(c, workflow.ActionViewAdminHome, workflow.Object{}); err != nil {
		return err
	}
	reports, err := s.opts.DB.DriftOverview(c.Request().Context())
	if err != nil {
		return err
	}
	rows := make([]views.DriftView, 0, len(reports))
	for _, r := range reports {
		rows = append(rows, driftView(r))
	}
	return render(c, http.StatusOK, views.DriftOverviewPage(s.page(c, "Drift"), rows, !s.opts.DryRun || s.opts.SlurmTransport))
}

// reapply queues a job that re-applies the approved plan and removes role
// bindings beyond it.
func (s *Server) reapply(c echo.Context) error {
	p, conn, obj, err := s.loadConnection(c)
	if err != nil {
		return err
	}
	if err := allowed(p, workflow.ActionReapply, obj); err != nil {
		return err
	}
	_, err = s.opts.DB.EnqueueReapply(c.Request().Context(), conn.ID, actor(p), "re-apply requested to fix drift", s.opts.Now())
	return s.afterEnqueue(c, conn.ID, err)
}
