package web

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/support/testenv"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/auth"
	"github.com/hyperpod-governance/portal/internal/devidp"
	"github.com/hyperpod-governance/portal/internal/signing"
	"github.com/hyperpod-governance/portal/internal/store"
)

// harness runs the whole HTTP layer on a real listener with the real
// development identity provider mounted, a real SQLite file, and clients
// that follow redirects with a cookie jar, as a browser would.
type harness struct {
	t    testing.TB
	ts   *httptest.Server
	srv  *Server
	db   *store.DB
	base string
	logs *testenv.Buffer
	// dbPath is the SQLite file (or PostgreSQL URL), for tests that read
	// it on their own connection (the fuzz test's write counter).
	dbPath string
}

type harnessOpt func(*Options)

func newHarness(t testing.TB, useTLS bool, opts ...harnessOpt) *harness {
	t.Helper()
	return newHarnessOn(t, t.TempDir()+"/portal.db", useTLS, opts...)
}

// newHarnessOn is newHarness on the database dbPath names: a new SQLite
// file, or the URL of a PostgreSQL database that does not exist yet
// (store.OpenMigrated creates it; the page benchmarks compare engines).
func newHarnessOn(t testing.TB, dbPath string, useTLS bool, opts ...harnessOpt) *harness {
	t.Helper()
	ctx := context.Background()
	db, err := store.OpenMigrated(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ts := httptest.NewUnstartedServer(nil)
	scheme := "http"
	if useTLS {
		scheme = "https"
	}
	base := scheme + "://" + ts.Listener.Addr().String()
	idp, err := devidp.New(devidp.Config{
		SigningKey: testIdPKey(t),
		Issuer:     base + "/dev-idp", ClientID: "portal-test", ClientSecret: "test-secret-0123456789",
		RedirectURIs:           []string{base + "/auth/callback"},
		PostLogoutRedirectURIs: []string{base + "/signed-out"},
		Users: append(devidp.DemoUsers(),
			// Test-only accounts: an admin who also owns team red, and a
			// second admin for two-person approvals.
			devidp.User{Username: "ownadmin", Name: "Otto Owner-Admin", Email: "ownadmin@example.test", Groups: []string{"platform-admins", "team-red-owners"}},
			devidp.User{Username: "admin2", Name: "Ada Second", Email: "admin2@example.test", Groups: []string{"platform-admins"}},
			// Reviewers inside team red: a member, and an admin who owns it.
			devidp.User{Username: "revred", Name: "Rita Reviewer-Member", Email: "revred@example.test", Groups: []string{"governance-reviewers", "team-red-members"}},
			devidp.User{Username: "revadmin", Name: "Reza Reviewer-Admin", Email: "revadmin@example.test", Groups: []string{"governance-reviewers", "platform-admins", "team-red-owners"}},
		),
	})
	if err != nil {
		t.Fatal(err)
	}
	logs := &testenv.Buffer{}
	bu, _ := url.Parse(base)
	o := Options{
		DB: db, Mapping: auth.DevMapping(),
		Logger:  slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		BaseURL: bu, Version: "test", SessionKey: []byte("0123456789abcdef0123456789abcdef"),
		DevIdP: idp,
		// Every test client is 127.0.0.1: the login rate limit has its own test.
		LoginRateLimit: 100000,
	}
	for _, u := range devidp.DemoUsers() { // as in --dev: demo users may be named as owners
		o.KnownOwners = append(o.KnownOwners, u.Email)
	}
	// A signing key made as the portal makes it, but not stored: the
	// tests' audit trails then hold their own events only. A test that
	// wants the stored key (LoadSigner's: made on the first start, shared
	// by replicas, the one `portal serve` signs with) sets Signer to nil.
	sealed, err := signing.Generate(rand.Reader, o.SessionKey, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if o.Signer, err = signing.Open(sealed, o.SessionKey); err != nil {
		t.Fatal(err)
	}
	var client *http.Client
	if useTLS {
		ts.StartTLS()
		client = ts.Client()
	} else {
		ts.Start()
		client = ts.Client()
	}
	o.OIDC = auth.NewClient(auth.OIDCConfig{
		Issuer: base + "/dev-idp", ClientID: "portal-test", ClientSecret: "test-secret-0123456789",
		RedirectURL: base + "/auth/callback", Scopes: []string{"openid", "email", "profile", "groups"},
		HTTPClient: client,
	})
	for _, f := range opts {
		f(&o)
	}
	srv, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ts.Config.Handler = srv.Handler()
	t.Cleanup(ts.Close)
	return &harness{t: t, ts: ts, srv: srv, db: db, base: base, logs: logs, dbPath: dbPath}
}

// testIdPKeys is the one signing key of every harness's identity provider
// in this test process (devidp.Config.SigningKey).
var testIdPKeys = sync.OnceValues(func() (*rsa.PrivateKey, error) { return rsa.GenerateKey(rand.Reader, 2048) })

func testIdPKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	k, err := testIdPKeys()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// client returns a fresh browser-like client with its own cookie jar.
func (h *harness) client() *http.Client {
	jar, _ := cookiejar.New(nil)
	c := *h.ts.Client() // a copy: ts.Client() returns one shared client
	c.Jar = jar
	return &c
}

var (
	reAuthReq = regexp.MustCompile(`name="authRequestID" value="([^"]+)"`)
	reCSRF    = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)
)

// startLogin follows /login to the dev IdP's login page and returns the
// auth request id on it.
func (h *harness) startLogin(c *http.Client) string {
	h.t.Helper()
	resp, body := h.get(c, "/login")
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Request.URL.Path, "/dev-idp/login") {
		h.t.Fatalf("/login ended at %s with %d", resp.Request.URL, resp.StatusCode)
	}
	m := reAuthReq.FindStringSubmatch(body)
	if m == nil {
		h.t.Fatalf("no auth request id on the login page:\n%s", body)
	}
	return m[1]
}

// login signs in as a demo user through the provider's login page and
// returns the page the portal lands on.
func (h *harness) login(c *http.Client, user string) (*http.Response, string) {
	h.t.Helper()
	id := h.startLogin(c)
	return h.post(c, "/dev-idp/login", url.Values{"authRequestID": {id}, "username": {user}})
}

func (h *harness) get(c *http.Client, path string) (*http.Response, string) {
	h.t.Helper()
	resp, err := c.Get(h.base + path)
	if err != nil {
		h.t.Fatalf("GET %s: %v", path, err)
	}
	return resp, readBody(h.t, resp)
}

func (h *harness) post(c *http.Client, path string, form url.Values) (*http.Response, string) {
	h.t.Helper()
	resp, err := c.PostForm(h.base+path, form)
	if err != nil {
		h.t.Fatalf("POST %s: %v", path, err)
	}
	return resp, readBody(h.t, resp)
}

func readBody(t testing.TB, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func sessionCookie(c *http.Client, base string) *http.Cookie {
	u, _ := url.Parse(base)
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == "portal_session" {
			return ck
		}
	}
	return nil
}

func noRedirect(c *http.Client) *http.Client {
	cc := *c
	cc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cc
}

func TestLoginAsEachDemoUserMapsRolesAndTeams(t *testing.T) {
	h := newHarness(t, false)
	cases := []struct {
		user      string
		wantTeams []string // "red owner" etc. as rendered
		wantRoles []string
		cards     []string
	}{
		{"owner.red", []string{"red", "owner"}, nil, []string{"card-team-red"}},
		{"member.red", []string{"red", "member"}, nil, []string{"card-team-red"}},
		{"owner.blue", []string{"blue", "owner"}, nil, []string{"card-team-blue"}},
		{"admin", nil, []string{"admin"}, []string{"card-admin"}},
		{"reviewer", nil, []string{"reviewer"}, []string{"card-reviews"}},
		{"finance", nil, []string{"finance"}, []string{"card-finance"}},
	}
	for _, tc := range cases {
		t.Run(tc.user, func(t *testing.T) {
			c := h.client()
			resp, body := h.login(c, tc.user)
			if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/" {
				t.Fatalf("login ended at %s with %d:\n%s", resp.Request.URL, resp.StatusCode, body)
			}
			if !strings.Contains(body, tc.user+"@example.test") {
				t.Errorf("home page does not show the email %s@example.test", tc.user)
			}
			teams := section(body, "user-teams")
			roles := section(body, "user-roles")
			for _, w := range tc.wantTeams {
				if !strings.Contains(teams, w) {
					t.Errorf("teams %q lacks %q", teams, w)
				}
			}
			if tc.wantTeams == nil && !strings.Contains(teams, "none") {
				t.Errorf("teams %q should say none", teams)
			}
			for _, w := range tc.wantRoles {
				if !strings.Contains(roles, w) {
					t.Errorf("roles %q lacks %q", roles, w)
				}
			}
			for _, card := range tc.cards {
				if !strings.Contains(body, `data-testid="`+card+`"`) {
					t.Errorf("home lacks card %s", card)
				}
			}
			if !strings.Contains(body, `data-testid="dev-banner"`) {
				t.Error("the development identity provider banner is missing")
			}
		})
	}
}

// section returns the inner text of the element with data-testid=id.
func section(body, id string) string {
	i := strings.Index(body, `data-testid="`+id+`"`)
	if i < 0 {
		return ""
	}
	rest := body[i:]
	j := strings.Index(rest, "</dd>")
	if j < 0 {
		return rest
	}
	return rest[:j]
}

func TestRoutesByRoleAndTeam(t *testing.T) {
	h := newHarness(t, false)
	users := []string{"owner.red", "member.red", "owner.blue", "admin", "reviewer", "finance"}
	want := map[string]map[string]int{
		"/teams/red":  {"owner.red": 200, "member.red": 200, "owner.blue": 404, "admin": 200, "reviewer": 200, "finance": 404},
		"/teams/blue": {"owner.red": 404, "member.red": 404, "owner.blue": 200, "admin": 200, "reviewer": 200, "finance": 404},
		"/teams/nope": {"owner.red": 404, "member.red": 404, "owner.blue": 404, "admin": 200, "reviewer": 200, "finance": 404},
		"/admin":      {"owner.red": 403, "member.red": 403, "owner.blue": 403, "admin": 200, "reviewer": 403, "finance": 403},
		"/reviews":    {"owner.red": 403, "member.red": 403, "owner.blue": 403, "admin": 403, "reviewer": 200, "finance": 403},
		"/finance":    {"owner.red": 403, "member.red": 403, "owner.blue": 403, "admin": 403, "reviewer": 403, "finance": 200},
	}
	clients := map[string]*http.Client{}
	for _, u := range users {
		clients[u] = h.client()
		h.login(clients[u], u)
	}
	for path, byUser := range want {
		for _, u := range users {
			resp, body := h.get(noRedirect(clients[u]), path)
			if resp.StatusCode != byUser[u] {
				t.Errorf("%s GET %s = %d, want %d", u, path, resp.StatusCode, byUser[u])
			}
			if resp.StatusCode == 404 && strings.Contains(body, "team-home") {
				t.Errorf("%s GET %s: a 404 page shows team content", u, path)
			}
		}
	}
	// Anonymous visitors are sent to sign in, remembering where they went.
	resp, _ := h.get(noRedirect(h.client()), "/teams/red")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login?next=%2Fteams%2Fred" {
		t.Errorf("anonymous /teams/red = %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	// Navigation depends on roles.
	_, body := h.get(clients["admin"], "/")
	if !strings.Contains(body, `data-testid="nav-admin"`) || strings.Contains(body, `data-testid="nav-finance"`) {
		t.Error("admin navigation should show Admin and not Cost")
	}
	_, body = h.get(clients["member.red"], "/")
	if strings.Contains(body, `data-testid="nav-admin"`) || !strings.Contains(body, `data-testid="nav-team-red"`) {
		t.Error("member navigation should show team red and not Admin")
	}
}

func TestLoginReturnsToRequestedPage(t *testing.T) {
	h := newHarness(t, false)
	c := h.client()
	id := h.startLoginFrom(c, "/teams/red") // -> /login?next=/teams/red -> the IdP's login page
	resp, _ := h.post(c, "/dev-idp/login", url.Values{"authRequestID": {id}, "username": {"owner.red"}})
	if resp.Request.URL.Path != "/teams/red" {
		t.Errorf("after login landed on %s, want /teams/red", resp.Request.URL.Path)
	}
	// An absolute next URL is never followed off-site.
	for _, next := range []string{"https://evil.example/", "//evil.example/", "/\\evil.example"} {
		if got := safeNext(next); got != "/" {
			t.Errorf("safeNext(%q) = %q, want /", next, got)
		}
	}
}

func (h *harness) startLoginFrom(c *http.Client, path string) string {
	h.t.Helper()
	resp, body := h.get(c, path)
	m := reAuthReq.FindStringSubmatch(body)
	if m == nil {
		h.t.Fatalf("%s ended at %s without a login form", path, resp.Request.URL)
	}
	return m[1]
}

func TestSessionCookieFlagsAndRotation(t *testing.T) {
	for _, tlsOn := range []bool{false, true} {
		name := "http"
		if tlsOn {
			name = "https"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, tlsOn)
			c := h.client()
			// A session token planted in the browser before login (session
			// fixation) must not become the signed-in session's.
			u, _ := url.Parse(h.base)
			before := &http.Cookie{Name: "portal_session", Value: "planted-by-an-attacker-0123456789abcdef", Path: "/"}
			c.Jar.SetCookies(u, []*http.Cookie{before})
			id := h.startLogin(c)
			// Capture the Set-Cookie header of the callback itself.
			var setCookie []string
			cc := *c
			cc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
				if req.Response != nil && strings.HasPrefix(req.Response.Request.URL.Path, "/auth/callback") {
					setCookie = req.Response.Header.Values("Set-Cookie")
				}
				return nil
			}
			resp, _ := h.post(&cc, "/dev-idp/login", url.Values{"authRequestID": {id}, "username": {"owner.red"}})
			if resp.Request.URL.Path != "/" {
				t.Fatalf("login landed on %s", resp.Request.URL)
			}
			var sess string
			for _, sc := range setCookie {
				if strings.HasPrefix(sc, "portal_session=") {
					sess = sc
				}
			}
			if sess == "" {
				t.Fatalf("the callback set no session cookie: %q", setCookie)
			}
			for _, flag := range []string{"HttpOnly", "SameSite=Lax", "Path=/"} {
				if !strings.Contains(sess, flag) {
					t.Errorf("session cookie %q lacks %s", sess, flag)
				}
			}
			if got := strings.Contains(sess, "Secure"); got != tlsOn {
				t.Errorf("session cookie Secure = %v under %s: %q", got, name, sess)
			}
			after := sessionCookie(c, h.base)
			if after == nil || after.Value == before.Value {
				t.Errorf("session id was not rotated at login (before %v, after %v)", before, after)
			}
			// The planted (pre-login) token opens nothing.
			old := h.client()
			old.Jar.SetCookies(u, []*http.Cookie{{Name: "portal_session", Value: before.Value}})
			_, body := h.get(old, "/")
			if !strings.Contains(body, `data-testid="landing"`) {
				t.Error("the pre-login session token still works after login")
			}
			// HSTS only behind TLS.
			resp, _ = h.get(c, "/")
			if got := resp.Header.Get("Strict-Transport-Security") != ""; got != tlsOn {
				t.Errorf("HSTS present = %v under %s", got, name)
			}
		})
	}
}

// TestSessionCookieOnlyWhenItChanges: the session cookie is set when the
// token changes (login) and cleared at logout, and not repeated on the
// responses between (loadAndSave); the session's idle expiry still moves
// on each of those requests, and Vary: Cookie is on every one.
func TestSessionCookieOnlyWhenItChanges(t *testing.T) {
	h := newHarness(t, false, func(o *Options) { o.SessionIdleTimeout = 800 * time.Millisecond; o.SessionLifetime = time.Hour })
	s := h.signIn("owner.red")
	token := sessionCookie(s.c, h.base).Value
	for i := range 5 {
		time.Sleep(300 * time.Millisecond) // 1.5 s in all: past the idle timeout unless each view moved it
		resp, body := h.get(s.c, "/")
		if !strings.Contains(body, `data-testid="user-name"`) {
			t.Fatalf("view %d: signed out while active", i)
		}
		if sc := strings.Join(resp.Header.Values("Set-Cookie"), "\n"); strings.Contains(sc, "portal_session=") {
			t.Errorf("view %d repeated the unchanged session cookie: %s", i, sc)
		}
		if !slices.Contains(resp.Header.Values("Vary"), "Cookie") {
			t.Errorf("view %d: Vary %q lacks Cookie", i, resp.Header.Values("Vary"))
		}
	}
	if got := sessionCookie(s.c, h.base); got == nil || got.Value != token {
		t.Errorf("the session cookie changed without a new token: %v", got)
	}
	resp, _ := h.postAs(s, "/logout", nil)
	var cleared bool
	for _, ck := range resp.Cookies() {
		cleared = cleared || ck.Name == "portal_session" && ck.Value == "" && ck.MaxAge < 0
	}
	if !cleared {
		t.Errorf("logout did not clear the session cookie: %q", resp.Header.Values("Set-Cookie"))
	}
}

func TestSecurityHeaders(t *testing.T) {
	h := newHarness(t, false)
	for _, path := range []string{"/", "/nope", "/static/app.css", "/healthz"} {
		resp, _ := h.get(h.client(), path)
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"script-src 'self'", "frame-ancestors 'none'", "default-src 'self'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %s", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: CSP allows inline code: %q", path, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: no nosniff", path)
		}
		for k, want := range map[string]string{"Referrer-Policy": "same-origin", "X-Frame-Options": "DENY",
			"Cross-Origin-Opener-Policy": "same-origin", "Permissions-Policy": "camera=(), microphone=(), geolocation=()"} {
			if got := resp.Header.Values(k); len(got) != 1 || got[0] != want {
				t.Errorf("%s: %s %q, want %q", path, k, got, want)
			}
		}
		if resp.Header.Get("X-Request-Id") == "" {
			t.Errorf("%s: no request id", path)
		}
	}
	// No inline script anywhere in the pages we render.
	c := h.client()
	_, body := h.login(c, "admin")
	for _, tag := range regexp.MustCompile(`<script[^>]*>`).FindAllString(body, -1) {
		if !strings.Contains(tag, ` src="/static/`) {
			t.Errorf("inline or foreign script: %s", tag)
		}
	}
	if strings.Contains(body, "style=") || strings.Contains(body, " on") && regexp.MustCompile(` on[a-z]+=`).MatchString(body) {
		t.Error("a page contains an inline style or event handler")
	}
}

func TestCSRF(t *testing.T) {
	h := newHarness(t, false)
	c := h.client()
	_, body := h.login(c, "owner.red")
	m := reCSRF.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no CSRF token in the logout form")
	}
	token := m[1]

	// Without a token: refused with the friendly page, and still signed in.
	resp, body := h.post(noRedirect(c), "/logout", nil)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "This form has expired") {
		t.Errorf("POST /logout without token = %d", resp.StatusCode)
	}
	// With a wrong token.
	resp, _ = h.post(noRedirect(c), "/logout", url.Values{"_csrf": {token + "x"}})
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST /logout with a wrong token = %d", resp.StatusCode)
	}
	// With the right token but marked cross-site by the browser.
	req, _ := http.NewRequest(http.MethodPost, h.base+"/logout", strings.NewReader(url.Values{"_csrf": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := noRedirect(c).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site POST = %d", resp.StatusCode)
	}
	_, body = h.get(c, "/")
	if !strings.Contains(body, `data-testid="user-name"`) {
		t.Fatal("refused POSTs must not have signed the user out")
	}
	// Another user's token does not work for this session.
	other := h.client()
	_, obody := h.login(other, "owner.blue")
	otherToken := reCSRF.FindStringSubmatch(obody)[1]
	resp, _ = h.post(noRedirect(c), "/logout", url.Values{"_csrf": {otherToken}})
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST with another session's token = %d", resp.StatusCode)
	}
	// The right token signs out, through the provider's end-session endpoint.
	resp, body = h.post(c, "/logout", url.Values{"_csrf": {token}})
	if resp.Request.URL.Path != "/signed-out" || !strings.Contains(body, `data-testid="signed-out"`) {
		t.Errorf("logout ended at %s", resp.Request.URL)
	}
	var sawEndSession bool
	for r := resp.Request; r != nil; r = viaOf(r) {
		if strings.Contains(r.URL.Path, "/dev-idp/end_session") {
			sawEndSession = true
		}
	}
	if !sawEndSession {
		t.Error("logout did not pass through the provider's end_session endpoint")
	}
	_, body = h.get(c, "/")
	if !strings.Contains(body, `data-testid="landing"`) {
		t.Error("still signed in after logout")
	}
}

func viaOf(r *http.Request) *http.Request {
	if r.Response == nil {
		return nil
	}
	return r.Response.Request
}

func TestLoginErrorPages(t *testing.T) {
	t.Run("provider down", func(t *testing.T) {
		h := newHarness(t, false, func(o *Options) {
			o.OIDC = auth.NewClient(auth.OIDCConfig{Issuer: "http://127.0.0.1:1/nothing-here", ClientID: "x", ClientSecret: "y",
				RedirectURL: "http://127.0.0.1/auth/callback"})
		})
		resp, body := h.get(h.client(), "/login")
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "identity provider is not answering") {
			t.Errorf("provider down: %d\n%s", resp.StatusCode, body)
		}
		if strings.Contains(body, "connection refused") || strings.Contains(body, "dial tcp") {
			t.Error("the page leaks the internal error")
		}
	})

	h := newHarness(t, false)
	// callbackURL runs a login up to the redirect back to the portal and
	// returns that URL without following it.
	callbackURL := func(c *http.Client, user string) *url.URL {
		t.Helper()
		id := h.startLogin(c)
		resp, _ := h.post(noRedirect(c), "/dev-idp/login", url.Values{"authRequestID": {id}, "username": {user}})
		loc, _ := resp.Location()
		for i := 0; loc != nil && !strings.HasPrefix(loc.Path, "/auth/callback") && i < 5; i++ {
			resp, _ = h.get(noRedirect(c), loc.RequestURI())
			loc, _ = resp.Location()
		}
		if loc == nil || loc.Path != "/auth/callback" {
			t.Fatalf("the provider did not redirect to the callback (got %v)", loc)
		}
		return loc
	}
	cases := []struct {
		name   string
		mutate func(q url.Values)
		status int
		text   string
	}{
		{"state mismatch", func(q url.Values) { q.Set("state", "forged") }, 400, "no longer valid"},
		{"code rejected (expired or reused)", func(q url.Values) { q.Set("code", "not-a-real-code") }, 400, "The sign-in expired"},
		{"provider error", func(q url.Values) { q.Del("code"); q.Set("error", "access_denied") }, 401, "Sign-in was not completed"},
		{"no code", func(q url.Values) { q.Del("code") }, 400, "without an authorization code"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := h.client()
			loc := callbackURL(c, "owner.red")
			q := loc.Query()
			tc.mutate(q)
			loc.RawQuery = q.Encode()
			resp, body := h.get(noRedirect(c), loc.RequestURI())
			if resp.StatusCode != tc.status || !strings.Contains(body, tc.text) {
				t.Errorf("status %d, want %d with %q:\n%s", resp.StatusCode, tc.status, tc.text, body)
			}
			if !strings.Contains(body, `href="/login"`) {
				t.Error("the error page offers no way to sign in again")
			}
			_, home := h.get(c, "/")
			if strings.Contains(home, `data-testid="user-name"`) {
				t.Error("a failed login left the user signed in")
			}
		})
	}
	t.Run("replayed callback", func(t *testing.T) {
		c := h.client()
		loc := callbackURL(c, "owner.red")
		resp, _ := h.get(c, loc.RequestURI())
		if resp.Request.URL.Path != "/" {
			t.Fatalf("first callback ended at %s", resp.Request.URL)
		}
		resp, body := h.get(noRedirect(h.client()), loc.RequestURI())
		if resp.StatusCode != 400 || !strings.Contains(body, "no longer valid") {
			t.Errorf("replayed callback in another browser = %d", resp.StatusCode)
		}
	})
	t.Run("user in no mapped group", func(t *testing.T) {
		c := h.client()
		resp, body := h.login(c, "nogroup")
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "no access to the portal") {
			t.Fatalf("nogroup: %d\n%s", resp.StatusCode, body)
		}
		if !strings.Contains(body, "Groups the identity provider sent: none") {
			t.Error("the page does not say which groups were seen")
		}
		_, home := h.get(c, "/")
		if strings.Contains(home, `data-testid="user-name"`) {
			t.Error("a user in no mapped group got a session")
		}
	})
}

func TestUsersAreRecordedWithGroups(t *testing.T) {
	h := newHarness(t, false)
	h.login(h.client(), "owner.red")
	h.login(h.client(), "nogroup")
	u, err := h.db.UserByID(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if u.Email != "owner.red@example.test" || len(u.Groups) != 1 || u.Groups[0] != "team-red-owners" {
		t.Errorf("recorded user = %+v", u)
	}
	u2, err := h.db.UserByID(context.Background(), 2)
	if err != nil || u2.Subject != "nogroup" || len(u2.Groups) != 0 {
		t.Errorf("the no-group user should be recorded too: %+v, %v", u2, err)
	}
	if strings.Contains(h.logs.String(), "test-secret-0123456789") {
		t.Error("the client secret appears in the logs")
	}
}

func TestErrorPagesHideInternals(t *testing.T) {
	h := newHarness(t, false)
	h.srv.echo.GET("/test/fail", func(c echo.Context) error {
		return errors.New("store: secret-internal-detail password=hunter2")
	})
	h.srv.echo.GET("/test/panic", func(c echo.Context) error {
		panic("kaboom-internal-state")
	})
	for _, tc := range []struct {
		path   string
		status int
		leak   string
	}{
		{"/test/fail", 500, "hunter2"},
		{"/test/panic", 500, "kaboom"},
		{"/does/not/exist", 404, "echo"},
	} {
		resp, body := h.get(h.client(), tc.path)
		if resp.StatusCode != tc.status {
			t.Errorf("%s = %d, want %d", tc.path, resp.StatusCode, tc.status)
		}
		if strings.Contains(body, tc.leak) || strings.Contains(body, "goroutine") || strings.Contains(body, ".go:") {
			t.Errorf("%s leaks internals:\n%s", tc.path, body)
		}
		if !strings.Contains(body, `data-testid="error-page"`) || !strings.Contains(body, `data-testid="request-id"`) {
			t.Errorf("%s: not the friendly error page", tc.path)
		}
		rid := resp.Header.Get("X-Request-Id")
		if tc.status == 500 && !strings.Contains(h.logs.String(), rid) {
			t.Errorf("%s: the failure is not logged with request id %s", tc.path, rid)
		}
	}
	if !strings.Contains(h.logs.String(), "hunter2") {
		t.Error("the internal error should be in the server log (for operators)")
	}
}

func TestBodyLimit(t *testing.T) {
	h := newHarness(t, false, func(o *Options) { o.BodyLimit = "1K" })
	c := h.client()
	h.login(c, "owner.red")
	resp, body := h.post(noRedirect(c), "/logout", url.Values{"_csrf": {strings.Repeat("x", 4096)}})
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(body, "Too much data") {
		t.Errorf("oversized POST = %d", resp.StatusCode)
	}
}

func TestProbesAndMetrics(t *testing.T) {
	h := newHarness(t, false)
	resp, _ := h.get(h.client(), "/healthz")
	if resp.StatusCode != 200 {
		t.Errorf("healthz = %d", resp.StatusCode)
	}
	resp, _ = h.get(h.client(), "/readyz")
	if resp.StatusCode != 200 {
		t.Errorf("readyz = %d", resp.StatusCode)
	}
	c := h.client()
	h.login(c, "owner.red")
	h.get(c, "/teams/red")
	h.get(c, "/teams/blue")
	// Methods HTTP does not define are counted as one label value, so
	// that clients cannot grow the series without bound.
	for _, method := range []string{"BREW", "WHEN", "BREW"} {
		req, _ := http.NewRequest(method, h.base+"/teams/red", nil)
		if resp, err := h.client().Do(req); err == nil {
			resp.Body.Close()
		}
	}
	_, m := h.get(h.client(), "/metrics")
	for _, want := range []string{
		`portal_http_requests_total{code="200",method="GET",route="/teams/:team"} 1`,
		`portal_http_requests_total{code="404",method="GET",route="/teams/:team"} 1`,
		`portal_http_request_duration_seconds_bucket{method="GET",route="/teams/:team"`,
		`portal_http_requests_total{code="403",method="other",route="/teams/:team"} 3`, // refused by csrf
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(m, `method="BREW"`) || strings.Contains(m, `method="WHEN"`) {
		t.Error("an undefined method became a label value")
	}
	// Probes never touch sessions.
	if n, _ := h.srv.store.Count(context.Background()); n != 1 {
		t.Errorf("sessions = %d, want 1 (only the logged-in user's)", n)
	}
	// The database goes away: readyz fails, healthz still answers.
	h.db.Close()
	resp, body := h.get(h.client(), "/readyz")
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "database") {
		t.Errorf("readyz with the database closed = %d %q", resp.StatusCode, body)
	}
	resp, _ = h.get(h.client(), "/healthz")
	if resp.StatusCode != 200 {
		t.Errorf("healthz with the database closed = %d", resp.StatusCode)
	}
}

func TestSessionTimeouts(t *testing.T) {
	t.Run("idle", func(t *testing.T) {
		h := newHarness(t, false, func(o *Options) { o.SessionIdleTimeout = 700 * time.Millisecond; o.SessionLifetime = time.Hour })
		c := h.client()
		h.login(c, "owner.red")
		time.Sleep(300 * time.Millisecond)
		if _, body := h.get(c, "/"); !strings.Contains(body, `data-testid="user-name"`) {
			t.Fatal("signed out before the idle timeout")
		}
		time.Sleep(1200 * time.Millisecond)
		if _, body := h.get(c, "/"); strings.Contains(body, `data-testid="user-name"`) {
			t.Error("still signed in after the idle timeout")
		}
	})
	t.Run("absolute", func(t *testing.T) {
		h := newHarness(t, false, func(o *Options) { o.SessionIdleTimeout = time.Second; o.SessionLifetime = 1500 * time.Millisecond })
		c := h.client()
		h.login(c, "owner.red")
		deadline := time.Now().Add(4 * time.Second)
		signedIn := true
		for signedIn && time.Now().Before(deadline) {
			time.Sleep(300 * time.Millisecond) // active: well inside the idle timeout
			_, body := h.get(c, "/")
			signedIn = strings.Contains(body, `data-testid="user-name"`)
		}
		if signedIn {
			t.Error("an active session outlived its absolute lifetime")
		}
	})
}

// TestSafeNextRefusesKnownBypasses: a table of open-redirect tricks that
// browsers turn into another origin (they strip tabs and newlines, read a
// backslash as a slash, and ignore leading controls); every one lands on /.
func TestSafeNextRefusesKnownBypasses(t *testing.T) {
	for _, next := range []string{
		"", "evil.example", "https://evil.example/", "http:evil.example", "https:/evil.example", "javascript:alert(1)",
		"JavaScript:alert(1)", "data:text/html,x", "//evil.example", "///evil.example", "////evil.example",
		"/\\evil.example", "\\/evil.example", "\\\\evil.example", "/\\/evil.example", "/a\\b",
		"/\t/evil.example/x", "\t//evil.example", "/\n/evil.example", "/\r/evil.example", "/\r\n/evil.example",
		"/\x00/evil.example", "/\x0b/evil.example", "/\x0c/evil.example", "/\x7f/evil.example", "/\u0085/evil.example",
		"/%09/evil.example/x", "/%0a/evil.example", "/%0d/evil.example", "/%00/evil.example", "/%7f/evil.example",
		"/%2f/evil.example", "/%2F%2Fevil.example", "/%2f%2fevil.example", "/%5cevil.example", "/%5Cevil.example",
		"%2f%2fevil.example", "/%c2%85/evil.example", "/%e2%80%8b/evil.example", "/%zz", "/%",
		"/\u200b/evil.example", "/\u202e/evil.example", "/\ufeff/evil.example", "/\u2028/evil.example", "/\u00a0/evil.example",
		" /teams/red", "/teams/red\x00", "/teams/\xff",
		"/login", "/login?next=//evil.example", "/auth/callback?code=x",
	} {
		if got := safeNext(next); got != "/" {
			t.Errorf("safeNext(%q) = %q, want /", next, got)
		}
	}
	for _, next := range []string{
		"/", "/teams/red", "/connections/12?tab=history", "/audit?team=red&format=csv", "/connections/1/diff?a=1&b=2",
		"/audit?actor=owner.red%40example.test", "/teams/red#top", "/admin/inventory",
	} {
		if got := safeNext(next); got != next {
			t.Errorf("safeNext(%q) = %q, want it kept", next, got)
		}
	}
}

// TestCSRFHeaderAndQuery: the X-CSRF-Token header is checked like the form
// field (a wrong token, another session's token and an empty one are
// refused; the session's own is accepted), and a token in the query string
// is never accepted.
func TestCSRFHeaderAndQuery(t *testing.T) {
	h := newHarness(t, false)
	s := h.signIn("owner.red")
	other := h.signIn("owner.blue")
	send := func(path, header string, body url.Values) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, h.base+path, strings.NewReader(body.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if header != "-" {
			req.Header.Set("X-CSRF-Token", header)
		}
		resp, err := noRedirect(s.c).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for name, tc := range map[string]struct {
		path, header string
		body         url.Values
	}{
		"wrong header":           {"/logout", s.token + "x", nil},
		"other session's header": {"/logout", other.token, nil},
		"empty header":           {"/logout", "", nil},
		"header of one char":     {"/logout", "x", nil},
		"token in the query":     {"/logout?_csrf=" + url.QueryEscape(s.token), "-", nil},
		"query and wrong body":   {"/logout?_csrf=" + url.QueryEscape(s.token), "-", url.Values{"_csrf": {"x"}}},
	} {
		if code := send(tc.path, tc.header, tc.body); code != http.StatusForbidden {
			t.Errorf("%s: POST = %d, want 403", name, code)
		}
	}
	if _, body := h.get(s.c, "/"); !strings.Contains(body, `data-testid="user-name"`) {
		t.Fatal("a refused POST signed the user out")
	}
	// The session's own token in the header is accepted: logout proceeds.
	if code := send("/logout", s.token, nil); code != http.StatusSeeOther {
		t.Errorf("right header token: POST /logout = %d, want 303", code)
	}
	if _, body := h.get(s.c, "/"); strings.Contains(body, `data-testid="user-name"`) {
		t.Error("the right header token did not sign out")
	}
}

// TestLoginWithATabInNextStaysOnSite: the reported bypass, end to end.
func TestLoginWithATabInNextStaysOnSite(t *testing.T) {
	h := newHarness(t, false)
	c := h.client()
	id := h.startLoginFrom(c, "/login?next=/%09/evil.example/x")
	resp, _ := h.post(c, "/dev-idp/login", url.Values{"authRequestID": {id}, "username": {"owner.red"}})
	if u := resp.Request.URL; u.Host != strings.TrimPrefix(strings.TrimPrefix(h.base, "http://"), "https://") || u.Path != "/" {
		t.Errorf("after login landed on %s, want %s/", u, h.base)
	}
}

// planHash is the hash of the plan the approval page shows for version v
// of connection id ("" when it has none), as the decide form sends it.
func (h *harness) planHash(id int64, v int) string {
	h.t.Helper()
	ver, err := h.db.Version(h.t.Context(), id, v)
	if err != nil {
		return "no-such-version"
	}
	plan, err := provision.BuildPlan(id, ver.Version, ver.Hash, ver.Contract, h.srv.opts.Cluster)
	if err != nil {
		return ""
	}
	return plan.Hash()
}

// TestRequestLogLine: each request logs one line with its id, method,
// path (never the query), route, status, size, duration and client.
func TestRequestLogLine(t *testing.T) {
	var out testenv.Buffer
	h := newHarness(t, false, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&out, nil)) })
	resp, _ := h.get(h.client(), "/nope?code=secret-code")
	var line string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, "msg=request") && strings.Contains(l, "path=/nope") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("no request line for GET /nope in:\n%s", out.String())
	}
	for _, want := range []string{"level=INFO", "method=GET", "route=unmatched", "status=404", "request_id=" + resp.Header.Get("X-Request-Id"),
		"bytes=", "duration_ms=", "remote_ip=127.0.0.1"} {
		if !strings.Contains(line, want) {
			t.Errorf("request line lacks %q: %s", want, line)
		}
	}
	if strings.Contains(out.String(), "secret-code") {
		t.Errorf("the query reached the log: %s", line)
	}
}

// TestRequestIDs: every response names its request; ids differ from one
// request to the next and from one server (process) to another, and an
// id the client sent is kept.
func TestRequestIDs(t *testing.T) {
	h, other := newHarness(t, false), newHarness(t, false)
	seen := map[string]bool{}
	for _, hh := range []*harness{h, h, h, other, other} {
		resp, _ := hh.get(hh.client(), "/healthz")
		rid := resp.Header.Get("X-Request-Id")
		if len(rid) < 16 || seen[rid] {
			t.Errorf("request id %q: empty, short or repeated (%v)", rid, seen)
		}
		seen[rid] = true
	}
	a, b := newRequestIDs(), newRequestIDs()
	if x, y := a.next(), b.next(); x[:17] == y[:17] {
		t.Errorf("two servers' ids share their prefix: %q %q", x, y)
	}
	req, _ := http.NewRequest(http.MethodGet, h.base+"/healthz", nil)
	req.Header.Set("X-Request-Id", "from-the-proxy-42")
	resp, err := h.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("X-Request-Id"); got != "from-the-proxy-42" {
		t.Errorf("the client's request id became %q", got)
	}
}

// TestSecurityHeadersAreEachResponses: the security headers' values are
// shared by every response (securityHeaders), so a handler that adds to,
// sets or deletes one changes only its own response.
func TestSecurityHeadersAreEachResponses(t *testing.T) {
	h := newHarness(t, false)
	e := echo.New()
	for i := range 3 {
		mw := h.srv.securityHeaders()(func(c echo.Context) error {
			hd := c.Response().Header()
			if i == 0 {
				hd.Add("Cache-Control", `no-cache="Set-Cookie"`)
				hd.Add("X-Content-Type-Options", "more")
				hd.Set("X-Frame-Options", "SAMEORIGIN")
				hd.Del("Referrer-Policy")
			}
			return c.NoContent(http.StatusNoContent)
		})
		rec := httptest.NewRecorder()
		if err := mw(e.NewContext(httptest.NewRequest(http.MethodGet, "/", nil), rec)); err != nil {
			t.Fatal(err)
		}
		got := rec.Header()
		if i == 0 {
			if !slices.Equal(got.Values("Cache-Control"), []string{"no-store", `no-cache="Set-Cookie"`}) || got.Get("X-Frame-Options") != "SAMEORIGIN" || got.Get("Referrer-Policy") != "" {
				t.Fatalf("the handler's own changes are not in its response: %v", got)
			}
			continue
		}
		for k, want := range map[string]string{"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "same-origin"} {
			if v := got.Values(k); len(v) != 1 || v[0] != want {
				t.Errorf("response %d: %s = %q, want %q (an earlier handler's change leaked)", i, k, v, want)
			}
		}
	}
}
