package usage_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// The evaluator over stored rows: team red's live connection holds none of
// its 16-GPU guarantee for 14 days while the collector ran, so its
// allocation signal fires once; evaluating again while it still fires
// stores nothing; after an acknowledgement (with a note, audited) it can
// fire again as a new event.
func TestSignalsFireOnceUntilAcknowledged(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	now := time.Date(2026, 11, 30, 12, 30, 0, 0, time.UTC)
	u, _ := db.RecordLogin(ctx, "iss", "owner", "owner.red@example.test", "", nil, now)
	conn, err := db.CreateConnection(ctx, workflow.ExampleContract(), workflow.Actor{ID: u.ID, Email: u.Email}, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.ExecForTest(ctx, `UPDATE connections SET state = 'active', approved_version = 1 WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	// The collector ran every hour of the last 14 days; nobody used the
	// cluster (its 100 GPUs idle: the capacity signal fires too).
	var ch []usage.ClusterHour
	for i := 1; i <= 14*24; i++ {
		ch = append(ch, usage.ClusterHour{Cluster: "shared-hp", InstanceType: "ml.p5.48xlarge", Start: usage.HourStart(now).Add(-time.Duration(i) * time.Hour), CapacityAccelSeconds: 100 * 3600})
	}
	if err := db.PutClusterHours(ctx, ch); err != nil {
		t.Fatal(err)
	}
	sig := usage.Signals{Store: db, Accelerators: map[string]int{"ml.p5.48xlarge": 8}, ClusterOwner: "platform admins"}
	n, err := sig.Evaluate(ctx, now)
	if err != nil || n != 2 {
		t.Fatalf("first evaluation stored %d, %v; want 2 (red's idle guarantee, the idle cluster)", n, err)
	}
	if n, err := sig.Evaluate(ctx, now.Add(time.Hour)); err != nil || n != 0 {
		t.Fatalf("second evaluation stored %d, %v; want 0 (still open)", n, err)
	}
	red, err := db.SignalEvents(ctx, store.SignalFilter{Teams: []string{"red"}})
	if err != nil || len(red) != 1 || red[0].Signal != usage.SignalAllocation || !red[0].Open() || red[0].Owner != "member.red@example.test" {
		t.Fatalf("red's events = %+v, %v", red, err)
	}
	if all, _ := db.SignalEvents(ctx, store.SignalFilter{}); len(all) != 2 {
		t.Errorf("all events = %d, want 2", len(all))
	}
	if blue, _ := db.SignalEvents(ctx, store.SignalFilter{Teams: []string{"blue"}}); len(blue) != 0 {
		t.Errorf("blue sees %+v", blue)
	}
	by := workflow.Actor{ID: u.ID, Email: u.Email}
	if err := db.AckSignal(ctx, red[0].ID, by, "   ", now); err == nil {
		t.Error("an acknowledgement without a note was accepted")
	}
	if err := db.AckSignal(ctx, red[0].ID, by, "Training starts next week.", now); err != nil {
		t.Fatal(err)
	}
	if err := db.AckSignal(ctx, red[0].ID, by, "again", now); !errors.Is(err, store.ErrAcknowledged) {
		t.Errorf("second acknowledgement: %v", err)
	}
	if err := db.AckSignal(ctx, 999, by, "x", now); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown event: %v", err)
	}
	e, _ := db.SignalEvent(ctx, red[0].ID)
	if e.Open() || e.AckBy != "owner.red@example.test" || e.AckNote != "Training starts next week." {
		t.Errorf("acknowledged event = %+v", e)
	}
	if evs, _ := db.AuditEvents(ctx, store.AuditFilter{Action: "signal.acknowledge"}, 0, 10); len(evs) != 1 || evs[0].ObjectID != e.ID || evs[0].Team != "red" {
		t.Errorf("audit = %+v", evs)
	}
	if evs, _ := db.AuditEvents(ctx, store.AuditFilter{Action: "signal.fired"}, 0, 10); len(evs) != 2 {
		t.Errorf("fired audit events = %d, want 2", len(evs))
	}
	// Still firing after the acknowledgement: a new open event.
	if n, err := sig.Evaluate(ctx, now.Add(2*time.Hour)); err != nil || n != 1 {
		t.Errorf("after the acknowledgement stored %d, %v; want 1", n, err)
	}
	_ = conn
}

// utilFake answers every namespace with pct every hour, or fails with err.
type utilFake struct {
	pct   float64
	err   error
	asked *[]string
}

func (f utilFake) NamespaceUtilization(_ context.Context, ns string, from, to time.Time, step time.Duration) ([]usage.Point, error) {
	*f.asked = append(*f.asked, ns+" "+from.Format(time.RFC3339)+" "+to.Format(time.RFC3339))
	if f.err != nil {
		return nil, f.err
	}
	var out []usage.Point
	for at := from; at.Before(to); at = at.Add(step) {
		out = append(out, usage.Point{At: at, Percent: f.pct})
	}
	return out, nil
}

func (f utilFake) NamespacesUtilization(context.Context, time.Time, time.Time, time.Duration) (map[string][]usage.Point, error) {
	return nil, errors.New("not used")
}

// The evaluator reads utilization for the namespaces in which the team held
// accelerators in the last 7 whole days (not one it held nothing in, not
// the current hour), fires red's utilization signal once when they were
// 10% busy, and a failing source is that signal's "no-data", not a failed
// evaluation.
func TestUtilizationSignalOverStoredRows(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	now := time.Date(2026, 11, 30, 12, 30, 0, 0, time.UTC)
	end := usage.HourStart(now)
	u, _ := db.RecordLogin(ctx, "iss", "owner", "owner.red@example.test", "", nil, now)
	if _, err := db.CreateConnection(ctx, workflow.ExampleContract(), workflow.Actor{ID: u.ID, Email: u.Email}, now); err != nil {
		t.Fatal(err)
	}
	if err := db.ExecForTest(ctx, `UPDATE connections SET state = 'active', approved_version = 1 WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	row := func(ns string, at time.Time, sec int64) usage.Hour {
		return usage.Hour{Team: "red", Namespace: ns, InstanceType: "ml.p5.48xlarge", Start: at, GuaranteedAccelSeconds: sec,
			WaitP50Seconds: -1, WaitP90Seconds: -1, WaitP99Seconds: -1, Source: usage.SourceCluster}
	}
	if err := db.PutUsageHours(ctx, []usage.Hour{row("hyperpod-ns-red", end.Add(-time.Hour), 8*3600), row("hyperpod-ns-red-idle", end.Add(-time.Hour), 0),
		row("hyperpod-ns-red-now", end, 8*3600)}); err != nil {
		t.Fatal(err)
	}
	var asked []string
	sig := usage.Signals{Store: db, Accelerators: map[string]int{"ml.p5.48xlarge": 8}, ClusterOwner: "platform admins",
		Utilization: utilFake{err: errors.New("prometheus down"), asked: &asked}}
	st, err := sig.Statuses(ctx, now, []string{"red"})
	if err != nil {
		t.Fatalf("a failing source failed the evaluation: %v", err)
	}
	want := "hyperpod-ns-red " + end.Add(-7*24*time.Hour).Format(time.RFC3339) + " " + end.Format(time.RFC3339)
	if len(asked) != 1 || asked[0] != want {
		t.Errorf("asked %q, want [%q]", asked, want)
	}
	for _, s := range st {
		if s.Kind == usage.SignalUtilization && (s.State != usage.SignalNoData || !strings.Contains(s.Current, "prometheus down")) {
			t.Errorf("failing source: %s (%s)", s.State, s.Current)
		}
	}
	asked = nil
	sig.Utilization = utilFake{pct: 10, asked: &asked}
	if n, err := sig.Evaluate(ctx, now); err != nil || n != 1 {
		t.Fatalf("Evaluate = %d, %v; want 1", n, err)
	}
	if len(asked) != 1 || asked[0] != want {
		t.Errorf("asked %q, want [%q]", asked, want)
	}
	if n, err := sig.Evaluate(ctx, now.Add(time.Hour)); err != nil || n != 0 {
		t.Fatalf("second Evaluate = %d, %v; want 0", n, err)
	}
	if evs, _ := db.SignalEvents(ctx, store.SignalFilter{Teams: []string{"red"}}); len(evs) != 1 || evs[0].Signal != usage.SignalUtilization {
		t.Errorf("events = %+v", evs)
	}
}

// openDB is a migrated database (real SQLite): the evaluation loop reads
// and records through internal/store, as the portal does.
func openDB(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return db
}
