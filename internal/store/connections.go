package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Connection is a team's connection request and its current state.
type Connection struct {
	ID              int64
	Team            string
	State           workflow.State
	ClusterName     string
	Purpose         string
	CurrentVersion  int
	ApprovedVersion int // 0: never approved
	// Amendment is where a live connection's change request is (see
	// workflow.Amendment); CurrentVersion is then the change's version.
	Amendment      workflow.Amendment
	RequesterID    int64
	RequesterEmail string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	SubmittedAt    time.Time // zero until first submitted
	// ReviewDue is the civil date (YYYY-MM-DD) the next scheduled review
	// is due; "" until the scheduler or a review's decision sets it.
	ReviewDue string
	// Orphan says why the connection is an orphan (no business purpose,
	// or no owner still in the team's owners group), as the review
	// scheduler last found it; "" when it is not.
	Orphan string
	// Hold is where the connection's hold is (workflow.Hold); HoldBy,
	// HoldReason and HoldAt say who moved it last ("system" for the
	// end-date rule), why and when (zero: never).
	Hold       workflow.Hold
	HoldBy     string
	HoldByID   int64
	HoldReason string
	HoldAt     time.Time
}

// StaleError says the connection moved on since the caller looked at it:
// someone saved a newer version, or the state changed. The caller shows
// what changed and lets the user decide again.
type StaleError struct {
	WantVersion int
	WantHash    string
	Current     Connection
	CurrentHash string
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("store: connection %d changed: you acted on version %d, it is now at version %d (%s)",
		e.Current.ID, e.WantVersion, e.Current.CurrentVersion, e.Current.State)
}

const connCols = `c.id, c.team, c.state, c.cluster_name, c.purpose, c.current_version, COALESCE(c.approved_version, 0), c.amendment,
	c.requester_id, u.email, c.created_at, c.updated_at, COALESCE(c.submitted_at, ''), c.review_due, c.orphan,
	c.hold, c.hold_by, c.hold_by_id, c.hold_reason, c.hold_at`

func scanConn(sc interface{ Scan(...any) error }) (Connection, error) {
	var c Connection
	var created, updated, submitted, holdAt string
	if err := sc.Scan(&c.ID, &c.Team, &c.State, &c.ClusterName, &c.Purpose, &c.CurrentVersion, &c.ApprovedVersion, &c.Amendment,
		&c.RequesterID, &c.RequesterEmail, &created, &updated, &submitted, &c.ReviewDue, &c.Orphan,
		&c.Hold, &c.HoldBy, &c.HoldByID, &c.HoldReason, &holdAt); err != nil {
		return c, err
	}
	var err error
	if holdAt != "" {
		if c.HoldAt, err = parseTime(holdAt); err != nil {
			return c, err
		}
	}
	if c.CreatedAt, err = parseTime(created); err != nil {
		return c, err
	}
	if c.UpdatedAt, err = parseTime(updated); err != nil {
		return c, err
	}
	if submitted != "" {
		if c.SubmittedAt, err = parseTime(submitted); err != nil {
			return c, err
		}
	}
	return c, nil
}

func getConn(ctx context.Context, q queryer, id int64) (Connection, error) {
	c, err := scanConn(q.QueryRowContext(ctx, `SELECT `+connCols+` FROM connections c JOIN users u ON u.id = c.requester_id WHERE c.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Connection{}, ErrNotFound
	}
	if err != nil {
		return Connection{}, fmt.Errorf("store: connection %d: %w", id, err)
	}
	return c, nil
}

// Connection returns one connection or ErrNotFound.
func (d *DB) Connection(ctx context.Context, id int64) (Connection, error) {
	return getConn(ctx, d.sql, id)
}

// CreateConnection stores a new draft with contract version 1
// (workflow.Create).
func (d *DB) CreateConnection(ctx context.Context, c workflow.Contract, by workflow.Actor, now time.Time) (Connection, error) {
	eff, err := workflow.Create(by, c, now)
	if err != nil {
		return Connection{}, err
	}
	var id int64
	err = d.inTx(ctx, func(tx *sql.Tx) error {
		id, _, err = apply(ctx, tx, nil, eff, now)
		return err
	})
	if err != nil {
		return Connection{}, err
	}
	return d.Connection(ctx, id)
}

// ListFilter narrows ListConnections. Teams, when non-nil, is the scope the
// caller may see (an empty non-nil slice sees nothing); the other fields are
// user filters.
type ListFilter struct {
	Teams   []string
	Team    string
	State   workflow.State
	Cluster string
	Query   string // substring of the purpose
}

// ListConnections returns connections newest first, with id < before (0:
// from the newest), at most limit, and the cursor for the next page (0 at
// the end). Keyset pagination keeps every page an index range scan.
func (d *DB) ListConnections(ctx context.Context, f ListFilter, before int64, limit int) ([]Connection, int64, error) {
	if limit < 1 {
		// The cursor is the last row of a full page: a page of no rows has none.
		return nil, 0, fmt.Errorf("store: list connections: limit %d, want at least 1", limit)
	}
	var where []string
	var args []any
	if f.Teams != nil {
		if len(f.Teams) == 0 {
			return nil, 0, nil
		}
		where = append(where, "c.team IN ("+strings.TrimSuffix(strings.Repeat("?,", len(f.Teams)), ",")+")")
		for _, t := range f.Teams {
			args = append(args, t)
		}
	}
	if f.Team != "" {
		where, args = append(where, "c.team = ?"), append(args, f.Team)
	}
	if f.State != "" {
		where, args = append(where, "c.state = ?"), append(args, f.State)
	}
	if f.Cluster != "" {
		where, args = append(where, "c.cluster_name = ?"), append(args, f.Cluster)
	}
	if q := strings.TrimSpace(f.Query); q != "" {
		where, args = append(where, "c.purpose LIKE ? ESCAPE '\\'"), append(args, "%"+likeEscape(q)+"%")
	}
	if before > 0 {
		where, args = append(where, "c.id < ?"), append(args, before)
	}
	q := `SELECT ` + connCols + ` FROM connections c JOIN users u ON u.id = c.requester_id`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY c.id DESC LIMIT ?"
	args = append(args, limit+1)
	out, err := d.queryConns(ctx, "list connections", q, args...)
	if err != nil {
		return nil, 0, err
	}
	var next int64
	if len(out) > limit {
		out = out[:limit]
		next = out[limit-1].ID
	}
	return out, next, nil
}

func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// Queue returns what waits for an admin, the longest waiting first:
// submitted requests and the submitted changes of live connections. The
// WHERE is connections_waiting's (migration 00011), literally.
func (d *DB) Queue(ctx context.Context, limit int) ([]Connection, error) {
	return d.queryConns(ctx, "queue", `SELECT `+connCols+` FROM connections c JOIN users u ON u.id = c.requester_id
WHERE (c.state = 'submitted' OR c.amendment = 'submitted') ORDER BY c.submitted_at, c.id LIMIT ?`, limit)
}

// queryConns runs a query selecting connCols and scans every row.
func (d *DB) queryConns(ctx context.Context, op, q string, args ...any) ([]Connection, error) {
	rows, err := d.sql.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", op, err)
	}
	defer rows.Close()
	var out []Connection
	for rows.Next() {
		c, err := scanConn(rows)
		if err != nil {
			return nil, fmt.Errorf("store: %s: %w", op, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: %s: %w", op, err)
	}
	return out, nil
}

// ConnectionsByID lists the connections with these ids, by id, in one
// query (an id with no connection is left out).
func (d *DB) ConnectionsByID(ctx context.Context, ids []int64) ([]Connection, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	in, args := idList(ids)
	return d.queryConns(ctx, "connections by id", `SELECT `+connCols+` FROM connections c JOIN users u ON u.id = c.requester_id
WHERE c.id IN `+in+` ORDER BY c.id`, args...)
}
