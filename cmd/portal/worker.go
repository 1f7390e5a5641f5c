package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// jobStore adapts *store.DB to provision.JobStore: every method matches but
// ClaimJob, whose Job type is the store's (the two packages may not import
// each other).
type jobStore struct{ *store.DB }

func (s jobStore) ClaimJob(ctx context.Context, owner string, now time.Time, lease time.Duration) (provision.Job, bool, error) {
	j, ok, err := s.DB.ClaimJob(ctx, owner, now, lease)
	return provision.Job{
		ID: j.ID, ConnectionID: j.ConnectionID, Kind: string(j.Kind), Version: j.Version, PlanHash: j.PlanHash,
		Attempts: j.Attempts, LastError: j.LastError, PreviousOwner: j.PreviousOwner,
	}, ok, err
}

var _ provision.JobStore = jobStore{}

// kubeConfig loads the cluster connection: "" means none (dry run),
// "in-cluster" the pod's service account, anything else a kubeconfig file.
func kubeConfig(path string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	switch path {
	case "":
		return nil, nil
	case "in-cluster":
		cfg, err = rest.InClusterConfig()
	default:
		cfg, err = clientcmd.BuildConfigFromFlags("", path)
	}
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", path, err)
	}
	// client-go's default of 5 requests/s would make reconciling many
	// tenants take minutes.
	cfg.QPS, cfg.Burst = 50, 100
	cfg.UserAgent = "hyperpod-portal/" + version
	return cfg, nil
}

// newWorker builds the provisioning worker: real server-side apply when a
// cluster is configured, dry run otherwise.
func newWorker(db *store.DB, kube *rest.Config, settings provision.ClusterSettings, logger *slog.Logger) (*provision.Worker, error) {
	lookup := func(ctx context.Context, connID int64, v int) (workflow.Contract, string, error) {
		ver, err := db.Version(ctx, connID, v)
		return ver.Contract, ver.Hash, err
	}
	w := &provision.Worker{
		Store:  jobStore{db},
		Plans:  provision.PlansFrom(lookup, settings),
		DryRun: kube == nil,
		Owner:  provision.DefaultOwner(),
		Logger: logger.With("component", "provisioner"),
	}
	if kube != nil {
		a, err := provision.NewApplier(kube)
		if err != nil {
			return nil, err
		}
		w.Apply = provision.ApplierSteps{Applier: a}
	}
	return w, nil
}
