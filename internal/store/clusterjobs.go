package store

// Cluster jobs act on the cluster as a whole rather than on one connection:
// today the reconcile of the cluster's HyperPod scheduler config
// (workflow.JobScheduler). They share the jobs table, the claim, the lease,
// the steps and the retries with connection jobs (jobs.go hands StartJob,
// CompleteJob and FailJob of a job without a connection over to this
// file); what differs is that no connection state moves and their audit
// events are the cluster's (object type "cluster").

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// ErrClusterJobOpen is returned when the cluster already has an unfinished
// job of the kind being queued (the partial unique index
// jobs_one_open_cluster).
var ErrClusterJobOpen = errors.New("store: the cluster already has an unfinished job of this kind")

// The audit actions of the scheduler job.
const (
	AuditSchedulerEnqueue   = "scheduler.enqueue"
	AuditSchedulerSucceeded = "scheduler.succeeded"
	AuditSchedulerDryRun    = "scheduler.dry_run"
	AuditSchedulerFailed    = "scheduler.failed"
)

// EnqueueScheduler queues a job that reconciles the scheduler config of the
// cluster (its ARN) with the portal's settings, due now, and records
// "scheduler.enqueue" with the admin's reason, in one transaction. While
// one is queued or running, another gives ErrClusterJobOpen and writes
// nothing.
func (d *DB) EnqueueScheduler(ctx context.Context, cluster string, by workflow.Actor, reason string, now time.Time) (workflow.Job, error) {
	if cluster == "" {
		return workflow.Job{}, errors.New("store: enqueue scheduler job: no cluster")
	}
	var id int64
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		if id, err = enqueueClusterJob(ctx, tx, cluster, workflow.JobScheduler, now); err != nil {
			return err
		}
		why := fmt.Sprintf("job %d: reconcile the scheduler config of %s", id, cluster)
		if reason != "" {
			why += "; " + reason
		}
		return appendAudit(ctx, tx, AuditEvent{At: now, ActorID: by.ID, Actor: by.Email, Action: AuditSchedulerEnqueue,
			ObjectType: "cluster", Reason: why})
	})
	if err != nil {
		return workflow.Job{}, fmt.Errorf("store: enqueue scheduler job: %w", err)
	}
	return d.Job(ctx, id)
}

// ClusterJobs returns up to limit cluster jobs of kind, newest first.
func (d *DB) ClusterJobs(ctx context.Context, kind workflow.JobKind, limit int) ([]workflow.Job, error) {
	return d.queryJobs(ctx, string(kind)+" jobs",
		`SELECT `+jobCols+` FROM jobs WHERE connection_id IS NULL AND kind = ? ORDER BY id DESC LIMIT ?`, kind, limit)
}

// startClusterJob is StartJob for a cluster job, inside its transaction:
// it records the attempt's steps, each pending, and moves nothing else.
func startClusterJob(ctx context.Context, tx *sql.Tx, j workflow.Job, appliedPlanHash string, steps []string, dryRun bool, now time.Time) error {
	return recordAttempts(ctx, tx, []workflow.JobStart{{JobID: j.ID, PlanHash: appliedPlanHash, Steps: steps}}, dryRun, now)
}

// completeClusterJob is CompleteJob for a cluster job whose steps are all
// done (CompleteJob checked): the job succeeds and the audit trail records
// what its steps did ("scheduler.succeeded", or "scheduler.dry_run" when
// they only recorded the calls).
func completeClusterJob(ctx context.Context, tx *sql.Tx, j workflow.Job, now time.Time) error {
	outcomes, err := column[string](ctx, tx, `SELECT outcome || ': ' || detail FROM job_steps WHERE job_id = ? AND seq < ? ORDER BY seq`, j.ID, j.Steps)
	if err != nil {
		return err
	}
	action := string(j.Kind) + ".succeeded" // AuditSchedulerSucceeded
	if j.DryRun {
		action = string(j.Kind) + ".dry_run" // AuditSchedulerDryRun
	}
	if err := endJobs(ctx, tx, []int64{j.ID}, workflow.JobSucceeded, "", now); err != nil {
		return err
	}
	return appendAudit(ctx, tx, AuditEvent{At: now, Actor: provisioner, Action: action, ObjectType: "cluster",
		Reason: fmt.Sprintf("job %d, attempt %d: %s", j.ID, j.Attempts, strings.Join(outcomes, "; "))})
}

// failClusterJob is FailJob for a cluster job: the job fails with errText
// and the audit trail records "scheduler.failed" with it.
func failClusterJob(ctx context.Context, tx *sql.Tx, j workflow.Job, errText string, now time.Time) error {
	if err := endJobs(ctx, tx, []int64{j.ID}, workflow.JobFailed, errText, now); err != nil {
		return err
	}
	return appendAudit(ctx, tx, AuditEvent{At: now, Actor: provisioner, Action: string(j.Kind) + ".failed", ObjectType: "cluster", // AuditSchedulerFailed
		Reason: fmt.Sprintf("job %d, attempt %d: %s", j.ID, j.Attempts, errText)})
}
