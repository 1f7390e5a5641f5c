package workflow

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The commands the store used to compose itself (issue 33): the review
// date a job's success sets, the scheduler's review date, a review event
// and the end-date step. Each is tested here, without a database.

// TestOnJobCompleted: the success of a job sets the next review date when
// the connection becomes active or an applied change moves its cadence or
// end date, reading only the versions it needs, and only then.
func TestOnJobCompleted(t *testing.T) {
	now := time.Date(2026, 5, 10, 9, 0, 0, 0, time.UTC)
	c := ExampleContract()
	shorter := c
	shorter.ReviewCadenceDays = 30
	owner := c
	owner.BusinessOwner = "someone@example.test"
	for _, tc := range []struct {
		name     string
		s        Conn
		j        JobRun
		versions map[int]Contract
		want     string // ReviewDue
		reads    []int  // the versions read, in order
	}{
		{"provisioning succeeded", Conn{ID: 1, State: StateProvisioning, CurrentVersion: 1},
			JobRun{ID: 9, Kind: JobProvision, Version: 1, Steps: 3}, map[int]Contract{1: c}, NextReviewDue(now, c.ReviewCadenceDays, c.EndDate), []int{1}},
		{"a dry run stays approved and reads nothing", Conn{ID: 1, State: StateApproved, CurrentVersion: 1},
			JobRun{ID: 9, Kind: JobProvision, Version: 1, Steps: 3, DryRun: true}, nil, "", nil},
		{"a reapply reads nothing", Conn{ID: 1, State: StateActive, CurrentVersion: 1, ApprovedVersion: 1},
			JobRun{ID: 9, Kind: JobReapply, Version: 1, Steps: 3}, nil, "", nil},
		{"an applied change of cadence", Conn{ID: 1, State: StateActive, CurrentVersion: 2, ApprovedVersion: 1, Amendment: AmendApproved},
			JobRun{ID: 9, Kind: JobAmend, Version: 2, Steps: 3}, map[int]Contract{1: c, 2: shorter}, "2026-06-09", []int{2, 1}},
		{"an applied change of owner only", Conn{ID: 1, State: StateActive, CurrentVersion: 2, ApprovedVersion: 1, Amendment: AmendApproved},
			JobRun{ID: 9, Kind: JobAmend, Version: 2, Steps: 3}, map[int]Contract{1: c, 2: owner}, "", []int{2, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var reads []int
			version := func(v int) (Contract, error) {
				reads = append(reads, v)
				got, ok := tc.versions[v]
				if !ok {
					return Contract{}, fmt.Errorf("no version %d", v)
				}
				return got, nil
			}
			e, err := OnJobCompleted(tc.s, tc.j, false, now, version)
			if err != nil {
				t.Fatalf("OnJobCompleted = %v", err)
			}
			if e.ReviewDue != tc.want {
				t.Errorf("ReviewDue = %q, want %q", e.ReviewDue, tc.want)
			}
			if fmt.Sprint(reads) != fmt.Sprint(tc.reads) {
				t.Errorf("versions read = %v, want %v", reads, tc.reads)
			}
			// The rest of the effect is OnJobSucceeded's.
			plain, err := OnJobSucceeded(tc.s, tc.j, false, now)
			if err != nil {
				t.Fatal(err)
			}
			plain.ReviewDue = e.ReviewDue
			if !reflect.DeepEqual(plain, e) {
				t.Errorf("effect = %+v, want OnJobSucceeded's %+v", e, plain)
			}
		})
	}
	// A version that cannot be read fails the command.
	boom := errors.New("boom")
	if _, err := OnJobCompleted(Conn{ID: 1, State: StateProvisioning, CurrentVersion: 1}, JobRun{ID: 9, Kind: JobProvision, Version: 1, Steps: 3}, false, now,
		func(int) (Contract, error) { return Contract{}, boom }); !errors.Is(err, boom) {
		t.Errorf("OnJobCompleted with an unreadable version = %v, want %v", err, boom)
	}
}

// TestScheduleMissingReview: only a live connection without a date gets
// one; the others get an effect that records nothing.
func TestScheduleMissingReview(t *testing.T) {
	now := time.Date(2026, 5, 10, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		s    Conn
		set  bool
	}{
		{"live without a date", Conn{ID: 1, State: StateActive, ApprovedVersion: 1}, true},
		{"under review without a date", Conn{ID: 1, State: StateUnderReview, ApprovedVersion: 1}, true},
		{"a date set meanwhile", Conn{ID: 1, State: StateActive, ApprovedVersion: 1, ReviewDue: "2026-06-01"}, false},
		{"no longer live", Conn{ID: 1, State: StateRevoking, ApprovedVersion: 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, set, err := ScheduleMissingReview(tc.s, "2026-08-01", "from its activation", now)
			if err != nil || set != tc.set {
				t.Fatalf("ScheduleMissingReview = set %v, %v; want set %v", set, err, tc.set)
			}
			if tc.set {
				if e.ReviewDue != "2026-08-01" || len(e.Audit) != 1 || e.Audit[0].Action != "review.scheduled" {
					t.Errorf("effect = %+v, want the date and its audit event", e)
				}
				return
			}
			if !e.AuditOnly(tc.s.State) || len(e.Audit) != 0 {
				t.Errorf("effect = %+v, want one that records nothing", e)
			}
		})
	}
}

// TestOnReviewEvent: an event opens a review on an active connection, adds
// its trigger to the open review of one under review, and moves the
// orphan flag of a live one, in one effect; nothing on the others.
func TestOnReviewEvent(t *testing.T) {
	now := time.Date(2026, 5, 10, 9, 0, 0, 0, time.UTC)
	orphan, cleared := OrphanNoOwner, ""
	open := ReviewEventInput{Open: true, Trigger: TriggerOwnerLeft, Detail: "bob left\nred-owners"}
	withOrphan := func(in ReviewEventInput, why *string) ReviewEventInput { in.Orphan = why; return in }
	withOpen := func(in ReviewEventInput) ReviewEventInput { in.ReviewOpen = true; return in }
	under := liveConn(StateUnderReview)
	flagged := liveConn(StateActive)
	flagged.Orphan = OrphanNoOwner
	for _, tc := range []struct {
		name    string
		s       Conn
		in      ReviewEventInput
		opens   bool
		note    string // the line added to the open review
		orphan  *string
		actions string // the audit events, in order
	}{
		{"active: opens", liveConn(StateActive), open, true, "", nil, "review.open"},
		{"active: opens and flags", liveConn(StateActive), withOrphan(open, &orphan), true, "", &orphan, "review.open orphan.flagged"},
		{"under review: adds the trigger", under, withOpen(open), false, "2026-05-10 owner_left: bob left red-owners", nil, "review.trigger"},
		{"under review: adds and flags", under, withOpen(withOrphan(open, &orphan)), false, "2026-05-10 owner_left: bob left red-owners", &orphan, "review.trigger orphan.flagged"},
		{"under review without an open review: nothing", under, open, false, "", nil, ""},
		{"flag only", liveConn(StateActive), ReviewEventInput{Orphan: &orphan}, false, "", &orphan, "orphan.flagged"},
		{"clear only", flagged, ReviewEventInput{Orphan: &cleared}, false, "", &cleared, "orphan.cleared"},
		{"the flag as it is: nothing", flagged, ReviewEventInput{Orphan: &orphan}, false, "", nil, ""},
		{"not approved: no review", Conn{ID: 7, Team: "red", State: StateActive}, open, false, "", nil, ""},
		{"revoking: nothing", liveConn(StateRevoking), withOpen(withOrphan(open, &orphan)), false, "", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := OnReviewEvent(tc.s, tc.in, now)
			if err != nil {
				t.Fatalf("OnReviewEvent = %v", err)
			}
			if (e.OpenReview != nil) != tc.opens {
				t.Errorf("OpenReview = %+v, want opened %v", e.OpenReview, tc.opens)
			}
			note := ""
			if e.NoteReview != nil {
				note = e.NoteReview.Line
			}
			if note != tc.note {
				t.Errorf("NoteReview = %q, want %q", note, tc.note)
			}
			if (e.Orphan == nil) != (tc.orphan == nil) || e.Orphan != nil && *e.Orphan != *tc.orphan {
				t.Errorf("Orphan = %v, want %v", e.Orphan, tc.orphan)
			}
			if got := auditActions(e); got != tc.actions {
				t.Errorf("audit = %q, want %q", got, tc.actions)
			}
			if tc.actions == "" && !e.AuditOnly(tc.s.State) {
				t.Errorf("effect = %+v, want one that records nothing", e)
			}
		})
	}
	if _, err := OnReviewEvent(under, withOpen(ReviewEventInput{Open: true, Trigger: "gossip"}), now); !errors.Is(err, ErrReviewTrigger) {
		t.Errorf("OnReviewEvent with an unknown trigger = %v, want ErrReviewTrigger", err)
	}
}

// TestEndDateReached: a notice before the end date, a proposed hold after
// it, each once; nothing on a connection already held or proposed, or no
// longer live.
func TestEndDateReached(t *testing.T) {
	for _, tc := range []struct {
		name    string
		s       Conn
		in      EndDateInput
		acted   bool
		actions string
	}{
		{"14 days ahead: notice", heldConn(StateActive, HoldNone), EndDateInput{End: "2026-12-15", Stage: EndDateNotice14, Left: 14}, true, "end_date.notice"},
		{"3 days ahead under review: notice", heldConn(StateUnderReview, HoldNone), EndDateInput{End: "2026-12-04", Stage: EndDateNotice3, Left: 3}, true, "end_date.notice"},
		{"passed: hold proposed", heldConn(StateActive, HoldNone), EndDateInput{End: "2026-11-30", Stage: EndDatePassed, Left: -1}, true, "hold.propose"},
		{"done before: nothing", heldConn(StateActive, HoldNone), EndDateInput{End: "2026-11-30", Stage: EndDatePassed, Left: -1, Done: true}, false, ""},
		{"passed, a hold proposed already: nothing", heldConn(StateActive, HoldProposed), EndDateInput{End: "2026-11-30", Stage: EndDatePassed, Left: -1}, false, ""},
		{"passed, on hold already: nothing", heldConn(StateActive, HoldOn), EndDateInput{End: "2026-11-30", Stage: EndDatePassed, Left: -1}, false, ""},
		{"notice, no longer live: nothing", heldConn(StateRevoking, HoldNone), EndDateInput{End: "2026-12-15", Stage: EndDateNotice14, Left: 14}, false, ""},
		{"passed, no longer live: nothing", heldConn(StateRevoked, HoldNone), EndDateInput{End: "2026-11-30", Stage: EndDatePassed, Left: -1}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, acted, err := EndDateReached(tc.s, tc.in, holdNow)
			if err != nil || acted != tc.acted {
				t.Fatalf("EndDateReached = acted %v, %v; want acted %v", acted, err, tc.acted)
			}
			if got := auditActions(e); got != tc.actions {
				t.Errorf("audit = %q, want %q", got, tc.actions)
			}
			if !tc.acted && (!e.AuditOnly(tc.s.State) || len(e.Audit) != 0) {
				t.Errorf("effect = %+v, want one that records nothing", e)
			}
			if tc.in.Stage == EndDatePassed && tc.acted && (e.Hold == nil || e.Hold.State != HoldProposed || e.Hold.By != SystemActor) {
				t.Errorf("hold = %+v, want proposed by the system", e.Hold)
			}
		})
	}
	if _, _, err := EndDateReached(heldConn(StateActive, HoldNone), EndDateInput{End: "2026-11-30", Stage: EndDatePassed, Left: -1}, time.Time{}); !errors.Is(err, ErrNoClock) {
		t.Errorf("EndDateReached without a clock = %v, want ErrNoClock", err)
	}
}

// TestCheckLease: only the running job's lease holder writes on it.
func TestCheckLease(t *testing.T) {
	for _, tc := range []struct {
		j     Job
		owner string
		ok    bool
	}{
		{Job{ID: 1, State: JobRunning, LeaseOwner: "w1"}, "w1", true},
		{Job{ID: 1, State: JobRunning, LeaseOwner: "w2"}, "w1", false},
		{Job{ID: 1, State: JobQueued}, "w1", false},
		{Job{ID: 1, State: JobFailed, LeaseOwner: "w1"}, "w1", false},
		{Job{ID: 1, State: JobSucceeded, LeaseOwner: "w1"}, "w1", false},
	} {
		err := tc.j.CheckLease(tc.owner)
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrLeaseLost) {
			t.Errorf("%+v.CheckLease(%q) = %v, want ok %v", tc.j, tc.owner, err, tc.ok)
		}
	}
}

// auditActions are the actions of e's audit events, in order.
func auditActions(e Effect) string {
	var actions []string
	for _, a := range e.Audit {
		actions = append(actions, a.Action)
	}
	return strings.Join(actions, " ")
}

// TestCheckReady: a job completes only with a plan, every step of it done.
func TestCheckReady(t *testing.T) {
	for _, tc := range []struct {
		steps, done int
		ok          bool
	}{{3, 3, true}, {3, 2, false}, {0, 0, false}, {1, 0, false}} {
		err := Job{ID: 1, Steps: tc.steps}.CheckReady(tc.done)
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrStepsNotDone) {
			t.Errorf("%d of %d steps done: CheckReady = %v, want ok %v", tc.done, tc.steps, err, tc.ok)
		}
	}
}

// TestRetryHoldJob: a failed hold job is queued again, never beside an
// unfinished one.
func TestRetryHoldJob(t *testing.T) {
	now := time.Date(2026, 5, 10, 9, 0, 0, 0, time.UTC)
	admin := Actor{ID: 4, Email: "ada@example.test"}
	s := heldConn(StateActive, HoldOn)
	if _, err := RetryHoldJob(s, admin, true, "again", now); !errors.Is(err, ErrJobOpen) {
		t.Errorf("RetryHoldJob with a hold job open = %v, want ErrJobOpen", err)
	}
	e, err := RetryHoldJob(s, admin, false, "again", now)
	want, werr := QueueJob(s, admin, JobHold, "", "again", now)
	if err != nil || werr != nil || !reflect.DeepEqual(e, want) || e.Job == nil || e.Job.Kind != JobHold {
		t.Errorf("RetryHoldJob = %+v, %v; want QueueJob's hold job %+v, %v", e, err, want, werr)
	}
}

// TestPersonTransition: each event a person gives runs its command; the
// others are refused.
func TestPersonTransition(t *testing.T) {
	now := time.Date(2026, 5, 10, 9, 0, 0, 0, time.UTC)
	owner := Actor{ID: 1, Email: "owner@example.test"}
	admin := Actor{ID: 4, Email: "ada@example.test"}
	draft, submitted := testConn(StateDraft, AmendNone), testConn(StateSubmitted, AmendNone)
	pin := Pin{Version: submitted.CurrentVersion, Hash: submitted.CurrentHash}
	for _, tc := range []struct {
		name string
		s    Conn
		by   Actor
		ev   Event
		want func() (Effect, error)
	}{
		{"submit", draft, owner, EventSubmit, func() (Effect, error) { return Submit(draft, owner, Pin{}, now) }},
		{"withdraw", submitted, owner, EventWithdraw, func() (Effect, error) { return Withdraw(submitted, owner, "why", now) }},
		{"reject", submitted, admin, EventReject, func() (Effect, error) { return SendBack(submitted, admin, EventReject, pin, "why", now) }},
		{"request changes", submitted, admin, EventRequestChanges, func() (Effect, error) {
			return SendBack(submitted, admin, EventRequestChanges, pin, "why", now)
		}},
	} {
		p := Pin{}
		if tc.ev == EventReject || tc.ev == EventRequestChanges {
			p = pin
		}
		got, err := PersonTransition(tc.s, tc.by, tc.ev, p, "why", now)
		want, werr := tc.want()
		if fmt.Sprint(err) != fmt.Sprint(werr) || !reflect.DeepEqual(got, want) || werr == nil && got.Next == tc.s.State {
			t.Errorf("%s: PersonTransition = %+v, %v; want %+v, %v", tc.name, got, err, want, werr)
		}
	}
	// Approvals and revocations have their own commands; an event the
	// state does not allow is the lifecycle's refusal.
	if _, err := PersonTransition(submitted, admin, EventApprove, pin, "why", now); err == nil || !strings.Contains(err.Error(), "not a transition a person makes") {
		t.Errorf("PersonTransition(approve) = %v, want a refusal naming Approve", err)
	}
	var te *TransitionError
	if _, err := PersonTransition(draft, admin, EventRevocationDone, Pin{}, "why", now); !errors.As(err, &te) {
		t.Errorf("PersonTransition(revocation_done on a draft) = %v, want a TransitionError", err)
	}
	// A pinned withdrawal (the API's If-Match) of a version that is no
	// longer the current one is stale, and changes nothing.
	var stale *StaleError
	if _, err := PersonTransition(submitted, owner, EventWithdraw, Pin{Version: submitted.CurrentVersion, Hash: "another"}, "why", now); !errors.As(err, &stale) {
		t.Errorf("PersonTransition(withdraw, stale pin) = %v, want a StaleError", err)
	}
	if eff, err := PersonTransition(submitted, owner, EventWithdraw, pin, "why", now); err != nil || eff.Next != StateWithdrawn {
		t.Errorf("PersonTransition(withdraw, current pin) = %+v, %v", eff, err)
	}
}

// TestJobOrderCheck: a provisioning job is never queued unpinned; the
// other kinds carry no plan hash.
func TestJobOrderCheck(t *testing.T) {
	for _, tc := range []struct {
		j  JobOrder
		ok bool
	}{
		{JobOrder{Kind: JobProvision, Version: 1, PlanHash: "p"}, true},
		{JobOrder{Kind: JobProvision, Version: 1}, false},
		{JobOrder{Kind: JobRevoke, Version: 1}, true},
		{JobOrder{Kind: JobHold, Version: 1, StopPolicy: StopHold}, true},
	} {
		if err := tc.j.Check(); (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrUnpinned) {
			t.Errorf("%+v.Check() = %v, want ok %v", tc.j, err, tc.ok)
		}
	}
}

// A drift report is recorded only while the connection is what the pass
// compared with: the same approved version, the same hold on its queues,
// and no job about to change its objects.
func TestDriftReportStale(t *testing.T) {
	for _, tc := range []struct {
		name     string
		basis    DriftBasis
		approved int
		hold     Hold
		jobOpen  bool
		want     bool
	}{
		{"unchanged, queues compared", DriftBasis{Version: 2, StopPolicy: StopNone}, 2, HoldNone, false, false},
		{"unchanged, queues not compared", DriftBasis{Version: 2}, 2, HoldOn, false, false},
		{"an amendment applied during the pass", DriftBasis{Version: 2}, 3, HoldNone, false, true},
		{"a hold placed during the pass", DriftBasis{Version: 2, StopPolicy: StopNone}, 2, HoldOn, false, true},
		{"a job open", DriftBasis{Version: 2}, 2, HoldNone, true, true},
	} {
		if got := DriftReportStale(tc.basis, tc.approved, tc.hold, tc.jobOpen); got != tc.want {
			t.Errorf("%s: DriftReportStale = %v, want %v", tc.name, got, tc.want)
		}
	}
}
