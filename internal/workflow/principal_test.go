package workflow

import (
	"slices"
	"testing"
)

func TestNewPrincipal(t *testing.T) {
	tests := []struct {
		name      string
		roles     []Role
		ms        []Membership
		wantRoles []Role
		wantMs    []Membership
	}{
		{name: "nothing"},
		{
			name:      "roles deduplicated and sorted",
			roles:     []Role{RoleReviewer, RoleAdmin, RoleReviewer, RoleFinance, RoleAdmin},
			wantRoles: []Role{RoleAdmin, RoleFinance, RoleReviewer},
		},
		{
			name:   "member then owner keeps owner",
			ms:     []Membership{{"red", TeamMember}, {"red", TeamOwner}},
			wantMs: []Membership{{"red", TeamOwner}},
		},
		{
			name:   "owner then member keeps owner",
			ms:     []Membership{{"red", TeamOwner}, {"red", TeamMember}},
			wantMs: []Membership{{"red", TeamOwner}},
		},
		{
			name: "several teams deduplicated and sorted by team",
			ms: []Membership{
				{"red", TeamMember}, {"blue", TeamMember}, {"green", TeamMember},
				{"blue", TeamMember}, {"green", TeamOwner}, {"red", TeamMember},
			},
			wantMs: []Membership{{"blue", TeamMember}, {"green", TeamOwner}, {"red", TeamMember}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rolesIn := slices.Clone(tt.roles)
			p := NewPrincipal(42, "sub", "e@example.com", "Name", tt.roles, tt.ms)
			if p.UserID != 42 || p.Subject != "sub" || p.Email != "e@example.com" || p.Name != "Name" {
				t.Errorf("identity fields = %d %q %q %q", p.UserID, p.Subject, p.Email, p.Name)
			}
			if !slices.Equal(p.Roles, tt.wantRoles) {
				t.Errorf("Roles = %v, want %v", p.Roles, tt.wantRoles)
			}
			if !slices.Equal(p.Memberships, tt.wantMs) {
				t.Errorf("Memberships = %v, want %v", p.Memberships, tt.wantMs)
			}
			if !slices.Equal(tt.roles, rolesIn) {
				t.Errorf("NewPrincipal changed the caller's roles slice: %v, was %v", tt.roles, rolesIn)
			}
		})
	}
}

func TestPrincipalRolesAndTeams(t *testing.T) {
	p := NewPrincipal(1, "s", "", "", []Role{RoleReviewer},
		[]Membership{{"red", TeamMember}, {"blue", TeamOwner}})
	tests := []struct {
		team     string
		wantRole TeamRole
		wantOK   bool
	}{
		{"red", TeamMember, true},
		{"blue", TeamOwner, true},
		{"green", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		if r, ok := p.TeamRole(tt.team); r != tt.wantRole || ok != tt.wantOK {
			t.Errorf("TeamRole(%q) = %q, %v; want %q, %v", tt.team, r, ok, tt.wantRole, tt.wantOK)
		}
	}
	for _, r := range AllRoles {
		if got, want := p.HasRole(r), r == RoleReviewer; got != want {
			t.Errorf("HasRole(%s) = %v, want %v", r, got, want)
		}
	}
}

func TestHasAccess(t *testing.T) {
	tests := []struct {
		name string
		p    Principal
		want bool
	}{
		{"nothing", NewPrincipal(1, "s", "", "", nil, nil), false},
		{"empty slices", NewPrincipal(1, "s", "", "", []Role{}, []Membership{}), false},
		{"a role", NewPrincipal(1, "s", "", "", []Role{RoleFinance}, nil), true},
		{"a membership", NewPrincipal(1, "s", "", "", nil, []Membership{{"red", TeamMember}}), true},
	}
	for _, tt := range tests {
		if got := tt.p.HasAccess(); got != tt.want {
			t.Errorf("%s: HasAccess() = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestDisplayName(t *testing.T) {
	tests := []struct {
		subject, email, name, want string
	}{
		{"sub", "e@example.com", "Ada", "Ada"},
		{"sub", "e@example.com", "", "e@example.com"},
		{"sub", "", "", "sub"},
		{"sub", "", "Ada", "Ada"},
	}
	for _, tt := range tests {
		p := NewPrincipal(1, tt.subject, tt.email, tt.name, nil, nil)
		if got := p.DisplayName(); got != tt.want {
			t.Errorf("DisplayName(subject %q, email %q, name %q) = %q, want %q", tt.subject, tt.email, tt.name, got, tt.want)
		}
	}
}

func TestRoleValid(t *testing.T) {
	for _, r := range AllRoles {
		if !r.Valid() {
			t.Errorf("%q.Valid() = false", r)
		}
	}
	for _, r := range []Role{"", "owner", "Admin", "superuser"} {
		if r.Valid() {
			t.Errorf("%q.Valid() = true", r)
		}
	}
}
