package main

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/client-go/rest"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// clusterChecker builds the readiness checks and the inventory reader from
// what is configured: the cluster (kube, nil in dry-run mode) and the AWS
// side (the HyperPod cluster's ARN from the settings, the clients when AWS
// calls are made), and the admission rules' roll-out mode (the cluster
// settings').
func clusterChecker(kube *rest.Config, side awsSide, mode provision.AdmissionMode) (*provision.ClusterChecker, error) {
	src := provision.ReadinessSources{ClusterARN: side.Settings.ClusterARN, AdmissionMode: mode}
	if s := side.Settings; s.Enabled && (s.PodIdentity == nil || *s.PodIdentity) {
		src.PodIdentity = true
	}
	if kube != nil {
		r, err := provision.NewClusterReader(kube)
		if err != nil {
			return nil, err
		}
		src.Kube = r
	}
	if side.Slurm != nil {
		src.Slurm = side.Slurm // "Slurm controller reachable"
	}
	if side.Runner != nil {
		src.ClusterInfo, src.Addons = side.Runner.Clients.ClusterInfo, side.Runner.Clients.Addons
		src.VPCEndpoints = side.Runner.Clients.VPCEndpoints
	}
	return &provision.ClusterChecker{Sources: src}, nil
}

// logReadiness runs the readiness checks once at start and logs each: a
// failing check (an old Kueue, NetworkPolicies not enforced) is an error
// line naming what to do, so it shows before the first job fails. The
// portal still starts: the cluster can be fixed while it runs, and every
// job checks again.
func logReadiness(ctx context.Context, c *provision.ClusterChecker, logger *slog.Logger) {
	if c.Sources.Kube == nil && c.Sources.Addons == nil {
		logger.Info("cluster readiness not checked: no cluster and no AWS calls (see /admin/cluster)")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, ch := range c.Readiness(ctx).Checks {
		attrs := []any{"check", ch.Name, "status", string(ch.Status), "detail", ch.Detail}
		if ch.Todo != "" {
			attrs = append(attrs, "todo", ch.Todo)
		}
		switch ch.Status {
		case provision.CheckFailing:
			logger.Error("cluster readiness", attrs...)
		case provision.CheckWarning:
			logger.Warn("cluster readiness", attrs...)
		default:
			logger.Info("cluster readiness", attrs...)
		}
	}
}

// slurmPartitionUses lists the partitions the approved Slurm contracts of
// the committed connections name (store.CommittedVersions: approved,
// provisioning, active, under review, revoking; one query), for the
// readiness check of the Slurm partitions.
func slurmPartitionUses(db *store.DB) func(context.Context) ([]provision.SlurmPartitionUse, error) {
	return func(ctx context.Context) ([]provision.SlurmPartitionUse, error) {
		vs, err := db.CommittedVersions(ctx)
		if err != nil {
			return nil, err
		}
		var out []provision.SlurmPartitionUse
		for _, v := range vs {
			if v.Contract.Orchestrator == workflow.OrchestratorSlurm && v.Contract.SlurmScope.Partition != "" {
				out = append(out, provision.SlurmPartitionUse{Partition: v.Contract.SlurmScope.Partition, Team: v.Contract.Team})
			}
		}
		return out, nil
	}
}
