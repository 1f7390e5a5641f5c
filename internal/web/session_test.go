package web

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/auth"
	"github.com/hyperpod-governance/portal/internal/devidp"
	"github.com/hyperpod-governance/portal/internal/support/awstest"
)

// testClock is Options.Now for tests that move time forward.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock { return &testClock{t: time.Now()} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func withClock(clk *testClock) harnessOpt { return func(o *Options) { o.Now = clk.Now } }

// tokenRecorder records the provider's token responses the portal receives.
type tokenRecorder struct {
	mu     sync.Mutex
	bodies []string
}

func (r *tokenRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || !strings.HasSuffix(req.URL.Path, "/oauth/token") {
		return resp, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.bodies = append(r.bodies, string(b))
	r.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, nil
}

// tokens returns every ID, access and refresh token the provider issued.
func (r *tokenRecorder) tokens(t *testing.T) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, b := range r.bodies {
		var tr struct {
			IDToken      string `json:"id_token"`
			AccessToken  string `json:"access_token"`
			RefreshToken string `json:"refresh_token"`
		}
		if err := json.Unmarshal([]byte(b), &tr); err != nil {
			t.Fatalf("token response: %v", err)
		}
		for _, s := range []string{tr.IDToken, tr.AccessToken, tr.RefreshToken} {
			if s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// withOIDC replaces the harness's relying party: extra scopes, and a
// transport that records token responses (plain http harnesses only).
func withOIDC(rec *tokenRecorder, extraScopes ...string) harnessOpt {
	return func(o *Options) {
		base := o.BaseURL.String()
		var hc *http.Client
		if rec != nil {
			hc = &http.Client{Transport: rec}
		}
		o.OIDC = auth.NewClient(auth.OIDCConfig{
			Issuer: base + "/dev-idp", ClientID: "portal-test", ClientSecret: "test-secret-0123456789",
			RedirectURL: base + "/auth/callback", HTTPClient: hc,
			Scopes: append([]string{"openid", "email", "profile", "groups"}, extraScopes...),
		})
	}
}

func (h *harness) idp() devidp.Directory { return h.srv.opts.DevIdP.(devidp.Directory) }

func TestAnonymousLoginWritesNoSession(t *testing.T) {
	for _, tlsOn := range []bool{false, true} {
		h := newHarness(t, tlsOn)
		var setCookie string
		for range 20 {
			resp, _ := h.get(noRedirect(h.client()), "/login?next=/teams/red")
			if resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("GET /login = %d", resp.StatusCode)
			}
			setCookie = strings.Join(resp.Header.Values("Set-Cookie"), "\n")
		}
		if n, err := h.srv.store.Count(context.Background()); err != nil || n != 0 {
			t.Errorf("20 anonymous GET /login stored %d session rows (%v), want 0", n, err)
		}
		if strings.Contains(setCookie, "portal_session=") {
			t.Errorf("GET /login set a session cookie: %s", setCookie)
		}
		for _, flag := range []string{"portal_login=", "Path=/auth/callback", "Max-Age=600", "HttpOnly", "SameSite=Lax"} {
			if !strings.Contains(setCookie, flag) {
				t.Errorf("login state cookie lacks %s: %s", flag, setCookie)
			}
		}
		if got := strings.Contains(setCookie, "Secure"); got != tlsOn {
			t.Errorf("login state cookie Secure = %v with TLS %v: %s", got, tlsOn, setCookie)
		}
		if strings.Contains(setCookie, "/teams/red") || strings.Contains(setCookie, "%2Fteams%2Fred") {
			t.Errorf("the login state is readable in the cookie: %s", setCookie)
		}
		// A whole login writes exactly one row.
		h.login(h.client(), "owner.red")
		if n, _ := h.srv.store.Count(context.Background()); n != 1 {
			t.Errorf("after one login: %d session rows, want 1", n)
		}
	}
}

func TestCallbackRefusesABadLoginStateCookie(t *testing.T) {
	clk := newTestClock()
	h := newHarness(t, false, withClock(clk))
	// toCallback runs a login to the provider's redirect back and returns
	// the callback URL, leaving the login-state cookie in c's jar.
	toCallback := func(c *http.Client) *url.URL {
		t.Helper()
		id := h.startLogin(c)
		resp, _ := h.post(noRedirect(c), "/dev-idp/login", url.Values{"authRequestID": {id}, "username": {"owner.red"}})
		loc, _ := resp.Location()
		for i := 0; loc != nil && !strings.HasPrefix(loc.Path, "/auth/callback") && i < 5; i++ {
			resp, _ = h.get(noRedirect(c), loc.RequestURI())
			loc, _ = resp.Location()
		}
		if loc == nil || loc.Path != "/auth/callback" {
			t.Fatalf("no redirect to the callback (got %v)", loc)
		}
		return loc
	}
	cbURL, _ := url.Parse(h.base + "/auth/callback")
	setLoginCookie := func(c *http.Client, v string) {
		c.Jar.SetCookies(cbURL, []*http.Cookie{{Name: loginCookie, Value: v, Path: loginCookiePath}})
	}
	loginCookieOf := func(c *http.Client) string {
		for _, ck := range c.Jar.Cookies(cbURL) {
			if ck.Name == loginCookie {
				return ck.Value
			}
		}
		t.Fatal("no login state cookie")
		return ""
	}
	refused := func(name string, c *http.Client, loc *url.URL) {
		t.Helper()
		resp, body := h.get(noRedirect(c), loc.RequestURI())
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "no longer valid") {
			t.Errorf("%s: callback = %d, want 400 (no longer valid)", name, resp.StatusCode)
		}
		if _, home := h.get(c, "/"); strings.Contains(home, `data-testid="user-name"`) {
			t.Errorf("%s: signed in anyway", name)
		}
	}

	t.Run("missing", func(t *testing.T) {
		c := h.client()
		loc := toCallback(c)
		setLoginCookie(c, "") // the jar drops it
		c.Jar.SetCookies(cbURL, []*http.Cookie{{Name: loginCookie, Value: "x", Path: loginCookiePath, MaxAge: -1}})
		refused("missing", c, loc)
	})
	t.Run("tampered", func(t *testing.T) {
		c := h.client()
		loc := toCallback(c)
		v := []byte(loginCookieOf(c))
		i := len(v) / 2
		if v[i] == 'A' {
			v[i] = 'B'
		} else {
			v[i] = 'A'
		}
		setLoginCookie(c, string(v))
		refused("tampered", c, loc)
	})
	t.Run("another browser's", func(t *testing.T) {
		other := h.client()
		toCallback(other)
		c := h.client()
		loc := toCallback(c)
		setLoginCookie(c, loginCookieOf(other)) // valid, but for another state
		refused("another browser's", c, loc)
	})
	t.Run("expired", func(t *testing.T) {
		c := h.client()
		loc := toCallback(c)
		clk.Advance(LoginStateTTL + time.Second)
		refused("expired", c, loc)
	})
	t.Run("fresh works", func(t *testing.T) {
		c := h.client()
		loc := toCallback(c)
		clk.Advance(LoginStateTTL - time.Minute)
		if resp, _ := h.get(c, loc.RequestURI()); resp.Request.URL.Path != "/" {
			t.Errorf("a valid login state was refused: ended at %s", resp.Request.URL)
		}
	})
}

func TestLoginRateLimitPerClientAddress(t *testing.T) {
	const limit = 4
	getLogin := func(h *harness, xff string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, h.base+"/login", nil)
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		resp, err := noRedirect(h.client()).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, resp)
		return resp
	}

	t.Run("peer address", func(t *testing.T) {
		h := newHarness(t, false, func(o *Options) { o.LoginRateLimit = limit })
		for i := range limit {
			// X-Forwarded-For from an untrusted peer must not make each
			// request a new client.
			if resp := getLogin(h, "203.0.113."+string(rune('1'+i))); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("request %d = %d, want 303", i+1, resp.StatusCode)
			}
		}
		resp, body := h.get(noRedirect(h.client()), "/login")
		if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "Too many sign-in attempts") ||
			resp.Header.Get("Retry-After") == "" {
			t.Errorf("request %d = %d, want 429 with the friendly page and Retry-After", limit+1, resp.StatusCode)
		}
		if resp, _ := h.get(noRedirect(h.client()), "/auth/callback?state=x&code=y"); resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("/auth/callback over the limit = %d, want 429", resp.StatusCode)
		}
		if resp := getLogin(h, "198.51.100.9"); resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("an untrusted X-Forwarded-For escaped the limit: %d", resp.StatusCode)
		}
		// Other pages are not limited.
		if resp, _ := h.get(h.client(), "/"); resp.StatusCode != http.StatusOK {
			t.Errorf("/ = %d", resp.StatusCode)
		}
	})

	t.Run("behind a trusted proxy", func(t *testing.T) {
		_, lo, _ := net.ParseCIDR("127.0.0.0/8")
		h := newHarness(t, false, func(o *Options) { o.LoginRateLimit = limit; o.TrustedProxies = []*net.IPNet{lo} })
		for i := range limit {
			if resp := getLogin(h, "203.0.113.7"); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("client A request %d = %d", i+1, resp.StatusCode)
			}
		}
		if resp := getLogin(h, "203.0.113.7"); resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("client A request %d = %d, want 429", limit+1, resp.StatusCode)
		}
		if resp := getLogin(h, "203.0.113.8"); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("client B (another address) = %d, want 303", resp.StatusCode)
		}
	})
}

func TestSessionKeepsNoProviderTokenInClear(t *testing.T) {
	for _, scopes := range [][]string{nil, {"offline_access"}} {
		rec := &tokenRecorder{}
		clk := newTestClock()
		h := newHarness(t, false, withOIDC(rec, scopes...), withClock(clk))
		s := h.signIn("admin")
		clk.Advance(DefaultGroupsRecheckInterval) // a re-check stores new tokens (refresh)
		if resp, _ := h.get(s.c, "/admin"); resp.StatusCode != http.StatusOK {
			t.Fatalf("/admin after a re-check = %d", resp.StatusCode)
		}
		toks := rec.tokens(t)
		if len(toks) < 2 || (scopes != nil && len(rec.bodies) < 2) {
			t.Fatalf("scopes %v: recorded %d tokens in %d responses; the test sees nothing", scopes, len(toks), len(rec.bodies))
		}
		data, err := h.srv.store.Data(context.Background())
		if err != nil || len(data) != 1 {
			t.Fatalf("sessions: %d, %v", len(data), err)
		}
		for _, tok := range toks {
			if bytes.Contains(data[0], []byte(tok)) {
				t.Errorf("scopes %v: the stored session holds a provider token in clear (%.12s...)", scopes, tok)
			}
		}
		// Logout still names the login to the provider (id_token_hint).
		var hint string
		cc := *s.c
		cc.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
			if strings.HasSuffix(req.URL.Path, "/end_session") {
				hint = req.URL.Query().Get("id_token_hint")
			}
			return nil
		}
		h.post(&cc, "/logout", url.Values{"_csrf": {s.token}})
		if hint == "" || !contains(toks, hint) {
			t.Errorf("scopes %v: logout sent id_token_hint %.12q, want an ID token the provider issued", scopes, hint)
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestGroupsAreRecheckedWithTheProvider: without a directory the groups
// come from the provider again, through userinfo (access token) or a
// refresh (offline_access).
func TestGroupsAreRecheckedWithTheProvider(t *testing.T) {
	for _, scopes := range [][]string{nil, {"offline_access"}} {
		name := "userinfo"
		if scopes != nil {
			name = "refresh"
		}
		t.Run(name, func(t *testing.T) {
			clk := newTestClock()
			h := newHarness(t, false, withOIDC(nil, scopes...), withClock(clk))
			s := h.signIn("ownadmin")
			if resp, _ := h.get(noRedirect(s.c), "/admin"); resp.StatusCode != http.StatusOK {
				t.Fatalf("/admin before = %d", resp.StatusCode)
			}
			if resp, _ := h.postAs(s, "/admin/inventory", nil); resp.StatusCode == http.StatusForbidden {
				t.Fatalf("POST /admin/inventory before = %d", resp.StatusCode)
			}
			// Removed from platform-admins at the provider.
			if err := h.idp().SetUser(devidp.User{Username: "ownadmin", Name: "Otto Owner-Admin", Email: "ownadmin@example.test", Groups: []string{"team-red-owners"}}); err != nil {
				t.Fatal(err)
			}
			// Within the interval a read keeps the roles confirmed last...
			clk.Advance(DefaultGroupsRecheckInterval - time.Second)
			if resp, _ := h.get(noRedirect(s.c), "/admin"); resp.StatusCode != http.StatusOK {
				t.Errorf("/admin within the interval = %d (the documented lag)", resp.StatusCode)
			}
			// ...but the next change is checked first.
			if resp, _ := h.postAs(s, "/admin/inventory", nil); resp.StatusCode != http.StatusForbidden {
				t.Errorf("POST /admin/inventory after removal = %d, want 403", resp.StatusCode)
			}
			if u, _ := h.db.UserByID(context.Background(), 1); len(u.Groups) != 1 || u.Groups[0] != "team-red-owners" {
				t.Errorf("users row groups = %v, want the new ones", u.Groups)
			}
			// The team role stays.
			if resp, _ := h.get(noRedirect(s.c), "/teams/red"); resp.StatusCode != http.StatusOK {
				t.Errorf("/teams/red = %d", resp.StatusCode)
			}

			// A read after the interval sees a removal too.
			s2 := h.signIn("admin2")
			if err := h.idp().SetUser(devidp.User{Username: "admin2", Name: "Ada Second", Email: "admin2@example.test", Groups: []string{"team-blue-owners"}}); err != nil {
				t.Fatal(err)
			}
			clk.Advance(DefaultGroupsRecheckInterval)
			if resp, _ := h.get(noRedirect(s2.c), "/admin"); resp.StatusCode != http.StatusForbidden {
				t.Errorf("GET /admin after the interval = %d, want 403", resp.StatusCode)
			}

			// A deleted user's session ends.
			h.idp().RemoveUser("ownadmin")
			resp, body := h.postAs(s, "/admin/inventory", nil)
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "Your access to the portal has ended") {
				t.Errorf("POST after the user was deleted = %d\n%s", resp.StatusCode, body)
			}
			if _, home := h.get(s.c, "/"); strings.Contains(home, `data-testid="user-name"`) {
				t.Error("the deleted user is still signed in")
			}
		})
	}
}

func TestGroupsAreRecheckedWithTheIdentityStore(t *testing.T) {
	f := awstest.NewIdentityStore(t)
	member := f.AddUser("member.red@example.test")
	blue := f.AddGroup("team-blue-owners")
	red := f.AddGroup("team-red-members")
	f.AddMembership(member, blue)
	f.AddMembership(member, red)
	clk := newTestClock()
	h := newHarness(t, false, withIdentityStore(f, auth.UserAttrEmail), withClock(clk))
	s := h.signIn("member.red")
	if resp, _ := h.get(noRedirect(s.c), "/teams/blue"); resp.StatusCode != http.StatusOK {
		t.Fatalf("/teams/blue before = %d", resp.StatusCode)
	}
	f.RemoveMembership(member, blue)

	// Reads within the interval keep the confirmed roles (from the cache
	// or not: the session is not re-checked yet).
	if resp, _ := h.get(noRedirect(s.c), "/teams/blue"); resp.StatusCode != http.StatusOK {
		t.Errorf("/teams/blue within the interval = %d", resp.StatusCode)
	}
	// A change re-checks at once, past the group cache.
	if resp, _ := h.postAs(s, "/teams/blue/connections", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST to team blue after removal = %d, want 404", resp.StatusCode)
	}
	if resp, _ := h.get(noRedirect(s.c), "/teams/blue"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("/teams/blue after the re-check = %d, want 404", resp.StatusCode)
	}

	// The directory is down: reads go on, changes are refused (503).
	f.Fail(100)
	clk.Advance(DefaultGroupsRecheckInterval)
	if resp, _ := h.get(noRedirect(s.c), "/teams/red"); resp.StatusCode != http.StatusOK {
		t.Errorf("read while the directory is down = %d, want 200", resp.StatusCode)
	}
	resp, body := h.postAs(s, "/teams/red/connections", nil)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "Your access could not be confirmed") {
		t.Errorf("change while the directory is down = %d, want 503\n%s", resp.StatusCode, body)
	}
	f.Fail(0)

	// Deleted from the directory: the session ends at the next read after
	// the interval.
	f.RemoveUser(member)
	clk.Advance(DefaultGroupsRecheckInterval)
	resp, body = h.get(noRedirect(s.c), "/teams/red")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "no longer has your account") {
		t.Errorf("read after deletion = %d\n%s", resp.StatusCode, body)
	}
	if n, _ := h.srv.store.Count(context.Background()); n != 0 {
		t.Errorf("%d session rows after the user was deleted, want 0", n)
	}
}

// TestConcurrentRechecksShareOneRefresh: requests of one session that
// re-check at the same time must not each spend the (rotating) refresh
// token; the dev IdP refuses a spent one, which would end the session.
func TestConcurrentRechecksShareOneRefresh(t *testing.T) {
	clk := newTestClock()
	h := newHarness(t, false, withOIDC(nil, "offline_access"), withClock(clk))
	s := h.signIn("admin")
	for round := range 3 {
		clk.Advance(DefaultGroupsRecheckInterval)
		const n = 8
		codes := make(chan int, n)
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := noRedirect(s.c).Get(h.base + "/admin")
				if err != nil {
					codes <- 0
					return
				}
				resp.Body.Close()
				codes <- resp.StatusCode
			}()
		}
		wg.Wait()
		close(codes)
		for code := range codes {
			if code != http.StatusOK {
				t.Fatalf("round %d: a concurrent GET /admin = %d, want 200 (the session must survive)", round, code)
			}
		}
	}
}

// TestSessionEndsWhenNoMappedGroupIsLeft: a user still known to the
// provider but in no mapped group any more is signed out at the next
// change.
func TestSessionEndsWhenNoMappedGroupIsLeft(t *testing.T) {
	h := newHarness(t, false)
	s := h.signIn("owner.blue")
	if err := h.idp().SetUser(devidp.User{Username: "owner.blue", Name: "Bianca Owner (Blue)", Email: "owner.blue@example.test", Groups: []string{"some-other-group"}}); err != nil {
		t.Fatal(err)
	}
	resp, body := h.postAs(s, "/teams/blue/connections", nil)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "no longer in any group that gives access") {
		t.Errorf("POST after leaving every mapped group = %d\n%s", resp.StatusCode, body)
	}
	if n, _ := h.srv.store.Count(context.Background()); n != 0 {
		t.Errorf("%d session rows, want 0", n)
	}
	if !strings.Contains(h.logs.String(), "session ended by group re-check") {
		t.Error("the ended session is not logged")
	}
}
