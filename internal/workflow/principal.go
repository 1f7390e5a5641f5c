package workflow

import (
	"slices"
	"sort"
)

// Role is a portal-wide role granted by an identity-provider group.
type Role string

// The portal-wide roles. Team ownership and membership are not roles: they
// are Memberships, always scoped to one team.
const (
	RoleAdmin    Role = "admin"
	RoleReviewer Role = "reviewer"
	RoleFinance  Role = "finance"
)

// AllRoles lists the portal-wide roles in display order.
var AllRoles = []Role{RoleAdmin, RoleReviewer, RoleFinance}

// Valid reports whether r is one of AllRoles.
func (r Role) Valid() bool { return slices.Contains(AllRoles, r) }

// TeamRole is what a principal is in one team.
type TeamRole string

// Team roles. An owner can do everything a member can.
const (
	TeamOwner  TeamRole = "owner"
	TeamMember TeamRole = "member"
)

// Membership says that a principal is owner or member of a team.
type Membership struct {
	Team string
	Role TeamRole
}

// Principal is the authenticated actor of a request, as established at login
// from the identity provider's groups and the portal's group mapping.
type Principal struct {
	UserID      int64
	Subject     string
	Email       string
	Name        string
	Roles       []Role
	Memberships []Membership
}

// NewPrincipal builds a principal with roles and memberships deduplicated and
// sorted; a team where the user is both owner and member keeps only owner.
func NewPrincipal(userID int64, subject, email, name string, roles []Role, ms []Membership) Principal {
	rs := slices.Clone(roles)
	slices.Sort(rs)
	rs = slices.Compact(rs)
	best := map[string]TeamRole{}
	for _, m := range ms {
		if best[m.Team] != TeamOwner {
			best[m.Team] = m.Role
		}
	}
	out := make([]Membership, 0, len(best))
	for t, r := range best {
		out = append(out, Membership{Team: t, Role: r})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Team < out[j].Team })
	return Principal{UserID: userID, Subject: subject, Email: email, Name: name, Roles: rs, Memberships: out}
}

// HasRole reports whether p holds the portal-wide role r.
func (p Principal) HasRole(r Role) bool { return slices.Contains(p.Roles, r) }

// TeamRole returns p's role in team, if any.
func (p Principal) TeamRole(team string) (TeamRole, bool) {
	for _, m := range p.Memberships {
		if m.Team == team {
			return m.Role, true
		}
	}
	return "", false
}

// HasAccess reports whether p holds any role or membership at all. A user
// in no mapped group is authenticated but has no access to the portal.
func (p Principal) HasAccess() bool { return len(p.Roles) > 0 || len(p.Memberships) > 0 }

// DisplayName is the name to show, falling back to the email and subject.
func (p Principal) DisplayName() string {
	switch {
	case p.Name != "":
		return p.Name
	case p.Email != "":
		return p.Email
	default:
		return p.Subject
	}
}
