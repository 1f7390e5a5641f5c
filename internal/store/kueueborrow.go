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
	}
	samples = usage.LastOfEach(samples, func(b usage.BorrowSample) string { return b.Key() + "\x00" + fmtTime(b.At) })
	if err := insertRows(ctx, tx, len(samples), `
INSERT INTO kueue_borrowing (cluster, cluster_queue, flavor, resource, at, team, kueue_borrowed, portal_borrowed) VALUES `, 8, `
ON CONFLICT (cluster, cluster_queue, flavor, resource, at) DO UPDATE SET team = excluded.team,
  kueue_borrowed = excluded.kueue_borrowed, portal_borrowed = excluded.portal_borrowed`,
		func(i int, args []any) []any {
			b := samples[i]
			return append(args, cluster, b.ClusterQueue, b.Flavor, b.Resource, fmtTime(b.At), b.Team, b.Kueue, b.Portal)
		}); err != nil {
		return fmt.Errorf("store: put usage records: borrowing: %w", err)
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
	// The samples since from, and each series' last before from (one
	// pass over the primary key's index, grouped, not a lookup per row).
	rows, err := d.sql.QueryContext(ctx, `
SELECT cluster, cluster_queue, flavor, resource, at, team, kueue_borrowed, portal_borrowed FROM (
  SELECT b.cluster, b.cluster_queue, b.flavor, b.resource, b.at, b.team, b.kueue_borrowed, b.portal_borrowed
  FROM kueue_borrowing b WHERE (? = '' OR b.cluster = ?) AND b.at >= ?
  UNION ALL
  SELECT b.cluster, b.cluster_queue, b.flavor, b.resource, b.at, b.team, b.kueue_borrowed, b.portal_borrowed
  FROM kueue_borrowing b JOIN (
    SELECT cluster, cluster_queue, flavor, resource, MAX(at) AS at FROM kueue_borrowing
    WHERE (? = '' OR cluster = ?) AND at < ? GROUP BY cluster, cluster_queue, flavor, resource) m
  ON m.cluster = b.cluster AND m.cluster_queue = b.cluster_queue AND m.flavor = b.flavor AND m.resource = b.resource AND m.at = b.at
) s ORDER BY cluster, cluster_queue, flavor, resource, at`, cluster, cluster, f, cluster, cluster, f)
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
