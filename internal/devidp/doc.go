// Package devidp is a small, real OpenID Connect provider for local
// development only. `portal serve --dev` runs it inside the portal process
// (mounted under the issuer path, e.g. /dev-idp) so that `make run` works
// without any external identity provider: the portal signs in through its
// normal OIDC client code (authorization code + PKCE S256 + state + nonce)
// against it, exactly as it would against a production IdP.
//
// It is built on github.com/zitadel/oidc/v3/pkg/op with an in-memory storage
// (one confidential client, a list of users that tests may change through
// Directory, an RSA signing key generated at start-up, refresh tokens for
// the offline_access scope, rotated on each use) and a server-rendered login page that lists the
// configured users with a "Sign in as" button each. There are no passwords:
// anyone who can reach it can sign in as anyone. It must never be enabled
// outside --dev.
//
// Dependency rule: this package is a leaf. It must never import
// internal/web, internal/views, internal/workflow or internal/provision (or
// anything else of the portal's domain); the portal depends on it, never the
// other way round.
package devidp
