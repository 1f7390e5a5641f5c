package main

import (
	"log/slog"
	"testing"

	"github.com/hyperpod-governance/portal/internal/collect"
	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/slurm"
)

// TestSlurmReaderKeepsTheInventory: the Slurm usage reader keeps the
// observed inventory of the settings' cluster only when it can map nodes
// to instance types (cluster_name and slurm.partition_instance_types),
// and not when the EKS collector keeps the same cluster's.
func TestSlurmReaderKeepsTheInventory(t *testing.T) {
	var s provision.ClusterSettings
	s.ClusterName = "hp-slurm"
	logger := slog.New(slog.DiscardHandler)
	if r := newSlurmUsageReader(slurm.Local{}, nil, s, Config{}, logger); r.InventoryCluster != "" {
		t.Errorf("without partition types: InventoryCluster %q", r.InventoryCluster)
	}
	s.Slurm.PartitionInstanceTypes = map[string]string{"gpu": "ml.p5.48xlarge"}
	r := newSlurmUsageReader(slurm.Local{}, nil, s, Config{}, logger)
	if r.InventoryCluster != "hp-slurm" {
		t.Fatalf("InventoryCluster = %q; want the settings' cluster", r.InventoryCluster)
	}
	p := &parts{slurmUsage: r}
	p.oneInventorySource()
	if r.InventoryCluster != "hp-slurm" {
		t.Error("without an EKS collector the Slurm reader lost the inventory")
	}
	p.collector = &collect.Collector{InventoryCluster: "other"}
	p.oneInventorySource()
	if r.InventoryCluster != "hp-slurm" {
		t.Error("an EKS collector of another cluster took the Slurm reader's inventory")
	}
	p.collector.InventoryCluster = "hp-slurm"
	p.oneInventorySource()
	if r.InventoryCluster != "" {
		t.Error("both the EKS collector and the Slurm reader keep hp-slurm's inventory")
	}
}
