package store_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TestTokens: a token is stored with its hash only, found by it, listed for
// its person, revoked once, and its creation, revocation and every use are
// in the audit trail with its id; a use also records the last use.
func TestTokens(t *testing.T) {
	f := newFixture(t, 0)
	ctx := t.Context()
	now := f.tick()
	tok := workflow.Token{UserID: f.owner.ID, Name: "ci", Scope: workflow.TokenRead, Teams: []string{"red"},
		CreatedAt: now, ExpiresAt: now.AddDate(0, 0, 30)}
	id, err := f.db.CreateToken(ctx, tok, "hash-1", f.owner)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.CreateToken(ctx, tok, "hash-1", f.owner); err == nil {
		t.Error("a second token with the same secret hash was stored")
	}
	got, err := f.db.TokenByHash(ctx, "hash-1")
	if err != nil || got.ID != id || got.Name != "ci" || got.Scope != workflow.TokenRead || len(got.Teams) != 1 ||
		!got.ExpiresAt.Equal(tok.ExpiresAt) || !got.RevokedAt.IsZero() || !got.LastUsedAt.IsZero() {
		t.Fatalf("TokenByHash = %+v, %v", got, err)
	}
	if _, err := f.db.TokenByHash(ctx, "hash-2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown hash: %v", err)
	}
	var secretCols int
	if err := f.raw.QueryRow(`SELECT count(*) FROM api_tokens WHERE secret_hash = 'hash-1'`).Scan(&secretCols); err != nil || secretCols != 1 {
		t.Fatalf("stored hash: %d %v", secretCols, err)
	}
	use := f.tick()
	if err := f.db.RecordTokenUse(ctx, id, f.owner, "GET /api/v1/connections", "192.0.2.1", use); err != nil {
		t.Fatal(err)
	}
	got, _ = f.db.Token(ctx, id)
	if !got.LastUsedAt.Equal(use) || got.LastUsedFrom != "192.0.2.1" {
		t.Errorf("last use = %v from %q", got.LastUsedAt, got.LastUsedFrom)
	}
	rev := f.tick()
	if err := f.db.RevokeToken(ctx, id, f.owner, rev); err != nil {
		t.Fatal(err)
	}
	if err := f.db.RevokeToken(ctx, id, f.owner, f.tick()); err != nil {
		t.Fatalf("revoking again: %v", err)
	}
	// A use recorded after the revocation committed (the request read the
	// token before it) is refused inside the recording transaction, and
	// nothing is recorded (the audit below has no second use).
	if err := f.db.RecordTokenUse(ctx, id, f.owner, "GET /api/v1/connections", "192.0.2.9", f.tick()); !errors.Is(err, store.ErrTokenRevoked) {
		t.Errorf("a use of a revoked token: %v, want ErrTokenRevoked", err)
	}
	if err := f.db.RevokeToken(ctx, 99, f.owner, f.tick()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("revoking an unknown token: %v", err)
	}
	list, err := f.db.TokensOf(ctx, f.owner.ID)
	if err != nil || len(list) != 1 || !list[0].RevokedAt.Equal(rev) {
		t.Errorf("TokensOf = %+v, %v", list, err)
	}
	evs, err := f.db.AuditEvents(ctx, store.AuditFilter{ObjectType: "token", ObjectID: id}, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range evs {
		actions = append(actions, e.Action)
		if e.ActorID != f.owner.ID {
			t.Errorf("%s by %d", e.Action, e.ActorID)
		}
	}
	if want := []string{"token.revoke", "token.use", "token.create"}; len(actions) != 3 || actions[0] != want[0] || actions[1] != want[1] || actions[2] != want[2] {
		t.Errorf("audit = %v, want %v (one revoke: the second changed nothing)", actions, want)
	}
	u, err := f.db.UserByID(ctx, f.owner.ID)
	if err != nil || u.GroupsCheckedAt.IsZero() {
		t.Errorf("GroupsCheckedAt = %v, %v", u.GroupsCheckedAt, err)
	}
}

// TestDecisionTokensMigration: migration 00039 lets a token's scope be
// decide (and nothing else new), keeping the tokens stored before it; down
// again, the decision tokens go and the others stay.
func TestDecisionTokensMigration(t *testing.T) {
	f := newFixture(t, 0)
	ctx := t.Context()
	now := f.tick()
	tok := workflow.Token{UserID: f.owner.ID, Name: "ci", Scope: workflow.TokenDecide, CreatedAt: now, ExpiresAt: now.AddDate(0, 0, 1)}
	if _, err := f.db.CreateToken(ctx, tok, "hash-decide", f.owner); err != nil {
		t.Fatalf("a decide token: %v", err)
	}
	if got, err := f.db.TokenByHash(ctx, "hash-decide"); err != nil || got.Scope != workflow.TokenDecide {
		t.Errorf("TokenByHash = %+v, %v", got, err)
	}
	tok.Scope = "admin"
	if _, err := f.db.CreateToken(ctx, tok, "hash-bogus", f.owner); err == nil {
		t.Error("a token of an unknown scope was stored")
	}
	tok.Scope = workflow.TokenRead
	if _, err := f.db.CreateToken(ctx, tok, "hash-read", f.owner); err != nil {
		t.Fatal(err)
	}
	if err := f.db.MigrateDownTo(ctx, 38); err != nil {
		t.Fatalf("down to 38: %v", err)
	}
	if _, err := f.db.TokenByHash(ctx, "hash-decide"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the decide token after the down migration: %v", err)
	}
	if got, err := f.db.TokenByHash(ctx, "hash-read"); err != nil || got.Scope != workflow.TokenRead {
		t.Errorf("the read token after the down migration: %+v, %v", got, err)
	}
}

// TestTokenUsesShareATransaction: API uses that arrive while a write
// transaction runs are committed together in the next one (group commit),
// each still checked against revocation inside it: a revoked token's uses
// in the batch are refused and recorded nowhere, the others' all are (a
// machine's too, with its user record), in one unbroken audit chain, and
// the token's last use is the batch's latest.
func TestTokenUsesShareATransaction(t *testing.T) {
	f := newFixture(t, 0)
	ctx := t.Context()
	now := f.tick()
	mk := func(name, hash string) int64 {
		id, err := f.db.CreateToken(ctx, workflow.Token{UserID: f.owner.ID, Name: name, Scope: workflow.TokenRead,
			Teams: []string{"red"}, CreatedAt: now, ExpiresAt: now.AddDate(0, 0, 30)}, hash, f.owner)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	live, revoked := mk("live", "hash-live"), mk("revoked", "hash-revoked")
	if err := f.db.RevokeToken(ctx, revoked, f.owner, f.tick()); err != nil {
		t.Fatal(err)
	}
	type result struct {
		id    int64
		batch int
		err   error
	}
	results := make(chan result, 16)
	use := func(id int64, at time.Time, from string) {
		n, err := f.db.RecordTokenUseForTest(ctx, id, f.owner, "GET /api/v1/connections", from, at)
		results <- result{id, n, err}
	}
	waitQueued := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			queued, flushing := f.db.QueuedTokenUsesForTest()
			if queued == n && flushing {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("queued uses: %d (flushing %v), want %d while a flush runs", queued, flushing, n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	release := f.db.HoldWriterForTest(ctx)
	// The first use starts a flush, which takes it and waits for the writer.
	go use(live, f.tick(), "192.0.2.1")
	waitQueued(0)
	var latest time.Time
	for i := range 8 {
		latest = f.tick()
		go use(live, latest, fmt.Sprintf("192.0.2.%d", 10+i))
		waitQueued(i + 1)
	}
	go use(revoked, f.tick(), "192.0.2.99")
	go use(revoked, f.tick(), "192.0.2.98")
	waitQueued(10)
	type machineResult struct {
		u     store.User
		batch int
		err   error
	}
	machine := make(chan machineResult, 1)
	go func() {
		u, n, err := f.db.RecordMachineUseForTest(ctx, "https://idp.example.test", "machine:ci", "GET /api/v1/connections", f.tick())
		machine <- machineResult{u, n, err}
	}()
	waitQueued(11)
	release()
	m := <-machine
	if m.err != nil || m.batch != 11 || m.u.Subject != "machine:ci" {
		t.Errorf("the machine's use: %+v, want its user record, in the transaction of 11", m)
	}
	machineUses, err := f.db.AuditEvents(ctx, store.AuditFilter{ObjectType: "machine", ObjectID: m.u.ID}, 0, 10)
	if err != nil || len(machineUses) != 1 || machineUses[0].Action != "machine.use" || machineUses[0].Actor != "machine:ci" {
		t.Errorf("the machine's audit: %+v, %v", machineUses, err)
	}
	batches := map[int]int{}
	for range 11 {
		r := <-results
		batches[r.batch]++
		switch {
		case r.id == live && r.err != nil:
			t.Errorf("a use of the live token: %v", r.err)
		case r.id == revoked && !errors.Is(r.err, store.ErrTokenRevoked):
			t.Errorf("a use of the revoked token: %v, want ErrTokenRevoked", r.err)
		}
	}
	if batches[1] != 1 || batches[11] != 10 || len(batches) != 2 {
		t.Errorf("token uses by their transaction's size: %v, want one alone and ten with the machine's", batches)
	}
	count := func(id int64) int {
		evs, err := f.db.AuditEvents(ctx, store.AuditFilter{ObjectType: "token", ObjectID: id}, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range evs {
			if e.Action == "token.use" {
				n++
			}
		}
		return n
	}
	if n := count(live); n != 9 {
		t.Errorf("the live token's recorded uses: %d, want 9", n)
	}
	if n := count(revoked); n != 0 {
		t.Errorf("the revoked token's recorded uses: %d, want 0", n)
	}
	got, err := f.db.Token(ctx, live)
	if err != nil || !got.LastUsedAt.Equal(latest) || got.LastUsedFrom != "192.0.2.17" {
		t.Errorf("last use = %v from %q (%v), want %v from 192.0.2.17", got.LastUsedAt, got.LastUsedFrom, err, latest)
	}
	if _, brk, err := f.db.VerifyAudit(ctx); err != nil || brk != nil {
		t.Errorf("audit chain: break %+v, %v", brk, err)
	}
}

// TestTokenUsesKeepTheGapAcrossFlushes: a use alone, its batch having
// started no sooner than the gap ago, is committed at once; the next
// use, arriving within the gap after it, waits for the gap even though
// the flush that committed the first ended when it found the queue empty,
// and every use that arrives meanwhile shares its transaction (without the
// wait, under load 64 clients' uses went in batches of about 6, each
// with its own commit).
func TestTokenUsesKeepTheGapAcrossFlushes(t *testing.T) {
	f := newFixture(t, 0)
	ctx := t.Context()
	now := f.tick()
	id, err := f.db.CreateToken(ctx, workflow.Token{UserID: f.owner.ID, Name: "ci", Scope: workflow.TokenRead,
		Teams: []string{"red"}, CreatedAt: now, ExpiresAt: now.AddDate(0, 0, 30)}, "hash-gap", f.owner)
	if err != nil {
		t.Fatal(err)
	}
	// Long enough that the waits below are seen whatever the machine's load.
	f.db.SetUseGapForTest(2 * time.Second)
	if n, err := f.db.RecordTokenUseForTest(ctx, id, f.owner, "GET /api/v1/connections", "192.0.2.1", f.tick()); err != nil || n != 1 {
		t.Fatalf("the first use: a transaction of %d, %v; want it alone", n, err)
	}
	if queued, flushing := f.db.QueuedTokenUsesForTest(); queued != 0 || flushing {
		t.Fatalf("after the first use: %d queued, flushing %v; want the flush ended", queued, flushing)
	}
	batches := make(chan int, 3)
	for i := range 3 {
		go func() {
			n, err := f.db.RecordTokenUseForTest(ctx, id, f.owner, "GET /api/v1/connections", fmt.Sprintf("192.0.2.%d", 10+i), f.now)
			if err != nil {
				t.Error(err)
			}
			batches <- n
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		queued, flushing := f.db.QueuedTokenUsesForTest()
		if queued == 3 && flushing {
			break
		}
		if queued == 0 && flushing || time.Now().After(deadline) {
			t.Fatalf("%d queued, flushing %v: the next flush did not wait for the gap with every use queued", queued, flushing)
		}
		time.Sleep(time.Millisecond)
	}
	for range 3 {
		if n := <-batches; n != 3 {
			t.Errorf("a use within the gap went in a transaction of %d, want the 3 that arrived together", n)
		}
	}
}
