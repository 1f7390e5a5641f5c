package auth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// Errors a login can end in. Each gets its own page in internal/web.
var (
	// ErrProviderUnavailable: discovery, the token or the userinfo endpoint
	// could not be reached or answered with a server error.
	ErrProviderUnavailable = errors.New("auth: identity provider unavailable")
	// ErrCodeRejected: the provider refused the authorization code
	// (expired, already used, or issued to another client).
	ErrCodeRejected = errors.New("auth: authorization code rejected")
	// ErrTokenInvalid: the ID token failed verification (signature,
	// audience, expiry or nonce).
	ErrTokenInvalid = errors.New("auth: ID token invalid")
)

// OIDCConfig configures the relying party.
type OIDCConfig struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	RedirectURL  string   // the portal's /auth/callback
	Scopes       []string // "openid" is added when missing
	GroupsClaim  string   // defaults to "groups"
	HTTPClient   *http.Client
}

// Client is an OIDC relying party. Discovery happens lazily on first use and
// is retried on the next login after a failure, so the portal starts (and
// explains the problem on the login page) while the provider is down.
type Client struct {
	cfg OIDCConfig

	mu         sync.Mutex
	provider   *oidc.Provider
	oauth      oauth2.Config
	endSession string
}

// NewClient returns a relying party for cfg; it does not contact the provider.
func NewClient(cfg OIDCConfig) *Client {
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = "groups"
	}
	if !slices.Contains(cfg.Scopes, oidc.ScopeOpenID) {
		cfg.Scopes = append([]string{oidc.ScopeOpenID}, cfg.Scopes...)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	return &Client{cfg: cfg}
}

// Issuer returns the configured issuer URL.
func (c *Client) Issuer() string { return c.cfg.Issuer }

func (c *Client) ctx(ctx context.Context) context.Context {
	return oidc.ClientContext(ctx, c.cfg.HTTPClient)
}

func (c *Client) discover(ctx context.Context) (*oidc.Provider, oauth2.Config, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.provider != nil {
		return c.provider, c.oauth, nil
	}
	p, err := oidc.NewProvider(c.ctx(ctx), c.cfg.Issuer)
	if err != nil {
		return nil, oauth2.Config{}, fmt.Errorf("%w: discovery at %s: %v", ErrProviderUnavailable, c.cfg.Issuer, err)
	}
	var extra struct {
		EndSession string `json:"end_session_endpoint"`
	}
	_ = p.Claims(&extra) // optional metadata; absent means no provider logout
	c.provider = p
	c.endSession = extra.EndSession
	c.oauth = oauth2.Config{
		ClientID:     c.cfg.ClientID,
		ClientSecret: c.cfg.ClientSecret,
		RedirectURL:  c.cfg.RedirectURL,
		Endpoint:     p.Endpoint(),
		Scopes:       c.cfg.Scopes,
	}
	return p, c.oauth, nil
}

// LoginStart is what the portal keeps in the (pre-login) session while the
// browser is at the provider, plus where to send it.
type LoginStart struct {
	URL      string
	State    string
	Nonce    string
	Verifier string
}

// Start prepares an authorization request with fresh state, nonce and PKCE
// verifier.
func (c *Client) Start(ctx context.Context) (LoginStart, error) {
	_, oc, err := c.discover(ctx)
	if err != nil {
		return LoginStart{}, err
	}
	ls := LoginStart{State: randomToken(), Nonce: randomToken(), Verifier: oauth2.GenerateVerifier()}
	ls.URL = oc.AuthCodeURL(ls.State, oidc.Nonce(ls.Nonce), oauth2.S256ChallengeOption(ls.Verifier))
	return ls, nil
}

// Identity is the verified result of a login: claims merged from the ID token
// and userinfo.
type Identity struct {
	Issuer  string
	Subject string
	Email   string
	// EmailUnverified: the provider said email_verified is false.
	// EmailVerified: it said true, in the same claim set as the e-mail
	// address kept. Neither: the provider did not say, which counts as
	// unverified where the address is the directory key (UserName).
	EmailUnverified   bool
	EmailVerified     bool
	Name              string
	PreferredUsername string
	Groups            []string
	// Tokens are what the portal needs later from the token response: the
	// ID token as logout's hint, and the access and refresh tokens for the
	// re-checks of the user's groups. internal/web keeps them only
	// encrypted under the session key.
	Tokens Tokens
}

// Tokens are the provider's tokens for one login.
type Tokens struct {
	IDToken      string
	AccessToken  string
	RefreshToken string
	Expiry       time.Time // of the access token; zero: unknown
}

func tokensOf(tok *oauth2.Token, idToken string) Tokens {
	return Tokens{IDToken: idToken, AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, Expiry: tok.Expiry}
}

type claims struct {
	Email             string `json:"email"`
	Name              string `json:"name"`
	PreferredUsername string `json:"preferred_username"`
}

// Finish exchanges the code, verifies the ID token and its nonce, and merges
// userinfo claims (some providers send email and groups only there).
func (c *Client) Finish(ctx context.Context, code, verifier, nonce string) (Identity, error) {
	p, oc, err := c.discover(ctx)
	if err != nil {
		return Identity{}, err
	}
	ctx = c.ctx(ctx)
	tok, err := oc.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500 {
			return Identity{}, fmt.Errorf("%w: %s", ErrCodeRejected, re.ErrorCode)
		}
		return Identity{}, fmt.Errorf("%w: token exchange: %v", ErrProviderUnavailable, err)
	}
	raw, ok := tok.Extra("id_token").(string)
	if !ok || raw == "" {
		return Identity{}, fmt.Errorf("%w: the token response has no id_token", ErrTokenInvalid)
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: c.cfg.ClientID}).Verify(ctx, raw)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %v", ErrTokenInvalid, err)
	}
	if idt.Nonce != nonce {
		return Identity{}, fmt.Errorf("%w: nonce mismatch", ErrTokenInvalid)
	}
	id := Identity{Issuer: idt.Issuer, Subject: idt.Subject, Tokens: tokensOf(tok, raw)}
	var cl claims
	var all map[string]any
	if err := idt.Claims(&cl); err != nil {
		return Identity{}, fmt.Errorf("%w: claims: %v", ErrTokenInvalid, err)
	}
	if err := idt.Claims(&all); err != nil {
		return Identity{}, fmt.Errorf("%w: claims: %v", ErrTokenInvalid, err)
	}
	id.merge(cl, all, c.cfg.GroupsClaim)

	if p.UserInfoEndpoint() != "" {
		ui, err := p.UserInfo(ctx, oauth2.StaticTokenSource(tok))
		if err != nil {
			return Identity{}, fmt.Errorf("%w: userinfo: %v", ErrProviderUnavailable, err)
		}
		if ui.Subject != id.Subject {
			return Identity{}, fmt.Errorf("%w: userinfo subject differs from the ID token's", ErrTokenInvalid)
		}
		var ucl claims
		var uall map[string]any
		if err := ui.Claims(&ucl); err == nil {
			_ = ui.Claims(&uall)
			id.merge(ucl, uall, c.cfg.GroupsClaim)
		}
	}
	slices.Sort(id.Groups)
	id.Groups = slices.Compact(id.Groups)
	return id, nil
}

// Errors of a re-check (Recheck).
var (
	// ErrLoginRevoked: the provider refused the session's refresh or
	// access token (the user was deleted or disabled, or their sessions
	// revoked).
	ErrLoginRevoked = errors.New("auth: the identity provider no longer accepts this login")
	// ErrCannotRecheck: the access token has expired and there is no
	// refresh token (or the provider has no userinfo endpoint), so the
	// groups cannot be asked for again without a new sign-in.
	ErrCannotRecheck = errors.New("auth: the login can no longer be re-checked")
)

// Recheck asks the provider again who the user of a login is and which
// groups they are in, with the login's tokens, and returns the identity and
// the tokens to keep. With a refresh token it always refreshes (RFC 6749
// section 6; OpenID Connect Core 1.0 section 12): the provider then
// re-evaluates the user (Dex asks its connector again) and issues a new ID
// token, whose groups are current (Dex: passwordDB.Refresh in
// dexidp/dex server/server.go re-reads the user, refuses a deleted one and
// copies its groups). The userinfo endpoint of some providers only echoes
// the access token's claims (Dex: handleUserInfo in server/handlers.go
// verifies the bearer token and returns its claims), so it cannot see a
// change. Without a refresh token Recheck calls userinfo with the access
// token while that is valid, and is ErrCannotRecheck after.
func (c *Client) Recheck(ctx context.Context, subject string, t Tokens) (Identity, Tokens, error) {
	p, oc, err := c.discover(ctx)
	if err != nil {
		return Identity{}, t, err
	}
	ctx = c.ctx(ctx)
	id := Identity{Issuer: c.cfg.Issuer, Subject: subject, Tokens: t}
	tok := &oauth2.Token{AccessToken: t.AccessToken, RefreshToken: t.RefreshToken, Expiry: t.Expiry, TokenType: "Bearer"}
	switch {
	case t.RefreshToken != "":
		// An expiry in the past makes the token source refresh now.
		tok.Expiry = time.Unix(1, 0)
		nt, err := oc.TokenSource(ctx, tok).Token()
		if err != nil {
			var re *oauth2.RetrieveError
			if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500 {
				return Identity{}, t, fmt.Errorf("%w: refresh refused: %s", ErrLoginRevoked, re.ErrorCode)
			}
			return Identity{}, t, fmt.Errorf("%w: refresh: %v", ErrProviderUnavailable, err)
		}
		tok = nt
		id.Tokens = tokensOf(nt, t.IDToken)
		if raw, ok := nt.Extra("id_token").(string); ok && raw != "" {
			idt, err := p.Verifier(&oidc.Config{ClientID: c.cfg.ClientID}).Verify(ctx, raw)
			if err != nil {
				return Identity{}, t, fmt.Errorf("%w: refreshed ID token: %v", ErrTokenInvalid, err)
			}
			if idt.Subject != subject {
				return Identity{}, t, fmt.Errorf("%w: refreshed ID token names another subject", ErrTokenInvalid)
			}
			id.Tokens.IDToken = raw
			var cl claims
			var all map[string]any
			if idt.Claims(&cl) == nil && idt.Claims(&all) == nil {
				id.merge(cl, all, c.cfg.GroupsClaim)
			}
		}
	case t.AccessToken != "" && (t.Expiry.IsZero() || time.Now().Before(t.Expiry)):
	default:
		return Identity{}, t, ErrCannotRecheck
	}
	if p.UserInfoEndpoint() != "" {
		ui, err := p.UserInfo(ctx, oauth2.StaticTokenSource(tok))
		if err != nil {
			// go-oidc's error for a non-200 answer starts with the HTTP
			// status ("401 Unauthorized: ..."). RFC 6750 section 3.1: an
			// invalid, expired or revoked token is 401 invalid_token.
			if m := err.Error(); strings.HasPrefix(m, "401 ") || strings.HasPrefix(m, "403 ") {
				return Identity{}, t, fmt.Errorf("%w: userinfo: %v", ErrLoginRevoked, err)
			}
			return Identity{}, t, fmt.Errorf("%w: userinfo: %v", ErrProviderUnavailable, err)
		}
		if ui.Subject != subject {
			return Identity{}, t, fmt.Errorf("%w: userinfo subject differs", ErrTokenInvalid)
		}
		var ucl claims
		var uall map[string]any
		if ui.Claims(&ucl) == nil && ui.Claims(&uall) == nil {
			id.merge(ucl, uall, c.cfg.GroupsClaim)
		}
	} else if t.RefreshToken == "" {
		return Identity{}, t, ErrCannotRecheck
	}
	slices.Sort(id.Groups)
	id.Groups = slices.Compact(id.Groups)
	return id, id.Tokens, nil
}

// merge fills empty fields and unions groups.
func (id *Identity) merge(cl claims, all map[string]any, groupsClaim string) {
	if id.Email == "" {
		id.Email = cl.Email
	}
	if id.Name == "" {
		id.Name = cl.Name
	}
	if id.Name == "" {
		id.Name = cl.PreferredUsername
	}
	if id.PreferredUsername == "" {
		id.PreferredUsername = cl.PreferredUsername
	}
	// Some providers send email_verified as a string. A true value counts
	// only for the address this claim set carries, and only if it is the
	// address kept; a false value anywhere wins.
	switch v := all["email_verified"]; {
	case v == false || v == "false":
		id.EmailUnverified = true
	case (v == true || v == "true") && cl.Email != "" && cl.Email == id.Email:
		id.EmailVerified = true
	}
	switch gs := all[groupsClaim].(type) {
	case []any:
		for _, g := range gs {
			if s, ok := g.(string); ok && s != "" {
				id.Groups = append(id.Groups, s)
			}
		}
	case string: // some providers send a single group as a string
		if gs != "" {
			id.Groups = append(id.Groups, gs)
		}
	}
}

// EndSessionURL returns the provider's RP-initiated logout URL, when the
// provider advertises one.
func (c *Client) EndSessionURL(ctx context.Context, idToken, postLogoutRedirect string) (string, bool) {
	if _, _, err := c.discover(ctx); err != nil {
		return "", false
	}
	c.mu.Lock()
	es := c.endSession
	c.mu.Unlock()
	if es == "" {
		return "", false
	}
	u, err := url.Parse(es)
	if err != nil {
		return "", false
	}
	q := u.Query()
	if idToken != "" {
		q.Set("id_token_hint", idToken)
	}
	q.Set("client_id", c.cfg.ClientID)
	q.Set("post_logout_redirect_uri", postLogoutRedirect)
	u.RawQuery = q.Encode()
	return u.String(), true
}

func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
