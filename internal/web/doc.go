// Package web is the portal's HTTP layer on echo v4: all routes in routes.go,
// middleware (request id, logging, recovery, security headers, body limit,
// sessions, CSRF, authentication), one error handler, and thin handlers that
// parse, authorize through workflow.Decide, call the domain and render a
// views component or redirect.
//
// It may import internal/workflow, internal/views, internal/store,
// internal/auth and (later) internal/provision; nothing under internal/
// imports it.
package web
