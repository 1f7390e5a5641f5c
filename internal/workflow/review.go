package workflow

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Lifecycle reviews. A live connection is reviewed on a calendar (its
// contract's cadence, and before its end date) and on events. Opening a
// review moves the connection to under_review with the evidence the portal
// collected frozen beside it; the reviewer's decision ends the review. The
// rules here are pure: the scheduler (when a review is due, which events
// call for one) and internal/store (which records a review and its decision
// in the transaction that moves the connection) call them.

// ReviewTrigger is why a review opened.
type ReviewTrigger string

// The triggers. Scheduled and end_date come from the calendar, the others
// from events (mission.md, "Lifecycle of a connection").
const (
	TriggerScheduled    ReviewTrigger = "scheduled"    // the contract's review cadence came due
	TriggerEndDate      ReviewTrigger = "end_date"     // the contract's end date is near
	TriggerAmendment    ReviewTrigger = "amendment"    // an applied change of owners, roles, account, region, data classification or signals
	TriggerCapacity     ReviewTrigger = "capacity"     // the cluster's capacity (inventory) changed
	TriggerOrchestrator ReviewTrigger = "orchestrator" // the cluster's orchestrator version changed
	TriggerOwnerLeft    ReviewTrigger = "owner_left"   // an owner is no longer in the team's owners group
	TriggerSignal       ReviewTrigger = "signal"       // a usage signal fired past its threshold
	TriggerOrphan       ReviewTrigger = "orphan"       // no business purpose, or no owner still in the owners group
)

// AllReviewTriggers lists the triggers, calendar first.
var AllReviewTriggers = []ReviewTrigger{TriggerScheduled, TriggerEndDate, TriggerAmendment, TriggerCapacity,
	TriggerOrchestrator, TriggerOwnerLeft, TriggerSignal, TriggerOrphan}

var triggerLabels = map[ReviewTrigger]string{
	TriggerScheduled:    "Scheduled (review cadence)",
	TriggerEndDate:      "End date coming",
	TriggerAmendment:    "Contract change",
	TriggerCapacity:     "Cluster capacity changed",
	TriggerOrchestrator: "Orchestrator version changed",
	TriggerOwnerLeft:    "Owner left the owners group",
	TriggerSignal:       "Usage signal fired",
	TriggerOrphan:       "Orphan: no purpose or no owner",
}

// Label is the trigger as pages show it.
func (t ReviewTrigger) Label() string { return labelOr(triggerLabels, t) }

// Valid reports whether t is a known trigger.
func (t ReviewTrigger) Valid() bool { _, ok := triggerLabels[t]; return ok }

// Event reports whether the trigger is an event rather than the calendar.
func (t ReviewTrigger) Event() bool { return t != TriggerScheduled && t != TriggerEndDate }

// ReviewDecision is how a review ends.
type ReviewDecision string

// The decisions. Nothing is revoked by a review: a recommendation of
// revocation waits for an admin, who executes it through the revocation.
const (
	ReviewRenew               ReviewDecision = "renew"
	ReviewRequestChanges      ReviewDecision = "request_changes"
	ReviewHold                ReviewDecision = "hold"
	ReviewRecommendRevocation ReviewDecision = "recommend_revocation"
)

// AllReviewDecisions lists the decisions in the order forms offer them.
var AllReviewDecisions = []ReviewDecision{ReviewRenew, ReviewRequestChanges, ReviewHold, ReviewRecommendRevocation}

var decisionLabels = map[ReviewDecision]string{
	ReviewRenew:               "Renew",
	ReviewRequestChanges:      "Request changes",
	ReviewHold:                "Hold (an admin confirms)",
	ReviewRecommendRevocation: "Recommend revocation (an admin executes it)",
}

// Label is the decision as pages show it.
func (d ReviewDecision) Label() string { return labelOr(decisionLabels, d) }

// Valid reports whether d is a known decision.
func (d ReviewDecision) Valid() bool { _, ok := decisionLabels[d]; return ok }

// DefaultReviewCadenceDays is the cadence of a contract that names none.
const DefaultReviewCadenceDays = 90

// EndDateLeadDays: the review before a contract's end date is due this many
// days before it, so that renewal or decommissioning is decided in time.
const EndDateLeadDays = 14

// DateLayout is the civil date layout of due dates, deadlines and end dates.
const DateLayout = time.DateOnly

// NextReviewDue is the civil date (UTC) the next scheduled review of a
// connection is due, counted from the day from (its activation, or the
// decision that renewed it): the cadence (DefaultReviewCadenceDays when 0)
// later, or EndDateLeadDays before the end date when that comes first, but
// never before from's own day.
func NextReviewDue(from time.Time, cadenceDays int, endDate string) string {
	if cadenceDays <= 0 {
		cadenceDays = DefaultReviewCadenceDays
	}
	day := civilDay(from)
	due := day.AddDate(0, 0, cadenceDays)
	if end, err := time.Parse(DateLayout, endDate); err == nil {
		if before := end.AddDate(0, 0, -EndDateLeadDays); before.Before(due) {
			due = before
		}
	}
	if due.Before(day) {
		due = day
	}
	return due.Format(DateLayout)
}

// DaysOverdue is how many whole days past due (a civil date) now is; 0 when
// it is not yet past, or due is not a date.
func DaysOverdue(due string, now time.Time) int {
	d, err := time.Parse(DateLayout, due)
	if err != nil {
		return 0
	}
	n := int(civilDay(now).Sub(d).Hours() / 24)
	return max(n, 0)
}

func civilDay(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// ReviewOrder is a review an effect opens, of the connection's approved
// version. Evidence is what the portal collected for it (JSON of
// Evidence), frozen with the review.
type ReviewOrder struct {
	Trigger  ReviewTrigger
	Detail   string
	DueOn    string // civil date
	Evidence []byte
	Demo     bool
}

// ReviewOutcome is the decision an effect records on the open review.
type ReviewOutcome struct {
	ReviewID int64
	Decision ReviewDecision
	Reason   string
	Deadline string // request_changes: the owner's deadline (civil date)
}

// OpenReviewInput is what opening a review needs besides the connection.
type OpenReviewInput struct {
	Trigger  ReviewTrigger
	Detail   string
	DueOn    string // the due date of a scheduled review; the opening day for an event
	Evidence []byte
	Demo     bool
}

// The refusals of the review commands.
var (
	ErrReviewOpen     = errors.New("a review of this connection is already open")
	ErrReviewClosed   = errors.New("this review is already decided")
	ErrReviewReason   = errors.New("a review decision needs a reason")
	ErrReviewDeadline = errors.New("a request for changes needs a deadline after today (YYYY-MM-DD)")
	ErrReviewDecision = errors.New("unknown review decision")
	ErrReviewTrigger  = errors.New("unknown review trigger")
)

// DeadlineError is why a request for changes' deadline is refused, in
// words for the form; it is an ErrReviewDeadline.
type DeadlineError struct{ Why string }

func (e *DeadlineError) Error() string        { return e.Why }
func (e *DeadlineError) Is(target error) bool { return target == ErrReviewDeadline }

// ReviewDeadline checks the deadline a request for changes gives the
// owners: a civil date after now's day. It returns the date as stored.
func ReviewDeadline(deadline string, now time.Time) (string, error) {
	deadline = strings.TrimSpace(deadline)
	if deadline == "" {
		return "", &DeadlineError{"Give the owners a deadline for their changes (a date after today)."}
	}
	d, err := time.Parse(DateLayout, deadline)
	if err != nil {
		return "", &DeadlineError{"Give the deadline as a date, YYYY-MM-DD."}
	}
	if today := civilDay(now); !d.After(today) {
		return "", &DeadlineError{"The deadline must be after today (" + today.Format(DateLayout) + ")."}
	}
	return d.Format(DateLayout), nil
}

// OpenReview opens a review of a live connection's approved version: the
// connection moves from active to under_review (start_review), and the
// review's row is recorded with its frozen evidence.
func OpenReview(s Conn, in OpenReviewInput, now time.Time) (Effect, error) {
	if now.IsZero() {
		return Effect{}, ErrNoClock
	}
	if !in.Trigger.Valid() {
		return Effect{}, fmt.Errorf("%w %q", ErrReviewTrigger, in.Trigger)
	}
	if s.State == StateUnderReview {
		return Effect{}, ErrReviewOpen
	}
	next, err := Transition(s.State, EventStartReview, now)
	if err != nil {
		return Effect{}, err
	}
	due := in.DueOn
	if due == "" {
		due = civilDay(now).Format(DateLayout)
	}
	if _, err := time.Parse(DateLayout, due); err != nil {
		return Effect{}, fmt.Errorf("workflow: review due date %q: %w", due, err)
	}
	detail := strings.TrimSpace(in.Detail)
	if detail == "" {
		detail = in.Trigger.Label()
	}
	subject := fmt.Sprintf("Connection #%d of team %s is under review (%s): %s", s.ID, s.Team, in.Trigger.Label(), detail)
	return Effect{By: Actor{Email: "review scheduler"}, Next: next,
		OpenReview: &ReviewOrder{Trigger: in.Trigger, Detail: detail, DueOn: due, Evidence: in.Evidence, Demo: in.Demo},
		Audit:      []AuditRecord{audit(Actor{Email: "review scheduler"}, "review.open", s.ApprovedVersion, fmt.Sprintf("%s: %s", in.Trigger, detail))},
		Notify: []Notice{
			{Kind: "review.opened", To: ToReviewers, Subject: subject},
			{Kind: "review.opened", To: ToTeam, Subject: subject},
		},
	}, nil
}

// DecideReviewInput is a reviewer's decision on an open review.
type DecideReviewInput struct {
	ReviewID int64
	Decision ReviewDecision
	Reason   string
	Deadline string // request_changes only
	// Approved is the connection's approved contract: its cadence and end
	// date set the next review's due date.
	Approved Contract
}

// DecideReview ends the open review of s (under_review) with a reviewer's
// decision. The reviewer is independent of the request (nobody reviews
// what they filed, edited or submitted).
//   - renew: back to active; the next review is due a cadence later (the
//     end date moves only through an amendment).
//   - request_changes: back to active, the owners asked for a change by the
//     deadline; the follow-up review is due on the deadline.
//   - hold: back to active with a hold proposed (HoldProposal), which an
//     admin confirms or declines; a hold already proposed or in force
//     stands. The next review is due a cadence later.
//   - recommend_revocation: the connection stays under review until an
//     admin revokes it (or declines the recommendation).
func DecideReview(s Conn, by Actor, in DecideReviewInput, now time.Time) (Effect, error) {
	if now.IsZero() {
		return Effect{}, ErrNoClock
	}
	if !in.Decision.Valid() {
		return Effect{}, fmt.Errorf("%w %q", ErrReviewDecision, in.Decision)
	}
	reason := strings.TrimSpace(in.Reason)
	if reason == "" {
		return Effect{}, ErrReviewReason
	}
	if err := independentOf(s, by); err != nil {
		return Effect{}, err
	}
	out := &ReviewOutcome{ReviewID: in.ReviewID, Decision: in.Decision, Reason: reason}
	e := Effect{By: by, Next: s.State, CloseReview: out}
	var ev Event
	switch in.Decision {
	case ReviewRenew:
		ev = EventRenew
		e.ReviewDue = NextReviewDue(now, in.Approved.ReviewCadenceDays, in.Approved.EndDate)
	case ReviewRequestChanges:
		d, err := ReviewDeadline(in.Deadline, now)
		if err != nil {
			return Effect{}, err
		}
		out.Deadline = d
		ev = EventRequestChanges
		e.ReviewDue = out.Deadline
	case ReviewHold:
		ev = EventReviewHold
		e.ReviewDue = NextReviewDue(now, in.Approved.ReviewCadenceDays, in.Approved.EndDate)
	case ReviewRecommendRevocation:
		if s.State != StateUnderReview {
			return Effect{}, &TransitionError{From: s.State, Event: EventRenew}
		}
	}
	if ev != "" {
		next, err := Transition(s.State, ev, now)
		if err != nil {
			return Effect{}, err
		}
		e.Next = next
	}
	action := "review." + string(in.Decision)
	rec := audit(by, action, s.ApprovedVersion, reason)
	if out.Deadline != "" {
		rec.Reason = fmt.Sprintf("%s (changes due by %s)", reason, out.Deadline)
	}
	e.Audit = []AuditRecord{rec}
	subject := fmt.Sprintf("The review of connection #%d of team %s ended: %s. %s", s.ID, s.Team, in.Decision.Label(), rec.Reason)
	e.Notify = []Notice{{Kind: action, To: ToTeam, Subject: subject}}
	switch {
	case in.Decision == ReviewHold && s.Hold == HoldNone:
		// The hold itself is proposed for an admin to confirm (hold.go):
		// its audit event, and its notice to the admins.
		h, a, n, err := HoldProposal(s, by, reason, now)
		if err != nil {
			return Effect{}, err
		}
		e.Hold = h
		e.Audit = append(e.Audit, a...)
		for _, x := range n {
			if x.To == ToAdmins {
				e.Notify = append(e.Notify, x)
			}
		}
	case in.Decision == ReviewHold || in.Decision == ReviewRecommendRevocation:
		// A hold already proposed or in force stands as it is.
		e.Notify = append(e.Notify, Notice{Kind: action, To: ToAdmins, Subject: subject})
	}
	return e, nil
}

// Evidence is what the portal collects when a review opens, frozen with it
// (JSON). Each part that could not be collected is left out and named in
// Gaps with why, so a reviewer never mistakes "unknown" for "none".
type Evidence struct {
	CollectedAt time.Time `json:"collected_at"`
	// Contract is the approved version under review.
	Contract EvidenceContract `json:"contract"`
	// Changes are the contract's versions approved since the last review
	// (or since the first approval), oldest first.
	Changes []EvidenceChange `json:"changes"`
	// Drift is the last drift report of the connection; nil when none ran.
	Drift *EvidenceDrift `json:"drift,omitempty"`
	// Owners are the contract's owners: still in the team's owners group,
	// and when they last signed in.
	Owners []EvidenceOwner `json:"owners"`
	// Usage is the team's usage and cost over 30 and 90 days; nil where
	// usage is not collected.
	Usage *EvidenceUsage `json:"usage,omitempty"`
	// Signals are the team's open (unacknowledged) signals.
	Signals []EvidenceSignal `json:"signals"`
	// Exceptions are the connection's exceptions with an expiry granted
	// since the last decided review, or not yet reverted (exception.go).
	Exceptions []EvidenceException `json:"exceptions,omitempty"`
	// Orphan says why the connection is an orphan ("" when it is not).
	Orphan string `json:"orphan,omitempty"`
	// Gaps name what could not be collected, and why.
	Gaps []string `json:"gaps,omitempty"`
}

// EvidenceException is one exception of the connection, for its reviewer.
type EvidenceException struct {
	ID            int64     `json:"id"`
	PriorityClass string    `json:"priority_class"`
	Reason        string    `json:"reason"`
	GrantedBy     string    `json:"granted_by"`
	Start         time.Time `json:"start"`
	End           time.Time `json:"end"`
	State         string    `json:"state"`
	EndedEarlyBy  string    `json:"ended_early_by,omitempty"`
}

// EvidenceContract is the approved version under review.
type EvidenceContract struct {
	Version    int       `json:"version"`
	Hash       string    `json:"hash"`
	ApprovedAt time.Time `json:"approved_at"`
	Contract   Contract  `json:"contract"`
}

// EvidenceChange is one approved version since the last review.
type EvidenceChange struct {
	Version    int       `json:"version"`
	Hash       string    `json:"hash"`
	ApprovedAt time.Time `json:"approved_at"`
	ApprovedBy string    `json:"approved_by"`
	Fields     []string  `json:"fields"` // the contract fields it changed
}

// EvidenceDrift is a drift report's summary.
type EvidenceDrift struct {
	CheckedAt time.Time `json:"checked_at"`
	Status    string    `json:"status"`
	Findings  []string  `json:"findings,omitempty"`
}

// EvidenceOwner is one of the contract's owners.
type EvidenceOwner struct {
	Role  string `json:"role"` // business, operations, cost, exception
	Email string `json:"email"`
	// InOwnersGroup: "yes", "no", or "unknown" (never signed in, and no
	// Identity Store to ask).
	InOwnersGroup string    `json:"in_owners_group"`
	LastSignIn    time.Time `json:"last_sign_in,omitzero"`
}

// EvidenceUsage is the team's usage and cost over two windows.
type EvidenceUsage struct {
	Last30       EvidenceWindow `json:"last_30_days"`
	Last90       EvidenceWindow `json:"last_90_days"`
	LastWorkload time.Time      `json:"last_workload,omitzero"` // zero: none seen
}

// EvidenceWindow is usage and cost over a window of days.
type EvidenceWindow struct {
	Days               int     `json:"days"`
	GuaranteedGPUHours float64 `json:"guaranteed_gpu_hours"`
	UsedGPUHours       float64 `json:"used_gpu_hours"`
	BorrowedGPUHours   float64 `json:"borrowed_gpu_hours"`
	Cost               string  `json:"cost,omitempty"` // formatted with its currency; "" without a rate card
	Missing            bool    `json:"missing,omitempty"`
}

// EvidenceSignal is one open signal.
type EvidenceSignal struct {
	Signal  string    `json:"signal"`
	FiredAt time.Time `json:"fired_at"`
	Detail  string    `json:"detail"`
}
