package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// The reviewer's pages read reviews with a little of their connection
// (the queue marks orphans), count the open ones, and list the
// recommendations of revocation that wait for an admin; an admin's decline
// of one is a command like the others.

// QueuedReview is an open review with what the queue shows of its
// connection.
type QueuedReview struct {
	Review
	Purpose string
	// Orphan is the connection's orphan flag (Connection.Orphan).
	Orphan string
}

// ReviewCursor is where a page of the review queue ends: the last row's
// due date and id (the queue's order). The zero cursor is the first page.
type ReviewCursor struct {
	DueOn string
	ID    int64
}

// extraScan scans a row of reviewCols followed by more columns.
type extraScan struct {
	sc    interface{ Scan(...any) error }
	extra []any
}

func (e extraScan) Scan(dest ...any) error { return e.sc.Scan(append(dest, e.extra...)...) }

// ReviewQueuePage lists the open reviews after cursor in the queue's order
// (the longest due first, then the oldest opened), at most limit, with the
// cursor of the next page (zero at the end).
func (d *DB) ReviewQueuePage(ctx context.Context, f ReviewFilter, after ReviewCursor, limit int) ([]QueuedReview, ReviewCursor, error) {
	q := `SELECT ` + reviewCols + `, c.purpose, c.orphan` + reviewFrom + ` JOIN connections c ON c.id = r.connection_id WHERE r.decision = ''`
	var args []any
	if f.Team != "" {
		q, args = q+` AND r.team = ?`, append(args, f.Team)
	}
	if f.Trigger != "" {
		q, args = q+` AND r.trigger = ?`, append(args, f.Trigger)
	}
	if f.DueBy != "" {
		q, args = q+` AND r.due_on <= ?`, append(args, f.DueBy)
	}
	if after.ID != 0 {
		q, args = q+` AND (r.due_on > ? OR r.due_on = ? AND r.id > ?)`, append(args, after.DueOn, after.DueOn, after.ID)
	}
	q += ` ORDER BY r.due_on, r.id LIMIT ?`
	out, err := d.queryQueued(ctx, "review queue", q, append(args, limit+1)...)
	if err != nil {
		return nil, ReviewCursor{}, err
	}
	var next ReviewCursor
	if len(out) > limit {
		out = out[:limit]
		last := out[limit-1]
		next = ReviewCursor{DueOn: last.DueOn, ID: last.ID}
	}
	return out, next, nil
}

// ReviewTeams lists the teams that have an open review, sorted.
func (d *DB) ReviewTeams(ctx context.Context) ([]string, error) {
	return column[string](ctx, d.sql, `SELECT DISTINCT team FROM reviews WHERE decision = '' ORDER BY team`)
}

// ReviewCounts counts the open reviews, and of them those overdue on day
// today (a civil date: due before it).
func (d *DB) ReviewCounts(ctx context.Context, today string) (open, overdue int, err error) {
	err = d.sql.QueryRowContext(ctx, `SELECT count(*), COALESCE(sum(CASE WHEN due_on < ? THEN 1 ELSE 0 END), 0) FROM reviews WHERE decision = ''`, today).Scan(&open, &overdue)
	if err != nil {
		err = fmt.Errorf("store: review counts: %w", err)
	}
	return open, overdue, err
}

// latestRecommendation is the condition of a connection whose last review
// ended in a recommendation of revocation that waits for an admin: the
// connection is still under review and no later review exists.
const latestRecommendation = `r.decision = 'recommend_revocation' AND c.state = 'under_review'
	AND r.id = (SELECT max(l.id) FROM reviews l WHERE l.connection_id = r.connection_id)`

// RevocationRecommended lists the reviews whose recommendation of
// revocation waits for an admin (to revoke, or to decline it), the oldest
// decided first, at most limit.
func (d *DB) RevocationRecommended(ctx context.Context, limit int) ([]QueuedReview, error) {
	return d.queryQueued(ctx, "recommendations", `SELECT `+reviewCols+`, c.purpose, c.orphan`+reviewFrom+` JOIN connections c ON c.id = r.connection_id
WHERE `+latestRecommendation+` ORDER BY r.decided_at, r.id LIMIT ?`, limit)
}

// queryQueued runs a query of reviews with their connection's purpose and
// orphan flag.
func (d *DB) queryQueued(ctx context.Context, op, q string, args ...any) ([]QueuedReview, error) {
	rows, err := d.sql.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", op, err)
	}
	defer rows.Close()
	var out []QueuedReview
	for rows.Next() {
		var qr QueuedReview
		r, err := scanReview(extraScan{rows, []any{&qr.Purpose, &qr.Orphan}})
		if err != nil {
			return nil, err
		}
		qr.Review = r
		out = append(out, qr)
	}
	return out, rows.Err()
}

// PendingRecommendation returns connection id's review whose
// recommendation of revocation waits for an admin, if any.
func (d *DB) PendingRecommendation(ctx context.Context, id int64) (Review, bool, error) {
	return pendingRecommendation(ctx, d.sql, id)
}

func pendingRecommendation(ctx context.Context, q queryer, id int64) (Review, bool, error) {
	r, err := scanReview(q.QueryRowContext(ctx, `SELECT `+reviewCols+reviewFrom+` JOIN connections c ON c.id = r.connection_id
WHERE r.connection_id = ? AND `+latestRecommendation, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Review{}, false, nil
	}
	return r, err == nil, err
}

// DeclineRevocation records an admin declining the recommendation of
// revocation that waits on connection id (workflow.DeclineRevocation): the
// connection back to active with its next review date, the audit event and
// the notices, in one transaction that reads the recommendation (one
// revoked or declined meanwhile is refused there).
func (d *DB) DeclineRevocation(ctx context.Context, id int64, by workflow.Actor, reason string, now time.Time) (Connection, error) {
	c, _, _, err := d.command(ctx, id, true, now, func(tx *sql.Tx, cur Connection, s workflow.Conn) (workflow.Effect, error) {
		_, pending, err := pendingRecommendation(ctx, tx, id)
		if err != nil {
			return workflow.Effect{}, err
		}
		in := workflow.DeclineRevocationInput{Reason: reason, Recommended: pending}
		if cur.ApprovedVersion > 0 {
			v, err := getVersion(ctx, tx, id, cur.ApprovedVersion)
			if err != nil {
				return workflow.Effect{}, err
			}
			in.Approved = v.Contract
		}
		return workflow.DeclineRevocation(s, by, in, now)
	})
	return c, err
}
