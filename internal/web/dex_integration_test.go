package web

import (
	"context"
	"html"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/auth"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/support/testenv"
)

var reDexForm = regexp.MustCompile(`(?s)<form[^>]*method="post"[^>]*action="([^"]*)"`)

// TestLoginThroughDex performs the whole production login path against a
// real Dex (started by `make test`): discovery, authorization-code + PKCE,
// Dex's own password form, code exchange, ID token verification, userinfo,
// group mapping and the session, all over real HTTP.
func TestLoginThroughDex(t *testing.T) {
	issuer := testenv.Require(t, "PORTAL_TEST_DEX_ISSUER")
	clientID := testenv.Require(t, "PORTAL_TEST_DEX_CLIENT_ID")
	secretFile := testenv.Require(t, "PORTAL_TEST_DEX_CLIENT_SECRET_FILE")
	redirect := testenv.Require(t, "PORTAL_TEST_DEX_REDIRECT_URL")
	password := testenv.Require(t, "PORTAL_TEST_DEX_PASSWORD")

	secret, err := os.ReadFile(secretFile)
	if err != nil {
		t.Fatal(err)
	}
	ru, err := url.Parse(redirect)
	if err != nil {
		t.Fatal(err)
	}
	base := ru.Scheme + "://" + ru.Host
	ctx := context.Background()
	db, err := store.Open(ctx, t.TempDir()+"/portal.db")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	bu, _ := url.Parse(base)
	logs := &testenv.Buffer{}
	clk := newTestClock()
	srv, err := New(Options{
		Now: clk.Now,
		DB:  db, Mapping: auth.DevMapping(), BaseURL: bu, Version: "test",
		Logger:     slog.New(slog.NewJSONHandler(logs, nil)),
		SessionKey: []byte("0123456789abcdef0123456789abcdef"),
		OIDC: auth.NewClient(auth.OIDCConfig{
			Issuer: issuer, ClientID: clientID, ClientSecret: strings.TrimSpace(string(secret)),
			// offline_access: the group re-checks refresh the login.
			RedirectURL: redirect, Scopes: []string{"openid", "email", "profile", "groups", "offline_access"},
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", ru.Host)
	if err != nil {
		t.Fatalf("listen on the callback address the test bed reserved: %v", err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(ln)
	defer hs.Close()

	cases := []struct {
		email     string
		wantTeams []string
		wantRoles []string
		noAccess  bool
	}{
		{email: "owner.red@example.test", wantTeams: []string{"red", "owner"}},
		{email: "member.red@example.test", wantTeams: []string{"red", "member"}},
		{email: "owner.blue@example.test", wantTeams: []string{"blue", "owner"}},
		{email: "admin@example.test", wantRoles: []string{"admin"}},
		{email: "reviewer@example.test", wantRoles: []string{"reviewer"}},
		{email: "finance@example.test", wantRoles: []string{"finance"}},
		{email: "nogroup@example.test", noAccess: true},
	}
	for _, tc := range cases {
		t.Run(tc.email, func(t *testing.T) {
			jar, _ := cookiejar.New(nil)
			c := &http.Client{Jar: jar, Timeout: 10 * time.Second}
			resp, err := c.Get(base + "/login")
			if err != nil {
				t.Fatal(err)
			}
			page := readBody(t, resp)
			m := reDexForm.FindStringSubmatch(page)
			if m == nil || !strings.HasPrefix(resp.Request.URL.String(), issuer) {
				t.Fatalf("expected Dex's login form, got %s:\n%s", resp.Request.URL, page)
			}
			action, err := resp.Request.URL.Parse(html.UnescapeString(m[1]))
			if err != nil {
				t.Fatal(err)
			}
			resp, err = c.PostForm(action.String(), url.Values{"login": {tc.email}, "password": {password}})
			if err != nil {
				t.Fatal(err)
			}
			body := readBody(t, resp)
			if tc.noAccess {
				if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "no access to the portal") {
					t.Fatalf("no-group user: %d at %s", resp.StatusCode, resp.Request.URL)
				}
				return
			}
			if resp.StatusCode != 200 || resp.Request.URL.String() != base+"/" {
				t.Fatalf("login ended at %s with %d:\n%s", resp.Request.URL, resp.StatusCode, body)
			}
			if !strings.Contains(body, tc.email) {
				t.Errorf("home does not show %s", tc.email)
			}
			teams, roles := section(body, "user-teams"), section(body, "user-roles")
			for _, w := range tc.wantTeams {
				if !strings.Contains(teams, w) {
					t.Errorf("teams %q lack %q", teams, w)
				}
			}
			for _, w := range tc.wantRoles {
				if !strings.Contains(roles, w) {
					t.Errorf("roles %q lack %q", roles, w)
				}
			}
			if strings.Contains(body, `data-testid="dev-banner"`) {
				t.Error("a real provider must not show the development banner")
			}
			if len(tc.wantRoles) == 0 || tc.wantRoles[0] != "admin" {
				return
			}
			// Re-checks through Dex's refresh grant keep a user whose
			// groups did not change: a read after the interval and a
			// change (which re-checks first).
			clk.Advance(DefaultGroupsRecheckInterval)
			nr := *c
			nr.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			resp, err = nr.Get(base + "/admin")
			if err != nil {
				t.Fatal(err)
			}
			if readBody(t, resp); resp.StatusCode != http.StatusOK {
				t.Errorf("/admin after the re-check interval = %d, want 200", resp.StatusCode)
			}
			m = reCSRF.FindStringSubmatch(body)
			if m == nil {
				t.Fatal("no CSRF token on the home page")
			}
			resp, err = nr.PostForm(base+"/admin/inventory", url.Values{"_csrf": {m[1]}})
			if err != nil {
				t.Fatal(err)
			}
			if pb := readBody(t, resp); resp.StatusCode == http.StatusForbidden || resp.StatusCode >= 500 {
				t.Errorf("a change after a re-check through Dex = %d:\n%s", resp.StatusCode, pb)
			}
		})
	}
}
