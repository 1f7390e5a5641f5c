// Package auth is the portal's OpenID Connect relying party (authorization
// code flow with PKCE, state and nonce, through go-oidc and x/oauth2) and the
// group mapping that turns an identity provider's groups into portal roles and
// team memberships.
//
// It may import internal/workflow for the Principal's types; it must never
// import internal/web, internal/views, internal/store or internal/provision.
package auth
