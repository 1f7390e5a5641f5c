package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Exceptions with an expiry (workflow/exception.go; migration 00033). Each
// decision runs its workflow command in one write transaction with the
// facts it reads (the approved contract's exception owner and classes, the
// connection's unfinished exceptions, whether a reapply job is open), and
// writes the exception's row in that transaction, with the effect's audit
// events, notices and reapply job. The rules are workflow's.

const exceptionCols = `x.id, x.connection_id, x.team, x.priority_class, x.reason, x.granted_by, x.granted_by_id, x.starts_at, x.ends_at,
x.state, COALESCE(x.job_id, 0), x.applied_at, x.revoked_by, x.revoked_by_id, x.revoke_reason, x.ended_at, x.reverted_at`

func scanException(sc interface{ Scan(...any) error }) (workflow.Exception, error) {
	var x workflow.Exception
	var start, end, applied, ended, reverted string
	if err := sc.Scan(&x.ID, &x.ConnectionID, &x.Team, &x.PriorityClass, &x.Reason, &x.GrantedBy, &x.GrantedByID, &start, &end,
		&x.State, &x.JobID, &applied, &x.RevokedBy, &x.RevokedByID, &x.RevokeReason, &ended, &reverted); err != nil {
		return x, err
	}
	var err error
	for _, t := range []struct {
		s string
		p *time.Time
	}{{start, &x.Start}, {end, &x.End}, {applied, &x.AppliedAt}, {ended, &x.EndedAt}, {reverted, &x.RevertedAt}} {
		if t.s == "" {
			continue
		}
		if *t.p, err = parseTime(t.s); err != nil {
			return x, err
		}
	}
	return x, nil
}

func queryExceptions(ctx context.Context, q queryer, where string, args ...any) ([]workflow.Exception, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+exceptionCols+` FROM exceptions x WHERE `+where+` ORDER BY x.id`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: exceptions: %w", err)
	}
	defer rows.Close()
	var out []workflow.Exception
	for rows.Next() {
		x, err := scanException(rows)
		if err != nil {
			return nil, fmt.Errorf("store: exceptions: %w", err)
		}
		out = append(out, x)
	}
	return out, rows.Err()
}

// Exceptions lists a connection's exceptions, oldest first.
func (d *DB) Exceptions(ctx context.Context, connID int64) ([]workflow.Exception, error) {
	return queryExceptions(ctx, d.sql, `x.connection_id = ?`, connID)
}

// ExceptionsInEffect are the exceptions whose classes are in the admission
// parameters (state active), by connection: all of them (connIDs nil) or
// those of connIDs.
func (d *DB) ExceptionsInEffect(ctx context.Context, connIDs []int64) (map[int64][]workflow.Exception, error) {
	where, args := `x.state = 'active'`, []any{}
	if connIDs != nil {
		if len(connIDs) == 0 {
			return map[int64][]workflow.Exception{}, nil
		}
		in, inArgs := idList(connIDs)
		where, args = where+` AND x.connection_id IN `+in, inArgs
	}
	xs, err := queryExceptions(ctx, d.sql, where, args...)
	if err != nil {
		return nil, err
	}
	out := map[int64][]workflow.Exception{}
	for _, x := range xs {
		out[x.ConnectionID] = append(out[x.ConnectionID], x)
	}
	return out, nil
}

// reapplyOpen reports whether connection id has a reapply job queued or
// running (jobs_one_open admits one).
func reapplyOpen(ctx context.Context, tx *sql.Tx, id int64) (bool, error) {
	var open bool
	err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM jobs WHERE connection_id = ? AND kind = 'reapply' AND state IN ('queued', 'running'))`, id).Scan(&open)
	return open, err
}

// exceptionFacts loads what the exception rules read about connection s,
// inside tx: the approved contract's exception owner and classes, and the
// unfinished exceptions.
func exceptionFacts(ctx context.Context, tx *sql.Tx, s workflow.Conn, known []string, maxDays int) (workflow.ExceptionFacts, error) {
	f := workflow.ExceptionFacts{Known: known, MaxDays: maxDays}
	if s.ApprovedVersion != 0 {
		v, err := getVersion(ctx, tx, s.ID, s.ApprovedVersion)
		if err != nil {
			return f, err
		}
		f.Owner, f.Allowed = v.Contract.ExceptionOwner, v.Contract.Scheduling.PriorityClasses
	}
	var err error
	f.Open, err = queryExceptions(ctx, tx, `x.connection_id = ? AND x.state != 'reverted'`, s.ID)
	return f, err
}

// GrantException records a grant on connection id by p
// (workflow.GrantException): known are the cluster's priority classes,
// maxDays its longest exception. It returns the exception recorded.
func (d *DB) GrantException(ctx context.Context, id int64, p workflow.Principal, in workflow.ExceptionRequest, known []string, maxDays int, now time.Time) (workflow.Exception, error) {
	var x workflow.Exception
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		_, jobID, err := commandIn(ctx, tx, id, false, now, func(tx *sql.Tx, _ Connection, s workflow.Conn) (workflow.Effect, error) {
			f, err := exceptionFacts(ctx, tx, s, known, maxDays)
			if err != nil {
				return workflow.Effect{}, err
			}
			open, err := reapplyOpen(ctx, tx, id)
			if err != nil {
				return workflow.Effect{}, err
			}
			var e workflow.Effect
			x, e, err = workflow.GrantException(s, p, in, f, open, now)
			return e, err
		})
		if err != nil {
			return err
		}
		x.JobID = jobID
		return tx.QueryRowContext(ctx, `INSERT INTO exceptions (connection_id, team, priority_class, reason, granted_by, granted_by_id, starts_at, ends_at, state, job_id)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'active', ?) RETURNING id`, x.ConnectionID, x.Team, x.PriorityClass, x.Reason, x.GrantedBy, x.GrantedByID,
			fmtTime(x.Start), fmtTime(x.End), nullID(jobID)).Scan(&x.ID)
	})
	if isUniqueViolation(err) {
		// exceptions_one_open: a concurrent grant of the same class won
		// (PostgreSQL's read committed lets both read none open).
		err = &workflow.ExceptionInputError{Field: "priority_class", Msg: fmt.Sprintf("another exception of %s was granted a moment ago", in.PriorityClass)}
	}
	if err != nil {
		return workflow.Exception{}, fmt.Errorf("store: grant exception: %w", err)
	}
	return x, nil
}

// RevokeException ends exception xid of connection id early
// (workflow.RevokeException): it is recorded reverting with its reapply
// job. An exception of another connection is ErrNotFound.
func (d *DB) RevokeException(ctx context.Context, id, xid int64, p workflow.Principal, reason string, now time.Time) error {
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		xs, err := queryExceptions(ctx, tx, `x.id = ? AND x.connection_id = ?`, xid, id)
		if err != nil {
			return err
		}
		if len(xs) == 0 {
			return ErrNotFound
		}
		x := xs[0]
		_, jobID, err := commandIn(ctx, tx, id, false, now, func(tx *sql.Tx, _ Connection, s workflow.Conn) (workflow.Effect, error) {
			f, err := exceptionFacts(ctx, tx, s, nil, 0)
			if err != nil {
				return workflow.Effect{}, err
			}
			open, err := reapplyOpen(ctx, tx, id)
			if err != nil {
				return workflow.Effect{}, err
			}
			return workflow.RevokeException(s, p, x, f.Owner, reason, open, now)
		})
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE exceptions SET state = 'reverting', ended_at = ?, job_id = ?, revoked_by = ?, revoked_by_id = ?, revoke_reason = ?
WHERE id = ? AND state = 'active'`, fmtTime(now), nullID(jobID), p.Email, p.UserID, reason, xid)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: revoke exception: %w", err)
	}
	return nil
}

// ExceptionSweep is what one SweepExceptions pass did.
type ExceptionSweep struct {
	Expired  int // reverts decided at the end
	Applied  int // grants whose job succeeded
	Reverted int // reverts recorded done
	Requeued int // reapply jobs queued for an exception that had none
}

// errNothing: a sweep step found its work done already (by another
// replica, or an earlier pass): the transaction records nothing.
var errNothing = errors.New("store: nothing to do")

// errNotLive: the connection of an exception waiting for a job is no
// longer live (revoked): no job runs on it.
var errNotLive = errors.New("store: the connection is not live")

// SweepExceptions runs the exceptions' automatic steps at now, each in its
// own write transaction that reads the exception again and changes it only
// from the state it found (so a step is recorded once, whichever replica or
// pass runs it, and a crash between steps leaves the state the next pass
// continues from):
//   - an active exception whose end passed: the revert is decided
//     (reverting) with its reapply job (workflow.ExpireException);
//   - an exception whose job succeeded: a grant's is recorded applied, a
//     revert's reverted (workflow.ExceptionJobDone);
//   - an exception waiting for a job (none was free, or it failed): a
//     reapply job is queued once none is open (workflow.ExceptionRequeue).
func (d *DB) SweepExceptions(ctx context.Context, now time.Time) (ExceptionSweep, error) {
	var rep ExceptionSweep
	type todo struct {
		x        workflow.Exception
		jobState string
	}
	rows, err := d.sql.QueryContext(ctx, `SELECT `+exceptionCols+`, COALESCE(j.state, '') FROM exceptions x LEFT JOIN jobs j ON j.id = x.job_id
WHERE x.state != 'reverted' ORDER BY x.id`)
	if err != nil {
		return rep, fmt.Errorf("store: sweep exceptions: %w", err)
	}
	var all []todo
	for rows.Next() {
		var t todo
		var start, end, applied, ended, reverted string
		x := &t.x
		if err := rows.Scan(&x.ID, &x.ConnectionID, &x.Team, &x.PriorityClass, &x.Reason, &x.GrantedBy, &x.GrantedByID, &start, &end,
			&x.State, &x.JobID, &applied, &x.RevokedBy, &x.RevokedByID, &x.RevokeReason, &ended, &reverted, &t.jobState); err != nil {
			rows.Close()
			return rep, fmt.Errorf("store: sweep exceptions: %w", err)
		}
		if x.End, err = parseTime(end); err != nil {
			rows.Close()
			return rep, fmt.Errorf("store: sweep exceptions: %w", err)
		}
		x.AppliedAt, _ = parseTime(applied)
		all = append(all, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return rep, fmt.Errorf("store: sweep exceptions: %w", err)
	}
	for _, t := range all {
		var n *int
		var err error
		switch {
		case t.jobState == string(workflow.JobSucceeded) && (t.x.State == workflow.ExceptionReverting || t.x.AppliedAt.IsZero()):
			err = d.exceptionJobDone(ctx, t.x, now)
			n = &rep.Applied
			if t.x.State == workflow.ExceptionReverting {
				n = &rep.Reverted
			}
		case t.x.State == workflow.ExceptionActive && !now.Before(t.x.End):
			err, n = d.expireException(ctx, t.x, now), &rep.Expired
		case (t.x.State == workflow.ExceptionReverting || t.x.AppliedAt.IsZero()) && (t.x.JobID == 0 || t.jobState == string(workflow.JobFailed)):
			err, n = d.requeueException(ctx, t.x, now), &rep.Requeued
		default:
			continue
		}
		switch {
		case errors.Is(err, errNothing):
		case err != nil:
			return rep, fmt.Errorf("store: exception %d: %w", t.x.ID, err)
		default:
			*n++
		}
	}
	return rep, nil
}

// exceptionJobDone records that the job of x succeeded, once: the UPDATE
// changes x only from the state and job it had.
func (d *DB) exceptionJobDone(ctx context.Context, x workflow.Exception, now time.Time) error {
	return d.inTx(ctx, func(tx *sql.Tx) error {
		_, _, err := commandIn(ctx, tx, x.ConnectionID, false, now, func(tx *sql.Tx, _ Connection, s workflow.Conn) (workflow.Effect, error) {
			q := `UPDATE exceptions SET applied_at = ? WHERE id = ? AND job_id = ? AND state = 'active' AND applied_at = ''`
			if x.State == workflow.ExceptionReverting {
				q = `UPDATE exceptions SET reverted_at = ?, state = 'reverted' WHERE id = ? AND job_id = ? AND state = 'reverting'`
			}
			res, err := tx.ExecContext(ctx, q, fmtTime(now), x.ID, x.JobID)
			if err != nil {
				return workflow.Effect{}, err
			}
			if n, err := res.RowsAffected(); err != nil || n == 0 {
				return workflow.Effect{}, cmpErr(err, errNothing)
			}
			return workflow.ExceptionJobDone(s, x, x.JobID), nil
		})
		return err
	})
}

// expireException decides the revert of x at its end, once.
func (d *DB) expireException(ctx context.Context, x workflow.Exception, now time.Time) error {
	return d.inTx(ctx, func(tx *sql.Tx) error {
		live := true
		_, jobID, err := commandIn(ctx, tx, x.ConnectionID, false, now, func(tx *sql.Tx, _ Connection, s workflow.Conn) (workflow.Effect, error) {
			cur, err := queryExceptions(ctx, tx, `x.id = ? AND x.state = 'active'`, x.ID)
			if err != nil || len(cur) == 0 {
				return workflow.Effect{}, cmpErr(err, errNothing)
			}
			open, err := reapplyOpen(ctx, tx, x.ConnectionID)
			if err != nil {
				return workflow.Effect{}, err
			}
			e, due, err := workflow.ExpireException(s, cur[0], open, now)
			if err == nil && !due {
				err = errNothing
			}
			live = s.State.Live()
			return e, err
		})
		if err != nil {
			return err
		}
		if !live {
			_, err = tx.ExecContext(ctx, `UPDATE exceptions SET state = 'reverted', ended_at = ?, reverted_at = ? WHERE id = ? AND state = 'active'`,
				fmtTime(now), fmtTime(now), x.ID)
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE exceptions SET state = 'reverting', ended_at = ?, job_id = ? WHERE id = ? AND state = 'active'`,
			fmtTime(now), nullID(jobID), x.ID)
		return err
	})
}

// requeueException queues the reapply job x waits for, unless one is open
// (errNothing: the next pass tries again).
func (d *DB) requeueException(ctx context.Context, x workflow.Exception, now time.Time) error {
	return d.inTx(ctx, func(tx *sql.Tx) error {
		closed := false
		_, jobID, err := commandIn(ctx, tx, x.ConnectionID, false, now, func(tx *sql.Tx, _ Connection, s workflow.Conn) (workflow.Effect, error) {
			if !s.State.Live() {
				if x.State != workflow.ExceptionReverting {
					return workflow.Effect{}, errNotLive
				}
				closed = true
				return workflow.ExceptionClosed(s, x), nil
			}
			open, err := reapplyOpen(ctx, tx, x.ConnectionID)
			if err != nil || open {
				return workflow.Effect{}, cmpErr(err, errNothing)
			}
			why := "its reapply job failed"
			if x.JobID == 0 {
				why = "no reapply job was free when it was decided"
			}
			return workflow.ExceptionRequeue(s, x, why)
		})
		if errors.Is(err, errNotLive) {
			return errNothing // its end (ExpireException) closes it
		}
		if err != nil {
			return err
		}
		if closed {
			_, err := tx.ExecContext(ctx, `UPDATE exceptions SET state = 'reverted', reverted_at = ? WHERE id = ? AND state = 'reverting'`, fmtTime(now), x.ID)
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE exceptions SET job_id = ? WHERE id = ? AND state = ? AND COALESCE(job_id, 0) = ?`, jobID, x.ID, x.State, x.JobID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return cmpErr(err, errNothing) // rolls the job back too
		}
		return nil
	})
}

// cmpErr is err, or else fallback.
func cmpErr(err, fallback error) error {
	if err != nil {
		return err
	}
	return fallback
}
