package web

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// healthz says the process is up; it checks nothing else.
func (s *Server) healthz(c echo.Context) error {
	return c.String(http.StatusOK, "ok\n")
}

// readyz says the portal can serve: the database answers and its schema is
// exactly the one this binary knows. Its details name the elected leader
// (the replica running the singletons) and this process:
//
//	ready
//	leader: <identity> (<lock>)
//	this process: <identity> (leader|follower)
//
// A replica that is not the leader is ready all the same: it serves pages
// and runs provisioning jobs.
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := s.opts.DB.Ping(ctx); err != nil {
		s.opts.Logger.WarnContext(ctx, "not ready: database", "err", err)
		return c.String(http.StatusServiceUnavailable, "not ready: database unreachable\n")
	}
	st, err := s.opts.DB.Status(ctx)
	if err != nil {
		s.opts.Logger.WarnContext(ctx, "not ready: schema status", "err", err)
		return c.String(http.StatusServiceUnavailable, "not ready: schema status unknown\n")
	}
	if st.Current != st.Known {
		return c.String(http.StatusServiceUnavailable, "not ready: schema version differs from this binary's\n")
	}
	body := "ready\n"
	if l := s.opts.Leader; l != nil {
		who, role := l.Leader(), "follower"
		if who == "" {
			who = "none yet"
		}
		if l.IsLeader() {
			role = "leader"
		}
		body += fmt.Sprintf("leader: %s (%s)\nthis process: %s (%s)\n", who, l.Lock(), l.Identity(), role)
	}
	return c.String(http.StatusOK, body)
}
