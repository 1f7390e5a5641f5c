package workflow

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// Table tests of the commands (issue 11): for every connection state (and,
// on a live connection, every amendment state), every kind of actor and the
// inputs each rule reads, the whole effect or the exact refusal. The
// expected outcomes are written out by hand here, not read from the
// lifecycle tables, so a test breaks when a rule does.

var cmdNow = time.Date(2026, 3, 15, 10, 0, 0, 0, time.UTC)

// The people of the tests. Each of the first three is exactly one of the
// independence rule's cases: the requester (who edited nothing), an editor
// of a version, the one who submitted it.
var (
	requester = Actor{ID: 1, Email: "owner.red@example.test"}
	editor    = Actor{ID: 2, Email: "member.red@example.test"}
	submitter = Actor{ID: 3, Email: "lead.red@example.test"}
	admin     = Actor{ID: 10, Email: "admin@example.test"}
	admin2    = Actor{ID: 11, Email: "admin2@example.test"}
)

// approvedContract is the version a live connection runs (version 2);
// currentContract the latest saved version (3).
func approvedContract() Contract { return ExampleContract() }

// The hashes of the two, computed once.
var (
	currentHash  = currentContract().Hash()
	approvedHash = approvedContract().Hash()
)

func currentContract() Contract {
	c := ExampleContract()
	c.BusinessPurpose += " Also nightly batch scoring."
	return c.Normalize()
}

// testConn is connection #7 of team red in state s with its amendment in
// a, at version 3. From approval on it has an approved version: 3, or on a
// live connection 2 (version 3 being its change, or a change withdrawn).
func testConn(s State, a Amendment) Conn {
	c := Conn{ID: 7, Team: "red", State: s, Amendment: a,
		CurrentVersion: 3, CurrentHash: currentHash,
		RequesterID: requester.ID, EditorIDs: []int64{editor.ID}, SubmitterIDs: []int64{submitter.ID}}
	switch s {
	case StateActive, StateUnderReview:
		c.ApprovedVersion, c.ApprovedHash = 2, approvedHash
	case StateApproved, StateProvisioning, StateRevoking, StateRevoked:
		c.ApprovedVersion, c.ApprovedHash = 3, c.CurrentHash
	}
	return c
}

// amendmentsOf is what a connection in s can have: every amendment state
// when it is live, none otherwise.
func amendmentsOf(s State) []Amendment {
	if s.Live() {
		return AllAmendments
	}
	return []Amendment{AmendNone}
}

func amendPtr(a Amendment) *Amendment { return &a }

func contractPtr(c Contract) *Contract { c = c.Normalize(); return &c }

// refusal tells an expected error from another.
type refusal struct {
	what string
	ok   func(error) bool
}

func is(target error) *refusal {
	return &refusal{"errors.Is " + target.Error(), func(err error) bool { return errors.Is(err, target) }}
}

func isStale() *refusal {
	return &refusal{"*StaleError", func(err error) bool { var se *StaleError; return errors.As(err, &se) }}
}

func isTransition(s State, e Event) *refusal {
	return &refusal{fmt.Sprintf("*TransitionError{%s, %s}", s, e), func(err error) bool {
		var te *TransitionError
		return errors.As(err, &te) && te.From == s && te.Event == e
	}}
}

func isAmendment(a Amendment, e Event) *refusal {
	return &refusal{fmt.Sprintf("*AmendmentError{%q, %s}", a, e), func(err error) bool {
		var ae *AmendmentError
		return errors.As(err, &ae) && ae.From == a && ae.Event == e
	}}
}

// isOther is a refusal of none of the named classes, saying what it names.
func isOther(says string) *refusal {
	return &refusal{"an error saying " + says, func(err error) bool {
		var se *StaleError
		var te *TransitionError
		var ae *AmendmentError
		return err != nil && !errors.As(err, &se) && !errors.As(err, &te) && !errors.As(err, &ae) &&
			strings.Contains(err.Error(), says)
	}}
}

// both is a refusal that is a and b at once (a wrapped cause).
func both(a, b *refusal) *refusal {
	return &refusal{a.what + " and " + b.what, func(err error) bool { return a.ok(err) && b.ok(err) }}
}

// expect checks a command's outcome: the refusal, with the zero effect
// (nothing to record), or no error and exactly the effect want. Notices are
// compared without their subjects, which must name the connection; an
// audit reason of want starting with "~" need only be contained in the
// one got.
func expect(t *testing.T, name string, got Effect, err error, want Effect, wantErr *refusal) {
	t.Helper()
	if wantErr != nil {
		if err == nil || !wantErr.ok(err) {
			t.Errorf("%s: error = %v, want %s", name, err, wantErr.what)
		}
		if !reflect.DeepEqual(got, Effect{}) {
			t.Errorf("%s: refused, yet the effect is not zero: %s", name, showEffect(got))
		}
		return
	}
	if err != nil {
		t.Errorf("%s: error = %v, want the effect %s", name, err, showEffect(want))
		return
	}
	g := got
	g.Notify = nil
	for _, n := range got.Notify {
		if !strings.Contains(n.Subject, "#7") {
			t.Errorf("%s: notice %s subject %q does not name connection #7", name, n.Kind, n.Subject)
		}
		g.Notify = append(g.Notify, Notice{Kind: n.Kind, To: n.To})
	}
	g.Audit = append([]AuditRecord(nil), got.Audit...)
	for i := range g.Audit {
		if i < len(want.Audit) && strings.HasPrefix(want.Audit[i].Reason, "~") &&
			strings.Contains(g.Audit[i].Reason, want.Audit[i].Reason[1:]) {
			g.Audit[i].Reason = want.Audit[i].Reason
		}
	}
	if len(g.Audit) == 0 {
		g.Audit = nil
	}
	if !reflect.DeepEqual(g, want) {
		t.Errorf("%s:\n got %s\nwant %s", name, showEffect(got), showEffect(want))
	}
}

func showEffect(e Effect) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{By:%v Next:%s", e.By, e.Next)
	if e.Version != nil {
		fmt.Fprintf(&b, " Version:%s", e.Version.Hash()[:12])
	}
	if e.Approve != 0 {
		fmt.Fprintf(&b, " Approve:%d", e.Approve)
	}
	if e.Amend != nil {
		fmt.Fprintf(&b, " Amend:%q", *e.Amend)
	}
	if e.Submitted {
		b.WriteString(" Submitted")
	}
	if e.Decision != nil {
		fmt.Fprintf(&b, " Decision:%+v", *e.Decision)
	}
	if e.Adopt != "" {
		fmt.Fprintf(&b, " Adopt:%s", e.Adopt)
	}
	if e.Cancel != nil {
		fmt.Fprintf(&b, " Cancel:%+v", *e.Cancel)
	}
	if e.Job != nil {
		fmt.Fprintf(&b, " Job:%+v", *e.Job)
	}
	if e.ReviewTriggers != nil {
		fmt.Fprintf(&b, " ReviewTriggers:%v", e.ReviewTriggers)
	}
	if e.Approvals != 0 {
		fmt.Fprintf(&b, " Approvals:%d", e.Approvals)
	}
	fmt.Fprintf(&b, " Audit:%+v Notify:", e.Audit)
	for _, n := range e.Notify {
		fmt.Fprintf(&b, "[%s to %s] ", n.Kind, n.To)
	}
	b.WriteString("}")
	return b.String()
}

func TestCreate(t *testing.T) {
	c := ExampleContract()
	c.Namespaces = []string{" hyperpod-ns-red "} // normalized on the way in
	e, err := Create(requester, c, cmdNow)
	expect(t, "Create", e, err, Effect{By: requester, Next: StateDraft, Version: contractPtr(ExampleContract()),
		Audit: []AuditRecord{{Actor: requester, Action: "connection.create", Version: 1}}}, nil)
	e, err = Create(requester, c, time.Time{})
	expect(t, "Create without a clock", e, err, Effect{}, is(ErrNoClock))
}

// editedContract is a change of the current version: a new version 4.
func editedContract() Contract {
	c := currentContract()
	c.ReviewCadenceDays = 60
	return c
}

func TestEditEveryState(t *testing.T) {
	// Before approval: the states a request is edited in, and where it
	// goes (edit keeps the state).
	editable := map[State]State{StateDraft: StateDraft, StateChangesRequested: StateChangesRequested}
	// On a live connection the edit is its amendment's: the first save
	// opens a draft, a draft or a change sent back stays so.
	amendEditable := map[Amendment]Amendment{
		AmendNone: AmendDraft, AmendDraft: AmendDraft, AmendChangesRequested: AmendChangesRequested,
	}
	for _, s := range AllStates {
		for _, a := range amendmentsOf(s) {
			for _, by := range []Actor{requester, editor, submitter, admin} {
				name := fmt.Sprintf("Edit %s/%q by %d", s, a, by.ID)
				e, err := Edit(testConn(s, a), by, 3, editedContract(), cmdNow)
				switch {
				case s.Live():
					next, ok := amendEditable[a]
					if !ok {
						expect(t, name, e, err, Effect{}, isAmendment(a, EventEdit))
						continue
					}
					reason := ""
					if a == AmendNone {
						reason = "~change requested on the active connection (version 2 stays active"
					}
					expect(t, name, e, err, Effect{By: by, Next: s, Amend: amendPtr(next), Version: contractPtr(editedContract()),
						Audit: []AuditRecord{{Actor: by, Action: "contract.version", Version: 4, Reason: reason}}}, nil)
				default:
					next, ok := editable[s]
					if !ok {
						expect(t, name, e, err, Effect{}, isTransition(s, EventEdit))
						continue
					}
					expect(t, name, e, err, Effect{By: by, Next: next, Version: contractPtr(editedContract()),
						Audit: []AuditRecord{{Actor: by, Action: "contract.version", Version: 4}}}, nil)
				}
			}
		}
	}
}

func TestEditInputs(t *testing.T) {
	otherTeam := editedContract()
	otherTeam.Team = "blue"
	atCap := func(s State, a Amendment) Conn { c := testConn(s, a); c.CurrentVersion = MaxVersions; return c }
	version := func(c Contract, reason string) Effect {
		return Effect{By: editor, Next: StateDraft, Version: contractPtr(c),
			Audit: []AuditRecord{{Actor: editor, Action: "contract.version", Version: 4, Reason: reason}}}
	}
	tests := []struct {
		name    string
		conn    Conn
		base    int
		c       Contract
		now     time.Time
		want    Effect
		wantErr *refusal
	}{
		{"a change", testConn(StateDraft, AmendNone), 3, editedContract(), cmdNow, version(editedContract(), ""), nil},
		{"someone saved since", testConn(StateDraft, AmendNone), 2, editedContract(), cmdNow, Effect{}, isStale()},
		{"stale on a live connection", testConn(StateActive, AmendDraft), 2, editedContract(), cmdNow, Effect{}, isStale()},
		{"stale before the state", testConn(StateRevoked, AmendNone), 2, editedContract(), cmdNow, Effect{}, isStale()},
		{"team change", testConn(StateDraft, AmendNone), 3, otherTeam, cmdNow, Effect{}, is(ErrTeamChanged)},
		{"team change of a live connection", testConn(StateActive, AmendNone), 3, otherTeam, cmdNow, Effect{}, is(ErrTeamChanged)},
		{"identical to the current version", testConn(StateDraft, AmendNone), 3, currentContract(), cmdNow,
			Effect{By: editor, Next: StateDraft}, nil},
		{"identical once normalized", testConn(StateChangesRequested, AmendNone), 3,
			func() Contract { c := currentContract(); c.Region = " US-EAST-1 "; return c }(), cmdNow,
			Effect{By: editor, Next: StateChangesRequested}, nil},
		{"no-op in a state that refuses edits", testConn(StateSubmitted, AmendNone), 3, currentContract(), cmdNow,
			Effect{}, isTransition(StateSubmitted, EventEdit)},
		{"live, no change open, identical to the approved version", testConn(StateActive, AmendNone), 3, approvedContract(), cmdNow,
			Effect{By: editor, Next: StateActive}, nil},
		{"live draft identical to its current version", testConn(StateUnderReview, AmendDraft), 3, currentContract(), cmdNow,
			Effect{By: editor, Next: StateUnderReview}, nil},
		{"live draft back to the approved version is a version", testConn(StateActive, AmendDraft), 3, approvedContract(), cmdNow,
			Effect{By: editor, Next: StateActive, Amend: amendPtr(AmendDraft), Version: contractPtr(approvedContract()),
				Audit: []AuditRecord{{Actor: editor, Action: "contract.version", Version: 4}}}, nil},
		{"version cap", atCap(StateDraft, AmendNone), MaxVersions, editedContract(), cmdNow, Effect{}, is(ErrVersionLimit)},
		{"version cap on a live connection", atCap(StateActive, AmendChangesRequested), MaxVersions, editedContract(), cmdNow, Effect{}, is(ErrVersionLimit)},
		{"a no-op at the cap is still a no-op", atCap(StateDraft, AmendNone), MaxVersions, currentContract(), cmdNow,
			Effect{By: editor, Next: StateDraft}, nil},
		{"no clock", testConn(StateDraft, AmendNone), 3, editedContract(), time.Time{}, Effect{}, is(ErrNoClock)},
		{"no clock on a live connection", testConn(StateActive, AmendNone), 3, editedContract(), time.Time{}, Effect{}, is(ErrNoClock)},
	}
	{
		// Just below the cap a change is the last version.
		c := testConn(StateDraft, AmendNone)
		c.CurrentVersion = MaxVersions - 1
		w := version(editedContract(), "")
		w.Audit[0].Version = MaxVersions
		tests = append(tests, struct {
			name    string
			conn    Conn
			base    int
			c       Contract
			now     time.Time
			want    Effect
			wantErr *refusal
		}{"the last version below the cap", c, MaxVersions - 1, editedContract(), cmdNow, w, nil})
	}
	for _, tt := range tests {
		e, err := Edit(tt.conn, editor, tt.base, tt.c, tt.now)
		expect(t, "Edit: "+tt.name, e, err, tt.want, tt.wantErr)
	}
}

func TestSubmitEveryState(t *testing.T) {
	submittable := map[State]State{StateDraft: StateSubmitted, StateChangesRequested: StateSubmitted}
	amendSubmittable := map[Amendment]Amendment{AmendDraft: AmendSubmitted, AmendChangesRequested: AmendSubmitted}
	for _, s := range AllStates {
		for _, a := range amendmentsOf(s) {
			name := fmt.Sprintf("Submit %s/%q", s, a)
			c := testConn(s, a)
			e, err := Submit(c, submitter, Pin{Version: 3, Hash: c.CurrentHash}, cmdNow)
			switch {
			case s.Live():
				next, ok := amendSubmittable[a]
				if !ok {
					expect(t, name, e, err, Effect{}, isAmendment(a, EventSubmit))
					continue
				}
				expect(t, name, e, err, Effect{By: submitter, Next: s, Amend: amendPtr(next), Submitted: true,
					Audit:  []AuditRecord{{Actor: submitter, Action: "connection.submit", Version: 3, Reason: "change to the active version 2"}},
					Notify: []Notice{{Kind: "amendment.submitted", To: ToAdmins}}}, nil)
			default:
				next, ok := submittable[s]
				if !ok {
					expect(t, name, e, err, Effect{}, isTransition(s, EventSubmit))
					continue
				}
				expect(t, name, e, err, Effect{By: submitter, Next: next, Submitted: true,
					Audit:  []AuditRecord{{Actor: submitter, Action: "connection.submit", Version: 3}},
					Notify: []Notice{{Kind: "connection.submitted", To: ToAdmins}}}, nil)
			}
		}
	}
}

func TestSubmitPins(t *testing.T) {
	h := currentContract().Hash()
	ok := Effect{By: submitter, Next: StateSubmitted, Submitted: true,
		Audit:  []AuditRecord{{Actor: submitter, Action: "connection.submit", Version: 3}},
		Notify: []Notice{{Kind: "connection.submitted", To: ToAdmins}}}
	tests := []struct {
		name    string
		pin     Pin
		wantErr *refusal
	}{
		{"matching", Pin{3, h}, nil},
		{"version only", Pin{Version: 3}, nil},
		{"zero pin", Pin{}, nil},
		{"stale version", Pin{2, h}, isStale()},
		{"newer version", Pin{4, h}, isStale()},
		{"stale hash", Pin{3, approvedContract().Hash()}, isStale()},
	}
	for _, tt := range tests {
		for _, s := range []State{StateDraft, StateActive} {
			a, want := AmendNone, ok
			if s.Live() {
				a = AmendDraft
				want = Effect{By: submitter, Next: s, Amend: amendPtr(AmendSubmitted), Submitted: true,
					Audit:  []AuditRecord{{Actor: submitter, Action: "connection.submit", Version: 3, Reason: "change to the active version 2"}},
					Notify: []Notice{{Kind: "amendment.submitted", To: ToAdmins}}}
			}
			if tt.wantErr != nil {
				want = Effect{}
			}
			e, err := Submit(testConn(s, a), submitter, tt.pin, cmdNow)
			expect(t, fmt.Sprintf("Submit %s pin %s", s, tt.name), e, err, want, tt.wantErr)
		}
	}
	// The pin is checked first: a stale pin on a submitted request is
	// stale, not a refused transition.
	e, err := Submit(testConn(StateSubmitted, AmendNone), submitter, Pin{2, h}, cmdNow)
	expect(t, "Submit stale pin in submitted", e, err, Effect{}, isStale())
	var se *StaleError
	if errors.As(err, &se) && (se.WantVersion != 2 || se.CurrentVersion != 3 || se.State != StateSubmitted || se.CurrentHash != h) {
		t.Errorf("StaleError = %+v", *se)
	}
	e, err = Submit(testConn(StateDraft, AmendNone), submitter, Pin{3, h}, time.Time{})
	expect(t, "Submit without a clock", e, err, Effect{}, is(ErrNoClock))
}

func TestWithdrawEveryState(t *testing.T) {
	withdrawable := map[State]State{StateDraft: StateWithdrawn, StateSubmitted: StateWithdrawn, StateChangesRequested: StateWithdrawn}
	amendWithdrawable := map[Amendment]Amendment{AmendDraft: AmendNone, AmendSubmitted: AmendNone, AmendChangesRequested: AmendNone}
	for _, s := range AllStates {
		for _, a := range amendmentsOf(s) {
			name := fmt.Sprintf("Withdraw %s/%q", s, a)
			e, err := Withdraw(testConn(s, a), requester, "not needed", cmdNow)
			switch {
			case s.Live():
				next, ok := amendWithdrawable[a]
				if !ok {
					expect(t, name, e, err, Effect{}, isAmendment(a, EventWithdraw))
					continue
				}
				expect(t, name, e, err, Effect{By: requester, Next: s, Amend: amendPtr(next),
					Audit: []AuditRecord{{Actor: requester, Action: "amendment.withdraw", Version: 3, Reason: "not needed"}}}, nil)
			default:
				next, ok := withdrawable[s]
				if !ok {
					expect(t, name, e, err, Effect{}, isTransition(s, EventWithdraw))
					continue
				}
				expect(t, name, e, err, Effect{By: requester, Next: next,
					Audit: []AuditRecord{{Actor: requester, Action: "connection.withdraw", Version: 3, Reason: "not needed"}}}, nil)
			}
		}
	}
	e, err := Withdraw(testConn(StateDraft, AmendNone), requester, "", time.Time{})
	expect(t, "Withdraw without a clock", e, err, Effect{}, is(ErrNoClock))
}

func TestSendBackEveryState(t *testing.T) {
	// Only a submitted request, or a live connection's submitted change,
	// is sent back. (A connection under review is the reviewer's: its
	// request_changes is not an admin's SendBack.)
	sendBack := map[Event]struct {
		to, action string
		next       State
		amend      Amendment
	}{
		EventReject:         {"reject", "reject", StateRejected, AmendNone},
		EventRequestChanges: {"request_changes", "request_changes", StateChangesRequested, AmendChangesRequested},
	}
	for _, ev := range []Event{EventReject, EventRequestChanges} {
		w := sendBack[ev]
		for _, s := range AllStates {
			for _, a := range amendmentsOf(s) {
				for _, by := range []Actor{requester, editor, submitter, admin, admin2} {
					name := fmt.Sprintf("SendBack %s %s/%q by %d", ev, s, a, by.ID)
					c := testConn(s, a)
					e, err := SendBack(c, by, ev, Pin{3, c.CurrentHash}, "too big", cmdNow)
					decision := &DecisionRecord{Version: 3, Hash: c.CurrentHash, Kind: w.to, Reason: "too big"}
					dependent := by.ID < 10
					switch {
					case s.Live() && a != AmendSubmitted:
						expect(t, name, e, err, Effect{}, isAmendment(a, ev))
					case !s.Live() && s != StateSubmitted:
						expect(t, name, e, err, Effect{}, isTransition(s, ev))
					case dependent:
						expect(t, name, e, err, Effect{}, is(ErrNotIndependent))
					case s.Live():
						expect(t, name, e, err, Effect{By: by, Next: s, Amend: amendPtr(w.amend), Decision: decision,
							Audit:  []AuditRecord{{Actor: by, Action: "amendment." + w.action, Version: 3, Reason: "too big"}},
							Notify: []Notice{{Kind: "amendment." + w.action, To: ToTeam}}}, nil)
					default:
						expect(t, name, e, err, Effect{By: by, Next: w.next, Decision: decision,
							Audit:  []AuditRecord{{Actor: by, Action: "connection." + w.action, Version: 3, Reason: "too big"}},
							Notify: []Notice{{Kind: "connection." + w.action, To: ToTeam}}}, nil)
					}
				}
			}
		}
	}
}

func TestSendBackInputs(t *testing.T) {
	c := testConn(StateSubmitted, AmendNone)
	for _, ev := range []Event{EventApprove, EventWithdraw, EventRenew, "bogus"} {
		e, err := SendBack(c, admin, ev, Pin{}, "no", cmdNow)
		expect(t, "SendBack "+string(ev), e, err, Effect{}, isOther("is not a decision to send a request back"))
	}
	for _, pin := range []Pin{{2, c.CurrentHash}, {3, "stale"}} {
		for _, a := range []Conn{c, testConn(StateActive, AmendSubmitted)} {
			e, err := SendBack(a, admin, EventReject, pin, "no", cmdNow)
			expect(t, fmt.Sprintf("SendBack %s pin %v", a.State, pin), e, err, Effect{}, isStale())
		}
	}
	// A zero pin decides on the current version.
	e, err := SendBack(c, admin, EventReject, Pin{}, "no", cmdNow)
	expect(t, "SendBack zero pin", e, err, Effect{By: admin, Next: StateRejected,
		Decision: &DecisionRecord{Version: 3, Hash: c.CurrentHash, Kind: "reject", Reason: "no"},
		Audit:    []AuditRecord{{Actor: admin, Action: "connection.reject", Version: 3, Reason: "no"}},
		Notify:   []Notice{{Kind: "connection.reject", To: ToTeam}}}, nil)
	e, err = SendBack(c, admin, EventReject, Pin{}, "no", time.Time{})
	expect(t, "SendBack without a clock", e, err, Effect{}, is(ErrNoClock))
}

const p5 = "ml.p5.48xlarge"

// okFacts are the facts of an approval that passes every check: the
// request's 2 p5 fit the cluster's 8 with 2 held by others.
func okFacts() ApprovalFacts {
	return ApprovalFacts{Contract: currentContract(), Approved: approvedContract(),
		Inventory: map[string]int{p5: 8}, Committed: []Capacity{{InstanceType: p5, Count: 2}}}
}

func okApproval() ApprovalInput {
	return ApprovalInput{Version: 3, Hash: currentHash, PlanHash: "plan-3", Reason: "fits"}
}

// approved is the full effect of the approval of version 3 by by, with n
// approvals: on a request, to approved with its provisioning job; on a live
// connection, its change approved with the amend job from version 2.
func approved(s State, by Actor, n int) Effect {
	d := &DecisionRecord{Version: 3, Hash: currentContract().Hash(), Kind: "approve", Reason: "fits"}
	if s.Live() {
		return Effect{By: by, Next: s, Amend: amendPtr(AmendApproved), Approvals: n, Decision: d,
			Job:    &JobOrder{Kind: JobAmend, Version: 3, PlanHash: "plan-3", FromVersion: 2},
			Audit:  []AuditRecord{{Actor: by, Action: "amendment.approve", Version: 3, Reason: "fits"}},
			Notify: []Notice{{Kind: "amendment.approved", To: ToTeam}}}
	}
	return Effect{By: by, Next: StateApproved, Approve: 3, Approvals: n, Decision: d,
		Job:    &JobOrder{Kind: JobProvision, Version: 3, PlanHash: "plan-3"},
		Audit:  []AuditRecord{{Actor: by, Action: "connection.approve", Version: 3, Reason: "fits"}},
		Notify: []Notice{{Kind: "connection.approved", To: ToTeam}}}
}

// partial is the effect of the first approval of a restricted version:
// recorded alone.
func partial(s State, by Actor) Effect {
	action := "connection.approve_partial"
	if s.Live() {
		action = "amendment.approve_partial"
	}
	return Effect{By: by, Next: s, Approvals: 1,
		Decision: &DecisionRecord{Version: 3, Hash: currentContract().Hash(), Kind: "approve", Reason: "fits"},
		Audit:    []AuditRecord{{Actor: by, Action: action, Version: 3, Reason: "fits"}}}
}

func TestApproveEveryState(t *testing.T) {
	for _, s := range AllStates {
		for _, a := range amendmentsOf(s) {
			for _, by := range []Actor{requester, editor, submitter, admin, admin2} {
				name := fmt.Sprintf("Approve %s/%q by %d", s, a, by.ID)
				e, err := Approve(testConn(s, a), by, okApproval(), okFacts(), cmdNow)
				switch {
				case s.Live() && a != AmendSubmitted:
					expect(t, name, e, err, Effect{}, isAmendment(a, EventApprove))
				case !s.Live() && s != StateSubmitted:
					expect(t, name, e, err, Effect{}, isTransition(s, EventApprove))
				case by.ID < 10:
					expect(t, name, e, err, Effect{}, is(ErrNotIndependent))
				default:
					expect(t, name, e, err, approved(s, by, 1), nil)
				}
			}
		}
	}
}

func TestApproveInputs(t *testing.T) {
	type tc struct {
		name    string
		in      func(*ApprovalInput)
		facts   func(*ApprovalFacts)
		want    func(s State) Effect // nil: refused
		wantErr *refusal
		// requestOnly: the case is about a request, not a change (whose
		// capacity rule TestApproveAmendment covers).
		requestOnly bool
	}
	restricted := func(f *ApprovalFacts) {
		f.Contract.DataClassification, f.Approved.DataClassification = DataRestricted, DataRestricted
	}
	planErr := errors.New("the cluster has no such instance group")
	dbDown := errors.New("database is locked")
	tests := []tc{
		{name: "passes", want: func(s State) Effect { return approved(s, admin, 1) }},
		{name: "no version", in: func(in *ApprovalInput) { in.Version = 0 }, wantErr: is(ErrUnpinned)},
		{name: "no hash", in: func(in *ApprovalInput) { in.Hash = "" }, wantErr: is(ErrUnpinned)},
		{name: "no plan hash", in: func(in *ApprovalInput) { in.PlanHash = "" }, wantErr: is(ErrUnpinned)},
		{name: "stale version", in: func(in *ApprovalInput) { in.Version = 2 }, wantErr: isStale()},
		{name: "stale hash", in: func(in *ApprovalInput) { in.Hash = approvedContract().Hash() }, wantErr: isStale()},
		{name: "already approved by this admin", facts: func(f *ApprovalFacts) { f.ApproverIDs = []int64{admin.ID} }, wantErr: is(ErrAlreadyDecided)},
		{name: "restricted, first approval", facts: restricted, want: func(s State) Effect { return partial(s, admin) }},
		{name: "restricted, second approval", facts: func(f *ApprovalFacts) { restricted(f); f.ApproverIDs = []int64{admin2.ID} },
			want: func(s State) Effect { return approved(s, admin, 2) }},
		{name: "restricted, same admin twice", facts: func(f *ApprovalFacts) { restricted(f); f.ApproverIDs = []int64{admin.ID} }, wantErr: is(ErrAlreadyDecided)},
		{name: "confidential needs one", facts: func(f *ApprovalFacts) {
			f.Contract.DataClassification, f.Approved.DataClassification = DataConfidential, DataConfidential
		}, want: func(s State) Effect { return approved(s, admin, 1) }},
		{name: "over capacity", facts: func(f *ApprovalFacts) { f.Committed = []Capacity{{InstanceType: p5, Count: 7}} }, wantErr: is(ErrOverCapacity), requestOnly: true},
		{name: "a type the cluster lacks", facts: func(f *ApprovalFacts) { f.Inventory = map[string]int{"ml.g5.xlarge": 8} }, wantErr: is(ErrOverCapacity), requestOnly: true},
		{name: "exactly full", facts: func(f *ApprovalFacts) { f.Committed = []Capacity{{InstanceType: p5, Count: 6}} },
			want: func(s State) Effect { return approved(s, admin, 1) }},
		{name: "another type over-committed", facts: func(f *ApprovalFacts) {
			f.Inventory["ml.g5.xlarge"] = 1
			f.Committed = append(f.Committed, Capacity{InstanceType: "ml.g5.xlarge", Count: 3})
		}, want: func(s State) Effect { return approved(s, admin, 1) }},
		{name: "claims taken", facts: func(f *ApprovalFacts) { f.Claims = []string{"namespace hyperpod-ns-red is connection #9's"} },
			wantErr: both(is(ErrClaimTaken), isOther("hyperpod-ns-red is connection #9's"))},
		{name: "checks down", facts: func(f *ApprovalFacts) { f.ChecksDown = dbDown }, wantErr: both(is(ErrChecksDown), is(dbDown))},
		// A Slurm version is approved like an EKS one, pinned to its plan.
		{name: "slurm", facts: func(f *ApprovalFacts) {
			f.Contract.Orchestrator, f.Approved.Orchestrator = OrchestratorSlurm, OrchestratorSlurm
		}, want: func(s State) Effect { return approved(s, admin, 1) }},
		{name: "slurm without a plan hash", in: func(in *ApprovalInput) { in.PlanHash = "" }, facts: func(f *ApprovalFacts) {
			f.Contract.Orchestrator, f.Approved.Orchestrator = OrchestratorSlurm, OrchestratorSlurm
		}, wantErr: is(ErrUnpinned)},
		{name: "plan error", facts: func(f *ApprovalFacts) { f.PlanError = planErr }, wantErr: both(is(ErrNotProvisionable), is(planErr))},
		{name: "plan error without a plan hash", in: func(in *ApprovalInput) { in.PlanHash = "" }, facts: func(f *ApprovalFacts) { f.PlanError = planErr },
			wantErr: both(is(ErrNotProvisionable), is(planErr))},
		{name: "project role may manage the cluster", facts: func(f *ApprovalFacts) {
			f.ManagesCluster = []string{"arn:aws:iam::111122223333:role/red-project may sagemaker:DeleteCluster"}
		}, wantErr: both(is(ErrManagesCluster), isOther("red-project may sagemaker:DeleteCluster"))},
		{name: "project role missing in IAM", facts: func(f *ApprovalFacts) {
			f.MissingRoles = []string{"arn:aws:iam::111122223333:role/red-project"}
		}, wantErr: both(is(ErrRoleMissing), isOther("red-project"))},
		{name: "lifecycle simulation down", facts: func(f *ApprovalFacts) { f.LifecycleUnchecked = "IAM did not answer" },
			wantErr: both(is(ErrChecksDown), isOther("IAM did not answer"))},
		{name: "foreign namespace not adopted", facts: func(f *ApprovalFacts) { f.ForeignNamespace = "hyperpod-ns-red" },
			wantErr: both(is(ErrForeignNamespace), isOther("hyperpod-ns-red"))},
		{name: "foreign namespace, another adopted", in: func(in *ApprovalInput) { in.Adopt = "hyperpod-ns-blue" },
			facts: func(f *ApprovalFacts) { f.ForeignNamespace = "hyperpod-ns-red" }, wantErr: is(ErrForeignNamespace)},
		{name: "adopting a namespace the contract does not name", in: func(in *ApprovalInput) { in.Adopt = "hyperpod-ns-blue" },
			wantErr: isOther(`does not name namespace "hyperpod-ns-blue"`)},
		{name: "foreign namespace adopted", in: func(in *ApprovalInput) { in.Adopt = "hyperpod-ns-red" },
			facts: func(f *ApprovalFacts) { f.ForeignNamespace = "hyperpod-ns-red" },
			want: func(s State) Effect {
				e := approved(s, admin, 1)
				e.Adopt = "hyperpod-ns-red"
				e.Audit = append([]AuditRecord{{Actor: admin, Action: "connection.adopt_namespace", Version: 3,
					Reason: "~adopted the existing namespace hyperpod-ns-red"}}, e.Audit...)
				return e
			}},
		{name: "adopted on the first of two approvals", in: func(in *ApprovalInput) { in.Adopt = "hyperpod-ns-red" },
			facts: func(f *ApprovalFacts) { restricted(f); f.ForeignNamespace = "hyperpod-ns-red" },
			want: func(s State) Effect {
				e := partial(s, admin)
				e.Adopt = "hyperpod-ns-red"
				e.Audit = append([]AuditRecord{{Actor: admin, Action: "connection.adopt_namespace", Version: 3,
					Reason: "~adopted the existing namespace hyperpod-ns-red"}}, e.Audit...)
				return e
			}},
	}
	for _, s := range []State{StateSubmitted, StateActive, StateUnderReview} {
		for _, tt := range tests {
			c, in, f := testConn(s, AmendSubmitted), okApproval(), okFacts()
			if !s.Live() {
				c.Amendment = AmendNone
			} else if tt.requestOnly {
				continue
			}
			if tt.in != nil {
				tt.in(&in)
			}
			if tt.facts != nil {
				tt.facts(&f)
			}
			var want Effect
			if tt.want != nil {
				want = tt.want(s)
			}
			e, err := Approve(c, admin, in, f, cmdNow)
			expect(t, fmt.Sprintf("Approve %s: %s", s, tt.name), e, err, want, tt.wantErr)
		}
	}
	e, err := Approve(testConn(StateSubmitted, AmendNone), admin, okApproval(), okFacts(), time.Time{})
	expect(t, "Approve without a clock", e, err, Effect{}, is(ErrNoClock))
}

// TestApproveAmendment: the rules only a change of a live connection has.
func TestApproveAmendment(t *testing.T) {
	guaranteed := func(n int) []Capacity { return []Capacity{{InstanceType: p5, Count: n}} }
	withCapacity := func(held, asked, others, inventory int) func(*ApprovalFacts) {
		return func(f *ApprovalFacts) {
			f.Approved.Scheduling.Guaranteed = guaranteed(held)
			f.Contract.Scheduling.Guaranteed = guaranteed(asked)
			f.Committed = guaranteed(others)
			f.Inventory = map[string]int{p5: inventory}
		}
	}
	tests := []struct {
		name     string
		facts    func(*ApprovalFacts)
		triggers []string
		renewal  bool
		wantErr  *refusal
	}{
		{name: "no capacity change on an over-committed cluster", facts: withCapacity(2, 2, 9, 8)},
		{name: "a decrease on an over-committed cluster", facts: withCapacity(2, 1, 9, 8)},
		{name: "an increase that fits", facts: withCapacity(2, 3, 5, 8)},
		{name: "an increase that does not fit", facts: withCapacity(2, 4, 5, 8), wantErr: is(ErrOverCapacity)},
		{name: "an increase on an over-committed cluster", facts: withCapacity(2, 3, 9, 8), wantErr: is(ErrOverCapacity)},
		{name: "a new instance type the cluster lacks", facts: func(f *ApprovalFacts) {
			f.Contract.Scheduling.Guaranteed = append(f.Contract.Scheduling.Guaranteed, Capacity{InstanceType: "ml.g5.xlarge", Count: 1})
		}, wantErr: is(ErrOverCapacity)},
		{name: "namespaces moved", facts: func(f *ApprovalFacts) { f.Contract.Namespaces = []string{"hyperpod-ns-red2"} },
			wantErr: both(is(ErrNotProvisionable), isOther("Namespaces"))},
		{name: "orchestrator changed", facts: func(f *ApprovalFacts) { f.Contract.Orchestrator = OrchestratorSlurm },
			wantErr: both(is(ErrNotProvisionable), isOther("Orchestrator"))},
		{name: "cluster changed", facts: func(f *ApprovalFacts) { f.Contract.ClusterName = "other-hp" },
			wantErr: both(is(ErrNotProvisionable), isOther("cannot change on an active connection"))},
		{name: "owners and region changed", facts: func(f *ApprovalFacts) {
			f.Contract.Region, f.Contract.CostOwner = "us-west-2", "cfo@example.test"
		}, triggers: []string{"cost_owner", "region"}},
		{name: "renewal", facts: func(f *ApprovalFacts) {
			f.Approved.EndDate, f.Contract = "2026-06-30", f.Approved
			f.Contract.EndDate = "2026-12-31"
		}, renewal: true},
	}
	for _, tt := range tests {
		c := testConn(StateActive, AmendSubmitted)
		f := okFacts()
		tt.facts(&f)
		e, err := Approve(c, admin, okApproval(), f, cmdNow)
		var want Effect
		if tt.wantErr == nil {
			want = approved(StateActive, admin, 1)
			want.ReviewTriggers = tt.triggers
		}
		expect(t, "Approve amendment: "+tt.name, e, err, want, tt.wantErr)
		if err == nil && len(e.Notify) == 1 {
			if got := strings.Contains(e.Notify[0].Subject, "renewal (end date 2026-06-30 → 2026-12-31)"); got != tt.renewal {
				t.Errorf("Approve amendment %s: subject %q, renewal %v", tt.name, e.Notify[0].Subject, tt.renewal)
			}
		}
	}
	// The approved version never moves before the amend job succeeds.
	e, _ := Approve(testConn(StateUnderReview, AmendSubmitted), admin, okApproval(), okFacts(), cmdNow)
	if e.Approve != 0 || e.Next != StateUnderReview {
		t.Errorf("an approved amendment moved the approved version or the state: %s", showEffect(e))
	}
}

func TestRevokeEveryState(t *testing.T) {
	revocable := map[State]State{
		StateApproved: StateRevoking, StateProvisioning: StateRevoking, StateActive: StateRevoking, StateUnderReview: StateRevoking,
	}
	for _, s := range AllStates {
		for _, a := range amendmentsOf(s) {
			name := fmt.Sprintf("Revoke %s/%q", s, a)
			c := testConn(s, a)
			e, err := Revoke(c, admin, "  left the company ", cmdNow)
			next, ok := revocable[s]
			if !ok {
				expect(t, name, e, err, Effect{}, isTransition(s, EventRevoke))
				continue
			}
			want := Effect{By: admin, Next: next, Cancel: &JobCancel{Except: JobRevoke, Reason: "cancelled: the connection is being revoked"},
				Job:    &JobOrder{Kind: JobRevoke, Version: c.ApprovedVersion},
				Audit:  []AuditRecord{{Actor: admin, Action: "connection.revoke", Version: c.ApprovedVersion, Reason: "left the company"}},
				Notify: []Notice{{Kind: "connection.revoke", To: ToTeam}}}
			if a != AmendNone {
				// An open change ends with the connection.
				want.Amend = amendPtr(AmendNone)
			}
			expect(t, name, e, err, want, nil)
		}
	}
}

func TestRevokeInputs(t *testing.T) {
	for _, reason := range []string{"", "   ", "\t\n"} {
		for _, s := range AllStates {
			e, err := Revoke(testConn(s, AmendNone), admin, reason, cmdNow)
			expect(t, fmt.Sprintf("Revoke %s reason %q", s, reason), e, err, Effect{}, is(ErrReasonRequired))
		}
	}
	c := testConn(StateActive, AmendNone)
	c.ApprovedVersion = 0
	e, err := Revoke(c, admin, "why", cmdNow)
	expect(t, "Revoke without an approved version", e, err, Effect{}, isOther("has no approved version"))
	e, err = Revoke(testConn(StateActive, AmendNone), admin, "why", time.Time{})
	expect(t, "Revoke without a clock", e, err, Effect{}, is(ErrNoClock))
}

func TestQueueJobEveryState(t *testing.T) {
	// Per kind: the states it is queued in, and the event its refusal
	// names.
	queues := map[JobKind]struct {
		states  []State
		refusal Event
		action  string
	}{
		JobProvision: {[]State{StateApproved}, EventStartProvisioning, "provisioning.enqueue"},
		JobReapply:   {[]State{StateActive, StateUnderReview}, EventStartProvisioning, "reapply.enqueue"},
		JobRevoke:    {[]State{StateRevoking}, EventRevocationDone, "revocation.enqueue"},
		JobAmend:     {[]State{StateActive, StateUnderReview}, EventStartProvisioning, "amendment.enqueue"},
	}
	for _, kind := range []JobKind{JobProvision, JobReapply, JobRevoke, JobAmend} {
		q := queues[kind]
		for _, s := range AllStates {
			for _, a := range amendmentsOf(s) {
				name := fmt.Sprintf("QueueJob %s %s/%q", kind, s, a)
				c := testConn(s, a)
				e, err := QueueJob(c, admin, kind, "plan-3", "retry", cmdNow)
				allowed := false
				for _, x := range q.states {
					allowed = allowed || x == s
				}
				switch {
				case !allowed:
					expect(t, name, e, err, Effect{}, isTransition(s, q.refusal))
				case kind == JobAmend && a != AmendFailed:
					// Only a change whose job failed is tried again.
					expect(t, name, e, err, Effect{}, isAmendment(a, EventStartProvisioning))
				case kind == JobAmend:
					expect(t, name, e, err, Effect{By: admin, Next: s, Amend: amendPtr(AmendApproved),
						Job:   &JobOrder{Kind: JobAmend, Version: 3, PlanHash: "plan-3", FromVersion: 2},
						Audit: []AuditRecord{{Actor: admin, Action: q.action, Version: 3, Reason: "retry", JobRef: true}}}, nil)
				default:
					plan := ""
					if kind == JobProvision {
						plan = "plan-3"
					}
					expect(t, name, e, err, Effect{By: admin, Next: s,
						Job:   &JobOrder{Kind: kind, Version: c.ApprovedVersion, PlanHash: plan},
						Audit: []AuditRecord{{Actor: admin, Action: q.action, Version: c.ApprovedVersion, Reason: "retry", JobRef: true}}}, nil)
				}
			}
		}
	}
}

func TestQueueJobInputs(t *testing.T) {
	tests := []struct {
		name    string
		conn    Conn
		kind    JobKind
		pinned  string
		now     time.Time
		want    Effect
		wantErr *refusal
	}{
		{"provision unpinned", testConn(StateApproved, AmendNone), JobProvision, "", cmdNow, Effect{}, is(ErrUnpinned)},
		{"amend unpinned", testConn(StateActive, AmendFailed), JobAmend, "", cmdNow, Effect{}, is(ErrUnpinned)},
		// Reapply and revoke run the approved version's plan as it is
		// built now: no pin.
		{"reapply unpinned", testConn(StateActive, AmendNone), JobReapply, "", cmdNow, Effect{By: admin, Next: StateActive,
			Job:   &JobOrder{Kind: JobReapply, Version: 2},
			Audit: []AuditRecord{{Actor: admin, Action: "reapply.enqueue", Version: 2, Reason: "r", JobRef: true}}}, nil},
		{"reapply ignores a pin", testConn(StateUnderReview, AmendDraft), JobReapply, "plan-9", cmdNow, Effect{By: admin, Next: StateUnderReview,
			Job:   &JobOrder{Kind: JobReapply, Version: 2},
			Audit: []AuditRecord{{Actor: admin, Action: "reapply.enqueue", Version: 2, Reason: "r", JobRef: true}}}, nil},
		{"revoke unpinned", testConn(StateRevoking, AmendNone), JobRevoke, "", cmdNow, Effect{By: admin, Next: StateRevoking,
			Job:   &JobOrder{Kind: JobRevoke, Version: 3},
			Audit: []AuditRecord{{Actor: admin, Action: "revocation.enqueue", Version: 3, Reason: "r", JobRef: true}}}, nil},
		{"unknown kind", testConn(StateApproved, AmendNone), "bogus", "plan-3", cmdNow, Effect{}, isOther("are not queued by hand")},
		{"no clock", testConn(StateApproved, AmendNone), JobProvision, "plan-3", time.Time{}, Effect{}, is(ErrNoClock)},
	}
	for _, tt := range tests {
		e, err := QueueJob(tt.conn, admin, tt.kind, tt.pinned, "r", tt.now)
		expect(t, "QueueJob: "+tt.name, e, err, tt.want, tt.wantErr)
	}
}

// job is the run of a job of kind on version 3 (reapply: the approved
// version 2 of a live connection).
func job(kind JobKind) JobRun {
	j := JobRun{ID: 5, Kind: kind, Version: 3, Attempts: 2, Steps: 4, PlanHash: "plan-3"}
	if kind == JobReapply {
		j.Version = 2
	}
	return j
}

func TestJobStartedEveryState(t *testing.T) {
	type variant struct {
		name            string
		dryRun, resumed bool
	}
	variants := []variant{{"real", false, false}, {"dry run", true, false}, {"resumed", false, true}, {"resumed dry run", true, true}}
	for _, kind := range []JobKind{JobProvision, JobReapply, JobRevoke, JobAmend} {
		for _, v := range variants {
			for _, s := range AllStates {
				for _, a := range amendmentsOf(s) {
					name := fmt.Sprintf("JobStarted %s %s %s/%q", v.name, kind, s, a)
					j := job(kind)
					j.DryRun, j.Resumed = v.dryRun, v.resumed
					e, err := OnJobStarted(testConn(s, a), j, cmdNow)
					same := Effect{By: Provisioner, Next: s}
					started := func(action, reason string) Effect {
						if v.resumed {
							return same
						}
						return Effect{By: Provisioner, Next: s, Audit: []AuditRecord{{Actor: Provisioner, Action: action, Version: j.Version, Reason: reason}}}
					}
					switch kind {
					case JobProvision:
						switch {
						case s == StateApproved && !v.dryRun:
							// Also when resumed: an approved connection
							// was returned there by a failure.
							expect(t, name, e, err, Effect{By: Provisioner, Next: StateProvisioning,
								Audit: []AuditRecord{{Actor: Provisioner, Action: "provisioning.start", Version: 3, Reason: "job 5: 4 steps, plan plan-3"}}}, nil)
						case s == StateApproved, s == StateProvisioning:
							expect(t, name, e, err, same, nil)
						default:
							expect(t, name, e, err, Effect{}, isTransition(s, EventStartProvisioning))
						}
					case JobReapply:
						if s.Live() {
							expect(t, name, e, err, same, nil)
						} else {
							expect(t, name, e, err, Effect{}, isTransition(s, EventStartProvisioning))
						}
					case JobRevoke:
						switch {
						case s != StateRevoking:
							expect(t, name, e, err, Effect{}, isTransition(s, EventRevocationDone))
						case v.dryRun:
							expect(t, name, e, err, started("revocation.start", "job 5: 4 steps, dry run, removing nothing, plan plan-3"), nil)
						default:
							expect(t, name, e, err, started("revocation.start", "job 5: 4 steps, removing, plan plan-3"), nil)
						}
					case JobAmend:
						switch {
						case !s.Live():
							expect(t, name, e, err, Effect{}, isTransition(s, EventStartProvisioning))
						case a != AmendApproved:
							expect(t, name, e, err, Effect{}, isAmendment(a, EventStartProvisioning))
						case v.dryRun:
							expect(t, name, e, err, started("amendment.start", "job 5: 4 steps, dry run, applying nothing, plan plan-3"), nil)
						default:
							expect(t, name, e, err, started("amendment.start", "job 5: 4 steps, applying in place, plan plan-3"), nil)
						}
					}
				}
			}
		}
	}
	// An amend job of another version than the change's does not run.
	j := job(JobAmend)
	j.Version = 2
	e, err := OnJobStarted(testConn(StateActive, AmendApproved), j, cmdNow)
	expect(t, "JobStarted amend of another version", e, err, Effect{}, isAmendment(AmendApproved, EventStartProvisioning))
	e, err = OnJobStarted(testConn(StateApproved, AmendNone), job("bogus"), cmdNow)
	expect(t, "JobStarted bogus", e, err, Effect{}, isOther("jobs do not run on a connection"))
	e, err = OnJobStarted(testConn(StateApproved, AmendNone), job(JobProvision), time.Time{})
	expect(t, "JobStarted without a clock", e, err, Effect{}, is(ErrNoClock))
}

func TestJobSucceededEveryState(t *testing.T) {
	for _, s := range AllStates {
		for _, a := range amendmentsOf(s) {
			c := testConn(s, a)
			name := func(what string) string { return fmt.Sprintf("JobSucceeded %s %s/%q", what, s, a) }
			audited := func(next State, action string, version int, reason string, notify ...Notice) Effect {
				return Effect{By: Provisioner, Next: next,
					Audit:  []AuditRecord{{Actor: Provisioner, Action: action, Version: version, Reason: reason}},
					Notify: notify}
			}

			// A provisioning job: provisioning to active.
			e, err := OnJobSucceeded(c, job(JobProvision), false, cmdNow)
			if s == StateProvisioning {
				expect(t, name("provision"), e, err, audited(StateActive, "provisioning.succeeded", 3,
					"job 5, attempt 2: 4 steps applied, plan plan-3", Notice{Kind: "connection.active", To: ToTeam}), nil)
			} else {
				expect(t, name("provision"), e, err, Effect{}, isTransition(s, EventProvisioningSucceeded))
			}

			// A revocation: revoking to revoked; a dry run only when
			// nothing was ever applied.
			for _, ever := range []bool{false, true} {
				e, err := OnJobSucceeded(c, job(JobRevoke), ever, cmdNow)
				if s == StateRevoking {
					expect(t, name("revoke"), e, err, audited(StateRevoked, "revocation.done", 3,
						"job 5, attempt 2: 4 steps done, plan plan-3", Notice{Kind: "connection.revoked", To: ToTeam}), nil)
				} else {
					expect(t, name("revoke"), e, err, Effect{}, isTransition(s, EventRevocationDone))
				}
			}
			dry := job(JobRevoke)
			dry.DryRun = true
			e, err = OnJobSucceeded(c, dry, false, cmdNow)
			if s == StateRevoking {
				expect(t, name("dry-run revoke, never applied"), e, err, audited(StateRevoked, "revocation.dry_run", 3,
					"~nothing was ever applied to a cluster", Notice{Kind: "connection.revoked", To: ToTeam}), nil)
			} else {
				expect(t, name("dry-run revoke, never applied"), e, err, Effect{}, isTransition(s, EventRevocationDone))
			}

			// An amendment: the approved version moves when it is applied.
			e, err = OnJobSucceeded(c, job(JobAmend), false, cmdNow)
			if s.Live() && a == AmendApproved {
				want := audited(s, "amendment.applied", 3, "job 5, attempt 2: 4 steps applied, plan plan-3; version 3 is active",
					Notice{Kind: "amendment.applied", To: ToTeam})
				want.Amend, want.Approve = amendPtr(AmendNone), 3
				expect(t, name("amend"), e, err, want, nil)
			} else {
				expect(t, name("amend"), e, err, Effect{}, isAmendment(a, EventProvisioningSucceeded))
			}
			dryAmend := job(JobAmend)
			dryAmend.DryRun = true
			e, err = OnJobSucceeded(c, dryAmend, true, cmdNow)
			if s.Live() && a == AmendApproved {
				want := audited(s, "amendment.dry_run", 3, "~dry run, nothing applied")
				want.Amend = amendPtr(AmendFailed)
				expect(t, name("dry-run amend"), e, err, want, nil)
			} else {
				expect(t, name("dry-run amend"), e, err, Effect{}, isAmendment(a, EventProvisioningSucceeded))
			}

			// A drift fix on a live connection changes no state.
			if s.Live() {
				e, err = OnJobSucceeded(c, job(JobReapply), false, cmdNow)
				expect(t, name("reapply"), e, err, audited(s, "reapply.succeeded", 2,
					"job 5, attempt 2: 4 steps, plan plan-3 re-applied, extra role bindings removed"), nil)
			}
		}
	}
	// A dry run applied nothing: the connection stays approved, or goes
	// back there from provisioning.
	for s, next := range map[State]State{StateApproved: StateApproved, StateProvisioning: StateApproved} {
		j := job(JobProvision)
		j.DryRun = true
		e, err := OnJobSucceeded(testConn(s, AmendNone), j, false, cmdNow)
		expect(t, "JobSucceeded dry-run provision "+string(s), e, err, Effect{By: Provisioner, Next: next,
			Audit: []AuditRecord{{Actor: Provisioner, Action: "provisioning.dry_run", Version: 3, Reason: "~the connection stays approved"}}}, nil)
	}
	// A dry-run revocation of a connection once provisioned stays revoking.
	j := job(JobRevoke)
	j.DryRun = true
	e, err := OnJobSucceeded(testConn(StateRevoking, AmendNone), j, true, cmdNow)
	expect(t, "JobSucceeded dry-run revoke, once applied", e, err, Effect{By: Provisioner, Next: StateRevoking,
		Audit: []AuditRecord{{Actor: Provisioner, Action: "revocation.dry_run", Version: 3, Reason: "~it stays revoking"}}}, nil)
	e, err = OnJobSucceeded(testConn(StateProvisioning, AmendNone), job("bogus"), false, cmdNow)
	expect(t, "JobSucceeded bogus", e, err, Effect{}, isOther("jobs do not run on a connection"))
	e, err = OnJobSucceeded(testConn(StateProvisioning, AmendNone), job(JobProvision), false, time.Time{})
	expect(t, "JobSucceeded without a clock", e, err, Effect{}, is(ErrNoClock))
}

func TestJobFailedEveryState(t *testing.T) {
	// A failure returns a provisioning connection to approved (the
	// approval stands); it moves no other state.
	after := map[State]State{StateProvisioning: StateApproved}
	failed := func(s State, kind JobKind, action string) Effect {
		next, ok := after[s]
		if !ok {
			next = s
		}
		return Effect{By: Provisioner, Next: next,
			Audit:  []AuditRecord{{Actor: Provisioner, Action: action, Version: job(kind).Version, Reason: "job 5, attempt 2: boom"}},
			Notify: []Notice{{Kind: action, To: ToAdmins}}}
	}
	for _, s := range AllStates {
		e, err := OnJobFailed(testConn(s, AmendNone), job(JobProvision), "boom", cmdNow)
		expect(t, "JobFailed provision "+string(s), e, err, failed(s, JobProvision, "provisioning.failed"), nil)
	}
	e, err := OnJobFailed(testConn(StateRevoking, AmendNone), job(JobRevoke), "boom", cmdNow)
	expect(t, "JobFailed revoke", e, err, failed(StateRevoking, JobRevoke, "revocation.failed"), nil)
	for _, s := range []State{StateActive, StateUnderReview} {
		for _, a := range AllAmendments {
			e, err := OnJobFailed(testConn(s, a), job(JobReapply), "boom", cmdNow)
			expect(t, fmt.Sprintf("JobFailed reapply %s/%q", s, a), e, err, failed(s, JobReapply, "reapply.failed"), nil)
			e, err = OnJobFailed(testConn(s, a), job(JobAmend), "boom", cmdNow)
			want := failed(s, JobAmend, "amendment.failed")
			if a == AmendApproved {
				// The approved version still runs; an admin may try again.
				want.Amend = amendPtr(AmendFailed)
			}
			expect(t, fmt.Sprintf("JobFailed amend %s/%q", s, a), e, err, want, nil)
		}
	}
	e, err = OnJobFailed(testConn(StateProvisioning, AmendNone), job(JobProvision), "boom", time.Time{})
	expect(t, "JobFailed without a clock", e, err, Effect{}, is(ErrNoClock))
}

// TestRefusalsRecordNothing is the property every command keeps: over every
// state, amendment (even ones a connection in that state cannot have),
// actor and a grid of inputs, a refusal is the zero Effect (nothing to
// record), and an effect that records anything audits it.
func TestRefusalsRecordNothing(t *testing.T) {
	type outcome struct {
		name string
		from State
		e    Effect
		err  error
	}
	var outs []outcome
	var from State
	add := func(name string, e Effect, err error) { outs = append(outs, outcome{name, from, e, err}) }
	otherTeam := editedContract()
	otherTeam.Team = "blue"
	clocks := []time.Time{cmdNow, {}}
	actors := []Actor{requester, submitter, admin, Provisioner}
	kinds := []JobKind{JobProvision, JobReapply, JobRevoke, JobAmend, "bogus"}
	approvals := []func(*ApprovalInput, *ApprovalFacts){
		func(*ApprovalInput, *ApprovalFacts) {},
		func(in *ApprovalInput, _ *ApprovalFacts) { in.Version = 0 },
		func(in *ApprovalInput, _ *ApprovalFacts) { in.PlanHash = "" },
		func(in *ApprovalInput, _ *ApprovalFacts) { in.Hash = "stale" },
		func(_ *ApprovalInput, f *ApprovalFacts) { f.ApproverIDs = []int64{admin.ID, admin2.ID} },
		func(_ *ApprovalInput, f *ApprovalFacts) { f.Contract.DataClassification = DataRestricted },
		func(_ *ApprovalInput, f *ApprovalFacts) { f.Contract.Orchestrator = OrchestratorSlurm },
		func(_ *ApprovalInput, f *ApprovalFacts) { f.PlanError = errors.New("no plan") },
		func(_ *ApprovalInput, f *ApprovalFacts) { f.Contract.Namespaces = []string{"elsewhere"} },
		func(_ *ApprovalInput, f *ApprovalFacts) { f.ForeignNamespace = "hyperpod-ns-red" },
		func(in *ApprovalInput, f *ApprovalFacts) {
			in.Adopt, f.ForeignNamespace = "hyperpod-ns-red", "hyperpod-ns-red"
		},
		func(in *ApprovalInput, _ *ApprovalFacts) { in.Adopt = "hyperpod-ns-blue" },
		func(_ *ApprovalInput, f *ApprovalFacts) { f.Committed = []Capacity{{InstanceType: p5, Count: 99}} },
		func(_ *ApprovalInput, f *ApprovalFacts) {
			f.Contract.Scheduling.Guaranteed = []Capacity{{InstanceType: p5, Count: 9}}
		},
		func(_ *ApprovalInput, f *ApprovalFacts) { f.ChecksDown = errors.New("down") },
		func(_ *ApprovalInput, f *ApprovalFacts) { f.Claims = []string{"taken"} },
	}
	contracts := []Contract{currentContract(), editedContract(), approvedContract(), otherTeam}
	for _, s := range append(slices.Clone(AllStates), "archived") {
		for _, a := range append(slices.Clone(AllAmendments), "archived") {
			for _, capped := range []bool{false, true} {
				c := testConn(s, a)
				from = s
				if capped {
					c.CurrentVersion = MaxVersions
				}
				for _, now := range clocks {
					for _, by := range actors {
						n := fmt.Sprintf("%s/%q capped=%v clock=%v by %d", s, a, capped, !now.IsZero(), by.ID)
						for _, base := range []int{c.CurrentVersion - 1, c.CurrentVersion} {
							for _, k := range contracts {
								e, err := Edit(c, by, base, k, now)
								add("Edit "+n, e, err)
							}
						}
						for _, pin := range []Pin{{}, {c.CurrentVersion, c.CurrentHash}, {c.CurrentVersion - 1, ""}, {c.CurrentVersion, "stale"}} {
							e, err := Submit(c, by, pin, now)
							add("Submit "+n, e, err)
							for _, ev := range []Event{EventReject, EventRequestChanges, EventApprove} {
								e, err := SendBack(c, by, ev, pin, "why", now)
								add("SendBack "+n, e, err)
							}
						}
						for _, reason := range []string{"", " ", "why"} {
							e, err := Withdraw(c, by, reason, now)
							add("Withdraw "+n, e, err)
							e, err = Revoke(c, by, reason, now)
							add("Revoke "+n, e, err)
							unapproved := c
							unapproved.ApprovedVersion = 0
							e, err = Revoke(unapproved, by, reason, now)
							add("Revoke unapproved "+n, e, err)
						}
						for i, change := range approvals {
							in, f := okApproval(), okFacts()
							in.Version, in.Hash = c.CurrentVersion, c.CurrentHash
							change(&in, &f)
							e, err := Approve(c, by, in, f, now)
							add(fmt.Sprintf("Approve #%d %s", i, n), e, err)
						}
						for _, kind := range kinds {
							for _, pinned := range []string{"", "plan-3"} {
								e, err := QueueJob(c, by, kind, pinned, "r", now)
								add(fmt.Sprintf("QueueJob %s %s", kind, n), e, err)
							}
						}
					}
					for _, kind := range kinds {
						for _, dry := range []bool{false, true} {
							for _, resumed := range []bool{false, true} {
								for _, version := range []int{2, 3} {
									j := job(kind)
									j.DryRun, j.Resumed, j.Version = dry, resumed, version
									n := fmt.Sprintf("%s %+v on %s/%q clock=%v", kind, j, s, a, !now.IsZero())
									e, err := OnJobStarted(c, j, now)
									add("JobStarted "+n, e, err)
									for _, ever := range []bool{false, true} {
										e, err := OnJobSucceeded(c, j, ever, now)
										add("JobSucceeded "+n, e, err)
									}
									e, err = OnJobFailed(c, j, "boom", now)
									add("JobFailed "+n, e, err)
								}
							}
						}
					}
				}
			}
		}
	}
	refused := map[string]int{}
	for _, o := range outs {
		cmd, _, _ := strings.Cut(o.name, " ")
		if o.err != nil {
			refused[cmd]++
			if !reflect.DeepEqual(o.e, Effect{}) {
				t.Errorf("%s: refused (%v), yet the effect is %s", o.name, o.err, showEffect(o.e))
			}
			continue
		}
		if o.e.By == (Actor{}) {
			t.Errorf("%s: the effect names nobody: %s", o.name, showEffect(o.e))
		}
		if o.e.Amend != nil && !o.e.Amend.Valid() {
			t.Errorf("%s: the effect moves the amendment to %q", o.name, *o.e.Amend)
		}
		if (o.e.Writes(o.from) || o.e.Job != nil || o.e.Decision != nil || o.e.Cancel != nil) && len(o.e.Audit) == 0 {
			t.Errorf("%s: the effect records without an audit event: %s", o.name, showEffect(o.e))
		}
	}
	// The grid does reach every command's refusals.
	for _, cmd := range []string{"Edit", "Submit", "SendBack", "Withdraw", "Revoke", "Approve", "QueueJob", "JobStarted", "JobSucceeded", "JobFailed"} {
		if refused[cmd] == 0 {
			t.Errorf("no refusal of %s was tried", cmd)
		}
	}
}

// TestRefusalOrder: which refusal a command gives when several apply is a
// rule too. What the person acted on is checked first (the pin, whether
// an approval names one), then the state, then who acts.
func TestRefusalOrder(t *testing.T) {
	h := currentHash
	tests := []struct {
		name    string
		run     func() (Effect, error)
		wantErr *refusal
	}{
		{"Approve naming nothing, on a revoked connection", func() (Effect, error) {
			return Approve(testConn(StateRevoked, AmendNone), requester, ApprovalInput{}, okFacts(), cmdNow)
		}, is(ErrUnpinned)},
		{"Approve of a stale version, on a draft, by the requester", func() (Effect, error) {
			return Approve(testConn(StateDraft, AmendNone), requester, ApprovalInput{Version: 2, Hash: h, PlanHash: "p"}, okFacts(), cmdNow)
		}, isStale()},
		{"Approve by the requester of a draft", func() (Effect, error) {
			return Approve(testConn(StateDraft, AmendNone), requester, okApproval(), okFacts(), cmdNow)
		}, isTransition(StateDraft, EventApprove)},
		{"Approve by the requester, already approved by them, over capacity", func() (Effect, error) {
			f := okFacts()
			f.ApproverIDs, f.Committed = []int64{requester.ID}, []Capacity{{InstanceType: p5, Count: 99}}
			return Approve(testConn(StateSubmitted, AmendNone), requester, okApproval(), f, cmdNow)
		}, is(ErrNotIndependent)},
		{"Approve again by the same admin of a Slurm version", func() (Effect, error) {
			f := okFacts()
			f.ApproverIDs, f.Contract.Orchestrator = []int64{admin.ID}, OrchestratorSlurm
			return Approve(testConn(StateSubmitted, AmendNone), admin, okApproval(), f, cmdNow)
		}, is(ErrAlreadyDecided)},
		{"Approve over capacity with checks down and claims taken", func() (Effect, error) {
			f := okFacts()
			f.Committed, f.ChecksDown, f.Claims = []Capacity{{InstanceType: p5, Count: 99}}, errors.New("down"), []string{"taken"}
			return Approve(testConn(StateSubmitted, AmendNone), admin, okApproval(), f, cmdNow)
		}, is(ErrOverCapacity)},
		{"Approve with checks down and claims taken", func() (Effect, error) {
			f := okFacts()
			f.ChecksDown, f.Claims = errors.New("down"), []string{"taken"}
			return Approve(testConn(StateSubmitted, AmendNone), admin, okApproval(), f, cmdNow)
		}, is(ErrChecksDown)},
		{"SendBack of a stale version of a draft by the requester", func() (Effect, error) {
			return SendBack(testConn(StateDraft, AmendNone), requester, EventReject, Pin{2, h}, "no", cmdNow)
		}, isStale()},
		{"Submit of a stale version of a revoked connection", func() (Effect, error) {
			return Submit(testConn(StateRevoked, AmendNone), requester, Pin{2, h}, cmdNow)
		}, isStale()},
		{"Revoke of a draft without a reason", func() (Effect, error) {
			return Revoke(testConn(StateDraft, AmendNone), admin, "", cmdNow)
		}, is(ErrReasonRequired)},
		{"QueueJob provision, unpinned, of a draft", func() (Effect, error) {
			return QueueJob(testConn(StateDraft, AmendNone), admin, JobProvision, "", "r", cmdNow)
		}, isTransition(StateDraft, EventStartProvisioning)},
		{"QueueJob amend, unpinned, of a change in review", func() (Effect, error) {
			return QueueJob(testConn(StateActive, AmendSubmitted), admin, JobAmend, "", "r", cmdNow)
		}, is(ErrUnpinned)},
		{"Edit of a stale version to another team", func() (Effect, error) {
			return Edit(testConn(StateDraft, AmendNone), editor, 2, func() Contract { c := editedContract(); c.Team = "blue"; return c }(), cmdNow)
		}, isStale()},
		{"Edit to another team of a submitted request", func() (Effect, error) {
			return Edit(testConn(StateSubmitted, AmendNone), editor, 3, func() Contract { c := editedContract(); c.Team = "blue"; return c }(), cmdNow)
		}, is(ErrTeamChanged)},
	}
	for _, tt := range tests {
		e, err := tt.run()
		expect(t, tt.name, e, err, Effect{}, tt.wantErr)
	}
}

// Issue 32 item 8: an approval that finds its version approved already (a
// concurrent approval committed first) is told by whom and when, not that
// an approved connection cannot be approved; a version still waiting for
// a second admin keeps the rule's refusal.
func TestApproveAfterAWonRace(t *testing.T) {
	won := ApprovalMark{By: "admin2@example.test", At: cmdNow.Add(-time.Second)}
	f := okFacts()
	f.ApproverIDs, f.LastApproval = []int64{admin2.ID}, won
	for _, st := range []State{StateApproved, StateProvisioning, StateActive} {
		_, err := Approve(testConn(st, AmendNone), admin, okApproval(), f, cmdNow)
		var already *AlreadyApprovedError
		if !errors.As(err, &already) || already.Last != won || already.Version != 3 {
			t.Errorf("%s: error = %v, want AlreadyApprovedError by %s", st, err, won.By)
		}
	}
	f.Contract.DataClassification = DataRestricted
	if _, err := Approve(testConn(StateSubmitted, AmendNone), admin2, okApproval(), f, cmdNow); !errors.Is(err, ErrAlreadyDecided) {
		t.Errorf("restricted, the same admin again: %v, want ErrAlreadyDecided", err)
	}
}
