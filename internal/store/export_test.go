package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// RawSQL exposes the handle to the external tests, which check pragmas and
// what the tables really hold.
func (d *DB) RawSQL() *sql.DB { return d.sql }

// ConnCols is the column list ListConnections selects, so that the query
// plan test explains the same query shapes.
const ConnCols = connCols

// ChainHash lets the tamper tests forge a row the way an attacker who knows
// the scheme would.
func ChainHash(prev string, e AuditEvent) string { return chainHash(prev, e) }

// GenesisHash is the prev_hash of the first audit event.
const GenesisHash = genesisHash

// FireForTest moves a connection by a lifecycle event no command of this
// package gives on its own (the provisioner's reports outside a job, the
// reviews that come later), through apply like every command: tests reach
// states with it.
func (d *DB) FireForTest(ctx context.Context, id int64, ev workflow.Event, now time.Time) (Connection, error) {
	c, _, _, err := d.command(ctx, id, false, now, func(_ *sql.Tx, _ Connection, s workflow.Conn) (workflow.Effect, error) {
		next, err := workflow.Transition(s.State, ev, now)
		if err != nil {
			return workflow.Effect{}, err
		}
		return workflow.Effect{By: workflow.Provisioner, Next: next,
			Audit: []workflow.AuditRecord{{Actor: workflow.Provisioner, Action: "test." + string(ev), Version: s.CurrentVersion}}}, nil
	})
	return c, err
}

// MigrateTo applies the migrations up to version only, so that a test can
// put rows in an older schema and watch a later migration carry them over.
func (d *DB) MigrateTo(ctx context.Context, version int64) error {
	p, err := d.provider()
	if err != nil {
		return err
	}
	_, err = p.UpTo(ctx, version)
	return err
}

// MigrateDownTo rolls the migrations back to version.
func (d *DB) MigrateDownTo(ctx context.Context, version int64) error {
	p, err := d.provider()
	if err != nil {
		return err
	}
	_, err = p.DownTo(ctx, version)
	return err
}

// SummedHoursSQL is the query CostInputSummed runs per span, for the query
// plan test.
const SummedHoursSQL = summedHoursSQL

// SpanParts is summedHoursSQL's arguments for a span.
func SpanParts(from, to time.Time) []any { return spanParts(from, to) }

// IsUniqueViolation is isUniqueViolation, for the tests of table rules.
func IsUniqueViolation(err error) bool { return isUniqueViolation(err) }

// CapacityTotalsMismatch compares cluster_capacity and team_capacity with the sums recomputed
// from the rows; "" when they agree, else both, for the failure message.
func (d *DB) CapacityTotalsMismatch(ctx context.Context) (string, error) {
	read := func(q string) (string, error) {
		rows, err := d.sql.QueryContext(ctx, q)
		if err != nil {
			return "", err
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var c, t string
			var n int64
			if err := rows.Scan(&c, &t, &n); err != nil {
				return "", err
			}
			out = append(out, fmt.Sprintf("%s/%s=%d", c, t, n))
		}
		return strings.Join(out, " "), rows.Err()
	}
	var bad []string
	for _, c := range []struct{ kept, want string }{
		{`SELECT cluster_name, instance_type, count FROM cluster_capacity ORDER BY cluster_name, instance_type`, recomputedClusterSQL + ` ORDER BY 1, 2`},
		{`SELECT team, instance_type, count FROM team_capacity ORDER BY team, instance_type`, recomputedTeamSQL + ` ORDER BY 1, 2`},
		// The guarantee history's last step is the guarantee in force.
		{`SELECT h.team, h.instance_type, h.count FROM team_guarantee_history h
WHERE h.count <> 0 AND h.from_at = (SELECT MAX(from_at) FROM team_guarantee_history l WHERE l.team = h.team AND l.instance_type = h.instance_type)
ORDER BY 1, 2`, `SELECT team, instance_type, count FROM team_capacity ORDER BY 1, 2`},
	} {
		kept, err := read(c.kept)
		if err != nil {
			return "", err
		}
		want, err := read(c.want)
		if err != nil {
			return "", err
		}
		if kept != want {
			bad = append(bad, fmt.Sprintf("%q has [%s], the rows sum to [%s]", c.kept, kept, want))
		}
	}
	return strings.Join(bad, "; "), nil
}

// SetNowForTest sets the clock the session store checks expiries against.
func (s *SessionStore) SetNowForTest(now func() time.Time) { s.now = now }

// AuditEventsQuery is AuditEvents' query, for the plan test.
func AuditEventsQuery(f AuditFilter, before int64, limit int) (string, []any) {
	return auditEventsQuery(f, before, limit)
}

// DataVersionFromWALIndex is how many data versions were read from the
// WAL-index header (SQLite), not asked of SQLite.
func (d *DB) DataVersionFromWALIndex() int64 {
	if d.version == nil {
		return 0
	}
	return d.version.shmReads.Load()
}

// SetPGVersionWaits replaces the pauses between data-version reads of d
// while another session's write is in progress (PostgreSQL).
func (d *DB) SetPGVersionWaits(waits []time.Duration) {
	d.pgVersion.query = pgDataVersion(d.sql, pgFullVersion, waits)
	d.pgContent.query = pgDataVersion(d.sql, pgContentVersion, waits)
}

// InTxForTest runs f in one of the store's write transactions (inTx).
func (d *DB) InTxForTest(ctx context.Context, f func(*sql.Tx) error) error { return d.inTx(ctx, f) }

// HoldWriterForTest opens a write transaction and keeps it open until the
// returned function is called: every other writer waits behind it, on
// either engine.
func (d *DB) HoldWriterForTest(ctx context.Context) (release func()) {
	held, rel, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		_ = d.inTx(ctx, func(*sql.Tx) error { close(held); <-rel; return nil })
	}()
	<-held
	return func() { close(rel); <-done }
}

// MaxQueuedUsesForTest is maxQueuedUses.
const MaxQueuedUsesForTest = maxQueuedUses

// QueuedTokenUsesForTest is how many token uses wait for a transaction,
// and whether a flush is running.
func (d *DB) QueuedTokenUsesForTest() (int, bool) {
	d.uses.mu.Lock()
	defer d.uses.mu.Unlock()
	return len(d.uses.pending), d.uses.flushing
}

// SetUseGapForTest sets the least time between two batches of API uses'
// starts (useGap), before any use is recorded.
func (d *DB) SetUseGapForTest(gap time.Duration) {
	d.uses.mu.Lock()
	defer d.uses.mu.Unlock()
	d.uses.gap = gap
}

// RecordTokenUseForTest is RecordTokenUse that also says how many uses
// shared the use's transaction.
func (d *DB) RecordTokenUseForTest(ctx context.Context, id int64, by workflow.Actor, what, from string, now time.Time) (int, error) {
	return d.recordTokenUse(ctx, id, by, what, from, now)
}

// RecordMachineUseForTest is RecordMachineUse that also says how many uses
// shared the use's transaction.
func (d *DB) RecordMachineUseForTest(ctx context.Context, issuer, subject, what string, now time.Time) (User, int, error) {
	return d.recordMachineUse(ctx, issuer, subject, what, now)
}

// UpsertNodeSpansForTest writes rows (usage_node_spans' columns, in
// nodeSpanColumns' order) through upsertRows, in one transaction.
func (d *DB) UpsertNodeSpansForTest(ctx context.Context, rows [][]any) error {
	return d.inTx(ctx, func(tx *sql.Tx) error {
		return d.upsertRows(ctx, tx, "usage_node_spans", nodeSpanColumns, len(rows),
			` ON CONFLICT (cluster, node, from_at) DO UPDATE SET schedulable = excluded.schedulable`,
			func(i int, args []any) []any { return append(args, rows[i]...) })
	})
}
