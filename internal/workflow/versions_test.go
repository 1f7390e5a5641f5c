package workflow

import "testing"

func TestShownVersion(t *testing.T) {
	for _, tc := range []struct {
		s               State
		a               Amendment
		cur, appr, want int
	}{
		{StateDraft, AmendNone, 1, 0, 1},
		{StateSubmitted, AmendNone, 3, 0, 3},
		{StateActive, AmendNone, 4, 2, 2},      // a later version was withdrawn: the running one shows
		{StateUnderReview, AmendNone, 4, 2, 2}, // under review is live too
		{StateActive, AmendSubmitted, 4, 2, 4}, // an open change shows the change
		{StateRevoked, AmendNone, 4, 2, 4},     // not live: the current version
	} {
		if got := ShownVersion(tc.s, tc.a, tc.cur, tc.appr); got != tc.want {
			t.Errorf("ShownVersion(%s, %s, cur %d, approved %d) = %d, want %d", tc.s, tc.a, tc.cur, tc.appr, got, tc.want)
		}
	}
}

func TestDiffBase(t *testing.T) {
	for _, tc := range []struct{ shown, appr, want int }{
		{1, 0, 0}, // a first request: nothing to compare with
		{3, 0, 2}, // never approved: the previous version
		{4, 2, 2}, // a change: against the approved version
		{2, 2, 1}, // the approved version itself: the previous one
		{1, 1, 0},
	} {
		if got := DiffBase(tc.shown, tc.appr); got != tc.want {
			t.Errorf("DiffBase(shown %d, approved %d) = %d, want %d", tc.shown, tc.appr, got, tc.want)
		}
	}
}

func TestApprovalCapacityAmendingAllowsADecrease(t *testing.T) {
	inv := map[string]int{"ml.p5.48xlarge": 2}
	committed := []Capacity{{InstanceType: "ml.p5.48xlarge", Count: 2}} // the cluster is full
	approved := []Capacity{{InstanceType: "ml.p5.48xlarge", Count: 2}}
	less := []Capacity{{InstanceType: "ml.p5.48xlarge", Count: 1}}
	if !ApprovalCapacity(inv, committed, true, approved, less).OK() {
		t.Error("a change that lowers the guarantee must fit a full cluster")
	}
	if ApprovalCapacity(inv, committed, false, nil, less).OK() {
		t.Error("a new connection must not fit a full cluster")
	}
}

func TestLostApprovalRace(t *testing.T) {
	admin := NewPrincipal(4, "s4", "", "Ada", []Role{RoleAdmin}, nil)
	owner := NewPrincipal(1, "s1", "", "Olivia", nil, []Membership{{"red", TeamOwner}})
	done := Object{Team: "red", ApproverIDs: []int64{9}}
	restricted := Object{Team: "red", ApproverIDs: []int64{9}, DataClassification: DataRestricted}
	for _, tc := range []struct {
		name             string
		p                Principal
		o                Object
		version, current int
		want             bool
	}{
		{"admin, version approved", admin, done, 3, 3, true},
		{"admin, an older version", admin, done, 2, 3, false},
		{"restricted, one of two approvals", admin, restricted, 3, 3, false},
		{"not an admin", owner, done, 3, 3, false},
		{"no approval yet", admin, Object{Team: "red"}, 3, 3, false},
	} {
		if got := LostApprovalRace(tc.p, tc.o, tc.version, tc.current); got != tc.want {
			t.Errorf("%s: LostApprovalRace = %v, want %v", tc.name, got, tc.want)
		}
	}
}
