package store_test

import (
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
)

// TestReadUsesAreRecordedAfterTheAnswer: a read's use (QueueTokenUse)
// returns while the writers are held, before its transaction; the audit
// trail's and the tokens' readers wait for it and then show it, with the
// token's last use. A read answered before a revocation committed keeps
// its event (the read happened) where a write's use is refused; the
// revoked token's last use stays the one before.
func TestReadUsesAreRecordedAfterTheAnswer(t *testing.T) {
	f := newFixture(t, 0)
	ctx := t.Context()
	id := f.readToken("hash-reads")
	uses := func() int {
		t.Helper()
		evs, err := f.db.AuditEvents(ctx, store.AuditFilter{Action: "token.use", ObjectID: id}, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		return len(evs)
	}

	release := f.db.HoldWriterForTest(ctx)
	first := f.tick()
	queued := make(chan error, 1)
	go func() { queued <- f.db.QueueTokenUse(ctx, id, f.owner, "GET /api/v1/connections", "192.0.2.1", first) }()
	select {
	case err := <-queued:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		release()
		t.Fatal("QueueTokenUse waited for its transaction while the writers were held")
	}
	read := make(chan int, 1)
	go func() { read <- uses() }()
	stillWaiting(t, read, release, "the audit trail was read before the queued use was recorded")
	release()
	if n := <-read; n != 1 {
		t.Errorf("token.use events after the queued use = %d, want 1", n)
	}
	got, err := f.db.Token(ctx, id)
	if err != nil || !got.LastUsedAt.Equal(first) || got.LastUsedFrom != "192.0.2.1" {
		t.Errorf("last use = %v from %q (%v), want %v", got.LastUsedAt, got.LastUsedFrom, err, first)
	}

	// Revoked after the read began, before its use's batch: the read was
	// answered, so its use is recorded; a write's use is refused.
	release = f.db.HoldWriterForTest(ctx)
	if err := f.db.QueueTokenUse(ctx, id, f.owner, "GET /api/v1/connections/1", "192.0.2.2", f.tick()); err != nil {
		release()
		t.Fatal(err)
	}
	revoked := make(chan error, 1)
	go func() { revoked <- f.db.RevokeToken(ctx, id, f.owner, f.tick()) }()
	release()
	if err := <-revoked; err != nil {
		t.Fatal(err)
	}
	if err := f.db.RecordTokenUse(ctx, id, f.owner, "POST /api/v1/connections", "192.0.2.3", f.tick()); err == nil {
		t.Error("a write's use of the revoked token was recorded")
	}
	if n := uses(); n != 2 {
		t.Errorf("token.use events = %d, want 2 (the two reads; the write refused)", n)
	}
	if got, _ := f.db.Token(ctx, id); got.RevokedAt.IsZero() {
		t.Error("the token is not revoked")
	}
	if f.db.LostAPIUses() != 0 {
		t.Errorf("lost uses = %d", f.db.LostAPIUses())
	}
}

// TestQueuedReadUsesAreBounded: with the writers held, maxQueuedUses reads'
// uses queue without waiting, and the next one waits for its transaction.
func TestQueuedReadUsesAreBounded(t *testing.T) {
	f := newFixture(t, 0)
	ctx := t.Context()
	id := f.readToken("hash-bound")
	now := f.tick()
	release := f.db.HoldWriterForTest(ctx)
	for i := range store.MaxQueuedUsesForTest {
		if err := f.db.QueueTokenUse(ctx, id, f.owner, "GET /api/v1/connections", "192.0.2.1", now.Add(time.Duration(i))); err != nil {
			release()
			t.Fatal(err)
		}
	}
	over := make(chan error, 1)
	go func() {
		over <- f.db.QueueTokenUse(ctx, id, f.owner, "GET /api/v1/connections", "192.0.2.1", now.Add(time.Hour))
	}()
	stillWaiting(t, over, release, "a use over the bound returned before its transaction")
	release()
	if err := <-over; err != nil {
		t.Fatal(err)
	}
	evs, err := f.db.AuditEvents(ctx, store.AuditFilter{Action: "token.use", ObjectID: id}, 0, store.MaxQueuedUsesForTest+10)
	if err != nil || len(evs) != store.MaxQueuedUsesForTest+1 {
		t.Errorf("token.use events = %d (%v), want %d", len(evs), err, store.MaxQueuedUsesForTest+1)
	}
}

// TestCloseRecordsQueuedReadUses: uses queued just before Close are in the
// database when it is opened again.
func TestCloseRecordsQueuedReadUses(t *testing.T) {
	f := newFixture(t, 0)
	ctx := t.Context()
	id := f.readToken("hash-close")
	now := f.tick()
	db, err := store.Open(ctx, f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	// A first batch commits at once; the next starts no sooner than the
	// gap after it, so the three uses after it are still queued at Close.
	db.SetUseGapForTest(time.Minute)
	if err := db.QueueTokenUse(ctx, id, f.owner, "GET /api/v1/connections", "192.0.2.1", now); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Token(ctx, id); err != nil { // waits for the first batch
		t.Fatal(err)
	}
	for i := range 3 {
		if err := db.QueueTokenUse(ctx, id, f.owner, "GET /api/v1/connections", "192.0.2.1", now.Add(time.Duration(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := db.QueuedTokenUsesForTest(); n != 3 {
		t.Fatalf("queued uses before Close = %d, want 3", n)
	}
	time.Sleep(50 * time.Millisecond) // the flush is in its pause: Close must end it, not wait the minute
	closeStart := time.Now()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(closeStart); waited > 30*time.Second {
		t.Errorf("Close waited %v: it kept the gap between batches", waited)
	}
	var n int
	if err := f.raw.QueryRowContext(ctx, `SELECT count(*) FROM audit_events WHERE action = 'token.use' AND object_id = ?`, id).Scan(&n); err != nil || n != 4 {
		t.Errorf("token.use events after Close = %d (%v), want 4", n, err)
	}
}

// stillWaiting fails the test (after release) when ch gives a value
// within 200 ms: what it stands for should still be waiting.
func stillWaiting[T any](t *testing.T, ch <-chan T, release func(), what string) {
	t.Helper()
	select {
	case v := <-ch:
		release()
		t.Fatalf("%s (%v)", what, v)
	case <-time.After(200 * time.Millisecond):
	}
}
