package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/hyperpod-governance/portal/internal/usage"
)

// putBorrowing records the collector's samples of Kueue's and its own
// borrowing (usage.BorrowSample) in the transaction of PutUsageRecords; a
// sample of the same queue, flavor, resource and instant replaces the
// earlier one.
func putBorrowing(ctx context.Context, tx *sql.Tx, cluster string, samples []usage.BorrowSample) error {
	for _, b := range samples {
		if b.ClusterQueue == "" || b.Flavor == "" || b.Resource == "" {
			return fmt.Errorf("store: put usage records: a borrowing sample without its queue, flavor or resource: %+v", b)
		}
		if _, err := tx.ExecContext(ctx, `
INSERT INTO kueue_borrowing (cluster, cluster_queue, flavor, resource, at, team, kueue_borrowed, portal_borrowed)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (cluster, cluster_queue, flavor, resource, at) DO UPDATE SET team = excluded.team,
  kueue_borrowed = excluded.kueue_borrowed, portal_borrowed = excluded.portal_borrowed`,
			cluster, b.ClusterQueue, b.Flavor, b.Resource, fmtTime(b.At), b.Team, b.Kueue, b.Portal); err != nil {
			return fmt.Errorf("store: put usage records: borrowing of %s: %w", b.Key(), err)
		}
	}
	return nil
}

// KueueBorrowing returns the samples of Kueue's and the collector's
// borrowing (cluster "" every cluster's) taken at or after from, and for
// each queue, flavor and resource the last one before from (the figures
// in force at from: a sample is written only when a figure changes), in
// order of cluster, series and time.
func (d *DB) KueueBorrowing(ctx context.Context, cluster string, from time.Time) ([]usage.BorrowSample, error) {
	f := fmtTime(from)
	rows, err := d.sql.QueryContext(ctx, `
SELECT b.cluster, b.cluster_queue, b.flavor, b.resource, b.at, b.team, b.kueue_borrowed, b.portal_borrowed
FROM kueue_borrowing b
WHERE (? = '' OR b.cluster = ?)
  AND (b.at >= ? OR b.at = (SELECT MAX(p.at) FROM kueue_borrowing p
        WHERE p.cluster = b.cluster AND p.cluster_queue = b.cluster_queue AND p.flavor = b.flavor
          AND p.resource = b.resource AND p.at < ?))
ORDER BY b.cluster, b.cluster_queue, b.flavor, b.resource, b.at`, cluster, cluster, f, f)
	if err != nil {
		return nil, fmt.Errorf("store: kueue borrowing: %w", err)
	}
	defer rows.Close()
	var out []usage.BorrowSample
	for rows.Next() {
		var b usage.BorrowSample
		var at string
		if err := rows.Scan(&b.Cluster, &b.ClusterQueue, &b.Flavor, &b.Resource, &at, &b.Team, &b.Kueue, &b.Portal); err != nil {
			return nil, fmt.Errorf("store: kueue borrowing: %w", err)
		}
		if b.At, err = parseTime(at); err != nil {
			return nil, fmt.Errorf("store: kueue borrowing: %w", err)
		}
		out = append(out, b)
	}
	return out, rows.Err()
}
