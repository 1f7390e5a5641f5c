package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

func TestVerifyAuditFromACheckpoint(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, emptyDSN(t, "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	u, _ := db.RecordLogin(ctx, "iss", "o", "owner.red@example.test", "", nil, now)
	by := workflow.Actor{ID: u.ID, Email: u.Email}
	if _, err := db.CreateConnection(ctx, workflow.ExampleContract(), by, now); err != nil {
		t.Fatal(err)
	}
	cp1, brk, err := db.VerifyAuditFrom(ctx, store.AuditCheckpoint{})
	if err != nil || brk != nil || cp1.Count != 1 {
		t.Fatalf("first check: %+v %+v %v", cp1, brk, err)
	}
	if _, err := db.Transition(ctx, 1, workflow.EventSubmit, by, "", store.Expect{}, now); err != nil {
		t.Fatal(err)
	}
	cp2, brk, err := db.VerifyAuditFrom(ctx, cp1)
	if err != nil || brk != nil || cp2.Count != 2 || cp2.ID <= cp1.ID {
		t.Fatalf("incremental check: %+v %+v %v", cp2, brk, err)
	}
	if n, _, _ := db.VerifyAudit(ctx); n != cp2.Count {
		t.Errorf("full walk counts %d, incremental %d", n, cp2.Count)
	}
	// An event appended and then altered is caught; the checkpoint stays.
	if _, err := db.Transition(ctx, 1, workflow.EventWithdraw, by, "x", store.Expect{}, now); err != nil {
		t.Fatal(err)
	}
	if err := db.ExecForTest(ctx, dropTrigger("audit_no_update", "audit_events"), `UPDATE audit_events SET reason = 'forged' WHERE id = 3`); err != nil {
		t.Fatal(err)
	}
	cp3, brk, err := db.VerifyAuditFrom(ctx, cp2)
	if err != nil || brk == nil || brk.ID != 3 || cp3 != cp2 {
		t.Errorf("altered event: %+v %+v %v", cp3, brk, err)
	}
}

// The audit page's checkpoint is the database's, shared by replicas: one
// replica's look is what another starts from, and it only moves forward.
func TestSharedAuditCheckpoint(t *testing.T) {
	ctx := context.Background()
	path := newDSN(t, "p.db")
	db, err := store.OpenMigrated(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	other, err := store.Open(ctx, path) // a second replica on the same database
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	u, _ := db.RecordLogin(ctx, "iss", "o", "owner.red@example.test", "", nil, now)
	by := workflow.Actor{ID: u.ID, Email: u.Email}
	if _, err := db.CreateConnection(ctx, workflow.ExampleContract(), by, now); err != nil {
		t.Fatal(err)
	}
	cp1, brk, err := db.VerifyAuditSinceCheckpoint(ctx, now)
	if err != nil || brk != nil || cp1.Count != 1 {
		t.Fatalf("first look: %+v %+v %v", cp1, brk, err)
	}
	if got, err := other.SharedAuditCheckpoint(ctx); err != nil || got != cp1 {
		t.Fatalf("the other replica sees checkpoint %+v, %v; want %+v", got, err, cp1)
	}
	if _, err := db.Transition(ctx, 1, workflow.EventSubmit, by, "", store.Expect{}, now); err != nil {
		t.Fatal(err)
	}
	cp2, brk, err := other.VerifyAuditSinceCheckpoint(ctx, now)
	if err != nil || brk != nil || cp2.Count != 2 || cp2.ID <= cp1.ID {
		t.Fatalf("the other replica's look: %+v %+v %v", cp2, brk, err)
	}
	// A replica that verified less (a slower, concurrent look) does not
	// move the checkpoint back.
	if err := db.AdvanceAuditCheckpoint(ctx, cp1, now); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.SharedAuditCheckpoint(ctx); got != cp2 {
		t.Errorf("checkpoint moved back to %+v, want %+v", got, cp2)
	}
}
