package store_test

import (
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
)

// With a refresh granularity, a commit that only moves a session's expiry
// forward by less than it, after the same store found the session, writes
// nothing; a longer move, changed data, or a commit without a find writes.
// And a session signed out on another replica (another handle on the same
// database) between the find and the commit stays signed out.
func TestSessionRefreshGranularity(t *testing.T) {
	db, dsn := openDB(t, true)
	ctx := t.Context()
	s, err := db.Sessions(key('a'))
	if err != nil {
		t.Fatal(err)
	}
	s.SetRefreshGranularity(time.Minute)
	expiry := func() int64 {
		t.Helper()
		var n int64
		if err := db.RawSQL().QueryRowContext(ctx, `SELECT expiry FROM sessions`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	find := func(s *store.SessionStore) bool {
		t.Helper()
		_, ok, err := s.FindCtx(ctx, "tok")
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	exp := time.Now().Add(30 * time.Minute)
	if err := s.CommitCtx(ctx, "tok", []byte("data"), exp); err != nil {
		t.Fatal(err)
	}
	for _, st := range []struct {
		name  string
		find  bool
		data  string
		move  time.Duration
		write bool
		fresh bool // committed by another store, that never read or wrote it
	}{
		{"the same data, 10s later, after a find", true, "data", 10 * time.Second, false, false},
		{"the same data, 2min later, after a find", true, "data", 2 * time.Minute, true, false},
		{"other data, 1s later, after a find", true, "other", time.Second, true, false},
		{"the same data, 1s later, without a find, by a store that never read or wrote it", false, "other", time.Second, true, true},
		{"the same data, 1s later, after the store wrote it, without a find", false, "other", time.Second, false, false},
	} {
		before := expiry()
		if st.find && !find(s) {
			t.Fatalf("%s: the session is gone", st.name)
		}
		by := s
		if st.fresh {
			if by, err = db.Sessions(key('a')); err != nil {
				t.Fatal(err)
			}
			by.SetRefreshGranularity(time.Minute)
		}
		if err := by.CommitCtx(ctx, "tok", []byte(st.data), time.Unix(0, before).Add(st.move)); err != nil {
			t.Fatal(err)
		}
		if wrote := expiry() != before; wrote != st.write {
			t.Errorf("%s: wrote %v, want %v", st.name, wrote, st.write)
		}
	}

	// One user's concurrent requests: each finds the session, then each
	// commits it, only to move its expiry: no write.
	before := expiry()
	b1, _, _ := s.FindCtx(ctx, "tok")
	b2, _, _ := s.FindCtx(ctx, "tok")
	for i, b := range [][]byte{b1, b2} {
		if err := s.CommitCtx(ctx, "tok", b, time.Unix(0, before).Add(time.Duration(i+1)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if expiry() != before {
		t.Error("two concurrent requests of one session, each only moving its expiry, wrote it")
	}

	// Another replica signs the session out between this one's find and
	// its commit: the commit that would only refresh the expiry does not
	// bring the session back.
	other, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	os, err := other.Sessions(key('a'))
	if err != nil {
		t.Fatal(err)
	}
	before = expiry()
	b, ok, err := s.FindCtx(ctx, "tok")
	if err != nil || !ok {
		t.Fatalf("Find = %v, %v", ok, err)
	}
	if err := os.DeleteCtx(ctx, "tok"); err != nil {
		t.Fatal(err)
	}
	if err := s.CommitCtx(ctx, "tok", b, time.Unix(0, before).Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if find(s) || find(os) {
		t.Error("a session signed out on another replica came back")
	}
}
