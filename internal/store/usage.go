package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/hyperpod-governance/portal/internal/usage"
)

// PutUsageHours records hourly usage rows, replacing any row with the same
// team, namespace, instance type and hour: the collector recomputes an hour
// from its intervals, so writing it again never counts anything twice.
func (d *DB) PutUsageHours(ctx context.Context, hours []usage.Hour) error {
	return d.inTx(ctx, func(tx *sql.Tx) error { return putUsageHours(ctx, tx, "", hours) })
}

// putUsageHours writes hours as cluster's (the collector's cluster whose
// recompute replaces them; "" for rows of none: demo and seeded rows).
func putUsageHours(ctx context.Context, tx *sql.Tx, cluster string, hours []usage.Hour) error {
	{
		stmt, err := tx.PrepareContext(ctx, `
INSERT INTO usage_hours (team, namespace, instance_type, hour, guaranteed_accel_s, borrowed_accel_s,
  cpu_milli_s, memory_mib_s, running, pending, preempted, wait_p50_s, wait_p90_s, wait_p99_s, source, borrowed_cpu_milli_s, cluster)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (team, namespace, instance_type, hour) DO UPDATE SET
  guaranteed_accel_s = excluded.guaranteed_accel_s, borrowed_accel_s = excluded.borrowed_accel_s,
  cpu_milli_s = excluded.cpu_milli_s, memory_mib_s = excluded.memory_mib_s, borrowed_cpu_milli_s = excluded.borrowed_cpu_milli_s,
  running = excluded.running, pending = excluded.pending, preempted = excluded.preempted,
  wait_p50_s = excluded.wait_p50_s, wait_p90_s = excluded.wait_p90_s, wait_p99_s = excluded.wait_p99_s,
  source = excluded.source, cluster = excluded.cluster`)
		if err != nil {
			return fmt.Errorf("store: put usage hours: %w", err)
		}
		defer stmt.Close()
		for _, h := range hours {
			if err := checkHour(h.Start); err != nil {
				return fmt.Errorf("store: put usage hours: %w", err)
			}
			if _, err := stmt.ExecContext(ctx, h.Team, h.Namespace, h.InstanceType, fmtTime(h.Start),
				h.GuaranteedAccelSeconds, h.BorrowedAccelSeconds, h.CPUMilliSeconds, h.MemoryMiBSeconds,
				h.Running, h.Pending, h.Preempted, h.WaitP50Seconds, h.WaitP90Seconds, h.WaitP99Seconds,
				sourceOf(h.Source), h.BorrowedCPUMilliSeconds, cluster); err != nil {
				return fmt.Errorf("store: put usage hours: %w", err)
			}
		}
		return nil
	}
}

// UsageFilter selects hourly rows: hours in [From, To), and a team and
// namespace when set. Callers scope it to what the user may read.
type UsageFilter struct {
	Team      string
	Namespace string
	From, To  time.Time
}

// where is f's WHERE clause over usage_hours and its arguments.
func (f UsageFilter) where() (string, []any) {
	where, args := []string{"hour >= ?", "hour < ?"}, []any{fmtTime(f.From), fmtTime(f.To)}
	if f.Team != "" {
		where, args = append(where, "team = ?"), append(args, f.Team)
	}
	if f.Namespace != "" {
		where, args = append(where, "namespace = ?"), append(args, f.Namespace)
	}
	return strings.Join(where, " AND "), args
}

// UsageHours returns the hourly rows f selects, by hour, team, namespace and
// instance type.
func (d *DB) UsageHours(ctx context.Context, f UsageFilter) ([]usage.Hour, error) {
	where, args := f.where()
	rows, err := d.sql.QueryContext(ctx, `
SELECT team, namespace, instance_type, hour, guaranteed_accel_s, borrowed_accel_s, cpu_milli_s, memory_mib_s,
       running, pending, preempted, wait_p50_s, wait_p90_s, wait_p99_s, source, borrowed_cpu_milli_s
FROM usage_hours WHERE `+where+` ORDER BY hour, team, namespace, instance_type`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: usage hours: %w", err)
	}
	defer rows.Close()
	var out []usage.Hour
	for rows.Next() {
		var h usage.Hour
		var at, src string
		if err := rows.Scan(&h.Team, &h.Namespace, &h.InstanceType, &at, &h.GuaranteedAccelSeconds, &h.BorrowedAccelSeconds,
			&h.CPUMilliSeconds, &h.MemoryMiBSeconds, &h.Running, &h.Pending, &h.Preempted,
			&h.WaitP50Seconds, &h.WaitP90Seconds, &h.WaitP99Seconds, &src, &h.BorrowedCPUMilliSeconds); err != nil {
			return nil, fmt.Errorf("store: usage hours: %w", err)
		}
		if h.Start, err = parseTime(at); err != nil {
			return nil, fmt.Errorf("store: usage hours: %w", err)
		}
		h.Source = usage.Source(src)
		out = append(out, h)
	}
	return out, rows.Err()
}

// PutClusterHours records a cluster's hourly capacity rows, replacing rows of
// the same cluster, instance type and hour.
func (d *DB) PutClusterHours(ctx context.Context, hours []usage.ClusterHour) error {
	return d.inTx(ctx, func(tx *sql.Tx) error { return putClusterHours(ctx, tx, hours) })
}

func putClusterHours(ctx context.Context, tx *sql.Tx, hours []usage.ClusterHour) error {
	{
		for _, h := range hours {
			if err := checkHour(h.Start); err != nil {
				return fmt.Errorf("store: put cluster hours: %w", err)
			}
			if _, err := tx.ExecContext(ctx, `
INSERT INTO usage_cluster_hours (cluster, instance_type, hour, capacity_accel_s, allocated_accel_s, unhealthy_node_s, source)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (cluster, instance_type, hour) DO UPDATE SET
  capacity_accel_s = excluded.capacity_accel_s, allocated_accel_s = excluded.allocated_accel_s,
  unhealthy_node_s = excluded.unhealthy_node_s, source = excluded.source`,
				h.Cluster, h.InstanceType, fmtTime(h.Start), h.CapacityAccelSeconds, h.AllocatedAccelSeconds,
				h.UnhealthyNodeSeconds, sourceOf(h.Source)); err != nil {
				return fmt.Errorf("store: put cluster hours: %w", err)
			}
		}
		return nil
	}
}

// ClusterHours returns a cluster's hourly capacity rows in [from, to), by
// hour and instance type; every cluster's when cluster is empty.
func (d *DB) ClusterHours(ctx context.Context, cluster string, from, to time.Time) ([]usage.ClusterHour, error) {
	rows, err := d.sql.QueryContext(ctx, `
SELECT cluster, instance_type, hour, capacity_accel_s, allocated_accel_s, unhealthy_node_s, source
FROM usage_cluster_hours WHERE hour >= ? AND hour < ? AND (? = '' OR cluster = ?)
ORDER BY hour, cluster, instance_type`, fmtTime(from), fmtTime(to), cluster, cluster)
	if err != nil {
		return nil, fmt.Errorf("store: cluster hours: %w", err)
	}
	defer rows.Close()
	var out []usage.ClusterHour
	for rows.Next() {
		var h usage.ClusterHour
		var at, src string
		if err := rows.Scan(&h.Cluster, &h.InstanceType, &at, &h.CapacityAccelSeconds, &h.AllocatedAccelSeconds,
			&h.UnhealthyNodeSeconds, &src); err != nil {
			return nil, fmt.Errorf("store: cluster hours: %w", err)
		}
		if h.Start, err = parseTime(at); err != nil {
			return nil, fmt.Errorf("store: cluster hours: %w", err)
		}
		h.Source = usage.Source(src)
		out = append(out, h)
	}
	return out, rows.Err()
}

// AddMissing records a period whose usage could not be recovered.
func (d *DB) AddMissing(ctx context.Context, m usage.Missing) error {
	if !m.From.Before(m.To) {
		return fmt.Errorf("store: add missing period: %s is not before %s", m.From, m.To)
	}
	if _, err := d.sql.ExecContext(ctx, `INSERT INTO usage_missing (cluster, from_at, to_at, reason) VALUES (?, ?, ?, ?)`,
		m.Cluster, fmtTime(m.From), fmtTime(m.To), m.Reason); err != nil {
		return fmt.Errorf("store: add missing period: %w", err)
	}
	return nil
}

// MissingIn returns the missing data periods that touch [from, to), oldest
// first.
func (d *DB) MissingIn(ctx context.Context, from, to time.Time) ([]usage.Missing, error) {
	rows, err := d.sql.QueryContext(ctx, `
SELECT cluster, from_at, to_at, reason FROM usage_missing WHERE to_at > ? AND from_at < ? ORDER BY from_at, id`,
		fmtTime(from), fmtTime(to))
	if err != nil {
		return nil, fmt.Errorf("store: missing periods: %w", err)
	}
	defer rows.Close()
	var out []usage.Missing
	for rows.Next() {
		var m usage.Missing
		var a, b string
		if err := rows.Scan(&m.Cluster, &a, &b, &m.Reason); err != nil {
			return nil, fmt.Errorf("store: missing periods: %w", err)
		}
		if m.From, err = parseTime(a); err != nil {
			return nil, fmt.Errorf("store: missing periods: %w", err)
		}
		if m.To, err = parseTime(b); err != nil {
			return nil, fmt.Errorf("store: missing periods: %w", err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// PruneUsage deletes hourly rows, missing periods and the collector's
// records (pods, Workloads, node spans, Kueue's borrowing samples) that
// ended (samples: began) before cutoff (the retention setting). Frozen
// statements keep their own copy of what they charged, so pruning never
// rewrites a closed month.
func (d *DB) PruneUsage(ctx context.Context, cutoff time.Time) (int64, error) {
	var n int64
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		c := fmtTime(cutoff)
		for _, q := range []string{
			`DELETE FROM usage_hours WHERE hour < ?`,
			`DELETE FROM usage_cluster_hours WHERE hour < ?`,
			`DELETE FROM usage_missing WHERE to_at <= ?`,
			`DELETE FROM usage_allocs WHERE end_at IS NOT NULL AND end_at < ?`,
			`DELETE FROM usage_workloads WHERE finished_at IS NOT NULL AND finished_at < ?`,
			`DELETE FROM usage_node_spans WHERE to_at IS NOT NULL AND to_at < ?`,
			`DELETE FROM kueue_borrowing WHERE at < ?`,
		} {
			res, err := tx.ExecContext(ctx, q, c)
			if err != nil {
				return fmt.Errorf("store: prune usage: %w", err)
			}
			k, _ := res.RowsAffected()
			n += k
		}
		return nil
	})
	return n, err
}

func checkHour(t time.Time) error {
	if !t.Equal(usage.HourStart(t)) {
		return fmt.Errorf("%s is not the start of a UTC hour", t)
	}
	return nil
}

func sourceOf(s usage.Source) string {
	if s == "" {
		return string(usage.SourceCluster)
	}
	return string(s)
}

// UsageDays returns the hourly rows f selects summed per UTC day, team,
// namespace, instance type and source, each with Start at its day's
// midnight, by day, team, namespace and instance type: what the daily
// summary (usage.DailySummary) is made of. Only the sums are taken here;
// f.From and f.To should be whole days for whole days' sums.
func (d *DB) UsageDays(ctx context.Context, f UsageFilter) ([]usage.Hour, error) {
	where, args := f.where()
	rows, err := d.sql.QueryContext(ctx, `
SELECT substr(hour, 1, 10) AS day, team, namespace, instance_type, source, SUM(guaranteed_accel_s), SUM(borrowed_accel_s),
       SUM(cpu_milli_s), SUM(borrowed_cpu_milli_s), SUM(memory_mib_s)
FROM usage_hours WHERE `+where+`
GROUP BY substr(hour, 1, 10), team, namespace, instance_type, source ORDER BY day, team, namespace, instance_type, source`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: usage days: %w", err)
	}
	defer rows.Close()
	var out []usage.Hour
	for rows.Next() {
		var h usage.Hour
		var day, src string
		if err := rows.Scan(&day, &h.Team, &h.Namespace, &h.InstanceType, &src, &h.GuaranteedAccelSeconds, &h.BorrowedAccelSeconds,
			&h.CPUMilliSeconds, &h.BorrowedCPUMilliSeconds, &h.MemoryMiBSeconds); err != nil {
			return nil, fmt.Errorf("store: usage days: %w", err)
		}
		if h.Start, err = time.Parse(time.DateOnly, day); err != nil {
			return nil, fmt.Errorf("store: usage days: %w", err)
		}
		h.Source = usage.Source(src)
		h.WaitP50Seconds, h.WaitP90Seconds, h.WaitP99Seconds = -1, -1, -1
		out = append(out, h)
	}
	return out, rows.Err()
}
