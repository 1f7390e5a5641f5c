package collect

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
)

// invCollector is a collector on a real SQLite store whose informers are
// played by the test (onNode), at the clock's time.
func invCollector(t *testing.T, db *store.DB, clk *clock) *Collector {
	t.Helper()
	c := &Collector{Store: db, Cluster: "inv", Owner: "one", Now: clk.now, InventoryCluster: "shared-hp",
		InventorySettle: 30 * time.Second,
		Guarantees:      accelOnly(func(context.Context) (usage.GuaranteeHistory, error) { return usage.GuaranteeHistory{}, nil })}
	c.resetFollowed()
	c.last, c.dirtyFrom, c.synced = clk.now(), clk.now(), true
	if _, err := db.ClaimCollector(t.Context(), "inv", "one", clk.now(), clk.now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := c.loadInventory(t.Context(), clk.now()); err != nil {
		t.Fatal(err)
	}
	return c
}

func invNode(c *Collector, name, itype, health string, cordoned bool) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		corev1.LabelInstanceTypeStable: itype, LabelNodeHealth: health}}}
	n.Spec.Unschedulable = cordoned
	n.Status.Allocatable = corev1.ResourceList{ResourceGPU: resource.MustParse("8")}
	obj, _ := strip(n)
	c.onNode(obj)
}

// observedP5 is the stored observed row of ml.p5.48xlarge and how many
// inventory writes the audit trail shows.
func observedP5(t *testing.T, db *store.DB) (store.ObservedRow, int) {
	t.Helper()
	rows, err := db.Observed(t.Context(), "shared-hp")
	if err != nil {
		t.Fatal(err)
	}
	evs, err := db.AuditEvents(t.Context(), store.AuditFilter{Action: "inventory.refresh"}, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.InstanceType != "ml.p5.48xlarge" {
			t.Errorf("observed %s: only HyperPod (ml.*) types count", r.InstanceType)
		}
	}
	if len(rows) == 0 {
		return store.ObservedRow{Capacity: -1}, len(evs)
	}
	return rows[0], len(evs)
}

// The collector writes the inventory from its nodes once their counts have
// held for the settle time (a burst of node changes is one write), at the
// latest ten settles after the first change, and never rewrites what is
// stored (a restart writes nothing). Each write, and only a write, wakes
// the review scheduler.
func TestInventoryDebounced(t *testing.T) {
	ctx := t.Context()
	db := migratedDB(t)
	t0 := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	clk := &clock{t: t0}
	c := invCollector(t, db, clk)
	// Each write wakes the review scheduler (InventoryChanged), and
	// nothing else does.
	wakes := 0
	c.InventoryChanged = func() { wakes++ }
	flushAt := func(d time.Duration) (store.ObservedRow, int) {
		t.Helper()
		clk.set(t0.Add(d))
		if err := c.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		r, n := observedP5(t, db)
		if wakes != n {
			t.Fatalf("at %s: %d inventory writes, %d wakes of the review scheduler", d, n, wakes)
		}
		return r, n
	}
	for _, n := range []string{"p5-0", "p5-1", "p5-2"} {
		invNode(c, n, "ml.p5.48xlarge", provision.HealthSchedulable, false)
	}
	invNode(c, "system-0", "m5.xlarge", provision.HealthSchedulable, false) // the EKS node group's
	if r, _ := flushAt(10 * time.Second); r.Capacity != -1 {
		t.Fatalf("written before the counts settled: %+v", r)
	}
	if r, n := flushAt(40 * time.Second); r.Capacity != 3 || r.Nodes != 3 || r.NodesSchedulable != 3 || r.Basis != provision.BasisNodes || n != 1 {
		t.Fatalf("settled: %+v, %d writes; want 3 of 3 p5 nodes, basis nodes, one write", r, n)
	}

	// A burst: one node to be replaced, another cordoned 10 s later.
	clk.set(t0.Add(50 * time.Second))
	invNode(c, "p5-2", "ml.p5.48xlarge", provision.HealthUnschedulablePendingReplacement, false)
	clk.set(t0.Add(60 * time.Second))
	invNode(c, "p5-1", "ml.p5.48xlarge", provision.HealthSchedulable, true)
	if r, _ := flushAt(70 * time.Second); r.Capacity != 3 {
		t.Fatalf("written in the middle of the burst: %+v", r)
	}
	if r, n := flushAt(95 * time.Second); r.Capacity != 1 || r.Nodes != 3 || r.NodesSchedulable != 1 || n != 2 {
		t.Fatalf("after the burst: %+v, %d writes; want capacity 1 of 3 nodes, one more write", r, n)
	}

	// Two nodes that flap every 20 s (both schedulable, then both
	// cordoned) never settle, yet show ten settles (300 s) after the
	// first change, at 120 s: at the flush of 421 s, not before.
	for i := 1; ; i++ {
		at := 100*time.Second + time.Duration(i)*20*time.Second
		clk.set(t0.Add(at))
		for _, name := range []string{"p5-0", "p5-1"} {
			invNode(c, name, "ml.p5.48xlarge", provision.HealthSchedulable, i%2 == 0)
		}
		r, n := flushAt(at + time.Second)
		if i < 16 && n != 2 {
			t.Fatalf("written at %s, before the flapping was 300 s old: %+v", at+time.Second, r)
		}
		if i == 16 {
			if n != 3 || r.Capacity != 0 {
				t.Fatalf("a flapping node never showed: %+v, %d writes; want capacity 0, a third write", r, n)
			}
			break
		}
	}

	// A restart (a new collector on the same store, same nodes) writes
	// nothing.
	c2 := invCollector(t, db, clk)
	c2.InventoryChanged = c.InventoryChanged
	for name, st := range c.nodes {
		invNode(c2, name, st.span.InstanceType, map[bool]string{true: provision.HealthSchedulable, false: provision.HealthUnschedulable}[st.span.Schedulable], false)
	}
	c = c2
	if _, n := flushAt(20 * time.Minute); n != 3 {
		t.Errorf("a restart wrote the same inventory again: %d writes", n)
	}
}
