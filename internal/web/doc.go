// Package web is the portal's HTTP layer on echo v4: all routes in routes.go,
// middleware (request id, logging, recovery, security headers, body limit,
// sessions, CSRF, authentication), one error handler, and thin handlers that
// parse, authorize through workflow.Decide, call the domain and render a
// views component or redirect.
//
// Sign-in: the login state travels in a sealed cookie (loginstate.go), so no
// session row exists before the callback; /login and /auth/callback are
// rate-limited per client address (ratelimit.go); the session keeps the
// provider's tokens only sealed (seal.go); and the signed-in user's groups
// are re-checked before every change and after an interval (recheck.go).
//
// The JSON API under /api/v1 (api.go, apiwrite.go, apichange.go: edit,
// withdraw; apiplan.go: plans, plan diffs, previews; apiaudit.go: the audit
// trail, paged and streamed; apinotifications.go: the person's
// notifications; apiusage.go: a team's usage and cost statements, the
// pages' figures) is another door to the same handlers' loaders and
// workflow.Decide: personal access tokens
// (tokens.go, /settings/tokens) authenticate it, acting as their person
// narrowed by workflow.TokenPrincipal and TokenPermits; errors are RFC 9457
// problem documents; openapi.json describes it (openapi.go serves it and
// renders /api/docs).
//
// It may import internal/workflow, internal/views, internal/store,
// internal/auth and internal/provision, never internal/provision/awsprov:
// AWS calls run in provisioning jobs (the scheduler config reconcile is one)
// or behind provision's interfaces (the plan's AWS preview, the compute
// quota adoption) that cmd/portal wires (cmd/portal/imports_test.go,
// TestDirectImports). Nothing under
// internal/ imports it.
package web
