// Package views holds the portal's templ components: one layout, the pages,
// and small partials. Components take view-model structs shaped for display
// (models.go) and never touch the store or the domain's services; stable
// data-testid attributes serve component tests and browser tests alike.
//
// It must never import internal/web, internal/store, internal/provision or
// internal/auth. Generated *_templ.go files are committed and must match
// `go tool templ generate` (make test checks).
package views
