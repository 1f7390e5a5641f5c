package store_test

import (
	"errors"
	"testing"

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
