package web

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/usage/prom"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// ClusterChecker reads the cluster for the readiness page and the inventory
// refresh; *provision.ClusterChecker satisfies it.
type ClusterChecker interface {
	Readiness(ctx context.Context) provision.Readiness
	PlanReadiness(ctx context.Context) provision.Readiness
	ReadInventory(ctx context.Context, cluster string) (provision.ObservedInventory, error)
}

var _ ClusterChecker = (*provision.ClusterChecker)(nil)

func (s *Server) clusterChecker() ClusterChecker {
	if s.opts.ClusterCheck == nil {
		return &provision.ClusterChecker{}
	}
	return s.opts.ClusterCheck
}

// clusterReadiness is the admins' readiness page: every check is read
// afresh on each view (a few discovery and AWS reads, bounded in time).
func (s *Server) clusterReadiness(c echo.Context) error {
	if _, err := authorize(c, workflow.ActionEditInventory, workflow.Object{}); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), 20*time.Second)
	defer cancel()
	r := s.clusterChecker().Readiness(ctx)
	v := views.Readiness{}
	for _, ch := range r.Checks {
		v.Checks = append(v.Checks, views.ReadinessCheck{Name: ch.Name, Status: string(ch.Status), Detail: ch.Detail, Todo: ch.Todo})
	}
	if ch, ok := s.utilizationCheck(ctx); ok {
		v.Checks = append(v.Checks, ch)
	}
	if r.AdmissionMode != "" {
		v.Admission = &views.ReadinessAdmission{Mode: string(r.AdmissionMode)}
		if n := r.AdmissionCounts; n != nil {
			v.Admission.Counted, v.Admission.Warn, v.Admission.Deny, v.Admission.Audit = true, n.Warn, n.Deny, n.Audit
		}
	}
	return render(c, http.StatusOK, views.ReadinessPage(s.page(c, "Cluster readiness"), v))
}

// utilizationCheck is the readiness check of GPU utilization
// (prom.CheckSeries); false when the source cannot be probed,
// e.g. not configured.
func (s *Server) utilizationCheck(ctx context.Context) (views.ReadinessCheck, bool) {
	p, ok := s.opts.Utilization.(prom.Prober)
	if !ok {
		return views.ReadinessCheck{}, false
	}
	ch, err := prom.CheckSeries(ctx, p, s.opts.DB.LiveNamespaces, s.opts.Now())
	if err != nil {
		s.opts.Logger.Warn("utilization check", "err", err)
	}
	return views.ReadinessCheck{Name: ch.Name, Status: ch.Status, Detail: ch.Detail, Todo: ch.Todo}, true
}
