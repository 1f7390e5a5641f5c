package web

import (
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// auditSchedulerPrefix starts the audit actions of the scheduler config:
// the admin's "scheduler.enqueue" and the job's "scheduler.succeeded",
// "scheduler.dry_run" or "scheduler.failed" (internal/store's cluster
// jobs), and the "scheduler.reconcile*" of portals before the reconcile
// became a job.
const auditSchedulerPrefix = "scheduler."

func (s *Server) schedulerView(c echo.Context) (views.SchedulerView, error) {
	ctx := c.Request().Context()
	spec, err := s.opts.Cluster.SchedulerSpec()
	v := views.SchedulerView{DryRun: !s.opts.SchedulerCalls}
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
	job, err := s.schedulerJob(c)
	if err != nil {
		return v, err
	}
	v.Job = job
	evs, err := s.opts.DB.AuditEvents(ctx, store.AuditFilter{ObjectType: "cluster", ActionPrefix: auditSchedulerPrefix}, 0, 20)
	if err != nil {
		return v, err
	}
	for _, e := range evs {
		v.History = append(v.History, views.AuditRow{At: fmtWhen(e.At), Actor: e.Actor, Action: e.Action, Reason: e.Reason})
	}
	return v, nil
}

// schedulerJob is the progress of the latest scheduler config job, nil
// when there has been none. While it is open the page refreshes its panel
// (static/progress.js fetches the page and swaps the panel in). Failures
// are reduced as on a connection's progress for anyone who is not an admin
// (only admins open this page today).
func (s *Server) schedulerJob(c echo.Context) (*views.Progress, error) {
	ctx := c.Request().Context()
	jobs, err := s.opts.DB.ClusterJobs(ctx, workflow.JobScheduler, 1)
	if err != nil || len(jobs) == 0 {
		return nil, err
	}
	return s.jobProgress(c, jobs[0], "/admin/scheduler")
}

func (s *Server) schedulerPage(c echo.Context) error {
	if _, err := authorize(c, workflow.ActionEditScheduler, workflow.Object{}); err != nil {
		return err
	}
	v, err := s.schedulerView(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.SchedulerPage(s.page(c, "Scheduler config"), v))
}

// reconcileScheduler queues the job that makes the cluster's scheduler
// config match the settings (or, without real AWS calls, records what it
// would send), with an audit event, and returns to the page, which follows
// the job. No AWS call is made while the request waits: the provisioning
// worker runs the job (internal/provision's scheduler jobs). While one is
// queued or running, another is refused with the page and a message.
func (s *Server) reconcileScheduler(c echo.Context) error {
	p, err := authorize(c, workflow.ActionEditScheduler, workflow.Object{})
	if err != nil {
		return err
	}
	rerender := func(status int, errText string) error {
		v, verr := s.schedulerView(c)
		if verr != nil {
			return verr
		}
		v.Error = errText
		return render(c, status, views.SchedulerPage(s.page(c, "Scheduler config"), v))
	}
	spec, err := s.opts.Cluster.SchedulerSpec()
	if err != nil {
		return rerender(http.StatusConflict, "Nothing to reconcile: see below.")
	}
	_, err = s.opts.DB.EnqueueScheduler(c.Request().Context(), spec.ClusterARN, actor(p), "", s.opts.Now())
	if errors.Is(err, store.ErrClusterJobOpen) {
		return rerender(http.StatusConflict, "A reconcile of the scheduler config is already queued or running: nothing new was queued. Follow it below; queue another once it has finished.")
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/scheduler")
}

// sentence capitalizes a message's first letter and ends it with a period.
func sentence(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:] + "."
}
