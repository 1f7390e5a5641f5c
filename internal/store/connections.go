package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
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
	RequesterID     int64
	RequesterEmail  string
	CreatedAt       time.Time
	UpdatedAt       time.Time
	SubmittedAt     time.Time // zero until first submitted
}

// Version is one immutable contract version.
type Version struct {
	ConnectionID int64
	Version      int
	Contract     workflow.Contract
	Hash         string
	AuthorID     int64
	AuthorEmail  string
	CreatedAt    time.Time
}

// VersionInfo is what a version's history row shows: everything but the
// contract, whose body (up to workflow.MaxContractJSON) it never reads.
type VersionInfo struct {
	ConnectionID int64
	Version      int
	Hash         string
	AuthorID     int64
	AuthorEmail  string
	CreatedAt    time.Time
}

// DecisionRow is an admin's approval, rejection or change request.
type DecisionRow struct {
	ID         int64
	Version    int
	Hash       string
	Kind       string // approve, reject, request_changes
	ActorID    int64
	ActorEmail string
	Reason     string
	CreatedAt  time.Time
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

// ErrAlreadyDecided: this admin already approved this version.
var ErrAlreadyDecided = errors.New("store: you already approved this version")

// inTx runs f in one write transaction (BEGIN IMMEDIATE, see Open) and
// commits, or rolls back on any error.
func (d *DB) inTx(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := d.sql.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: begin: %w", err)
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	return nil
}

// queryer is satisfied by *sql.DB and *sql.Tx.
type queryer interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

const connCols = `c.id, c.team, c.state, c.cluster_name, c.purpose, c.current_version, COALESCE(c.approved_version, 0),
	c.requester_id, u.email, c.created_at, c.updated_at, COALESCE(c.submitted_at, '')`

func scanConn(sc interface{ Scan(...any) error }) (Connection, error) {
	var c Connection
	var created, updated, submitted string
	if err := sc.Scan(&c.ID, &c.Team, &c.State, &c.ClusterName, &c.Purpose, &c.CurrentVersion, &c.ApprovedVersion,
		&c.RequesterID, &c.RequesterEmail, &created, &updated, &submitted); err != nil {
		return c, err
	}
	var err error
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

func purposeLine(c workflow.Contract) string {
	p := strings.TrimSpace(c.BusinessPurpose)
	if i := strings.IndexByte(p, '\n'); i >= 0 {
		p = p[:i]
	}
	if r := []rune(p); len(r) > 120 {
		p = string(r[:119]) + "…"
	}
	return p
}

func insertVersion(ctx context.Context, tx *sql.Tx, id int64, v int, c workflow.Contract, by Actor, now time.Time) error {
	_, err := tx.ExecContext(ctx, `
INSERT INTO contract_versions (connection_id, version, body, hash, namespaces, author_id, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?)`, id, v, string(c.Canonical()), c.Hash(), strings.Join(c.Normalize().Namespaces, " "), by.ID, fmtTime(now))
	if err != nil {
		return fmt.Errorf("store: insert contract version: %w", err)
	}
	sums := map[string]int{}
	for _, g := range c.Normalize().Scheduling.Guaranteed {
		sums[strings.ToLower(g.InstanceType)] += g.Count
	}
	for t, n := range sums {
		if _, err := tx.ExecContext(ctx, `INSERT INTO version_capacity (connection_id, version, instance_type, count) VALUES (?, ?, ?, ?)`, id, v, t, n); err != nil {
			return fmt.Errorf("store: insert version capacity: %w", err)
		}
	}
	return nil
}

// CreateConnection stores a new draft with contract version 1.
func (d *DB) CreateConnection(ctx context.Context, c workflow.Contract, by Actor, now time.Time) (Connection, error) {
	c = c.Normalize()
	var id int64
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `
INSERT INTO connections (team, state, cluster_name, purpose, current_version, requester_id, created_at, updated_at)
VALUES (?, ?, ?, ?, 1, ?, ?, ?) RETURNING id`,
			c.Team, workflow.StateDraft, c.ClusterName, purposeLine(c), by.ID, fmtTime(now), fmtTime(now)).Scan(&id)
		if err != nil {
			return fmt.Errorf("store: create connection: %w", err)
		}
		if err := insertVersion(ctx, tx, id, 1, c, by, now); err != nil {
			return err
		}
		return appendAudit(ctx, tx, AuditEvent{At: now, ActorID: by.ID, Actor: by.Email, Action: "connection.create",
			ObjectType: "connection", ObjectID: id, Team: c.Team, Version: 1})
	})
	if err != nil {
		return Connection{}, err
	}
	return d.Connection(ctx, id)
}

// SaveContract stores c as a new version when it differs from the current
// one. baseVersion is the version the user edited; if someone saved since,
// a *StaleError is returned and nothing is written. A connection that
// already has workflow.MaxVersions versions takes no more: ErrVersionLimit,
// nothing written.
func (d *DB) SaveContract(ctx context.Context, id int64, baseVersion int, c workflow.Contract, by Actor, now time.Time) (Connection, bool, error) {
	c = c.Normalize()
	changed := false
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		cur, err := getConn(ctx, tx, id)
		if err != nil {
			return err
		}
		curHash, err := versionHash(ctx, tx, id, cur.CurrentVersion)
		if err != nil {
			return err
		}
		if cur.CurrentVersion != baseVersion {
			return &StaleError{WantVersion: baseVersion, Current: cur, CurrentHash: curHash}
		}
		if c.Team != cur.Team {
			return fmt.Errorf("store: save contract: the team of a connection cannot change (%s -> %s)", cur.Team, c.Team)
		}
		next, err := workflow.Transition(cur.State, workflow.EventEdit, now)
		if err != nil {
			return err
		}
		if c.Hash() == curHash {
			return nil
		}
		// The cap on versions, inside the write transaction: of two saves
		// racing for the last version, the second sees the first's row.
		// Versions are numbered 1..current_version and never deleted, so
		// current_version is how many there are.
		if cur.CurrentVersion >= workflow.MaxVersions {
			return ErrVersionLimit
		}
		changed = true
		v := cur.CurrentVersion + 1
		if err := insertVersion(ctx, tx, id, v, c, by, now); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE connections SET current_version = ?, state = ?, cluster_name = ?, purpose = ?, updated_at = ? WHERE id = ?`,
			v, next, c.ClusterName, purposeLine(c), fmtTime(now), id); err != nil {
			return fmt.Errorf("store: save contract: %w", err)
		}
		return appendAudit(ctx, tx, AuditEvent{At: now, ActorID: by.ID, Actor: by.Email, Action: "contract.version",
			ObjectType: "connection", ObjectID: id, Team: cur.Team, Version: v})
	})
	if err != nil {
		return Connection{}, false, err
	}
	conn, err := d.Connection(ctx, id)
	return conn, changed, err
}

// ErrVersionLimit refuses a save that would add a version to a connection
// that already has workflow.MaxVersions; nothing is written.
var ErrVersionLimit = fmt.Errorf("store: a connection keeps at most %d contract versions", workflow.MaxVersions)

func versionHash(ctx context.Context, q queryer, id int64, v int) (string, error) {
	var h string
	err := q.QueryRowContext(ctx, `SELECT hash FROM contract_versions WHERE connection_id = ? AND version = ?`, id, v).Scan(&h)
	if err != nil {
		return "", fmt.Errorf("store: version %d of connection %d: %w", v, id, err)
	}
	return h, nil
}

// ErrUnpinned refuses an approval that does not name the version, the
// contract hash and the plan hash it approves.
var ErrUnpinned = errors.New("store: an approval must name the version, the contract hash and the plan hash it approves")

// ErrNotIndependent refuses a decision (approval, rejection, change
// request) by the requester, by an author of any version or by someone who
// submitted the request.
var ErrNotIndependent = errors.New("store: nobody decides on a request they filed, submitted or edited")

func checkIndependent(ctx context.Context, tx *sql.Tx, cur Connection, by Actor) error {
	if by.ID == cur.RequesterID {
		return ErrNotIndependent
	}
	editors, err := column[int64](ctx, tx, `SELECT DISTINCT author_id FROM contract_versions WHERE connection_id = ?`, cur.ID)
	if err != nil {
		return err
	}
	submitters, err := submitterIDs(ctx, tx, cur.ID)
	if err != nil {
		return err
	}
	if slices.Contains(editors, by.ID) || slices.Contains(submitters, by.ID) {
		return ErrNotIndependent
	}
	return nil
}

// Expect pins the version (and hash) a decision was made on. Zero values
// skip the check, except in Approve, which requires all three.
type Expect struct {
	Version int
	Hash    string
	// PlanHash, on an approval, is the provisioning plan the admin saw; the
	// queued job carries it and the worker refuses to apply another plan.
	PlanHash string
	// Adopt, on an approval, is the existing namespace the admin adopted
	// explicitly (one neither the portal nor HyperPod created; the handler
	// checks the cluster), "" for none. It is recorded with the approval
	// (namespace_adoptions, and an audit event), and the version's jobs
	// carry it (Job.AdoptNamespace).
	Adopt string
}

func checkExpect(ctx context.Context, tx *sql.Tx, cur Connection, e Expect) error {
	if e.Version == 0 {
		return nil
	}
	h, err := versionHash(ctx, tx, cur.ID, cur.CurrentVersion)
	if err != nil {
		return err
	}
	if cur.CurrentVersion != e.Version || (e.Hash != "" && h != e.Hash) {
		return &StaleError{WantVersion: e.Version, WantHash: e.Hash, Current: cur, CurrentHash: h}
	}
	return nil
}

var eventAction = map[workflow.Event]string{
	workflow.EventSubmit:         "connection.submit",
	workflow.EventWithdraw:       "connection.withdraw",
	workflow.EventRequestChanges: "connection.request_changes",
	workflow.EventReject:         "connection.reject",
	workflow.EventApprove:        "connection.approve",
	workflow.EventRevoke:         "connection.revoke",
}

var eventDecision = map[workflow.Event]string{
	workflow.EventRequestChanges: "request_changes",
	workflow.EventReject:         "reject",
}

// Transition applies a lifecycle event (not approval: see Approve) with its
// audit event, and for admin decisions the decision row, in one
// transaction.
func (d *DB) Transition(ctx context.Context, id int64, ev workflow.Event, by Actor, reason string, expect Expect, now time.Time) (Connection, error) {
	if ev == workflow.EventApprove {
		return Connection{}, errors.New("store: use Approve for approvals")
	}
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		cur, err := getConn(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := checkExpect(ctx, tx, cur, expect); err != nil {
			return err
		}
		next, err := workflow.Transition(cur.State, ev, now)
		if err != nil {
			return err
		}
		// A decision (rejection, change request) comes from someone
		// independent of the request, as the workflow's policy says: checked
		// again here, against the rows as they are now, because the
		// handler's check ran before this transaction.
		if _, ok := eventDecision[ev]; ok {
			if err := checkIndependent(ctx, tx, cur, by); err != nil {
				return err
			}
		}
		set := `state = ?, updated_at = ?`
		args := []any{next, fmtTime(now)}
		if ev == workflow.EventSubmit {
			set += `, submitted_at = ?`
			args = append(args, fmtTime(now))
		}
		args = append(args, id)
		if _, err := tx.ExecContext(ctx, `UPDATE connections SET `+set+` WHERE id = ?`, args...); err != nil {
			return fmt.Errorf("store: transition: %w", err)
		}
		if kind, ok := eventDecision[ev]; ok {
			h, err := versionHash(ctx, tx, id, cur.CurrentVersion)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO decisions (connection_id, version, hash, kind, actor_id, reason, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
				id, cur.CurrentVersion, h, kind, by.ID, reason, fmtTime(now)); err != nil {
				return fmt.Errorf("store: decision: %w", err)
			}
		}
		action := eventAction[ev]
		if action == "" {
			action = "connection." + string(ev)
		}
		return appendAudit(ctx, tx, AuditEvent{At: now, ActorID: by.ID, Actor: by.Email, Action: action,
			ObjectType: "connection", ObjectID: id, Team: cur.Team, Version: cur.CurrentVersion, Reason: reason})
	})
	if err != nil {
		return Connection{}, err
	}
	return d.Connection(ctx, id)
}

// CapacityCheck is called inside the approval transaction with the cluster's
// inventory and the guaranteed capacity already committed by other
// connections; returning an error refuses the approval.
type CapacityCheck func(inventory map[string]int, committed []workflow.Capacity) error

// Approve records an admin's approval of exactly (version, hash). When the
// contract needs more approvals (restricted data: two distinct admins; needed
// is raised to what the version itself requires, read inside the
// transaction) the connection stays submitted; the approval that completes the count moves it
// to approved. It returns the connection and how many approvals the version
// now has. The approval that completes the count also queues the
// provisioning job, in the same transaction. Concurrent approvals serialize
// on the write lock: exactly one completes the transition, the other gets a
// lifecycle error or StaleError.
func (d *DB) Approve(ctx context.Context, id int64, by Actor, expect Expect, reason string, needed int, check CapacityCheck, now time.Time) (Connection, int, error) {
	var count int
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		// An approval names exactly what it approves: without the version,
		// the contract hash and the plan hash it would approve whatever is
		// current and queue an unpinned job.
		if expect.Version == 0 || expect.Hash == "" || expect.PlanHash == "" {
			return ErrUnpinned
		}
		cur, err := getConn(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := checkExpect(ctx, tx, cur, expect); err != nil {
			return err
		}
		next, err := workflow.Transition(cur.State, workflow.EventApprove, now)
		if err != nil {
			return err
		}
		// Independence, against the rows as they are now: the handler's
		// check ran before this transaction, and the request may have been
		// edited or resubmitted since.
		if err := checkIndependent(ctx, tx, cur, by); err != nil {
			return err
		}
		v, err := getVersion(ctx, tx, id, cur.CurrentVersion)
		if err != nil {
			return err
		}
		// How many distinct admins must approve is a property of the
		// version approved (restricted data: two), read here rather than
		// trusted from the caller, which looked before this transaction.
		needed = max(needed, workflow.ApprovalsNeeded(v.Contract.DataClassification))
		if check != nil {
			inv, err := inventory(ctx, tx, v.Contract.ClusterName)
			if err != nil {
				return err
			}
			committed, err := committedCapacity(ctx, tx, v.Contract.ClusterName, id)
			if err != nil {
				return err
			}
			if err := check(inv, committed); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO decisions (connection_id, version, hash, kind, actor_id, reason, created_at) VALUES (?, ?, ?, 'approve', ?, ?, ?)`,
			id, v.Version, v.Hash, by.ID, reason, fmtTime(now)); err != nil {
			if strings.Contains(err.Error(), "UNIQUE") {
				return ErrAlreadyDecided
			}
			return fmt.Errorf("store: approve: %w", err)
		}
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM decisions WHERE connection_id = ? AND version = ? AND kind = 'approve'`, id, v.Version).Scan(&count); err != nil {
			return fmt.Errorf("store: approve: %w", err)
		}
		if expect.Adopt != "" {
			if !slices.Contains(v.Contract.Namespaces, expect.Adopt) {
				return fmt.Errorf("store: approve: the contract does not name namespace %q, which the approval adopts", expect.Adopt)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO namespace_adoptions (connection_id, version, namespace, actor_id, created_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (connection_id, version) DO NOTHING`, id, v.Version, expect.Adopt, by.ID, fmtTime(now)); err != nil {
				return fmt.Errorf("store: approve: adoption: %w", err)
			}
			if err := appendAudit(ctx, tx, AuditEvent{At: now, ActorID: by.ID, Actor: by.Email, Action: "connection.adopt_namespace",
				ObjectType: "connection", ObjectID: id, Team: cur.Team, Version: v.Version,
				Reason: "adopted the existing namespace " + expect.Adopt + ", which neither the portal nor HyperPod created: the portal may take it over"}); err != nil {
				return err
			}
		}
		action := "connection.approve_partial"
		if count >= needed {
			action = "connection.approve"
			if _, err := tx.ExecContext(ctx, `UPDATE connections SET state = ?, approved_version = ?, updated_at = ? WHERE id = ?`,
				next, v.Version, fmtTime(now), id); err != nil {
				return fmt.Errorf("store: approve: %w", err)
			}
			// The approval and its provisioning job commit together. The
			// plan hash is the one the approver saw; the worker checks it.
			// A provisioning job is never queued unpinned.
			if expect.PlanHash == "" {
				return ErrUnpinned
			}
			if _, err := enqueueJob(ctx, tx, id, JobProvision, v.Version, expect.PlanHash, now); err != nil {
				return fmt.Errorf("store: approve: %w", err)
			}
		}
		return appendAudit(ctx, tx, AuditEvent{At: now, ActorID: by.ID, Actor: by.Email, Action: action,
			ObjectType: "connection", ObjectID: id, Team: cur.Team, Version: v.Version, Reason: reason})
	})
	if err != nil {
		return Connection{}, 0, err
	}
	c, err := d.Connection(ctx, id)
	return c, count, err
}

const versionCols = `cv.connection_id, cv.version, cv.body, cv.hash, cv.author_id, u.email, cv.created_at
FROM contract_versions cv JOIN users u ON u.id = cv.author_id`

func scanVersion(sc interface{ Scan(...any) error }) (Version, error) {
	var out Version
	var body, created string
	if err := sc.Scan(&out.ConnectionID, &out.Version, &body, &out.Hash, &out.AuthorID, &out.AuthorEmail, &created); err != nil {
		return Version{}, err
	}
	var err error
	if out.Contract, err = workflow.DecodeContract([]byte(body)); err != nil {
		return Version{}, err
	}
	if out.CreatedAt, err = parseTime(created); err != nil {
		return Version{}, err
	}
	return out, nil
}

func getVersion(ctx context.Context, q queryer, id int64, v int) (Version, error) {
	out, err := scanVersion(q.QueryRowContext(ctx, `SELECT `+versionCols+` WHERE cv.connection_id = ? AND cv.version = ?`, id, v))
	if errors.Is(err, sql.ErrNoRows) {
		return Version{}, ErrNotFound
	}
	if err != nil {
		return Version{}, fmt.Errorf("store: version %d of connection %d: %w", v, id, err)
	}
	return out, nil
}

// Version returns one contract version or ErrNotFound.
func (d *DB) Version(ctx context.Context, id int64, v int) (Version, error) {
	return getVersion(ctx, d.sql, id, v)
}

// Versions returns the history of a connection, newest first, in one
// query: each version's number, hash, author and time, never its contract
// (a page that shows a contract loads that version alone with Version), so
// its cost does not grow with the size of the bodies.
func (d *DB) Versions(ctx context.Context, id int64) ([]VersionInfo, error) {
	rows, err := d.sql.QueryContext(ctx, `SELECT cv.connection_id, cv.version, cv.hash, cv.author_id, u.email, cv.created_at
FROM contract_versions cv JOIN users u ON u.id = cv.author_id WHERE cv.connection_id = ? ORDER BY cv.version DESC`, id)
	if err != nil {
		return nil, fmt.Errorf("store: versions: %w", err)
	}
	defer rows.Close()
	var out []VersionInfo
	for rows.Next() {
		var v VersionInfo
		var created string
		if err := rows.Scan(&v.ConnectionID, &v.Version, &v.Hash, &v.AuthorID, &v.AuthorEmail, &created); err != nil {
			return nil, fmt.Errorf("store: versions of connection %d: %w", id, err)
		}
		if v.CreatedAt, err = parseTime(created); err != nil {
			return nil, fmt.Errorf("store: versions of connection %d: %w", id, err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// Decisions returns the admin decisions on a connection, oldest first.
func (d *DB) Decisions(ctx context.Context, id int64) ([]DecisionRow, error) {
	rows, err := d.sql.QueryContext(ctx, `
SELECT d.id, d.version, d.hash, d.kind, d.actor_id, u.email, d.reason, d.created_at
FROM decisions d JOIN users u ON u.id = d.actor_id WHERE d.connection_id = ? ORDER BY d.id`, id)
	if err != nil {
		return nil, fmt.Errorf("store: decisions: %w", err)
	}
	defer rows.Close()
	var out []DecisionRow
	for rows.Next() {
		var r DecisionRow
		var at string
		if err := rows.Scan(&r.ID, &r.Version, &r.Hash, &r.Kind, &r.ActorID, &r.ActorEmail, &r.Reason, &at); err != nil {
			return nil, fmt.Errorf("store: decisions: %w", err)
		}
		if r.CreatedAt, err = parseTime(at); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// EditorIDs returns everyone who authored a version of the connection.
func (d *DB) EditorIDs(ctx context.Context, id int64) ([]int64, error) {
	return column[int64](ctx, d.sql, `SELECT DISTINCT author_id FROM contract_versions WHERE connection_id = ? ORDER BY author_id`, id)
}

// SubmitterIDs returns every user who submitted the connection, from its
// audit events.
func (d *DB) SubmitterIDs(ctx context.Context, id int64) ([]int64, error) {
	return submitterIDs(ctx, d.sql, id)
}

func submitterIDs(ctx context.Context, q queryer, id int64) ([]int64, error) {
	return column[int64](ctx, q, `SELECT DISTINCT actor_id FROM audit_events
WHERE object_type = 'connection' AND object_id = ? AND action = 'connection.submit' AND actor_id IS NOT NULL ORDER BY actor_id`, id)
}

// ApproverIDs returns the admins who approved the given version.
func (d *DB) ApproverIDs(ctx context.Context, id int64, version int) ([]int64, error) {
	return column[int64](ctx, d.sql, `SELECT actor_id FROM decisions WHERE connection_id = ? AND version = ? AND kind = 'approve' ORDER BY id`, id, version)
}

// column runs a query of one column and returns its values in order.
func column[T any](ctx context.Context, q queryer, query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
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

// Queue returns submitted connections, the longest waiting first.
func (d *DB) Queue(ctx context.Context, limit int) ([]Connection, error) {
	return d.queryConns(ctx, "queue", `SELECT `+connCols+` FROM connections c JOIN users u ON u.id = c.requester_id
WHERE c.state = ? ORDER BY c.submitted_at, c.id LIMIT ?`, workflow.StateSubmitted, limit)
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

// liveStates are the states whose contracts hold namespaces and capacity.
var liveStates = []workflow.State{workflow.StateApproved, workflow.StateProvisioning, workflow.StateActive, workflow.StateUnderReview, workflow.StateRevoking}

// NamespaceOwner returns the id of another connection that holds ns (see
// otherLiveVersions: a version that was submitted, of a connection that is
// neither a draft nor ended), or 0.
func (d *DB) NamespaceOwner(ctx context.Context, ns string, exclude int64) (int64, error) {
	var id int64
	err := d.sql.QueryRowContext(ctx, `SELECT c.id`+otherLiveVersions+`
  AND (' ' || cv.namespaces || ' ') LIKE ? ESCAPE '\' LIMIT 1`, exclude, "% "+likeEscape(ns)+" %").Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: namespace owner: %w", err)
	}
	return id, nil
}

func committedCapacity(ctx context.Context, q queryer, cluster string, exclude int64) ([]workflow.Capacity, error) {
	ph := strings.TrimSuffix(strings.Repeat("?,", len(liveStates)), ",")
	args := []any{cluster, exclude}
	for _, s := range liveStates {
		args = append(args, s)
	}
	rows, err := q.QueryContext(ctx, `
SELECT vc.instance_type, SUM(vc.count) FROM connections c
JOIN version_capacity vc ON vc.connection_id = c.id AND vc.version = c.approved_version
WHERE c.cluster_name = ? AND c.id != ? AND c.state IN (`+ph+`)
GROUP BY vc.instance_type ORDER BY vc.instance_type`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: committed capacity: %w", err)
	}
	defer rows.Close()
	var out []workflow.Capacity
	for rows.Next() {
		var c workflow.Capacity
		if err := rows.Scan(&c.InstanceType, &c.Count); err != nil {
			return nil, fmt.Errorf("store: committed capacity: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// CommittedCapacity is the guaranteed capacity of every other live
// connection on the cluster (by its approved version).
func (d *DB) CommittedCapacity(ctx context.Context, cluster string, exclude int64) ([]workflow.Capacity, error) {
	return committedCapacity(ctx, d.sql, cluster, exclude)
}

// inventory is the capacity approvals count, per instance type: the
// observed capacity of the last refresh from the cluster (cluster_observed),
// with every manual row (cluster_inventory) overriding its type.
func inventory(ctx context.Context, q queryer, cluster string) (map[string]int, error) {
	out, err := countsByType(ctx, q, `SELECT instance_type, capacity FROM cluster_observed WHERE cluster_name = ?`, cluster)
	if err != nil {
		return nil, err
	}
	manual, err := countsByType(ctx, q, `SELECT instance_type, count FROM cluster_inventory WHERE cluster_name = ?`, cluster)
	if err != nil {
		return nil, err
	}
	maps.Copy(out, manual)
	return out, nil
}

// Inventory returns a cluster's capacity per instance type: observed, with
// the manual overrides winning.
func (d *DB) Inventory(ctx context.Context, cluster string) (map[string]int, error) {
	return inventory(ctx, d.sql, cluster)
}

// SetInventory sets (count > 0) or removes (count == 0) the manual override
// of one instance type of a cluster's inventory, with an audit event. An
// override wins over what a refresh from the cluster observed.
func (d *DB) SetInventory(ctx context.Context, cluster, instanceType string, count int, by Actor, now time.Time) error {
	return d.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		if count == 0 {
			_, err = tx.ExecContext(ctx, `DELETE FROM cluster_inventory WHERE cluster_name = ? AND instance_type = ?`, cluster, instanceType)
		} else {
			_, err = tx.ExecContext(ctx, `
INSERT INTO cluster_inventory (cluster_name, instance_type, count, updated_by, updated_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (cluster_name, instance_type) DO UPDATE SET count = excluded.count, updated_by = excluded.updated_by, updated_at = excluded.updated_at`,
				cluster, instanceType, count, nullID(by.ID), fmtTime(now))
		}
		if err != nil {
			return fmt.Errorf("store: set inventory: %w", err)
		}
		return appendAudit(ctx, tx, AuditEvent{At: now, ActorID: by.ID, Actor: by.Email, Action: "inventory.set",
			ObjectType: "cluster", Reason: fmt.Sprintf("%s %s = %d", cluster, instanceType, count)})
	})
}

// Clusters lists the cluster names that have an inventory (manual or
// observed).
func (d *DB) Clusters(ctx context.Context) ([]string, error) {
	return column[string](ctx, d.sql, `SELECT cluster_name FROM cluster_inventory UNION SELECT cluster_name FROM cluster_observed ORDER BY cluster_name`)
}

// UserExists reports whether someone with this email has logged in.
func (d *DB) UserExists(ctx context.Context, email string) (bool, error) {
	var n int
	if err := d.sql.QueryRowContext(ctx, `SELECT count(*) FROM users WHERE lower(email) = lower(?)`, email).Scan(&n); err != nil {
		return false, fmt.Errorf("store: user exists: %w", err)
	}
	return n > 0, nil
}

// ValidationEnv is what contract validation needs from the database: owners
// must be portal users (or one of known, lower-case: mapped group names, demo
// users), and a namespace or role must not be held by another connection than
// exclude (otherLiveVersions says which hold claims: never a draft). Every
// place that saves, imports or approves a contract uses it.
func (d *DB) ValidationEnv(ctx context.Context, now time.Time, exclude int64, known map[string]bool) workflow.ValidationEnv {
	var (
		rolesOnce sync.Once
		roles     map[string]bool
		rolesDown bool
		mu        sync.Mutex
		failure   error // the first lookup that could not be answered
	)
	failed := func(err error) bool {
		if err == nil {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		if failure == nil {
			failure = err
		}
		return true
	}
	return workflow.ValidationEnv{
		Now: now,
		OwnerExists: func(email string) bool {
			if known[strings.ToLower(email)] {
				return true
			}
			ok, err := d.UserExists(ctx, email)
			// An outage is not a missing owner: report it through
			// Unavailable, and let the owner pass here.
			return failed(err) || ok
		},
		NamespaceTaken: func(ns string) bool {
			id, err := d.NamespaceOwner(ctx, ns, exclude)
			return failed(err) || id != 0
		},
		RoleTaken: func(arn string) bool {
			// One read of every live contract's roles per environment,
			// however many roles the contract names.
			rolesOnce.Do(func() {
				var err error
				roles, err = d.rolesInUse(ctx, exclude)
				rolesDown = failed(err)
			})
			return rolesDown || roles[arn]
		},
		Unavailable: func() error {
			mu.Lock()
			defer mu.Unlock()
			if failure != nil {
				return fmt.Errorf("store: validation lookups: %w", failure)
			}
			return nil
		},
	}
}

// otherLiveVersions selects the claiming version (cv) of every connection
// (c) that holds claims on namespaces and roles, but the one given as the
// first argument. Only what was submitted holds a claim (issue 10 item 3):
// a draft is anyone's unchecked scratch (an owner could otherwise squat
// another team's role or namespace with an incomplete draft nobody can
// clear), so drafts and ended connections (rejected, withdrawn, revoked)
// hold nothing. The claiming version is:
//   - submitted and every later live state (approved, provisioning, active,
//     under_review, revoking): the current version, which is the submitted
//     or approved one (these states cannot be edited);
//   - changes_requested: the version the admin sent back (its
//     request_changes decision), which was submitted. The team keeps what
//     it had submitted while it amends the request, but what it adds in the
//     edits (drafts again) claims nothing until it is resubmitted, when
//     validation checks it against everyone else's claims.
//
// The approval re-checks the claims inside its transaction.
const otherLiveVersions = ` FROM connections c JOIN contract_versions cv ON cv.connection_id = c.id AND cv.version = CASE
  WHEN c.state = 'changes_requested' THEN (SELECT max(d.version) FROM decisions d WHERE d.connection_id = c.id AND d.kind = 'request_changes')
  ELSE c.current_version END
WHERE c.id != ? AND c.state IN ('submitted', 'changes_requested', 'approved', 'provisioning', 'active', 'under_review', 'revoking')`

// rolesInUse is the set of IAM roles (project, access or workload) that the
// claiming versions of connections other than exclude name (see
// otherLiveVersions: submitted and later, never drafts). It reads
// every live contract (a JSON scan), so ValidationEnv runs it at most once,
// when a contract is saved or approved, never on page views.
func (d *DB) rolesInUse(ctx context.Context, exclude int64) (map[string]bool, error) {
	arns, err := column[sql.NullString](ctx, d.sql, `SELECT j.value FROM (
SELECT json_extract(cv.body, '$.project_role_arn') AS p, json_extract(cv.body, '$.access_role_arn') AS a, json_extract(cv.body, '$.workload_role_arn') AS w`+otherLiveVersions+`
) AS t, json_each(json_array(t.p, t.a, t.w)) AS j`, exclude)
	if err != nil {
		return nil, fmt.Errorf("store: roles in use: %w", err)
	}
	set := make(map[string]bool, len(arns))
	for _, a := range arns {
		if a.Valid && a.String != "" {
			set[a.String] = true
		}
	}
	return set, nil
}
