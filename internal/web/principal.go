package web

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// sessionUser is what the session keeps about the signed-in user: the
// claims the portal uses, the principal as last resolved, and what the
// re-checks and logout need. The provider's tokens are never kept in clear:
// Tokens is sealed under the session key (see sealTokens), so a copy of the
// database yields no ID, access or refresh token.
type sessionUser struct {
	UserID      int64
	Subject     string
	Email       string
	Name        string
	Roles       []workflow.Role
	Memberships []workflow.Membership
	// Groups as last seen (login or re-check), DirName the user's name in
	// the directory (Options.Groups; empty without one).
	Groups  []string
	DirName string
	// Tokens: sealed auth.Tokens (ID token for logout's hint; access and
	// refresh tokens for re-checks against the provider).
	Tokens []byte
	// CheckedAt is when the groups were last confirmed.
	CheckedAt time.Time
}

const (
	sessUser = "user"
	ctxUser  = "principal"
)

func (s *Server) loadPrincipal(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if isAnonymousPath(c.Request().URL.Path) || bearerRequest(c.Request()) {
			return next(c) // apiAuth authenticates a token's request
		}
		if su, ok := s.sessions.Get(c.Request().Context(), sessUser).(sessionUser); ok {
			if s.needsRecheck(c, su) {
				var err error
				if su, err = s.recheckSession(c, su); err != nil {
					return err
				}
			}
			p := workflow.NewPrincipal(su.UserID, su.Subject, su.Email, su.Name, su.Roles, su.Memberships)
			c.Set(ctxUser, p)
		}
		return next(c)
	}
}

// principal returns the signed-in principal, if any.
func principal(c echo.Context) (workflow.Principal, bool) {
	p, ok := c.Get(ctxUser).(workflow.Principal)
	return p, ok
}

// requireLogin sends anonymous visitors to /login, remembering where they
// were going.
func (s *Server) requireLogin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if _, ok := principal(c); ok {
			return next(c)
		}
		if c.Request().Method != http.MethodGet {
			return echo.NewHTTPError(http.StatusUnauthorized)
		}
		return c.Redirect(http.StatusSeeOther, "/login?next="+url.QueryEscape(c.Request().URL.RequestURI()))
	}
}

// authorize applies the workflow policy. A denied team object is reported as
// not found, so nobody can probe which teams or objects exist.
func authorize(c echo.Context, a workflow.Action, o workflow.Object) (workflow.Principal, error) {
	p, ok := principal(c)
	if !ok {
		return p, echo.NewHTTPError(http.StatusUnauthorized)
	}
	d := workflow.Decide(p, a, o)
	if d.Allowed {
		return p, nil
	}
	// Outside the team, the team's objects do not exist; inside it, say no.
	if o.Team != "" && !workflow.Decide(p, workflow.ActionViewTeam, workflow.Object{Team: o.Team}).Allowed {
		return p, &echo.HTTPError{Code: http.StatusNotFound, Internal: errDenied(d.Reason)}
	}
	return p, &echo.HTTPError{Code: http.StatusForbidden, Internal: errDenied(d.Reason)}
}

type errDenied string

func (e errDenied) Error() string { return "denied: " + string(e) }

// page builds the layout's view model for the current request.
func (s *Server) page(c echo.Context, title string) views.Page {
	pg := views.Page{
		Title:   title,
		DevIdP:  s.opts.DevIdP != nil,
		Version: s.opts.Version,
	}
	p, ok := principal(c)
	if !ok {
		return pg
	}
	u := &views.User{Name: p.DisplayName(), Email: p.Email}
	for _, r := range p.Roles {
		u.Roles = append(u.Roles, string(r))
	}
	for _, m := range p.Memberships {
		u.Memberships = append(u.Memberships, views.Membership{Team: m.Team, Role: string(m.Role), Href: "/teams/" + m.Team})
	}
	pg.User = u
	pg.CSRFToken = s.csrfToken(c)
	pg.Nav = navFor(p, c.Request().URL.Path)
	pg.Unread = s.unreadCount(c, p)
	return pg
}

// navFor lists the links the principal's roles open, in a fixed order.
func navFor(p workflow.Principal, path string) []views.NavItem {
	var items []views.NavItem
	add := func(label, href, id string) {
		active := path == href || (href != "/" && strings.HasPrefix(path, href+"/"))
		items = append(items, views.NavItem{Label: label, Href: href, TestID: id, Active: active})
	}
	add("Home", "/", "nav-home")
	add("Connections", "/connections", "nav-connections")
	for _, m := range p.Memberships {
		add("Team "+m.Team, "/teams/"+m.Team, "nav-team-"+m.Team)
	}
	add("Exceptions", "/exceptions", "nav-exceptions")
	if workflow.Decide(p, workflow.ActionViewAdminHome, workflow.Object{}).Allowed {
		add("Admin", "/admin", "nav-admin")
	}
	if workflow.Decide(p, workflow.ActionViewReviewHome, workflow.Object{}).Allowed {
		add("Reviews", "/reviews", "nav-reviews")
	}
	if workflow.Decide(p, workflow.ActionViewFinanceHome, workflow.Object{}).Allowed {
		add("Cost", "/finance", "nav-finance")
	}
	if workflow.Decide(p, workflow.ActionViewAudit, workflow.Object{}).Allowed {
		add("Audit", "/audit", "nav-audit")
	}
	return items
}
