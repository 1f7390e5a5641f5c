package workflow

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNextReviewDue(t *testing.T) {
	from := time.Date(2026, 3, 10, 22, 30, 0, 0, time.UTC)
	tests := []struct {
		name    string
		cadence int
		end     string
		want    string
	}{
		{"default cadence of 90 days", 0, "", "2026-06-08"},
		{"contract cadence", 30, "", "2026-04-09"},
		{"end date far away", 30, "2027-01-01", "2026-04-09"},
		{"end date first: 14 days before it", 90, "2026-05-01", "2026-04-17"},
		{"end date within the lead: due today", 90, "2026-03-15", "2026-03-10"},
		{"end date passed: due today", 90, "2026-01-01", "2026-03-10"},
		{"unparsable end date is ignored", 30, "soon", "2026-04-09"},
	}
	for _, tt := range tests {
		if got := NextReviewDue(from, tt.cadence, tt.end); got != tt.want {
			t.Errorf("%s: NextReviewDue(%s, %d, %q) = %s, want %s", tt.name, from, tt.cadence, tt.end, got, tt.want)
		}
	}
	// The day is UTC's: 23:30 at UTC-5 is already the next day in UTC.
	est := time.FixedZone("EST", -5*3600)
	if got := NextReviewDue(time.Date(2026, 3, 10, 23, 30, 0, 0, est), 1, ""); got != "2026-03-12" {
		t.Errorf("NextReviewDue in EST = %s, want 2026-03-12 (counted from the UTC day)", got)
	}
}

func TestDaysOverdue(t *testing.T) {
	now := time.Date(2026, 3, 10, 1, 0, 0, 0, time.UTC)
	for due, want := range map[string]int{"2026-03-10": 0, "2026-03-11": 0, "2026-03-09": 1, "2026-02-08": 30, "": 0, "bad": 0} {
		if got := DaysOverdue(due, now); got != want {
			t.Errorf("DaysOverdue(%q) = %d, want %d", due, got, want)
		}
	}
}

func liveConn(st State) Conn {
	return Conn{ID: 7, Team: "red", State: st, CurrentVersion: 2, ApprovedVersion: 2, RequesterID: 1, EditorIDs: []int64{1}, SubmitterIDs: []int64{1}}
}

func TestOpenReview(t *testing.T) {
	now := time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC)
	e, err := OpenReview(liveConn(StateActive), OpenReviewInput{Trigger: TriggerScheduled, DueOn: "2026-03-01", Evidence: []byte(`{}`)}, now)
	if err != nil {
		t.Fatal(err)
	}
	if e.Next != StateUnderReview || e.OpenReview == nil || e.OpenReview.DueOn != "2026-03-01" || e.OpenReview.Detail != TriggerScheduled.Label() {
		t.Errorf("effect = %+v, want under review with the review's row", e)
	}
	if len(e.Audit) != 1 || e.Audit[0].Action != "review.open" || e.Audit[0].Version != 2 {
		t.Errorf("audit = %+v", e.Audit)
	}
	var toReviewers, toTeam bool
	for _, n := range e.Notify {
		toReviewers = toReviewers || n.To == ToReviewers
		toTeam = toTeam || n.To == ToTeam
	}
	if !toReviewers || !toTeam {
		t.Errorf("notices = %+v, want reviewers and the team's owners told", e.Notify)
	}
	// An event review is due the day it opens.
	e, err = OpenReview(liveConn(StateActive), OpenReviewInput{Trigger: TriggerOwnerLeft, Detail: "bob left"}, now)
	if err != nil || e.OpenReview.DueOn != "2026-03-10" {
		t.Errorf("event review: %+v, %v; want due 2026-03-10", e.OpenReview, err)
	}
	for _, tt := range []struct {
		st      State
		trigger ReviewTrigger
		want    error
	}{
		{StateUnderReview, TriggerScheduled, ErrReviewOpen},
		{StateActive, "whim", ErrReviewTrigger},
	} {
		if _, err := OpenReview(liveConn(tt.st), OpenReviewInput{Trigger: tt.trigger}, now); !errors.Is(err, tt.want) {
			t.Errorf("OpenReview(%s, %s) = %v, want %v", tt.st, tt.trigger, err, tt.want)
		}
	}
	for _, st := range []State{StateDraft, StateSubmitted, StateApproved, StateProvisioning, StateRevoking, StateRevoked} {
		var te *TransitionError
		if _, err := OpenReview(liveConn(st), OpenReviewInput{Trigger: TriggerScheduled}, now); !errors.As(err, &te) {
			t.Errorf("OpenReview(%s) = %v, want a TransitionError: only an active connection is reviewed", st, err)
		}
	}
	if _, err := OpenReview(liveConn(StateActive), OpenReviewInput{Trigger: TriggerScheduled}, time.Time{}); !errors.Is(err, ErrNoClock) {
		t.Errorf("no clock: %v", err)
	}
}

func TestDecideReview(t *testing.T) {
	now := time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC)
	reviewer := Actor{ID: 5, Email: "rex@example.com"}
	approved := Contract{ReviewCadenceDays: 30}
	tests := []struct {
		name      string
		in        DecideReviewInput
		by        Actor
		wantNext  State
		wantDue   string
		wantErr   error
		wantAdmin bool
	}{
		{"renew", DecideReviewInput{Decision: ReviewRenew, Reason: "in use"}, reviewer, StateActive, "2026-04-09", nil, false},
		{"request changes", DecideReviewInput{Decision: ReviewRequestChanges, Reason: "owner left", Deadline: "2026-03-24"}, reviewer, StateActive, "2026-03-24", nil, false},
		{"hold", DecideReviewInput{Decision: ReviewHold, Reason: "idle for 90 days"}, reviewer, StateActive, "2026-04-09", nil, true},
		{"recommend revocation", DecideReviewInput{Decision: ReviewRecommendRevocation, Reason: "project ended"}, reviewer, StateUnderReview, "", nil, true},
		{"reason required", DecideReviewInput{Decision: ReviewRenew, Reason: "  "}, reviewer, "", "", ErrReviewReason, false},
		{"deadline required", DecideReviewInput{Decision: ReviewRequestChanges, Reason: "x"}, reviewer, "", "", ErrReviewDeadline, false},
		{"deadline after today", DecideReviewInput{Decision: ReviewRequestChanges, Reason: "x", Deadline: "2026-03-10"}, reviewer, "", "", ErrReviewDeadline, false},
		{"unknown decision", DecideReviewInput{Decision: "shrug", Reason: "x"}, reviewer, "", "", ErrReviewDecision, false},
		{"the requester never reviews", DecideReviewInput{Decision: ReviewRenew, Reason: "mine"}, Actor{ID: 1}, "", "", ErrNotIndependent, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.ReviewID, tt.in.Approved = 3, approved
			e, err := DecideReview(liveConn(StateUnderReview), tt.by, tt.in, now)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if e.Next != tt.wantNext || e.ReviewDue != tt.wantDue {
				t.Errorf("next %s due %q, want %s %q", e.Next, e.ReviewDue, tt.wantNext, tt.wantDue)
			}
			if e.CloseReview == nil || e.CloseReview.ReviewID != 3 || e.CloseReview.Decision != tt.in.Decision {
				t.Errorf("close = %+v", e.CloseReview)
			}
			if len(e.Audit) == 0 || e.Audit[0].Action != "review."+string(tt.in.Decision) || !strings.Contains(e.Audit[0].Reason, strings.TrimSpace(tt.in.Reason)) {
				t.Errorf("audit = %+v", e.Audit)
			}
			admins := false
			for _, n := range e.Notify {
				admins = admins || n.To == ToAdmins
			}
			if admins != tt.wantAdmin {
				t.Errorf("admins told = %v, want %v (%+v)", admins, tt.wantAdmin, e.Notify)
			}
		})
	}
	// A hold decision proposes the hold (an admin confirms it); a hold
	// already proposed or in force stands.
	e, err := DecideReview(liveConn(StateUnderReview), reviewer, DecideReviewInput{ReviewID: 3, Decision: ReviewHold, Reason: "idle"}, now)
	if err != nil || e.Hold == nil || e.Hold.State != HoldProposed || len(e.Audit) != 2 || e.Audit[1].Action != "hold.propose" {
		t.Errorf("hold decision = %+v, %v; want a hold proposed and audited", e, err)
	}
	held := liveConn(StateUnderReview)
	held.Hold = HoldOn
	if e, err := DecideReview(held, reviewer, DecideReviewInput{ReviewID: 3, Decision: ReviewHold, Reason: "still idle"}, now); err != nil || e.Hold != nil {
		t.Errorf("hold decision on a held connection = %+v, %v; want the hold left as it is", e.Hold, err)
	}
	var te *TransitionError
	if _, err := DecideReview(liveConn(StateActive), reviewer, DecideReviewInput{Decision: ReviewRenew, Reason: "x"}, now); !errors.As(err, &te) {
		t.Errorf("renew of an active connection (no review open): %v, want a TransitionError", err)
	}
	if _, err := DecideReview(liveConn(StateActive), reviewer, DecideReviewInput{Decision: ReviewRecommendRevocation, Reason: "x"}, now); !errors.As(err, &te) {
		t.Errorf("recommendation on an active connection: %v, want a TransitionError", err)
	}
}

// A reviewer who belongs to the team does not review its connections; an
// independent reviewer does.
func TestReviewPolicyTeamMembers(t *testing.T) {
	o := Object{Team: "red", State: StateUnderReview, RequesterID: 1, EditorIDs: []int64{1}, SubmitterIDs: []int64{1}}
	for _, tc := range []struct {
		p    Principal
		want bool
	}{
		{NewPrincipal(9, "s9", "", "Rae", []Role{RoleReviewer}, []Membership{{"red", TeamOwner}}), false},
		{NewPrincipal(10, "s10", "", "Ray", []Role{RoleReviewer, RoleAdmin}, []Membership{{"red", TeamMember}}), false},
		{NewPrincipal(11, "s11", "", "Rob", []Role{RoleReviewer}, []Membership{{"blue", TeamOwner}}), true},
	} {
		d := Decide(tc.p, ActionReview, o)
		if d.Allowed != tc.want {
			t.Errorf("%s: %+v, want allowed=%v", tc.p.DisplayName(), d, tc.want)
		}
		if !tc.want && !strings.Contains(d.Reason, "nobody reviews their own team's connection") {
			t.Errorf("%s: reason %q", tc.p.DisplayName(), d.Reason)
		}
	}
}

// Declining a recommendation of revocation returns the connection to
// active with its next review due a cadence later; it needs a reason, a
// recommendation waiting, and an admin independent of the request.
func TestDeclineRevocation(t *testing.T) {
	now := time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC)
	admin := Actor{ID: 4, Email: "ada@example.test"}
	in := DeclineRevocationInput{Reason: "still needed for the spring run", Recommended: true, Approved: Contract{ReviewCadenceDays: 30}}
	e, err := DeclineRevocation(liveConn(StateUnderReview), admin, in, now)
	if err != nil {
		t.Fatal(err)
	}
	if e.Next != StateActive || e.ReviewDue != "2026-04-09" {
		t.Errorf("effect: %s due %q, want active due 2026-04-09", e.Next, e.ReviewDue)
	}
	if len(e.Audit) != 1 || e.Audit[0].Action != "review.decline_revocation" || e.Audit[0].Reason != in.Reason {
		t.Errorf("audit = %+v", e.Audit)
	}
	var toReviewers bool
	for _, n := range e.Notify {
		toReviewers = toReviewers || n.To == ToReviewers
	}
	if !toReviewers {
		t.Errorf("notices = %+v, want the reviewers told", e.Notify)
	}
	for name, tc := range map[string]struct {
		s    Conn
		by   Actor
		in   DeclineRevocationInput
		want error
	}{
		"no reason":           {liveConn(StateUnderReview), admin, DeclineRevocationInput{Reason: "  ", Recommended: true}, ErrReviewReason},
		"nothing recommended": {liveConn(StateUnderReview), admin, DeclineRevocationInput{Reason: "x"}, ErrNoRecommendation},
		"active":              {liveConn(StateActive), admin, DeclineRevocationInput{Reason: "x", Recommended: true}, ErrNoRecommendation},
		"the requester":       {liveConn(StateUnderReview), Actor{ID: 1}, DeclineRevocationInput{Reason: "x", Recommended: true}, ErrNotIndependent},
	} {
		if _, err := DeclineRevocation(tc.s, tc.by, tc.in, now); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
}
