package workflow

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// State is where a connection is in its lifecycle.
type State string

// The lifecycle states. Rejected, withdrawn and revoked are terminal.
const (
	StateDraft            State = "draft"
	StateSubmitted        State = "submitted"
	StateChangesRequested State = "changes_requested"
	StateApproved         State = "approved"
	StateRejected         State = "rejected"
	StateWithdrawn        State = "withdrawn"
	StateProvisioning     State = "provisioning"
	StateActive           State = "active"
	StateUnderReview      State = "under_review"
	StateRevoking         State = "revoking"
	StateRevoked          State = "revoked"
)

// AllStates lists the states in lifecycle order.
var AllStates = []State{
	StateDraft, StateSubmitted, StateChangesRequested, StateApproved, StateRejected, StateWithdrawn,
	StateProvisioning, StateActive, StateUnderReview, StateRevoking, StateRevoked,
}

// Event is something that happens to a connection: a person's decision or a
// report from the provisioner.
type Event string

// The lifecycle events.
const (
	EventEdit                  Event = "edit"
	EventSubmit                Event = "submit"
	EventRequestChanges        Event = "request_changes"
	EventApprove               Event = "approve"
	EventReject                Event = "reject"
	EventWithdraw              Event = "withdraw"
	EventStartProvisioning     Event = "start_provisioning"
	EventProvisioningSucceeded Event = "provisioning_succeeded"
	EventProvisioningFailed    Event = "provisioning_failed"
	EventStartReview           Event = "start_review"
	EventRenew                 Event = "renew"
	EventReviewHold            Event = "review_hold"
	EventRevoke                Event = "revoke"
	EventRevocationDone        Event = "revocation_done"
)

// AllEvents lists the events in lifecycle order.
var AllEvents = []Event{
	EventEdit, EventSubmit, EventRequestChanges, EventApprove, EventReject, EventWithdraw,
	EventStartProvisioning, EventProvisioningSucceeded, EventProvisioningFailed,
	EventStartReview, EventRenew, EventReviewHold, EventRevoke, EventRevocationDone,
}

// transitions is the whole lifecycle: state -> event -> next state. A pair
// that is not here is refused. Decisions the mission leaves open:
//
//   - edit keeps the state. An owner saves new versions of a draft or of a
//     request sent back for changes; a changes_requested request stays so
//     until it is resubmitted, so the team's list keeps saying whose move it
//     is. A submitted request cannot be edited: the admin sends it back
//     first, or the owner withdraws it. (Approvals bind to a version's hash
//     anyway, so an edit can never slip under an approval.)
//   - approve is fired by the approval that completes the count
//     (ApprovalsNeeded); earlier approvals of a restricted contract are
//     recorded without a transition.
//   - withdraw is the owner's, and only before approval.
//   - provisioning_failed returns to approved: the approval stands, nothing
//     is half active, and start_provisioning tries again. The provisioner
//     retries with backoff inside provisioning and fires provisioning_failed
//     only when it gives up; the reason goes to the audit trail.
//   - revoke is possible from every state that may hold cloud or cluster
//     objects (approved, provisioning, active, under_review) and always goes
//     through revoking, where the provisioner removes access in a safe order
//     and reports revocation_done, even when there was nothing to remove.
//   - A review ends in renew (back to active), review_hold (back to active
//     with a hold proposed, which an admin confirms), revoke, or request_changes,
//     which also returns to active: the connection keeps running while the
//     owner amends the contract, and a live connection never passes through
//     a pre-approval state whose exits (withdrawn, rejected) are terminal
//     while its objects still exist.
var transitions = map[State]map[Event]State{
	StateDraft: {
		EventEdit:     StateDraft,
		EventSubmit:   StateSubmitted,
		EventWithdraw: StateWithdrawn,
	},
	StateSubmitted: {
		EventRequestChanges: StateChangesRequested,
		EventApprove:        StateApproved,
		EventReject:         StateRejected,
		EventWithdraw:       StateWithdrawn,
	},
	StateChangesRequested: {
		EventEdit:     StateChangesRequested,
		EventSubmit:   StateSubmitted,
		EventWithdraw: StateWithdrawn,
	},
	StateApproved: {
		EventStartProvisioning: StateProvisioning,
		EventRevoke:            StateRevoking,
	},
	StateProvisioning: {
		EventProvisioningSucceeded: StateActive,
		EventProvisioningFailed:    StateApproved,
		EventRevoke:                StateRevoking,
	},
	StateActive: {
		EventStartReview: StateUnderReview,
		EventRevoke:      StateRevoking,
	},
	StateUnderReview: {
		EventRenew:          StateActive,
		EventReviewHold:     StateActive,
		EventRequestChanges: StateActive,
		EventRevoke:         StateRevoking,
	},
	StateRevoking: {
		EventRevocationDone: StateRevoked,
	},
	StateRejected:  {},
	StateWithdrawn: {},
	StateRevoked:   {},
}

// ErrNoClock is returned by Transition when it is given no time: every
// transition is recorded with the time it happened, and that time comes from
// the caller's clock.
var ErrNoClock = errors.New("workflow: a transition needs the current time")

// TransitionError is the refusal of an event the state does not allow.
type TransitionError struct {
	From  State
	Event Event
}

func (e *TransitionError) Error() string {
	switch {
	case !e.From.Valid():
		return fmt.Sprintf("unknown state %q", e.From)
	case !e.Event.Valid():
		return fmt.Sprintf("unknown event %q", e.Event)
	}
	return fmt.Sprintf("%s cannot be %s", statePhrases[e.From], eventPhrases[e.Event])
}

var statePhrases = map[State]string{
	StateDraft:            "a draft",
	StateSubmitted:        "a submitted request",
	StateChangesRequested: "a request sent back for changes",
	StateApproved:         "an approved connection",
	StateRejected:         "a rejected request",
	StateWithdrawn:        "a withdrawn request",
	StateProvisioning:     "a connection being provisioned",
	StateActive:           "an active connection",
	StateUnderReview:      "a connection under review",
	StateRevoking:         "a connection being revoked",
	StateRevoked:          "a revoked connection",
}

var eventPhrases = map[Event]string{
	EventEdit:                  "edited",
	EventSubmit:                "submitted",
	EventRequestChanges:        "sent back for changes",
	EventApprove:               "approved",
	EventReject:                "rejected",
	EventWithdraw:              "withdrawn",
	EventStartProvisioning:     "provisioned",
	EventProvisioningSucceeded: "marked as provisioned",
	EventProvisioningFailed:    "marked as failed to provision",
	EventStartReview:           "put under review",
	EventRenew:                 "renewed",
	EventReviewHold:            "put on hold by a review",
	EventRevoke:                "revoked",
	EventRevocationDone:        "marked as revoked",
}

var stateLabels = map[State]string{
	StateDraft:            "Draft",
	StateSubmitted:        "Submitted",
	StateChangesRequested: "Changes requested",
	StateApproved:         "Approved",
	StateRejected:         "Rejected",
	StateWithdrawn:        "Withdrawn",
	StateProvisioning:     "Provisioning",
	StateActive:           "Active",
	StateUnderReview:      "Under review",
	StateRevoking:         "Revoking",
	StateRevoked:          "Revoked",
}

// Transition is the lifecycle: the state a connection in s moves to when e
// happens at now, or a *TransitionError when s does not allow e. It is pure;
// who may cause an event is Decide's business.
func Transition(s State, e Event, now time.Time) (State, error) {
	if now.IsZero() {
		return "", ErrNoClock
	}
	next, ok := transitions[s][e]
	if !ok {
		return "", &TransitionError{From: s, Event: e}
	}
	return next, nil
}

// NextEvents lists the events s allows, in AllEvents order: the buttons a
// page may offer (Decide still says who may press them).
func NextEvents(s State) []Event {
	var out []Event
	for _, e := range AllEvents {
		if _, ok := transitions[s][e]; ok {
			out = append(out, e)
		}
	}
	return out
}

// allows reports whether s allows e, for Decide.
func allows(s State, e Event) bool {
	_, ok := transitions[s][e]
	return ok
}

// Valid reports whether s is one of AllStates.
func (s State) Valid() bool { return slices.Contains(AllStates, s) }

// Label is s for people: "Changes requested".
func (s State) Label() string { return labelOr(stateLabels, s) }

// Terminal reports whether nothing can happen to a connection in s any more.
func (s State) Terminal() bool {
	return s == StateRejected || s == StateWithdrawn || s == StateRevoked
}

// CommittedStates are the states of a connection that holds its namespaces
// and its guaranteed capacity: from approval until revocation is done.
// Capacity checks sum these, and namespace uniqueness is checked against
// them. They are more than the live states (LiveStates), which run on the
// cluster and may be amended. internal/store builds its capacity SQL from
// this list.
var CommittedStates = []State{StateApproved, StateProvisioning, StateActive, StateUnderReview, StateRevoking}

// Committed reports whether a connection in s holds its namespaces and its
// guaranteed capacity (CommittedStates).
func (s State) Committed() bool { return slices.Contains(CommittedStates, s) }

// TeamQueueStates are the states of a connection whose guarantee its
// team's ClusterQueue counts, when the portal manages the team's queue
// (one queue per team and cluster, summing its connections; see
// internal/provision's teamqueue.go): the committed states but revoking.
// A revoking connection still holds its capacity until its revocation is
// done, but its own job takes its share out of the queue first, and a job
// of another connection of the team must not put it back. internal/store
// builds its SQL from this list.
var TeamQueueStates = []State{StateApproved, StateProvisioning, StateActive, StateUnderReview}

// InTeamQueue reports whether the team's ClusterQueue counts the guarantee
// of a connection in s (TeamQueueStates).
func (s State) InTeamQueue() bool { return slices.Contains(TeamQueueStates, s) }

// Valid reports whether e is one of AllEvents.
func (e Event) Valid() bool { return slices.Contains(AllEvents, e) }
