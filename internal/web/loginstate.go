package web

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// The login state (state, nonce, PKCE verifier, where to go next) travels in
// a short-lived cookie sealed under the session key instead of a session row:
// an anonymous GET /login writes nothing to the database, so nobody can fill
// the sessions table by requesting it. The cookie is HttpOnly, Secure behind
// https, SameSite=Lax (the provider's redirect back is a top-level GET) and
// sent only to the callback.
const (
	loginCookie     = "portal_login"
	loginCookiePath = "/auth/callback"
	// LoginStateTTL is how long a started sign-in may take at the provider.
	LoginStateTTL = 10 * time.Minute
)

type loginState struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Next     string `json:"x"`
	Expires  int64  `json:"e"` // unix seconds
}

var errNoLoginState = errors.New("no valid login state cookie")

func (s *Server) setLoginState(c echo.Context, ls loginState) {
	ls.Expires = s.opts.Now().Add(LoginStateTTL).Unix()
	b, _ := json.Marshal(ls)
	c.SetCookie(&http.Cookie{
		Name: loginCookie, Value: s.loginSeal.sealString(string(b)),
		Path: loginCookiePath, MaxAge: int(LoginStateTTL / time.Second),
		HttpOnly: true, Secure: s.tls, SameSite: http.SameSiteLaxMode,
	})
}

// popLoginState reads and clears the login-state cookie. A missing, tampered
// or expired cookie is errNoLoginState.
func (s *Server) popLoginState(c echo.Context) (loginState, error) {
	ck, err := c.Cookie(loginCookie)
	if err != nil || ck.Value == "" {
		return loginState{}, errNoLoginState
	}
	c.SetCookie(&http.Cookie{
		Name: loginCookie, Value: "", Path: loginCookiePath, MaxAge: -1,
		HttpOnly: true, Secure: s.tls, SameSite: http.SameSiteLaxMode,
	})
	plain, err := s.loginSeal.openString(ck.Value)
	if err != nil {
		return loginState{}, errNoLoginState
	}
	var ls loginState
	if json.Unmarshal([]byte(plain), &ls) != nil || ls.State == "" {
		return loginState{}, errNoLoginState
	}
	if !s.opts.Now().Before(time.Unix(ls.Expires, 0)) {
		return loginState{}, errors.New("login state cookie expired")
	}
	return ls, nil
}
