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
		ID: j.ID, ConnectionID: j.ConnectionID, Cluster: j.Cluster, Kind: string(j.Kind), Version: j.Version, PlanHash: j.PlanHash,
		AdoptNamespace: j.AdoptNamespace, Attempts: j.Attempts, LastError: j.LastError, PreviousOwner: j.PreviousOwner,
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

func planLookup(db *store.DB) func(ctx context.Context, connID int64, v int) (workflow.Contract, string, error) {
	return func(ctx context.Context, connID int64, v int) (workflow.Contract, string, error) {
		ver, err := db.Version(ctx, connID, v)
		return ver.Contract, ver.Hash, err
	}
}

// newWorker builds the provisioning worker: real server-side apply when a
// cluster is configured (a is non-nil), dry run otherwise.
func newWorker(db *store.DB, a *provision.Applier, settings provision.ClusterSettings, logger *slog.Logger) *provision.Worker {
	w := &provision.Worker{
		Store:  jobStore{db},
		Plans:  provision.PlansFrom(planLookup(db), settings),
		DryRun: a == nil,
		Owner:  provision.DefaultOwner(),
		Logger: logger.With("component", "provisioner"),
	}
	if a != nil {
		w.Apply = provision.ApplierSteps{Applier: a}
	}
	return w
}

// newDriftChecker compares every provisioned connection with its approved
// plan on the cluster and, with real AWS calls (cloud not nil), on AWS,
// every interval.
func newDriftChecker(db *store.DB, a *provision.Applier, cloud provision.AWSDrifter, settings provision.ClusterSettings, logger *slog.Logger) *provision.DriftChecker {
	return &provision.DriftChecker{
		List: func(ctx context.Context) ([]provision.ConnVersion, error) {
			ps, err := db.Provisioned(ctx)
			out := make([]provision.ConnVersion, len(ps))
			for i, p := range ps {
				out[i] = provision.ConnVersion{ConnectionID: p.ConnectionID, Version: p.Version}
			}
			return out, err
		},
		Plans: provision.PlansFrom(planLookup(db), settings),
		Check: provision.DriftOf(a, cloud),
		Save: func(ctx context.Context, id int64, items []provision.DriftItem, checkErr string, now time.Time) error {
			recs := make([]store.DriftRecord, len(items))
			for i, it := range items {
				recs[i] = store.DriftRecord(it)
			}
			return db.SaveDrift(ctx, id, recs, checkErr, now)
		},
		Interval: 5 * time.Minute,
		Logger:   logger.With("component", "drift"),
	}
}

// liveOrNil keeps a nil *Applier from becoming a non-nil interface.
func liveOrNil(a *provision.Applier) interface {
	Drift(context.Context, provision.Plan) ([]provision.DriftItem, error)
	CheckNamespace(context.Context, provision.Plan) (provision.NamespaceCheck, error)
} {
	if a == nil {
		return nil
	}
	return a
}

// RecordAWSResource keeps what an AWS step did (provision.AWSRecorder).
func (s jobStore) RecordAWSResource(ctx context.Context, jobID int64, owner string, r provision.AWSRecord) error {
	return s.DB.RecordAWSResource(ctx, jobID, owner, store.AWSResource{
		ConnectionID: r.ConnectionID, Kind: r.Kind, Name: r.Name, ResourceID: r.ResourceID,
		ARN: r.ARN, Version: r.Version, Action: r.Action,
	}, time.Now())
}

var _ provision.AWSRecorder = jobStore{}
