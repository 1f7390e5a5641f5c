// Package auth is the portal's OpenID Connect relying party (authorization
// code flow with PKCE, state and nonce, through go-oidc and x/oauth2) and the
// group mapping that turns an identity provider's groups into portal roles and
// team memberships. Optionally the groups come from a directory on the server
// instead of the token (GroupSource, GroupCache): IAM Identity Center's
// identity store, whose client cmd/portal binds in. Client.Recheck asks the
// provider again for a signed-in user's groups (refresh grant, else
// userinfo), for the portal's periodic and pre-change re-checks.
//
// It may import internal/workflow for the Principal's types; it must never
// import internal/web, internal/views, internal/store or internal/provision.
package auth
