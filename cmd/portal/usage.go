package main

import (
	"fmt"
	"log/slog"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/hyperpod-governance/portal/internal/collect"
	"github.com/hyperpod-governance/portal/internal/collect/slurmusage"
	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/slurm"
	"github.com/hyperpod-governance/portal/internal/store"
)

// usageCluster names the shared cluster in the usage records (the portal
// serves one cluster).
const usageCluster = "shared"

// newUsageCollector follows the cluster's pods, nodes and Kueue objects
// for the usage rows (internal/collect). Like the drift checker it
// runs once in this process; across processes the store's heartbeat keeps
// it to one instance.
func newUsageCollector(kube *rest.Config, db *store.DB, settings provision.ClusterSettings, cfg Config, logger *slog.Logger) (*collect.Collector, error) {
	kc, err := kubernetes.NewForConfig(kube)
	if err != nil {
		return nil, fmt.Errorf("usage collector: %w", err)
	}
	qc, err := kueueclient.NewForConfig(kube)
	if err != nil {
		return nil, fmt.Errorf("usage collector: %w", err)
	}
	s := settings.WithDefaults()
	return &collect.Collector{
		Kube: kc, Kueue: qc, Store: db, Cluster: usageCluster,
		// The collector runs only on the elected leader (internal/leader),
		// so every leader holds its claim under one name: a new leader
		// after a handover must not wait out the dead one's heartbeat.
		Owner: "the elected leader",
		// One read of the guarantee history per flush, in accelerators and
		// in CPU millicores (vCPUs per instance × 1000).
		Guarantees: collect.GuaranteesFrom(db,
			func(itype string) int64 { return int64(s.Accelerators[itype].Accelerators) },
			func(itype string) int64 { return int64(s.Accelerators[itype].CPU) * 1000 }),
		Accelerators:   s.Accelerators,
		ClusterQueueOf: s.ClusterQueueName,
		Interval:       cfg.UsageInterval,
		// With the cluster's name in the settings, the collector keeps its
		// observed inventory from the nodes (no "Refresh" click needed).
		InventoryCluster: s.ClusterName,
		Retention:        cfg.UsageRetention,
		Logger:           logger.With("component", "usage"),
	}, nil
}

// newSlurmUsageReader reads the Slurm teams' jobs from the accounting
// database through the Slurm transport (internal/collect/slurmusage) into
// the same usage rows, split by the same guarantee history in GPUs and
// priced by the same rate card. Like the collector it runs on the elected
// leader, under its own heartbeat.
func newSlurmUsageReader(run slurm.Runner, db *store.DB, settings provision.ClusterSettings, cfg Config, logger *slog.Logger) *slurmusage.Reader {
	s := settings.WithDefaults()
	r := &slurmusage.Reader{
		Runner: run, Store: db,
		// The contracts' cluster_name; empty: every Slurm contract's
		// account (the transport reaches one Slurm cluster).
		Cluster: s.ClusterName,
		Owner:   "the elected leader",
		Guarantees: slurmusage.GuaranteesFrom(db,
			func(itype string) int64 { return int64(s.Accelerators[itype].Accelerators) }),
		InstanceTypes: s.Slurm.PartitionInstanceTypes,
		Interval:      cfg.UsageInterval,
		Logger:        logger.With("component", "slurm-usage"),
	}
	// With the cluster's name and its partitions' instance types, the
	// reader keeps the cluster's observed inventory from the Slurm nodes
	// (sinfo), as the EKS collector keeps it from the Kubernetes nodes.
	if s.ClusterName != "" && len(s.Slurm.PartitionInstanceTypes) > 0 {
		r.InventoryCluster = s.ClusterName
	}
	return r
}
