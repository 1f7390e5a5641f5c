package workflow

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Personal access tokens (issue 37): a person's key for the JSON API under
// /api/v1. A token is not an identity of its own: it acts as its person,
// with the roles and teams their groups give them as last confirmed
// (TokenPrincipal), narrowed by the token's scope and team limit, and never
// more. The rules here decide who may create and revoke a token and what a
// token may do; the store only stores tokens, and internal/web asks these
// functions on every request.

// TokenScope says what a token may do.
type TokenScope string

// The scopes. TokenDecide is the token made for decisions: it reads, and
// approves, rejects and requests changes of submitted versions and decides
// lifecycle reviews, always under Decide's rules for its person (the
// approvals' independence included: nobody decides on a request they
// filed, edited or submitted, through any door). It does not run the
// owner's commands nor mark notices read: a pipeline that files requests
// holds a read-write token, and a decision token's secret, if it leaks,
// cannot also change what it decides on. Only a person allowed to decide
// (an admin or a reviewer) makes one (CheckTokenRequest).
const (
	TokenRead      TokenScope = "read"       // GET requests only
	TokenReadWrite TokenScope = "read-write" // also the owner's commands on requests (create a draft, edit, submit, withdraw)
	TokenDecide    TokenScope = "decide"     // reads, and the decisions of admins and reviewers (decisionActions)
)

// TokenScopes lists the scopes in display order.
var TokenScopes = []TokenScope{TokenRead, TokenReadWrite, TokenDecide}

// Valid reports whether s is one of TokenScopes.
func (s TokenScope) Valid() bool { return slices.Contains(TokenScopes, s) }

// Label is the scope for people.
func (s TokenScope) Label() string {
	switch s {
	case TokenRead:
		return "Read"
	case TokenReadWrite:
		return "Read and write"
	case TokenDecide:
		return "Read and decide (admins and reviewers)"
	}
	return string(s)
}

// DefaultTokenMaxLifetime is the longest a token may live unless the
// installation sets another (portal serve --api-token-max-days).
const DefaultTokenMaxLifetime = 90 * 24 * time.Hour

// MaxTokenNameLen bounds a token's name, in characters.
const MaxTokenNameLen = 80

// Token is what the rules need to know of a stored token.
type Token struct {
	ID     int64
	UserID int64
	Name   string
	Scope  TokenScope
	// Teams limits the token to these teams (empty: every team its person
	// is in, and the person's portal-wide roles).
	Teams     []string
	CreatedAt time.Time
	ExpiresAt time.Time
	RevokedAt time.Time // zero while not revoked
}

// TokenRequest is a person's request for a new token, from the settings
// form.
type TokenRequest struct {
	Name  string
	Scope TokenScope
	Teams []string
	// Days is the lifetime asked for, in days from now.
	Days int
}

// CheckTokenRequest decides whether p may create the token req asks for,
// now, with lifetimes capped at maxLifetime: every problem as a FieldError
// keyed by the form's field name (name, scope, teams, days). On success it
// returns the token to store (its ID and UserID p's, ExpiresAt now+Days).
// A person may limit a token only to teams they are in now: a token never
// reaches a team its person cannot.
func CheckTokenRequest(p Principal, req TokenRequest, now time.Time, maxLifetime time.Duration) (Token, FieldErrors) {
	var errs FieldErrors
	if !p.HasAccess() {
		return Token{}, FieldErrors{{Field: "name", Message: "You are in no group mapped to the portal, so a token could do nothing."}}
	}
	name := strings.TrimSpace(req.Name)
	switch {
	case name == "":
		errs = append(errs, FieldError{"name", "Give the token a name, such as the pipeline that will use it."})
	case utf8.RuneCountInString(name) > MaxTokenNameLen:
		errs = append(errs, FieldError{"name", fmt.Sprintf("At most %d characters.", MaxTokenNameLen)})
	case strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		errs = append(errs, FieldError{"name", "No control characters."})
	}
	switch {
	case !req.Scope.Valid():
		errs = append(errs, FieldError{"scope", "Choose read, read and write, or read and decide."})
	case req.Scope == TokenDecide && !p.HasRole(RoleAdmin) && !p.HasRole(RoleReviewer):
		errs = append(errs, FieldError{"scope", "Only admins and reviewers decide, so only they make a decision token; choose read, or read and write."})
	}
	teams := slices.Clone(req.Teams)
	slices.Sort(teams)
	teams = slices.Compact(teams)
	for _, t := range teams {
		if _, ok := p.TeamRole(t); !ok {
			errs = append(errs, FieldError{"teams", fmt.Sprintf("You are not in team %q; a token can be limited only to your own teams.", t)})
			break
		}
	}
	maxDays := int(maxLifetime / (24 * time.Hour))
	if req.Days < 1 || req.Days > maxDays {
		errs = append(errs, FieldError{"days", fmt.Sprintf("Between 1 and %d days.", maxDays)})
	}
	if len(errs) > 0 {
		return Token{}, errs
	}
	return Token{UserID: p.UserID, Name: name, Scope: req.Scope, Teams: teams, CreatedAt: now,
		ExpiresAt: now.Add(time.Duration(req.Days) * 24 * time.Hour)}, nil
}

// DecideRevokeToken: a person revokes their own tokens (revoking an
// already revoked one is allowed and changes nothing). Nobody else's: an
// admin who must end a person's access removes them from the group, which
// every token of theirs follows (TokenPrincipal).
func DecideRevokeToken(p Principal, t Token) Decision {
	if t.UserID != p.UserID || p.UserID == 0 {
		return deny("token %d is not %s's", t.ID, p.DisplayName())
	}
	return allow("%s's own token", p.DisplayName())
}

// TokenRefusal is why a presented token is not accepted at all; the API
// answers 401 for each.
type TokenRefusal string

// The refusals.
const (
	TokenOK      TokenRefusal = ""
	TokenRevoked TokenRefusal = "revoked"
	TokenExpired TokenRefusal = "expired"
	// TokenStaleGroups: its person's groups were last confirmed longer ago
	// than the portal trusts them (maxGroupsAge, a session's lifetime,
	// as notice delivery does); signing in to the portal confirms them again.
	TokenStaleGroups TokenRefusal = "groups not confirmed recently"
	// TokenNoAccess: its person is in no group mapped to the portal now.
	TokenNoAccess TokenRefusal = "person has no access"
)

// Ended says whether t has ended by now, whoever uses it: TokenRevoked,
// TokenExpired, or TokenOK while it is in force.
func (t Token) Ended(now time.Time) TokenRefusal {
	switch {
	case !t.RevokedAt.IsZero() && !now.Before(t.RevokedAt):
		return TokenRevoked
	case !now.Before(t.ExpiresAt):
		return TokenExpired
	}
	return TokenOK
}

// CheckTokenUse decides whether t may be used now by person (as their
// groups were last confirmed at groupsCheckedAt).
func CheckTokenUse(t Token, person Principal, groupsCheckedAt, now time.Time, maxGroupsAge time.Duration) TokenRefusal {
	if ended := t.Ended(now); ended != TokenOK {
		return ended
	}
	switch {
	case maxGroupsAge > 0 && now.Sub(groupsCheckedAt) > maxGroupsAge:
		return TokenStaleGroups
	case !TokenPrincipal(person, t).HasAccess():
		return TokenNoAccess
	}
	return TokenOK
}

// TokenDecider is what a decision token t acts as when it decides on a
// connection (or its review) of team: its person as they are now, with the
// portal-wide role that decides, when t has the decide scope and reaches
// team (TokenCoversTeam). A decision token limited to teams decides only
// on those teams' connections: its limit narrows where the person's admin
// or reviewer role is used, and TokenPrincipal (which drops that role)
// still governs everything it reads. Any other token acts as
// TokenPrincipal, which decides nothing TokenPermits would let through.
// Decide (with its independence rules) is asked of the result as always.
func TokenDecider(person Principal, t Token, team string) Principal {
	if t.Scope == TokenDecide && team != "" && TokenCoversTeam(t, team) {
		return person
	}
	return TokenPrincipal(person, t)
}

// TokenPrincipal is what t may act as: its person as they are now (person,
// resolved from their groups as last confirmed), narrowed to t's teams. A
// token limited to teams keeps only the person's memberships of those teams
// that they still hold and none of their portal-wide roles (an admin's or
// reviewer's role reaches every team, which a team limit excludes). It never
// adds anything: a person who left a team's group loses it for every token.
func TokenPrincipal(person Principal, t Token) Principal {
	if len(t.Teams) == 0 {
		return person
	}
	var ms []Membership
	for _, m := range person.Memberships {
		if slices.Contains(t.Teams, m.Team) {
			ms = append(ms, m)
		}
	}
	return NewPrincipal(person.UserID, person.Subject, person.Email, person.Name, nil, ms)
}

// readActions are the actions a read token may be used for.
var readActions = []Action{
	ActionReadNotice, ActionViewTeam, ActionViewConnection, ActionViewAdminHome, ActionViewReviewHome, ActionViewFinanceHome,
	ActionViewAudit, ActionViewCosts, ActionViewPlan, ActionViewSignals, ActionViewUsage, ActionExportEvidence, ActionViewReview,
}

// decisionActions are the decisions a decide token may be used for: an
// admin's on a submitted version, a reviewer's on a lifecycle review. The
// other decisions (revocation, holds, exceptions, declining a
// recommendation) are made in the portal's pages only.
var decisionActions = []Action{ActionApprove, ActionReject, ActionRequestChanges, ActionReview}

// ownerCommands are the actions a read-write token may be used for: the
// owner's commands on requests. Decisions need the decide scope.
var ownerCommands = []Action{ActionCreateRequest, ActionEditRequest, ActionSubmitRequest, ActionWithdrawRequest}

// inboxWrites are the changes a read-write token may make to its person's
// own notices.
var inboxWrites = []Action{ActionMarkNoticeRead}

// TokenPermits decides whether a token of scope s may be used for a. It is
// asked besides Decide (with TokenPrincipal), never instead of it.
func TokenPermits(s TokenScope, a Action) Decision {
	switch {
	case slices.Contains(readActions, a):
		if s.Valid() {
			return allow("a %s token reads", s)
		}
	case slices.Contains(ownerCommands, a), slices.Contains(inboxWrites, a):
		if s == TokenReadWrite {
			return allow("a read-write token runs the owner's commands and keeps its person's notices")
		}
		return deny("a %s token cannot %s; it needs the %s scope", s, a, TokenReadWrite)
	case slices.Contains(decisionActions, a):
		if s == TokenDecide {
			return allow("a decide token decides as its person")
		}
		return deny("a %s token cannot %s; it needs the %s scope (a decision token, made by an admin or reviewer)", s, a, TokenDecide)
	}
	return deny("no token may %s: it is decided by people in the portal's pages", a)
}

// TokenNoticeScope is the notices p (a token's principal, TokenPrincipal)
// may read through token t: p's NoticeScope, and for a token limited to
// teams only notices about no team or those teams, even those addressed to
// the person by name (TokenCoversTeam).
func TokenNoticeScope(p Principal, t Token) NoticeScope {
	s := NoticeScopeOf(p)
	s.Within = slices.Clone(t.Teams)
	return s
}

// TokenCoversTeam reports whether t reaches team's objects: every team
// without a limit, else only the teams it names. Handlers ask it besides
// Decide for objects a person may reach outside their teams (a connection
// whose exception owner they are).
func TokenCoversTeam(t Token, team string) bool {
	return len(t.Teams) == 0 || slices.Contains(t.Teams, team)
}
