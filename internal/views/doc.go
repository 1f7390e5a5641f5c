// Package views holds the portal's templ components: one layout, the pages,
// and small partials. Components take view-model structs shaped for display
// (models.go) and never touch the store or the domain's services; stable
// data-testid attributes serve component tests and browser tests alike.
//
// One .templ file per page or small group of pages (connectiondetail.templ
// is the connection page; its hold, revocation and plan parts are in
// holdpanel, revokeform and plan). A page's sections are components of
// their own, so no generated function exceeds 600 lines (size_test.go).
// Moving markup into a component can change templ's whitespace: at a
// component's top level, the space after an if/for block is dropped, so
// extract whole elements, not runs of control flow.
//
// It must never import internal/web, internal/store, internal/provision or
// internal/auth. Generated *_templ.go files are committed and must match
// `go tool templ generate` (make test checks).
package views
