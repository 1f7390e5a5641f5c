package store_test

import (
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/signing"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/support/testenv"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// twoHandles opens one migrated database twice, as two replicas would.
func twoHandles(t *testing.T) (*store.DB, *store.DB) {
	t.Helper()
	a, path := openDB(t, true)
	b, err := store.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return a, b
}

var signKey = []byte("0123456789abcdef0123456789abcdef")

// TestEnsureSigningKeyRace: replicas starting at once, each with a key of
// its own, all end with one key, the one the store kept, and its making is
// audited once.
func TestEnsureSigningKeyRace(t *testing.T) {
	a, b := twoHandles(t)
	ctx, now := t.Context(), time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	const n = 8
	got := make([]signing.Sealed, n)
	made := make([]bool, n)
	cands := make([]signing.Sealed, n)
	for i := range n {
		c, err := signing.Generate(rand.Reader, signKey, now)
		if err != nil {
			t.Fatal(err)
		}
		cands[i] = c
	}
	testenv.OnReplicas(n, []*store.DB{a, b}, func(i int, db *store.DB) {
		var err error
		if got[i], made[i], err = db.EnsureSigningKey(ctx, cands[i], now); err != nil {
			t.Errorf("replica %d: %v", i, err)
		}
	})
	winners := 0
	for i := range n {
		if got[i].KeyID != got[0].KeyID || got[i].Private != got[0].Private {
			t.Errorf("replica %d has key %s, replica 0 %s", i, got[i].KeyID, got[0].KeyID)
		}
		if made[i] {
			winners++
			if cands[i].KeyID != got[0].KeyID {
				t.Errorf("replica %d made a key but the kept one is %s, not its %s", i, got[0].KeyID, cands[i].KeyID)
			}
		}
	}
	if winners != 1 {
		t.Errorf("%d replicas say they made the key, want 1", winners)
	}
	var rows int
	if err := a.RawSQL().QueryRowContext(ctx, `SELECT COUNT(*) FROM signing_keys`).Scan(&rows); err != nil || rows != 1 {
		t.Errorf("signing_keys holds %d rows (%v), want 1", rows, err)
	}
	ev, err := a.AuditEvents(ctx, store.AuditFilter{Action: "signing.key_created"}, 0, 10)
	if err != nil || len(ev) != 1 {
		t.Fatalf("key_created events = %d (%v), want 1", len(ev), err)
	}
	s, err := signing.Open(got[0], signKey)
	if err != nil {
		t.Fatal(err)
	}
	if want := signing.EncodePublic(s.Public()); !strings.Contains(ev[0].Reason, want) || !strings.Contains(ev[0].Reason, s.KeyID()) {
		t.Errorf("the audit event %q does not name the key %s %s", ev[0].Reason, s.KeyID(), want)
	}
	// A second active key cannot be inserted behind the store's back.
	if err := a.ExecForTest(ctx, `INSERT INTO signing_keys (key_id, slot, algorithm, public_key, sealed_private_key, created_at) VALUES ('x', 'active', 'ed25519', 'p', 's', 't')`); err == nil {
		t.Error("a second active key was accepted")
	}
}

// TestPublishAuditHeadOncePerDay: two replicas publishing the same day at
// once record one publication, one outbox notice and one audit event; the
// next day publishes again.
func TestPublishAuditHeadOncePerDay(t *testing.T) {
	a, b := twoHandles(t)
	ctx, now := t.Context(), time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	cand, err := signing.Generate(rand.Reader, signKey, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.EnsureSigningKey(ctx, cand, now); err != nil {
		t.Fatal(err)
	}
	pub := func(day string, at time.Time) store.AuditHeadPublication {
		return store.AuditHeadPublication{Day: day, HeadID: 1, HeadCount: 1, HeadHash: "h", HeadAt: "t", KeyID: cand.KeyID, Signature: "sig", PublishedAt: at}
	}
	notice := workflow.Notice{Kind: "audit.head_published", To: workflow.ToAdmins, Subject: "head", Body: "head_hash: h"}
	const n = 6
	won := make([]bool, n)
	testenv.OnReplicas(n, []*store.DB{a, b}, func(i int, db *store.DB) {
		var err error
		if won[i], err = db.PublishAuditHead(ctx, pub("2026-12-04", now.Add(time.Duration(i)*time.Second)), notice); err != nil {
			t.Errorf("replica %d: %v", i, err)
		}
	})
	count := func(q string) int {
		var c int
		if err := a.RawSQL().QueryRowContext(ctx, q).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	winners := 0
	for _, w := range won {
		if w {
			winners++
		}
	}
	if winners != 1 {
		t.Errorf("%d replicas published the day, want 1", winners)
	}
	if o, e := count(`SELECT COUNT(*) FROM outbox WHERE kind = 'audit.head_published'`), count(`SELECT COUNT(*) FROM audit_events WHERE action = 'audit.head_published'`); o != 1 || e != 1 {
		t.Errorf("outbox notices %d, audit events %d, want 1 and 1", o, e)
	}
	if done, err := b.AuditHeadPublished(ctx, "2026-12-04"); err != nil || !done {
		t.Errorf("AuditHeadPublished = %v, %v", done, err)
	}
	if ok, err := a.PublishAuditHead(ctx, pub("2026-12-05", now.Add(24*time.Hour)), notice); err != nil || !ok {
		t.Errorf("the next day: published %v, %v", ok, err)
	}
	ps, err := a.AuditHeadPublications(ctx, 10)
	if err != nil || len(ps) != 2 || ps[0].Day != "2026-12-05" || ps[1].Day != "2026-12-04" {
		t.Errorf("publications %+v, %v", ps, err)
	}
	// The outbox row carries the body to the channels.
	if _, err := a.DispatchOutbox(ctx, []store.Channel{store.ChannelEmail}, now.Add(48*time.Hour), 10); err != nil {
		t.Fatal(err)
	}
	dl, ok, err := a.ClaimDelivery(ctx, store.ChannelEmail, now.Add(48*time.Hour), time.Minute)
	if err != nil || !ok || dl.Body != "head_hash: h" || dl.Kind != "audit.head_published" {
		t.Errorf("delivery %+v, %v, %v", dl, ok, err)
	}
	if _, err := a.AuditHead(ctx); err != nil {
		t.Errorf("AuditHead: %v", err)
	}
}

// TestAuditHeadTime: the head carries the newest event's time, and the count
// and hash of the trail; an empty trail has id 0, the genesis hash and no
// time.
func TestAuditHeadTime(t *testing.T) {
	db, _ := openDB(t, true)
	ctx := t.Context()
	if h, err := db.AuditHead(ctx); err != nil || h.ID != 0 || h.Count != 0 || !h.At.IsZero() {
		t.Fatalf("empty trail: %+v, %v", h, err)
	}
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	for i := range 3 {
		if err := db.RecordClusterEvent(ctx, "cluster.test", workflow.Actor{Email: "admin@example.test"}, "r", now.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	h, err := db.AuditHead(ctx)
	events, lerr := db.AuditEvents(ctx, store.AuditFilter{}, 0, 1) // newest first
	if err != nil || lerr != nil || h.Count != 3 || !h.At.Equal(now.Add(2*time.Second)) || len(events) != 1 {
		t.Fatalf("AuditHead = %+v, %v; events %v", h, err, lerr)
	}
	if newest := events[0]; h.ID != newest.ID || h.Hash != newest.Hash {
		t.Errorf("AuditHead = %+v; the newest event is %d %s", h, newest.ID, newest.Hash)
	}
}
