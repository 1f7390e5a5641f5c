package workflow

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// The principals of the policy table, in the order of its columns.
var policyPrincipals = []struct {
	name string
	p    Principal
}{
	{"ownerRed", NewPrincipal(1, "s1", "", "Olivia", nil, []Membership{{"red", TeamOwner}})},
	{"memberRed", NewPrincipal(2, "s2", "", "Mo", nil, []Membership{{"red", TeamMember}})},
	{"ownerBlue", NewPrincipal(3, "s3", "", "Bea", nil, []Membership{{"blue", TeamOwner}})},
	{"admin", NewPrincipal(4, "s4", "", "Ada", []Role{RoleAdmin}, nil)},
	{"reviewer", NewPrincipal(5, "s5", "", "Rex", []Role{RoleReviewer}, nil)},
	{"finance", NewPrincipal(6, "s6", "", "Fin", []Role{RoleFinance}, nil)},
	{"noAccess", NewPrincipal(7, "s7", "nobody@example.com", "", nil, nil)},
	{"ownerRedAdmin", NewPrincipal(8, "s8", "", "Oda", []Role{RoleAdmin}, []Membership{{"red", TeamOwner}})},
}

// policyTable is every action x object x principal. Columns follow
// policyPrincipals: ownerRed, memberRed, ownerBlue, admin, reviewer,
// finance, noAccess, ownerRedAdmin.
var policyTable = []struct {
	action  Action
	obj     Object
	allowed [8]bool
}{
	{ActionViewTeam, Object{Team: "red"}, [8]bool{true, true, false, true, true, false, false, true}},
	{ActionViewTeam, Object{Team: "blue"}, [8]bool{false, false, true, true, true, false, false, true}},
	{ActionViewTeam, Object{}, [8]bool{false, false, false, false, false, false, false, false}},
	{ActionViewAdminHome, Object{}, [8]bool{false, false, false, true, false, false, false, true}},
	{ActionViewAdminHome, Object{Team: "red"}, [8]bool{false, false, false, true, false, false, false, true}},
	{ActionViewReviewHome, Object{}, [8]bool{false, false, false, false, true, false, false, false}},
	{ActionViewFinanceHome, Object{}, [8]bool{false, false, false, false, false, true, false, false}},
	{ActionViewAudit, Object{}, [8]bool{false, false, false, true, true, false, false, true}},
	{Action("team.delete"), Object{Team: "red"}, [8]bool{false, false, false, false, false, false, false, false}},
}

func TestDecide(t *testing.T) {
	for _, row := range policyTable {
		for i, pr := range policyPrincipals {
			t.Run(string(row.action)+"/"+row.obj.Team+"/"+pr.name, func(t *testing.T) {
				d := Decide(pr.p, row.action, row.obj)
				if d.Allowed != row.allowed[i] {
					t.Errorf("Decide(%s, %s, %+v).Allowed = %v (reason %q), want %v",
						pr.name, row.action, row.obj, d.Allowed, d.Reason, row.allowed[i])
				}
				if strings.TrimSpace(d.Reason) == "" {
					t.Errorf("Decide(%s, %s, %+v).Reason is empty", pr.name, row.action, row.obj)
				}
			})
		}
	}
}

func TestDecideReasons(t *testing.T) {
	byName := map[string]Principal{}
	for _, pr := range policyPrincipals {
		byName[pr.name] = pr.p
	}
	tests := []struct {
		principal string
		action    Action
		obj       Object
		want      string
	}{
		{"ownerRed", ActionViewTeam, Object{Team: "red"}, "owner of team red"},
		{"memberRed", ActionViewTeam, Object{Team: "red"}, "member of team red"},
		// A team role is the more specific reason, even for an admin.
		{"ownerRedAdmin", ActionViewTeam, Object{Team: "red"}, "owner of team red"},
		{"ownerRedAdmin", ActionViewTeam, Object{Team: "blue"}, "admin"},
		{"ownerRed", ActionViewTeam, Object{Team: "blue"}, "not a member of team blue"},
		{"admin", ActionViewTeam, Object{}, "no team given"},
		{"noAccess", ActionViewTeam, Object{Team: "red"}, "nobody@example.com is in no group"},
		{"finance", ActionViewAdminHome, Object{}, "needs the admin role"},
		{"ownerRedAdmin", Action("team.delete"), Object{Team: "red"}, `unknown action "team.delete"`},
	}
	for _, tt := range tests {
		t.Run(tt.principal+"/"+string(tt.action), func(t *testing.T) {
			d := Decide(byName[tt.principal], tt.action, tt.obj)
			if !strings.Contains(d.Reason, tt.want) {
				t.Errorf("Reason = %q, want it to contain %q", d.Reason, tt.want)
			}
		})
	}
}

// TestPolicyTableCoversEveryAction keeps the promise in policy.go: every
// Action constant has rows in the policy table, and a rule in Decide (an
// action without one would be refused as unknown).
func TestPolicyTableCoversEveryAction(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "policy.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []Action
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Action" {
				continue
			}
			for _, v := range vs.Values {
				lit, ok := v.(*ast.BasicLit)
				if !ok {
					t.Fatalf("Action constant with a non-literal value at %v", v.Pos())
				}
				declared = append(declared, Action(strings.Trim(lit.Value, `"`)))
			}
		}
	}
	if len(declared) < 5 {
		t.Fatalf("found only %d Action constants in policy.go: %v", len(declared), declared)
	}
	inTable := map[Action]bool{}
	for _, row := range policyTable {
		inTable[row.action] = true
	}
	all := policyPrincipals[len(policyPrincipals)-1].p // owner of red and admin
	super := NewPrincipal(9, "s9", "", "Sue", AllRoles, []Membership{{"red", TeamOwner}})
	for _, a := range declared {
		if !inTable[a] {
			t.Errorf("action %q has no rows in policyTable", a)
		}
		for _, p := range []Principal{all, super} {
			if d := Decide(p, a, Object{Team: "red"}); strings.Contains(d.Reason, "unknown action") {
				t.Errorf("action %q has no rule in Decide: %q", a, d.Reason)
			}
		}
	}
}
