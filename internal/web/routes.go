package web

import (
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hyperpod-governance/portal/static"
)

// opsRoutes are the operations endpoints: readiness and Prometheus metrics.
func (s *Server) opsRoutes(e *echo.Echo) {
	e.GET("/readyz", s.readyz)
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(s.opts.Registry, promhttp.HandlerOpts{})))
}

// OpsHandler serves /healthz, /readyz and /metrics and nothing else, for
// the operations listener (portal serve --ops-listen): the monitoring
// namespace reaches it, the Ingress does not.
func (s *Server) OpsHandler() http.Handler {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.GET("/healthz", s.healthz)
	s.opsRoutes(e)
	return e
}

// routes is the portal's whole URL map.
func (s *Server) routes() {
	e := s.echo
	s.middleware()

	// Probes and metrics: no session, no login. With a separate
	// operations listener (Options.SeparateOps, portal serve --ops-listen)
	// only /healthz stays here: /metrics and /readyz are served by
	// OpsHandler on a port the Ingress does not route (issue 32 item 6).
	e.GET("/healthz", s.healthz)
	if !s.opts.SeparateOps {
		s.opsRoutes(e)
	}
	e.GET("/static/*", s.staticFiles(), cacheStatic)
	e.GET("/favicon.ico", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })
	// The public half of the installation's signing key, for whoever
	// checks a bundle or a published audit head (signingkey.go).
	e.GET(EvidenceKeyPath, s.evidenceKey)

	// Login and logout.
	limit := s.loginRateLimiter()
	e.GET("/login", s.login, limit)
	e.GET("/auth/callback", s.callback, limit)
	e.POST("/logout", s.logout)
	e.GET("/signed-out", s.signedOut)

	s.pageRoutes(e)
	s.connectionRoutes(e)
	s.apiRoutes(e)

	if s.opts.DevIdP != nil {
		h := echo.WrapHandler(s.opts.DevIdP)
		e.Any("/dev-idp", h)
		e.Any("/dev-idp/*", h)
	}
}

// pageRoutes are the signed-in pages beside the connections': teams,
// admin, reviews, finance and statements.
func (s *Server) pageRoutes(e *echo.Echo) {
	e.GET("/", s.home, s.cachePage)
	// Signed-in pages. (Not an echo Group: a Group with middleware also
	// captures every unknown path, turning 404s into login redirects.)
	e.GET("/teams/:team", s.teamHome, s.requireLogin)
	e.GET("/teams/:team/submit", s.submitPage, s.requireLogin)
	e.GET("/teams/:team/signals", s.teamSignals, s.requireLogin)
	e.POST("/teams/:team/signals/:id/ack", s.ackTeamSignal, s.requireLogin)
	e.GET("/teams/:team/usage", s.teamUsage, s.requireLogin, s.cachePage)
	e.GET("/teams/:team/usage/summary", s.teamUsageSummary, s.requireLogin)
	e.GET("/teams/:team/usage/summary.csv", s.teamUsageSummaryCSV, s.requireLogin)
	e.GET("/admin", s.adminQueue, s.requireLogin)
	e.GET("/admin/inventory", s.inventoryPage, s.requireLogin)
	e.GET("/admin/drift", s.driftOverview, s.requireLogin)
	e.POST("/admin/inventory", s.setInventory, s.requireLogin)
	e.POST("/admin/inventory/refresh", s.refreshInventory, s.requireLogin)
	e.GET("/admin/cluster", s.clusterReadiness, s.requireLogin)
	e.GET("/admin/scheduler", s.schedulerPage, s.requireLogin)
	e.GET("/admin/signals", s.allSignals, s.requireLogin)
	e.POST("/admin/signals/ack", s.ackAnySignal, s.requireLogin)
	e.GET("/admin/usage", s.clusterUsage, s.requireLogin)
	e.GET("/admin/usage/summary", s.adminUsageSummary, s.requireLogin)
	e.GET("/admin/usage/summary.csv", s.adminUsageSummaryCSV, s.requireLogin)
	e.POST("/admin/scheduler", s.reconcileScheduler, s.requireLogin)
	e.GET("/reviews", s.reviewHome, s.requireLogin, s.cachePage)
	e.GET("/reviews/:id", s.showReview, s.requireLogin)
	e.POST("/reviews/:id/decide", s.decideReview, s.requireLogin)
	e.GET("/finance", s.financeHome, s.requireLogin, s.cachePage)
	e.POST("/finance/policy", s.setCostPolicy, s.requireLogin)
	e.GET("/teams/:team/statements/:month", s.teamStatement, s.requireLogin)
	e.GET("/teams/:team/statements/:month/csv", s.teamStatementCSV, s.requireLogin)
	e.GET("/teams/:team/statements/:month/json", s.teamStatementJSON, s.requireLogin)
	e.GET("/teams/:team/statements/:month/tasks", s.teamTasksCSV, s.requireLogin)
}

// connectionRoutes are the connection requests, their contracts, the
// audit trail and the notifications.
func (s *Server) connectionRoutes(e *echo.Echo) {
	e.GET("/connections", s.listConnections, s.requireLogin, s.cachePage)
	e.GET("/teams/:team/connections/new", s.newRequestForm, s.requireLogin)
	e.POST("/teams/:team/connections", s.createRequest, s.requireLogin)
	e.GET("/connections/:id", s.showConnection, s.requireLogin, s.cachePage)
	e.POST("/connections/:id", s.updateRequest, s.requireLogin)
	e.GET("/connections/:id/edit", s.editRequestForm, s.requireLogin)
	e.POST("/connections/:id/submit", s.submitRequest, s.requireLogin)
	e.POST("/connections/:id/withdraw", s.withdrawRequest, s.requireLogin)
	e.POST("/connections/:id/decide", s.decide, s.requireLogin)
	e.POST("/connections/:id/revoke", s.revoke, s.requireLogin)
	e.POST("/connections/:id/hold", s.decideHold, s.requireLogin)
	e.GET("/exceptions", s.exceptionsHome, s.requireLogin)
	e.POST("/connections/:id/exceptions", s.grantException, s.requireLogin)
	e.POST("/connections/:id/exceptions/revoke", s.revokeException, s.requireLogin)
	e.POST("/connections/:id/decline-revocation", s.declineRevocation, s.requireLogin)
	e.GET("/connections/:id/versions/:v/:format", s.exportVersion, s.requireLogin)
	e.GET("/connections/:id/diff", s.versionDiff, s.requireLogin)
	e.GET("/connections/:id/evidence", s.evidencePage, s.requireLogin)
	e.GET("/connections/:id/evidence.json", s.evidenceJSON, s.requireLogin)
	e.GET("/connections/:id/progress", s.progress, s.requireLogin)
	e.POST("/connections/:id/reapply", s.reapply, s.requireLogin)
	e.POST("/connections/:id/retry", s.retryJob, s.requireLogin)
	e.POST("/connections/:id/adopt-quota", s.adoptQuota, s.requireLogin)
	e.GET("/audit", s.auditTrail, s.requireLogin, s.cachePage)

	// Notifications: the signed-in user's own, and the admins' failures.
	e.GET("/notifications", s.notificationsPage, s.requireLogin)
	e.POST("/notifications/read-all", s.markAllNotificationsRead, s.requireLogin)
	e.POST("/notifications/:id/read", s.markNotificationRead, s.requireLogin)
	e.GET("/admin/notifications", s.deliveryFailures, s.requireLogin)

	// The signed-in person's API tokens (tokens.go).
	e.GET("/settings/tokens", s.tokensPage, s.requireLogin)
	e.POST("/settings/tokens", s.createToken, s.requireLogin)
	e.POST("/settings/tokens/:id/revoke", s.revokeToken, s.requireLogin)
}

func (s *Server) staticFiles() echo.HandlerFunc {
	return echo.WrapHandler(http.StripPrefix("/static/", http.FileServerFS(static.FS)))
}

func cacheStatic(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		// Asset URLs carry ?v=<version>, so a day of caching is safe.
		c.Response().Header().Set("Cache-Control", "public, max-age=86400")
		return next(c)
	}
}
