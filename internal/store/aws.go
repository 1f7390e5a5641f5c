package store

import (
	"context"
	"database/sql"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// RecordAWSResource keeps what an AWS step of job jobID did to a resource
// (r.JobID and r.UpdatedAt are set here). Like every step write it fails
// with ErrLeaseLost when owner no longer holds the job's lease. An
// "unchanged" or "deleted" result keeps the ids recorded before when it
// brings none.
func (d *DB) RecordAWSResource(ctx context.Context, jobID int64, owner string, r workflow.AWSRecord, now time.Time) error {
	return d.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := leased(ctx, tx, jobID, owner); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `
INSERT INTO aws_resources (connection_id, kind, name, resource_id, arn, version, action, job_id, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (connection_id, kind, name) DO UPDATE SET
	resource_id = CASE WHEN excluded.resource_id = '' THEN aws_resources.resource_id ELSE excluded.resource_id END,
	arn = CASE WHEN excluded.arn = '' THEN aws_resources.arn ELSE excluded.arn END,
	version = CASE WHEN excluded.version = 0 THEN aws_resources.version ELSE excluded.version END,
	action = excluded.action, job_id = excluded.job_id, updated_at = excluded.updated_at`,
			r.ConnectionID, r.Kind, r.Name, r.ResourceID, r.ARN, r.Version, r.Action, jobID, fmtTime(now))
		return err
	})
}

// AWSResources lists a connection's AWS resources in the order provisioning
// first recorded them.
func (d *DB) AWSResources(ctx context.Context, connID int64) ([]workflow.AWSRecord, error) {
	rows, err := d.sql.QueryContext(ctx, `
SELECT connection_id, kind, name, resource_id, arn, version, action, job_id, updated_at
FROM aws_resources WHERE connection_id = ? ORDER BY rowid`, connID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []workflow.AWSRecord
	for rows.Next() {
		var r workflow.AWSRecord
		var ts string
		if err := rows.Scan(&r.ConnectionID, &r.Kind, &r.Name, &r.ResourceID, &r.ARN, &r.Version, &r.Action, &r.JobID, &ts); err != nil {
			return nil, err
		}
		if r.UpdatedAt, err = parseTime(ts); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
