package workflow

import "fmt"

// Action is something a principal may try to do.
type Action string

// The actions the portal knows so far. Later features add theirs here, each
// with its rule in Decide and its rows in the policy table test.
const (
	ActionViewTeam        Action = "team.view"    // a team's home: its connections, usage, snippets
	ActionViewAdminHome   Action = "admin.view"   // the admin queue and cluster overview
	ActionViewReviewHome  Action = "review.view"  // the reviewer's worklist
	ActionViewFinanceHome Action = "finance.view" // usage, cost and chargeback
	ActionViewAudit       Action = "audit.view"   // the audit trail
)

// Object is what an action applies to. Team is empty for portal-wide objects.
type Object struct {
	Team string
}

// Decision is the outcome of Decide. Reason always says why, for logs and
// for pages that explain a refusal.
type Decision struct {
	Allowed bool
	Reason  string
}

func allow(format string, a ...any) Decision { return Decision{true, fmt.Sprintf(format, a...)} }
func deny(format string, a ...any) Decision  { return Decision{false, fmt.Sprintf(format, a...)} }

// Decide is the portal's authorization policy: a pure function of the actor,
// the action and the object. Handlers call it for every request and refuse
// (as not found, for team objects) when it denies.
func Decide(p Principal, a Action, o Object) Decision {
	if !p.HasAccess() {
		return deny("%s is in no group mapped to the portal", p.DisplayName())
	}
	switch a {
	case ActionViewTeam:
		if o.Team == "" {
			return deny("no team given")
		}
		if r, ok := p.TeamRole(o.Team); ok {
			return allow("%s of team %s", r, o.Team)
		}
		// Admins and reviewers oversee every team; finance reads costs, not
		// team pages.
		if p.HasRole(RoleAdmin) {
			return allow("admin")
		}
		if p.HasRole(RoleReviewer) {
			return allow("reviewer")
		}
		return deny("not a member of team %s", o.Team)
	case ActionViewAdminHome:
		return requireRole(p, RoleAdmin)
	case ActionViewReviewHome:
		return requireRole(p, RoleReviewer)
	case ActionViewFinanceHome:
		return requireRole(p, RoleFinance)
	case ActionViewAudit:
		// The trail is oversight: admins answer for changes, reviewers cite
		// it as evidence.
		for _, r := range []Role{RoleAdmin, RoleReviewer} {
			if p.HasRole(r) {
				return allow("%s", r)
			}
		}
		return deny("needs the %s or %s role", RoleAdmin, RoleReviewer)
	}
	return deny("unknown action %q", a)
}

func requireRole(p Principal, r Role) Decision {
	if p.HasRole(r) {
		return allow("%s", r)
	}
	return deny("needs the %s role", r)
}
