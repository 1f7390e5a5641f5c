package web

import (
	"context"
	"fmt"
	"net/http"
	"strings"
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
	return render(c, http.StatusOK, views.ReadinessPage(s.page(c, "Cluster readiness"), v))
}

// UtilizationProber is a utilization source that can say whether its
// series carry the team namespaces (*prom.Client).
type UtilizationProber interface {
	Probe(ctx context.Context, teams []string, at time.Time) (prom.Probe, error)
}

// utilizationCheck is the readiness check of GPU utilization: one probe
// query for the live connections' namespaces (false when the source cannot
// be probed, e.g. not configured).
func (s *Server) utilizationCheck(ctx context.Context) (views.ReadinessCheck, bool) {
	p, ok := s.opts.Utilization.(UtilizationProber)
	if !ok {
		return views.ReadinessCheck{}, false
	}
	ch := views.ReadinessCheck{Name: "GPU utilization series (Prometheus)"}
	teams, err := s.opts.DB.LiveNamespaces(ctx)
	if err != nil {
		s.opts.Logger.Error("utilization check: live namespaces", "err", err)
		ch.Status, ch.Detail = string(provision.CheckUnknown), "The team namespaces could not be read."
		return ch, true
	}
	res, err := p.Probe(ctx, teams, s.opts.Now())
	switch {
	case err != nil:
		s.opts.Logger.Warn("utilization check: probe", "err", err)
		ch.Status, ch.Detail, ch.Todo = string(provision.CheckUnknown), "The probe query failed.", "Check --prometheus-url and the portal's permission to query it (the log has the error)."
	case len(teams) == 0:
		ch.Status, ch.Detail = string(provision.CheckOK), "No live connection yet: nothing to look for."
	case res.OK(teams):
		ch.Status, ch.Detail = string(provision.CheckOK), fmt.Sprintf("Series of the last hour carry team namespaces in label %q: %s.", res.Label, strings.Join(res.Found, ", "))
	default:
		ch.Status, ch.Detail, ch.Todo = string(provision.CheckFailing), res.Warning(teams), "Restart the portal with the label named above."
	}
	return ch, true
}
