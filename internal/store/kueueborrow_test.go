package store_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
)

// Kueue's account of borrowing is kept as change points per queue, flavor
// and resource: a read from an instant returns the samples since and, per
// series, the one in force at that instant (the last before it), so a
// figure that has not changed for days is still known; recording a sample
// again replaces it; pruning drops samples older than the retention.
func TestKueueBorrowingSamples(t *testing.T) {
	ctx := t.Context()
	db, _ := openDB(t, true)
	t0 := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	s := func(cluster, cq string, at time.Duration, kueue, portal int64) usage.BorrowSample {
		return usage.BorrowSample{Cluster: cluster, ClusterQueue: cq, Flavor: "ml.p5.48xlarge", Resource: "nvidia.com/gpu",
			Team: "red", At: t0.Add(at), Kueue: kueue, Portal: portal}
	}
	red, blue := "hyperpod-ns-red-clusterqueue", "hyperpod-ns-blue-clusterqueue"
	hp := []usage.BorrowSample{s("hp", red, 0, 0, 0), s("hp", red, time.Minute, 8, 8), s("hp", red, 3*time.Minute, 0, 8), s("hp", blue, 0, 0, 0)}
	if err := db.PutUsageRecords(ctx, "hp", store.UsageRecords{Borrowing: hp}); err != nil {
		t.Fatal(err)
	}
	if err := db.PutUsageRecords(ctx, "other", store.UsageRecords{Borrowing: []usage.BorrowSample{s("other", red, 0, 4, 4)}}); err != nil {
		t.Fatal(err)
	}
	// Recorded again: replaced.
	again := s("hp", red, 3*time.Minute, 0, 16)
	if err := db.PutUsageRecords(ctx, "hp", store.UsageRecords{Borrowing: []usage.BorrowSample{again}}); err != nil {
		t.Fatal(err)
	}
	got, err := db.KueueBorrowing(ctx, "hp", t0.Add(2*time.Minute))
	want := []usage.BorrowSample{hp[3], hp[1], again} // blue's in force since 10:00; red's at 10:01 and 10:03
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("KueueBorrowing(hp, 10:02) = %+v, %v\nwant %+v", got, err, want)
	}
	if all, err := db.KueueBorrowing(ctx, "", t0.Add(time.Hour)); err != nil || len(all) != 3 {
		t.Errorf("every cluster's, from 11:00 = %+v, %v; want each of the 3 series' last", all, err)
	}
	bad := usage.BorrowSample{Cluster: "hp", At: t0}
	if err := db.PutUsageRecords(ctx, "hp", store.UsageRecords{Borrowing: []usage.BorrowSample{bad}}); err == nil {
		t.Error("a sample without its queue was recorded")
	}
	if _, err := db.PruneUsage(ctx, t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.KueueBorrowing(ctx, "hp", t0); !reflect.DeepEqual(got, []usage.BorrowSample{again}) {
		t.Errorf("after pruning before 10:02: %+v", got)
	}
}
