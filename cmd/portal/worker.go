package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hyperpod-governance/portal/internal/leader"
	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/web"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// *store.DB is the worker's queue and keeps what AWS steps did: the job and
// AWS record types are workflow's, shared by store and provision.
var (
	_ provision.JobStore    = (*store.DB)(nil)
	_ provision.AWSRecorder = (*store.DB)(nil)
)

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
	cfg = provision.WithPortalRate(cfg)
	cfg.UserAgent = "hyperpod-portal/" + version
	return cfg, nil
}

func planLookup(db *store.DB) func(ctx context.Context, connID int64, v int) (workflow.Contract, string, error) {
	return func(ctx context.Context, connID int64, v int) (workflow.Contract, string, error) {
		ver, err := db.Version(ctx, connID, v)
		return ver.Contract, ver.Hash, err
	}
}

// planBatchLookup looks many connections' contract versions up in one
// query (a re-apply batch's plans).
func planBatchLookup(db *store.DB) func(ctx context.Context, refs []provision.ConnVersion) (map[provision.ConnVersion]provision.ContractVersion, error) {
	return func(ctx context.Context, refs []provision.ConnVersion) (map[provision.ConnVersion]provision.ContractVersion, error) {
		keys := make([]store.VersionRef, len(refs))
		for i, r := range refs {
			keys[i] = store.VersionRef(r)
		}
		found, err := db.VersionsOf(ctx, keys)
		if err != nil {
			return nil, err
		}
		out := make(map[provision.ConnVersion]provision.ContractVersion, len(found))
		for k, v := range found {
			out[provision.ConnVersion(k)] = provision.ContractVersion{Contract: v.Contract, Hash: v.Hash}
		}
		return out, nil
	}
}

// teamShares reads the queue shares of a team's other counted connections
// (store.DB.TeamQueueVersions) for the team's ClusterQueue.
func teamShares(db *store.DB) provision.TeamShares {
	return func(ctx context.Context, team, cluster string, except int64) ([]provision.QueueShare, error) {
		vs, err := db.TeamQueueVersions(ctx, team, cluster, except)
		out := make([]provision.QueueShare, len(vs))
		for i, v := range vs {
			out[i] = provision.QueueShare{ConnectionID: v.ConnectionID, Scheduling: v.Contract.Scheduling}
		}
		return out, err
	}
}

// connectionFacts reads what a Slurm hold or amendment job needs of its
// connection as it starts (provision.ConnectionFacts).
func connectionFacts(db *store.DB) func(ctx context.Context, id int64) (provision.ConnectionFacts, error) {
	return func(ctx context.Context, id int64) (provision.ConnectionFacts, error) {
		c, err := db.Connection(ctx, id)
		return provision.ConnectionFacts{Hold: c.Hold, ApprovedVersion: c.ApprovedVersion, CurrentVersion: c.CurrentVersion, Amendment: c.Amendment}, err
	}
}

// newWorker builds the provisioning worker: real server-side apply when a
// cluster is configured (a is non-nil), dry run otherwise.
func newWorker(db *store.DB, a *provision.Applier, settings provision.ClusterSettings, logger *slog.Logger) *provision.Worker {
	w := &provision.Worker{
		Store: db,
		// Each plan's admission parameters carry the connection's
		// exceptions in effect (provision/exception.go).
		Plans:    provision.PlansWithExceptions(provision.PlansFrom(planLookup(db), settings), db.ExceptionsInEffect, settings),
		PlansAll: provision.PlanBatchWithExceptions(provision.PlanBatchFrom(planBatchLookup(db), settings), db.ExceptionsInEffect, settings),
		// The team's ClusterQueue sums the team's connections as the store
		// has them when the job runs (provision's teamqueue.go).
		TeamQueue:  provision.TeamQueuesFrom(teamShares(db), settings),
		Connection: connectionFacts(db),
		DryRun:     a == nil,
		Owner:      provision.DefaultOwner(),
		Logger:     logger.With("component", "provisioner"),
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
		Plans: provision.PlansWithTeamQueue(provision.PlansWithExceptions(provision.PlansFrom(planLookup(db), settings), db.ExceptionsInEffect, settings),
			provision.TeamQueuesFrom(teamShares(db), settings)),
		CheckAll:     provision.DriftAllOf(a, cloud),
		StopPolicies: db.HoldStopPolicies,
		Save:         db.SaveDrift,
		Interval:     5 * time.Minute,
		Logger:       logger.With("component", "drift"),
	}
}

// liveOrNil keeps a nil *Applier from becoming a non-nil interface.
func liveOrNil(a *provision.Applier) interface {
	Drift(context.Context, provision.Plan) ([]workflow.DriftItem, error)
	CheckNamespace(context.Context, provision.Plan) (provision.NamespaceCheck, error)
} {
	if a == nil {
		return nil
	}
	return a
}

// workloadsOrNil keeps a nil *ClusterReader (no cluster) from becoming a
// non-nil interface: the member's page then says it needs a cluster.
func workloadsOrNil(r *provision.ClusterReader) web.WorkloadReader {
	if r == nil {
		return nil
	}
	return r
}

// newElector is the leader election of --leader-election: a Kubernetes
// Lease in the cluster --kubeconfig reaches, or the database: a session
// advisory lock on PostgreSQL, a flock on a file beside the database on
// SQLite (one host).
func newElector(cfg Config, kube *rest.Config, db *store.DB, logger *slog.Logger) (leader.Elector, error) {
	id := cfg.LeaderID
	if id == "" {
		id = leader.DefaultIdentity()
	}
	mode := cfg.LeaderElection
	if mode == "auto" {
		mode = "database"
		if kube != nil {
			mode = "kubernetes"
		}
	}
	log := logger.With("component", "leader")
	if mode == "kubernetes" {
		ns := cfg.LeaderElectionNamespace
		if ns == "" {
			ns = leader.InClusterNamespace()
		}
		if ns == "" {
			ns = "default"
		}
		log.Info("leader election on a Kubernetes Lease", "lease", ns+"/"+leader.LeaseName, "identity", id)
		return leader.NewKube(kube, ns, "", id, leader.Default, log)
	}
	e, err := leader.NewAdvisory(db, id, leader.Default, log)
	if err != nil {
		return nil, err
	}
	log.Info("leader election on the database", "lock", e.Status().Lock(), "key", fmt.Sprintf("%#x", leader.AdvisoryLockKey), "identity", id)
	return e, nil
}
