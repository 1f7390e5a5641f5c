package workflow

import (
	"fmt"
	"slices"
	"strings"
)

// Amendments. A live connection (active or under review) keeps running on
// its approved version while its owner changes the contract: "Request a
// change" saves a new version, which goes through the same submission and
// approval as a request, and a job applies it in place. The connection's
// state stays what it is the whole time; the amendment has a small
// lifecycle of its own, driven by the same events.

// Amendment is where the change request of a live connection is.
type Amendment string

// The amendment states. AmendNone: no change is open (the connection runs
// its approved version, and the latest saved version, if newer, was
// withdrawn or rejected).
const (
	AmendNone             Amendment = ""
	AmendDraft            Amendment = "draft"
	AmendSubmitted        Amendment = "submitted"
	AmendChangesRequested Amendment = "changes_requested"
	// AmendApproved: approved, its job applying it; the approved version
	// moves when every step is done.
	AmendApproved Amendment = "approved"
	// AmendFailed: its job gave up; the approved version still runs, and
	// an admin may try again.
	AmendFailed Amendment = "failed"
)

// AllAmendments lists the amendment states in order.
var AllAmendments = []Amendment{AmendNone, AmendDraft, AmendSubmitted, AmendChangesRequested, AmendApproved, AmendFailed}

// amendTransitions is the amendment's lifecycle: the same decisions as a
// request's (edit, submit, withdraw, approve, reject, request changes) and
// the job's reports (start_provisioning to start or retry the job,
// provisioning_succeeded, provisioning_failed). Rejecting, requesting
// changes on or withdrawing an amendment leaves the approved version as it
// is.
var amendTransitions = map[Amendment]map[Event]Amendment{
	AmendNone: {EventEdit: AmendDraft},
	AmendDraft: {
		EventEdit: AmendDraft, EventSubmit: AmendSubmitted, EventWithdraw: AmendNone,
	},
	AmendSubmitted: {
		EventApprove: AmendApproved, EventReject: AmendNone, EventRequestChanges: AmendChangesRequested, EventWithdraw: AmendNone,
	},
	AmendChangesRequested: {
		EventEdit: AmendChangesRequested, EventSubmit: AmendSubmitted, EventWithdraw: AmendNone,
	},
	AmendApproved: {
		EventStartProvisioning: AmendApproved, EventProvisioningSucceeded: AmendNone, EventProvisioningFailed: AmendFailed,
	},
	AmendFailed: {EventStartProvisioning: AmendApproved},
}

// amendEvents are the events that, on a live connection, belong to its
// amendment rather than to the connection's own lifecycle.
var amendEvents = []Event{EventEdit, EventSubmit, EventWithdraw, EventApprove, EventReject, EventRequestChanges}

// LiveStates are the states of a live connection: it runs on the cluster
// and may be amended (active or under review). Every live state is
// committed; not every committed state is live (CommittedStates).
var LiveStates = []State{StateActive, StateUnderReview}

// Live reports whether a connection in s runs on the cluster and may be
// amended (LiveStates).
func (s State) Live() bool { return slices.Contains(LiveStates, s) }

// CommittedAmendments are the amendments of a live connection whose
// version's guaranteed capacity it holds besides its approved version's
// (the larger of the two, per instance type): an approved change is
// committed from its approval on, and stays so while it waits to be tried
// again after it failed to apply. internal/store builds its capacity SQL
// from this list.
var CommittedAmendments = []Amendment{AmendApproved, AmendFailed}

// Committed reports whether the change a holds capacity
// (CommittedAmendments).
func (a Amendment) Committed() bool { return slices.Contains(CommittedAmendments, a) }

// Valid reports whether a is one of AllAmendments.
func (a Amendment) Valid() bool { return slices.Contains(AllAmendments, a) }

// Open reports whether a change is open: saved and not yet applied,
// withdrawn or rejected.
func (a Amendment) Open() bool { return a != AmendNone }

var amendLabels = map[Amendment]string{
	AmendNone:             "",
	AmendDraft:            "draft",
	AmendSubmitted:        "in review",
	AmendChangesRequested: "changes requested",
	AmendApproved:         "approved, being applied",
	AmendFailed:           "failed to apply",
}

// Label is a for people: "in review".
func (a Amendment) Label() string { return labelOr(amendLabels, a) }

// AmendTransition is the amendment's lifecycle: where an amendment in a
// goes when e happens, or a *AmendmentError.
func AmendTransition(a Amendment, e Event) (Amendment, error) {
	next, ok := amendTransitions[a][e]
	if !ok {
		return "", &AmendmentError{From: a, Event: e}
	}
	return next, nil
}

// AmendmentError is the refusal of an event the amendment's state does not
// allow.
type AmendmentError struct {
	From  Amendment
	Event Event
}

func (e *AmendmentError) Error() string {
	if e.From == AmendNone {
		return fmt.Sprintf("no change is open on this connection, so nothing can be %s", eventPhrases[e.Event])
	}
	return fmt.Sprintf("a change %s cannot be %s", e.From.Label(), eventPhrases[e.Event])
}

// allowsOn is allows with amendments: on a live connection the person's
// decisions are its amendment's.
func allowsOn(s State, a Amendment, e Event) bool {
	if s.Live() && slices.Contains(amendEvents, e) {
		_, ok := amendTransitions[a][e]
		return ok
	}
	return allows(s, e)
}

// ReviewTriggerFields are the contract fields whose change, in an approved
// amendment, calls for an event-driven review (mission: owners, roles,
// account, region, data classification, monitored signals). The reviews
// issue acts on the triggers; amendments record them.
var ReviewTriggerFields = []string{
	"business_owner", "operations_owner", "cost_owner", "exception_owner",
	"project_role_arn", "access_role_arn", "workload_role_arn",
	"account_id", "region", "data_classification", "signals",
}

// ReviewTriggers are the fields among ReviewTriggerFields that change from
// old to new, in that order.
func ReviewTriggers(old, new Contract) []string {
	changed := map[string]bool{}
	for _, ch := range Diff(old, new) {
		changed[topField(ch.Field)] = true
	}
	var out []string
	for _, f := range ReviewTriggerFields {
		if changed[f] {
			out = append(out, f)
		}
	}
	return out
}

// topField is the field of a change's path: "signals[1].owner" is
// "signals".
func topField(path string) string {
	if i := strings.IndexAny(path, "[."); i >= 0 && !strings.HasPrefix(path, "scheduling.") && !strings.HasPrefix(path, "slurm_scope.") {
		return path[:i]
	}
	return path
}

// IsRenewal reports whether an amendment only moves the end date.
func IsRenewal(old, new Contract) bool {
	ch := Diff(old, new)
	return len(ch) == 1 && ch[0].Field == "end_date"
}

// AmendCapacity is the capacity math of an amendment: an increase must
// fit, a decrease always fits. Per instance type, a count no larger than the
// approved version's (Held) passes whatever the cluster's state (the
// connection already holds it); a larger one must fit with every other
// connection's commitment. The approval page shows it; Approve refuses a
// change whose report is not OK.
func AmendCapacity(inventory map[string]int, committed []Capacity, approved, requested []Capacity) CapacityReport {
	held := map[string]int{}
	for _, c := range approved {
		held[strings.ToLower(strings.TrimSpace(c.InstanceType))] += c.Count
	}
	rep := CheckCapacity(inventory, committed, requested)
	for i := range rep.Rows {
		r := &rep.Rows[i]
		r.Held = held[r.InstanceType]
		r.OK = r.OK || r.Requested <= r.Held
	}
	return rep
}

// ChangeApprovalsNeeded is how many distinct admins must approve a change
// to a live connection: what its new version's data needs, and two when
// the running version's data is restricted, whatever the change moves the
// classification to (taking data out of restricted is as sensitive).
func ChangeApprovalsNeeded(approved, changed DataClassification) int {
	return max(ApprovalsNeeded(approved), ApprovalsNeeded(changed))
}

// immutableInAmendment are the fields an amendment may not change: the
// namespaces hold the team's workloads (moving them is a new connection),
// and the orchestrator decides what the provisioner builds at all.
var immutableInAmendment = []string{"namespaces", "orchestrator", "cluster_name", "team"}

// AmendmentErrors are the field errors of an amendment: the changes
// immutableInAmendment refuses, against the approved contract.
func AmendmentErrors(approved, c Contract) FieldErrors {
	var fe FieldErrors
	for _, ch := range Diff(approved, c) {
		f := topField(ch.Field)
		if slices.Contains(immutableInAmendment, f) && !slices.ContainsFunc(fe, func(e FieldError) bool { return e.Field == f }) {
			fe = append(fe, FieldError{Field: f, Message: "cannot change on an active connection (it is " + FieldLabel(f) + " " +
				quoteShown(ch.Old) + " in the approved version); revoke the connection and file a new request to move it"})
		}
	}
	return fe
}

func quoteShown(s string) string {
	if s == "" {
		return "empty"
	}
	return fmt.Sprintf("%q", s)
}
