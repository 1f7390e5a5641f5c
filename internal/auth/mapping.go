package auth

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Mapping maps identity-provider groups to portal roles and team memberships.
// It is read from the --groups-file, a YAML document:
//
//	roles:
//	  admin: [platform-admins]
//	  reviewer: [governance-reviewers]
//	  finance: [finance]
//	teams:
//	  red:
//	    owners: [team-red-owners]
//	    members: [team-red-members]
//	machines:            # machine identities for pipelines (machine.go)
//	  ci-red:
//	    subject: 0oa8f2k1ci-red   # the provider's `sub` for the pipeline
//	    scope: read-write
//	    groups: [team-red-owners]
type Mapping struct {
	Roles    map[workflow.Role][]string `json:"roles"`
	Teams    map[string]TeamGroups      `json:"teams"`
	Machines map[string]Machine         `json:"machines,omitempty"`
}

// TeamGroups lists the groups whose members own, or are members of, a team.
type TeamGroups struct {
	Owners  []string `json:"owners"`
	Members []string `json:"members"`
}

// A team name becomes part of Kubernetes names such as hyperpod-ns-<team>, so
// it must be a DNS-1123 label short enough to take that prefix.
var teamNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// MaxTeamNameLen keeps "hyperpod-ns-<team>-localqueue" within 63 characters.
const MaxTeamNameLen = 40

// LoadMapping reads and validates a group mapping file.
func LoadMapping(path string) (Mapping, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Mapping{}, fmt.Errorf("groups file: %w", err)
	}
	m, err := ParseMapping(b)
	if err != nil {
		return Mapping{}, fmt.Errorf("groups file %s: %w", path, err)
	}
	return m, nil
}

// ParseMapping parses a mapping document strictly (unknown keys are errors)
// and validates it, reporting every problem at once.
func ParseMapping(b []byte) (Mapping, error) {
	var m Mapping
	if err := yaml.UnmarshalStrict(b, &m); err != nil {
		return Mapping{}, fmt.Errorf("not a valid mapping: %w", err)
	}
	var errs []error
	for r, gs := range m.Roles {
		if !r.Valid() {
			errs = append(errs, fmt.Errorf("roles: unknown role %q (known: admin, reviewer, finance)", r))
		}
		errs = append(errs, checkGroups("roles."+string(r), gs)...)
	}
	teams := make([]string, 0, len(m.Teams))
	for t := range m.Teams {
		teams = append(teams, t)
	}
	sort.Strings(teams)
	for _, t := range teams {
		tg := m.Teams[t]
		if !teamNameRE.MatchString(t) || len(t) > MaxTeamNameLen {
			errs = append(errs, fmt.Errorf("teams: %q is not a valid team name (lower-case letters, digits and '-', starting and ending with a letter or digit, at most %d characters)", t, MaxTeamNameLen))
		}
		if len(tg.Owners) == 0 {
			errs = append(errs, fmt.Errorf("teams.%s: needs at least one owners group", t))
		}
		errs = append(errs, checkGroups("teams."+t+".owners", tg.Owners)...)
		errs = append(errs, checkGroups("teams."+t+".members", tg.Members)...)
	}
	errs = append(errs, m.checkMachines()...)
	if len(m.Roles[workflow.RoleAdmin]) == 0 {
		errs = append(errs, errors.New("roles.admin: needs at least one group, or nobody can approve anything"))
	}
	if err := errors.Join(errs...); err != nil {
		return Mapping{}, err
	}
	return m, nil
}

func checkGroups(where string, gs []string) []error {
	var errs []error
	for _, g := range gs {
		if strings.TrimSpace(g) == "" {
			errs = append(errs, fmt.Errorf("%s: empty group name", where))
		}
	}
	return errs
}

// Resolve returns the roles and memberships that the given groups grant.
func (m Mapping) Resolve(groups []string) ([]workflow.Role, []workflow.Membership) {
	has := func(gs []string) bool {
		for _, g := range gs {
			if slices.Contains(groups, g) {
				return true
			}
		}
		return false
	}
	var roles []workflow.Role
	for _, r := range workflow.AllRoles {
		if has(m.Roles[r]) {
			roles = append(roles, r)
		}
	}
	var ms []workflow.Membership
	for t, tg := range m.Teams {
		switch {
		case has(tg.Owners):
			ms = append(ms, workflow.Membership{Team: t, Role: workflow.TeamOwner})
		case has(tg.Members):
			ms = append(ms, workflow.Membership{Team: t, Role: workflow.TeamMember})
		}
	}
	return roles, ms
}

// DevMapping is the mapping used by `portal serve --dev` for the built-in
// identity provider's demo accounts, and a template for a real groups file.
func DevMapping() Mapping {
	return Mapping{
		Roles: map[workflow.Role][]string{
			workflow.RoleAdmin:    {"platform-admins"},
			workflow.RoleReviewer: {"governance-reviewers"},
			workflow.RoleFinance:  {"finance"},
		},
		Teams: map[string]TeamGroups{
			"red":  {Owners: []string{"team-red-owners"}, Members: []string{"team-red-members"}},
			"blue": {Owners: []string{"team-blue-owners"}, Members: []string{"team-blue-members"}},
		},
	}
}
