package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
)

func dataVersion(t *testing.T, db *store.DB) string {
	t.Helper()
	return versionOf(t, "DataVersion", db.DataVersion)
}

// versionOf is what read (a DB's DataVersion or ContentVersion, named
// name) returns, failing the test without one.
func versionOf(t *testing.T, name string, read func(context.Context) (string, bool, error)) string {
	t.Helper()
	v, ok, err := read(t.Context())
	if err != nil || !ok {
		t.Fatalf("%s = %q, %v, %v", name, v, ok, err)
	}
	return v
}

// TestDataVersion: the data version stays while nothing commits (reads
// included), and changes with every commit, made through this handle's
// pool or through another handle on the same database (another replica).
func TestDataVersion(t *testing.T) {
	db, dsn := openDB(t, true)
	other, err := store.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ctx := t.Context()
	v := dataVersion(t, db)
	if _, _, err := db.ListConnections(ctx, store.ListFilter{}, 0, 10); err != nil {
		t.Fatal(err)
	}
	if got := dataVersion(t, db); got != v {
		t.Errorf("a read changed the data version: %q -> %q", v, got)
	}
	for i, write := range []struct {
		name string
		on   *store.DB
	}{{"this handle", db}, {"another handle", other}, {"this handle again", db}} {
		ss, err := write.on.Sessions(key('a'))
		if err != nil {
			t.Fatal(err)
		}
		if err := ss.CommitCtx(ctx, "tok", []byte{byte(i)}, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		got := dataVersion(t, db)
		if got == v {
			t.Errorf("a commit through %s left the data version at %q", write.name, v)
		}
		if again := dataVersion(t, db); again != got {
			t.Errorf("the data version moved without a commit: %q -> %q", got, again)
		}
		v = got
	}
	// On SQLite (a file in WAL mode) after the first read, the version
	// comes from the WAL-index header, not from a query.
	if !onPostgres() && db.DataVersionFromWALIndex() == 0 {
		t.Error("every data version was asked of SQLite; none read from the WAL-index header")
	}
}

// An in-memory SQLite database cannot set a connection aside: it has no
// data version, and nothing is cached under one.
func TestDataVersionInMemory(t *testing.T) {
	db, err := store.Open(context.Background(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, ok, err := db.DataVersion(t.Context()); ok || err != nil {
		t.Errorf("in memory: DataVersion = %q, %v, %v; want none", v, ok, err)
	}
}

// TestSessionFindReadsThrough: under one data version, a session found is
// found again without reading its row (the row deleted behind the store's
// back, without its knowing, is still returned under the old version); under the
// version read after the delete it is gone; and a cached session past its
// expiry is not returned.
func TestSessionFindReadsThrough(t *testing.T) {
	db, dsn := openDB(t, true)
	other, err := store.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	s, err := db.Sessions(key('a'))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	s.SetNowForTest(func() time.Time { return now })
	find := func(ctx context.Context) bool {
		t.Helper()
		_, ok, err := s.FindCtx(ctx, "tok")
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if err := s.CommitCtx(t.Context(), "tok", []byte("data"), now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	old := store.WithDataVersion(t.Context(), dataVersion(t, db))
	if !find(old) {
		t.Fatal("the session is not found")
	}
	if _, err := other.RawSQL().ExecContext(t.Context(), `DELETE FROM sessions`); err != nil {
		t.Fatal(err)
	}
	if !find(old) {
		t.Error("under the version it was read at, the session was read again")
	}
	if find(store.WithDataVersion(t.Context(), dataVersion(t, db))) {
		t.Error("under the version read after its deletion, the session is still found")
	}
	if find(t.Context()) {
		t.Error("without a version, the deleted session is found")
	}

	if err := s.CommitCtx(t.Context(), "tok", []byte("data"), now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	cur := store.WithDataVersion(t.Context(), dataVersion(t, db))
	if !find(cur) {
		t.Fatal("the session is not found")
	}
	now = now.Add(2 * time.Minute)
	if find(cur) {
		t.Error("a cached session past its expiry is found")
	}
}
