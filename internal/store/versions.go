package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

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

func insertVersion(ctx context.Context, tx *sql.Tx, id int64, v int, c workflow.Contract, by workflow.Actor, now time.Time) error {
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

// SaveContract stores c as a new version when it differs from the current
// one (workflow.Edit). baseVersion is the version the user edited; if
// someone saved since, a *StaleError is returned and nothing is written. A
// connection that already has workflow.MaxVersions versions takes no more:
// workflow.ErrVersionLimit, nothing written.
func (d *DB) SaveContract(ctx context.Context, id int64, baseVersion int, c workflow.Contract, by workflow.Actor, now time.Time) (Connection, bool, error) {
	conn, eff, _, err := d.command(ctx, id, false, now, func(_ *sql.Tx, _ Connection, s workflow.Conn) (workflow.Effect, error) {
		return workflow.Edit(s, by, baseVersion, c, now)
	})
	return conn, eff.Version != nil, err
}

// versionFacts are what loadConn needs of a version, in one read: its
// hash and the orchestrator its contract names.
func versionFacts(ctx context.Context, q queryer, id int64, v int) (string, workflow.Orchestrator, error) {
	var h, body string
	if err := q.QueryRowContext(ctx, `SELECT hash, body FROM contract_versions WHERE connection_id = ? AND version = ?`, id, v).Scan(&h, &body); err != nil {
		return "", "", fmt.Errorf("store: version %d of connection %d: %w", v, id, err)
	}
	var c struct {
		Orchestrator workflow.Orchestrator `json:"orchestrator"`
	}
	if err := json.Unmarshal([]byte(body), &c); err != nil {
		return "", "", fmt.Errorf("store: version %d of connection %d: %w", v, id, err)
	}
	return h, c.Orchestrator, nil
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

// VersionRef names one contract version of one connection.
type VersionRef struct {
	ConnectionID int64
	Version      int
}

// VersionsOf returns the versions refs name, in one query (issue 15: a
// re-apply batch planned each of its jobs with a query of its own). A ref
// with no version is absent from the map.
func (d *DB) VersionsOf(ctx context.Context, refs []VersionRef) (map[VersionRef]Version, error) {
	out := make(map[VersionRef]Version, len(refs))
	if len(refs) == 0 {
		return out, nil
	}
	pairs := strings.TrimSuffix(strings.Repeat("(?, ?), ", len(refs)), ", ")
	args := make([]any, 0, 2*len(refs))
	for _, r := range refs {
		args = append(args, r.ConnectionID, r.Version)
	}
	rows, err := d.sql.QueryContext(ctx, `SELECT `+versionCols+` WHERE (cv.connection_id, cv.version) IN (`+pairs+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: versions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		v, err := scanVersion(rows)
		if err != nil {
			return nil, fmt.Errorf("store: versions: %w", err)
		}
		out[VersionRef{v.ConnectionID, v.Version}] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: versions: %w", err)
	}
	return out, nil
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

// EditorIDs returns everyone who authored a version of the connection.
func (d *DB) EditorIDs(ctx context.Context, id int64) ([]int64, error) {
	return column[int64](ctx, d.sql, `SELECT DISTINCT author_id FROM contract_versions WHERE connection_id = ? ORDER BY author_id`, id)
}

// CommittedVersions returns the approved versions of the connections in a
// committed state (workflow.CommittedStates: approved, provisioning,
// active, under review, revoking), by connection: what holds capacity and
// may run on a cluster, which the Slurm usage reader maps accounts to
// teams from (internal/collect/slurmusage).
func (d *DB) CommittedVersions(ctx context.Context) ([]Version, error) {
	rows, err := d.sql.QueryContext(ctx, `SELECT `+versionCols+`
JOIN connections c ON c.id = cv.connection_id AND cv.version = c.approved_version
WHERE c.state IN (`+committedStatesSQL+`) ORDER BY cv.connection_id`)
	if err != nil {
		return nil, fmt.Errorf("store: committed versions: %w", err)
	}
	defer rows.Close()
	var out []Version
	for rows.Next() {
		v, err := scanVersion(rows)
		if err != nil {
			return nil, fmt.Errorf("store: committed versions: %w", err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
