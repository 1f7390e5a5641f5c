package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
)

func TestUsageHoursReplaceNotAdd(t *testing.T) {
	ctx := context.Background()
	db, _ := openDB(t, true)
	h0 := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	row := usage.Hour{Team: "red", Namespace: "hyperpod-ns-red", InstanceType: "ml.p5.48xlarge", Start: h0,
		GuaranteedAccelSeconds: 3600 * 8, BorrowedAccelSeconds: 1800, CPUMilliSeconds: 1000, MemoryMiBSeconds: 2048,
		Running: 2, WaitP50Seconds: 30, WaitP90Seconds: 60, WaitP99Seconds: 90}
	blue := row
	blue.Team, blue.Namespace, blue.Source = "blue", "hyperpod-ns-blue", usage.SourceDemo
	if err := db.PutUsageHours(ctx, []usage.Hour{row, blue}); err != nil {
		t.Fatal(err)
	}
	// The collector writes an hour again when it recomputes it: the row is
	// replaced, never summed.
	row.BorrowedAccelSeconds = 3600
	if err := db.PutUsageHours(ctx, []usage.Hour{row}); err != nil {
		t.Fatal(err)
	}
	got, err := db.UsageHours(ctx, store.UsageFilter{Team: "red", From: h0, To: h0.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	row.Source = usage.SourceCluster
	if len(got) != 1 || got[0] != row {
		t.Fatalf("red's hour = %+v, want exactly %+v", got, row)
	}
	if got[0].AccelSeconds() != 8*3600+3600 {
		t.Errorf("AccelSeconds = %d", got[0].AccelSeconds())
	}
	// [From, To) is half-open, and the team filter scopes.
	if got, _ := db.UsageHours(ctx, store.UsageFilter{Team: "red", From: h0.Add(time.Hour), To: h0.Add(2 * time.Hour)}); len(got) != 0 {
		t.Errorf("next hour returned %+v", got)
	}
	all, _ := db.UsageHours(ctx, store.UsageFilter{From: h0, To: h0.Add(time.Hour)})
	if len(all) != 2 || all[0].Team != "blue" || all[0].Source != usage.SourceDemo {
		t.Errorf("all teams = %+v", all)
	}
	// A row not on the hour is refused, and the batch is not half-written.
	bad := row
	bad.Team, bad.Start = "green", h0.Add(time.Minute)
	ok := row
	ok.Team = "yellow"
	if err := db.PutUsageHours(ctx, []usage.Hour{ok, bad}); err == nil {
		t.Fatal("a row off the hour was accepted")
	}
	if got, _ := db.UsageHours(ctx, store.UsageFilter{Team: "yellow", From: h0, To: h0.Add(time.Hour)}); len(got) != 0 {
		t.Errorf("a refused batch left %+v", got)
	}
}

func TestClusterHoursMissingAndPrune(t *testing.T) {
	ctx := context.Background()
	db, _ := openDB(t, true)
	h0 := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	c := usage.ClusterHour{Cluster: "shared-hp", InstanceType: "ml.p5.48xlarge", Start: h0, CapacityAccelSeconds: 16 * 3600, AllocatedAccelSeconds: 10 * 3600}
	if err := db.PutClusterHours(ctx, []usage.ClusterHour{c, {Cluster: "shared-hp", InstanceType: "ml.p5.48xlarge", Start: h0.Add(48 * time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	got, err := db.ClusterHours(ctx, "shared-hp", h0, h0.Add(time.Hour))
	if err != nil || len(got) != 1 || got[0].IdleAccelSeconds() != 6*3600 {
		t.Fatalf("cluster hours = %+v, %v", got, err)
	}
	if err := db.AddMissing(ctx, usage.Missing{Cluster: "shared-hp", From: h0.Add(30 * time.Minute), To: h0.Add(90 * time.Minute), Reason: "collector down"}); err != nil {
		t.Fatal(err)
	}
	if err := db.AddMissing(ctx, usage.Missing{Cluster: "x", From: h0, To: h0}); err == nil {
		t.Error("an empty missing period was accepted")
	}
	for _, tc := range []struct {
		from, to time.Time
		want     int
	}{
		{h0, h0.Add(30 * time.Minute), 0}, // ends where the gap starts
		{h0, h0.Add(31 * time.Minute), 1},
		{h0.Add(90 * time.Minute), h0.Add(2 * time.Hour), 0}, // starts where it ends
		{h0.Add(89 * time.Minute), h0.Add(2 * time.Hour), 1},
	} {
		if got, err := db.MissingIn(ctx, tc.from, tc.to); err != nil || len(got) != tc.want {
			t.Errorf("MissingIn(%s, %s) = %+v, %v; want %d", tc.from, tc.to, got, err, tc.want)
		}
	}
	n, err := db.PruneUsage(ctx, h0.Add(24*time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("prune = %d, %v; want the old cluster hour and the old gap", n, err)
	}
	if got, _ := db.ClusterHours(ctx, "", h0, h0.Add(72*time.Hour)); len(got) != 1 || !got[0].Start.Equal(h0.Add(48*time.Hour)) {
		t.Errorf("after prune = %+v", got)
	}
}
