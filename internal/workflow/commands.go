package workflow

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The commands people give. Each returns the Effect to record or the
// refusal; see effect.go.

func audit(by Actor, action string, version int, reason string) AuditRecord {
	return AuditRecord{Actor: by, Action: action, Version: version, Reason: reason}
}

// Create files a new request: a draft with contract version 1.
func Create(by Actor, c Contract, now time.Time) (Effect, error) {
	if now.IsZero() {
		return Effect{}, ErrNoClock
	}
	c = c.Normalize()
	return Effect{By: by, Next: StateDraft, Version: &c, Audit: []AuditRecord{audit(by, "connection.create", 1, "")}}, nil
}

// Edit saves c as a new version when it differs from the current one.
// base is the version the user edited: if someone saved since, a
// *StaleError. A save that changes nothing is an effect that writes nothing.
func Edit(s Conn, by Actor, base int, c Contract, now time.Time) (Effect, error) {
	c = c.Normalize()
	if s.CurrentVersion != base {
		return Effect{}, &StaleError{WantVersion: base, CurrentVersion: s.CurrentVersion, CurrentHash: s.CurrentHash, State: s.State}
	}
	if c.Team != s.Team {
		return Effect{}, fmt.Errorf("%w (%s -> %s)", ErrTeamChanged, s.Team, c.Team)
	}
	if s.State.Live() {
		return editAmendment(s, by, c, now)
	}
	next, err := Transition(s.State, EventEdit, now)
	if err != nil {
		return Effect{}, err
	}
	if c.Hash() == s.CurrentHash {
		return Effect{By: by, Next: s.State}, nil
	}
	// Versions are numbered 1..current and never deleted, so the current
	// number is how many there are. The store runs this inside its write
	// transaction: of two saves racing for the last version, the second
	// sees the first's row.
	if s.CurrentVersion >= MaxVersions {
		return Effect{}, ErrVersionLimit
	}
	return Effect{By: by, Next: next, Version: &c, Audit: []AuditRecord{audit(by, "contract.version", s.CurrentVersion+1, "")}}, nil
}

// editAmendment is Edit on a live connection: the change request. The
// first save opens it (a draft); a save identical to the approved version
// opens nothing.
func editAmendment(s Conn, by Actor, c Contract, now time.Time) (Effect, error) {
	if now.IsZero() {
		return Effect{}, ErrNoClock
	}
	next, err := AmendTransition(s.Amendment, EventEdit)
	if err != nil {
		return Effect{}, err
	}
	same := s.CurrentHash
	if s.Amendment == AmendNone {
		same = s.ApprovedHash
	}
	if c.Hash() == same {
		return Effect{By: by, Next: s.State}, nil
	}
	if s.CurrentVersion >= MaxVersions {
		return Effect{}, ErrVersionLimit
	}
	reason := ""
	if s.Amendment == AmendNone {
		reason = fmt.Sprintf("change requested on the active connection (version %d stays active until the change is approved and applied)", s.ApprovedVersion)
	}
	return Effect{By: by, Next: s.State, Amend: &next, Version: &c,
		Audit: []AuditRecord{audit(by, "contract.version", s.CurrentVersion+1, reason)}}, nil
}

// Submit sends the pinned version to the admins. (The contract's
// validation runs before: the handler shows its errors on the form.)
func Submit(s Conn, by Actor, pin Pin, now time.Time) (Effect, error) {
	if now.IsZero() {
		return Effect{}, ErrNoClock
	}
	if err := pin.check(s); err != nil {
		return Effect{}, err
	}
	if s.State.Live() {
		next, err := AmendTransition(s.Amendment, EventSubmit)
		if err != nil {
			return Effect{}, err
		}
		// The action is the request's: submitters are found by it, and a
		// submitter never decides on what they submitted.
		return Effect{By: by, Next: s.State, Amend: &next, Submitted: true,
			Audit:  []AuditRecord{audit(by, "connection.submit", s.CurrentVersion, fmt.Sprintf("change to the active version %d", s.ApprovedVersion))},
			Notify: []Notice{{Kind: "amendment.submitted", To: ToAdmins, Subject: fmt.Sprintf("Connection #%d of team %s: a change (version %d) to the active version %d waits for approval", s.ID, s.Team, s.CurrentVersion, s.ApprovedVersion)}},
		}, nil
	}
	next, err := Transition(s.State, EventSubmit, now)
	if err != nil {
		return Effect{}, err
	}
	return Effect{By: by, Next: next, Submitted: true,
		Audit:  []AuditRecord{audit(by, "connection.submit", s.CurrentVersion, "")},
		Notify: []Notice{{Kind: "connection.submitted", To: ToAdmins, Subject: fmt.Sprintf("Connection request #%d of team %s (version %d) waits for approval", s.ID, s.Team, s.CurrentVersion)}},
	}, nil
}

// Withdraw is the owner taking a request back before approval.
func Withdraw(s Conn, by Actor, reason string, now time.Time) (Effect, error) {
	if now.IsZero() {
		return Effect{}, ErrNoClock
	}
	if s.State.Live() {
		next, err := AmendTransition(s.Amendment, EventWithdraw)
		if err != nil {
			return Effect{}, err
		}
		return Effect{By: by, Next: s.State, Amend: &next,
			Audit: []AuditRecord{audit(by, "amendment.withdraw", s.CurrentVersion, reason)}}, nil
	}
	next, err := Transition(s.State, EventWithdraw, now)
	if err != nil {
		return Effect{}, err
	}
	return Effect{By: by, Next: next, Audit: []AuditRecord{audit(by, "connection.withdraw", s.CurrentVersion, reason)}}, nil
}

// independentOf is the approval's independence rule, against the rows as the
// store read them inside its transaction: nobody decides on a request they
// filed, edited (any version) or submitted.
func independentOf(s Conn, by Actor) error {
	if by.ID == s.RequesterID || slices.Contains(s.EditorIDs, by.ID) || slices.Contains(s.SubmitterIDs, by.ID) {
		return ErrNotIndependent
	}
	return nil
}

// SendBack is an admin's rejection (EventReject) or change request
// (EventRequestChanges) of the pinned version, with the reason the team
// reads.
func SendBack(s Conn, by Actor, ev Event, pin Pin, reason string, now time.Time) (Effect, error) {
	if now.IsZero() {
		return Effect{}, ErrNoClock
	}
	kind, action, subject := "reject", "connection.reject", "was rejected"
	switch ev {
	case EventReject:
	case EventRequestChanges:
		kind, action, subject = "request_changes", "connection.request_changes", "was sent back for changes"
	default:
		return Effect{}, fmt.Errorf("workflow: %s is not a decision to send a request back", ev)
	}
	if err := pin.check(s); err != nil {
		return Effect{}, err
	}
	if s.State.Live() {
		next, err := AmendTransition(s.Amendment, ev)
		if err != nil {
			return Effect{}, err
		}
		if err := independentOf(s, by); err != nil {
			return Effect{}, err
		}
		action = strings.Replace(action, "connection.", "amendment.", 1)
		return Effect{By: by, Next: s.State, Amend: &next,
			Decision: &DecisionRecord{Version: s.CurrentVersion, Hash: s.CurrentHash, Kind: kind, Reason: reason},
			Audit:    []AuditRecord{audit(by, action, s.CurrentVersion, reason)},
			Notify: []Notice{{Kind: action, To: ToTeam, Subject: fmt.Sprintf("The change (version %d) to connection #%d %s: %s; version %d stays active",
				s.CurrentVersion, s.ID, subject, reason, s.ApprovedVersion)}},
		}, nil
	}
	next, err := Transition(s.State, ev, now)
	if err != nil {
		return Effect{}, err
	}
	if err := independentOf(s, by); err != nil {
		return Effect{}, err
	}
	return Effect{By: by, Next: next,
		Decision: &DecisionRecord{Version: s.CurrentVersion, Hash: s.CurrentHash, Kind: kind, Reason: reason},
		Audit:    []AuditRecord{audit(by, action, s.CurrentVersion, reason)},
		Notify:   []Notice{{Kind: action, To: ToTeam, Subject: fmt.Sprintf("Connection request #%d (version %d) %s: %s", s.ID, s.CurrentVersion, subject, reason)}},
	}, nil
}

// ApprovalInput is what an approving admin sends: exactly what they saw.
type ApprovalInput struct {
	Version  int
	Hash     string
	PlanHash string
	Reason   string
	// Adopt is the existing namespace the admin adopts explicitly, "" for
	// none.
	Adopt string
}

// ApprovalFacts are what an approval's rules read. The store loads the
// database's part inside its transaction; the cluster's part (the plan
// could be built, the namespace's owner) the caller learns before it.
type ApprovalFacts struct {
	// Contract is the current version's contract.
	Contract Contract
	// Approved, for an amendment, is the approved version's contract: the
	// one running now.
	Approved Contract
	// ApproverIDs are the admins who already approved the current version,
	// oldest first; LastApproval is who approved it last, and when.
	ApproverIDs  []int64
	LastApproval ApprovalMark
	// Inventory is the cluster's capacity per instance type, Committed the
	// guaranteed capacity other live connections hold.
	Inventory map[string]int
	Committed []Capacity
	// Claims are the contract's namespaces and roles that other
	// connections hold (Contract.ClaimConflicts), ChecksDown the lookup
	// that could not be answered.
	Claims     []string
	ChecksDown error
	ClusterFacts
}

// ClusterFacts are what the approving handler learns from the cluster
// before the store's transaction. Both are about the version the approval
// names, which never changes, and the command checks that it is still the
// current one.
type ClusterFacts struct {
	// PlanError is why the provisioning plan of the version cannot be
	// built on this cluster (nil: it can).
	PlanError error
	// ForeignNamespace is the contract's namespace when it exists on the
	// cluster and neither the portal nor HyperPod created it.
	ForeignNamespace string
	// ManagesCluster lists what the contract's project-facing roles (the
	// project role and the access role) are allowed of the cluster's
	// lifecycle, by IAM's policy simulation ("<role> may <action>"); the
	// seed's rule is that they get none. LifecycleUnchecked says why that
	// simulation could not run ("" when it ran, or when no AWS side is
	// configured to run it).
	ManagesCluster     []string
	LifecycleUnchecked string
	// MissingRoles are the project-facing roles IAM does not have: their
	// lifecycle permissions cannot be checked, and a role created after
	// the approval could hold any, so the approval waits for them.
	MissingRoles []string
}

// approvalRefused is every rule an approval must pass once its transition
// is allowed, in the order their refusals are said: independence, one
// approval per admin, a provisionable version, a pinned plan, roles that
// cannot manage the cluster and exist, the namespace taken over only when
// adopted, capacity, the checks that could run, and claims.
func approvalRefused(s Conn, by Actor, in ApprovalInput, f ApprovalFacts, amending bool) error {
	if err := independentOf(s, by); err != nil {
		return err
	}
	if slices.Contains(f.ApproverIDs, by.ID) {
		return ErrAlreadyDecided
	}
	c := f.Contract
	// A version whose plan cannot be built (EKS objects, or a Slurm
	// contract's accounting) would only fail its job.
	if f.PlanError != nil {
		return fmt.Errorf("%w on this cluster: %w", ErrNotProvisionable, f.PlanError)
	}
	if amending {
		if fe := AmendmentErrors(f.Approved, c); len(fe) > 0 {
			return fmt.Errorf("%w as a change: %s %s", ErrNotProvisionable, FieldLabel(fe[0].Field), fe[0].Message)
		}
	}
	if in.PlanHash == "" {
		return ErrUnpinned
	}
	// A project-facing role must not manage the cluster (create, update
	// or delete it, its nodes, software, scheduler config or compute
	// quotas): the approval waits until IAM no longer allows it.
	if len(f.ManagesCluster) > 0 {
		return fmt.Errorf("%w: %s", ErrManagesCluster, strings.Join(f.ManagesCluster, "; "))
	}
	if len(f.MissingRoles) > 0 {
		return fmt.Errorf("%w: %s", ErrRoleMissing, strings.Join(f.MissingRoles, ", "))
	}
	if f.LifecycleUnchecked != "" {
		return fmt.Errorf("%w: %s", ErrChecksDown, f.LifecycleUnchecked)
	}
	if f.ForeignNamespace != "" && in.Adopt != f.ForeignNamespace {
		return fmt.Errorf("%w: %s", ErrForeignNamespace, f.ForeignNamespace)
	}
	if in.Adopt != "" && !slices.Contains(c.Namespaces, in.Adopt) {
		return fmt.Errorf("workflow: the contract does not name namespace %q, which the approval adopts", in.Adopt)
	}
	// An amendment's increase must fit; its decrease always does.
	if !ApprovalCapacity(f.Inventory, f.Committed, amending, f.Approved.Scheduling.Guaranteed, c.Scheduling.Guaranteed).OK() {
		return ErrOverCapacity
	}
	if f.ChecksDown != nil {
		return fmt.Errorf("%w: %w", ErrChecksDown, f.ChecksDown)
	}
	if len(f.Claims) > 0 {
		return fmt.Errorf("%w: %s", ErrClaimTaken, strings.Join(f.Claims, "; "))
	}
	return nil
}

// Approve records an admin's approval of exactly (version, hash, plan).
// A restricted contract needs two distinct admins: the approval that
// completes the count moves the connection to approved, sets its approved
// version and queues the provisioning job pinned to the plan; an earlier one
// is recorded alone ("connection.approve_partial").
func Approve(s Conn, by Actor, in ApprovalInput, f ApprovalFacts, now time.Time) (Effect, error) {
	if now.IsZero() {
		return Effect{}, ErrNoClock
	}
	// An approval names exactly what it approves: without the version,
	// the contract hash and the plan hash it would approve whatever is
	// current and queue an unpinned job. (A version that cannot be
	// provisioned has no plan to name: that refusal comes first, as its
	// page offers no approval.)
	if in.Version == 0 || in.Hash == "" {
		return Effect{}, ErrUnpinned
	}
	if err := (Pin{Version: in.Version, Hash: in.Hash}).check(s); err != nil {
		return Effect{}, err
	}
	amending := s.State.Live()
	// How many distinct admins must approve is a property of the version
	// approved (restricted data: two); a change to a restricted connection
	// needs two as well, whatever it moves the classification to.
	needed := ApprovalsNeeded(f.Contract.DataClassification)
	if amending {
		needed = ChangeApprovalsNeeded(f.Approved.DataClassification, f.Contract.DataClassification)
	}
	var (
		next      State
		nextAmend Amendment
		err       error
	)
	if amending {
		next = s.State
		nextAmend, err = AmendTransition(s.Amendment, EventApprove)
	} else {
		next, err = Transition(s.State, EventApprove, now)
	}
	if err != nil {
		// No approval is waited for any more, and this version has every
		// approval it needs: another approval won a race with this one.
		// Said as what happened (issue 32 item 8), not as the state
		// machine's refusal of an approved connection.
		if len(f.ApproverIDs) >= needed {
			return Effect{}, &AlreadyApprovedError{Version: s.CurrentVersion, Last: f.LastApproval}
		}
		return Effect{}, err
	}
	if err := approvalRefused(s, by, in, f, amending); err != nil {
		return Effect{}, err
	}
	c := f.Contract
	e := Effect{By: by, Next: s.State, Approvals: len(f.ApproverIDs) + 1,
		Decision: &DecisionRecord{Version: s.CurrentVersion, Hash: s.CurrentHash, Kind: "approve", Reason: in.Reason}}
	if in.Adopt != "" {
		e.Adopt = in.Adopt
		e.Audit = append(e.Audit, audit(by, "connection.adopt_namespace", s.CurrentVersion,
			"adopted the existing namespace "+in.Adopt+", which neither the portal nor HyperPod created: the portal may take it over"))
	}
	if e.Approvals < needed {
		action := "connection.approve_partial"
		if amending {
			action = "amendment.approve_partial"
		}
		e.Audit = append(e.Audit, audit(by, action, s.CurrentVersion, in.Reason))
		return e, nil
	}
	if amending {
		// The job applies the change in place; the approved version moves
		// only when every step is done (OnJobSucceeded).
		e.Amend = &nextAmend
		e.Job = &JobOrder{Kind: JobAmend, Version: s.CurrentVersion, PlanHash: in.PlanHash, FromVersion: s.ApprovedVersion}
		e.ReviewTriggers = ReviewTriggers(f.Approved, c)
		what := "change"
		if IsRenewal(f.Approved, c) {
			what = "renewal (end date " + f.Approved.EndDate + " → " + c.EndDate + ")"
		}
		e.Audit = append(e.Audit, audit(by, "amendment.approve", s.CurrentVersion, in.Reason))
		e.Notify = []Notice{{Kind: "amendment.approved", To: ToTeam, Subject: fmt.Sprintf("The %s (version %d) to connection #%d was approved: it is being applied; version %d stays active until it is",
			what, s.CurrentVersion, s.ID, s.ApprovedVersion)}}
		return e, nil
	}
	// The approval and its provisioning job commit together, the job
	// pinned to the plan the approver saw.
	e.Next, e.Approve = next, s.CurrentVersion
	e.Job = &JobOrder{Kind: JobProvision, Version: s.CurrentVersion, PlanHash: in.PlanHash}
	e.Audit = append(e.Audit, audit(by, "connection.approve", s.CurrentVersion, in.Reason))
	e.Notify = []Notice{{Kind: "connection.approved", To: ToTeam, Subject: fmt.Sprintf("Connection request #%d (version %d) was approved: provisioning starts", s.ID, s.CurrentVersion)}}
	return e, nil
}

// Revoke starts the removal of a connection's access: to revoking, every
// other unfinished job cancelled, a revoke job of the approved version.
func Revoke(s Conn, by Actor, reason string, now time.Time) (Effect, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return Effect{}, ErrReasonRequired
	}
	next, err := Transition(s.State, EventRevoke, now)
	if err != nil {
		return Effect{}, err
	}
	if s.ApprovedVersion == 0 {
		// The lifecycle allows revoke only from approval on.
		return Effect{}, fmt.Errorf("workflow: connection %d is %s but has no approved version", s.ID, s.State)
	}
	c := cancelForRevocation
	e := Effect{By: by, Next: next, Cancel: &c,
		Job:    &JobOrder{Kind: JobRevoke, Version: s.ApprovedVersion},
		Audit:  []AuditRecord{audit(by, "connection.revoke", s.ApprovedVersion, reason)},
		Notify: []Notice{{Kind: "connection.revoke", To: ToTeam, Subject: fmt.Sprintf("Connection #%d of team %s is being revoked: %s", s.ID, s.Team, reason)}},
	}
	if s.Amendment.Open() {
		// An open change ends with the connection (its job, if any, is
		// cancelled with the others).
		none := AmendNone
		e.Amend = &none
	}
	return e, nil
}

// jobQueues says, per kind a person may queue again, the states it may be
// queued in, the event a refusal names and its audit action.
var jobQueues = map[JobKind]struct {
	states  []State
	refusal Event
	action  string
}{
	// Only an approved connection can start provisioning.
	JobProvision: {[]State{StateApproved}, EventStartProvisioning, "provisioning.enqueue"},
	// Re-applying fixes drift on a live connection.
	JobReapply: {[]State{StateActive, StateUnderReview}, EventStartProvisioning, "reapply.enqueue"},
	// A failed revocation is tried again while the connection is revoking.
	JobRevoke: {[]State{StateRevoking}, EventRevocationDone, "revocation.enqueue"},
	// A failed amendment is tried again on the live connection.
	JobAmend: {[]State{StateActive, StateUnderReview}, EventStartProvisioning, "amendment.enqueue"},
	// A failed hold job is tried again on the live connection: it applies
	// the stopPolicy the hold says now.
	JobHold: {[]State{StateActive, StateUnderReview}, EventStartProvisioning, "hold.enqueue"},
}

// QueueJob queues a job of kind again: provision after a failure or a dry
// run (pinned to the plan the approval named, pinned; "" refuses with
// ErrUnpinned), reapply to fix drift, revoke after a failed revocation (all
// three of the approved version), amend after a failed amendment (of the
// amendment's version, pinned likewise). The state does not change.
func QueueJob(s Conn, by Actor, kind JobKind, pinned, reason string, now time.Time) (Effect, error) {
	if now.IsZero() {
		return Effect{}, ErrNoClock
	}
	q, ok := jobQueues[kind]
	if !ok {
		return Effect{}, fmt.Errorf("workflow: %s jobs are not queued by hand", kind)
	}
	if !slices.Contains(q.states, s.State) {
		return Effect{}, &TransitionError{From: s.State, Event: q.refusal}
	}
	planHash := ""
	if kind == JobProvision || kind == JobAmend {
		if pinned == "" {
			return Effect{}, ErrUnpinned
		}
		planHash = pinned
	}
	e := Effect{By: by, Next: s.State, Job: &JobOrder{Kind: kind, Version: s.ApprovedVersion, PlanHash: planHash}}
	if kind == JobAmend {
		next, err := AmendTransition(s.Amendment, EventStartProvisioning)
		if err != nil || s.Amendment != AmendFailed {
			return Effect{}, &AmendmentError{From: s.Amendment, Event: EventStartProvisioning}
		}
		e.Amend = &next
		e.Job.Version, e.Job.FromVersion = s.CurrentVersion, s.ApprovedVersion
	}
	if kind == JobHold {
		e.Job.StopPolicy = s.Hold.StopPolicy()
	}
	rec := audit(by, q.action, e.Job.Version, reason)
	rec.JobRef = true
	e.Audit = []AuditRecord{rec}
	return e, nil
}

// RetryHoldJob queues the hold job of a live connection again (after one
// failed), applying the stopPolicy the hold says now (QueueJob). While a
// hold job is queued or running (open, a fact the store reads in the
// transaction) it refuses with ErrJobOpen: a retry does not supersede one;
// a hold step does.
func RetryHoldJob(s Conn, by Actor, open bool, reason string, now time.Time) (Effect, error) {
	if open {
		return Effect{}, ErrJobOpen
	}
	return QueueJob(s, by, JobHold, "", reason, now)
}

// PersonTransition is the command of a lifecycle event a person gives
// outside an approval and a revocation: an owner's submit or withdraw, an
// admin's rejection or change request. Any other event gets the
// lifecycle's refusal when the state does not allow it, and otherwise
// says where that event is made.
func PersonTransition(s Conn, by Actor, ev Event, pin Pin, reason string, now time.Time) (Effect, error) {
	switch ev {
	case EventSubmit:
		return Submit(s, by, pin, now)
	case EventWithdraw:
		// A pinned withdrawal (the API's If-Match) withdraws only the
		// version its caller saw.
		if err := pin.check(s); err != nil {
			return Effect{}, err
		}
		return Withdraw(s, by, reason, now)
	case EventReject, EventRequestChanges:
		return SendBack(s, by, ev, pin, reason, now)
	}
	if _, err := Transition(s.State, ev, now); err != nil {
		return Effect{}, err
	}
	return Effect{}, fmt.Errorf("store: %s is not a transition a person makes here (approvals: Approve; revocations: Revoke; the rest: the provisioner's jobs)", ev)
}
