package workflow

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
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
	{ActionViewSignals, Object{Team: "red"}, [8]bool{true, true, false, true, true, false, false, true}},
	{ActionViewSignals, Object{}, [8]bool{false, false, false, true, false, false, false, true}},
	{ActionAckSignal, Object{Team: "red"}, [8]bool{true, false, false, true, false, false, false, true}},
	{ActionAckSignal, Object{Team: "blue"}, [8]bool{false, false, true, true, false, false, false, true}},
	{ActionAckSignal, Object{}, [8]bool{false, false, false, true, false, false, false, true}},

	// Connection requests. Red's requests are filed and edited by ownerRed
	// (id 1) unless a row says otherwise; ownerRedAdmin is id 8, admin 4,
	// reviewer 5.
	{ActionCreateRequest, Object{Team: "red"}, [8]bool{true, false, false, false, false, false, false, true}},
	{ActionCreateRequest, Object{Team: "blue"}, [8]bool{false, false, true, false, false, false, false, false}},
	{ActionCreateRequest, Object{}, [8]bool{}},

	{ActionEditRequest, redRequest(StateDraft), [8]bool{true, false, false, false, false, false, false, true}},
	{ActionEditRequest, redRequest(StateChangesRequested), [8]bool{true, false, false, false, false, false, false, true}},
	{ActionEditRequest, redRequest(StateSubmitted), [8]bool{}},
	// An active (or under review) connection is amended: its owner
	// requests a change, edits it while it is a draft or sent back, and
	// submits or withdraws it; admins decide on a submitted change as on a
	// request.
	{ActionEditRequest, redRequest(StateActive), [8]bool{true, false, false, false, false, false, false, true}},
	{ActionEditRequest, amending(StateUnderReview, AmendChangesRequested), [8]bool{true, false, false, false, false, false, false, true}},
	{ActionEditRequest, amending(StateActive, AmendSubmitted), [8]bool{}},
	{ActionEditRequest, amending(StateActive, AmendApproved), [8]bool{}},
	{ActionEditRequest, redRequest(StateApproved), [8]bool{}},
	{ActionEditRequest, redRequest(StateRevoking), [8]bool{}},
	{ActionSubmitRequest, redRequest(StateActive), [8]bool{}},
	{ActionSubmitRequest, amending(StateActive, AmendDraft), [8]bool{true, false, false, false, false, false, false, true}},
	{ActionSubmitRequest, amending(StateActive, AmendFailed), [8]bool{}},
	{ActionWithdrawRequest, amending(StateActive, AmendDraft), [8]bool{true, false, false, false, false, false, false, true}},
	{ActionWithdrawRequest, amending(StateActive, AmendSubmitted), [8]bool{true, false, false, false, false, false, false, true}},
	{ActionWithdrawRequest, amending(StateActive, AmendApproved), [8]bool{}},
	{ActionApprove, amending(StateActive, AmendSubmitted), [8]bool{false, false, false, true, false, false, false, true}},
	{ActionApprove, amending(StateActive, AmendDraft), [8]bool{}},
	{ActionReject, amending(StateUnderReview, AmendSubmitted), [8]bool{false, false, false, true, false, false, false, true}},
	{ActionRequestChanges, amending(StateActive, AmendSubmitted), [8]bool{false, false, false, true, false, false, false, true}},
	{ActionRequestChanges, amending(StateActive, AmendChangesRequested), [8]bool{}},
	{ActionViewPlan, redRequest(StateDraft), [8]bool{true, false, false, true, false, false, false, true}},
	{ActionViewPlan, redRequest(StateSubmitted), [8]bool{true, false, false, true, false, false, false, true}},
	{ActionViewPlan, redRequest(StateActive), [8]bool{true, false, false, true, false, false, false, true}},
	{ActionViewPlan, amending(StateActive, AmendApproved), [8]bool{false, false, false, true, false, false, false, true}},
	{ActionViewPlan, redRequest(StateRevoked), [8]bool{false, false, false, true, false, false, false, true}},
	{ActionViewPlan, blueRequest(StateDraft), [8]bool{false, false, true, true, false, false, false, true}},
	{ActionViewFullErrors, Object{}, [8]bool{false, false, false, true, false, false, false, true}},
	{ActionRetryJob, amending(StateActive, AmendFailed), [8]bool{false, false, false, true, false, false, false, true}},
	{ActionRetryJob, amending(StateActive, AmendApproved), [8]bool{}},
	{ActionEditRequest, blueRequest(StateDraft), [8]bool{false, false, true, false, false, false, false, false}},
	{ActionEditRequest, Object{State: StateDraft}, [8]bool{}},

	{ActionSubmitRequest, redRequest(StateDraft), [8]bool{true, false, false, false, false, false, false, true}},
	{ActionSubmitRequest, redRequest(StateChangesRequested), [8]bool{true, false, false, false, false, false, false, true}},
	{ActionSubmitRequest, redRequest(StateSubmitted), [8]bool{}},
	{ActionSubmitRequest, redRequest(StateRejected), [8]bool{}},
	{ActionSubmitRequest, blueRequest(StateDraft), [8]bool{false, false, true, false, false, false, false, false}},

	{ActionWithdrawRequest, redRequest(StateDraft), [8]bool{true, false, false, false, false, false, false, true}},
	{ActionWithdrawRequest, redRequest(StateSubmitted), [8]bool{true, false, false, false, false, false, false, true}},
	{ActionWithdrawRequest, redRequest(StateChangesRequested), [8]bool{true, false, false, false, false, false, false, true}},
	{ActionWithdrawRequest, redRequest(StateApproved), [8]bool{}},
	{ActionWithdrawRequest, redRequest(StateActive), [8]bool{}}, // no change is open
	{ActionWithdrawRequest, blueRequest(StateSubmitted), [8]bool{false, false, true, false, false, false, false, false}},

	{ActionViewConnection, redRequest(StateActive), [8]bool{true, true, false, true, true, false, false, true}},
	{ActionViewConnection, redRequest(StateDraft), [8]bool{true, true, false, true, true, false, false, true}},
	{ActionViewConnection, blueRequest(StateActive), [8]bool{false, false, true, true, true, false, false, true}},
	{ActionViewConnection, Object{}, [8]bool{}},
	{ActionReadNotice, Object{Team: "red"}, [8]bool{true, true, false, true, true, false, false, true}},
	{ActionReadNotice, Object{Team: "blue"}, [8]bool{false, false, true, true, true, false, false, true}},
	{ActionReadNotice, Object{}, [8]bool{true, true, true, true, true, true, false, true}},
	// One marks read exactly what one may read.
	{ActionMarkNoticeRead, Object{Team: "red"}, [8]bool{true, true, false, true, true, false, false, true}},
	{ActionMarkNoticeRead, Object{Team: "blue"}, [8]bool{false, false, true, true, true, false, false, true}},
	{ActionMarkNoticeRead, Object{}, [8]bool{true, true, true, true, true, true, false, true}},

	{ActionApprove, redRequest(StateSubmitted), [8]bool{false, false, false, true, false, false, false, true}},
	{ActionApprove, filedBy(8, StateSubmitted), [8]bool{false, false, false, true, false, false, false, false}},
	{ActionApprove, editedBy(4, StateSubmitted), [8]bool{false, false, false, false, false, false, false, true}},
	// Submitting counts toward independence like filing and editing:
	// ownerRedAdmin (8) submitted ownerRed's draft and cannot approve it.
	{ActionApprove, submittedBy(8, StateSubmitted), [8]bool{false, false, false, true, false, false, false, false}},
	{ActionReject, submittedBy(8, StateSubmitted), [8]bool{false, false, false, true, false, false, false, false}},
	{ActionApprove, approvedBy(DataRestricted, 4), [8]bool{false, false, false, false, false, false, false, true}},
	{ActionApprove, approvedBy(DataRestricted, 4, 9), [8]bool{}},
	{ActionApprove, approvedBy(DataInternal, 9), [8]bool{}},
	{ActionApprove, redRequest(StateDraft), [8]bool{}},
	{ActionApprove, redRequest(StateChangesRequested), [8]bool{}},
	{ActionApprove, redRequest(StateWithdrawn), [8]bool{}},
	{ActionApprove, redRequest(StateApproved), [8]bool{}},
	{ActionApprove, blueRequest(StateSubmitted), [8]bool{false, false, false, true, false, false, false, true}},
	{ActionApprove, Object{State: StateSubmitted, RequesterID: 1}, [8]bool{}},

	// Holds: admins decide, independent of the connection and never on a
	// team they own (ownerRedAdmin, 8, owns red); only a live connection,
	// from the hold states each step starts from.
	{ActionConfirmHold, held(StateActive, HoldProposed), [8]bool{false, false, false, true, false, false, false, false}},
	{ActionConfirmHold, held(StateUnderReview, HoldOn), [8]bool{false, false, false, true, false, false, false, false}},
	{ActionConfirmHold, held(StateActive, HoldDrain), [8]bool{}},
	{ActionConfirmHold, held(StateActive, HoldNone), [8]bool{}},
	{ActionConfirmHold, held(StateRevoking, HoldProposed), [8]bool{}},
	{ActionConfirmHold, editedBy(4, StateActive), [8]bool{}},
	{ActionConfirmHold, func() Object { o := editedBy(4, StateActive); o.Hold = HoldProposed; return o }(), [8]bool{}},
	{ActionConfirmHold, func() Object { o := blueRequest(StateActive); o.Hold = HoldProposed; return o }(), [8]bool{false, false, false, true, false, false, false, true}},
	{ActionConfirmHold, Object{State: StateActive, Hold: HoldProposed}, [8]bool{}},
	{ActionReleaseHold, held(StateActive, HoldOn), [8]bool{false, false, false, true, false, false, false, false}},
	{ActionReleaseHold, held(StateActive, HoldDrain), [8]bool{false, false, false, true, false, false, false, false}},
	{ActionReleaseHold, held(StateActive, HoldProposed), [8]bool{}},
	{ActionReleaseHold, held(StateActive, HoldNone), [8]bool{}},
	{ActionReleaseHold, held(StateRevoked, HoldOn), [8]bool{}},
	{ActionReleaseHold, func() Object { o := filedBy(4, StateActive); o.Hold = HoldOn; return o }(), [8]bool{}},
	{ActionRetryHold, held(StateActive, HoldNone), [8]bool{false, false, false, true, false, false, false, true}},
	{ActionRetryHold, held(StateUnderReview, HoldDrain), [8]bool{false, false, false, true, false, false, false, true}},
	{ActionRetryHold, held(StateRevoking, HoldOn), [8]bool{}},
	{ActionRetryHold, Object{State: StateActive}, [8]bool{}},

	{ActionReject, redRequest(StateSubmitted), [8]bool{false, false, false, true, false, false, false, true}},
	{ActionReject, filedBy(8, StateSubmitted), [8]bool{false, false, false, true, false, false, false, false}},
	{ActionReject, editedBy(4, StateSubmitted), [8]bool{false, false, false, false, false, false, false, true}},
	{ActionReject, redRequest(StateChangesRequested), [8]bool{}},
	{ActionReject, redRequest(StateActive), [8]bool{}},
	{ActionReject, Object{State: StateSubmitted, RequesterID: 1}, [8]bool{}},

	{ActionRequestChanges, redRequest(StateSubmitted), [8]bool{false, false, false, true, false, false, false, true}},
	{ActionRequestChanges, filedBy(8, StateSubmitted), [8]bool{false, false, false, true, false, false, false, false}},
	{ActionRequestChanges, editedBy(4, StateSubmitted), [8]bool{false, false, false, false, false, false, false, true}},
	{ActionRequestChanges, redRequest(StateDraft), [8]bool{}},
	{ActionRequestChanges, redRequest(StateUnderReview), [8]bool{}},
	{ActionRequestChanges, Object{State: StateSubmitted, RequesterID: 1}, [8]bool{}},

	{ActionRevoke, redRequest(StateActive), [8]bool{false, false, false, true, false, false, false, true}},
	{ActionRevoke, filedBy(8, StateActive), [8]bool{false, false, false, true, false, false, false, true}},
	{ActionRevoke, redRequest(StateApproved), [8]bool{false, false, false, true, false, false, false, true}},
	{ActionRevoke, redRequest(StateSubmitted), [8]bool{}},
	{ActionRevoke, redRequest(StateRevoking), [8]bool{}},
	{ActionRevoke, redRequest(StateRevoked), [8]bool{}},
	{ActionRevoke, blueRequest(StateUnderReview), [8]bool{false, false, false, true, false, false, false, true}},
	{ActionRevoke, Object{State: StateActive}, [8]bool{}},

	{ActionReview, redRequest(StateActive), [8]bool{false, false, false, false, true, false, false, false}},
	{ActionReview, redRequest(StateUnderReview), [8]bool{false, false, false, false, true, false, false, false}},
	{ActionReview, filedBy(5, StateActive), [8]bool{}},
	{ActionReview, editedBy(5, StateUnderReview), [8]bool{}},
	{ActionReview, redRequest(StateSubmitted), [8]bool{}},
	{ActionReview, redRequest(StateRevoked), [8]bool{}},
	{ActionReview, Object{State: StateActive}, [8]bool{}},
	// Reviewers review: they neither approve nor revoke, also under review.
	{ActionApprove, amending(StateUnderReview, AmendSubmitted), [8]bool{false, false, false, true, false, false, false, true}},
	{ActionRevoke, redRequest(StateUnderReview), [8]bool{false, false, false, true, false, false, false, true}},
	{ActionReject, amending(StateUnderReview, AmendSubmitted), [8]bool{false, false, false, true, false, false, false, true}},

	// A review is read by reviewers and admins (oversight) and by the
	// team's owners; members, finance and other teams' owners do not.
	{ActionViewReview, Object{Team: "red"}, [8]bool{true, false, false, true, true, false, false, true}},
	{ActionViewReview, Object{Team: "blue"}, [8]bool{false, false, true, true, true, false, false, true}},
	{ActionViewReview, Object{}, [8]bool{}},
	// Declining a recommendation of revocation: an admin outside the team
	// (ownerRedAdmin owns red) and independent of the request.
	{ActionDeclineRevocation, redRequest(StateUnderReview), [8]bool{false, false, false, true, false, false, false, false}},
	{ActionDeclineRevocation, blueRequest(StateUnderReview), [8]bool{false, false, false, true, false, false, false, true}},
	{ActionDeclineRevocation, filedBy(4, StateUnderReview), [8]bool{}},
	{ActionDeclineRevocation, redRequest(StateActive), [8]bool{}},
	{ActionDeclineRevocation, redRequest(StateRevoking), [8]bool{}},
	{ActionDeclineRevocation, Object{State: StateUnderReview}, [8]bool{}},

	{ActionViewCosts, Object{Team: "red"}, [8]bool{true, false, false, false, false, true, false, true}},
	{ActionViewCosts, Object{Team: "blue"}, [8]bool{false, false, true, false, false, true, false, false}},
	{ActionViewCosts, Object{}, [8]bool{false, false, false, false, false, true, false, false}},
	{ActionEditCostPolicy, Object{}, [8]bool{false, false, false, false, false, true, false, false}},
	{ActionEditCostPolicy, Object{Team: "red"}, [8]bool{false, false, false, false, false, true, false, false}},

	{ActionViewUsage, Object{Team: "red"}, [8]bool{true, true, false, true, true, true, false, true}},
	{ActionViewUsage, Object{Team: "blue"}, [8]bool{false, false, true, true, true, true, false, true}},
	{ActionViewUsage, Object{}, [8]bool{}},

	// The evidence bundle: admins and reviewers, and the team's owners; not
	// members, finance, or another team's owner.
	{ActionExportEvidence, redRequest(StateActive), [8]bool{true, false, false, true, true, false, false, true}},
	{ActionExportEvidence, blueRequest(StateRevoked), [8]bool{false, false, true, true, true, false, false, true}},
	{ActionExportEvidence, Object{}, [8]bool{}},

	{ActionEditInventory, Object{}, [8]bool{false, false, false, true, false, false, false, true}},
	{ActionReapply, redRequest(StateActive), [8]bool{false, false, false, true, false, false, false, true}},
	{ActionRetryJob, redRequest(StateApproved), [8]bool{false, false, false, true, false, false, false, true}},
	{ActionRetryJob, redRequest(StateRevoking), [8]bool{false, false, false, true, false, false, false, true}},
	{ActionRetryJob, redRequest(StateActive), [8]bool{}},
	{ActionRetryJob, redRequest(StateSubmitted), [8]bool{}},
	{ActionReapply, redRequest(StateUnderReview), [8]bool{false, false, false, true, false, false, false, true}},
	{ActionReapply, redRequest(StateApproved), [8]bool{}},
	{ActionReapply, redRequest(StateRevoking), [8]bool{}},
	{ActionEditInventory, Object{Team: "red"}, [8]bool{false, false, false, true, false, false, false, true}},
	{ActionEditScheduler, Object{}, [8]bool{false, false, false, true, false, false, false, true}},
}

// redRequest is a request of team red filed and edited by ownerRed (id 1).
// amending is red's live connection in state s with its change in a.
func amending(s State, a Amendment) Object {
	o := redRequest(s)
	o.Amendment = a
	return o
}

// held is a live red connection (filed by ownerRed) with its hold at h.
func held(s State, h Hold) Object {
	o := redRequest(s)
	o.Hold = h
	return o
}

func redRequest(s State) Object {
	return Object{Team: "red", State: s, RequesterID: 1, EditorIDs: []int64{1}, DataClassification: DataInternal}
}

// blueRequest is a request of team blue filed and edited by ownerBlue (id 3).
func blueRequest(s State) Object {
	return Object{Team: "blue", State: s, RequesterID: 3, EditorIDs: []int64{3}, DataClassification: DataInternal}
}

// filedBy is a red request filed (and so edited) by user id.
func filedBy(id int64, s State) Object {
	o := redRequest(s)
	o.RequesterID, o.EditorIDs = id, []int64{id}
	return o
}

// editedBy is a red request filed by ownerRed and later edited by user id.
func editedBy(id int64, s State) Object {
	o := redRequest(s)
	o.EditorIDs = []int64{1, id}
	return o
}

// submittedBy is a red request filed and edited by ownerRed and submitted
// by user id.
func submittedBy(id int64, s State) Object {
	o := redRequest(s)
	o.SubmitterIDs = []int64{id}
	return o
}

// approvedBy is a submitted red request that admins have already approved.
func approvedBy(dc DataClassification, ids ...int64) Object {
	o := redRequest(StateSubmitted)
	o.DataClassification, o.ApproverIDs = dc, ids
	return o
}

// TestDecideStates crosses every state-gated action with every state, for
// a principal who may otherwise do it.
func TestDecideStates(t *testing.T) {
	byName := map[string]Principal{}
	for _, pr := range policyPrincipals {
		byName[pr.name] = pr.p
	}
	tests := []struct {
		action    Action
		principal string
		allowed   []State
	}{
		// Not gated by state at all.
		{ActionCreateRequest, "ownerRed", append(slices.Clone(AllStates), "", "archived")},
		{ActionViewConnection, "memberRed", append(slices.Clone(AllStates), "", "archived")},
		// With no change open, a live connection's owner may open one.
		{ActionEditRequest, "ownerRed", []State{StateDraft, StateChangesRequested, StateActive, StateUnderReview}},
		{ActionSubmitRequest, "ownerRed", []State{StateDraft, StateChangesRequested}},
		{ActionWithdrawRequest, "ownerRed", []State{StateDraft, StateSubmitted, StateChangesRequested}},
		{ActionApprove, "admin", []State{StateSubmitted}},
		{ActionReject, "admin", []State{StateSubmitted}},
		{ActionRequestChanges, "admin", []State{StateSubmitted}},
		{ActionRevoke, "admin", []State{StateApproved, StateProvisioning, StateActive, StateUnderReview}},
		{ActionReview, "reviewer", []State{StateActive, StateUnderReview}},
		{ActionDeclineRevocation, "admin", []State{StateUnderReview}},
	}
	for _, tt := range tests {
		for _, s := range append(slices.Clone(AllStates), "", "archived") {
			d := Decide(byName[tt.principal], tt.action, redRequest(s))
			if want := slices.Contains(tt.allowed, s); d.Allowed != want {
				t.Errorf("Decide(%s, %s, state %q) = %v (%s), want %v", tt.principal, tt.action, s, d.Allowed, d.Reason, want)
			}
		}
	}
}

func TestApprovalsNeeded(t *testing.T) {
	for _, dc := range append(slices.Clone(AllDataClassifications), "") {
		want := 1
		if dc == DataRestricted {
			want = 2
		}
		if got := ApprovalsNeeded(dc); got != want {
			t.Errorf("ApprovalsNeeded(%q) = %d, want %d", dc, got, want)
		}
	}
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
		{"admin", ActionApprove, redRequest(StateSubmitted), "approval 1 of 1"},
		{"admin", ActionApprove, approvedBy(DataRestricted), "approval 1 of 2"},
		{"ownerRedAdmin", ActionApprove, approvedBy(DataRestricted, 4), "approval 2 of 2"},
		{"ownerRedAdmin", ActionApprove, filedBy(8, StateSubmitted), "Oda filed this request; nobody approves a request they filed or a contract they edited"},
		{"admin", ActionApprove, editedBy(4, StateSubmitted), "Ada edited this contract; nobody approves a request they filed or a contract they edited"},
		{"admin", ActionApprove, approvedBy(DataRestricted, 4), "Ada already approved this version"},
		{"ownerRedAdmin", ActionApprove, approvedBy(DataRestricted, 4, 9), "already has its 2 approvals"},
		{"admin", ActionApprove, redRequest(StateWithdrawn), "a withdrawn request cannot be approved"},
		{"ownerRed", ActionApprove, redRequest(StateSubmitted), "needs the admin role"},
		{"ownerRedAdmin", ActionReject, filedBy(8, StateSubmitted), "nobody decides on a request they filed"},
		{"admin", ActionRequestChanges, redRequest(StateUnderReview), "a connection under review cannot be sent back for changes"},
		{"ownerRed", ActionEditRequest, redRequest(StateSubmitted), "a submitted request cannot be edited"},
		{"ownerBlue", ActionEditRequest, redRequest(StateDraft), "not an owner of team red"},
		{"memberRed", ActionCreateRequest, Object{Team: "red"}, "not an owner of team red"},
		{"admin", ActionCreateRequest, Object{Team: "red"}, "not an owner of team red"},
		{"ownerRed", ActionWithdrawRequest, redRequest(StateApproved), "an approved connection cannot be withdrawn"},
		{"admin", ActionRevoke, redRequest(StateRevoked), "a revoked connection cannot be revoked"},
		{"admin", ActionRevoke, redRequest("archived"), `unknown state "archived"`},
		{"reviewer", ActionReview, filedBy(5, StateActive), "nobody reviews a request they filed"},
		{"reviewer", ActionReview, redRequest(StateDraft), "a draft cannot be reviewed"},
		{"ownerRedAdmin", ActionDeclineRevocation, redRequest(StateUnderReview), "nobody declines a recommendation to revoke their own team's connection"},
		{"memberRed", ActionViewReview, Object{Team: "red"}, "reviews are read by reviewers, admins and the team's owners"},
		{"memberRed", ActionViewCosts, Object{Team: "red"}, "needs the finance role or ownership"},
		{"ownerRed", ActionViewCosts, Object{Team: "red"}, "owner of team red"},
		{"reviewer", ActionEditInventory, Object{}, "needs the admin role"},
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

// TestSeesAllExceptions: only admins' exceptions page lists every
// connection with an exception in effect.
func TestSeesAllExceptions(t *testing.T) {
	want := map[string]bool{"admin": true, "ownerRedAdmin": true}
	for _, pr := range policyPrincipals {
		if got := SeesAllExceptions(pr.p); got != want[pr.name] {
			t.Errorf("SeesAllExceptions(%s) = %v, want %v", pr.name, got, want[pr.name])
		}
	}
}
