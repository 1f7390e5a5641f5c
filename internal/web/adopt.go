package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// auditAdoptQuota is the audit action of an admin adopting a compute quota.
const auditAdoptQuota = "connection.adopt_compute_quota"

// adoptForm is the adoption form of the detail page, for admins, when the
// last provisioning job stopped on a compute quota made outside the portal
// (provision.ForeignQuotaARN) and the portal makes real AWS calls.
func (s *Server) adoptForm(p workflow.Principal, conn store.Connection, obj workflow.Object, d *views.ConnectionDetail) {
	if s.opts.Quotas == nil || d.Progress == nil || d.Progress.State != string(workflow.JobFailed) ||
		!workflow.Decide(p, workflow.ActionRetryJob, obj).Allowed {
		return
	}
	quotaARN, ok := provision.ForeignQuotaARN(d.Progress.LastError)
	if !ok {
		return
	}
	d.AdoptQuota = &views.AdoptQuotaView{URL: fmt.Sprintf("/connections/%d/adopt-quota", conn.ID), ARN: quotaARN}
}

// approvedPlan is the connection's approved plan; ok is false when it has
// no compute quota.
func (s *Server) approvedPlan(ctx context.Context, conn store.Connection) (plan provision.Plan, ok bool, err error) {
	v, err := s.opts.DB.Version(ctx, conn.ID, conn.ApprovedVersion)
	if err != nil {
		return plan, false, err
	}
	plan, err = provision.BuildPlan(conn.ID, v.Version, v.Hash, v.Contract, s.opts.Cluster)
	if err != nil {
		return plan, false, err
	}
	return plan, provision.PlanQuota(plan) != nil, nil
}

// adoptQuota is an admin's explicit choice to adopt a compute quota made
// outside the portal for this connection's team: it checks the quota is the
// team's on the cluster and nobody else's, tags it as this connection's,
// records the choice in the audit trail, and queues provisioning again,
// which updates the quota to the contract. A refused ARN re-renders the
// page with the reason beside the field.
func (s *Server) adoptQuota(c echo.Context) error {
	p, conn, obj, err := s.loadConnection(c)
	if err != nil {
		return err
	}
	if err := allowed(p, workflow.ActionRetryJob, obj); err != nil {
		return err
	}
	ctx := c.Request().Context()
	back := views.ErrorPage{Status: http.StatusConflict, Action: "Back to the connection", ActionURL: fmt.Sprintf("/connections/%d", conn.ID)}
	if s.opts.Quotas == nil {
		back.Title, back.Message = "No AWS calls are made", "This portal makes no AWS calls (dry run or AWS off), so there is no compute quota to adopt."
		return &userError{page: back}
	}
	plan, hasQuota, err := s.approvedPlan(ctx, conn)
	if err != nil || !hasQuota {
		back.Title, back.Message = "No compute quota in the plan", "This connection's approved plan has no compute quota, so there is nothing to adopt."
		return &userError{page: back, err: err}
	}
	quotaARN := strings.TrimSpace(c.FormValue("quota_arn"))
	rerender := func(status int, msg string) error {
		d, err := s.detail(c, p, conn, obj)
		if err != nil {
			return err
		}
		d.AdoptQuota = &views.AdoptQuotaView{URL: fmt.Sprintf("/connections/%d/adopt-quota", conn.ID), ARN: quotaARN, Error: msg}
		return s.renderDetail(c, status, conn.ID, d)
	}
	if quotaARN == "" {
		return rerender(http.StatusUnprocessableEntity, "required: the ARN of the compute quota to adopt")
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	res, aerr := s.opts.Quotas.AdoptQuota(actx, quotaARN, plan, conn.ID)
	var refused *provision.QuotaRefusedError
	switch {
	case errors.As(aerr, &refused):
		return rerender(http.StatusUnprocessableEntity, aerr.Error())
	case aerr != nil:
		s.opts.Logger.WarnContext(ctx, "adopt compute quota failed", "request_id", requestID(c), "connection_id", conn.ID, "err", aerr.Error())
		return rerender(http.StatusBadGateway, "AWS did not take the adoption; try again: "+aerr.Error())
	}
	why := fmt.Sprintf("adopted compute quota %s (%s), made outside the portal, for team %s: tagged %s=%d; the next provisioning run updates it to the contract",
		res.ID, quotaARN, conn.Team, provision.QuotaConnectionTag, conn.ID)
	if res.Unchanged {
		why = fmt.Sprintf("compute quota %s (%s) is already this connection's", res.ID, quotaARN)
	}
	if err := s.opts.DB.RecordConnectionEvent(ctx, conn.ID, auditAdoptQuota, actor(p), why, s.opts.Now()); err != nil {
		return err
	}
	_, err = s.opts.DB.EnqueueProvisioning(ctx, conn.ID, actor(p), "retry after adopting compute quota "+res.ID, s.opts.Now())
	return s.afterEnqueue(c, conn.ID, err)
}
