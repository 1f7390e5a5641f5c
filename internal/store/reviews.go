package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Review is one lifecycle review of a connection's approved version, with
// the evidence frozen when it opened and, once decided, its decision.
type Review struct {
	ID           int64
	ConnectionID int64
	Team         string
	Version      int
	Trigger      workflow.ReviewTrigger
	Detail       string
	DueOn        string // civil date
	OpenedAt     time.Time
	Evidence     []byte // JSON of workflow.Evidence, as frozen
	EvidenceHash string // hex sha256 of Evidence
	// MoreTriggers are the triggers that fired while the review was open,
	// one line each ("owner_left: bob@example.com left red-owners").
	MoreTriggers []string
	Demo         bool
	// Tampered: the stored evidence no longer matches its hash (changed
	// outside the portal). Lists keep such a review, flagged; reading it
	// alone (Review, OpenReviewOf, DecideReview) returns ErrEvidenceTampered.
	Tampered bool

	Decision       workflow.ReviewDecision // "" while open
	Reason         string
	Deadline       string
	DecidedBy      int64
	DecidedByEmail string
	DecidedAt      time.Time
}

// Open reports whether the review waits for a decision.
func (r Review) Open() bool { return r.Decision == "" }

// EvidenceHash is the hash a review's evidence is frozen with.
func EvidenceHash(evidence []byte) string {
	h := sha256.Sum256(evidence)
	return hex.EncodeToString(h[:])
}

// ErrEvidenceTampered: a review's stored evidence no longer matches its hash.
var ErrEvidenceTampered = errors.New("store: a review's evidence does not match the hash it was frozen with")

const reviewCols = `r.id, r.connection_id, r.team, r.version, r.trigger, r.detail, r.due_on, r.opened_at, r.evidence, r.evidence_hash,
	r.more_triggers, r.demo, r.decision, r.reason, r.deadline, COALESCE(r.decided_by, 0), COALESCE(u.email, ''), r.decided_at`

const reviewFrom = ` FROM reviews r LEFT JOIN users u ON u.id = r.decided_by`

func scanReview(sc interface{ Scan(...any) error }) (Review, error) {
	var r Review
	var opened, decided, more, evidence string
	if err := sc.Scan(&r.ID, &r.ConnectionID, &r.Team, &r.Version, &r.Trigger, &r.Detail, &r.DueOn, &opened, &evidence, &r.EvidenceHash,
		&more, &r.Demo, &r.Decision, &r.Reason, &r.Deadline, &r.DecidedBy, &r.DecidedByEmail, &decided); err != nil {
		return r, err
	}
	r.Evidence = []byte(evidence)
	if more != "" {
		r.MoreTriggers = strings.Split(more, "\n")
	}
	var err error
	if r.OpenedAt, err = parseTime(opened); err != nil {
		return r, err
	}
	if decided != "" {
		if r.DecidedAt, err = parseTime(decided); err != nil {
			return r, err
		}
	}
	r.Tampered = EvidenceHash(r.Evidence) != r.EvidenceHash
	return r, nil
}

// intact refuses a review read alone whose evidence was changed.
func intact(r Review, err error) (Review, error) {
	if err == nil && r.Tampered {
		return r, fmt.Errorf("%w (review %d)", ErrEvidenceTampered, r.ID)
	}
	return r, err
}

// OpenReview opens a review of connection id (active) with the evidence
// collected for it: the connection moves to under_review and the review is
// recorded in one transaction. A connection with a review already open
// returns workflow.ErrReviewOpen (RecordReviewEvent records the new trigger
// on it instead).
func (d *DB) OpenReview(ctx context.Context, id int64, in workflow.OpenReviewInput, now time.Time) (Review, error) {
	_, _, _, err := d.command(ctx, id, false, now, func(_ *sql.Tx, _ Connection, s workflow.Conn) (workflow.Effect, error) {
		return workflow.OpenReview(s, in, now)
	})
	if err != nil {
		return Review{}, err
	}
	r, ok, err := d.OpenReviewOf(ctx, id)
	if err == nil && !ok {
		err = fmt.Errorf("store: review of connection %d not found after opening it", id)
	}
	return r, err
}

// DecideReview records a reviewer's decision on review reviewID: the
// decision, the connection's next state and next due date, the audit event
// and the notices, in one transaction that re-reads the review and the
// connection (a review decided meanwhile, or a reviewer who edited the
// contract, is refused there).
func (d *DB) DecideReview(ctx context.Context, reviewID int64, by workflow.Actor, in workflow.DecideReviewInput, now time.Time) (Review, error) {
	var connID int64
	if err := d.sql.QueryRowContext(ctx, `SELECT connection_id FROM reviews WHERE id = ?`, reviewID).Scan(&connID); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return Review{}, ErrNotFound
		}
		return Review{}, fmt.Errorf("store: review %d: %w", reviewID, err)
	}
	in.ReviewID = reviewID
	_, _, _, err := d.command(ctx, connID, true, now, func(tx *sql.Tx, cur Connection, s workflow.Conn) (workflow.Effect, error) {
		r, err := intact(scanReview(tx.QueryRowContext(ctx, `SELECT `+reviewCols+reviewFrom+` WHERE r.id = ?`, reviewID)))
		if err != nil {
			return workflow.Effect{}, err
		}
		if !r.Open() {
			return workflow.Effect{}, workflow.ErrReviewClosed
		}
		v, err := getVersion(ctx, tx, connID, r.Version)
		if err != nil {
			return workflow.Effect{}, err
		}
		in.Approved = v.Contract
		return workflow.DecideReview(s, by, in, now)
	})
	if err != nil {
		return Review{}, err
	}
	return d.Review(ctx, reviewID)
}

// Review returns one review or ErrNotFound.
func (d *DB) Review(ctx context.Context, id int64) (Review, error) {
	r, err := intact(scanReview(d.sql.QueryRowContext(ctx, `SELECT `+reviewCols+reviewFrom+` WHERE r.id = ?`, id)))
	if errors.Is(err, sql.ErrNoRows) {
		return Review{}, ErrNotFound
	}
	return r, err
}

// OpenReviewOf returns connection id's open review, if any.
func (d *DB) OpenReviewOf(ctx context.Context, id int64) (Review, bool, error) {
	r, err := intact(scanReview(d.sql.QueryRowContext(ctx, `SELECT `+reviewCols+reviewFrom+` WHERE r.connection_id = ? AND r.decision = ''`, id)))
	if errors.Is(err, sql.ErrNoRows) {
		return Review{}, false, nil
	}
	return r, err == nil, err
}

// ReviewsOf lists connection id's reviews, newest first.
func (d *DB) ReviewsOf(ctx context.Context, id int64) ([]Review, error) {
	return d.queryReviews(ctx, `SELECT `+reviewCols+reviewFrom+` WHERE r.connection_id = ? ORDER BY r.id DESC`, id)
}

// ReviewFilter narrows the reviewer queue. Zero fields filter nothing.
type ReviewFilter struct {
	Team    string
	Trigger workflow.ReviewTrigger
	// DueBy keeps the reviews due on or before this civil date.
	DueBy string
}

// ReviewQueue lists the open reviews, the longest due first (then the
// oldest opened), at most limit: the first page of ReviewQueuePage.
func (d *DB) ReviewQueue(ctx context.Context, f ReviewFilter, limit int) ([]Review, error) {
	qs, _, err := d.ReviewQueuePage(ctx, f, ReviewCursor{}, limit)
	out := make([]Review, len(qs))
	for i, q := range qs {
		out[i] = q.Review
	}
	return out, err
}

func (d *DB) queryReviews(ctx context.Context, q string, args ...any) ([]Review, error) {
	rows, err := d.sql.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: reviews: %w", err)
	}
	defer rows.Close()
	var out []Review
	for rows.Next() {
		r, err := scanReview(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// LatestDecidedReview is the id of connection id's latest decided review,
// 0 when none was decided.
func (d *DB) LatestDecidedReview(ctx context.Context, id int64) (int64, error) {
	var latest int64
	if err := d.sql.QueryRowContext(ctx, `SELECT COALESCE(max(id), 0) FROM reviews WHERE connection_id = ? AND decision <> ''`, id).Scan(&latest); err != nil {
		return 0, fmt.Errorf("store: latest review of connection %d: %w", id, err)
	}
	return latest, nil
}
