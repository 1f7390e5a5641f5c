package workflow

import "testing"

// The notice scope the queries apply is the ActionReadNotice rule: for
// every principal of the policy table and every team (none included), the
// two agree. A scope wider or narrower than the rule fails here.
func TestNoticeScopeIsTheReadNoticeRule(t *testing.T) {
	for _, pp := range policyPrincipals {
		scope := NoticeScopeOf(pp.p)
		for _, team := range []string{"", "red", "blue", "green"} {
			for _, personal := range []bool{false, true} {
				want := Decide(pp.p, ActionReadNotice, Object{Team: team, Personal: personal}).Allowed
				if got := scope.Allows(team, personal); got != want {
					t.Errorf("%s, notice about team %q (personal %v): scope allows %v, Decide says %v", pp.name, team, personal, got, want)
				}
			}
		}
	}
}
