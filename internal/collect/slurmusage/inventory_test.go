package slurmusage

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/slurm"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/support/testenv"
)

// fakeSinfo answers sinfo with out, and records each call.
type fakeSinfo struct {
	out   string
	calls int
}

func (f *fakeSinfo) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	if name != "sinfo" || !slices.Contains(args, "--Node") {
		return nil, fmt.Errorf("unexpected %s %v", name, args)
	}
	f.calls++
	return []byte(f.out), nil
}

// TestRefreshInventory: the observed rows of a Slurm cluster are its
// partitions' nodes per instance type, the usable ones as the capacity;
// a drained node lowers the capacity approvals count (store.Inventory)
// and wakes the review scheduler once; an unchanged read writes nothing;
// the resumed node restores it. The oracle is the node list counted by
// hand: 3 p5 nodes (one drained), 1 g5 node, a CPU partition not mapped.
func TestRefreshInventory(t *testing.T) {
	ctx := t.Context()
	db := migratedDB(t)
	sinfo := &fakeSinfo{out: "p5-1|gpu|gpu:h100:8(S:0-1)|mixed\np5-2|gpu|gpu:h100:8(S:0-1)|idle\np5-3|gpu|gpu:h100:8(S:0-1)|idle\n" +
		"g5-1|g5|gpu:1|allocated\ncpu-1|cpu|(null)|idle\n"}
	woken := 0
	r := &Reader{Runner: sinfo, Store: db, Owner: "test", InventoryCluster: "hp-slurm",
		InstanceTypes:    map[string]string{"gpu": "ml.p5.48xlarge", "g5": "ml.g5.8xlarge"},
		InventoryChanged: func() { woken++ },
		Now:              func() time.Time { return time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC) }}
	inventory := func() map[string]int {
		t.Helper()
		inv, err := db.Inventory(ctx, "hp-slurm")
		if err != nil {
			t.Fatal(err)
		}
		return inv
	}
	refresh := func(wantWrite bool) {
		t.Helper()
		wrote, err := r.RefreshInventory(ctx)
		if err != nil || wrote != wantWrite {
			t.Fatalf("RefreshInventory = %v, %v; want %v", wrote, err, wantWrite)
		}
	}
	refresh(true)
	if got, want := inventory(), map[string]int{"ml.p5.48xlarge": 3, "ml.g5.8xlarge": 1}; !reflect.DeepEqual(got, want) {
		t.Fatalf("inventory = %v; want %v", got, want)
	}
	rows, _ := db.Observed(ctx, "hp-slurm")
	if len(rows) != 2 || rows[1].Basis != slurm.BasisNodes || rows[1].Nodes != 3 || rows[1].NodesSchedulable != 3 || rows[1].GroupCurrent != -1 {
		t.Errorf("observed rows = %+v", rows)
	}
	refresh(false)
	sinfo.out = strings.Replace(sinfo.out, "p5-2|gpu|gpu:h100:8(S:0-1)|idle", "p5-2|gpu|gpu:h100:8(S:0-1)|drained", 1)
	refresh(true)
	if got := inventory()["ml.p5.48xlarge"]; got != 2 {
		t.Errorf("with p5-2 drained, capacity = %d; want 2", got)
	}
	rows, _ = db.Observed(ctx, "hp-slurm")
	if rows[1].Nodes != 3 || rows[1].NodesSchedulable != 2 {
		t.Errorf("drained: observed %+v; want 3 nodes, 2 schedulable", rows[1])
	}
	refresh(false)
	sinfo.out = strings.Replace(sinfo.out, "|drained", "|idle", 1)
	refresh(true)
	if got := inventory()["ml.p5.48xlarge"]; got != 3 || woken != 3 {
		t.Errorf("resumed: capacity %d, woken %d; want 3, 3", got, woken)
	}
	// Without a cluster to keep, nothing is read.
	r.InventoryCluster = ""
	calls := sinfo.calls
	refresh(false)
	if sinfo.calls != calls {
		t.Error("RefreshInventory read sinfo without an InventoryCluster")
	}
}

// TestSlurmInventoryOnTestBed: the test bed's Slurm node, drained with
// `scontrol update nodename=... state=drain`, leaves the capacity of its
// partition's instance type; resumed, it is back.
func TestSlurmInventoryOnTestBed(t *testing.T) {
	conf := testenv.Require(t, "PORTAL_TEST_SLURM_CONF")
	node := testenv.Require(t, "PORTAL_TEST_SLURM_NODE")
	partition := testenv.Require(t, "PORTAL_TEST_SLURM_PARTITION")
	ctx := t.Context()
	run := slurm.Local{Conf: conf}
	db := migratedDB(t)
	r := &Reader{Runner: run, Store: db, Owner: "test", InventoryCluster: "test-bed",
		InstanceTypes: map[string]string{partition: "ml.p5.48xlarge"}}
	scontrol := func(state string, args ...string) {
		t.Helper()
		if _, err := run.Run(ctx, "scontrol", append([]string{"update", "nodename=" + node, "state=" + state}, args...)...); err != nil {
			t.Fatal(err)
		}
	}
	capacity := func() (int, store.ObservedRow) {
		t.Helper()
		if _, err := r.RefreshInventory(ctx); err != nil {
			t.Fatal(err)
		}
		rows, err := db.Observed(ctx, "test-bed")
		if err != nil || len(rows) != 1 {
			t.Fatalf("observed = %+v, %v", rows, err)
		}
		inv, _ := db.Inventory(ctx, "test-bed")
		return inv["ml.p5.48xlarge"], rows[0]
	}
	// until waits for the node's state to give want.
	until := func(want int) store.ObservedRow {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
			got, row := capacity()
			if got == want {
				return row
			}
			if time.Now().After(deadline) {
				out, _ := run.Run(ctx, "sinfo", "--Node", "--noheader", "--format=%N|%R|%G|%T")
				t.Fatalf("capacity = %d (%+v); want %d; sinfo: %s", got, row, want, out)
			}
		}
	}
	if row := until(1); row.Nodes != 1 || row.Basis != slurm.BasisNodes {
		t.Fatalf("before: %+v", row)
	}
	drained := false
	t.Cleanup(func() { // the node back for the other tests, whatever failed
		if drained {
			if _, err := run.Run(context.Background(), "scontrol", "update", "nodename="+node, "state=resume"); err != nil {
				fmt.Fprintln(os.Stderr, "resume:", err)
			}
		}
	})
	scontrol("drain", "reason=portal inventory test")
	drained = true
	if row := until(0); row.Nodes != 1 || row.NodesSchedulable != 0 {
		t.Errorf("drained: %+v; want the node counted, not schedulable", row)
	}
	scontrol("resume")
	drained = false
	until(1)
}
