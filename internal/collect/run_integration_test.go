package collect

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
)

// Run holds the cluster's heartbeat (a second instance is refused while it
// is fresh), prunes records past the retention when it starts, and flushes
// once more when stopped, moving the heartbeat to that instant.
func TestCollectorRunIntegration(t *testing.T) {
	kube, kq := testbedClients(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	db := migratedDB(t)
	t0 := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	old := usage.Hour{Team: "red", Namespace: "ns", InstanceType: "p5", Start: t0.Add(-401 * 24 * time.Hour), GuaranteedAccelSeconds: 1,
		WaitP50Seconds: -1, WaitP90Seconds: -1, WaitP99Seconds: -1}
	kept := old
	kept.Start = t0.Add(-399 * 24 * time.Hour)
	if err := db.PutUsageHours(ctx, []usage.Hour{old, kept}); err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: t0}
	cluster := fmt.Sprintf("run-%d", time.Now().UnixNano()%1e6)
	c := &Collector{Kube: kube, Kueue: kq, Store: db,
		Cluster: cluster, Owner: "one", Now: clk.now, Interval: time.Hour, Retention: 400 * 24 * time.Hour,
		Guarantees: accelOnly(func(context.Context) (usage.GuaranteeHistory, error) { return usage.GuaranteeHistory{}, nil })}
	runCtx, stopRun := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	waitFor(t, c, "the collector started", func() bool { return c.synced })

	if _, err := db.ClaimCollector(ctx, cluster, "two", t0.Add(time.Minute), t0.Add(-time.Minute)); !errors.Is(err, store.ErrCollectorLost) {
		t.Errorf("a second instance while the first runs: %v", err)
	}
	got, _ := db.UsageHours(ctx, store.UsageFilter{From: old.Start, To: t0})
	if len(got) != 1 || !got[0].Start.Equal(kept.Start) {
		t.Errorf("after the start's pruning: %+v", got)
	}

	clk.set(t0.Add(25 * time.Minute))
	stopRun()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	// Stopped, its last flush moved the heartbeat to 10:25: the next
	// instance learns it and may take over once it is stale.
	last, err := db.ClaimCollector(ctx, cluster, "two", t0.Add(2*time.Hour), t0.Add(time.Hour))
	if err != nil || !last.Equal(t0.Add(25*time.Minute)) {
		t.Errorf("takeover = %v, %v; want the final flush's 10:25", last, err)
	}
}
