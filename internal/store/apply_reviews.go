package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// The reviews table's one writer: apply records an effect's review parts
// here (workflow.Effect's OpenReview, CloseReview and NoteReview), in the
// transaction that records the rest of the effect.

// recordReview records an effect's review parts inside apply's
// transaction: the review it opens (of the approved version, with its
// frozen evidence), the decision on the open one, or a trigger added to
// the open one.
func recordReview(ctx context.Context, tx *sql.Tx, id int64, team string, cur *Connection, e workflow.Effect, now time.Time) error {
	if o := e.OpenReview; o != nil {
		if cur == nil || cur.ApprovedVersion == 0 {
			return errors.New("store: only an approved connection is reviewed")
		}
		ev := o.Evidence
		if len(ev) == 0 {
			ev = []byte("{}")
		}
		if !json.Valid(ev) {
			return errors.New("store: a review's evidence must be JSON")
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO reviews (connection_id, team, version, trigger, detail, due_on, opened_at, evidence, evidence_hash, demo)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, id, team, cur.ApprovedVersion, o.Trigger, o.Detail, o.DueOn, fmtTime(now), string(ev), EvidenceHash(ev), o.Demo); err != nil {
			if isUniqueViolation(err) {
				return workflow.ErrReviewOpen
			}
			return fmt.Errorf("store: open review: %w", err)
		}
	}
	if o := e.CloseReview; o != nil {
		res, err := tx.ExecContext(ctx, `UPDATE reviews SET decision = ?, reason = ?, deadline = ?, decided_by = ?, decided_at = ?
WHERE id = ? AND connection_id = ? AND decision = ''`, o.Decision, o.Reason, o.Deadline, e.By.ID, fmtTime(now), o.ReviewID, id)
		if err != nil {
			return fmt.Errorf("store: decide review %d: %w", o.ReviewID, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return workflow.ErrReviewClosed
		}
	}
	if o := e.NoteReview; o != nil {
		res, err := tx.ExecContext(ctx, `UPDATE reviews SET more_triggers = CASE WHEN more_triggers = '' THEN ? ELSE more_triggers || ? END
WHERE connection_id = ? AND decision = ''`, o.Line, "\n"+o.Line, id)
		if err != nil {
			return fmt.Errorf("store: review trigger: %w", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return workflow.ErrReviewClosed // the command saw it open, in this transaction
		}
	}
	return nil
}

// hasOpenReview reports whether connection id has an open review, read
// inside the transaction of the command that needs the fact.
func hasOpenReview(ctx context.Context, tx *sql.Tx, id int64) (bool, error) {
	var open bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM reviews WHERE connection_id = ? AND decision = '')`, id).Scan(&open); err != nil {
		return false, fmt.Errorf("store: open review of connection %d: %w", id, err)
	}
	return open, nil
}
