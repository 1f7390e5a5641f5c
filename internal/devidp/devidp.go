package devidp

import (
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// User is one account of the development provider. Username is the stable
// subject (`sub`) and the `preferred_username`.
type User struct {
	Username, Name, Email string
	Groups                []string
}

// Config configures the development provider.
type Config struct {
	// Issuer is the full issuer URL, e.g. "http://127.0.0.1:8080/dev-idp".
	// It may carry a path; the handler returned by New serves everything
	// under that path. Plain http is allowed for loopback hosts only.
	Issuer string
	// ClientID and ClientSecret of the one confidential client (the
	// portal). client_secret_basic and client_secret_post are accepted.
	ClientID, ClientSecret string
	// RedirectURIs are matched exactly.
	RedirectURIs []string
	// PostLogoutRedirectURIs are matched exactly.
	PostLogoutRedirectURIs []string
	// Users that can sign in; see DemoUsers.
	Users []User
	// StylesheetURL is optional; when set, the login page links it.
	StylesheetURL string
	// SigningKey signs the ID tokens; nil makes a new 2048-bit key. Tests
	// that start many providers share one: a key costs about 0.1 s of CPU,
	// 38% of the web tests' CPU when each harness made its own.
	SigningKey *rsa.PrivateKey
}

// ScopeGroups is the scope that releases the `groups` claim, in the ID token
// and from userinfo.
const ScopeGroups = "groups"

// ClaimGroups is the name of the claim carrying the user's groups (a JSON
// array of strings).
const ClaimGroups = "groups"

const (
	authRequestTTL = 5 * time.Minute // time to pick a user on the login page
	authCodeTTL    = 2 * time.Minute // time to redeem a code
	accessTokenTTL = time.Hour
	idTokenTTL     = time.Hour
	// refreshTokenTTL covers the portal's longest session.
	refreshTokenTTL = 12 * time.Hour

	loginPath     = "/login"
	loggedOutPath = "/logged-out"
)

// DemoUsers returns the demo accounts used by `portal serve --dev`.
func DemoUsers() []User {
	mk := func(username, name string, groups ...string) User {
		if groups == nil {
			groups = []string{}
		}
		return User{Username: username, Name: name, Email: username + "@example.test", Groups: groups}
	}
	return []User{
		mk("owner.red", "Olivia Owner (Red)", "team-red-owners"),
		mk("member.red", "Mateo Member (Red)", "team-red-members"),
		mk("owner.blue", "Bianca Owner (Blue)", "team-blue-owners"),
		mk("admin", "Ada Admin", "platform-admins"),
		mk("reviewer", "Rita Reviewer", "governance-reviewers"),
		mk("finance", "Felix Finance", "finance"),
		mk("nogroup", "Nora No-Group"),
	}
}

// Directory is implemented by the handler New returns: users can be
// changed while the provider runs (tests remove a user from a group, or the
// user, and watch the portal notice).
type Directory interface {
	SetUser(User) error
	RemoveUser(username string)
}

var _ Directory = (*server)(nil)

// New returns an http.Handler that serves the whole provider (discovery,
// authorize, token, userinfo, keys, end_session and the login page) under
// the issuer's path. Mount it at that path prefix WITHOUT stripping it, e.g.
// e.Any("/dev-idp/*", echo.WrapHandler(h)). The signing key (unless
// cfg.SigningKey gives one) and the key that encrypts codes and access
// tokens are generated in memory: restarting the process invalidates every
// session and token.
func New(cfg Config) (http.Handler, error) {
	issuer, prefix, err := validateIssuer(cfg.Issuer)
	if err != nil {
		return nil, err
	}
	if err := validateClient(cfg); err != nil {
		return nil, err
	}
	users, err := validateUsers(cfg.Users)
	if err != nil {
		return nil, err
	}

	rsaKey := cfg.SigningKey
	if rsaKey == nil {
		if rsaKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			return nil, fmt.Errorf("devidp: generate signing key: %w", err)
		}
	}
	opCfg := &op.Config{
		CodeMethodS256:           true,
		GrantTypeRefreshToken:    true,
		AuthMethodPost:           true,
		DefaultLogoutRedirectURI: strings.TrimSuffix(issuer, "/") + loggedOutPath,
		SupportedScopes:          []string{oidc.ScopeOpenID, oidc.ScopeProfile, oidc.ScopeEmail, ScopeGroups, oidc.ScopeOfflineAccess},
		SupportedClaims:          append(slices.Clone(op.DefaultSupportedClaims), ClaimGroups),
	}
	if _, err := rand.Read(opCfg.CryptoKey[:]); err != nil {
		return nil, fmt.Errorf("devidp: generate crypto key: %w", err)
	}

	cl := &client{
		id:                     cfg.ClientID,
		secret:                 cfg.ClientSecret,
		redirectURIs:           slices.Clone(cfg.RedirectURIs),
		postLogoutRedirectURIs: slices.Clone(cfg.PostLogoutRedirectURIs),
		loginURL: func(authRequestID string) string {
			return prefix + loginPath + "?authRequestID=" + url.QueryEscape(authRequestID)
		},
	}
	key, err := newSigningKey(rsaKey)
	if err != nil {
		return nil, fmt.Errorf("devidp: signing key id: %w", err)
	}
	st := newStorage(cl, users, key)

	provider, err := op.NewProvider(opCfg, st, op.StaticIssuer(issuer), op.WithAllowInsecure())
	if err != nil {
		return nil, fmt.Errorf("devidp: create provider: %w", err)
	}

	s := &server{
		issuer:     issuer,
		prefix:     prefix,
		provider:   provider,
		opHandler:  http.StripPrefix(prefix, provider),
		storage:    st,
		stylesheet: cfg.StylesheetURL,
		csp:        contentSecurityPolicy(cfg),
	}
	return s, nil
}

// server routes the login pages itself and hands everything else under the
// issuer path to the op router (which registers its routes relative to "/").
type server struct {
	issuer     string // full issuer URL, exactly as configured
	prefix     string // issuer URL path, without trailing slash ("" for none)
	provider   *op.Provider
	opHandler  http.Handler
	storage    *storage
	stylesheet string
	csp        string
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, s.prefix)
	if !ok || (rest != "" && rest[0] != '/') {
		http.NotFound(w, r)
		return
	}
	switch rest {
	case loginPath:
		// The login handler builds op.AuthCallbackURL, which reads the
		// issuer from the context like the op's own handlers do.
		s.login(w, r.WithContext(op.ContextWithIssuer(r.Context(), s.issuer)))
	case loggedOutPath:
		s.loggedOut(w, r)
	case "", "/":
		http.Redirect(w, r, s.prefix+oidc.DiscoveryEndpoint, http.StatusFound)
	default:
		s.opHandler.ServeHTTP(w, r)
	}
}

func validateIssuer(raw string) (issuer, prefix string, err error) {
	if raw == "" {
		return "", "", errors.New("devidp: Issuer is required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", fmt.Errorf("devidp: Issuer: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", "", fmt.Errorf("devidp: Issuer %q: scheme must be http or https", raw)
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", "", fmt.Errorf("devidp: Issuer %q: must be scheme://host[:port][/path] without userinfo, query or fragment", raw)
	}
	if u.Scheme == "http" && !isLoopbackHost(u.Hostname()) {
		return "", "", fmt.Errorf("devidp: Issuer %q: plain http is only allowed on a loopback host", raw)
	}
	if u.RawPath != "" || u.EscapedPath() != u.Path {
		return "", "", fmt.Errorf("devidp: Issuer %q: path must not need escaping", raw)
	}
	// The issuer is kept byte for byte: clients compare it exactly with the
	// "issuer" of the discovery document and the "iss" of tokens.
	return raw, strings.TrimSuffix(u.Path, "/"), nil
}

func isLoopbackHost(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func validateClient(cfg Config) error {
	if cfg.ClientID == "" || cfg.ClientSecret == "" {
		return errors.New("devidp: ClientID and ClientSecret are required")
	}
	if len(cfg.RedirectURIs) == 0 {
		return errors.New("devidp: at least one RedirectURI is required")
	}
	for _, list := range [][]string{cfg.RedirectURIs, cfg.PostLogoutRedirectURIs} {
		for _, raw := range list {
			u, err := url.Parse(raw)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Fragment != "" {
				return fmt.Errorf("devidp: redirect URI %q must be an absolute http(s) URL without fragment", raw)
			}
		}
	}
	return nil
}

func validateUsers(in []User) ([]User, error) {
	if len(in) == 0 {
		return nil, errors.New("devidp: at least one user is required")
	}
	out := make([]User, 0, len(in))
	seen := make(map[string]bool, len(in))
	for _, u := range in {
		switch {
		case u.Username == "":
			return nil, errors.New("devidp: user with empty Username")
		case strings.ContainsAny(u.Username, ": \t\r\n"):
			// The op encodes opaque access tokens as "<tokenID>:<subject>".
			return nil, fmt.Errorf("devidp: Username %q must not contain ':' or whitespace", u.Username)
		case seen[u.Username]:
			return nil, fmt.Errorf("devidp: duplicate Username %q", u.Username)
		}
		seen[u.Username] = true
		u.Groups = slices.Clone(u.Groups)
		if u.Groups == nil {
			u.Groups = []string{}
		}
		if u.Name == "" {
			u.Name = u.Username
		}
		out = append(out, u)
	}
	return out, nil
}

// contentSecurityPolicy is sent with the provider's own HTML pages. Browsers
// apply form-action to the redirects that follow a form submission too, so
// the origins of the registered redirect URIs are allowed.
func contentSecurityPolicy(cfg Config) string {
	formAction := []string{"'self'"}
	for _, raw := range cfg.RedirectURIs {
		if o := origin(raw); o != "" && !slices.Contains(formAction, o) {
			formAction = append(formAction, o)
		}
	}
	style := []string{"'self'"}
	if o := origin(cfg.StylesheetURL); o != "" {
		style = append(style, o)
	}
	return "default-src 'none'; style-src " + strings.Join(style, " ") +
		"; img-src 'self'; form-action " + strings.Join(formAction, " ") +
		"; frame-ancestors 'none'; base-uri 'none'"
}

func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}
