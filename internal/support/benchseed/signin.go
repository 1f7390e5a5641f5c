package benchseed

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"time"
)

var (
	reAuthRequest = regexp.MustCompile(`name="authRequestID" value="([^"]+)"`)
	reCSRF        = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)
	reSecret      = regexp.MustCompile(`data-testid="token-secret">(hpp_[A-Za-z0-9_-]+)<`)
)

// Session is a user signed in to a running `portal serve --dev`, by the
// session cookie or by an API token (Page.Token).
type Session struct {
	Client *http.Client // carries the session cookie, or the token
	Header string       // the header a load generator sends: "Cookie: …" or "Authorization: Bearer …"
}

// SignIn signs user (one of devidp.DemoUsers, e.g. "admin") in to the
// portal at base the way a browser does: /login sends it to the built-in
// identity provider (--dev), whose login page posts the chosen user; the
// callback sets the session cookie.
func SignIn(base, user string) (*Session, error) {
	jar, err := cookiejar.New(nil)
	if err != nil {
		return nil, err
	}
	c := &http.Client{Jar: jar, Timeout: 60 * time.Second}
	resp, err := c.Get(base + "/login")
	if err != nil {
		return nil, err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := reAuthRequest.FindSubmatch(b)
	if resp.StatusCode != http.StatusOK || m == nil {
		return nil, fmt.Errorf("sign in %s: /login ended at %s with %d and no login form", user, resp.Request.URL, resp.StatusCode)
	}
	resp, err = c.PostForm(base+"/dev-idp/login", url.Values{"authRequestID": {string(m[1])}, "username": {user}})
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("sign in %s: the callback ended at %s with %d", user, resp.Request.URL, resp.StatusCode)
	}
	u, _ := url.Parse(base + "/")
	var parts []string
	for _, ck := range jar.Cookies(u) {
		parts = append(parts, ck.Name+"="+ck.Value)
	}
	if len(parts) == 0 {
		return nil, errors.New("sign in " + user + ": no session cookie")
	}
	return &Session{Client: c, Header: "Cookie: " + strings.Join(parts, "; ")}, nil
}

// Token makes a read token of s's user the way a person does, on
// /settings/tokens (every team, 30 days), and returns a Session that sends
// it instead of the cookie.
func (s *Session) Token(base string) (*Session, error) {
	code, _, b, err := s.Get(base, "/settings/tokens")
	m := reCSRF.FindSubmatch(b)
	if err != nil || code != http.StatusOK || m == nil {
		return nil, fmt.Errorf("make a token: GET /settings/tokens = %d, %v, no form", code, err)
	}
	resp, err := s.Client.PostForm(base+"/settings/tokens", url.Values{"_csrf": {string(m[1])},
		"name": {"benchmark"}, "scope": {"read"}, "days": {"30"}})
	if err != nil {
		return nil, err
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	sm := reSecret.FindSubmatch(b)
	if resp.StatusCode != http.StatusOK || sm == nil {
		return nil, fmt.Errorf("make a token: POST /settings/tokens = %d and no secret shown:\n%s", resp.StatusCode, truncate(b))
	}
	header := "Bearer " + string(sm[1])
	c := &http.Client{Timeout: 60 * time.Second, Transport: bearer{header}}
	return &Session{Client: c, Header: "Authorization: " + header}, nil
}

// bearer sends Authorization on every request, and no cookie.
type bearer struct{ value string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", b.value)
	return http.DefaultTransport.RoundTrip(r)
}

// SignInAll signs in every user the pages are read by, and makes the
// tokens the API pages are read with (keyed by Page.Reader).
func SignInAll(base string, pages []Page) (map[string]*Session, error) {
	out := map[string]*Session{}
	for _, p := range pages {
		if out[p.User] == nil {
			s, err := SignIn(base, p.User)
			if err != nil {
				return nil, err
			}
			out[p.User] = s
		}
		if p.Token && out[p.Reader()] == nil {
			s, err := out[p.User].Token(base)
			if err != nil {
				return nil, err
			}
			out[p.Reader()] = s
		}
	}
	return out, nil
}

// Get fetches path and returns its status, Content-Type and body.
func (s *Session) Get(base, path string) (int, string, []byte, error) {
	resp, err := s.Client.Get(base + path)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), b, err
}

// Check fetches every page as its user (signed in by sessions) and fails
// unless each is a 200 that shows the seeded data (Page.Want, Page.Not). It returns
// the bodies and Content-Types by page name.
func Check(base string, sessions map[string]*Session, pages []Page) (map[string][]byte, map[string]string, error) {
	bodies, types := map[string][]byte{}, map[string]string{}
	for _, p := range pages {
		s := sessions[p.Reader()]
		if s == nil {
			return nil, nil, fmt.Errorf("%s: no session of %s", p.Name, p.Reader())
		}
		code, ct, b, err := s.Get(base, p.Path)
		if err != nil {
			return nil, nil, fmt.Errorf("GET %s: %w", p.Path, err)
		}
		if code != http.StatusOK {
			return nil, nil, fmt.Errorf("GET %s (%s) = %d, want 200:\n%s", p.Path, p.Name, code, truncate(b))
		}
		if !strings.Contains(string(b), p.Want) {
			return nil, nil, fmt.Errorf("GET %s (%s): the page does not show the seeded data (no %q):\n%s", p.Path, p.Name, p.Want, truncate(b))
		}
		if p.Not != "" && strings.Contains(string(b), p.Not) {
			return nil, nil, fmt.Errorf("GET %s (%s): the page does not show the seeded data (it has %q):\n%s", p.Path, p.Name, p.Not, truncate(b))
		}
		bodies[p.Name], types[p.Name] = b, ct
	}
	return bodies, types, nil
}

// truncate is a page's main part (after the header every page has), at
// most 4000 bytes of it.
func truncate(b []byte) string {
	if i := strings.Index(string(b), "<main"); i > 0 {
		b = b[i:]
	}
	if len(b) > 4000 {
		return string(b[:4000]) + "…"
	}
	return string(b)
}
