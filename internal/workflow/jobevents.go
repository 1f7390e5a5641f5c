package workflow

import (
	"fmt"
	"time"
)

// The commands the provisioning worker gives when a job starts, completes
// or fails. The job's own rows (its state, lease and steps) are the store's;
// what the job means for the connection is decided here.

// JobRun is the attempt of a job a report is about.
type JobRun struct {
	ID       int64
	Kind     JobKind
	Version  int
	Attempts int
	Steps    int    // steps of the plan the attempt runs
	PlanHash string // the plan the attempt runs
	DryRun   bool
	// Resumed: an earlier attempt of this job already started (it had
	// recorded its plan).
	Resumed bool
}

// OnJobStarted is the start of an attempt. A provisioning job that is not a
// dry run moves an approved connection to provisioning; a resumed attempt
// (the connection is already provisioning) moves nothing. A revoke job must
// find the connection revoking, a reapply job live. A connection in any
// other state (revoked while the job waited, say) refuses with the
// lifecycle's *TransitionError: the worker fails the job.
func OnJobStarted(s Conn, j JobRun, now time.Time) (Effect, error) {
	if now.IsZero() {
		return Effect{}, ErrNoClock
	}
	e := Effect{By: Provisioner, Next: s.State}
	switch {
	case j.Kind == JobRevoke:
		if s.State != StateRevoking {
			return Effect{}, &TransitionError{From: s.State, Event: EventRevocationDone}
		}
		e.Audit = firstStart(j, "revocation.start", "removing", "dry run, removing nothing")
	case j.Kind == JobReapply:
		// Re-applying fixes drift on a live connection; it changes no state.
		if !s.State.Live() {
			return Effect{}, &TransitionError{From: s.State, Event: EventStartProvisioning}
		}
	case j.Kind == JobAmend:
		// An amendment runs on a live connection whose change is approved.
		if !s.State.Live() {
			return Effect{}, &TransitionError{From: s.State, Event: EventStartProvisioning}
		}
		if s.Amendment != AmendApproved || s.CurrentVersion != j.Version {
			return Effect{}, &AmendmentError{From: s.Amendment, Event: EventStartProvisioning}
		}
		e.Audit = firstStart(j, "amendment.start", "applying in place", "dry run, applying nothing")
	case j.Kind == JobHold:
		// A hold job runs on a live connection; one revoked meanwhile has
		// its jobs cancelled and its queue removed or locked.
		if !s.State.Live() {
			return Effect{}, &TransitionError{From: s.State, Event: EventStartProvisioning}
		}
		e.Audit = firstStart(j, "hold.start", "setting the queues' stopPolicy", "dry run, setting nothing")
	case j.Kind != JobProvision:
		return Effect{}, fmt.Errorf("workflow: %s jobs do not run on a connection", j.Kind)
	case s.State == StateProvisioning:
	case s.State == StateApproved && !j.DryRun:
		next, err := Transition(s.State, EventStartProvisioning, now)
		if err != nil {
			return Effect{}, err
		}
		e.Next = next
		e.Audit = []AuditRecord{audit(Provisioner, "provisioning.start", j.Version,
			fmt.Sprintf("job %d: %d steps, plan %s", j.ID, j.Steps, j.PlanHash))}
	case s.State == StateApproved: // a dry run leaves the connection approved
	default:
		return Effect{}, &TransitionError{From: s.State, Event: EventStartProvisioning}
	}
	return e, nil
}

// firstStart is the audit event of a job's first attempt (none for a resumed
// one): what it does, or its dry run.
func firstStart(j JobRun, action, doing, dryRun string) []AuditRecord {
	if j.Resumed {
		return nil
	}
	if j.DryRun {
		doing = dryRun
	}
	return []AuditRecord{audit(Provisioner, action, j.Version, fmt.Sprintf("job %d: %d steps, %s, plan %s", j.ID, j.Steps, doing, j.PlanHash))}
}

// OnJobSucceeded is a job whose every step is done. A provisioning job moves
// the connection from provisioning to active. A dry run applied nothing, so
// the connection stays (or goes back to) approved. A revoke job moves it
// from revoking to revoked; a dry-run revocation does only when nothing was
// ever applied to a cluster for it (everApplied false), since saying
// revoked while its objects may still exist would be a lie.
func OnJobSucceeded(s Conn, j JobRun, everApplied bool, now time.Time) (Effect, error) {
	if now.IsZero() {
		return Effect{}, ErrNoClock
	}
	e := Effect{By: Provisioner, Next: s.State}
	var ev Event
	var rec AuditRecord
	switch {
	case j.Kind == JobRevoke:
		rec = audit(Provisioner, "revocation.done", j.Version,
			fmt.Sprintf("job %d, attempt %d: %d steps done, plan %s", j.ID, j.Attempts, j.Steps, j.PlanHash))
		ev = EventRevocationDone
		if j.DryRun {
			rec.Action = "revocation.dry_run"
			if everApplied {
				rec.Reason = fmt.Sprintf("job %d: dry run, nothing removed: the connection was provisioned on a cluster, which a dry run "+
					"cannot touch; it stays revoking until the revocation runs again with a cluster configured", j.ID)
				ev = ""
			} else {
				rec.Reason = fmt.Sprintf("job %d: dry run: nothing was ever applied to a cluster for this connection, so there is nothing to remove; "+
					"the %d steps record what revocation would remove", j.ID, j.Steps)
			}
		}
		if ev != "" {
			e.Notify = []Notice{{Kind: "connection.revoked", To: ToTeam, Subject: fmt.Sprintf("Connection #%d of team %s is revoked", s.ID, s.Team)}}
		}
	case j.Kind == JobAmend:
		if !s.State.Live() || s.Amendment != AmendApproved {
			return Effect{}, &AmendmentError{From: s.Amendment, Event: EventProvisioningSucceeded}
		}
		if j.DryRun {
			// Nothing was applied: the approved version still runs, and
			// the change waits to be tried again with a cluster.
			failed := AmendFailed
			e.Amend = &failed
			e.Audit = []AuditRecord{audit(Provisioner, "amendment.dry_run", j.Version,
				fmt.Sprintf("job %d: dry run, nothing applied: the plan (%d steps, %s) is recorded; the approved version stays active", j.ID, j.Steps, j.PlanHash))}
			return e, nil
		}
		none := AmendNone
		e.Amend, e.Approve = &none, j.Version
		e.Audit = []AuditRecord{audit(Provisioner, "amendment.applied", j.Version,
			fmt.Sprintf("job %d, attempt %d: %d steps applied, plan %s; version %d is active", j.ID, j.Attempts, j.Steps, j.PlanHash, j.Version))}
		e.Notify = []Notice{{Kind: "amendment.applied", To: ToTeam, Subject: fmt.Sprintf("Connection #%d of team %s is active on version %d", s.ID, s.Team, j.Version)}}
		return e, nil
	case j.Kind == JobHold:
		rec = audit(Provisioner, "hold.applied", j.Version,
			fmt.Sprintf("job %d, attempt %d: %d steps, the queues' stopPolicy is set", j.ID, j.Attempts, j.Steps))
		if j.DryRun {
			rec.Action = "hold.dry_run"
			rec.Reason = fmt.Sprintf("job %d: dry run, nothing set: the %d steps record what the hold would set", j.ID, j.Steps)
		}
	case j.Kind == JobReapply:
		rec = audit(Provisioner, "reapply.succeeded", j.Version,
			fmt.Sprintf("job %d, attempt %d: %d steps, plan %s re-applied, extra role bindings removed", j.ID, j.Attempts, j.Steps, j.PlanHash))
	case j.Kind != JobProvision:
		return Effect{}, fmt.Errorf("workflow: %s jobs do not run on a connection", j.Kind)
	case j.DryRun:
		rec = audit(Provisioner, "provisioning.dry_run", j.Version,
			fmt.Sprintf("job %d: dry run, nothing applied: the plan (%d steps, %s) is recorded; the connection stays approved", j.ID, j.Steps, j.PlanHash))
		// Should a real attempt have moved it to provisioning before the
		// worker was restarted in dry-run mode, it goes back to approved.
		if s.State == StateProvisioning {
			ev = EventProvisioningFailed
		}
	default:
		rec = audit(Provisioner, "provisioning.succeeded", j.Version,
			fmt.Sprintf("job %d, attempt %d: %d steps applied, plan %s", j.ID, j.Attempts, j.Steps, j.PlanHash))
		ev = EventProvisioningSucceeded
		e.Notify = []Notice{{Kind: "connection.active", To: ToTeam, Subject: fmt.Sprintf("Connection #%d of team %s is active (version %d)", s.ID, s.Team, j.Version)}}
	}
	if ev != "" {
		next, err := Transition(s.State, ev, now)
		if err != nil {
			return Effect{}, err
		}
		e.Next = next
	}
	e.Audit = []AuditRecord{rec}
	return e, nil
}

// OnJobFailed is a job the worker gave up on. A provisioning connection
// returns to approved: the approval stands and a new job can try again. A
// failed revoke job leaves the connection revoking: what it did not remove
// may still be on the cluster.
func OnJobFailed(s Conn, j JobRun, errText string, now time.Time) (Effect, error) {
	if now.IsZero() {
		return Effect{}, ErrNoClock
	}
	e := Effect{By: Provisioner, Next: s.State}
	if s.State == StateProvisioning {
		next, err := Transition(s.State, EventProvisioningFailed, now)
		if err != nil {
			return Effect{}, err
		}
		e.Next = next
	}
	action := "provisioning.failed"
	switch j.Kind {
	case JobReapply:
		action = "reapply.failed"
	case JobRevoke:
		action = "revocation.failed"
	case JobHold:
		// The hold is recorded; the queue may not say it yet. An admin
		// releases or confirms again, which queues a new job.
		action = "hold.failed"
	case JobAmend:
		// The approved version still runs; an admin may try again.
		action = "amendment.failed"
		if s.Amendment == AmendApproved {
			failed := AmendFailed
			e.Amend = &failed
		}
	}
	e.Audit = []AuditRecord{audit(Provisioner, action, j.Version, fmt.Sprintf("job %d, attempt %d: %s", j.ID, j.Attempts, errText))}
	e.Notify = []Notice{{Kind: action, To: ToAdmins, Subject: fmt.Sprintf("Connection #%d of team %s: %s job %d failed", s.ID, s.Team, j.Kind, j.ID)}}
	return e, nil
}
