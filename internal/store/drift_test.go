package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

func TestSaveDriftAuditsAppearanceAndResolution(t *testing.T) {
	ctx := context.Background()
	db, conn, now := driftFixture(t)
	if _, err := db.Drift(ctx, conn.ID); err != store.ErrNotFound {
		t.Errorf("no check yet: %v", err)
	}
	items := []workflow.DriftItem{{Kind: "RoleBinding", Ref: "hyperpod-ns-red/x", What: "extra", Detail: "grants admin"}}
	steps := []struct {
		items   []workflow.DriftItem
		err     string
		actions []string // audit actions added by this save
	}{
		{nil, "", nil},
		{items, "", []string{"drift.detected"}},
		{items, "", nil}, // still drifted: no new event
		{nil, "cluster unreachable", nil},
		{nil, "", []string{"drift.resolved"}},
	}
	for i, st := range steps {
		before, _ := db.AuditEvents(ctx, store.AuditFilter{ObjectID: conn.ID}, 0, 100)
		if err := db.SaveDrift(ctx, conn.ID, workflow.DriftBasis{Version: conn.ApprovedVersion}, st.items, st.err, now.Add(time.Duration(i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
		after, _ := db.AuditEvents(ctx, store.AuditFilter{ObjectID: conn.ID}, 0, 100)
		var added []string
		for _, e := range after[:len(after)-len(before)] {
			added = append(added, e.Action)
		}
		if len(added) != len(st.actions) || (len(added) > 0 && added[0] != st.actions[0]) {
			t.Errorf("step %d: audit added %v, want %v", i, added, st.actions)
		}
		r, err := db.Drift(ctx, conn.ID)
		wantItems := len(st.items)
		if st.err != "" {
			wantItems = len(steps[i-1].items) // a failed check keeps the last known drift
		}
		if err != nil || len(r.Items) != wantItems || r.Error != st.err {
			t.Errorf("step %d: report %+v, %v", i, r, err)
		}
		ov, _ := db.DriftOverview(ctx)
		if want := len(st.items) > 0 || st.err != ""; (len(ov) == 1) != want {
			t.Errorf("step %d: overview has %d rows", i, len(ov))
		}
	}
	if n, brk, err := db.VerifyAudit(ctx); err != nil || brk != nil || n == 0 {
		t.Errorf("audit chain: %d, %+v, %v", n, brk, err)
	}
}

// A report the connection has moved on from since the pass read it (its
// approved version, or the hold its queues were compared with) is a race
// of the pass with that change, not drift: SaveDrift drops it inside its
// transaction and audits nothing.
func TestSaveDriftDropsAReportOfAnotherBasis(t *testing.T) {
	ctx := context.Background()
	db, conn, now := driftFixture(t)
	item := []workflow.DriftItem{{Kind: "LocalQueue", Ref: "hyperpod-ns-red/q", What: "changed", Fields: []string{"spec.stopPolicy"}}}
	for name, basis := range map[string]workflow.DriftBasis{
		"compared with a hold the connection no longer has": {Version: conn.ApprovedVersion, StopPolicy: workflow.StopHold},
		"compared with another approved version":            {Version: conn.ApprovedVersion + 1},
	} {
		if err := db.SaveDrift(ctx, conn.ID, basis, item, "", now); err != nil {
			t.Fatal(err)
		}
		if r, err := db.Drift(ctx, conn.ID); err != store.ErrNotFound {
			t.Errorf("%s: a report was recorded: %+v, %v", name, r, err)
		}
	}
	if evs, _ := db.AuditEvents(ctx, store.AuditFilter{ObjectID: conn.ID, ActionPrefix: "drift."}, 0, 10); len(evs) != 0 {
		t.Errorf("audit = %+v, want no drift event", evs)
	}
	// Compared with what the connection has: it is drift.
	if err := db.SaveDrift(ctx, conn.ID, workflow.DriftBasis{Version: conn.ApprovedVersion, StopPolicy: workflow.StopNone}, item, "", now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if r, err := db.Drift(ctx, conn.ID); err != nil || len(r.Items) != 1 {
		t.Errorf("drift on the current basis = %+v, %v; want the item", r, err)
	}
}

// driftFixture is a migrated database with one draft connection of team
// red, and the time it was filed.
func driftFixture(t *testing.T) (*store.DB, store.Connection, time.Time) {
	t.Helper()
	ctx := context.Background()
	db, _ := openDB(t, true)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	u, _ := db.RecordLogin(ctx, "iss", "owner", "owner.red@example.test", "", nil, now)
	conn, err := db.CreateConnection(ctx, workflow.ExampleContract(), workflow.Actor{ID: u.ID, Email: u.Email}, now)
	if err != nil {
		t.Fatal(err)
	}
	return db, conn, now
}
