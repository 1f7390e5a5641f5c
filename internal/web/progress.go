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

// progressView is the latest provisioning job of a connection, or nil when
// it has none.
func (s *Server) progressView(c echo.Context, connID int64) (*views.Progress, error) {
	return s.progressViewFor(c, connID, nil)
}

// progressViewFor also offers admins a retry of a failed job, when obj (the
// connection's policy object) is given.
func (s *Server) progressViewFor(c echo.Context, connID int64, obj *workflow.Object) (*views.Progress, error) {
	ctx := c.Request().Context()
	jobs, err := s.opts.DB.JobsFor(ctx, connID)
	if err != nil || len(jobs) == 0 {
		return nil, err
	}
	j := jobs[0]
	pr, err := s.jobProgress(c, j, fmt.Sprintf("/connections/%d/progress", connID))
	if err != nil {
		return nil, err
	}
	if obj != nil && j.State == workflow.JobFailed && j.Kind == workflow.JobHold {
		// A failed hold job (hold.go) is tried again through the hold
		// route: it applies the stopPolicy the hold says now.
		if p, ok := principal(c); ok && workflow.Decide(p, workflow.ActionRetryHold, *obj).Allowed {
			pr.RetryURL = fmt.Sprintf("/connections/%d/hold?step=retry", connID)
			pr.CSRFToken = s.csrfToken(c)
		}
	} else if obj != nil && j.State == workflow.JobFailed {
		if p, ok := principal(c); ok && workflow.Decide(p, workflow.ActionRetryJob, *obj).Allowed {
			pr.RetryURL = fmt.Sprintf("/connections/%d/retry", connID)
			pr.CSRFToken = s.csrfToken(c)
		}
	}
	return pr, nil
}

// jobProgress is the progress panel of a job and its steps, a connection's
// or the cluster's: while the job is open the page polls refreshURL, and
// error text is reduced for those who may not read it whole.
func (s *Server) jobProgress(c echo.Context, j workflow.Job, refreshURL string) (*views.Progress, error) {
	steps, err := s.opts.DB.JobSteps(c.Request().Context(), j.ID)
	if err != nil {
		return nil, err
	}
	pr := &views.Progress{Kind: string(j.Kind), State: string(j.State), Attempts: j.Attempts, LastError: j.LastError, DryRun: j.DryRun}
	if j.State == workflow.JobQueued || j.State == workflow.JobRunning {
		pr.RefreshURL = refreshURL
		if j.State == workflow.JobQueued && j.NotBefore.After(s.opts.Now()) {
			pr.NextTry = fmtWhen(j.NotBefore)
		}
	}
	full := seesFullErrors(c)
	failedStep := ""
	for _, st := range steps {
		detail := st.Detail
		if st.State == workflow.StepFailed {
			failedStep = st.Name
			if !full {
				detail = publicFailure(st.Name, st.Detail)
			}
		}
		pr.Steps = append(pr.Steps, views.StepView{Seq: st.Seq, Name: st.Name, State: string(st.State),
			Outcome: st.Outcome, Detail: detail, Attempts: st.Attempts})
	}
	if !full && pr.LastError != "" {
		pr.LastError = publicFailure(failedStep, pr.LastError)
	}
	return pr, nil
}

// progress serves the progress panel alone, polled by static/progress.js.
func (s *Server) progress(c echo.Context) error {
	_, conn, _, err := s.loadConnection(c)
	if err != nil {
		return err
	}
	pr, err := s.progressView(c, conn.ID)
	if err != nil {
		return err
	}
	if pr == nil {
		return c.NoContent(http.StatusNoContent)
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return render(c, http.StatusOK, views.ProgressPanel(*pr))
}

// retryJob queues provisioning (an approved connection), revocation (a
// revoking one) or a change (a live connection's, which failed to apply)
// again after its job failed.
func (s *Server) retryJob(c echo.Context) error {
	p, conn, obj, err := s.loadConnection(c)
	if err != nil {
		return err
	}
	if err := allowed(p, workflow.ActionRetryJob, obj); err != nil {
		return err
	}
	ctx := c.Request().Context()
	switch {
	case conn.State == workflow.StateRevoking:
		_, err = s.opts.DB.EnqueueRevocation(ctx, conn.ID, actor(p), "retry after a failed revocation", s.opts.Now())
	case conn.State.Live():
		_, err = s.opts.DB.EnqueueAmendment(ctx, conn.ID, actor(p), "retry after a change failed to apply", s.opts.Now())
	default:
		_, err = s.opts.DB.EnqueueProvisioning(ctx, conn.ID, actor(p), "retry after a failed provisioning job", s.opts.Now())
	}
	return s.afterEnqueue(c, conn.ID, err)
}

// afterEnqueue answers a request that queued a job: back to the connection,
// or a clear page when a job is already open or the state forbids it.
func (s *Server) afterEnqueue(c echo.Context, connID int64, err error) error {
	if errors.Is(err, store.ErrJobOpen) {
		return &userError{page: views.ErrorPage{Status: http.StatusConflict, Title: "A job is already queued",
			Message: "This connection already has an unfinished job; follow it on the connection page, then try again if needed.",
			Action:  "Back to the connection", ActionURL: fmt.Sprintf("/connections/%d", connID)}, err: err}
	}
	if errors.Is(err, workflow.ErrUnpinned) {
		return &userError{page: views.ErrorPage{Status: http.StatusConflict, Title: "No approved plan to apply",
			Message: "Nothing was queued: the approval of this version named no provisioning plan, and the portal applies only a plan an admin approved. Revoke the connection and have the team file it again.",
			Action:  "Back to the connection", ActionURL: fmt.Sprintf("/connections/%d", connID)}, err: err}
	}
	if err != nil {
		return s.lifecycleError(err)
	}
	return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/connections/%d", connID))
}
