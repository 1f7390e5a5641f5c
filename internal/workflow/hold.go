package workflow

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Holds (issue 13): a graduated step short of revocation. A hold stops new
// admissions on a live connection's Kueue queue; running work finishes. It
// is proposed (by a reviewer's decision, or by the system when the
// contract's end date passes), and only an admin confirms it. A second
// step, HoldAndDrain, evicts admitted work and needs the admin's explicit
// confirmation. Release undoes either. Confirm, drain and release each
// queue a hold job (JobHold) that server-side applies the stopPolicy the
// hold says to the team's LocalQueue, and to its ClusterQueue when the
// portal manages it (internal/provision HoldSteps). Nothing is revoked
// automatically: revocation stays an admin's separate decision. On a Slurm
// connection the same steps set GrpJobs=0 on the team's account (and, to
// drain, cancel its running jobs) instead (internal/provision
// SlurmHoldSteps); the notices say which (HoldWording).
//
// Kueue's stopPolicy (sigs.k8s.io/kueue v0.17.0,
// apis/kueue/v1beta2/localqueue_types.go and clusterqueue_types.go,
// LocalQueueSpec.StopPolicy / ClusterQueueSpec.StopPolicy, enum
// None;Hold;HoldAndDrain, default None): "if set to a value different from
// None, the LocalQueue is considered Inactive, no new reservation being
// made ... None - Workloads are admitted; HoldAndDrain - Admitted
// workloads are evicted and Reserving workloads will cancel the
// reservation; Hold - Admitted workloads will run to completion and
// Reserving workloads will cancel the reservation."

// Hold is where a connection's hold is.
type Hold string

// The hold states.
const (
	HoldNone     Hold = ""
	HoldProposed Hold = "proposed" // asked for; an admin confirms or declines
	HoldOn       Hold = "hold"     // confirmed: stopPolicy Hold
	HoldDrain    Hold = "drain"    // explicitly confirmed: stopPolicy HoldAndDrain
)

// The Kueue stopPolicy values a hold job applies (see above).
const (
	StopNone         = "None"
	StopHold         = "Hold"
	StopHoldAndDrain = "HoldAndDrain"
)

// StopPolicy is the Kueue stopPolicy a hold state puts on the queues: None
// for no hold and for a proposal (nothing is stopped before an admin
// confirms).
func (h Hold) StopPolicy() string {
	switch h {
	case HoldOn:
		return StopHold
	case HoldDrain:
		return StopHoldAndDrain
	}
	return StopNone
}

// Applied reports whether the hold stops admissions (confirmed).
func (h Hold) Applied() bool { return h == HoldOn || h == HoldDrain }

// Label is the hold state in a few words, for pages.
func (h Hold) Label() string {
	switch h {
	case HoldProposed:
		return "hold proposed, waiting for an admin"
	case HoldOn:
		return "on hold (no new admissions; running work finishes)"
	case HoldDrain:
		return "on hold and draining (admitted work is evicted)"
	}
	return "no hold"
}

// HoldChange is the hold an effect records on the connection's row, with
// who moved it and why.
type HoldChange struct {
	State  Hold
	By     Actor
	Reason string
}

// The refusals of the hold commands.
var (
	// ErrHoldReason: every hold step is recorded with why.
	ErrHoldReason = errors.New("a hold step needs a reason")
	// ErrHoldNotLive: only a live (active or under review) connection is
	// held.
	ErrHoldNotLive = errors.New("only a live (active or under review) connection can be held")
	// ErrDrainUnconfirmed: HoldAndDrain stops running work (Kueue evicts
	// it, Slurm's scancel cancels it); the admin must confirm it
	// explicitly. ConfirmDrain returns a *DrainUnconfirmedError, which is
	// ErrDrainUnconfirmed and says what the drain does on the
	// connection's orchestrator.
	ErrDrainUnconfirmed = errors.New("hold and drain stops the team's running work: confirm it explicitly")
)

// DrainUnconfirmedError refuses a drain the admin did not confirm, in the
// words of the connection's orchestrator (HoldDrainEffect): on EKS it
// evicts the team's running work, on Slurm it cancels (scancel) the
// running and suspended jobs of the team's account. errors.Is matches
// ErrDrainUnconfirmed.
type DrainUnconfirmedError struct {
	Orchestrator Orchestrator
}

func (e *DrainUnconfirmedError) Error() string {
	return "hold and drain " + HoldDrainEffect(e.Orchestrator) + ": confirm it explicitly"
}

// Is makes errors.Is(err, ErrDrainUnconfirmed) hold.
func (e *DrainUnconfirmedError) Is(target error) bool { return target == ErrDrainUnconfirmed }

// HoldStep is a step of a hold: a proposal, or an admin's decision on it.
type HoldStep string

// The hold steps.
const (
	HoldStepPropose HoldStep = "propose"
	HoldStepConfirm HoldStep = "confirm"
	HoldStepDrain   HoldStep = "drain"
	HoldStepRelease HoldStep = "release"
	HoldStepDecline HoldStep = "decline"
)

// HoldError refuses a hold step the hold's state does not allow.
type HoldError struct {
	From Hold
	Step HoldStep
}

func (e *HoldError) Error() string {
	return fmt.Sprintf("a hold cannot be %s when the connection has %s", holdSteps[e.Step], e.From.Label())
}

var holdSteps = map[HoldStep]string{
	HoldStepPropose: "proposed", HoldStepConfirm: "confirmed", HoldStepDrain: "escalated to hold and drain",
	HoldStepRelease: "released", HoldStepDecline: "declined",
}

// holdFrom says, per step, the hold states it starts from and where it goes.
var holdFrom = map[HoldStep]struct {
	from []Hold
	to   Hold
}{
	HoldStepPropose: {[]Hold{HoldNone}, HoldProposed},
	HoldStepConfirm: {[]Hold{HoldProposed}, HoldOn},
	"drain":         {[]Hold{HoldOn}, HoldDrain},
	HoldStepRelease: {[]Hold{HoldOn, HoldDrain}, HoldNone},
	HoldStepDecline: {[]Hold{HoldProposed}, HoldNone},
}

// HoldAllows reports whether a hold step may start from h.
func HoldAllows(h Hold, step HoldStep) bool {
	for _, f := range holdFrom[step].from {
		if f == h {
			return true
		}
	}
	return false
}

func holdCheck(s Conn, step HoldStep, reason string, now time.Time) (string, error) {
	if now.IsZero() {
		return "", ErrNoClock
	}
	if !s.State.Live() || s.ApprovedVersion == 0 {
		return "", ErrHoldNotLive
	}
	if !HoldAllows(s.Hold, step) {
		return "", &HoldError{From: s.Hold, Step: step}
	}
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return "", ErrHoldReason
	}
	return reason, nil
}

// HoldProposal is ProposeHold's effect parts, for a command that proposes
// a hold among other things (a reviewer's "hold" decision): the hold to
// record, its audit event and its notices. It checks the same rules.
func HoldProposal(s Conn, by Actor, reason string, now time.Time) (*HoldChange, []AuditRecord, []Notice, error) {
	reason, err := holdCheck(s, HoldStepPropose, reason, now)
	if err != nil {
		return nil, nil, nil, err
	}
	return &HoldChange{State: HoldProposed, By: by, Reason: reason},
		[]AuditRecord{audit(by, "hold.propose", s.ApprovedVersion, reason)},
		[]Notice{
			{Kind: "hold.proposed", To: ToTeam, Subject: fmt.Sprintf("A hold of connection #%d of team %s was proposed: %s. If an admin confirms it, %s", s.ID, s.Team, reason, HoldWording(s.Orchestrator, HoldStepPropose))},
			{Kind: "hold.proposed", To: ToAdmins, Subject: fmt.Sprintf("Connection #%d of team %s: a hold waits for an admin's confirmation: %s", s.ID, s.Team, reason)},
		}, nil
}

// ProposeHold asks for a hold of a live connection (by a reviewer, or by
// the system when the end date passes). Nothing is stopped yet: an admin
// confirms or declines it.
func ProposeHold(s Conn, by Actor, reason string, now time.Time) (Effect, error) {
	h, a, n, err := HoldProposal(s, by, reason, now)
	if err != nil {
		return Effect{}, err
	}
	return Effect{By: by, Next: s.State, Hold: h, Audit: a, Notify: n}, nil
}

// holdDecision is an admin's hold step: the independence rule of
// approvals (nobody decides on a connection they filed, edited or
// submitted; see independentOf), the state rule, the reason, and the hold
// job when the step changes what is applied.
func holdDecision(s Conn, by Actor, step HoldStep, reason string, now time.Time) (Effect, error) {
	reason, err := holdCheck(s, step, reason, now)
	if err != nil {
		return Effect{}, err
	}
	if err := independentOf(s, by); err != nil {
		return Effect{}, err
	}
	to := holdFrom[step].to
	e := Effect{By: by, Next: s.State, Hold: &HoldChange{State: to, By: by, Reason: reason}}
	rec := audit(by, "hold."+string(step), s.ApprovedVersion, reason)
	if to.StopPolicy() != s.Hold.StopPolicy() {
		e.Job = &JobOrder{Kind: JobHold, Version: s.ApprovedVersion, StopPolicy: to.StopPolicy()}
		c := cancelSupersededHold
		e.Cancel = &c
		rec.JobRef = true
		rec.Reason = "stopPolicy " + to.StopPolicy() + "; " + reason
	}
	e.Audit = []AuditRecord{rec}
	subject := HoldWording(s.Orchestrator, step)
	e.Notify = []Notice{{Kind: "hold." + string(step), To: ToTeam, Subject: fmt.Sprintf("Connection #%d of team %s %s (%s)", s.ID, s.Team, subject, reason)}}
	return e, nil
}

// ConfirmHold is an admin's confirmation of a proposed hold: stopPolicy
// Hold on the team's queues (a hold job).
func ConfirmHold(s Conn, by Actor, reason string, now time.Time) (Effect, error) {
	return holdDecision(s, by, HoldStepConfirm, reason, now)
}

// ConfirmDrain is an admin's explicit escalation of a confirmed hold to
// HoldAndDrain, which evicts admitted work. confirmed is the admin's
// explicit confirmation (the page asks them to type the team's name).
func ConfirmDrain(s Conn, by Actor, confirmed bool, reason string, now time.Time) (Effect, error) {
	if HoldAllows(s.Hold, HoldStepDrain) && !confirmed {
		return Effect{}, &DrainUnconfirmedError{Orchestrator: s.Orchestrator}
	}
	return holdDecision(s, by, HoldStepDrain, reason, now)
}

// ReleaseHold is an admin's release of a hold: stopPolicy None (a hold
// job), the hold back to none.
func ReleaseHold(s Conn, by Actor, reason string, now time.Time) (Effect, error) {
	return holdDecision(s, by, HoldStepRelease, reason, now)
}

// DeclineHold is an admin's refusal of a proposed hold: nothing was
// applied, so no job.
func DeclineHold(s Conn, by Actor, reason string, now time.Time) (Effect, error) {
	return holdDecision(s, by, HoldStepDecline, reason, now)
}

// End dates. A contract's EndDate (a civil date, YYYY-MM-DD) is the last
// day of the connection: when it has passed, the system proposes a hold,
// once, which an admin confirms; before that the owners are told, 14 and
// 3 days ahead. Nothing is revoked automatically.

// EndDateStage is what the end-date rule does for a connection today.
type EndDateStage string

// The end-date stages, in order; each is done once per end date.
const (
	EndDateNone     EndDateStage = ""
	EndDateNotice14 EndDateStage = "notice_14"
	EndDateNotice3  EndDateStage = "notice_3"
	EndDatePassed   EndDateStage = "passed"
)

// EndDateNoticeDays are the days ahead of the end date when the owners are
// told.
var EndDateNoticeDays = map[EndDateStage]int{EndDateNotice14: 14, EndDateNotice3: 3}

// EndDateDue is the most urgent end-date stage due at now for a contract
// ending on end (UTC dates), and the days left (negative once passed). An
// empty or malformed end date is no stage. Only the most urgent stage is
// due: a connection first seen 2 days before its end gets the 3-day notice,
// not also the 14-day one.
func EndDateDue(end string, now time.Time) (EndDateStage, int) {
	if end == "" || now.IsZero() {
		return EndDateNone, 0
	}
	d, err := time.Parse(time.DateOnly, end)
	if err != nil {
		return EndDateNone, 0
	}
	y, m, dd := now.UTC().Date()
	today := time.Date(y, m, dd, 0, 0, 0, 0, time.UTC)
	left := int(d.Sub(today).Hours() / 24)
	switch {
	case left < 0:
		return EndDatePassed, left
	case left <= EndDateNoticeDays[EndDateNotice3]:
		return EndDateNotice3, left
	case left <= EndDateNoticeDays[EndDateNotice14]:
		return EndDateNotice14, left
	}
	return EndDateNone, left
}

// EndDateNotice tells the team's owners that the connection's end date is
// coming (the stage's notice), with an audit event. It writes nothing on
// the connection's row.
func EndDateNotice(s Conn, end string, left int, now time.Time) (Effect, error) {
	if now.IsZero() {
		return Effect{}, ErrNoClock
	}
	if !s.State.Live() {
		return Effect{}, ErrHoldNotLive
	}
	msg := fmt.Sprintf("the contract ends on %s (%d days left): after that date an admin may put the connection on hold; renew it with a change to the end date", end, left)
	return Effect{By: SystemActor, Next: s.State,
		Audit:  []AuditRecord{audit(SystemActor, "end_date.notice", s.ApprovedVersion, msg)},
		Notify: []Notice{{Kind: "end_date.coming", To: ToTeam, Subject: fmt.Sprintf("Connection #%d of team %s: %s", s.ID, s.Team, msg)}},
	}, nil
}

// HoldWording is what a hold step does to a connection run by
// orchestrator o, in the words of its notices: on EKS the team's Kueue
// queue stops admitting (stopPolicy Hold) or evicts too (HoldAndDrain); on
// Slurm the team's account starts no new job (GrpJobs=0, its jobs pending
// with reason AssocGrpJobsLimit) and, draining, its running jobs are
// cancelled (scancel), as internal/provision's SlurmHoldWording applies
// it. For HoldStepPropose it is what a confirmation would do; for the
// admin's steps, the connection's new state. Any other orchestrator (the
// zero one of a connection never approved) is EKS.
func HoldWording(o Orchestrator, step HoldStep) string {
	if o == OrchestratorSlurm {
		switch step {
		case HoldStepPropose:
			return "the team's Slurm account starts no new jobs (they stay pending; running jobs finish)"
		case HoldStepConfirm:
			return "is on hold: its Slurm account starts no new jobs (they stay pending); running jobs finish"
		case HoldStepDrain:
			return "is on hold and draining: its Slurm account's running jobs are cancelled and new ones stay pending"
		case HoldStepRelease:
			return "is released from its hold: its Slurm account's jobs start again"
		}
	} else {
		switch step {
		case HoldStepPropose:
			return "the team's queue admits no new work (running work finishes)"
		case HoldStepConfirm:
			return "is on hold: its queue admits no new work; running work finishes"
		case HoldStepDrain:
			return "is on hold and draining: admitted work is evicted from its queue"
		case HoldStepRelease:
			return "is released from its hold: its queue admits work again"
		}
	}
	if step == HoldStepDecline {
		return "will not be held: the proposed hold was declined"
	}
	return ""
}

// HoldDrainEffect is what hold and drain does to running work on
// orchestrator o, for the admin's explicit confirmation: Kueue evicts the
// admitted workloads; on Slurm, scancel cancels the account's running and
// suspended jobs (internal/provision/slurmprov DrainStates), pending ones
// stay pending.
func HoldDrainEffect(o Orchestrator) string {
	if o == OrchestratorSlurm {
		return "cancels the running jobs of the team's Slurm account (scancel of its running and suspended jobs; pending jobs stay pending)"
	}
	return "evicts the team's running work"
}

// HoldConfirmEffect is what confirming a hold stops on orchestrator o, for
// the admin's button: Kueue admits nothing new; Slurm starts no new job.
func HoldConfirmEffect(o Orchestrator) string {
	if o == OrchestratorSlurm {
		return "no new jobs start"
	}
	return "no new admissions"
}

// SystemActor is the actor of what the portal's own schedule does (the
// end-date rule).
var SystemActor = Actor{Email: "system"}

// DecideHold is an admin's hold step on s: ConfirmHold, ConfirmDrain
// (confirmed is the admin's explicit confirmation), ReleaseHold or
// DeclineHold. A proposal is not an admin's step (ProposeHold).
func DecideHold(s Conn, by Actor, step HoldStep, confirmed bool, reason string, now time.Time) (Effect, error) {
	switch step {
	case HoldStepConfirm:
		return ConfirmHold(s, by, reason, now)
	case HoldStepDrain:
		return ConfirmDrain(s, by, confirmed, reason, now)
	case HoldStepRelease:
		return ReleaseHold(s, by, reason, now)
	case HoldStepDecline:
		return DeclineHold(s, by, reason, now)
	}
	return Effect{}, fmt.Errorf("workflow: no admin hold step %q", step)
}

// EndDateInput is one end-date stage due for a connection (EndDateDue):
// its approved contract's end date, the stage and the days left.
type EndDateInput struct {
	End   string
	Stage EndDateStage
	Left  int
	// Done says the stage was recorded for this connection and end date
	// before (the store keeps each stage once, across restarts).
	Done bool
}

// EndDateReached is the end-date rule's step for one connection: the
// stage's notice to the team's owners (EndDateNotice) or, once the end
// date has passed, a hold the system proposes (ProposeHold), each once.
// A stage done before, or a connection that is no longer live or whose
// hold is already proposed or applied, gets an effect that records
// nothing: the stage is done all the same. acted reports whether the
// effect notifies or proposes.
func EndDateReached(s Conn, in EndDateInput, now time.Time) (e Effect, acted bool, err error) {
	if in.Done || in.Stage == EndDateNone {
		return Effect{By: SystemActor, Next: s.State}, false, nil
	}
	if in.Stage != EndDatePassed {
		e, err = EndDateNotice(s, in.End, in.Left, now)
	} else {
		e, err = ProposeHold(s, SystemActor, fmt.Sprintf("the contract's end date %s has passed", in.End), now)
	}
	var he *HoldError
	if errors.As(err, &he) || errors.Is(err, ErrHoldNotLive) {
		// Already proposed or held, or no longer live since the list
		// was read: the stage is done all the same.
		return Effect{By: SystemActor, Next: s.State}, false, nil
	}
	return e, err == nil, err
}
