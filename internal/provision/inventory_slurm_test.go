package provision_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hyperpod-governance/portal/internal/provision"
)

// sinfoRunner answers sinfo with out.
type sinfoRunner struct{ out string }

func (r sinfoRunner) Run(_ context.Context, name string, _ ...string) ([]byte, error) {
	if name != "sinfo" {
		return nil, errors.New("unexpected " + name)
	}
	return []byte(r.out), nil
}

// TestReadInventoryFromSlurmNodes: without a Kubernetes cluster, the
// admin's refresh reads a Slurm cluster's nodes: per instance type of the
// mapped partitions, the nodes, and as the capacity those that take new
// work (the drained and the not-responding ones do not). Without the
// partitions' types there is nothing to read.
func TestReadInventoryFromSlurmNodes(t *testing.T) {
	out := "a|gpu|gpu:8|idle\nb|gpu|gpu:8|drained\nc|gpu|gpu:8|allocated\nd|gpu|gpu:8|idle*\ne|cpu|(null)|idle\n"
	c := &provision.ClusterChecker{Sources: provision.ReadinessSources{Slurm: sinfoRunner{out},
		SlurmPartitionTypes: map[string]string{"gpu": "ml.p5.48xlarge"}}}
	if !c.CanRead() {
		t.Fatal("CanRead = false with a Slurm transport and partition types")
	}
	inv, err := c.ReadInventory(t.Context(), "hp-slurm")
	if err != nil {
		t.Fatal(err)
	}
	if inv.Cluster != "hp-slurm" || len(inv.Types) != 1 {
		t.Fatalf("inventory = %+v", inv)
	}
	got := inv.Types[0]
	if got.InstanceType != "ml.p5.48xlarge" || got.Capacity != 2 || got.Nodes != 4 || got.NodesSchedulable != 2 ||
		got.Basis != provision.BasisSlurmNodes || got.GroupCurrent != -1 {
		t.Errorf("type = %+v; want 4 nodes, 2 usable (a, c) as the capacity", got)
	}
	c.Sources.SlurmPartitionTypes = nil
	if c.CanRead() {
		t.Error("CanRead = true without the partitions' instance types")
	}
	if _, err := c.ReadInventory(t.Context(), "hp-slurm"); !errors.Is(err, provision.ErrNothingToRead) {
		t.Errorf("ReadInventory without partition types = %v; want ErrNothingToRead", err)
	}
}
