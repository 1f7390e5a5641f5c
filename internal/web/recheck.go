package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/auth"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// DefaultGroupsRecheckInterval is how long the groups read at login (or at
// the last re-check) are trusted for pages that change nothing.
const DefaultGroupsRecheckInterval = 5 * time.Minute

// Roles and teams are not fixed for the session's lifetime: the user's
// groups are asked for again (from the directory when Options.Groups is
// set, otherwise from the identity provider with the login's tokens)
//   - before every state-changing request (anything but GET, HEAD and
//     OPTIONS; logout excepted), and
//   - on any request once Options.GroupsRecheckInterval has passed since
//     the last confirmation, and
//   - on every read of /notifications.
//
// Changed groups replace the session's roles and teams and the users row. A
// user the directory or provider no longer knows, or who is in no mapped
// group any more, has their session ended. When the directory or provider
// cannot be reached, a state-changing request is refused (503: fail closed)
// and a read keeps the roles last confirmed, asking again on the next
// request.
func (s *Server) needsRecheck(c echo.Context, su sessionUser) bool {
	r := c.Request()
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		// The notifications page is read with the groups as they are now:
		// it lists notices about teams, and one delivered before the
		// reader left a team must not be shown (issue 32 item 1).
		if r.URL.Path == "/notifications" {
			return true
		}
		return !s.opts.Now().Before(su.CheckedAt.Add(s.opts.GroupsRecheckInterval))
	}
	return r.URL.Path != "/logout" // signing out must work while the provider is down
}

// accessEnded: the re-check found that the user may no longer use the portal.
type accessEnded struct{ reason, message string }

func (a accessEnded) Error() string { return "access ended: " + a.reason }

// recheckGate serialises the re-checks of one session. Concurrent requests
// of a session each load their own copy of it; without the gate each would
// re-check, and with a rotating refresh token (the dev IdP; Dex after its
// reuse interval) all but the first would present a spent token and end
// the session. A request whose copy is older than a re-check another request
// finished moments ago takes that result instead.
type recheckGate struct {
	mu    sync.Mutex
	slots map[string]*recheckSlot
}

type recheckSlot struct {
	mu    sync.Mutex
	users int         // requests holding or waiting for mu (guarded by the gate's mu)
	su    sessionUser // the last successful re-check's result
	done  time.Time   // when it finished (wall clock)
}

const recheckShare = 10 * time.Second

func (g *recheckGate) acquire(key string) *recheckSlot {
	g.mu.Lock()
	if g.slots == nil {
		g.slots = map[string]*recheckSlot{}
	}
	for k, sl := range g.slots { // a handful: sessions re-checked in the last seconds
		if sl.users == 0 && time.Since(sl.done) > recheckShare {
			delete(g.slots, k)
		}
	}
	sl := g.slots[key]
	if sl == nil {
		sl = &recheckSlot{}
		g.slots[key] = sl
	}
	sl.users++
	g.mu.Unlock()
	sl.mu.Lock()
	return sl
}

func (g *recheckGate) release(sl *recheckSlot) {
	sl.mu.Unlock()
	g.mu.Lock()
	sl.users--
	g.mu.Unlock()
}

func (s *Server) recheckSession(c echo.Context, su sessionUser) (sessionUser, error) {
	ctx := c.Request().Context()
	slot := s.recheckGate.acquire(s.sessions.Token(ctx))
	defer s.recheckGate.release(slot)
	if !slot.done.IsZero() && time.Since(slot.done) < recheckShare && slot.su.CheckedAt.After(su.CheckedAt) {
		s.sessions.Put(ctx, sessUser, slot.su)
		return slot.su, nil
	}
	nsu, err := s.recheck(ctx, su)
	var ended accessEnded
	switch {
	case errors.As(err, &ended):
		s.opts.Logger.WarnContext(ctx, "session ended by group re-check", "request_id", requestID(c),
			"user_id", su.UserID, "reason", ended.reason)
		if derr := s.sessions.Destroy(ctx); derr != nil {
			return su, derr
		}
		return su, &userError{page: views.ErrorPage{
			Status:  http.StatusForbidden,
			Title:   "Your access to the portal has ended",
			Message: ended.message + " You have been signed out. If you think this is wrong, ask your team's owner or the platform team.",
			Action:  "Sign in again", ActionURL: "/login",
		}, err: err}
	case err != nil:
		switch c.Request().Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			// Reads keep the roles last confirmed; the next request asks again.
			s.opts.Logger.WarnContext(ctx, "group re-check failed; keeping the last confirmed roles for a read",
				"request_id", requestID(c), "user_id", su.UserID, "err", err.Error())
			return su, nil
		}
		return su, &userError{page: views.ErrorPage{
			Status:  http.StatusServiceUnavailable,
			Title:   "Your access could not be confirmed",
			Message: "Before any change the portal checks your groups again, and " + s.groupsSource() + " did not answer, so nothing was changed. Try again in a minute; if it keeps happening, tell the platform team the request id below.",
			Action:  "Back to the start page", ActionURL: "/",
		}, err: fmt.Errorf("group re-check: %w", err)}
	}
	s.sessions.Put(ctx, sessUser, nsu)
	slot.su, slot.done = nsu, time.Now()
	return nsu, nil
}

func (s *Server) groupsSource() string {
	if s.opts.Groups != nil {
		return "the organisation's directory (IAM Identity Center)"
	}
	return "the identity provider"
}

// recheck returns su with its groups, roles and teams confirmed now, an
// accessEnded error, or another error when the source could not be asked.
// askDirectory asks the organisation's directory (Options.Groups) for
// the groups of the person it names dirName: past its lookup cache when
// fresh and the source can (auth.FreshGroupSource), as a session's
// re-check and an API token's write do. auth.ErrUserNotInDirectory passes
// through.
func (s *Server) askDirectory(ctx context.Context, dirName string, fresh bool) ([]string, error) {
	if f, ok := s.opts.Groups.(auth.FreshGroupSource); ok && fresh {
		return f.FreshGroups(ctx, dirName)
	}
	return s.opts.Groups.Groups(ctx, dirName)
}

func (s *Server) recheck(ctx context.Context, su sessionUser) (sessionUser, error) {
	var groups []string
	if s.opts.Groups != nil {
		if su.DirName == "" { // a session from before re-checks existed
			return su, accessEnded{"no directory user name in the session", "Your sign-in can no longer be checked."}
		}
		var err error
		groups, err = s.askDirectory(ctx, su.DirName, true)
		if errors.Is(err, auth.ErrUserNotInDirectory) {
			return su, accessEnded{"user not in the directory", "The organisation's directory no longer has your account."}
		}
		if err != nil {
			return su, err
		}
	} else {
		t, err := s.openTokens(su.Tokens)
		if err != nil {
			return su, accessEnded{"session tokens unreadable", "Your sign-in can no longer be checked."}
		}
		id, nt, err := s.opts.OIDC.Recheck(ctx, su.Subject, t)
		switch {
		case errors.Is(err, auth.ErrLoginRevoked), errors.Is(err, auth.ErrTokenInvalid):
			return su, accessEnded{err.Error(), "The identity provider no longer accepts your sign-in."}
		case errors.Is(err, auth.ErrCannotRecheck):
			return su, accessEnded{err.Error(), "Your sign-in has expired at the identity provider, so your groups cannot be checked again."}
		case err != nil:
			return su, err
		}
		groups = id.Groups
		su.Tokens = s.sealTokens(nt)
	}
	if groups == nil {
		groups = []string{}
	}
	roles, ms := s.opts.Mapping.Resolve(groups)
	if !workflow.NewPrincipal(su.UserID, su.Subject, su.Email, su.Name, roles, ms).HasAccess() {
		return su, accessEnded{"user in no mapped group", "You are no longer in any group that gives access to the portal."}
	}
	// Confirmed now: notice delivery trusts groups for a session's
	// lifetime after their last recorded confirmation (internal/notify).
	// Changed groups must be recorded; recording an unchanged
	// confirmation is best effort (a stale record only withholds notices).
	changed := !slices.Equal(groups, su.Groups)
	if err := s.opts.DB.ConfirmUserGroups(ctx, su.UserID, groups, s.opts.Now()); err != nil {
		if changed {
			return su, err
		}
		s.opts.Logger.WarnContext(ctx, "group re-check: could not record the confirmation", "user_id", su.UserID, "err", err.Error())
	}
	if changed {
		s.opts.Logger.InfoContext(ctx, "groups changed since login", "user_id", su.UserID,
			"roles", len(roles), "teams", len(ms))
	}
	su.Groups, su.Roles, su.Memberships = groups, roles, ms
	su.CheckedAt = s.opts.Now()
	return su, nil
}

// sealTokens encrypts the provider's tokens for the session; openTokens
// reverses it. Only what is used is kept: the ID token (logout's hint) and,
// without a directory, the access and refresh tokens for re-checks.
func (s *Server) sealTokens(t auth.Tokens) []byte {
	if s.opts.Groups != nil {
		t = auth.Tokens{IDToken: t.IDToken}
	}
	b, _ := json.Marshal(t)
	return s.tokenSeal.seal(b)
}

func (s *Server) openTokens(b []byte) (auth.Tokens, error) {
	var t auth.Tokens
	if len(b) == 0 {
		return t, nil
	}
	p, err := s.tokenSeal.open(b)
	if err != nil {
		return t, err
	}
	err = json.Unmarshal(p, &t)
	return t, err
}
