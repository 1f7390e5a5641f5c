package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// DriftReport is the last drift check of a connection.
type DriftReport struct {
	ConnectionID int64
	Team         string
	CheckedAt    time.Time
	Items        []workflow.DriftItem
	Error        string // the check itself failed
}

// SaveDrift records a drift check made on basis. When drift appears (none
// before, some now) or disappears, an audit event says so, in the same
// transaction. A report the connection has moved on from since the pass
// read it (workflow.DriftReportStale) is not recorded.
func (d *DB) SaveDrift(ctx context.Context, connID int64, basis workflow.DriftBasis, items []workflow.DriftItem, checkErr string, now time.Time) error {
	return d.inTx(ctx, func(tx *sql.Tx) error {
		cur, err := getConn(ctx, tx, connID)
		if err != nil {
			return err
		}
		var jobOpen bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM jobs WHERE connection_id = ? AND state IN ('queued', 'running'))`,
			connID).Scan(&jobOpen); err != nil {
			return fmt.Errorf("store: save drift: %w", err)
		}
		if workflow.DriftReportStale(basis, cur.ApprovedVersion, cur.Hold, jobOpen) {
			return nil
		}
		if items == nil {
			items = []workflow.DriftItem{}
		}
		b, err := json.Marshal(items)
		if err != nil {
			return fmt.Errorf("store: save drift: %w", err)
		}
		before := -1
		err = tx.QueryRowContext(ctx, `SELECT items FROM drift_reports WHERE connection_id = ?`, connID).Scan(&before)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("store: save drift: %w", err)
		}
		// A failed check says nothing about drift: keep the last known items.
		q := `INSERT INTO drift_reports (connection_id, checked_at, items, items_json, error) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (connection_id) DO UPDATE SET checked_at = excluded.checked_at, items = excluded.items,
    items_json = excluded.items_json, error = excluded.error`
		if checkErr != "" {
			q = `INSERT INTO drift_reports (connection_id, checked_at, items, items_json, error) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (connection_id) DO UPDATE SET checked_at = excluded.checked_at, error = excluded.error`
		}
		if _, err := tx.ExecContext(ctx, q, connID, fmtTime(now), len(items), string(b), checkErr); err != nil {
			return fmt.Errorf("store: save drift: %w", err)
		}
		action := workflow.DriftAudit(before, len(items), checkErr)
		if action == "" {
			return nil
		}
		var what []string
		for _, it := range items {
			what = append(what, it.Kind+" "+it.Ref+" "+it.What)
		}
		return appendAudit(ctx, tx, AuditEvent{At: now, Actor: provisioner, Action: action, ObjectType: "connection",
			ObjectID: connID, Team: cur.Team, Version: cur.ApprovedVersion, Reason: strings.Join(what, "; ")})
	})
}

// Drift returns a connection's last drift check, or ErrNotFound.
func (d *DB) Drift(ctx context.Context, connID int64) (DriftReport, error) {
	rows, err := d.driftReports(ctx, `WHERE r.connection_id = ?`, connID)
	if err != nil {
		return DriftReport{}, err
	}
	if len(rows) == 0 {
		return DriftReport{}, ErrNotFound
	}
	return rows[0], nil
}

// DriftOverview returns every connection whose last check found drift or
// failed, for the admins' overview.
func (d *DB) DriftOverview(ctx context.Context) ([]DriftReport, error) {
	return d.driftReports(ctx, `WHERE r.items > 0 OR r.error != '' ORDER BY r.connection_id`)
}

func (d *DB) driftReports(ctx context.Context, where string, args ...any) ([]DriftReport, error) {
	rows, err := d.sql.QueryContext(ctx, `SELECT r.connection_id, c.team, r.checked_at, r.items_json, r.error
FROM drift_reports r JOIN connections c ON c.id = r.connection_id `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("store: drift: %w", err)
	}
	defer rows.Close()
	var out []DriftReport
	for rows.Next() {
		var r DriftReport
		var at, js string
		if err := rows.Scan(&r.ConnectionID, &r.Team, &at, &js, &r.Error); err != nil {
			return nil, fmt.Errorf("store: drift: %w", err)
		}
		if r.CheckedAt, err = parseTime(at); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(js), &r.Items); err != nil {
			return nil, fmt.Errorf("store: drift: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// ProvisionedVersion is a connection whose approved version is live on
// the cluster, for the drift checker.
type ProvisionedVersion struct {
	ConnectionID int64
	Version      int
}

// Provisioned lists the connections that are active or under review.
func (d *DB) Provisioned(ctx context.Context) ([]ProvisionedVersion, error) {
	rows, err := d.sql.QueryContext(ctx, `SELECT id, approved_version FROM connections WHERE state IN (`+liveStatesSQL+`) AND approved_version IS NOT NULL ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("store: provisioned: %w", err)
	}
	defer rows.Close()
	var out []ProvisionedVersion
	for rows.Next() {
		var p ProvisionedVersion
		if err := rows.Scan(&p.ConnectionID, &p.Version); err != nil {
			return nil, fmt.Errorf("store: provisioned: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// LiveNamespaces are the team namespaces of the live (active or under
// review) connections' approved versions, sorted: where the utilization
// probe looks for GPU series.
func (d *DB) LiveNamespaces(ctx context.Context) ([]string, error) {
	lists, err := column[string](ctx, d.sql, `SELECT cv.namespaces FROM connections c JOIN contract_versions cv ON cv.connection_id = c.id AND cv.version = c.approved_version
WHERE c.state IN (`+liveStatesSQL+`)`)
	if err != nil {
		return nil, fmt.Errorf("store: live namespaces: %w", err)
	}
	var out []string
	for _, l := range lists {
		for _, ns := range strings.Fields(l) {
			if !slices.Contains(out, ns) {
				out = append(out, ns)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}
