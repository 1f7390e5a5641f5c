package devidp

import (
	"slices"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// client is the one confidential web client (the portal). It implements
// op.Client. It is immutable after New.
type client struct {
	id, secret             string
	redirectURIs           []string
	postLogoutRedirectURIs []string
	loginURL               func(authRequestID string) string
}

var _ op.Client = (*client)(nil)

func (c *client) GetID() string                    { return c.id }
func (c *client) RedirectURIs() []string           { return slices.Clone(c.redirectURIs) }
func (c *client) PostLogoutRedirectURIs() []string { return slices.Clone(c.postLogoutRedirectURIs) }

// ApplicationType web makes the client confidential: the op then accepts an
// exact-match http redirect URI for the code flow without DevMode (DevMode
// would also relax other checks, so it stays off).
func (c *client) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }

// AuthMethod basic: with op.Config.AuthMethodPost set, the op also accepts
// the secret in the form body (client_secret_post).
func (c *client) AuthMethod() oidc.AuthMethod { return oidc.AuthMethodBasic }
func (c *client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c *client) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}
}
func (c *client) LoginURL(authRequestID string) string { return c.loginURL(authRequestID) }
func (c *client) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeBearer }
func (c *client) IDTokenLifetime() time.Duration       { return idTokenTTL }
func (c *client) DevMode() bool                        { return false }
func (c *client) ClockSkew() time.Duration             { return 0 }

func (c *client) RestrictAdditionalIdTokenScopes() func(scopes []string) []string {
	return func(scopes []string) []string { return scopes }
}

func (c *client) RestrictAdditionalAccessTokenScopes() func(scopes []string) []string {
	return func(scopes []string) []string { return scopes }
}

// IsScopeAllowed admits the non-standard scopes the client may request; the
// op silently drops any other non-standard scope from the auth request.
func (c *client) IsScopeAllowed(scope string) bool { return scope == ScopeGroups }

// IDTokenUserinfoClaimsAssertion true: the ID token carries the profile and
// email claims even though an access token is issued alongside it (by
// default the op leaves them to the userinfo endpoint).
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return true }
