package auth

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

const goodMapping = `
roles:
  admin: [platform-admins]
  reviewer: [governance-reviewers, auditors]
  finance: [finance]
teams:
  red:
    owners: [team-red-owners]
    members: [team-red-members]
  blue-2:
    owners: [team-blue-owners, platform-admins]
`

func TestParseMappingGood(t *testing.T) {
	m, err := ParseMapping([]byte(goodMapping))
	if err != nil {
		t.Fatalf("ParseMapping: %v", err)
	}
	want := Mapping{
		Roles: map[workflow.Role][]string{
			workflow.RoleAdmin:    {"platform-admins"},
			workflow.RoleReviewer: {"governance-reviewers", "auditors"},
			workflow.RoleFinance:  {"finance"},
		},
		Teams: map[string]TeamGroups{
			"red":    {Owners: []string{"team-red-owners"}, Members: []string{"team-red-members"}},
			"blue-2": {Owners: []string{"team-blue-owners", "platform-admins"}},
		},
	}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("ParseMapping = %+v, want %+v", m, want)
	}
}

func TestParseMappingErrors(t *testing.T) {
	tooLong := strings.Repeat("a", MaxTeamNameLen+1)
	longest := strings.Repeat("a", MaxTeamNameLen)
	tests := []struct {
		name string
		doc  string
		want []string // substrings of the error; empty means valid
	}{
		{
			name: "longest team name is fine",
			doc:  "roles: {admin: [a]}\nteams:\n  " + longest + ": {owners: [o]}\n",
		},
		{
			name: "no teams is fine",
			doc:  "roles: {admin: [a]}\n",
		},
		{
			name: "unknown top-level key",
			doc:  "roles: {admin: [a]}\nteam: {}\n",
			want: []string{"not a valid mapping", `"team"`},
		},
		{
			name: "unknown team key",
			doc:  "roles: {admin: [a]}\nteams:\n  red: {owners: [o], viewers: [v]}\n",
			want: []string{"not a valid mapping", `"viewers"`},
		},
		{
			name: "not YAML",
			doc:  "roles: [admin\n",
			want: []string{"not a valid mapping"},
		},
		{
			name: "unknown role",
			doc:  "roles: {admin: [a], superuser: [s]}\n",
			want: []string{`unknown role "superuser"`},
		},
		{
			name: "upper-case team",
			doc:  "roles: {admin: [a]}\nteams:\n  Red: {owners: [o]}\n",
			want: []string{`"Red" is not a valid team name`},
		},
		{
			name: "team name too long",
			doc:  "roles: {admin: [a]}\nteams:\n  " + tooLong + ": {owners: [o]}\n",
			want: []string{`"` + tooLong + `" is not a valid team name`},
		},
		{
			name: "leading dash",
			doc:  "roles: {admin: [a]}\nteams:\n  -red: {owners: [o]}\n",
			want: []string{`"-red" is not a valid team name`},
		},
		{
			name: "trailing dash",
			doc:  "roles: {admin: [a]}\nteams:\n  red-: {owners: [o]}\n",
			want: []string{`"red-" is not a valid team name`},
		},
		{
			name: "underscore",
			doc:  "roles: {admin: [a]}\nteams:\n  red_team: {owners: [o]}\n",
			want: []string{`"red_team" is not a valid team name`},
		},
		{
			name: "team without owners",
			doc:  "roles: {admin: [a]}\nteams:\n  red: {members: [m]}\n",
			want: []string{"teams.red: needs at least one owners group"},
		},
		{
			name: "empty group name in a role",
			doc:  "roles: {admin: [a], finance: ['']}\n",
			want: []string{"roles.finance: empty group name"},
		},
		{
			name: "blank group name in team members",
			doc:  "roles: {admin: [a]}\nteams:\n  red: {owners: [o], members: ['  ']}\n",
			want: []string{"teams.red.members: empty group name"},
		},
		{
			name: "missing admin group",
			doc:  "roles: {reviewer: [r]}\n",
			want: []string{"roles.admin: needs at least one group"},
		},
		{
			name: "empty admin list",
			doc:  "roles: {admin: []}\n",
			want: []string{"roles.admin: needs at least one group"},
		},
		{
			name: "empty document",
			doc:  "",
			want: []string{"roles.admin: needs at least one group"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseMapping([]byte(tt.doc))
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("ParseMapping: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseMapping succeeded with %+v, want an error containing %q", m, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if !reflect.DeepEqual(m, Mapping{}) {
				t.Errorf("ParseMapping returned %+v with an error, want the zero Mapping", m)
			}
		})
	}
}

// An operator fixing a groups file should see every problem in one go.
func TestParseMappingReportsAllErrors(t *testing.T) {
	doc := `
roles:
  superuser: [s]
  finance: ['']
teams:
  Red:
    owners: [o]
  blue:
    members: [m, '']
`
	_, err := ParseMapping([]byte(doc))
	if err == nil {
		t.Fatal("ParseMapping succeeded, want errors")
	}
	want := []string{
		`unknown role "superuser"`,
		"roles.finance: empty group name",
		`"Red" is not a valid team name`,
		"teams.blue: needs at least one owners group",
		"teams.blue.members: empty group name",
		"roles.admin: needs at least one group",
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not contain %q:\n%v", w, err)
		}
	}
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("error is %T, want one joined with errors.Join", err)
	}
	if got := len(joined.Unwrap()); got != len(want) {
		t.Errorf("got %d errors, want %d:\n%v", got, len(want), err)
	}
}

func TestResolve(t *testing.T) {
	m, err := ParseMapping([]byte(`
roles:
  admin: [platform-admins]
  reviewer: [governance-reviewers]
  finance: [finance, controllers]
teams:
  red:
    owners: [team-red-owners]
    members: [team-red-members, ml-engineers]
  blue:
    owners: [team-blue-owners]
    members: [team-blue-members, ml-engineers]
  green:
    owners: [team-green-owners]
`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		groups    []string
		wantRoles []workflow.Role
		wantMs    []workflow.Membership
	}{
		{name: "no groups"},
		{name: "only unknown groups", groups: []string{"everyone", "team-purple-owners", ""}},
		{
			name:   "member",
			groups: []string{"team-red-members"},
			wantMs: []workflow.Membership{{Team: "red", Role: workflow.TeamMember}},
		},
		{
			name:   "owner wins over member of the same team",
			groups: []string{"team-red-members", "team-red-owners"},
			wantMs: []workflow.Membership{{Team: "red", Role: workflow.TeamOwner}},
		},
		{
			name:   "one group, several teams",
			groups: []string{"ml-engineers"},
			wantMs: []workflow.Membership{{Team: "blue", Role: workflow.TeamMember}, {Team: "red", Role: workflow.TeamMember}},
		},
		{
			name:   "several teams, mixed roles, unknown groups ignored",
			groups: []string{"unrelated", "ml-engineers", "team-blue-owners", "team-green-owners"},
			wantMs: []workflow.Membership{
				{Team: "blue", Role: workflow.TeamOwner},
				{Team: "green", Role: workflow.TeamOwner},
				{Team: "red", Role: workflow.TeamMember},
			},
		},
		{
			name:      "roles in display order",
			groups:    []string{"controllers", "governance-reviewers", "platform-admins"},
			wantRoles: []workflow.Role{workflow.RoleAdmin, workflow.RoleReviewer, workflow.RoleFinance},
		},
		{
			name:      "roles and a team",
			groups:    []string{"finance", "team-green-owners"},
			wantRoles: []workflow.Role{workflow.RoleFinance},
			wantMs:    []workflow.Membership{{Team: "green", Role: workflow.TeamOwner}},
		},
		{
			name:   "group names are case-sensitive",
			groups: []string{"Platform-Admins", "TEAM-RED-OWNERS"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			roles, ms := m.Resolve(tt.groups)
			// Teams come from a map; their order is not part of the contract.
			sort.Slice(ms, func(i, j int) bool { return ms[i].Team < ms[j].Team })
			if !slices.Equal(roles, tt.wantRoles) {
				t.Errorf("roles = %v, want %v", roles, tt.wantRoles)
			}
			if !slices.Equal(ms, tt.wantMs) {
				t.Errorf("memberships = %v, want %v", ms, tt.wantMs)
			}
		})
	}
}

// DevMapping is documented as a template for a real groups file, so its
// YAML form must pass the same validation.
func TestDevMappingIsValid(t *testing.T) {
	b, err := yaml.Marshal(DevMapping())
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseMapping(b)
	if err != nil {
		t.Fatalf("ParseMapping(DevMapping as YAML): %v\n%s", err, b)
	}
	if !reflect.DeepEqual(m, DevMapping()) {
		t.Errorf("round trip = %+v, want %+v", m, DevMapping())
	}
	roles, ms := m.Resolve([]string{"team-red-owners", "platform-admins"})
	if !slices.Equal(roles, []workflow.Role{workflow.RoleAdmin}) ||
		!slices.Equal(ms, []workflow.Membership{{Team: "red", Role: workflow.TeamOwner}}) {
		t.Errorf("Resolve(owner.red + admin groups) = %v, %v", roles, ms)
	}
}

func TestLoadMapping(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "groups.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	missing := filepath.Join(dir, "missing.yaml")
	if err := os.WriteFile(good, []byte(goodMapping), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("roles: {reviewer: [r]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	m, err := LoadMapping(good)
	if err != nil {
		t.Fatalf("LoadMapping(good): %v", err)
	}
	if got := m.Teams["red"].Owners; !slices.Equal(got, []string{"team-red-owners"}) {
		t.Errorf("red owners = %v", got)
	}

	tests := []struct {
		path   string
		want   []string
		wantIs error
	}{
		{missing, []string{"groups file", missing}, os.ErrNotExist},
		{bad, []string{"groups file " + bad, "roles.admin"}, nil},
	}
	for _, tt := range tests {
		_, err := LoadMapping(tt.path)
		if err == nil {
			t.Errorf("LoadMapping(%s) succeeded", tt.path)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("LoadMapping(%s) error %q does not contain %q", tt.path, err, w)
			}
		}
		if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
			t.Errorf("LoadMapping(%s) error %v is not %v", tt.path, err, tt.wantIs)
		}
	}
}
