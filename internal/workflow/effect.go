package workflow

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Commands and effects. Every change to a connection is a command: a pure
// function in this package that takes the connection as it is (Conn, read by
// internal/store inside the transaction that will record the outcome), the
// actor, the input, the facts the rules need and the clock time, and returns
// an Effect: the next state, the contract version, decision row and job to
// record, the audit events and the notifications. internal/store applies an
// effect in that same transaction through one function (its apply), which is
// the only code that writes a connection's row. Handlers and the worker never
// decide a connection's state; they call a store method that runs a command.

// Actor is who causes a command, as recorded in the audit trail.
type Actor struct {
	ID    int64 // 0 for the system (provisioner, scheduler)
	Email string
}

// Provisioner is the actor of what the provisioning worker reports.
var Provisioner = Actor{Email: "provisioner"}

// Conn is a connection as a command sees it.
type Conn struct {
	ID              int64
	Team            string
	State           State
	CurrentVersion  int
	CurrentHash     string // the contract hash of CurrentVersion
	ApprovedVersion int    // 0: never approved
	ApprovedHash    string // the contract hash of ApprovedVersion
	// Amendment is where the change request of a live connection is.
	Amendment   Amendment
	RequesterID int64
	// EditorIDs are the authors of every version; SubmitterIDs everyone who
	// submitted it. Only the decision commands read them.
	EditorIDs    []int64
	SubmitterIDs []int64
	// Hold is where the connection's hold is (hold.go).
	Hold Hold
	// ReviewDue is the connection's next scheduled review date ("" for
	// none); Orphan why it is an orphan ("" when it is not).
	ReviewDue string
	Orphan    string
	// Orchestrator is the approved version's orchestrator (the current
	// version's before an approval): what a hold's notices describe
	// (HoldWording). "" reads as EKS.
	Orchestrator Orchestrator
}

// Effect is what a command decided. The zero parts are left alone.
type Effect struct {
	// By is who caused the command: the author of a new version, the
	// admin of a decision.
	By Actor
	// Next is the connection's state after the command (its state before
	// when the command moves nothing).
	Next State
	// Version is a new contract version, numbered CurrentVersion+1 (1 when
	// the command creates the connection).
	Version *Contract
	// Approve moves the connection's approved version to this one.
	Approve int
	// Amend moves the connection's amendment (nil: unchanged).
	Amend *Amendment
	// ReviewTriggers are the contract fields whose change calls for an
	// event-driven review (ReviewTriggers), recorded with the version.
	ReviewTriggers []string
	// Submitted stamps the time the request was (last) submitted.
	Submitted bool
	// Decision is an admin's decision row on a version.
	Decision *DecisionRecord
	// Adopt is the existing namespace an approval adopts, recorded with the
	// decided version.
	Adopt string
	// Cancel fails the connection's unfinished jobs it selects (a
	// revocation's: every other kind; a hold step's: the hold job it
	// supersedes); Job, if any, is due when the last lease among them
	// expires, so the two never run together. Nil cancels nothing.
	Cancel *JobCancel
	// Job is a job to queue.
	Job *JobOrder
	// Audit are the audit events, in order.
	Audit []AuditRecord
	// Notify is what the outbox tells people.
	Notify []Notice
	// Approvals is, for an approval, how many the version has with this one.
	Approvals int
	// OpenReview opens a review of the approved version (its row, with the
	// frozen evidence); CloseReview records the decision on the open one.
	OpenReview  *ReviewOrder
	CloseReview *ReviewOutcome
	// NoteReview adds a trigger that fired to the open review (a line of
	// its more triggers).
	NoteReview *ReviewNote
	// ReviewDue sets the connection's next scheduled review date (civil
	// date, NextReviewDue); "" leaves it.
	ReviewDue string
	// Hold moves the connection's hold (nil: unchanged); see hold.go.
	Hold *HoldChange
	// Orphan sets (non-nil) the connection's orphan flag: why it is an
	// orphan, or "" to clear it (OrphanReason).
	Orphan *string
}

// Writes reports whether the effect changes the connection's row.
func (e Effect) Writes(from State) bool {
	return e.Next != from || e.Version != nil || e.Approve != 0 || e.Submitted || e.Amend != nil || e.ReviewDue != "" || e.Hold != nil || e.Orphan != nil
}

// AuditOnly reports whether the effect records nothing but its audit
// events (none, or some): no write to the connection's row, no decision,
// job, review or notice. The store records such effects of many jobs at
// once (a re-apply batch's starts and completions).
func (e Effect) AuditOnly(from State) bool {
	return !e.Writes(from) && e.Decision == nil && e.Adopt == "" && e.Cancel == nil && e.Job == nil && len(e.Notify) == 0 &&
		len(e.ReviewTriggers) == 0 && e.OpenReview == nil && e.CloseReview == nil && e.NoteReview == nil
}

// JobCancel selects unfinished jobs of a connection for an effect to fail,
// and says why (the error each is left with). Exactly one of Kind and
// Except is set.
type JobCancel struct {
	// Kind selects the jobs of this kind; Except every job not of this kind.
	Kind, Except JobKind
	Reason       string
}

// Revocation's cancel: a revocation stops every other job of the connection.
var cancelForRevocation = JobCancel{Except: JobRevoke, Reason: "cancelled: the connection is being revoked"}

// A hold step's cancel: an unfinished hold job would apply a stopPolicy the
// hold no longer says.
var cancelSupersededHold = JobCancel{Kind: JobHold, Reason: "superseded: a newer hold step queued another hold job"}

// DecisionRecord is an admin's approval, rejection or change request of one
// version.
type DecisionRecord struct {
	Version int
	Hash    string
	Kind    string // approve, reject, request_changes
	Reason  string
}

// JobOrder is a job an effect queues. PlanHash pins a provisioning job to
// the plan its approver saw; the worker refuses another.
type JobOrder struct {
	Kind     JobKind
	Version  int
	PlanHash string
	// FromVersion, for an amendment, is the approved version it replaces:
	// what the new plan no longer contains is removed.
	FromVersion int
	// StopPolicy, for a hold job, is the Kueue stopPolicy it applies
	// (None, Hold, HoldAndDrain).
	StopPolicy string
}

// Check is the rule every job order meets, whichever command gave it (the
// store checks it again as it queues the job): a provisioning job is
// never queued unpinned (ErrUnpinned).
func (j JobOrder) Check() error {
	if j.Kind == JobProvision && j.PlanHash == "" {
		return ErrUnpinned
	}
	return nil
}

// AuditRecord is one audit event of an effect, about its connection.
type AuditRecord struct {
	Actor   Actor
	Action  string
	Version int
	Reason  string
	// JobRef prefixes the reason with the id of the job the effect queues
	// ("job 12; "), which only the store knows.
	JobRef bool
}

// Audience is who a notice is for.
type Audience string

// The audiences of notices. internal/notify resolves them at delivery time
// from every portal user's last known groups.
const (
	ToAdmins    Audience = "admins"      // every portal admin
	ToTeam      Audience = "team-owners" // the connection's team owners
	ToReviewers Audience = "reviewers"   // every portal reviewer
)

// NeedsFreshMembership reports whether delivering a notice to this
// audience needs the recipient's membership confirmed recently (issue 32
// item 1): a team's notices carry its reasons, holds and review texts, and
// someone moved out of the team must stop receiving them even if they
// never sign in again. The role audiences are the people mail exists to
// reach while they are away (an admin off for a day must still get the
// submission), and a person-addressed notice names its one recipient.
func (a Audience) NeedsFreshMembership() bool { return a == ToTeam }

// personPrefix marks an audience of one person, by email.
const personPrefix = "person:"

// PersonAudiencePrefix is how a ToPerson audience begins, for queries.
const PersonAudiencePrefix = personPrefix

// ToPerson is the audience of one person: the portal user whose email is
// email (case-insensitive), such as the owner a contract names for a
// signal. Nobody receives it until that person has signed in once.
func ToPerson(email string) Audience {
	return Audience(personPrefix + strings.ToLower(strings.TrimSpace(email)))
}

// Person returns the email of a one-person audience.
func (a Audience) Person() (string, bool) {
	email, ok := strings.CutPrefix(string(a), personPrefix)
	return email, ok && email != ""
}

// SignalFiredNotices are the notices of a signal that fired: to the person
// the contract names as its owner (usage.SignalStatus.Owner: the contract's
// signal of that kind, else its operations or cost owner), who responds;
// the cluster's signals, whose owner is the platform's admins rather than
// a person, go to the admins. Reviewers hear of it through the review the
// signal opens.
func SignalFiredNotices(team, title, detail, owner, response string) []Notice {
	subject := fmt.Sprintf("Signal fired: %s (%s)", title, detail)
	if team != "" {
		subject = fmt.Sprintf("Signal fired for team %s: %s (%s)", team, title, detail)
	}
	if response = strings.TrimSpace(response); response != "" {
		subject += ". Your response, per the contract: " + response
	}
	to := ToAdmins
	if owner = strings.ToLower(strings.TrimSpace(owner)); validEmail(owner) {
		to = ToPerson(owner)
	}
	return []Notice{{Kind: "signal.fired", To: to, Subject: subject}}
}

// Notice is one notification an effect leaves in the outbox.
type Notice struct {
	Kind    string // e.g. connection.submitted
	To      Audience
	Subject string
	// Body is text the mail and the webhook carry after the subject (the
	// in-app list shows the subject only); "" for most notices.
	Body string
}

// ApprovalMark is one admin's approval of a version: who, and when.
type ApprovalMark struct {
	By string // the admin's email
	At time.Time
}

// AlreadyApprovedError refuses an approval of a version that already has
// every approval it needs (a concurrent approval won the race); Last is
// the approval that completed it.
type AlreadyApprovedError struct {
	Version int
	Last    ApprovalMark
}

func (e *AlreadyApprovedError) Error() string {
	return fmt.Sprintf("version %d was already approved by %s at %s", e.Version, e.Last.By, e.Last.At.UTC().Format("2006-01-02 15:04:05 UTC"))
}

// The refusals of commands. Each is a rule; the store returns them as they
// are, and handlers turn them into pages.
var (
	// ErrUnpinned refuses an approval that does not name the version, the
	// contract hash and the plan hash it approves, and a provisioning retry
	// of an approval that named no plan.
	ErrUnpinned = errors.New("an approval must name the version, the contract hash and the plan hash it approves")
	// ErrNotIndependent refuses a decision (approval, rejection, change
	// request) by the requester, by an author of any version or by someone
	// who submitted the request.
	ErrNotIndependent = errors.New("nobody decides on a request they filed, submitted or edited")
	// ErrAlreadyDecided: this admin already approved this version, which
	// still waits for another admin's approval.
	ErrAlreadyDecided = errors.New("you already approved this version")
	// ErrVersionLimit refuses a save that would add a version to a
	// connection that already has MaxVersions.
	ErrVersionLimit = fmt.Errorf("a connection keeps at most %d contract versions", MaxVersions)
	// ErrReasonRequired: a revocation is recorded with why it happened.
	ErrReasonRequired = errors.New("a revocation needs a reason")
	// ErrOverCapacity refuses an approval whose guaranteed capacity does
	// not fit the cluster's free capacity.
	ErrOverCapacity = errors.New("the request does not fit the cluster's free capacity")
	// ErrClaimTaken refuses an approval of a contract naming a namespace or
	// role another connection holds; the error says which.
	ErrClaimTaken = errors.New("claimed by another connection")
	// ErrChecksDown refuses an approval whose checks could not run (the
	// database did not answer a lookup).
	ErrChecksDown = errors.New("the approval's checks could not run")
	// ErrNotProvisionable refuses an approval of a version the provisioner
	// cannot set up (a plan that cannot be built, an amendment of a field
	// that cannot change); the error says why.
	ErrNotProvisionable = errors.New("this version cannot be provisioned")
	// ErrManagesCluster refuses an approval while a contract's project or
	// access role is allowed a cluster lifecycle action; the error names
	// the role and the action.
	ErrManagesCluster = errors.New("a project-facing role may manage the cluster")
	// ErrRoleMissing refuses an approval while a contract's project or
	// access role does not exist in IAM (its lifecycle permissions cannot
	// be checked).
	ErrRoleMissing = errors.New("a project-facing role does not exist in IAM")
	// ErrForeignNamespace refuses an approval of a contract whose
	// namespace exists on the cluster, created by neither the portal nor
	// HyperPod, unless the approval adopts it explicitly.
	ErrForeignNamespace = errors.New("the namespace exists and is not the portal's")
	// ErrTeamChanged: the team of a connection never changes.
	ErrTeamChanged = errors.New("the team of a connection cannot change")
)

// StaleError says the connection moved on since the caller looked at it:
// someone saved a newer version, or the state changed. Nothing is recorded.
type StaleError struct {
	WantVersion    int
	WantHash       string
	CurrentVersion int
	CurrentHash    string
	State          State
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("the connection changed: you acted on version %d, it is now at version %d (%s)",
		e.WantVersion, e.CurrentVersion, e.State)
}

// Pin is the version (and contract hash) a person acted on. A zero Version
// pins nothing.
type Pin struct {
	Version int
	Hash    string
}

func (p Pin) check(c Conn) error {
	if p.Version == 0 {
		return nil
	}
	if c.CurrentVersion != p.Version || (p.Hash != "" && c.CurrentHash != p.Hash) {
		return &StaleError{WantVersion: p.Version, WantHash: p.Hash, CurrentVersion: c.CurrentVersion, CurrentHash: c.CurrentHash, State: c.State}
	}
	return nil
}
