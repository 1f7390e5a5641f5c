package workflow

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// allowedTransitions is the lifecycle written out by hand; every pair not
// listed must be refused.
var allowedTransitions = []struct {
	from  State
	event Event
	to    State
}{
	{StateDraft, EventEdit, StateDraft},
	{StateDraft, EventSubmit, StateSubmitted},
	{StateDraft, EventWithdraw, StateWithdrawn},

	{StateSubmitted, EventRequestChanges, StateChangesRequested},
	{StateSubmitted, EventApprove, StateApproved},
	{StateSubmitted, EventReject, StateRejected},
	{StateSubmitted, EventWithdraw, StateWithdrawn},

	{StateChangesRequested, EventEdit, StateChangesRequested},
	{StateChangesRequested, EventSubmit, StateSubmitted},
	{StateChangesRequested, EventWithdraw, StateWithdrawn},

	{StateApproved, EventStartProvisioning, StateProvisioning},
	{StateApproved, EventRevoke, StateRevoking},

	{StateProvisioning, EventProvisioningSucceeded, StateActive},
	{StateProvisioning, EventProvisioningFailed, StateApproved},
	{StateProvisioning, EventRevoke, StateRevoking},

	{StateActive, EventStartReview, StateUnderReview},
	{StateActive, EventRevoke, StateRevoking},

	{StateUnderReview, EventRenew, StateActive},
	{StateUnderReview, EventReviewHold, StateActive},
	{StateUnderReview, EventRequestChanges, StateActive},
	{StateUnderReview, EventRevoke, StateRevoking},

	{StateRevoking, EventRevocationDone, StateRevoked},
}

func TestTransitionEveryPair(t *testing.T) {
	now := time.Date(2026, 3, 15, 10, 0, 0, 0, time.UTC)
	want := map[State]map[Event]State{}
	for _, a := range allowedTransitions {
		if want[a.from] == nil {
			want[a.from] = map[Event]State{}
		}
		want[a.from][a.event] = a.to
	}
	pairs, allowed := 0, 0
	for _, s := range AllStates {
		for _, e := range AllEvents {
			pairs++
			got, err := Transition(s, e, now)
			to, ok := want[s][e]
			if ok {
				allowed++
				if err != nil || got != to {
					t.Errorf("Transition(%s, %s) = %q, %v; want %s", s, e, got, err, to)
				}
				continue
			}
			var te *TransitionError
			if !errors.As(err, &te) || te.From != s || te.Event != e || got != "" {
				t.Errorf("Transition(%s, %s) = %q, %v; want a *TransitionError", s, e, got, err)
			}
		}
	}
	if pairs != 11*14 || allowed != len(allowedTransitions) {
		t.Errorf("covered %d pairs, %d allowed; want %d and %d", pairs, allowed, 11*14, len(allowedTransitions))
	}
}

func TestTransitionErrors(t *testing.T) {
	now := time.Date(2026, 3, 15, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		s    State
		e    Event
		want string
	}{
		{StateWithdrawn, EventApprove, "a withdrawn request cannot be approved"},
		{StateSubmitted, EventEdit, "a submitted request cannot be edited"},
		{StateRevoked, EventRevoke, "a revoked connection cannot be revoked"},
		{StateActive, EventRenew, "an active connection cannot be renewed"},
		{StateDraft, EventStartProvisioning, "a draft cannot be provisioned"},
		{"archived", EventApprove, `unknown state "archived"`},
		{StateDraft, "save", `unknown event "save"`},
	}
	for _, tt := range tests {
		_, err := Transition(tt.s, tt.e, now)
		if err == nil || err.Error() != tt.want {
			t.Errorf("Transition(%q, %q) error = %v, want %q", tt.s, tt.e, err, tt.want)
		}
	}
	if _, err := Transition(StateDraft, EventSubmit, time.Time{}); !errors.Is(err, ErrNoClock) {
		t.Errorf("Transition without a time: error = %v, want ErrNoClock", err)
	}
}

func TestStateAndEventLists(t *testing.T) {
	if len(AllStates) != 11 || len(AllEvents) != 14 {
		t.Fatalf("%d states, %d events; want 11 and 14", len(AllStates), len(AllEvents))
	}
	for _, s := range AllStates {
		if !s.Valid() || s.Label() == "" || s.Label() == string(s) || statePhrases[s] == "" {
			t.Errorf("state %q: Valid %v, Label %q, phrase %q", s, s.Valid(), s.Label(), statePhrases[s])
		}
		if _, ok := transitions[s]; !ok {
			t.Errorf("state %q is missing from the transitions table", s)
		}
	}
	for _, e := range AllEvents {
		if !e.Valid() || eventPhrases[e] == "" {
			t.Errorf("event %q: Valid %v, phrase %q", e, e.Valid(), eventPhrases[e])
		}
	}
	for _, bad := range []string{"", "Draft", "deleted"} {
		if State(bad).Valid() || Event(bad).Valid() {
			t.Errorf("%q is a valid state or event", bad)
		}
	}
}

func TestTerminalAndCommitted(t *testing.T) {
	terminal := []State{StateRejected, StateWithdrawn, StateRevoked}
	committed := []State{StateApproved, StateProvisioning, StateActive, StateUnderReview, StateRevoking}
	for _, s := range AllStates {
		if got, want := s.Terminal(), slices.Contains(terminal, s); got != want {
			t.Errorf("%s.Terminal() = %v, want %v", s, got, want)
		}
		if got, want := s.Committed(), slices.Contains(committed, s); got != want {
			t.Errorf("%s.Committed() = %v, want %v", s, got, want)
		}
		// Terminal states allow nothing; every other state allows something.
		if got := len(NextEvents(s)) == 0; got != s.Terminal() {
			t.Errorf("%s: NextEvents = %v, Terminal = %v", s, NextEvents(s), s.Terminal())
		}
	}
}

func TestNextEvents(t *testing.T) {
	tests := []struct {
		s    State
		want []Event
	}{
		{StateDraft, []Event{EventEdit, EventSubmit, EventWithdraw}},
		{StateSubmitted, []Event{EventRequestChanges, EventApprove, EventReject, EventWithdraw}},
		{StateUnderReview, []Event{EventRequestChanges, EventRenew, EventReviewHold, EventRevoke}},
		{StateRevoked, nil},
		{"unknown", nil},
	}
	for _, tt := range tests {
		if got := NextEvents(tt.s); !slices.Equal(got, tt.want) {
			t.Errorf("NextEvents(%s) = %v, want %v", tt.s, got, tt.want)
		}
	}
}

// TestEveryStateReachable walks the machine from draft: every state can be
// reached, and every non-terminal state can reach a terminal one, so nothing
// is stuck.
func TestEveryStateReachable(t *testing.T) {
	reached := map[State]bool{StateDraft: true}
	queue := []State{StateDraft}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, to := range transitions[s] {
			if !reached[to] {
				reached[to] = true
				queue = append(queue, to)
			}
		}
	}
	for _, s := range AllStates {
		if !reached[s] {
			t.Errorf("%s cannot be reached from draft", s)
		}
	}
	for _, s := range AllStates {
		seen := map[State]bool{s: true}
		queue := []State{s}
		ends := false
		for len(queue) > 0 && !ends {
			x := queue[0]
			queue = queue[1:]
			if x.Terminal() {
				ends = true
			}
			for _, to := range transitions[x] {
				if !seen[to] {
					seen[to] = true
					queue = append(queue, to)
				}
			}
		}
		if !ends {
			t.Errorf("%s can never end", s)
		}
	}
}

// allowedAmendTransitions is the amendment's lifecycle written out by hand;
// every other (amendment, event) pair must be refused.
var allowedAmendTransitions = []struct {
	from  Amendment
	event Event
	to    Amendment
}{
	{AmendNone, EventEdit, AmendDraft},

	{AmendDraft, EventEdit, AmendDraft},
	{AmendDraft, EventSubmit, AmendSubmitted},
	{AmendDraft, EventWithdraw, AmendNone},

	{AmendSubmitted, EventApprove, AmendApproved},
	{AmendSubmitted, EventReject, AmendNone},
	{AmendSubmitted, EventRequestChanges, AmendChangesRequested},
	{AmendSubmitted, EventWithdraw, AmendNone},

	{AmendChangesRequested, EventEdit, AmendChangesRequested},
	{AmendChangesRequested, EventSubmit, AmendSubmitted},
	{AmendChangesRequested, EventWithdraw, AmendNone},

	{AmendApproved, EventStartProvisioning, AmendApproved},
	{AmendApproved, EventProvisioningSucceeded, AmendNone},
	{AmendApproved, EventProvisioningFailed, AmendFailed},

	{AmendFailed, EventStartProvisioning, AmendApproved},
}

func TestAmendTransitionEveryPair(t *testing.T) {
	want := map[Amendment]map[Event]Amendment{}
	for _, a := range allowedAmendTransitions {
		if want[a.from] == nil {
			want[a.from] = map[Event]Amendment{}
		}
		want[a.from][a.event] = a.to
	}
	pairs, allowed := 0, 0
	for _, a := range AllAmendments {
		for _, e := range AllEvents {
			pairs++
			got, err := AmendTransition(a, e)
			if to, ok := want[a][e]; ok {
				allowed++
				if err != nil || got != to {
					t.Errorf("AmendTransition(%q, %s) = %q, %v; want %q", a, e, got, err, to)
				}
				continue
			}
			var ae *AmendmentError
			if !errors.As(err, &ae) || ae.From != a || ae.Event != e || got != "" {
				t.Errorf("AmendTransition(%q, %s) = %q, %v; want an *AmendmentError", a, e, got, err)
			}
		}
	}
	if pairs != 6*14 || allowed != len(allowedAmendTransitions) {
		t.Errorf("covered %d pairs, %d allowed; want %d and %d", pairs, allowed, 6*14, len(allowedAmendTransitions))
	}
	if _, err := AmendTransition("archived", EventEdit); err == nil {
		t.Error("an unknown amendment state allows edit")
	}
}

func TestAmendmentStates(t *testing.T) {
	if len(AllAmendments) != 6 {
		t.Fatalf("%d amendment states, want 6", len(AllAmendments))
	}
	for _, a := range AllAmendments {
		if !a.Valid() {
			t.Errorf("%q is not Valid", a)
		}
		if got := a.Open(); got != (a != AmendNone) {
			t.Errorf("%q.Open() = %v", a, got)
		}
		if (a.Label() == "") != (a == AmendNone) {
			t.Errorf("%q.Label() = %q", a, a.Label())
		}
	}
	for _, bad := range []Amendment{"Draft", "applied", "none"} {
		if bad.Valid() {
			t.Errorf("%q is Valid", bad)
		}
	}
	for _, s := range AllStates {
		if got, want := s.Live(), s == StateActive || s == StateUnderReview; got != want {
			t.Errorf("%s.Live() = %v, want %v", s, got, want)
		}
	}
	tests := []struct {
		a    Amendment
		e    Event
		want string
	}{
		{AmendNone, EventSubmit, "no change is open on this connection, so nothing can be submitted"},
		{AmendSubmitted, EventEdit, "a change in review cannot be edited"},
		{AmendApproved, EventWithdraw, "a change approved, being applied cannot be withdrawn"},
		{AmendFailed, EventApprove, "a change failed to apply cannot be approved"},
	}
	for _, tt := range tests {
		_, err := AmendTransition(tt.a, tt.e)
		if err == nil || err.Error() != tt.want {
			t.Errorf("AmendTransition(%q, %s) error = %v, want %q", tt.a, tt.e, err, tt.want)
		}
	}
}

// TestAllowsOnEveryPair: on a live connection the person's decisions (edit,
// submit, withdraw, approve, reject, request changes) are its amendment's;
// the other events, and every event of a connection that is not live, are
// the connection's own lifecycle's, whatever the amendment says.
func TestAllowsOnEveryPair(t *testing.T) {
	own := map[State][]Event{
		StateActive:      {EventStartReview, EventRevoke},
		StateUnderReview: {EventRenew, EventReviewHold, EventRevoke},
	}
	amendAllows := map[Amendment][]Event{
		AmendNone:             {EventEdit},
		AmendDraft:            {EventEdit, EventSubmit, EventWithdraw},
		AmendSubmitted:        {EventApprove, EventReject, EventRequestChanges, EventWithdraw},
		AmendChangesRequested: {EventEdit, EventSubmit, EventWithdraw},
		AmendApproved:         nil,
		AmendFailed:           nil,
	}
	allowedOf := map[State]map[Event]bool{}
	for _, a := range allowedTransitions {
		if allowedOf[a.from] == nil {
			allowedOf[a.from] = map[Event]bool{}
		}
		allowedOf[a.from][a.event] = true
	}
	for _, s := range AllStates {
		for _, a := range AllAmendments {
			for _, e := range AllEvents {
				var want bool
				if s.Live() {
					want = slices.Contains(own[s], e) || slices.Contains(amendAllows[a], e)
				} else {
					want = allowedOf[s][e]
				}
				if got := allowsOn(s, a, e); got != want {
					t.Errorf("allowsOn(%s, %q, %s) = %v, want %v", s, a, e, got, want)
				}
			}
		}
	}
	// The amendment's events go on: a live connection never passes
	// through the request states.
	for _, a := range allowedAmendTransitions {
		if !slices.Contains([]Event{EventStartProvisioning, EventProvisioningSucceeded, EventProvisioningFailed}, a.event) &&
			!slices.Contains(amendEvents, a.event) {
			t.Errorf("amendment event %s is neither a person's decision nor a job's report", a.event)
		}
	}
}

// TestTeamQueueStates: the team's ClusterQueue counts committed
// connections only, and not one being revoked (its own job takes its
// share out; another job must not put it back).
func TestTeamQueueStates(t *testing.T) {
	for _, s := range AllStates {
		want := s.Committed() && s != StateRevoking
		if s.InTeamQueue() != want {
			t.Errorf("%s: InTeamQueue %v, want %v", s, s.InTeamQueue(), want)
		}
	}
}
