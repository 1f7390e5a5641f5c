package workflow

import (
	"testing"
	"time"
)

// The due and trigger rules of the review scheduler, with a test clock.
func TestReviewDueAndTriggerRules(t *testing.T) {
	day := func(s string) time.Time {
		d, err := time.Parse(DateLayout, s)
		if err != nil {
			t.Fatal(err)
		}
		return d.Add(13 * time.Hour)
	}
	withEnd := func(end string, cadence int) Contract {
		c := ExampleContract()
		c.EndDate, c.ReviewCadenceDays = end, cadence
		return c
	}
	for _, tc := range []struct {
		name    string
		due     string
		now     time.Time
		c       Contract
		isDue   bool
		trigger ReviewTrigger
	}{
		{"no date is never due", "", day("2030-01-01"), withEnd("", 90), false, TriggerScheduled},
		{"the day before", "2026-03-01", day("2026-02-28"), withEnd("", 90), false, TriggerScheduled},
		{"the day itself", "2026-03-01", day("2026-03-01"), withEnd("", 90), true, TriggerScheduled},
		{"the first instant of the day", "2026-03-01", time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), withEnd("", 90), true, TriggerScheduled},
		{"the last instant of the day before", "2026-03-01", time.Date(2026, 2, 28, 23, 59, 59, 0, time.UTC), withEnd("", 90), false, TriggerScheduled},
		{"overdue", "2026-03-01", day("2026-04-01"), withEnd("", 90), true, TriggerScheduled},
		{"a cadence due long before the end date", "2026-03-01", day("2026-03-01"), withEnd("2027-01-01", 90), true, TriggerScheduled},
		{"the lead before the end date", "2026-12-18", day("2026-12-18"), withEnd("2027-01-01", 90), true, TriggerEndDate},
		{"a day before the lead is the cadence", "2026-12-17", day("2026-12-18"), withEnd("2027-01-01", 90), true, TriggerScheduled},
		{"clamped to activation after the lead", "2026-12-25", day("2026-12-25"), withEnd("2027-01-01", 90), true, TriggerEndDate},
		{"a bad end date is no end date", "2026-12-25", day("2026-12-25"), withEnd("soon", 90), true, TriggerScheduled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReviewIsDue(tc.due, tc.now); got != tc.isDue {
				t.Errorf("ReviewIsDue(%q, %s) = %v, want %v", tc.due, tc.now, got, tc.isDue)
			}
			if got := ScheduledTrigger(tc.due, tc.c); got != tc.trigger {
				t.Errorf("ScheduledTrigger(%q, end %q) = %s, want %s", tc.due, tc.c.EndDate, got, tc.trigger)
			}
		})
	}
	// NextReviewDue and ScheduledTrigger agree: a date NextReviewDue took
	// from the end date is an end_date review, one from the cadence is not.
	for _, tc := range []struct {
		from    string
		cadence int
		end     string
		want    ReviewTrigger
	}{
		{"2026-01-01", 90, "", TriggerScheduled},
		{"2026-01-01", 90, "2027-01-01", TriggerScheduled},
		{"2026-01-01", 90, "2026-03-01", TriggerEndDate},
		{"2026-01-01", 30, "2026-02-14", TriggerEndDate},
		{"2026-02-10", 30, "2026-02-14", TriggerEndDate},
	} {
		due := NextReviewDue(day(tc.from), tc.cadence, tc.end)
		if got := ScheduledTrigger(due, withEnd(tc.end, tc.cadence)); got != tc.want {
			t.Errorf("from %s cadence %d end %q: due %s is %s, want %s", tc.from, tc.cadence, tc.end, due, got, tc.want)
		}
	}
}

// The date a succeeded job sets: activation, and an applied change of the
// cadence or the end date; nothing else moves it.
func TestReviewDueOnJob(t *testing.T) {
	now := time.Date(2026, 5, 10, 9, 0, 0, 0, time.UTC)
	c := ExampleContract()
	shorter := c
	shorter.ReviewCadenceDays = 30
	ended := c
	ended.EndDate = "2026-06-01"
	owner := c
	owner.BusinessOwner = "someone@example.test"
	for _, tc := range []struct {
		name     string
		s        Conn
		e        Effect
		old, new Contract
		want     string
	}{
		{"provisioning succeeded", Conn{State: StateProvisioning}, Effect{Next: StateActive}, c, c, "2026-08-08"},
		{"provisioning succeeded with an end date", Conn{State: StateProvisioning}, Effect{Next: StateActive}, ended, ended, "2026-05-18"},
		{"a dry run stays approved", Conn{State: StateApproved}, Effect{Next: StateApproved}, c, c, ""},
		{"a reapply", Conn{State: StateActive}, Effect{Next: StateActive}, c, c, ""},
		{"an applied change of cadence", Conn{State: StateActive, ApprovedVersion: 1}, Effect{Next: StateActive, Approve: 2}, c, shorter, "2026-06-09"},
		{"an applied change of end date", Conn{State: StateUnderReview, ApprovedVersion: 1}, Effect{Next: StateUnderReview, Approve: 2}, c, ended, "2026-05-18"},
		{"an applied change of owner only", Conn{State: StateActive, ApprovedVersion: 1}, Effect{Next: StateActive, Approve: 2}, c, owner, ""},
	} {
		if got := ReviewDueOnJob(tc.s, tc.e, tc.old, tc.new, now); got != tc.want {
			t.Errorf("%s: ReviewDueOnJob = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// Orphans, owners leaving the group, and the overdue reminder.
func TestOrphanOwnerLeftOverdueRules(t *testing.T) {
	signed := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := ExampleContract()
	noPurpose := c
	noPurpose.BusinessPurpose = "  "
	yes := EvidenceOwner{Email: "a@x", InOwnersGroup: InGroupYes, LastSignIn: signed}
	yesNeverSigned := EvidenceOwner{Email: "b@x", InOwnersGroup: InGroupYes}
	no := EvidenceOwner{Email: "c@x", InOwnersGroup: InGroupNo, LastSignIn: signed}
	unknown := EvidenceOwner{Email: "d@x", InOwnersGroup: InGroupUnknown}
	for _, tc := range []struct {
		name   string
		c      Contract
		owners []EvidenceOwner
		known  bool
		want   string
	}{
		{"an owner in the group", c, []EvidenceOwner{no, yes}, true, ""},
		{"no purpose", noPurpose, []EvidenceOwner{yes}, true, OrphanNoPurpose},
		{"no purpose, group unknown", noPurpose, nil, false, OrphanNoPurpose},
		{"nobody in the group", c, []EvidenceOwner{no, unknown}, true, OrphanNoOwner},
		{"in the group but never signed in", c, []EvidenceOwner{yesNeverSigned}, true, OrphanNoOwner},
		{"no owners group to ask", c, []EvidenceOwner{no}, false, ""},
	} {
		if got := OrphanReason(tc.c, tc.owners, tc.known); got != tc.want {
			t.Errorf("%s: OrphanReason = %q, want %q", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		before, now string
		want        bool
	}{
		{"", InGroupNo, false}, {InGroupYes, InGroupNo, true}, {InGroupUnknown, InGroupNo, false},
		{InGroupNo, InGroupNo, false}, {InGroupYes, InGroupYes, false}, {InGroupNo, InGroupYes, false}, {"", InGroupUnknown, false},
	} {
		if got := OwnerLeft(tc.before, tc.now); got != tc.want {
			t.Errorf("OwnerLeft(%q, %q) = %v, want %v", tc.before, tc.now, got, tc.want)
		}
	}
	if n := OverdueNotices(1, "red", TriggerScheduled, "2026-01-01", OverdueReminderDays-1); n != nil {
		t.Errorf("%d days overdue reminds: %v", OverdueReminderDays-1, n)
	}
	n := OverdueNotices(1, "red", TriggerScheduled, "2026-01-01", OverdueReminderDays)
	if len(n) != 2 || n[0].To != ToReviewers || n[1].To != ToTeam || n[0].Kind != "review.overdue" {
		t.Errorf("the reminder = %+v; want reviewers and owners told", n)
	}
	if o := ContractOwners(c); len(o) != 4 || o[0].Role != OwnerBusiness || o[1].Email != "member.red@example.test" {
		t.Errorf("ContractOwners = %+v", o)
	}
}
