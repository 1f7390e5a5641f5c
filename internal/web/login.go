package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/auth"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// login starts the authorization-code flow: fresh state, nonce and PKCE
// verifier go into the sealed login-state cookie (loginstate.go), not the
// database, and the browser goes to the provider.
func (s *Server) login(c echo.Context) error {
	ctx := c.Request().Context()
	ls, err := s.opts.OIDC.Start(ctx)
	if err != nil {
		return s.providerDown(err)
	}
	s.setLoginState(c, loginState{State: ls.State, Nonce: ls.Nonce, Verifier: ls.Verifier, Next: safeNext(c.QueryParam("next"))})
	return c.Redirect(http.StatusSeeOther, ls.URL)
}

// safeNext accepts only a local absolute path, so /login?next= cannot be
// used to redirect users to another site. Browsers strip tabs and newlines
// from URLs and read a backslash as a slash, so "/\t/evil.example" would
// become "//evil.example": the path must start with exactly one slash, parse
// with no scheme or host, and hold no control or invisible character and no
// backslash, before and after percent-decoding.
func safeNext(n string) string {
	if !localPath(n) || strings.HasPrefix(n, "/login") || strings.HasPrefix(n, "/auth/") {
		return "/"
	}
	return n
}

func localPath(n string) bool {
	dec, err := url.PathUnescape(n)
	if err != nil {
		return false
	}
	for _, s := range []string{n, dec} {
		if !strings.HasPrefix(s, "/") || strings.HasPrefix(s, "//") || strings.ContainsRune(s, '\\') || !utf8.ValidString(s) {
			return false
		}
		for _, r := range s {
			if !unicode.IsPrint(r) { // controls (C0, C1), format characters, non-ASCII spaces
				return false
			}
		}
	}
	u, err := url.Parse(n)
	return err == nil && u.Scheme == "" && u.Host == "" && u.User == nil && u.Opaque == "" &&
		strings.HasPrefix(u.Path, "/") && !strings.HasPrefix(u.Path, "//")
}

// callback finishes the login: checks state, exchanges the code, verifies
// the ID token and nonce, records the user, maps groups, and rotates the
// session.
func (s *Server) callback(c echo.Context) error {
	ctx := c.Request().Context()
	ls, lsErr := s.popLoginState(c)
	wantState, nonce, verifier, next := ls.State, ls.Nonce, ls.Verifier, ls.Next

	id, err := s.finishSignIn(c, wantState, verifier, nonce, lsErr)
	if err != nil {
		return err
	}
	groupsSeen := "Groups the identity provider sent: "
	var dirName string
	if s.opts.Groups != nil {
		if dirName, id.Groups, err = s.directoryGroups(c, id); err != nil {
			return err
		}
		groupsSeen = "Your groups in the directory (IAM Identity Center): "
	}

	u, err := s.opts.DB.RecordLogin(ctx, id.Issuer, id.Subject, id.Email, id.Name, id.Groups, s.opts.Now())
	if err != nil {
		return err
	}
	if dirName != "" {
		// Notice delivery asks the directory under this name whether the
		// user is still in the team's groups (internal/notify).
		if err := s.opts.DB.SetUserDirName(ctx, u.ID, dirName); err != nil {
			return err
		}
	}
	if s.opts.OnLogin != nil && u.Email != "" {
		if err := s.opts.OnLogin(ctx, u.Email); err != nil {
			s.opts.Logger.ErrorContext(ctx, "after sign-in: review check failed", "user", u.Email, "err", err)
		}
	}
	roles, ms := s.opts.Mapping.Resolve(id.Groups)
	p := workflow.NewPrincipal(u.ID, id.Subject, id.Email, id.Name, roles, ms)
	if !p.HasAccess() {
		return noAccess(p, groupsSeen, id.Groups)
	}

	if err := s.startSession(c, p, id, dirName); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, safeNext(next))
}

// finishSignIn checks the provider's answer against the sign-in this
// browser started (state), and redeems the code for a verified identity.
func (s *Server) finishSignIn(c echo.Context, wantState, verifier, nonce string, lsErr error) (auth.Identity, error) {
	var id auth.Identity
	if e := c.QueryParam("error"); e != "" {
		return id, loginError(http.StatusUnauthorized, "Sign-in was not completed",
			"The identity provider ended the sign-in without letting you in ("+truncate(e, 64)+"). Try again, or ask the platform team if it keeps happening.",
			errors.New("provider returned error "+truncate(e, 64)))
	}
	state := c.QueryParam("state")
	if wantState == "" || state == "" || state != wantState {
		return id, loginError(http.StatusBadRequest, "This sign-in link is no longer valid",
			"The sign-in did not match one started in this browser in the last 10 minutes: it may have been opened twice, in another browser, or taken too long. Start again.",
			fmt.Errorf("state mismatch or no login in progress (%v)", lsErr))
	}
	code := c.QueryParam("code")
	if code == "" {
		return id, loginError(http.StatusBadRequest, "Sign-in was not completed",
			"The identity provider sent you back without an authorization code. Start again.", errors.New("callback without code"))
	}
	id, err := s.opts.OIDC.Finish(c.Request().Context(), code, verifier, nonce)
	switch {
	case errors.Is(err, auth.ErrCodeRejected):
		return id, loginError(http.StatusBadRequest, "The sign-in expired",
			"The identity provider did not accept the sign-in code: it took too long, or the page was reloaded and the code was already used. Start again.", err)
	case errors.Is(err, auth.ErrTokenInvalid):
		return id, loginError(http.StatusBadRequest, "The sign-in could not be verified",
			"The identity provider's answer failed the portal's checks, so you were not signed in. Start again; if it keeps happening tell the platform team the request id.", err)
	case err != nil:
		return id, s.providerDown(err)
	}
	return id, nil
}

// noAccess is the page of a user none of whose groups maps to a role or
// team, with the groups seen, so that they can ask for the right one.
func noAccess(p workflow.Principal, groupsSeen string, groups []string) error {
	detail := []string{"Signed in as: " + p.DisplayName()}
	if len(groups) == 0 {
		detail = append(detail, groupsSeen+"none")
	} else {
		detail = append(detail, groupsSeen+strings.Join(groups, ", "))
	}
	return &userError{page: views.ErrorPage{
		Status:  http.StatusForbidden,
		Title:   "Your account has no access to the portal yet",
		Message: "You signed in, but none of your groups is mapped to a portal role or team. Ask your team's owner or the platform team to add you to your team's group.",
		Detail:  detail, Action: "Back to the start page", ActionURL: "/",
	}, err: errors.New("user in no mapped group")}
}

// startSession rotates the session id at login (no fixation), restarts the
// absolute lifetime, issues a fresh CSRF token and stores who signed in.
func (s *Server) startSession(c echo.Context, p workflow.Principal, id auth.Identity, dirName string) error {
	ctx := c.Request().Context()
	if err := s.sessions.RenewToken(ctx); err != nil {
		return err
	}
	s.sessions.SetDeadline(ctx, s.opts.Now().Add(s.opts.SessionLifetime))
	s.sessions.Put(ctx, csrfKey, newToken())
	groups := id.Groups
	if groups == nil {
		groups = []string{}
	}
	s.sessions.Put(ctx, sessUser, sessionUser{
		UserID: p.UserID, Subject: p.Subject, Email: p.Email, Name: p.Name,
		Roles: p.Roles, Memberships: p.Memberships,
		Groups: groups, DirName: dirName, Tokens: s.sealTokens(id.Tokens), CheckedAt: s.opts.Now(),
	})
	s.opts.Logger.InfoContext(ctx, "login", "request_id", requestID(c), "user_id", p.UserID,
		"roles", len(p.Roles), "teams", len(p.Memberships))
	return nil
}

// directoryGroups asks Options.Groups for the user's groups, which replace
// the token's. A failure ends the login: letting the user in with the
// token's groups instead would grant what the directory may have revoked.
// The pages name no internals; the log has the cause and the request id.
func (s *Server) directoryGroups(c echo.Context, id auth.Identity) (string, []string, error) {
	ctx := c.Request().Context()
	name, err := s.opts.GroupsUser.UserName(id)
	if err != nil {
		s.opts.Logger.WarnContext(ctx, "login refused: no directory user name", "request_id", requestID(c),
			"issuer", id.Issuer, "subject", id.Subject, "user_attribute", string(s.opts.GroupsUser), "reason", err.Error())
		return "", nil, loginError(http.StatusForbidden, "Your sign-in cannot be matched to a directory account",
			"The portal looks up your groups in the organisation's directory, but "+err.Error()+". Ask the platform team to check the sign-in setup, and give them the request id.",
			err)
	}
	gs, err := s.opts.Groups.Groups(ctx, name)
	switch {
	case errors.Is(err, auth.ErrUserNotInDirectory):
		s.opts.Logger.WarnContext(ctx, "login refused: user not in the directory", "request_id", requestID(c),
			"issuer", id.Issuer, "subject", id.Subject, "user_attribute", string(s.opts.GroupsUser))
		return "", nil, &userError{page: views.ErrorPage{
			Status:  http.StatusForbidden,
			Title:   "Your account is not in the directory",
			Message: "You signed in, but the organisation's directory (IAM Identity Center) has no user named " + name + ", so the portal cannot tell which teams you belong to. Ask the platform team to check your account, and give them the request id.",
			Action:  "Back to the start page", ActionURL: "/",
		}, err: err}
	case err != nil:
		return "", nil, &userError{page: views.ErrorPage{
			Status:  http.StatusServiceUnavailable,
			Title:   "Your groups could not be looked up",
			Message: "You signed in, but the portal could not look up your teams in the organisation's directory (IAM Identity Center), so it did not let you in. Try again in a minute; if it keeps happening, tell the platform team the request id below.",
			Action:  "Try again", ActionURL: "/login",
		}, err: fmt.Errorf("directory groups: %w", err)}
	}
	return name, gs, nil
}

func loginError(status int, title, msg string, err error) error {
	return &userError{page: views.ErrorPage{
		Status: status, Title: title, Message: msg,
		Action: "Sign in again", ActionURL: "/login",
	}, err: err}
}

func (s *Server) providerDown(err error) error {
	return &userError{page: views.ErrorPage{
		Status:  http.StatusServiceUnavailable,
		Title:   "The identity provider is not answering",
		Message: "The portal could not reach the sign-in service at " + s.opts.OIDC.Issuer() + ". Try again in a minute; if it keeps happening, tell the platform team.",
		Action:  "Try again", ActionURL: "/login",
	}, err: err}
}

// logout ends the portal session and, when the provider offers it, the
// provider's session too. The ID token hint comes from the session's sealed
// tokens; without it the end-session request names the client only
// (client_id is allowed there: OpenID Connect RP-Initiated Logout 1.0,
// section 2).
func (s *Server) logout(c echo.Context) error {
	ctx := c.Request().Context()
	var idToken string
	if su, ok := s.sessions.Get(ctx, sessUser).(sessionUser); ok {
		if t, err := s.openTokens(su.Tokens); err == nil {
			idToken = t.IDToken
		}
	}
	if err := s.sessions.Destroy(ctx); err != nil {
		return err
	}
	back := s.opts.BaseURL.JoinPath("/signed-out").String()
	if idToken != "" {
		if u, ok := s.opts.OIDC.EndSessionURL(context.WithoutCancel(ctx), idToken, back); ok {
			return c.Redirect(http.StatusSeeOther, u)
		}
	}
	return c.Redirect(http.StatusSeeOther, "/signed-out")
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
