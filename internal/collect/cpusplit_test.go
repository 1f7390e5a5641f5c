package collect

import (
	"context"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
)

// Issue 31 item 9: the collector splits CPU by the team's CPU guarantee in
// force, as it splits accelerators, and records the borrowed part. team01's
// CPU guarantee is 6 vCPUs (6000 m); pod A (4 CPUs) runs from 10:00, pod B
// (4 CPUs) from 10:10. By hand, at the 10:30 flush: A is within for its
// 1800 s; B gets the 2000 m A leaves and borrows 2000 m for 1200 s.
func TestCollectorSplitsCPU(t *testing.T) {
	ctx := context.Background()
	db := migratedDB(t)
	t0 := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	clk := &clock{t: t0}
	c := benchCollector(t0)
	c.Now, c.Store, c.Owner = clk.now, db, "one"
	c.Guarantees = func(context.Context) (Guaranteed, error) {
		return Guaranteed{
			Accelerators: usage.Guarantees{"team01": {"ml.p5.48xlarge": 8}}.History(),
			CPU:          usage.Guarantees{"team01": {"ml.p5.48xlarge": 6000}}.History(),
		}, nil
	}
	if _, err := db.ClaimCollector(ctx, "bench", "one", t0, t0); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		i     int
		start time.Time
	}{{1, t0}, {51, t0.Add(10 * time.Minute)}} { // both team01, 4 CPUs
		obj, _ := strip(fatPod(p.i, p.start))
		c.onPod(obj)
	}
	clk.set(t0.Add(30 * time.Minute))
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := db.UsageHours(ctx, store.UsageFilter{Team: "team01", From: t0, To: t0.Add(time.Hour)})
	if err != nil || len(got) != 1 {
		t.Fatalf("hours = %+v, %v", got, err)
	}
	if h := got[0]; h.CPUMilliSeconds != 4000*1800+4000*1200 || h.BorrowedCPUMilliSeconds != 2000*1200 || h.GuaranteedAccelSeconds != 1800+1200 {
		t.Errorf("hour = %+v; want CPU %d with %d borrowed", h, 4000*1800+4000*1200, 2000*1200)
	}
}
