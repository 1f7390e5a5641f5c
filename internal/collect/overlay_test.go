package collect

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
	"k8s.io/apimachinery/pkg/types"
)

// The hours a flush recomputes with its records laid over the store's
// (overlay) are the hours read back after writing them, whatever part of
// the flush the store's reading already saw: none of it, half of it
// (written before the reading), or all of it written the moment the
// reading was fixed (began, as the flush's put starts then). The records
// are random (seeded): pods, Workloads and node spans stored before, a
// flush's records replacing some of them (moving a pod to another team,
// or out of the hours recomputed) and adding others, teams only the store
// or only the flush has records of, and team names whose byte order
// differs from their order by letters alone.
func TestOverlayRecomputesAsAfterTheWrite(t *testing.T) {
	ctx := t.Context()
	lo := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	now := lo.Add(90 * time.Minute)
	g := usage.GuaranteeHistory{}
	for _, team := range overlayTeams {
		g.Add(team, "ml.p5.48xlarge", time.Time{}, 4)
	}
	for seed := range uint64(6) {
		r := rand.New(rand.NewPCG(seed, 33))
		stored, flush := overlayRecords(r, lo)
		w := flush
		w.Allocs = usage.LastOfEach(flush.Allocs, func(r *podRec) types.UID { return r.pod.UID })

		// What the flush recomputed before: everything written, then read.
		after := migratedDB(t)
		putChanges(t, after, stored)
		putChanges(t, after, w)
		nodes, err := after.NodeSpansIn(ctx, "hp", lo, now.Add(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		want := usage.NewIntegrator("hp", lo, now, nodes, g, usage.GuaranteeHistory{})
		if err := after.EachTeamUsageIn(ctx, "hp", lo, now.Add(time.Second), func(team string, r store.UsageRecords) error {
			return want.Team(team, r.Allocs, r.Workloads)
		}); err != nil {
			t.Fatal(err)
		}
		if len(want.Hours()) == 0 || len(want.ClusterHours()) == 0 {
			t.Fatalf("seed %d: no hours to compare", seed)
		}

		for _, seen := range []string{"none", "half", "all at began"} {
			db := migratedDB(t)
			putChanges(t, db, stored)
			if seen == "half" {
				half := w
				half.Allocs, half.Workloads, half.Nodes = w.Allocs[:len(w.Allocs)/2], w.Workloads[:len(w.Workloads)/2], w.Nodes[:len(w.Nodes)/2]
				putChanges(t, db, half)
			}
			began := func() {}
			if seen == "all at began" {
				began = func() { putChanges(t, db, w) }
			}
			c := &Collector{Store: db, Cluster: "hp"}
			got, err := c.recompute(ctx, lo, now, g, usage.GuaranteeHistory{}, w, began)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Hours(), want.Hours()) {
				t.Errorf("seed %d, the flush's records seen by the reading: %s: hours\n%+v\nwant (read back after the write)\n%+v", seed, seen, got.Hours(), want.Hours())
			}
			if !reflect.DeepEqual(got.ClusterHours(), want.ClusterHours()) {
				t.Errorf("seed %d, seen: %s: cluster hours\n%+v\nwant\n%+v", seed, seen, got.ClusterHours(), want.ClusterHours())
			}
		}
	}
}

// overlayTeams are the teams of overlayRecords: "a-c" sorts before "ab"
// by bytes.
var overlayTeams = []string{"a-c", "ab", "blue", "red", "storeonly", "flushonly"}

// overlayRecords are a store's records and a flush's (keys p*, w*, nodes
// n*) around [lo, lo+90m].
func overlayRecords(r *rand.Rand, lo time.Time) (stored, flush changes) {
	at := func() time.Time { // from an hour before lo to two and a half after, with nanoseconds
		return lo.Add(time.Duration(r.IntN(12_600)-3600)*time.Second + time.Duration(r.IntN(1_000_000_000)))
	}
	span := func() (time.Time, time.Time) {
		s := at()
		if r.IntN(3) == 0 {
			return s, time.Time{} // still open
		}
		return s, s.Add(time.Duration(1+r.IntN(5400)) * time.Second)
	}
	team := func(only string) string {
		for {
			t := overlayTeams[r.IntN(len(overlayTeams))]
			if t == only || (t != "storeonly" && t != "flushonly") {
				return t
			}
		}
	}
	alloc := func(key, only string) usage.Alloc {
		s, e := span()
		tm := team(only)
		return usage.Alloc{Key: key, Team: tm, Namespace: "ns-" + tm, InstanceType: "ml.p5.48xlarge", Accelerators: int64(1 + r.IntN(8)),
			CPUMilli: 1000, MemoryMiB: 1024, Start: s, End: e, Pod: key, Status: "Running"}
	}
	workload := func(key, only string) usage.Workload {
		c, f := span()
		tm := team(only)
		w := usage.Workload{Key: key, Name: key, Team: tm, Namespace: "ns-" + tm, InstanceType: "ml.p5.48xlarge", Created: c, Finished: f}
		if r.IntN(2) == 0 {
			adm := c.Add(time.Duration(r.IntN(1800)) * time.Second)
			w.Pending = []usage.Span{{From: c, To: adm}}
			w.Admissions = []usage.Admission{{At: adm, WaitSeconds: int64(adm.Sub(c) / time.Second)}}
			if r.IntN(2) == 0 {
				w.Preemptions = []time.Time{adm.Add(time.Duration(r.IntN(600)) * time.Second)}
			}
		}
		return w
	}
	node := func(name string) usage.NodeSpan {
		f, to := span()
		return usage.NodeSpan{Node: name, InstanceType: "ml.p5.48xlarge", Accelerators: 8, Schedulable: r.IntN(4) != 0, From: f, To: to}
	}
	for i := range 60 {
		stored.Allocs = append(stored.Allocs, recOf(alloc(fmt.Sprintf("p%03d", i), "storeonly")))
	}
	for i := range 20 {
		stored.Workloads = append(stored.Workloads, workload(fmt.Sprintf("w%03d", i), "storeonly"))
	}
	for i := range 6 {
		stored.Nodes = append(stored.Nodes, node(fmt.Sprintf("n%d", i)))
	}
	// The flush: half of the stored pods, Workloads and node spans again
	// (changed), new ones, and some of each twice (the last wins).
	for i := 0; i < 60; i += 2 {
		flush.Allocs = append(flush.Allocs, recOf(alloc(fmt.Sprintf("p%03d", i), "flushonly")))
	}
	for i := 60; i < 100; i++ {
		flush.Allocs = append(flush.Allocs, recOf(alloc(fmt.Sprintf("p%03d", i), "flushonly")))
	}
	for i := 0; i < 10; i++ {
		flush.Allocs = append(flush.Allocs, recOf(alloc(fmt.Sprintf("p%03d", 3*i), "flushonly")))
	}
	for i := 0; i < 30; i += 2 {
		flush.Workloads = append(flush.Workloads, workload(fmt.Sprintf("w%03d", i), "flushonly"))
	}
	for i := 0; i < 5; i++ {
		flush.Workloads = append(flush.Workloads, workload(fmt.Sprintf("w%03d", 4*i), "flushonly"))
	}
	for i, n := range stored.Nodes {
		if i%2 == 0 {
			n.To, n.Schedulable = time.Time{}, !n.Schedulable // the same span (node and start), changed
			flush.Nodes = append(flush.Nodes, n)
		}
	}
	flush.Nodes = append(flush.Nodes, node("n9"), node("n0"))
	return stored, flush
}

// putChanges writes ch as the flush's put does (its pods' records as
// they are: pass them through usage.LastOfEach first).
func putChanges(t *testing.T, db *store.DB, ch changes) {
	t.Helper()
	allocs := make([]usage.Alloc, 0, len(ch.Allocs))
	for _, r := range ch.Allocs {
		allocs = append(allocs, r.alloc())
	}
	if err := db.PutUsageRecords(context.Background(), "hp", store.UsageRecords{Allocs: allocs, Workloads: ch.Workloads, Nodes: ch.Nodes}); err != nil {
		t.Fatal(err)
	}
}
