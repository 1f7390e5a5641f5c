package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/hyperpod-governance/portal/internal/usage"
)

// SeedUsage records demo usage (`make run`) in one transaction, and only on
// a database without any usage row: it reports false, writing nothing, when
// there is one. All or nothing, so a start interrupted mid-seed leaves no
// half-seeded history that the next start would take for a seeded one.
func (d *DB) SeedUsage(ctx context.Context, hours []usage.Hour, cluster []usage.ClusterHour, missing []usage.Missing) (bool, error) {
	seeded := false
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		var any bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM usage_hours) OR EXISTS (SELECT 1 FROM usage_cluster_hours)`).Scan(&any); err != nil {
			return err
		}
		if any {
			return nil
		}
		hs, err := tx.PrepareContext(ctx, `
INSERT INTO usage_hours (team, namespace, instance_type, hour, guaranteed_accel_s, borrowed_accel_s,
  cpu_milli_s, memory_mib_s, running, pending, preempted, wait_p50_s, wait_p90_s, wait_p99_s, source, borrowed_cpu_milli_s)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer hs.Close()
		for _, h := range hours {
			if err := checkHour(h.Start); err != nil {
				return err
			}
			if _, err := hs.ExecContext(ctx, h.Team, h.Namespace, h.InstanceType, fmtTime(h.Start),
				h.GuaranteedAccelSeconds, h.BorrowedAccelSeconds, h.CPUMilliSeconds, h.MemoryMiBSeconds,
				h.Running, h.Pending, h.Preempted, h.WaitP50Seconds, h.WaitP90Seconds, h.WaitP99Seconds, sourceOf(h.Source),
				h.BorrowedCPUMilliSeconds); err != nil {
				return err
			}
		}
		cs, err := tx.PrepareContext(ctx, `
INSERT INTO usage_cluster_hours (cluster, instance_type, hour, capacity_accel_s, allocated_accel_s, unhealthy_node_s, source)
VALUES (?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer cs.Close()
		for _, h := range cluster {
			if err := checkHour(h.Start); err != nil {
				return err
			}
			if _, err := cs.ExecContext(ctx, h.Cluster, h.InstanceType, fmtTime(h.Start), h.CapacityAccelSeconds,
				h.AllocatedAccelSeconds, h.UnhealthyNodeSeconds, sourceOf(h.Source)); err != nil {
				return err
			}
		}
		for _, m := range missing {
			if !m.From.Before(m.To) {
				return fmt.Errorf("missing period %s is not before %s", m.From, m.To)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO usage_missing (cluster, from_at, to_at, reason) VALUES (?, ?, ?, ?)`,
				m.Cluster, fmtTime(m.From), fmtTime(m.To), m.Reason); err != nil {
				return err
			}
		}
		seeded = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("store: seed usage: %w", err)
	}
	return seeded, nil
}
