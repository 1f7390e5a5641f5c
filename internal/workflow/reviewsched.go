package workflow

import (
	"fmt"
	"strings"
	"time"
)

// The review scheduler's rules (internal/review runs them): when a
// connection's scheduled review is due and why, what sets its due date,
// when a connection is an orphan, when an owner left the owners group, and
// when an open review is overdue enough to remind people of it.

// ReviewIsDue reports whether the scheduled review due on due (a civil
// date) is due at now: today (UTC) is that day or later. A connection with
// no due date ("") is not due.
func ReviewIsDue(due string, now time.Time) bool {
	d, err := time.Parse(DateLayout, due)
	if err != nil {
		return false
	}
	return !civilDay(now).Before(d)
}

// ScheduledTrigger tells why a calendar review due on due opens: end_date
// when the contract's end date set that day (it is no earlier than
// EndDateLeadDays before the end date, as NextReviewDue picks it when the
// end date comes before the cadence), scheduled otherwise.
func ScheduledTrigger(due string, c Contract) ReviewTrigger {
	d, err := time.Parse(DateLayout, due)
	if err != nil {
		return TriggerScheduled
	}
	end, err := time.Parse(DateLayout, c.EndDate)
	if err != nil {
		return TriggerScheduled
	}
	if !d.Before(end.AddDate(0, 0, -EndDateLeadDays)) {
		return TriggerEndDate
	}
	return TriggerScheduled
}

// ScheduledDetail is the detail of a calendar review, in words.
func ScheduledDetail(t ReviewTrigger, due string, c Contract) string {
	if t == TriggerEndDate {
		return fmt.Sprintf("the contract ends on %s; its review was due on %s", c.EndDate, due)
	}
	cadence := c.ReviewCadenceDays
	if cadence <= 0 {
		cadence = DefaultReviewCadenceDays
	}
	return fmt.Sprintf("the %d-day review cadence came due on %s", cadence, due)
}

// ReviewDueOnJob is the next review date a succeeded job sets, given the
// effect OnJobSucceeded decided on s: a connection that becomes active
// (provisioning succeeded) is due NextReviewDue from now with its approved
// contract (approved); an applied amendment whose contract changes the
// cadence or the end date (from old, the version it replaces) is due again
// from now with the new ones. "" leaves the date as it is.
func ReviewDueOnJob(s Conn, e Effect, old, approved Contract, now time.Time) string {
	switch {
	case s.State == StateProvisioning && e.Next == StateActive:
		return NextReviewDue(now, approved.ReviewCadenceDays, approved.EndDate)
	case e.Approve != 0 && s.State.Live() &&
		(old.ReviewCadenceDays != approved.ReviewCadenceDays || old.EndDate != approved.EndDate):
		return NextReviewDue(now, approved.ReviewCadenceDays, approved.EndDate)
	}
	return ""
}

// reviewDueMayMove reports whether a succeeded job's effect e on s may
// move the next review date (ReviewDueOnJob): the connection becomes
// active, or an approved version moves.
func reviewDueMayMove(s Conn, e Effect) bool {
	return (s.State == StateProvisioning && e.Next == StateActive) || e.Approve != 0
}

// OnJobCompleted is OnJobSucceeded with the next review date the success
// sets (ReviewDueOnJob). version reads a contract version of the
// connection (the store's, inside the job's transaction); it is called
// only when the date may move: for the job's version, and for the
// approved version it replaces when that is another.
func OnJobCompleted(s Conn, j JobRun, everApplied bool, now time.Time, version func(int) (Contract, error)) (Effect, error) {
	e, err := OnJobSucceeded(s, j, everApplied, now)
	if err != nil || !reviewDueMayMove(s, e) {
		return e, err
	}
	approved, err := version(j.Version)
	if err != nil {
		return e, err
	}
	old := approved
	if s.ApprovedVersion != 0 && s.ApprovedVersion != j.Version {
		if old, err = version(s.ApprovedVersion); err != nil {
			return e, err
		}
	}
	e.ReviewDue = ReviewDueOnJob(s, e, old, approved, now)
	return e, nil
}

// ScheduleMissingReview is ScheduleReview for the scheduler's pass over
// the live connections that had no review date: one that has a date
// meanwhile, or is no longer live, is left alone (an effect that records
// nothing, and set false).
func ScheduleMissingReview(s Conn, due, reason string, now time.Time) (e Effect, set bool, err error) {
	if s.ReviewDue != "" || !s.State.Live() {
		return Effect{By: reviewScheduler, Next: s.State}, false, nil
	}
	e, err = ScheduleReview(s, due, reason, now)
	return e, err == nil, err
}

// reviewScheduler is the actor of the review scheduler's commands.
var reviewScheduler = Actor{Email: "review scheduler"}

// ReviewEventInput is what the review scheduler records about one
// connection: a review to open, or a trigger to add to the one open, and
// the orphan flag.
type ReviewEventInput struct {
	// Open opens a review with Trigger, Detail, DueOn and Evidence on an
	// active connection, or adds the trigger to the open review of one
	// under review.
	Open     bool
	Trigger  ReviewTrigger
	Detail   string
	DueOn    string
	Evidence []byte
	// Orphan, when not nil, is the orphan flag to set ("" clears it).
	Orphan *string
	// ReviewOpen says the connection has an open review (a fact the store
	// reads in the transaction that records the effect).
	ReviewOpen bool
}

// OnReviewEvent is a review event on s, in one effect: on an approved
// connection, Open opens a review (OpenReview) when it is active, or adds
// the trigger to its open review when it is under review; the orphan flag
// moves (with its audit event) when it changes on a live connection. A
// connection that is no longer live gets neither; an event that changes
// nothing is an effect that records nothing.
func OnReviewEvent(s Conn, in ReviewEventInput, now time.Time) (Effect, error) {
	e := Effect{By: reviewScheduler, Next: s.State}
	if in.Open && s.ApprovedVersion != 0 {
		switch {
		case s.State == StateActive:
			var err error
			if e, err = OpenReview(s, OpenReviewInput{Trigger: in.Trigger, Detail: in.Detail, DueOn: in.DueOn, Evidence: in.Evidence}, now); err != nil {
				return Effect{}, err
			}
		case s.State == StateUnderReview && !in.Trigger.Valid():
			return Effect{}, fmt.Errorf("%w %q", ErrReviewTrigger, in.Trigger)
		case s.State == StateUnderReview && in.ReviewOpen:
			line := strings.ReplaceAll(fmt.Sprintf("%s %s: %s", now.UTC().Format(DateLayout), in.Trigger, in.Detail), "\n", " ")
			e.NoteReview = &ReviewNote{Line: line}
			e.Audit = []AuditRecord{audit(reviewScheduler, "review.trigger", s.ApprovedVersion, fmt.Sprintf("%s: %s", in.Trigger, in.Detail))}
		}
	}
	if in.Orphan != nil && *in.Orphan != s.Orphan && s.State.Live() {
		if now.IsZero() {
			return Effect{}, ErrNoClock
		}
		why := *in.Orphan
		e.Orphan = &why
		e.Audit = append(e.Audit, OrphanAudit(s, why))
	}
	return e, nil
}

// ReviewNote is a trigger an effect adds to the open review: one line,
// "<date> <trigger>: <detail>".
type ReviewNote struct{ Line string }

// ScheduleReview sets the next review date of a live connection that has
// none (a connection activated before the scheduler existed): due is
// NextReviewDue from its activation.
func ScheduleReview(s Conn, due, reason string, now time.Time) (Effect, error) {
	if now.IsZero() {
		return Effect{}, ErrNoClock
	}
	if !s.State.Live() {
		return Effect{}, fmt.Errorf("workflow: %s is not reviewed", stateName(s.State))
	}
	if _, err := time.Parse(DateLayout, due); err != nil {
		return Effect{}, fmt.Errorf("workflow: review due date %q: %w", due, err)
	}
	return Effect{By: reviewScheduler, Next: s.State, ReviewDue: due,
		Audit: []AuditRecord{audit(reviewScheduler, "review.scheduled", s.ApprovedVersion, fmt.Sprintf("next review due on %s: %s", due, reason))}}, nil
}

// Owner roles, as evidence names them.
const (
	OwnerBusiness   = "business"
	OwnerOperations = "operations"
	OwnerCost       = "cost"
	OwnerException  = "exception"
)

// Group membership answers (EvidenceOwner.InOwnersGroup).
const (
	InGroupYes     = "yes"
	InGroupNo      = "no"
	InGroupUnknown = "unknown"
)

// ContractOwners are a contract's owners by role, in the contract's order
// (an owner named twice appears twice, once per role); empty emails are
// left out.
func ContractOwners(c Contract) []EvidenceOwner {
	var out []EvidenceOwner
	for _, o := range []struct{ role, email string }{
		{OwnerBusiness, c.BusinessOwner}, {OwnerOperations, c.OperationsOwner},
		{OwnerCost, c.CostOwner}, {OwnerException, c.ExceptionOwner},
	} {
		if e := strings.ToLower(strings.TrimSpace(o.email)); e != "" {
			out = append(out, EvidenceOwner{Role: o.role, Email: e})
		}
	}
	return out
}

// Orphan reasons.
const (
	OrphanNoPurpose = "no business purpose"
	OrphanNoOwner   = "no owner is still a portal user in the team's owners group"
)

// OrphanReason says why a live connection is an orphan, "" when it is not
// (mission.md: a connection with no purpose or no responsible owner must
// be reviewed): its approved contract has no business purpose, or none of
// its owners (with what is known of them: InOwnersGroup, and LastSignIn,
// zero for who never signed in, i.e. is not a portal user) is a portal user
// in the team's owners group. groupKnown is false when the portal cannot
// know the team's owners group (no group names the team's owners): then no
// connection is an orphan for want of owners.
func OrphanReason(c Contract, owners []EvidenceOwner, groupKnown bool) string {
	if strings.TrimSpace(c.BusinessPurpose) == "" {
		return OrphanNoPurpose
	}
	if !groupKnown {
		return ""
	}
	for _, o := range owners {
		if o.InOwnersGroup == InGroupYes && !o.LastSignIn.IsZero() {
			return ""
		}
	}
	return OrphanNoOwner
}

// OwnerLeft reports whether an owner whose membership of the owners group
// was last seen as before and is now now has left it: a "no" after a "yes".
// An owner never seen in the group (an operations owner who is a team
// member, say) has not left it; the orphan rule covers a connection none of
// whose owners is in it.
func OwnerLeft(before, now string) bool { return now == InGroupNo && before == InGroupYes }

// OverdueReminderDays: an open review this many days past due reminds its
// reviewers and the team's owners, once.
const OverdueReminderDays = 7

// OverdueNotices are the reminders of an open review days overdue, or nil
// when it is not OverdueReminderDays overdue.
func OverdueNotices(connID int64, team string, trigger ReviewTrigger, due string, days int) []Notice {
	if days < OverdueReminderDays {
		return nil
	}
	subject := fmt.Sprintf("The review of connection #%d of team %s (%s) is %d days overdue (due %s)", connID, team, trigger.Label(), days, due)
	return []Notice{
		{Kind: "review.overdue", To: ToReviewers, Subject: subject},
		{Kind: "review.overdue", To: ToTeam, Subject: subject},
	}
}

// OrphanAudit is the audit record of an orphan flag set or cleared.
func OrphanAudit(s Conn, why string) AuditRecord {
	if why == "" {
		return audit(reviewScheduler, "orphan.cleared", s.ApprovedVersion, "the connection has a business purpose and an owner in the team's owners group again")
	}
	return audit(reviewScheduler, "orphan.flagged", s.ApprovedVersion, why)
}
