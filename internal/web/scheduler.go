package web

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Audit actions of the scheduler page.
const (
	auditSchedulerPrefix    = "scheduler."
	auditSchedulerReconcile = "scheduler.reconcile"
	auditSchedulerFailed    = "scheduler.reconcile_failed"
	auditSchedulerDryRun    = "scheduler.dry_run"
)

func (s *Server) schedulerView(ctx context.Context) (views.SchedulerView, error) {
	spec, err := s.opts.Cluster.SchedulerSpec()
	v := views.SchedulerView{DryRun: s.opts.Scheduler == nil}
	if err != nil {
		v.Unavailable = sentence(err.Error())
	} else {
		v.Name, v.ClusterARN, v.FairShare = spec.Name, spec.ClusterARN, spec.FairShare
		values := map[string]int32{}
		for _, pc := range s.opts.Cluster.PriorityClasses {
			values[pc.Name] = pc.Value
		}
		for _, c := range spec.PriorityClasses {
			v.Classes = append(v.Classes, views.SchedulerClassRow{Name: c.Name, Value: int(values[c.Name]), Weight: c.Weight})
		}
	}
	evs, err := s.opts.DB.AuditEvents(ctx, store.AuditFilter{ObjectType: "cluster", ActionPrefix: auditSchedulerPrefix}, 0, 20)
	if err != nil {
		return v, err
	}
	for _, e := range evs {
		v.History = append(v.History, views.AuditRow{At: fmtWhen(e.At), Actor: e.Actor, Action: e.Action, Reason: e.Reason})
	}
	return v, nil
}

func (s *Server) schedulerPage(c echo.Context) error {
	if _, err := authorize(c, workflow.ActionEditScheduler, workflow.Object{}); err != nil {
		return err
	}
	v, err := s.schedulerView(c.Request().Context())
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.SchedulerPage(s.page(c, "Scheduler config"), v))
}

// reconcileScheduler makes the cluster's scheduler config match the
// settings (or, without real AWS calls, records what it would send), with
// an audit event either way. The call waits at most a minute for HyperPod
// to apply it; a config still settling is reported as such, not as a
// failure.
func (s *Server) reconcileScheduler(c echo.Context) error {
	p, err := authorize(c, workflow.ActionEditScheduler, workflow.Object{})
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	spec, err := s.opts.Cluster.SchedulerSpec()
	rerender := func(status int, notice, errText string) error {
		v, verr := s.schedulerView(ctx)
		if verr != nil {
			return verr
		}
		v.Notice, v.Error = notice, errText
		return render(c, status, views.SchedulerPage(s.page(c, "Scheduler config"), v))
	}
	if err != nil {
		return rerender(http.StatusConflict, "", "Nothing to reconcile: see below.")
	}
	var classes []string
	for _, pc := range spec.PriorityClasses {
		classes = append(classes, fmt.Sprintf("%s=%d", pc.Name, pc.Weight))
	}
	what := fmt.Sprintf("%s on %s: %s; fair share %t", spec.Name, spec.ClusterARN, strings.Join(classes, " "), spec.FairShare)
	if s.opts.Scheduler == nil {
		if err := s.opts.DB.RecordClusterEvent(ctx, auditSchedulerDryRun, actor(p), "would call ListClusterSchedulerConfigs, then Create or UpdateClusterSchedulerConfig: "+what, s.opts.Now()); err != nil {
			return err
		}
		return rerender(http.StatusOK, "Dry run recorded: no AWS call was made.", "")
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 90*time.Second)
	defer cancel()
	poll := s.opts.AWSPoll
	poll.Timeout = min(max(poll.Timeout, 10*time.Second), 60*time.Second)
	res, rerr := awsprov.EnsureSchedulerConfig(actx, s.opts.Scheduler, spec, poll)
	if rerr != nil {
		s.opts.Logger.WarnContext(ctx, "scheduler config reconcile failed", "request_id", requestID(c), "err", rerr.Error())
		if err := s.opts.DB.RecordClusterEvent(ctx, auditSchedulerFailed, actor(p), rerr.Error(), s.opts.Now()); err != nil {
			return err
		}
		return rerender(http.StatusBadGateway, "", "HyperPod did not take the scheduler config: "+rerr.Error())
	}
	outcome := fmt.Sprintf("%s %s version %d (%s)", res.Action, res.ID, res.Version, what)
	if err := s.opts.DB.RecordClusterEvent(ctx, auditSchedulerReconcile, actor(p), outcome, s.opts.Now()); err != nil {
		return err
	}
	return rerender(http.StatusOK, "Scheduler config "+string(res.Action)+" (version "+fmt.Sprint(res.Version)+").", "")
}

// sentence capitalizes a message's first letter and ends it with a period.
func sentence(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:] + "."
}
