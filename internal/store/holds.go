package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Holds (workflow/hold.go). Each step runs its workflow command in one
// write transaction (command): the hold's state, the independence rule and
// the connection's state are read and checked inside it, so that of two
// admins confirming at once the second finds the hold confirmed and is
// refused (*workflow.HoldError). The steps that change what is applied
// queue a hold job in the same transaction.

// ProposeHold asks for a hold of a live connection (workflow.ProposeHold).
func (d *DB) ProposeHold(ctx context.Context, id int64, by workflow.Actor, reason string, now time.Time) (Connection, error) {
	c, _, _, err := d.command(ctx, id, false, now, func(_ *sql.Tx, _ Connection, s workflow.Conn) (workflow.Effect, error) {
		return workflow.ProposeHold(s, by, reason, now)
	})
	if err != nil {
		return Connection{}, fmt.Errorf("store: propose hold: %w", err)
	}
	return c, nil
}

// DecideHold runs an admin's hold step on a connection (workflow's
// ConfirmHold, ConfirmDrain, ReleaseHold, DeclineHold): the hold moves and,
// for confirm, drain and release, a hold job is queued (0 for decline).
// confirmed is the admin's explicit confirmation of a drain.
func (d *DB) DecideHold(ctx context.Context, id int64, step workflow.HoldStep, by workflow.Actor, confirmed bool, reason string, now time.Time) (Connection, int64, error) {
	c, _, jobID, err := d.command(ctx, id, true, now, func(_ *sql.Tx, _ Connection, s workflow.Conn) (workflow.Effect, error) {
		return workflow.DecideHold(s, by, step, confirmed, reason, now)
	})
	if err != nil {
		return Connection{}, 0, fmt.Errorf("store: %s hold: %w", step, err)
	}
	return c, jobID, nil
}

// EnqueueHold queues the hold job of a live connection again (after one
// failed): it applies the stopPolicy the hold says now. While a hold job is
// queued or running it refuses with ErrJobOpen (a retry does not supersede
// one; a hold step does).
func (d *DB) EnqueueHold(ctx context.Context, id int64, by workflow.Actor, reason string, now time.Time) (workflow.Job, error) {
	_, _, jobID, err := d.command(ctx, id, false, now, func(tx *sql.Tx, _ Connection, s workflow.Conn) (workflow.Effect, error) {
		var open bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM jobs WHERE connection_id = ? AND kind = 'hold' AND state IN ('queued', 'running'))`,
			id).Scan(&open); err != nil {
			return workflow.Effect{}, err
		}
		return workflow.RetryHoldJob(s, by, open, reason, now)
	})
	if err != nil {
		return workflow.Job{}, fmt.Errorf("store: enqueue hold job: %w", err)
	}
	return d.Job(ctx, jobID)
}

// HoldQueue lists the connections whose proposed hold waits for an admin,
// the longest waiting first.
func (d *DB) HoldQueue(ctx context.Context, limit int) ([]Connection, error) {
	return d.queryConns(ctx, "hold queue", `SELECT `+connCols+` FROM connections c JOIN users u ON u.id = c.requester_id
WHERE c.hold != '' AND c.hold = 'proposed' ORDER BY c.hold_at, c.id LIMIT ?`, limit)
}

// EndDateReport is what one EndDateHolds pass did.
type EndDateReport struct {
	Notices   int // end-date notices sent to owners
	Proposals int // holds proposed because the end date passed
}

// EndDateHolds runs the end-date rule (workflow.EndDateDue) over every
// live connection at now: 14 and 3 days before its approved contract's
// end date the team's owners are told; once the date has passed the
// system proposes a hold, which an admin confirms or declines. Each stage
// is done once per connection and end date, across restarts: the stage's
// row in hold_notices is written in the transaction that records the
// effect, and a stage already there is skipped. A connection whose hold is
// already proposed or applied when its end date passes gets no second
// proposal (the stage is recorded all the same).
func (d *DB) EndDateHolds(ctx context.Context, now time.Time) (EndDateReport, error) {
	var rep EndDateReport
	type due struct {
		id    int64
		end   string
		stage workflow.EndDateStage
		left  int
	}
	rows, err := d.sql.QueryContext(ctx, `
SELECT c.id, v.body FROM connections c
JOIN contract_versions v ON v.connection_id = c.id AND v.version = c.approved_version
WHERE c.state IN (`+liveStatesSQL+`) ORDER BY c.id`)
	if err != nil {
		return rep, fmt.Errorf("store: end dates: %w", err)
	}
	var todo []due
	for rows.Next() {
		var id int64
		var body string
		if err := rows.Scan(&id, &body); err != nil {
			rows.Close()
			return rep, fmt.Errorf("store: end dates: %w", err)
		}
		c, err := workflow.DecodeContract([]byte(body))
		if err != nil {
			continue // an approved body always decodes; a bad one is no end date
		}
		if st, left := workflow.EndDateDue(c.EndDate, now); st != workflow.EndDateNone {
			todo = append(todo, due{id, c.EndDate, st, left})
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return rep, fmt.Errorf("store: end dates: %w", err)
	}
	for _, t := range todo {
		did := false
		_, _, _, err := d.command(ctx, t.id, false, now, func(tx *sql.Tx, _ Connection, s workflow.Conn) (workflow.Effect, error) {
			// The stage's row, written with the effect: its conflict says
			// the stage was done before.
			res, err := tx.ExecContext(ctx, `INSERT INTO hold_notices (connection_id, end_date, stage, created_at) VALUES (?, ?, ?, ?)
ON CONFLICT DO NOTHING`, t.id, t.end, t.stage, fmtTime(now))
			if err != nil {
				return workflow.Effect{}, err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return workflow.Effect{}, err
			}
			e, acted, err := workflow.EndDateReached(s, workflow.EndDateInput{End: t.end, Stage: t.stage, Left: t.left, Done: n == 0}, now)
			did = acted
			return e, err
		})
		if err != nil {
			return rep, fmt.Errorf("store: end date of connection %d: %w", t.id, err)
		}
		if did {
			if t.stage == workflow.EndDatePassed {
				rep.Proposals++
			} else {
				rep.Notices++
			}
		}
	}
	return rep, nil
}

// HoldStopPolicies is the Kueue stopPolicy the hold of each live (active
// or under review) connection puts on its queues (workflow.Hold.StopPolicy),
// for the drift check. A connection with a hold job queued or running is
// left out: its queues are about to change.
func (d *DB) HoldStopPolicies(ctx context.Context) (map[int64]string, error) {
	rows, err := d.sql.QueryContext(ctx, `SELECT c.id, c.hold FROM connections c WHERE c.state IN (`+liveStatesSQL+`) AND c.approved_version IS NOT NULL
AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.connection_id = c.id AND j.kind = 'hold' AND j.state IN ('queued', 'running'))`)
	if err != nil {
		return nil, fmt.Errorf("store: hold stop policies: %w", err)
	}
	defer rows.Close()
	out := map[int64]string{}
	for rows.Next() {
		var id int64
		var h string
		if err := rows.Scan(&id, &h); err != nil {
			return nil, fmt.Errorf("store: hold stop policies: %w", err)
		}
		out[id] = workflow.Hold(h).StopPolicy()
	}
	return out, rows.Err()
}
