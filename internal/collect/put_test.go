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

// failingPut is a real store whose PutUsageRecords fails on its failAt-th
// call (counting from 1; 0 never).
type failingPut struct {
	*store.DB
	calls, failAt int
	parts         []int // the pods of each call
}

var errPut = errors.New("the database went away")

func (f *failingPut) PutUsageRecords(ctx context.Context, cluster string, r store.UsageRecords) error {
	f.calls++
	f.parts = append(f.parts, len(r.Allocs))
	if f.calls == f.failAt {
		return errPut
	}
	return f.DB.PutUsageRecords(ctx, cluster, r)
}

// A flush writes the pods' records putPods at a time, each part its own
// transaction. When a part fails, the parts written before it stay
// written, everything of the flush is queued again, the hours are not
// recomputed, and the next flush writes it all: each pod is then
// recorded once, with its last record, and the hours count each once.
func TestFlushWritesPodsInPartsAndRetriesAll(t *testing.T) {
	ctx := t.Context()
	db := migratedDB(t)
	start := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	clock := start.Add(30 * time.Minute)
	fp := &failingPut{DB: db, failAt: 2}
	c := &Collector{Store: fp, Cluster: "hp", Owner: "one", Now: func() time.Time { return clock },
		Guarantees: accelOnly(func(context.Context) (usage.GuaranteeHistory, error) { return usage.GuaranteeHistory{}, nil })}
	c.resetFollowed()
	c.last, c.dirtyFrom, c.synced = start, start, true
	if _, err := db.ClaimCollector(ctx, "hp", "one", start, start.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	pods := 2*putPods + 345
	c.mu.Lock()
	for i := range pods {
		a := recOf(usage.Alloc{Key: fmt.Sprintf("uid-%05d", i), Team: fmt.Sprintf("team%d", i%7), Namespace: "ns", InstanceType: "ml.p5.48xlarge",
			Accelerators: 1, Start: start, Status: "Running"})
		c.pods[a.pod.UID] = a
		c.markAlloc(a, start)
	}
	// Pod 3 changed again before the flush: its last record wins.
	done := c.pods["uid-00003"].alloc()
	done.End, done.Status = start.Add(10*time.Minute), "Succeeded"
	c.pods["uid-00003"] = recOf(done)
	c.markAlloc(c.pods["uid-00003"], start)
	c.mu.Unlock()

	if err := c.Flush(ctx); !errors.Is(err, errPut) {
		t.Fatalf("first flush: %v, want the second part's failure", err)
	}
	if want := []int{putPods, putPods}; fmt.Sprint(fp.parts) != fmt.Sprint(want) {
		t.Errorf("parts written: %v, want %v", fp.parts, want)
	}
	if got, _ := db.UsageRecordsIn(ctx, "hp", start, clock); len(got.Allocs) != putPods {
		t.Errorf("after the failed part the store holds %d pods, want the first part's %d", len(got.Allocs), putPods)
	}
	if hours, err := db.UsageHours(ctx, store.UsageFilter{From: start, To: clock.Add(time.Hour)}); err != nil || len(hours) != 0 {
		t.Errorf("hours after a failed flush: %d (%v), want none recomputed", len(hours), err)
	}
	if n := len(c.dirty.Allocs); n != pods+1 {
		t.Errorf("queued again: %d records, want all %d of the flush", n, pods+1)
	}

	clock = clock.Add(time.Minute)
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := db.UsageRecordsIn(ctx, "hp", start, clock)
	if err != nil || len(got.Allocs) != pods {
		t.Fatalf("after the retry the store holds %d pods (%v), want %d", len(got.Allocs), err, pods)
	}
	for _, a := range got.Allocs {
		if a.Key == "uid-00003" && (a.Status != "Succeeded" || !a.End.Equal(done.End)) {
			t.Errorf("pod 3 = %+v, want its last record", a)
		}
	}
	hours, err := db.UsageHours(ctx, store.UsageFilter{From: start, To: clock.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var accelSeconds int64
	for _, h := range hours {
		accelSeconds += h.GuaranteedAccelSeconds + h.BorrowedAccelSeconds
	}
	// Every pod held 1 accelerator from 10:00 to the flush at 10:31, but
	// pod 3, which ended at 10:10.
	if want := int64(pods-1)*int64(clock.Sub(start)/time.Second) + 600; accelSeconds != want {
		t.Errorf("accelerator-seconds recomputed: %d, want %d (each pod once)", accelSeconds, want)
	}
}
