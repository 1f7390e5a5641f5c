package web

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/views"
)

// progressView is the latest provisioning job of a connection, or nil when
// it has none.
func (s *Server) progressView(c echo.Context, connID int64) (*views.Progress, error) {
	ctx := c.Request().Context()
	jobs, err := s.opts.DB.JobsFor(ctx, connID)
	if err != nil || len(jobs) == 0 {
		return nil, err
	}
	j := jobs[0]
	steps, err := s.opts.DB.JobSteps(ctx, j.ID)
	if err != nil {
		return nil, err
	}
	pr := &views.Progress{Kind: string(j.Kind), State: string(j.State), Attempts: j.Attempts, LastError: j.LastError, DryRun: j.DryRun}
	if j.State == store.JobQueued || j.State == store.JobRunning {
		pr.RefreshURL = fmt.Sprintf("/connections/%d/progress", connID)
		if j.State == store.JobQueued && j.NotBefore.After(s.opts.Now()) {
			pr.NextTry = fmtWhen(j.NotBefore)
		}
	}
	for _, st := range steps {
		pr.Steps = append(pr.Steps, views.StepView{Seq: st.Seq, Name: st.Name, State: string(st.State),
			Outcome: st.Outcome, Detail: st.Detail, Attempts: st.Attempts})
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
