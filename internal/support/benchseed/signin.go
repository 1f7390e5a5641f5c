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

var reAuthRequest = regexp.MustCompile(`name="authRequestID" value="([^"]+)"`)

// Session is a user signed in to a running `portal serve --dev`.
type Session struct {
	Client *http.Client // carries the session cookie
	Cookie string       // the Cookie header a load generator sends
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
	return &Session{Client: c, Cookie: strings.Join(parts, "; ")}, nil
}

// SignInAll signs in every user the pages are viewed by.
func SignInAll(base string, pages []Page) (map[string]*Session, error) {
	out := map[string]*Session{}
	for _, p := range pages {
		if out[p.User] != nil {
			continue
		}
		s, err := SignIn(base, p.User)
		if err != nil {
			return nil, err
		}
		out[p.User] = s
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
		s := sessions[p.User]
		if s == nil {
			return nil, nil, fmt.Errorf("%s: no session of %s", p.Name, p.User)
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
