package provision

// This file runs the cluster's scheduler config job (workflow.JobScheduler): the
// reconcile of the cluster's HyperPod task governance scheduler config with
// the portal's settings. An admin queues it (internal/web's
// /admin/scheduler); the worker claims it like any other job and runs
// awsprov.EnsureSchedulerConfig as the job's one recorded step, with the
// same lease, retries, backoff and audit (the store's cluster jobs).

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// SchedulerJobs is what the worker needs to run scheduler jobs.
type SchedulerJobs struct {
	// Spec is the scheduler config the settings want
	// (ClusterSettings.SchedulerSpec).
	Spec func() (awsprov.SchedulerSpec, error)
	// API makes the calls; nil runs each job dry: its step records the
	// calls it would make and the job succeeds as a dry run.
	API awsprov.SchedulerAPI
	// Poll is how a job waits for HyperPod to apply the config. Its
	// Timeout is cut to fit in a step (the worker's StepTimeout), so that a
	// config still settling is a retried TimeoutError, not a cut call.
	Poll awsprov.PollConfig
}

// schedulerStepName names the job's one step.
func schedulerStepName(spec awsprov.SchedulerSpec) string {
	return fmt.Sprintf("scheduler config %s on %s", spec.Name, spec.ClusterARN)
}

// schedulerWhat is the config in one line, for the step's detail.
func schedulerWhat(spec awsprov.SchedulerSpec) string {
	var classes []string
	for _, pc := range spec.PriorityClasses {
		classes = append(classes, fmt.Sprintf("%s=%d", pc.Name, pc.Weight))
	}
	return fmt.Sprintf("%s; fair share %t", strings.Join(classes, " "), spec.FairShare)
}

// runScheduler runs one attempt of a scheduler job. A job whose settings
// no longer name its cluster, or that this portal cannot run, fails
// without a retry; AWS errors retry unless awsprov calls them permanent.
func (w *Worker) runScheduler(ctx, sctx context.Context, job workflow.Job, log *slog.Logger) error {
	if w.Scheduler == nil || w.Scheduler.Spec == nil {
		return w.settle(sctx, job, log, stop{err: fmt.Errorf("provision: scheduler jobs are not run by this portal: the AWS side of provisioning is not configured (--aws-settings)")})
	}
	spec, err := w.Scheduler.Spec()
	if err != nil {
		return w.settle(sctx, job, log, stop{err: fmt.Errorf("provision: scheduler config: %w", err)})
	}
	if spec.ClusterARN != job.Cluster {
		return w.settle(sctx, job, log, stop{err: fmt.Errorf("provision: the job was queued for cluster %s, but the settings now name %s: queue it again", job.Cluster, spec.ClusterARN)})
	}
	dry := w.Scheduler.API == nil
	name := schedulerStepName(spec)
	if err := w.Store.StartJob(sctx, job.ID, w.Owner, "", []string{name}, dry, w.now()); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return w.handBack(sctx, job, log, 0, name)
	}
	if err := w.Store.StartStep(sctx, job.ID, w.Owner, 0, name, w.now(), w.lease()); err != nil {
		return err
	}
	outcome, detail := string(DryRunOutcome), "would call ListClusterSchedulerConfigs, then CreateClusterSchedulerConfig or UpdateClusterSchedulerConfig when it differs, for "+schedulerWhat(spec)
	if !dry {
		stepTimeout := w.stepTimeout()
		poll := w.Scheduler.Poll
		poll.Timeout = min(orDefault(poll.Timeout, stepTimeout), stepTimeout*3/4)
		stepCtx, cancel := context.WithTimeout(ctx, stepTimeout)
		res, rerr := awsprov.EnsureSchedulerConfig(stepCtx, w.Scheduler.API, spec, poll)
		cancel()
		if rerr != nil {
			if awsprov.IsPermanent(rerr) {
				rerr = permanent(rerr)
			}
			if err := w.Store.StepFailed(sctx, job.ID, w.Owner, 0, name, rerr.Error(), w.now()); err != nil {
				return err
			}
			if ctx.Err() != nil {
				return w.handBack(sctx, job, log, 0, name)
			}
			return w.settle(sctx, job, log, stop{retry: !IsPermanent(rerr), err: rerr})
		}
		outcome = string(res.Action)
		detail = fmt.Sprintf("config %s version %d: %s", res.ID, res.Version, schedulerWhat(spec))
	}
	if err := w.Store.StepFinished(sctx, job.ID, w.Owner, 0, name, outcome, detail, w.now()); err != nil {
		return err
	}
	if w.AfterStep != nil {
		if err := w.AfterStep(0); err != nil {
			return err
		}
	}
	if err := w.Store.CompleteJob(sctx, job.ID, w.Owner, w.now()); err != nil {
		return err
	}
	log.Info("job succeeded", "kind", job.Kind, "cluster", job.Cluster, "outcome", outcome, "dry_run", dry)
	return nil
}
