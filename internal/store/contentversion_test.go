package store_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

func contentVersion(t *testing.T, db *store.DB) string {
	t.Helper()
	return versionOf(t, "ContentVersion", db.ContentVersion)
}

// TestContentVersionIgnoresTokenUses: a personal token's use moves the
// data version (the audit trail shows it) and not the content version, a
// use after a use neither; any other commit moves both: the token's
// revocation, a person's groups confirmed, a commit made through another
// handle (another replica or process) while uses go on, and a use batch
// that held a machine's use (its user record is written). On both engines.
func TestContentVersionIgnoresTokenUses(t *testing.T) {
	f := newFixture(t, 0)
	ctx := t.Context()
	id := f.readToken("hash-cv")
	other, err := store.Open(ctx, f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	use := func() {
		t.Helper()
		if err := f.db.RecordTokenUse(ctx, id, f.owner, "GET /api/v1/connections", "192.0.2.1", f.tick()); err != nil {
			t.Fatal(err)
		}
	}
	// The first reads map SQLite's WAL index; a use then made the
	// version the reads come from.
	dataVersion(t, f.db)
	contentVersion(t, f.db)
	use()
	d, c := dataVersion(t, f.db), contentVersion(t, f.db)
	for i := range 3 {
		use()
		d2, c2 := dataVersion(t, f.db), contentVersion(t, f.db)
		if d2 == d {
			t.Errorf("use %d left the data version at %q: the audit trail's page would not show it", i+1, d)
		}
		if c2 != c {
			t.Errorf("use %d moved the content version %q -> %q", i+1, c, c2)
		}
		d = d2
	}
	for _, step := range []struct {
		what  string
		write func() error
	}{
		{"a person's groups confirmed", func() error {
			return f.db.ConfirmUserGroups(ctx, f.owner.ID, []string{"team-red-owners"}, f.tick())
		}},
		{"a commit through another handle, then a use", func() error {
			if err := other.ConfirmUserGroups(ctx, f.owner.ID, []string{"team-red-members"}, f.tick()); err != nil {
				return err
			}
			use()
			return nil
		}},
		{"a machine's use", func() error {
			_, err := f.db.RecordMachineUse(ctx, "https://idp.example.test", "pipeline", "GET /api/v1/connections", f.tick())
			return err
		}},
		{"the token's revocation", func() error { return f.db.RevokeToken(ctx, id, f.owner, f.tick()) }},
	} {
		if err := step.write(); err != nil {
			t.Fatalf("%s: %v", step.what, err)
		}
		if c2 := contentVersion(t, f.db); c2 == c {
			t.Errorf("%s left the content version at %q", step.what, c)
		} else {
			c = c2
		}
	}
}

// TestTokenAndUserKeptUnderTheContentVersion: under one content version a
// token and its person are read once; a use keeps them (the token is
// not read again to show its last use); a revocation or a change of the
// person's groups, both through the store, is seen at the next request's
// version; an unknown token is refused.
func TestTokenAndUserKeptUnderTheContentVersion(t *testing.T) {
	f := newFixture(t, 0)
	ctx := t.Context()
	id := f.readToken("hash-kept")
	request := func() (store.APIToken, store.User) {
		t.Helper()
		rctx := store.WithContentVersion(ctx, contentVersion(t, f.db))
		tk, u, err := f.db.TokenAndUser(rctx, "hash-kept")
		if err != nil || tk.ID != id || u.ID != f.owner.ID {
			t.Fatalf("TokenAndUser = %+v, %+v, %v", tk, u, err)
		}
		return tk, u
	}
	request()
	// A use: the database now holds the token's last use, and a request
	// under the same content version still gets the token as it was read.
	if err := f.db.RecordTokenUse(ctx, id, f.owner, "GET /api/v1/connections", "192.0.2.1", f.tick()); err != nil {
		t.Fatal(err)
	}
	kept, _ := request()
	if !kept.LastUsedAt.IsZero() {
		t.Errorf("the token was read again after a use (last use %v): a use moved what it is kept under", kept.LastUsedAt)
	}
	if err := f.db.ConfirmUserGroups(ctx, f.owner.ID, []string{"team-red-owners"}, f.tick()); err != nil {
		t.Fatal(err)
	}
	if _, u := request(); !slices.Equal(u.Groups, []string{"team-red-owners"}) {
		t.Errorf("after the person's groups changed the token's person has %q", u.Groups)
	}
	if err := f.db.RevokeToken(ctx, id, f.owner, f.tick()); err != nil {
		t.Fatal(err)
	}
	if tk, _ := request(); tk.RevokedAt.IsZero() {
		t.Error("after its revocation the token was still read as in force")
	}
	if _, _, err := f.db.TokenAndUser(store.WithContentVersion(ctx, contentVersion(t, f.db)), "hash-unknown"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an unknown token: %v, want ErrNotFound", err)
	}
}

// readToken stores a read token of the fixture's owner, with secretHash,
// and returns its id.
func (f *fixture) readToken(secretHash string) int64 {
	f.t.Helper()
	now := f.tick()
	id, err := f.db.CreateToken(f.t.Context(), workflow.Token{UserID: f.owner.ID, Name: "ci", Scope: workflow.TokenRead,
		CreatedAt: now, ExpiresAt: now.AddDate(0, 0, 30)}, secretHash, f.owner)
	if err != nil {
		f.t.Fatal(err)
	}
	return id
}
