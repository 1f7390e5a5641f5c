package devidp

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/net/html"
	"golang.org/x/oauth2"
)

const (
	testClientID     = "portal"
	testClientSecret = "portal-dev-secret"
	testStylesheet   = "/static/app.css"
)

// testEnv is one httptest server that hosts both the provider (under
// /dev-idp, mounted without stripping, as the portal does) and the client's
// redirect and post-logout URIs.
type testEnv struct {
	srv        *httptest.Server
	idp        *server
	issuer     string
	redirect   string
	postLogout string
	provider   *oidc.Provider
	ctx        context.Context
	browser    *http.Client // cookie jar; stops at the client's redirect URIs
}

func newTestEnv(t *testing.T) *testEnv {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	env := &testEnv{
		srv:        srv,
		issuer:     base + "/dev-idp",
		redirect:   base + "/auth/callback",
		postLogout: base + "/signed-out",
	}
	h, err := New(Config{
		Issuer:                 env.issuer,
		ClientID:               testClientID,
		ClientSecret:           testClientSecret,
		RedirectURIs:           []string{env.redirect},
		PostLogoutRedirectURIs: []string{env.postLogout},
		Users:                  DemoUsers(),
		StylesheetURL:          testStylesheet,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	env.idp = h.(*server)

	mux := http.NewServeMux()
	mux.Handle("/dev-idp/", h) // prefix kept, like echo.Any("/dev-idp/*", echo.WrapHandler(h))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("unexpected request to the client app: %s %s", r.Method, r.URL)
		http.NotFound(w, r)
	})
	srv.Config.Handler = mux
	srv.Start()
	t.Cleanup(srv.Close)

	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	env.browser = &http.Client{
		Jar:     jar,
		Timeout: 30 * time.Second,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if !strings.HasPrefix(req.URL.Path, "/dev-idp/") {
				return http.ErrUseLastResponse // arrived at the client app
			}
			if len(via) > 10 {
				return errors.New("too many redirects")
			}
			return nil
		},
	}
	env.ctx = oidc.ClientContext(context.Background(), env.browser)
	env.provider, err = oidc.NewProvider(env.ctx, env.issuer)
	if err != nil {
		t.Fatalf("oidc.NewProvider: %v", err)
	}
	return env
}

func (e *testEnv) oauth2Config(style oauth2.AuthStyle) *oauth2.Config {
	ep := e.provider.Endpoint()
	ep.AuthStyle = style
	return &oauth2.Config{
		ClientID:     testClientID,
		ClientSecret: testClientSecret,
		Endpoint:     ep,
		RedirectURL:  e.redirect,
		Scopes:       []string{oidc.ScopeOpenID, "profile", "email", "groups"},
	}
}

func randString(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// flow is one authorization request in progress.
type flow struct {
	conf     *oauth2.Config
	state    string
	nonce    string
	verifier string
}

func (e *testEnv) newFlow(t *testing.T, style oauth2.AuthStyle) *flow {
	return &flow{conf: e.oauth2Config(style), state: randString(t), nonce: randString(t), verifier: oauth2.GenerateVerifier()}
}

func (f *flow) authURL() string {
	return f.conf.AuthCodeURL(f.state, oidc.Nonce(f.nonce), oauth2.S256ChallengeOption(f.verifier))
}

type htmlForm struct {
	action, method string
	fields         url.Values
	button         string
}

// parseForms extracts the forms of a page the way a browser submits them:
// action, method, the named inputs and the submit button's label.
func parseForms(t *testing.T, body string) []htmlForm {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse html: %v", err)
	}
	attr := func(n *html.Node, key string) string {
		for _, a := range n.Attr {
			if a.Key == key {
				return a.Val
			}
		}
		return ""
	}
	var text func(n *html.Node) string
	text = func(n *html.Node) string {
		if n.Type == html.TextNode {
			return n.Data
		}
		var sb strings.Builder
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			sb.WriteString(text(c))
		}
		return sb.String()
	}
	var forms []htmlForm
	var walk func(n *html.Node, cur *htmlForm)
	walk = func(n *html.Node, cur *htmlForm) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "form":
				f := htmlForm{action: attr(n, "action"), method: strings.ToUpper(attr(n, "method")), fields: url.Values{}}
				for c := n.FirstChild; c != nil; c = c.NextSibling {
					walk(c, &f)
				}
				forms = append(forms, f)
				return
			case "input":
				if cur != nil && attr(n, "name") != "" {
					cur.fields.Add(attr(n, "name"), attr(n, "value"))
				}
			case "button":
				if cur != nil {
					cur.button = strings.TrimSpace(text(n))
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, cur)
		}
	}
	walk(doc, nil)
	return forms
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// openLogin follows the authorization request to the login page and returns
// the page's final URL and body.
func (e *testEnv) openLogin(t *testing.T, f *flow) (*url.URL, string) {
	t.Helper()
	resp, err := e.browser.Get(f.authURL())
	if err != nil {
		t.Fatalf("GET authorize: %v", err)
	}
	body := readBody(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("login page: status %d, body %q", resp.StatusCode, body)
	}
	if got := resp.Request.URL.Path; got != "/dev-idp/login" {
		t.Fatalf("authorize redirected to %q, want /dev-idp/login", got)
	}
	return resp.Request.URL, body
}

// submitLogin posts the form of the given user and returns the response.
func (e *testEnv) submitLogin(t *testing.T, page *url.URL, body, username string) *http.Response {
	t.Helper()
	for _, form := range parseForms(t, body) {
		if form.fields.Get("username") != username {
			continue
		}
		if form.method != http.MethodPost {
			t.Fatalf("login form method %q, want POST", form.method)
		}
		action, err := page.Parse(form.action)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := e.browser.PostForm(action.String(), form.fields)
		if err != nil {
			t.Fatalf("POST login: %v", err)
		}
		return resp
	}
	t.Fatalf("no login form for %q", username)
	return nil
}

// login runs the browser part of the flow and returns the code delivered to
// the client's redirect URI.
func (e *testEnv) login(t *testing.T, f *flow, username string) string {
	t.Helper()
	page, body := e.openLogin(t, f)
	resp := e.submitLogin(t, page, body, username)
	readBody(t, resp)
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("after login: status %d at %s, want a redirect to the client", resp.StatusCode, resp.Request.URL)
	}
	loc, err := resp.Location()
	if err != nil {
		t.Fatal(err)
	}
	if got := loc.Scheme + "://" + loc.Host + loc.Path; got != e.redirect {
		t.Fatalf("redirected to %q, want %q", got, e.redirect)
	}
	q := loc.Query()
	if q.Get("error") != "" {
		t.Fatalf("authorization error: %s: %s", q.Get("error"), q.Get("error_description"))
	}
	if q.Get("state") != f.state {
		t.Fatalf("state %q, want %q", q.Get("state"), f.state)
	}
	code := q.Get("code")
	if code == "" {
		t.Fatal("no code in redirect")
	}
	return code
}

type idClaims struct {
	Email             string   `json:"email"`
	EmailVerified     bool     `json:"email_verified"`
	Name              string   `json:"name"`
	PreferredUsername string   `json:"preferred_username"`
	Groups            []string `json:"groups"`
}

func oauthErrorCode(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		return re.ErrorCode
	}
	return ""
}

func TestAuthorizationCodeFlow(t *testing.T) {
	env := newTestEnv(t)

	for _, tc := range []struct {
		name  string
		style oauth2.AuthStyle
	}{
		{"client_secret_basic", oauth2.AuthStyleInHeader},
		{"client_secret_post", oauth2.AuthStyleInParams},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := env.newFlow(t, tc.style)
			code := env.login(t, f, "owner.red")

			tok, err := f.conf.Exchange(env.ctx, code, oauth2.VerifierOption(f.verifier))
			if err != nil {
				t.Fatalf("Exchange: %v", err)
			}
			if tok.RefreshToken != "" {
				t.Errorf("unexpected refresh token")
			}
			rawID, _ := tok.Extra("id_token").(string)
			if rawID == "" {
				t.Fatal("no id_token in token response")
			}
			idt, err := env.provider.Verifier(&oidc.Config{ClientID: testClientID}).Verify(env.ctx, rawID)
			if err != nil {
				t.Fatalf("verify ID token: %v", err)
			}
			if idt.Nonce != f.nonce {
				t.Errorf("nonce %q, want %q", idt.Nonce, f.nonce)
			}
			if idt.Subject != "owner.red" || idt.Issuer != env.issuer {
				t.Errorf("sub %q iss %q", idt.Subject, idt.Issuer)
			}
			var c idClaims
			if err := idt.Claims(&c); err != nil {
				t.Fatal(err)
			}
			want := idClaims{Email: "owner.red@example.test", EmailVerified: true, Name: "Olivia Owner (Red)", PreferredUsername: "owner.red", Groups: []string{"team-red-owners"}}
			if c.Email != want.Email || c.EmailVerified != want.EmailVerified || c.Name != want.Name ||
				c.PreferredUsername != want.PreferredUsername || !slices.Equal(c.Groups, want.Groups) {
				t.Errorf("ID token claims %+v, want %+v", c, want)
			}

			ui, err := env.provider.UserInfo(env.ctx, oauth2.StaticTokenSource(tok))
			if err != nil {
				t.Fatalf("userinfo: %v", err)
			}
			var uc idClaims
			if err := ui.Claims(&uc); err != nil {
				t.Fatal(err)
			}
			if ui.Subject != "owner.red" || ui.Email != want.Email || !ui.EmailVerified || !slices.Equal(uc.Groups, want.Groups) || uc.Name != want.Name {
				t.Errorf("userinfo sub %q claims %+v", ui.Subject, uc)
			}

			// The code is single use; replaying it also revokes the
			// access token issued for it.
			_, err = f.conf.Exchange(env.ctx, code, oauth2.VerifierOption(f.verifier))
			if err == nil {
				t.Fatal("reused code accepted")
			}
			if got := oauthErrorCode(err); got != "invalid_grant" {
				t.Errorf("reused code: error %q (%v), want invalid_grant", got, err)
			}
			if _, err := env.provider.UserInfo(env.ctx, oauth2.StaticTokenSource(tok)); err == nil {
				t.Error("access token still valid after its code was replayed")
			}
		})
	}
}

func TestNoGroupUser(t *testing.T) {
	env := newTestEnv(t)
	f := env.newFlow(t, oauth2.AuthStyleInHeader)
	code := env.login(t, f, "nogroup")
	tok, err := f.conf.Exchange(env.ctx, code, oauth2.VerifierOption(f.verifier))
	if err != nil {
		t.Fatalf("Exchange: %v", err)
	}
	idt, err := env.provider.Verifier(&oidc.Config{ClientID: testClientID}).Verify(env.ctx, tok.Extra("id_token").(string))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := idt.Claims(&raw); err != nil {
		t.Fatal(err)
	}
	groups, ok := raw["groups"].([]any)
	if !ok || len(groups) != 0 {
		t.Errorf("groups claim %#v, want an empty array", raw["groups"])
	}
}

func TestGroupsOnlyWithGroupsScope(t *testing.T) {
	env := newTestEnv(t)
	f := env.newFlow(t, oauth2.AuthStyleInHeader)
	f.conf.Scopes = []string{oidc.ScopeOpenID, "email"}
	code := env.login(t, f, "admin")
	tok, err := f.conf.Exchange(env.ctx, code, oauth2.VerifierOption(f.verifier))
	if err != nil {
		t.Fatalf("Exchange: %v", err)
	}
	idt, err := env.provider.Verifier(&oidc.Config{ClientID: testClientID}).Verify(env.ctx, tok.Extra("id_token").(string))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := idt.Claims(&raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw["groups"]; ok {
		t.Errorf("groups released without the groups scope: %v", raw)
	}
	if _, ok := raw["name"]; ok {
		t.Errorf("name released without the profile scope: %v", raw)
	}
	if raw["email"] != "admin@example.test" {
		t.Errorf("email %v", raw["email"])
	}
}

func TestWrongPKCEVerifierRejected(t *testing.T) {
	env := newTestEnv(t)
	f := env.newFlow(t, oauth2.AuthStyleInHeader)
	code := env.login(t, f, "member.red")

	_, err := f.conf.Exchange(env.ctx, code, oauth2.VerifierOption(oauth2.GenerateVerifier()))
	if err == nil {
		t.Fatal("wrong PKCE verifier accepted")
	}
	if got := oauthErrorCode(err); got != "invalid_grant" {
		t.Errorf("wrong verifier: error %q (%v), want invalid_grant", got, err)
	}
	// No verifier at all.
	f2 := env.newFlow(t, oauth2.AuthStyleInHeader)
	code2 := env.login(t, f2, "member.red")
	if _, err := f2.conf.Exchange(env.ctx, code2); err == nil {
		t.Fatal("missing PKCE verifier accepted")
	}
	// A failed attempt burns the code: the right verifier no longer works.
	if _, err := f.conf.Exchange(env.ctx, code, oauth2.VerifierOption(f.verifier)); err == nil {
		t.Fatal("code still redeemable after a failed attempt")
	}
}

func TestWrongClientSecretRejected(t *testing.T) {
	env := newTestEnv(t)
	f := env.newFlow(t, oauth2.AuthStyleInHeader)
	f.conf.ClientSecret = "wrong"
	code := env.login(t, f, "finance")
	_, err := f.conf.Exchange(env.ctx, code, oauth2.VerifierOption(f.verifier))
	if got := oauthErrorCode(err); got != "invalid_client" {
		t.Fatalf("wrong secret: error %q (%v), want invalid_client", got, err)
	}
}

func TestUnknownRedirectURIRefused(t *testing.T) {
	env := newTestEnv(t)
	for _, redirect := range []string{
		env.srv.URL + "/evil",
		env.redirect + "/",          // exact match only
		env.redirect + "?x=1",       // exact match only
		"https://attacker.example/", // other host
	} {
		f := env.newFlow(t, oauth2.AuthStyleInHeader)
		f.conf.RedirectURL = redirect
		resp, err := env.browser.Get(f.authURL())
		if err != nil {
			t.Fatal(err)
		}
		body := readBody(t, resp)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("redirect_uri %q: status %d, want 400", redirect, resp.StatusCode)
		}
		if loc := resp.Header.Get("Location"); loc != "" {
			t.Errorf("redirect_uri %q: redirected to %q", redirect, loc)
		}
		if !strings.Contains(body, "redirect_uri") {
			t.Errorf("redirect_uri %q: body %q does not explain", redirect, body)
		}
	}
	// An unknown client is refused the same way.
	f := env.newFlow(t, oauth2.AuthStyleInHeader)
	f.conf.ClientID = "someone-else"
	resp, err := env.browser.Get(f.authURL())
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
		t.Errorf("unknown client: status %d location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func TestLoginPage(t *testing.T) {
	env := newTestEnv(t)
	f := env.newFlow(t, oauth2.AuthStyleInHeader)
	resp, err := env.browser.Get(f.authURL())
	if err != nil {
		t.Fatal(err)
	}
	body := readBody(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("CSP %q", csp)
	}
	for _, want := range []string{
		"Development identity provider — not for production",
		`<link rel="stylesheet" href="/static/app.css">`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("login page lacks %q", want)
		}
	}
	for _, bad := range []string{"<script", "style=", "<style", "onclick", "javascript:"} {
		if strings.Contains(strings.ToLower(body), bad) {
			t.Errorf("login page contains %q (forbidden by the CSP)", bad)
		}
	}
	forms := parseForms(t, body)
	users := DemoUsers()
	if len(forms) != len(users) {
		t.Fatalf("%d forms, want one per user (%d)", len(forms), len(users))
	}
	for i, u := range users {
		form := forms[i]
		if form.fields.Get("username") != u.Username || form.fields.Get("authRequestID") == "" {
			t.Errorf("form %d fields %v", i, form.fields)
		}
		if form.button != "Sign in as "+u.Name {
			t.Errorf("form %d button %q", i, form.button)
		}
		for _, want := range append([]string{u.Name, u.Email}, u.Groups...) {
			if !strings.Contains(body, html.EscapeString(want)) {
				t.Errorf("login page lacks %q", want)
			}
		}
	}
}

func TestLoginErrors(t *testing.T) {
	env := newTestEnv(t)

	expect400 := func(t *testing.T, resp *http.Response, want string) {
		t.Helper()
		body := readBody(t, resp)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("status %d, want 400; body %q", resp.StatusCode, body)
		}
		if !strings.Contains(body, want) {
			t.Errorf("body lacks %q: %q", want, body)
		}
		if !strings.Contains(body, "not for production") {
			t.Error("error page lacks the banner")
		}
	}

	t.Run("unknown user", func(t *testing.T) {
		f := env.newFlow(t, oauth2.AuthStyleInHeader)
		page, body := env.openLogin(t, f)
		form := parseForms(t, body)[0]
		form.fields.Set("username", "mallory")
		action, _ := page.Parse(form.action)
		resp, err := env.browser.PostForm(action.String(), form.fields)
		if err != nil {
			t.Fatal(err)
		}
		expect400(t, resp, "Unknown user")
		// The request stays usable with a real user.
		resp = env.submitLogin(t, page, body, "reviewer")
		readBody(t, resp)
		if resp.StatusCode != http.StatusFound {
			t.Errorf("valid login after unknown user: status %d", resp.StatusCode)
		}
	})

	t.Run("unknown auth request", func(t *testing.T) {
		resp, err := env.browser.Get(env.issuer + "/login?authRequestID=nope")
		if err != nil {
			t.Fatal(err)
		}
		expect400(t, resp, "Unknown or expired")
		resp, err = env.browser.PostForm(env.issuer+"/login", url.Values{"authRequestID": {"nope"}, "username": {"admin"}})
		if err != nil {
			t.Fatal(err)
		}
		expect400(t, resp, "Unknown or expired")
	})

	t.Run("completed auth request", func(t *testing.T) {
		f := env.newFlow(t, oauth2.AuthStyleInHeader)
		page, body := env.openLogin(t, f)
		resp := env.submitLogin(t, page, body, "admin")
		readBody(t, resp)
		resp = env.submitLogin(t, page, body, "owner.blue")
		expect400(t, resp, "already been completed")

		// Replaying the op's callback yields no second code.
		id := parseForms(t, body)[0].fields.Get("authRequestID")
		resp, err := env.browser.Get(env.issuer + "/authorize/callback?id=" + url.QueryEscape(id))
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, resp)
		if loc, _ := resp.Location(); loc != nil && loc.Query().Get("code") != "" {
			t.Errorf("replayed callback issued another code: %s", loc)
		}
	})

	t.Run("expired auth request", func(t *testing.T) {
		f := env.newFlow(t, oauth2.AuthStyleInHeader)
		page, body := env.openLogin(t, f)
		env.idp.storage.skew.Store(int64(authRequestTTL + time.Minute))
		defer env.idp.storage.skew.Store(0)
		resp, err := env.browser.Get(page.String())
		if err != nil {
			t.Fatal(err)
		}
		expect400(t, resp, "Unknown or expired")
		expect400(t, env.submitLogin(t, page, body, "admin"), "Unknown or expired")
	})

	t.Run("method not allowed", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodDelete, env.issuer+"/login", nil)
		resp, err := env.browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, resp)
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("status %d", resp.StatusCode)
		}
	})
}

func TestExpiredCodeRejected(t *testing.T) {
	env := newTestEnv(t)
	f := env.newFlow(t, oauth2.AuthStyleInHeader)
	code := env.login(t, f, "owner.blue")
	env.idp.storage.skew.Store(int64(authCodeTTL + time.Second))
	defer env.idp.storage.skew.Store(0)
	if _, err := f.conf.Exchange(env.ctx, code, oauth2.VerifierOption(f.verifier)); oauthErrorCode(err) != "invalid_grant" {
		t.Fatalf("expired code: %v, want invalid_grant", err)
	}
}

func TestEndSession(t *testing.T) {
	env := newTestEnv(t)
	f := env.newFlow(t, oauth2.AuthStyleInHeader)
	code := env.login(t, f, "owner.red")
	tok, err := f.conf.Exchange(env.ctx, code, oauth2.VerifierOption(f.verifier))
	if err != nil {
		t.Fatal(err)
	}
	rawID := tok.Extra("id_token").(string)

	var meta struct {
		EndSession string `json:"end_session_endpoint"`
	}
	if err := env.provider.Claims(&meta); err != nil {
		t.Fatal(err)
	}
	if meta.EndSession != env.issuer+"/end_session" {
		t.Fatalf("end_session_endpoint %q", meta.EndSession)
	}

	endSession := func(params url.Values) *http.Response {
		t.Helper()
		resp, err := env.browser.Get(meta.EndSession + "?" + params.Encode())
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, resp)
		return resp
	}

	// Unregistered post-logout URI: refused, no redirect there.
	resp := endSession(url.Values{"id_token_hint": {rawID}, "post_logout_redirect_uri": {env.srv.URL + "/elsewhere"}})
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
		t.Errorf("unregistered post-logout URI: status %d location %q", resp.StatusCode, resp.Header.Get("Location"))
	}

	resp = endSession(url.Values{"id_token_hint": {rawID}, "post_logout_redirect_uri": {env.postLogout}, "state": {"s1"}})
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("end_session: status %d", resp.StatusCode)
	}
	if loc := resp.Header.Get("Location"); loc != env.postLogout+"?state=s1" {
		t.Errorf("end_session redirected to %q, want %q", loc, env.postLogout+"?state=s1")
	}
	// The session's access tokens are gone.
	if _, err := env.provider.UserInfo(env.ctx, oauth2.StaticTokenSource(tok)); err == nil {
		t.Error("access token still valid after end_session")
	}

	// Without a hint: the provider's own signed-out page.
	resp, err = env.browser.Get(meta.EndSession)
	if err != nil {
		t.Fatal(err)
	}
	body := readBody(t, resp)
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/dev-idp/logged-out" || !strings.Contains(body, "signed out") {
		t.Errorf("end_session without hint: status %d at %s", resp.StatusCode, resp.Request.URL)
	}
}

func TestDiscovery(t *testing.T) {
	env := newTestEnv(t)
	resp, err := env.browser.Get(env.issuer + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Issuer           string   `json:"issuer"`
		Authorization    string   `json:"authorization_endpoint"`
		Token            string   `json:"token_endpoint"`
		Userinfo         string   `json:"userinfo_endpoint"`
		JWKS             string   `json:"jwks_uri"`
		Scopes           []string `json:"scopes_supported"`
		Claims           []string `json:"claims_supported"`
		CodeChallenge    []string `json:"code_challenge_methods_supported"`
		TokenAuthMethods []string `json:"token_endpoint_auth_methods_supported"`
		SigningAlgs      []string `json:"id_token_signing_alg_values_supported"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if d.Issuer != env.issuer {
		t.Errorf("issuer %q", d.Issuer)
	}
	for _, ep := range []string{d.Authorization, d.Token, d.Userinfo, d.JWKS} {
		if !strings.HasPrefix(ep, env.issuer+"/") {
			t.Errorf("endpoint %q not under the issuer", ep)
		}
	}
	if !slices.Contains(d.Scopes, "groups") || !slices.Contains(d.Claims, "groups") {
		t.Errorf("groups not advertised: scopes %v claims %v", d.Scopes, d.Claims)
	}
	if !slices.Equal(d.CodeChallenge, []string{"S256"}) {
		t.Errorf("code_challenge_methods_supported %v", d.CodeChallenge)
	}
	if !slices.Contains(d.TokenAuthMethods, "client_secret_basic") || !slices.Contains(d.TokenAuthMethods, "client_secret_post") {
		t.Errorf("token_endpoint_auth_methods_supported %v", d.TokenAuthMethods)
	}
	if !slices.Equal(d.SigningAlgs, []string{"RS256"}) {
		t.Errorf("id_token_signing_alg_values_supported %v", d.SigningAlgs)
	}

	// Paths outside the issuer are not served by the handler.
	rec := httptest.NewRecorder()
	env.idp.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/dev-idpx/.well-known/openid-configuration", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("outside the prefix: status %d", rec.Code)
	}
}

func TestNewValidatesConfig(t *testing.T) {
	good := Config{
		Issuer:       "http://127.0.0.1:8080/dev-idp",
		ClientID:     "portal",
		ClientSecret: "secret",
		RedirectURIs: []string{"http://127.0.0.1:8080/auth/callback"},
		Users:        DemoUsers(),
	}
	if _, err := New(good); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for name, mutate := range map[string]func(*Config){
		"no issuer":            func(c *Config) { c.Issuer = "" },
		"http non-loopback":    func(c *Config) { c.Issuer = "http://portal.example.com/dev-idp" },
		"issuer with query":    func(c *Config) { c.Issuer = "http://127.0.0.1:8080/dev-idp?x=1" },
		"no client secret":     func(c *Config) { c.ClientSecret = "" },
		"no redirect URIs":     func(c *Config) { c.RedirectURIs = nil },
		"relative redirect":    func(c *Config) { c.RedirectURIs = []string{"/auth/callback"} },
		"no users":             func(c *Config) { c.Users = nil },
		"duplicate user":       func(c *Config) { c.Users = append(DemoUsers(), DemoUsers()[0]) },
		"colon in username":    func(c *Config) { c.Users = []User{{Username: "a:b"}} },
		"relative post-logout": func(c *Config) { c.PostLogoutRedirectURIs = []string{"/"} },
	} {
		c := good
		mutate(&c)
		if _, err := New(c); err == nil {
			t.Errorf("%s: New accepted %+v", name, c)
		}
	}
	localhost := good
	localhost.Issuer = "http://localhost:8080/dev-idp"
	if _, err := New(localhost); err != nil {
		t.Errorf("localhost issuer: %v", err)
	}
}

func TestDemoUsers(t *testing.T) {
	want := map[string][]string{
		"owner.red":  {"team-red-owners"},
		"member.red": {"team-red-members"},
		"owner.blue": {"team-blue-owners"},
		"admin":      {"platform-admins"},
		"reviewer":   {"governance-reviewers"},
		"finance":    {"finance"},
		"nogroup":    {},
	}
	users := DemoUsers()
	if len(users) != len(want) {
		t.Fatalf("%d demo users, want %d", len(users), len(want))
	}
	for _, u := range users {
		groups, ok := want[u.Username]
		if !ok {
			t.Errorf("unexpected demo user %q", u.Username)
			continue
		}
		if !slices.Equal(u.Groups, groups) {
			t.Errorf("%s groups %v, want %v", u.Username, u.Groups, groups)
		}
		if u.Email != u.Username+"@example.test" || u.Name == "" || u.Name == u.Username {
			t.Errorf("%s: email %q name %q", u.Username, u.Email, u.Name)
		}
	}
	// Callers get their own copy.
	users[0].Groups[0] = "changed"
	if DemoUsers()[0].Groups[0] == "changed" {
		t.Error("DemoUsers shares its slices")
	}
}
