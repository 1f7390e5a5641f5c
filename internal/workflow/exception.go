package workflow

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Exceptions with an expiry (issue 35). A contract names its exception
// owner ("who decides on exceptions to the scheduling policy"). That person,
// or an admin, may grant a live connection a time-bound exception from a
// member-facing rule: here, a priority class the contract does not allow
// (admission rule 2, internal/provision admission.go), for up to the
// cluster's maximum number of days. No one grants their own team an
// exception: a member or owner of the team cannot, admin or not.
//
// The exception is its own small approved change: the grant is the
// decision (recorded with who, why, start and end, and audited). It is
// applied as a parameter change: the team's admission parameters are the
// contract's values plus its active exceptions' classes
// (provision.WithExceptions), and a reapply job applies them. At the end
// (or on an early revocation by the same people) the store records the
// intent to revert (state reverting, which takes the class out of the
// parameters) with the reapply job that applies it, and records the revert
// done once that job succeeded: a crash anywhere in between leaves the
// intent recorded, and the worker's next sweep finishes it, once.

// ExceptionState is where an exception is.
type ExceptionState string

// The exception states.
const (
	// ExceptionActive: granted; its class is in the team's admission
	// parameters.
	ExceptionActive ExceptionState = "active"
	// ExceptionReverting: its end passed or it was revoked; its class is
	// out of the parameters and a reapply job applies that.
	ExceptionReverting ExceptionState = "reverting"
	// ExceptionReverted: the reapply job succeeded; nothing is left to do.
	ExceptionReverted ExceptionState = "reverted"
)

// DefaultExceptionMaxDays is the longest exception a cluster allows unless
// its settings say otherwise (provision.ClusterSettings.ExceptionMaxDays).
const DefaultExceptionMaxDays = 14

// Exception is one exception of a connection.
type Exception struct {
	ID            int64
	ConnectionID  int64
	Team          string
	PriorityClass string // the contract-side class name (the cluster's PriorityClass.Name)
	Reason        string
	GrantedBy     string
	GrantedByID   int64
	Start, End    time.Time
	State         ExceptionState
	// JobID is the reapply job that applies the current state (0 while
	// one waits to be queued).
	JobID     int64
	AppliedAt time.Time // zero until the grant's job succeeded
	// RevokedBy, RevokedByID and RevokeReason say who ended it early and
	// why ("" for an expiry).
	RevokedBy    string
	RevokedByID  int64
	RevokeReason string
	EndedAt      time.Time // when the revert was decided (zero while active)
	RevertedAt   time.Time // when the revert was recorded done
}

// InEffect reports whether the exception's class is in the team's
// admission parameters: from the grant until the revert is decided.
func (x Exception) InEffect() bool { return x.State == ExceptionActive }

// ExceptionRequest is a grant as the form gives it.
type ExceptionRequest struct {
	PriorityClass string
	Days          int
	Reason        string
}

// ExceptionFacts are what the exception rules read, loaded by the store
// inside the transaction that records the decision.
type ExceptionFacts struct {
	// Owner is the approved contract's exception owner; Allowed its
	// priority classes.
	Owner   string
	Allowed []string
	// Known are the cluster's priority classes.
	Known []string
	// Open are the connection's exceptions not yet reverted.
	Open []Exception
	// MaxDays is the cluster's longest exception (0: the default).
	MaxDays int
}

func (f ExceptionFacts) maxDays() int {
	if f.MaxDays <= 0 {
		return DefaultExceptionMaxDays
	}
	return f.MaxDays
}

// The refusals of the exception commands.
var (
	// ErrExceptionOwnTeam: nobody grants (or ends) an exception for a team
	// they are a member or owner of, whatever their role.
	ErrExceptionOwnTeam = errors.New("no one grants their own team an exception: a member or owner of the team cannot, even as an admin")
	// ErrExceptionNotOwner: only the contract's exception owner or an
	// admin grants or ends one.
	ErrExceptionNotOwner = errors.New("only the contract's exception owner or an admin may grant or end an exception")
	// ErrExceptionNotLive: only a live (active or under review)
	// connection's contract is enforced on the cluster.
	ErrExceptionNotLive = errors.New("only a live (active or under review) connection can be granted an exception")
	// ErrExceptionReason: every exception is recorded with why.
	ErrExceptionReason = errors.New("an exception needs a reason")
	// ErrExceptionEnded: the exception is already reverting or reverted.
	ErrExceptionEnded = errors.New("the exception has already ended")
)

// ExceptionInputError is a grant the form must correct: Field names the
// form field.
type ExceptionInputError struct {
	Field, Msg string
}

func (e *ExceptionInputError) Error() string { return e.Field + ": " + e.Msg }

// MayDecideException is the rule of who grants or ends an exception of
// team's connection whose approved contract names owner: not a member or
// owner of the team (ErrExceptionOwnTeam, checked first, so that an admin
// of the team is refused too); then an admin or the exception owner
// (compared without case, as emails are).
func MayDecideException(p Principal, team, owner string) error {
	if _, ok := p.TeamRole(team); ok {
		return ErrExceptionOwnTeam
	}
	if p.HasRole(RoleAdmin) {
		return nil
	}
	if namesPerson(owner, p) {
		return nil
	}
	return ErrExceptionNotOwner
}

// namesPerson reports whether email (a contract's named owner) is p's,
// compared without case and surrounding space, as emails are; an empty one
// names nobody.
func namesPerson(email string, p Principal) bool {
	email = strings.TrimSpace(email)
	return email != "" && p.Email != "" && strings.EqualFold(strings.TrimSpace(p.Email), email)
}

// ExceptionClasses are the classes an exception may grant: those of the
// cluster (known) that the contract does not already allow.
func ExceptionClasses(known, allowed []string) []string {
	var out []string
	for _, c := range known {
		if !slices.Contains(allowed, c) {
			out = append(out, c)
		}
	}
	return out
}

// GrantException decides a grant: who (MayDecideException), the connection
// live and approved, a reason, a class the cluster knows and the contract
// does not already allow, no unfinished exception of that class, and 1 to
// MaxDays days. The exception starts now and ends days×24h later. The
// effect audits the grant and tells the team and the admins; the store
// records the exception and its reapply job (JobReapply, queued with the
// effect unless jobOpen: one is queued or running, and the worker's sweep
// queues it once that one is done).
func GrantException(s Conn, p Principal, in ExceptionRequest, f ExceptionFacts, jobOpen bool, now time.Time) (Exception, Effect, error) {
	if now.IsZero() {
		return Exception{}, Effect{}, ErrNoClock
	}
	if err := MayDecideException(p, s.Team, f.Owner); err != nil {
		return Exception{}, Effect{}, err
	}
	if !s.State.Live() || s.ApprovedVersion == 0 {
		return Exception{}, Effect{}, ErrExceptionNotLive
	}
	reason := strings.TrimSpace(in.Reason)
	switch {
	case reason == "":
		return Exception{}, Effect{}, &ExceptionInputError{"reason", ErrExceptionReason.Error() + ": it is recorded in the connection's history and shown to the team"}
	case !slices.Contains(f.Known, in.PriorityClass):
		return Exception{}, Effect{}, &ExceptionInputError{"priority_class", fmt.Sprintf("%q is not one of the cluster's priority classes (%s)", in.PriorityClass, strings.Join(f.Known, ", "))}
	case slices.Contains(f.Allowed, in.PriorityClass):
		return Exception{}, Effect{}, &ExceptionInputError{"priority_class", fmt.Sprintf("the contract already allows %s: no exception is needed", in.PriorityClass)}
	case in.Days < 1 || in.Days > f.maxDays():
		return Exception{}, Effect{}, &ExceptionInputError{"days", fmt.Sprintf("an exception lasts 1 to %d days (the cluster's maximum)", f.maxDays())}
	}
	for _, o := range f.Open {
		if o.PriorityClass == in.PriorityClass {
			return Exception{}, Effect{}, &ExceptionInputError{"priority_class", fmt.Sprintf("exception #%d already grants %s (%s)", o.ID, o.PriorityClass, o.State)}
		}
	}
	by := Actor{ID: p.UserID, Email: p.Email}
	x := Exception{ConnectionID: s.ID, Team: s.Team, PriorityClass: in.PriorityClass, Reason: reason, GrantedBy: p.Email, GrantedByID: p.UserID,
		Start: now, End: now.Add(time.Duration(in.Days) * 24 * time.Hour), State: ExceptionActive}
	what := fmt.Sprintf("priority class %s until %s", x.PriorityClass, x.End.UTC().Format(time.RFC3339))
	e := Effect{By: by, Next: s.State,
		Audit: []AuditRecord{{Actor: by, Action: "exception.grant", Version: s.ApprovedVersion, Reason: what + ": " + reason, JobRef: !jobOpen}},
		Notify: []Notice{
			{Kind: "exception.granted", To: ToTeam, Subject: fmt.Sprintf("Connection #%d of team %s was granted an exception: %s", s.ID, s.Team, what), Body: reason},
			{Kind: "exception.granted", To: ToAdmins, Subject: fmt.Sprintf("%s granted connection #%d of team %s an exception: %s", p.Email, s.ID, s.Team, what), Body: reason},
		}}
	if !jobOpen {
		e.Job = &JobOrder{Kind: JobReapply, Version: s.ApprovedVersion}
	}
	return x, e, nil
}

// RevokeException decides an early end of exception x by p: the same
// people who may grant one (MayDecideException), with a reason, while x is
// active. The store records x reverting with the reapply job queued here
// (or by the sweep when jobOpen).
func RevokeException(s Conn, p Principal, x Exception, owner, reason string, jobOpen bool, now time.Time) (Effect, error) {
	if now.IsZero() {
		return Effect{}, ErrNoClock
	}
	if err := MayDecideException(p, s.Team, owner); err != nil {
		return Effect{}, err
	}
	if x.State != ExceptionActive {
		return Effect{}, ErrExceptionEnded
	}
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return Effect{}, &ExceptionInputError{"reason", ErrExceptionReason.Error() + ": say why it ends early"}
	}
	by := Actor{ID: p.UserID, Email: p.Email}
	return revertEffect(s, x, by, "exception.revoke", fmt.Sprintf("exception #%d (priority class %s) ended early: %s", x.ID, x.PriorityClass, reason), jobOpen), nil
}

// ExpireException decides the automatic revert of x at its end: due once
// now is at or after x.End while x is active (false otherwise: nothing to
// do). A connection no longer live has nothing on the cluster to revert
// (its namespace is revoked): the effect only audits, and the store records
// the revert done at once.
func ExpireException(s Conn, x Exception, jobOpen bool, now time.Time) (Effect, bool, error) {
	if now.IsZero() {
		return Effect{}, false, ErrNoClock
	}
	if x.State != ExceptionActive || now.Before(x.End) {
		return Effect{}, false, nil
	}
	if !s.State.Live() {
		return Effect{By: Provisioner, Next: s.State, Audit: []AuditRecord{audit(Provisioner, "exception.expire", s.ApprovedVersion,
			fmt.Sprintf("exception #%d (priority class %s) ended at %s; the connection is %s, nothing on the cluster to revert", x.ID, x.PriorityClass, x.End.UTC().Format(time.RFC3339), s.State))}}, true, nil
	}
	return revertEffect(s, x, Provisioner, "exception.expire",
		fmt.Sprintf("exception #%d (priority class %s) ended at %s: reverting", x.ID, x.PriorityClass, x.End.UTC().Format(time.RFC3339)), jobOpen), true, nil
}

// revertEffect is the effect of a decided revert: its audit event, the
// team's notice and the reapply job (unless one is open).
func revertEffect(s Conn, x Exception, by Actor, action, why string, jobOpen bool) Effect {
	e := Effect{By: by, Next: s.State,
		Audit:  []AuditRecord{{Actor: by, Action: action, Version: s.ApprovedVersion, Reason: why, JobRef: !jobOpen}},
		Notify: []Notice{{Kind: "exception.ended", To: ToTeam, Subject: fmt.Sprintf("Connection #%d of team %s: %s", s.ID, s.Team, why)}}}
	if !jobOpen {
		e.Job = &JobOrder{Kind: JobReapply, Version: s.ApprovedVersion}
	}
	return e
}

// ExceptionJobDone is what the store records when the job of exception x
// succeeded: a grant's job applied it (exception.applied), a revert's job
// reverted it (exception.reverted, recorded once: the store moves x from
// reverting to reverted in the same transaction).
func ExceptionJobDone(s Conn, x Exception, jobID int64) Effect {
	rec := audit(Provisioner, "exception.applied", s.ApprovedVersion,
		fmt.Sprintf("job %d applied exception #%d: priority class %s is in the team's admission parameters until %s", jobID, x.ID, x.PriorityClass, x.End.UTC().Format(time.RFC3339)))
	if x.State == ExceptionReverting {
		rec = audit(Provisioner, "exception.reverted", s.ApprovedVersion,
			fmt.Sprintf("job %d reverted exception #%d: priority class %s is no longer in the team's admission parameters", jobID, x.ID, x.PriorityClass))
	}
	return Effect{By: Provisioner, Next: s.State, Audit: []AuditRecord{rec}}
}

// ExceptionRequeue is the sweep's reapply job for exception x whose job
// is missing (none was free when it was decided) or failed: queued unless
// one is open (then the next sweep tries again).
func ExceptionRequeue(s Conn, x Exception, why string) (Effect, error) {
	if !s.State.Live() {
		return Effect{}, &TransitionError{From: s.State, Event: EventStartProvisioning}
	}
	return Effect{By: Provisioner, Next: s.State, Job: &JobOrder{Kind: JobReapply, Version: s.ApprovedVersion},
		Audit: []AuditRecord{{Actor: Provisioner, Action: "reapply.enqueue", Version: s.ApprovedVersion, Reason: fmt.Sprintf("exception #%d (%s): %s", x.ID, x.State, why), JobRef: true}}}, nil
}

// ExceptionClosed is the revert of exception x recorded done without a job:
// its connection is no longer live (revoked), so nothing of it is left on
// the cluster.
func ExceptionClosed(s Conn, x Exception) Effect {
	return Effect{By: Provisioner, Next: s.State, Audit: []AuditRecord{audit(Provisioner, "exception.reverted", s.ApprovedVersion,
		fmt.Sprintf("exception #%d (priority class %s): the connection is %s, nothing on the cluster to revert", x.ID, x.PriorityClass, s.State))}}
}
