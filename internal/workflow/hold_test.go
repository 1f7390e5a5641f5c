package workflow

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

var holdNow = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func heldConn(st State, h Hold) Conn {
	return Conn{ID: 7, Team: "red", State: st, CurrentVersion: 2, ApprovedVersion: 2, RequesterID: 1, EditorIDs: []int64{1, 2}, SubmitterIDs: []int64{3}, Hold: h}
}

// TestHoldCommands is every hold step from every hold state, on live and
// other connections: where the hold goes, the job and its stopPolicy, and
// the refusals.
func TestHoldCommands(t *testing.T) {
	admin := Actor{ID: 4, Email: "ada@example.test"}
	type cmd func(Conn, Actor, string) (Effect, error)
	steps := map[string]cmd{
		"propose": func(s Conn, by Actor, r string) (Effect, error) { return ProposeHold(s, by, r, holdNow) },
		"confirm": func(s Conn, by Actor, r string) (Effect, error) { return ConfirmHold(s, by, r, holdNow) },
		"drain":   func(s Conn, by Actor, r string) (Effect, error) { return ConfirmDrain(s, by, true, r, holdNow) },
		"release": func(s Conn, by Actor, r string) (Effect, error) { return ReleaseHold(s, by, r, holdNow) },
		"decline": func(s Conn, by Actor, r string) (Effect, error) { return DeclineHold(s, by, r, holdNow) },
	}
	tests := []struct {
		step   string
		state  State
		from   Hold
		to     Hold   // "" with err set: refused
		policy string // the job's stopPolicy, "" for no job
		err    string
	}{
		{"propose", StateActive, HoldNone, HoldProposed, "", ""},
		{"propose", StateUnderReview, HoldNone, HoldProposed, "", ""},
		{"propose", StateActive, HoldProposed, "", "", "cannot be proposed"},
		{"propose", StateActive, HoldOn, "", "", "cannot be proposed"},
		{"propose", StateApproved, HoldNone, "", "", ErrHoldNotLive.Error()},
		{"propose", StateRevoking, HoldNone, "", "", ErrHoldNotLive.Error()},
		{"confirm", StateActive, HoldProposed, HoldOn, StopHold, ""},
		{"confirm", StateActive, HoldNone, "", "", "cannot be confirmed"},
		{"confirm", StateActive, HoldOn, "", "", "cannot be confirmed"},
		{"confirm", StateRevoked, HoldProposed, "", "", ErrHoldNotLive.Error()},
		{"drain", StateActive, HoldOn, HoldDrain, StopHoldAndDrain, ""},
		{"drain", StateActive, HoldProposed, "", "", "cannot be escalated"},
		{"drain", StateActive, HoldDrain, "", "", "cannot be escalated"},
		{"release", StateActive, HoldOn, HoldNone, StopNone, ""},
		{"release", StateUnderReview, HoldDrain, HoldNone, StopNone, ""},
		{"release", StateActive, HoldProposed, "", "", "cannot be released"},
		{"release", StateActive, HoldNone, "", "", "cannot be released"},
		{"decline", StateActive, HoldProposed, HoldNone, "", ""},
		{"decline", StateActive, HoldOn, "", "", "cannot be declined"},
	}
	for _, tc := range tests {
		t.Run(tc.step+"/"+string(tc.state)+"/"+string(tc.from), func(t *testing.T) {
			e, err := steps[tc.step](heldConn(tc.state, tc.from), admin, "  why  ")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if e.Hold == nil || e.Hold.State != tc.to || e.Hold.Reason != "why" || e.Hold.By != admin {
				t.Fatalf("hold = %+v, want %q by the admin, reason trimmed", e.Hold, tc.to)
			}
			if !e.Writes(tc.state) || e.Next != tc.state {
				t.Errorf("the effect must write the hold and keep the state: next %s", e.Next)
			}
			switch {
			case tc.policy == "" && e.Job != nil:
				t.Errorf("job = %+v, want none", e.Job)
			case tc.policy != "" && (e.Job == nil || e.Job.Kind != JobHold || e.Job.StopPolicy != tc.policy || e.Job.Version != 2):
				t.Errorf("job = %+v, want a hold job of version 2 with stopPolicy %s", e.Job, tc.policy)
			}
			// A hold job supersedes the unfinished hold job before it (it
			// would apply a stopPolicy the hold no longer says); a step
			// with no job cancels nothing.
			if wantCancel := tc.policy != ""; (e.Cancel != nil) != wantCancel ||
				wantCancel && (e.Cancel.Kind != JobHold || e.Cancel.Except != "" || !strings.HasPrefix(e.Cancel.Reason, "superseded")) {
				t.Errorf("cancel = %+v, want the open hold job superseded: %v", e.Cancel, wantCancel)
			}
			if len(e.Audit) != 1 || e.Audit[0].Action != "hold."+tc.step || !strings.Contains(e.Audit[0].Reason, "why") {
				t.Errorf("audit = %+v", e.Audit)
			}
			if len(e.Notify) == 0 || e.Notify[0].To != ToTeam {
				t.Errorf("notices = %+v, want the team's owners told", e.Notify)
			}
		})
	}
}

// TestHoldRules: a reason is required, an admin independent of the
// connection decides, a drain is confirmed explicitly, and a command
// without a clock refuses.
func TestHoldRules(t *testing.T) {
	admin := Actor{ID: 4}
	if _, err := ConfirmHold(heldConn(StateActive, HoldProposed), admin, " ", holdNow); !errors.Is(err, ErrHoldReason) {
		t.Errorf("confirm without a reason: %v", err)
	}
	if _, err := ProposeHold(heldConn(StateActive, HoldNone), SystemActor, "", holdNow); !errors.Is(err, ErrHoldReason) {
		t.Errorf("propose without a reason: %v", err)
	}
	for _, id := range []int64{1, 2, 3} { // requester, editor, submitter
		for name, f := range map[string]func(Conn, Actor, string, time.Time) (Effect, error){
			"confirm": ConfirmHold, "decline": DeclineHold,
		} {
			if _, err := f(heldConn(StateActive, HoldProposed), Actor{ID: id}, "r", holdNow); !errors.Is(err, ErrNotIndependent) {
				t.Errorf("%s by %d: %v, want ErrNotIndependent", name, id, err)
			}
		}
		if _, err := ReleaseHold(heldConn(StateActive, HoldOn), Actor{ID: id}, "r", holdNow); !errors.Is(err, ErrNotIndependent) {
			t.Errorf("release by %d: %v, want ErrNotIndependent", id, err)
		}
	}
	if _, err := ConfirmDrain(heldConn(StateActive, HoldOn), admin, false, "r", holdNow); !errors.Is(err, ErrDrainUnconfirmed) {
		t.Errorf("drain unconfirmed: %v", err)
	}
	if _, err := ConfirmHold(heldConn(StateActive, HoldProposed), admin, "r", time.Time{}); !errors.Is(err, ErrNoClock) {
		t.Errorf("no clock: %v", err)
	}
	// The proposal's parts, for a reviewer's decision that proposes a hold.
	h, a, n, err := HoldProposal(heldConn(StateActive, HoldNone), Actor{ID: 5}, "unused", holdNow)
	if err != nil || h.State != HoldProposed || len(a) != 1 || len(n) != 2 || n[1].To != ToAdmins {
		t.Errorf("HoldProposal = %+v %+v %+v %v", h, a, n, err)
	}
	// A failed hold job is queued again with the stopPolicy the hold says.
	e, err := QueueJob(heldConn(StateActive, HoldDrain), admin, JobHold, "", "again", holdNow)
	if err != nil || e.Job.Kind != JobHold || e.Job.StopPolicy != StopHoldAndDrain {
		t.Errorf("QueueJob hold = %+v, %v", e.Job, err)
	}
	if _, err := QueueJob(heldConn(StateRevoking, HoldOn), admin, JobHold, "", "again", holdNow); err == nil {
		t.Error("a hold job was queued for a revoking connection")
	}
}

// TestEndDateDue is the end-date rule on a test clock: the 14-day notice,
// the 3-day notice, the date itself (the last day: nothing yet), the day
// after (passed), and dates that are no stage.
func TestEndDateDue(t *testing.T) {
	now := time.Date(2026, 12, 1, 23, 59, 0, 0, time.UTC)
	tests := []struct {
		end   string
		stage EndDateStage
		left  int
	}{
		{"2027-03-01", EndDateNone, 90},
		{"2026-12-16", EndDateNone, 15},
		{"2026-12-15", EndDateNotice14, 14},
		{"2026-12-05", EndDateNotice14, 4},
		{"2026-12-04", EndDateNotice3, 3},
		{"2026-12-01", EndDateNotice3, 0},
		{"2026-11-30", EndDatePassed, -1},
		{"2025-01-01", EndDatePassed, -699},
		{"", EndDateNone, 0},
		{"01/12/2026", EndDateNone, 0},
	}
	for _, tc := range tests {
		st, left := EndDateDue(tc.end, now)
		if st != tc.stage || left != tc.left {
			t.Errorf("EndDateDue(%q) = %q, %d; want %q, %d", tc.end, st, left, tc.stage, tc.left)
		}
	}
	// The day turns at midnight UTC whatever the clock's zone.
	nyc := time.FixedZone("EST", -5*3600)
	if st, _ := EndDateDue("2026-12-01", time.Date(2026, 12, 1, 20, 0, 0, 0, nyc)); st != EndDatePassed {
		t.Errorf("at 01:00 UTC on the day after: %q, want passed", st)
	}
	if _, err := EndDateNotice(heldConn(StateRevoked, HoldNone), "2026-12-04", 3, now); !errors.Is(err, ErrHoldNotLive) {
		t.Errorf("notice to a revoked connection: %v", err)
	}
	e, err := EndDateNotice(heldConn(StateActive, HoldNone), "2026-12-04", 3, now)
	if err != nil || len(e.Notify) != 1 || e.Notify[0].To != ToTeam || !strings.Contains(e.Notify[0].Subject, "2026-12-04") || e.Writes(StateActive) {
		t.Errorf("EndDateNotice = %+v, %v", e, err)
	}
}

// TestHoldNoticesSayWhatTheOrchestratorDoes: a hold's notices describe
// what it does to the connection's orchestrator: the Kueue queue of an EKS
// connection (and of one naming none), the Slurm account's jobs of a Slurm
// one (GrpJobs=0 keeps new jobs pending, scancel cancels running ones);
// never the other's words.
func TestHoldNoticesSayWhatTheOrchestratorDoes(t *testing.T) {
	admin := Actor{ID: 4, Email: "ada@example.test"}
	steps := []struct {
		step HoldStep
		from Hold
		run  func(Conn) (Effect, error)
	}{
		{HoldStepPropose, HoldNone, func(s Conn) (Effect, error) { return ProposeHold(s, admin, "why", holdNow) }},
		{HoldStepConfirm, HoldProposed, func(s Conn) (Effect, error) { return ConfirmHold(s, admin, "why", holdNow) }},
		{HoldStepDrain, HoldOn, func(s Conn) (Effect, error) { return ConfirmDrain(s, admin, true, "why", holdNow) }},
		{HoldStepRelease, HoldOn, func(s Conn) (Effect, error) { return ReleaseHold(s, admin, "why", holdNow) }},
	}
	for _, o := range []Orchestrator{"", OrchestratorEKS, OrchestratorSlurm} {
		own, other := []string{"queue"}, []string{"Slurm", "account", "jobs"}
		if o == OrchestratorSlurm {
			own, other = []string{"Slurm account"}, []string{"queue", "admit", "evict", "work"}
		}
		for _, st := range steps {
			s := heldConn(StateActive, st.from)
			s.Orchestrator = o
			e, err := st.run(s)
			if err != nil {
				t.Fatalf("%s %s: %v", o, st.step, err)
			}
			subject := e.Notify[0].Subject
			if !strings.Contains(subject, HoldWording(o, st.step)) {
				t.Errorf("%q %s: the team's notice %q lacks HoldWording's %q", o, st.step, subject, HoldWording(o, st.step))
			}
			for _, w := range own {
				if !strings.Contains(subject, w) {
					t.Errorf("%q %s: %q does not say %q", o, st.step, subject, w)
				}
			}
			for _, w := range other {
				if strings.Contains(subject, w) {
					t.Errorf("%q %s: %q says %q, the other orchestrator's word", o, st.step, subject, w)
				}
			}
		}
	}
	for o, want := range map[Orchestrator][2]string{"": {"no new admissions", "evicts"}, OrchestratorEKS: {"no new admissions", "evicts"},
		OrchestratorSlurm: {"no new jobs start", "cancels the running jobs of the team's Slurm account"}} {
		if HoldConfirmEffect(o) != want[0] || !strings.Contains(HoldDrainEffect(o), want[1]) {
			t.Errorf("%q: confirm %q, drain %q; want %q, %q", o, HoldConfirmEffect(o), HoldDrainEffect(o), want[0], want[1])
		}
	}
	if HoldWording(OrchestratorSlurm, HoldStepDecline) != HoldWording(OrchestratorEKS, HoldStepDecline) {
		t.Error("a declined hold reads differently by orchestrator; nothing was applied to either")
	}
}

// TestDrainUnconfirmedSaysWhatTheOrchestratorDoes: an unconfirmed drain is
// refused (errors.Is ErrDrainUnconfirmed) in the words of the connection's
// orchestrator: on EKS the running work is evicted; on Slurm, scancel
// cancels the account's running and suspended jobs, and nothing is
// evicted. A confirmed drain goes through.
func TestDrainUnconfirmedSaysWhatTheOrchestratorDoes(t *testing.T) {
	admin := Actor{ID: 4, Email: "ada@example.test"}
	for o, words := range map[Orchestrator]struct{ own, other []string }{
		"":                {[]string{"evicts"}, []string{"scancel", "Slurm"}},
		OrchestratorEKS:   {[]string{"evicts"}, []string{"scancel", "Slurm"}},
		OrchestratorSlurm: {[]string{"scancel", "running and suspended jobs", "Slurm account"}, []string{"evict"}},
	} {
		s := heldConn(StateActive, HoldOn)
		s.Orchestrator = o
		_, err := ConfirmDrain(s, admin, false, "r", holdNow)
		if !errors.Is(err, ErrDrainUnconfirmed) {
			t.Fatalf("%q: unconfirmed drain: %v, want ErrDrainUnconfirmed", o, err)
		}
		var de *DrainUnconfirmedError
		if !errors.As(fmt.Errorf("store: drain hold: %w", err), &de) || de.Orchestrator != o {
			t.Errorf("%q: %v is not a *DrainUnconfirmedError of the connection's orchestrator", o, err)
		}
		for _, w := range words.own {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: %q does not say %q", o, err, w)
			}
		}
		for _, w := range words.other {
			if strings.Contains(err.Error(), w) {
				t.Errorf("%q: %q says %q, the other orchestrator's word", o, err, w)
			}
		}
		if _, err := ConfirmDrain(s, admin, true, "r", holdNow); err != nil {
			t.Errorf("%q: confirmed drain: %v", o, err)
		}
	}
}
