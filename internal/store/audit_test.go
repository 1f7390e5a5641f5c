package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// auditFixture records a few events of different kinds: connection events
// for two teams, and inventory events by an admin.
func auditFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t, 1)
	red := f.submitted(contract("red", "ns-red", ""))             // create, submit
	blue := f.create(contract("blue", "ns-blue", ""))             // create
	f.transition(red.ID, workflow.EventReject, f.admins[0], "no") // reject
	if err := f.db.SetInventory(t.Context(), "shared-hp", "ml.p5.48xlarge", 8, f.admins[0], f.tick()); err != nil {
		t.Fatal(err)
	}
	f.transition(blue.ID, workflow.EventWithdraw, f.owner, "not needed") // withdraw
	return f
}

func auditCount(t *testing.T, raw *sql.DB) int {
	t.Helper()
	var n int
	if err := raw.QueryRowContext(t.Context(), `SELECT count(*) FROM audit_events`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestVerifyAuditFreshChain(t *testing.T) {
	f := newFixture(t, 0)
	n, brk, err := f.db.VerifyAudit(t.Context())
	if n != 0 || brk != nil || err != nil {
		t.Errorf("VerifyAudit on an empty trail = %d, %+v, %v; want 0, nil, nil", n, brk, err)
	}

	f = auditFixture(t)
	want := auditCount(t, f.raw)
	if want != 6 {
		t.Fatalf("fixture wrote %d events, want 6", want)
	}
	n, brk, err = f.db.VerifyAudit(t.Context())
	if n != want || brk != nil || err != nil {
		t.Errorf("VerifyAudit = %d, %+v, %v; want %d, nil, nil", n, brk, err, want)
	}
	evs, err := f.db.AuditEvents(t.Context(), store.AuditFilter{}, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	// Newest first, each linked to the one before it, the first to genesis.
	for i, e := range evs {
		prev := store.GenesisHash
		if i+1 < len(evs) {
			prev = evs[i+1].Hash
		}
		if e.PrevHash != prev || e.Hash != store.ChainHash(prev, e) {
			t.Errorf("event %d: prev_hash %s hash %s, want %s and its chain hash", e.ID, e.PrevHash, e.Hash, prev)
		}
	}
}

func TestAuditAppendOnly(t *testing.T) {
	f := auditFixture(t)
	for _, stmt := range []string{
		`UPDATE audit_events SET reason = 'yes' WHERE id = 3`,
		`UPDATE audit_events SET hash = prev_hash`,
		`DELETE FROM audit_events WHERE id = 2`,
		`DELETE FROM audit_events`,
	} {
		before := f.snapshot()
		_, err := f.raw.ExecContext(t.Context(), stmt)
		if err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: error = %v, want the trigger's refusal", stmt, err)
		}
		f.assertUnchanged(before, stmt)
	}
	if n, brk, err := f.db.VerifyAudit(t.Context()); n != 6 || brk != nil || err != nil {
		t.Errorf("VerifyAudit = %d, %+v, %v; want 6 intact events", n, brk, err)
	}
}

func TestVerifyAuditFindsTampering(t *testing.T) {
	exec := func(stmts ...string) func(context.Context, *store.DB) error {
		return func(ctx context.Context, db *store.DB) error {
			for _, s := range stmts {
				if _, err := db.RawSQL().ExecContext(ctx, s); err != nil {
					return err
				}
			}
			return nil
		}
	}
	tests := []struct {
		name       string
		tamper     func(context.Context, *store.DB) error
		wantID     int64
		wantN      int
		wantReason string
	}{
		{
			name:       "reason altered",
			tamper:     exec(dropTrigger("audit_no_update", "audit_events"), `UPDATE audit_events SET reason = 'approved after all' WHERE id = 3`),
			wantID:     3,
			wantN:      2,
			wantReason: "altered",
		},
		{
			name:       "actor altered",
			tamper:     exec(dropTrigger("audit_no_update", "audit_events"), `UPDATE audit_events SET actor_id = NULL, actor = 'system' WHERE id = 4`),
			wantID:     4,
			wantN:      3,
			wantReason: "altered",
		},
		{
			name:       "row deleted",
			tamper:     exec(dropTrigger("audit_no_delete", "audit_events"), `DELETE FROM audit_events WHERE id = 2`),
			wantID:     3,
			wantN:      1,
			wantReason: "prev_hash",
		},
		{
			name:       "first row deleted",
			tamper:     exec(dropTrigger("audit_no_delete", "audit_events"), `DELETE FROM audit_events WHERE id = 1`),
			wantID:     2,
			wantN:      0,
			wantReason: "prev_hash",
		},
		{
			// An attacker who knows the scheme rehashes the row they
			// changed; the next row's link still gives them away.
			name: "row altered and rehashed",
			tamper: func(ctx context.Context, db *store.DB) error {
				evs, err := db.AuditEvents(ctx, store.AuditFilter{}, 4, 1)
				if err != nil || len(evs) != 1 {
					return fmt.Errorf("reading event 3: %v %v", evs, err)
				}
				e := evs[0]
				e.Reason = "approved after all"
				if _, err := db.RawSQL().ExecContext(ctx, dropTrigger("audit_no_update", "audit_events")); err != nil {
					return err
				}
				_, err = db.RawSQL().ExecContext(ctx, `UPDATE audit_events SET reason = ?, hash = ? WHERE id = 3`, e.Reason, store.ChainHash(e.PrevHash, e))
				return err
			},
			wantID:     4,
			wantN:      3,
			wantReason: "prev_hash",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := auditFixture(t) // a database of its own
			if err := tt.tamper(t.Context(), f.db); err != nil {
				t.Fatalf("tamper: %v", err)
			}
			n, brk, err := f.db.VerifyAudit(t.Context())
			if err != nil {
				t.Fatalf("VerifyAudit: %v", err)
			}
			if brk == nil {
				t.Fatalf("VerifyAudit found no break after %s (%d verified)", tt.name, n)
			}
			if brk.ID != tt.wantID || n != tt.wantN || !strings.Contains(brk.Reason, tt.wantReason) {
				t.Errorf("VerifyAudit = %d verified, break at %d (%s); want %d verified, break at %d mentioning %q",
					n, brk.ID, brk.Reason, tt.wantN, tt.wantID, tt.wantReason)
			}
		})
	}
}

func TestAuditEvents(t *testing.T) {
	f := auditFixture(t)
	ctx := t.Context()
	all, err := f.db.AuditEvents(ctx, store.AuditFilter{}, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	actions := func(evs []store.AuditEvent) []string {
		var out []string
		for _, e := range evs {
			out = append(out, e.Action)
		}
		return out
	}
	if got, want := actions(all), []string{"connection.withdraw", "inventory.set", "connection.reject", "connection.create", "connection.submit", "connection.create"}; !slices.Equal(got, want) {
		t.Fatalf("all events newest first = %v, want %v", got, want)
	}
	red, blue := all[5].ObjectID, all[3].ObjectID

	tests := []struct {
		name   string
		filter store.AuditFilter
		before int64
		limit  int
		want   []int64
	}{
		{"all", store.AuditFilter{}, 0, 100, []int64{6, 5, 4, 3, 2, 1}},
		{"limit", store.AuditFilter{}, 0, 2, []int64{6, 5}},
		{"before", store.AuditFilter{}, 5, 2, []int64{4, 3}},
		{"before the first", store.AuditFilter{}, 1, 10, nil},
		{"team", store.AuditFilter{Team: "red"}, 0, 100, []int64{4, 2, 1}},
		{"team and before", store.AuditFilter{Team: "red"}, 4, 100, []int64{2, 1}},
		{"object type", store.AuditFilter{ObjectType: "cluster"}, 0, 100, []int64{5}},
		{"object", store.AuditFilter{ObjectType: "connection", ObjectID: blue}, 0, 100, []int64{6, 3}},
		{"object id", store.AuditFilter{ObjectID: red}, 0, 100, []int64{4, 2, 1}},
		{"action", store.AuditFilter{Action: "connection.create"}, 0, 100, []int64{3, 1}},
		{"action prefix", store.AuditFilter{ActionPrefix: "connection."}, 0, 100, []int64{6, 4, 3, 2, 1}},
		{"action prefix is not a pattern", store.AuditFilter{ActionPrefix: "connection_"}, 0, 100, nil},
		{"actor", store.AuditFilter{Actor: f.admins[0].Email}, 0, 100, []int64{5, 4}},
		{"actor and action", store.AuditFilter{Actor: f.owner.Email, Action: "connection.withdraw"}, 0, 100, []int64{6}},
		{"no match", store.AuditFilter{Team: "green"}, 0, 100, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, err := f.db.AuditEvents(ctx, tt.filter, tt.before, tt.limit)
			if err != nil {
				t.Fatalf("AuditEvents: %v", err)
			}
			var ids []int64
			for _, e := range evs {
				ids = append(ids, e.ID)
			}
			if !slices.Equal(ids, tt.want) {
				t.Errorf("ids = %v, want %v", ids, tt.want)
			}
		})
	}

	// The fields round-trip, including the system actor (no user id).
	rej := all[2]
	if rej.Actor != f.admins[0].Email || rej.ActorID != f.admins[0].ID || rej.Reason != "no" || rej.Team != "red" ||
		rej.ObjectType != "connection" || rej.ObjectID != red || rej.Version != 1 || rej.At.IsZero() {
		t.Errorf("reject event = %+v", rej)
	}
	inv := all[1]
	if inv.ObjectType != "cluster" || inv.Team != "" || !strings.Contains(inv.Reason, "shared-hp ml.p5.48xlarge = 8") {
		t.Errorf("inventory event = %+v", inv)
	}
}

// AuditHeadsEvery counts each milestone from the head it starts at: the
// milestones after a head of 3 events, and after a milestone it returned,
// carry the number of events up to them, checked against AuditHeadAt's
// count of the whole trail.
func TestAuditHeadsEveryCountsFromItsStart(t *testing.T) {
	ctx := t.Context()
	db, _ := openDB(t, true)
	now := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	add := func(n int) {
		for range n {
			if err := db.RecordClusterEvent(ctx, "test.event", workflow.SystemActor, "", now); err != nil {
				t.Fatal(err)
			}
		}
	}
	add(3)
	start, err := db.AuditHead(ctx)
	if err != nil || start.Count != 3 {
		t.Fatalf("head %+v, %v", start, err)
	}
	add(2*25 + 7)
	heads, err := db.AuditHeadsEvery(ctx, start, 25)
	if err != nil || len(heads) != 2 {
		t.Fatalf("heads after %+v: %+v, %v", start, heads, err)
	}
	for _, h := range heads {
		whole, err := db.AuditHeadAt(ctx, h.Hash)
		if err != nil || whole.ID != h.ID || h.Count != whole.Count || int64(h.Count) != h.ID {
			t.Errorf("milestone %+v; the whole trail's count up to it: %+v, %v", h, whole, err)
		}
	}
	add(25)
	more, err := db.AuditHeadsEvery(ctx, heads[1], 25)
	if err != nil || len(more) != 1 || more[0].Count != 75 || more[0].ID != 75 {
		t.Errorf("after %+v: %+v, %v; want the 75th event, 75 counted", heads[1], more, err)
	}
	if none, err := db.AuditHeadsEvery(ctx, more[0], 25); err != nil || len(none) != 0 {
		t.Errorf("after the last milestone: %+v, %v", none, err)
	}
}
