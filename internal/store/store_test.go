package store_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/migrations"
)

// openDB opens a fresh database file in a temporary directory, migrated
// unless migrate is false.
func openDB(t *testing.T, migrate bool) (*store.DB, string) {
	t.Helper()
	path := newDSN(t, "portal.db")
	open := store.OpenMigrated
	if !migrate {
		path, open = emptyDSN(t, "portal.db"), store.Open
	}
	db, err := open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return db, path
}

// knownMigrations returns the newest embedded migration version and how
// many migrations there are.
func knownMigrations(t *testing.T) (version int64, count int) {
	t.Helper()
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no embedded migrations (%v)", err)
	}
	for _, f := range files {
		num, _, _ := strings.Cut(f, "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			t.Fatalf("migration %s is not named NNNNN_description.sql", f)
		}
		version = max(version, v)
	}
	return version, len(files)
}

func TestOpenCreatesDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "portal.db")
	db, err := store.Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer db.Close()
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
		t.Fatalf("directory of %s not created: %v", path, err)
	}
	if err := db.Ping(t.Context()); err != nil {
		t.Errorf("Ping: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("database file not created: %v", err)
	}
}

func TestOpenRejectsEmptyPath(t *testing.T) {
	if db, err := store.Open(t.Context(), ""); err == nil {
		db.Close()
		t.Fatal("Open(\"\") succeeded")
	}
}

func TestMigrateIsIdempotent(t *testing.T) {
	db, _ := openDB(t, false)
	ctx := t.Context()
	known, count := knownMigrations(t)

	before, err := db.Status(ctx)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if before != (store.SchemaStatus{Current: 0, Known: known}) {
		t.Errorf("Status before Migrate = %+v, want {0 %d}", before, known)
	}
	for i := range 3 {
		st, err := db.Migrate(ctx)
		if err != nil {
			t.Fatalf("Migrate #%d: %v", i+1, err)
		}
		if st.Current != st.Known || st.Known != known {
			t.Errorf("Migrate #%d = %+v, want Current == Known == %d", i+1, st, known)
		}
	}
	var n int
	if err := db.RawSQL().QueryRowContext(ctx,
		`SELECT count(*) FROM goose_db_version WHERE version_id > 0`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != count {
		t.Errorf("goose_db_version has %d applied rows after three Migrates, want %d", n, count)
	}
}

// The pragmas are set per connection through the DSN, so every pooled
// connection must have them, not just the first.
func TestPragmasOnEveryConnection(t *testing.T) {
	if onPostgres() {
		t.Skip("SQLite's per-connection pragmas have no PostgreSQL counterpart; the SQLite pass runs this test")
	}
	db, _ := openDB(t, true)
	ctx := t.Context()
	tests := []struct {
		pragma string
		want   string
	}{
		{"journal_mode", "wal"},
		{"foreign_keys", "1"},
		{"busy_timeout", "5000"},
		{"synchronous", "1"}, // NORMAL
	}
	// Hold several connections at once so the pool has to open new ones.
	for i := range 3 {
		conn, err := db.RawSQL().Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		for _, tt := range tests {
			var got string
			if err := conn.QueryRowContext(ctx, "PRAGMA "+tt.pragma).Scan(&got); err != nil {
				t.Fatalf("PRAGMA %s: %v", tt.pragma, err)
			}
			if got != tt.want {
				t.Errorf("connection %d: PRAGMA %s = %q, want %q", i, tt.pragma, got, tt.want)
			}
		}
	}
}

func TestMigrateRefusesNewerSchema(t *testing.T) {
	db, _ := openDB(t, true)
	ctx := t.Context()
	known, _ := knownMigrations(t)
	if _, err := db.RawSQL().ExecContext(ctx,
		`INSERT INTO goose_db_version (version_id, is_applied) VALUES (?, ?)`, known+1, true); err != nil {
		t.Fatal(err)
	}
	st, err := db.Status(ctx)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if st.Current != known+1 || st.Known != known {
		t.Errorf("Status = %+v, want {%d %d}", st, known+1, known)
	}
	_, err = db.Migrate(ctx)
	if !errors.Is(err, store.ErrSchemaTooNew) {
		t.Fatalf("Migrate error = %v, want ErrSchemaTooNew", err)
	}
	for _, want := range []string{"run the newer portal or restore a backup", "version"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestRecordLogin(t *testing.T) {
	db, _ := openDB(t, true)
	ctx := t.Context()
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 123456789, time.FixedZone("CET", 3600))
	t1 := t0.Add(26 * time.Hour)

	u1, err := db.RecordLogin(ctx, "https://idp", "alice", "alice@example.com", "Alice", []string{"team-red-members"}, t0)
	if err != nil {
		t.Fatalf("RecordLogin: %v", err)
	}
	if u1.ID == 0 || u1.Issuer != "https://idp" || u1.Subject != "alice" || u1.Email != "alice@example.com" || u1.Name != "Alice" {
		t.Errorf("first login = %+v", u1)
	}
	if !slices.Equal(u1.Groups, []string{"team-red-members"}) {
		t.Errorf("groups = %v", u1.Groups)
	}
	if !u1.FirstLogin.Equal(t0) || !u1.LastLogin.Equal(t0) {
		t.Errorf("first/last login = %v/%v, want %v", u1.FirstLogin, u1.LastLogin, t0)
	}

	u2, err := db.RecordLogin(ctx, "https://idp", "alice", "alice@new.example.com", "Alice B", []string{"team-red-owners", "finance"}, t1)
	if err != nil {
		t.Fatalf("second RecordLogin: %v", err)
	}
	want := store.User{
		ID: u1.ID, Issuer: "https://idp", Subject: "alice", Email: "alice@new.example.com", Name: "Alice B",
		Groups: []string{"team-red-owners", "finance"},
	}
	if u2.ID != want.ID || u2.Email != want.Email || u2.Name != want.Name || !slices.Equal(u2.Groups, want.Groups) {
		t.Errorf("second login = %+v, want %+v", u2, want)
	}
	if !u2.FirstLogin.Equal(t0) {
		t.Errorf("FirstLogin = %v, want it kept at %v", u2.FirstLogin, t0)
	}
	if !u2.LastLogin.Equal(t1) {
		t.Errorf("LastLogin = %v, want %v", u2.LastLogin, t1)
	}
	got, err := db.UserByID(ctx, u1.ID)
	if err != nil {
		t.Fatalf("UserByID: %v", err)
	}
	if got.ID != u2.ID || !got.LastLogin.Equal(t1) || !slices.Equal(got.Groups, u2.Groups) {
		t.Errorf("UserByID = %+v, want %+v", got, u2)
	}

	// Users are keyed by issuer and subject together.
	others := []struct{ issuer, subject string }{
		{"https://idp", "bob"},
		{"https://other-idp", "alice"},
	}
	for _, o := range others {
		u, err := db.RecordLogin(ctx, o.issuer, o.subject, "", "", nil, t1)
		if err != nil {
			t.Fatalf("RecordLogin(%s, %s): %v", o.issuer, o.subject, err)
		}
		if u.ID == u1.ID {
			t.Errorf("RecordLogin(%s, %s) reused id %d of (https://idp, alice)", o.issuer, o.subject, u.ID)
		}
		if u.Groups == nil || len(u.Groups) != 0 {
			t.Errorf("nil groups stored as %#v, want an empty list", u.Groups)
		}
	}
}

func TestUserByIDNotFound(t *testing.T) {
	db, _ := openDB(t, true)
	for _, id := range []int64{0, 1, 999} {
		if _, err := db.UserByID(t.Context(), id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("UserByID(%d) error = %v, want ErrNotFound", id, err)
		}
	}
}

func TestRecordLoginConcurrent(t *testing.T) {
	db, _ := openDB(t, true)
	ctx := t.Context()
	const workers, rounds = 8, 5
	start := make(chan struct{})
	ids := make([][]int64, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for r := range rounds {
				u, err := db.RecordLogin(ctx, "https://idp", "same-user", "u@example.com", "U",
					[]string{"g" + string(rune('a'+w))}, time.Unix(int64(1e9+w*rounds+r), 0))
				if err != nil {
					errs[w] = err
					return
				}
				ids[w] = append(ids[w], u.ID)
			}
		}()
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent RecordLogin: %v", err)
	}
	first := ids[0][0]
	for w := range workers {
		for _, id := range ids[w] {
			if id != first {
				t.Errorf("worker %d got id %d, want %d for every login", w, id, first)
			}
		}
	}
	var n int
	if err := db.RawSQL().QueryRowContext(ctx, `SELECT count(*) FROM users`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("users has %d rows, want 1", n)
	}
}

func key(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

func TestSessionsKeyLength(t *testing.T) {
	db, _ := openDB(t, true)
	tests := []struct {
		n       int
		wantErr bool
	}{
		{0, true}, {16, true}, {31, true}, {32, false}, {64, false},
	}
	for _, tt := range tests {
		_, err := db.Sessions(bytes.Repeat([]byte{'k'}, tt.n))
		if (err != nil) != tt.wantErr {
			t.Errorf("Sessions(%d-byte key) error = %v, want error %v", tt.n, err, tt.wantErr)
		}
	}
	if _, err := db.Sessions(nil); err == nil {
		t.Error("Sessions(nil) succeeded")
	}
}

func TestSessionRoundTrip(t *testing.T) {
	db, _ := openDB(t, true)
	ctx := t.Context()
	k := key('a')
	s, err := db.Sessions(k)
	if err != nil {
		t.Fatal(err)
	}
	k[0] = 'z' // the store keeps its own copy of the key

	exp := time.Now().Add(time.Hour)
	if err := s.Commit("tok-1", []byte("first"), exp); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	steps := []struct {
		name     string
		do       func() error
		token    string
		wantData string
		wantOK   bool
	}{
		{"after commit", func() error { return nil }, "tok-1", "first", true},
		{"other token", func() error { return nil }, "tok-2", "", false},
		{"after replace", func() error { return s.CommitCtx(ctx, "tok-1", []byte("second"), exp) }, "tok-1", "second", true},
		{"after delete", func() error { return s.Delete("tok-1") }, "tok-1", "", false},
		{"delete again", func() error { return s.DeleteCtx(ctx, "tok-1") }, "tok-1", "", false},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		b, ok, err := s.Find(st.token)
		if err != nil {
			t.Fatalf("%s: Find: %v", st.name, err)
		}
		if ok != st.wantOK || string(b) != st.wantData {
			t.Errorf("%s: Find(%s) = %q, %v; want %q, %v", st.name, st.token, b, ok, st.wantData, st.wantOK)
		}
	}
	if n, err := s.Count(ctx); err != nil || n != 0 {
		t.Errorf("Count = %d, %v; want 0", n, err)
	}
}

func TestSessionExpired(t *testing.T) {
	db, _ := openDB(t, true)
	ctx := t.Context()
	s, err := db.Sessions(key('a'))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CommitCtx(ctx, "old", []byte("x"), time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.FindCtx(ctx, "old"); err != nil || ok {
		t.Errorf("FindCtx(expired) = found %v, err %v; want not found", ok, err)
	}
	// Not found, but still stored until DeleteExpired runs.
	if n, err := s.Count(ctx); err != nil || n != 1 {
		t.Errorf("Count = %d, %v; want 1", n, err)
	}
}

func TestDeleteExpired(t *testing.T) {
	db, _ := openDB(t, true)
	ctx := t.Context()
	s, err := db.Sessions(key('a'))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sessions := []struct {
		token     string
		expiry    time.Time
		wantAfter bool
	}{
		{"long-gone", now.Add(-24 * time.Hour), false},
		{"just-gone", now.Add(-time.Millisecond), false},
		{"at-now", now, false},
		{"live", now.Add(time.Hour), true},
		{"live-2", now.Add(time.Minute), true},
	}
	for _, ss := range sessions {
		if err := s.CommitCtx(ctx, ss.token, []byte(ss.token), ss.expiry); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.DeleteExpired(ctx, now)
	if err != nil {
		t.Fatalf("DeleteExpired: %v", err)
	}
	if n != 3 {
		t.Errorf("DeleteExpired removed %d, want 3", n)
	}
	if c, err := s.Count(ctx); err != nil || c != 2 {
		t.Errorf("Count = %d, %v; want 2", c, err)
	}
	for _, ss := range sessions {
		if !ss.wantAfter {
			continue
		}
		if b, ok, err := s.FindCtx(ctx, ss.token); err != nil || !ok || string(b) != ss.token {
			t.Errorf("FindCtx(%s) = %q, %v, %v after DeleteExpired; want it kept", ss.token, b, ok, err)
		}
	}
	if n, err := s.DeleteExpired(ctx, now); err != nil || n != 0 {
		t.Errorf("second DeleteExpired = %d, %v; want 0", n, err)
	}
}

// A copy of the database must not yield live session cookies.
func TestSessionTokensNotStoredInClear(t *testing.T) {
	db, path := openDB(t, true)
	ctx := t.Context()
	s1, err := db.Sessions(key('a'))
	if err != nil {
		t.Fatal(err)
	}
	s2, err := db.Sessions(key('b'))
	if err != nil {
		t.Fatal(err)
	}
	sameKey, err := db.Sessions(key('a'))
	if err != nil {
		t.Fatal(err)
	}
	tokens := []string{"tokenAAAAqK7pZl2xYy9Vn3Wm", "tokenBBBBr8Ht1cQe5Js0Uf4G"}
	for _, tok := range tokens {
		if err := s1.CommitCtx(ctx, tok, []byte("user=42"), time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}

	rows, err := db.RawSQL().QueryContext(ctx, `SELECT token_hash, data FROM sessions`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	hexRE := regexp.MustCompile(`^[0-9a-f]{64}$`)
	var n int
	for rows.Next() {
		var h string
		var data []byte
		if err := rows.Scan(&h, &data); err != nil {
			t.Fatal(err)
		}
		n++
		if !hexRE.MatchString(h) {
			t.Errorf("token_hash %q is not a hex SHA-256", h)
		}
		for _, tok := range tokens {
			if strings.Contains(h, tok) || bytes.Contains(data, []byte(tok)) {
				t.Errorf("token %q stored in clear: hash %q, data %q", tok, h, data)
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != len(tokens) {
		t.Errorf("sessions has %d rows, want %d", n, len(tokens))
	}
	// Not in the files either (WAL pages included).
	for _, f := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(f)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		for _, tok := range tokens {
			if bytes.Contains(b, []byte(tok)) {
				t.Errorf("%s contains the raw token %q", filepath.Base(f), tok)
			}
		}
	}

	for _, tok := range tokens {
		if _, ok, err := s2.FindCtx(ctx, tok); err != nil || ok {
			t.Errorf("store with another key found %q (err %v)", tok, err)
		}
		if _, ok, err := sameKey.FindCtx(ctx, tok); err != nil || !ok {
			t.Errorf("another store with the same key did not find %q (err %v)", tok, err)
		}
	}
	// Deleting through the other key's store must not touch these sessions.
	if err := s2.DeleteCtx(ctx, tokens[0]); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s1.FindCtx(ctx, tokens[0]); !ok {
		t.Error("DeleteCtx through a store with another key removed the session")
	}
}

// OpenMigrated's copy of the migrated image is the schema Migrate makes, at
// the same version, and it never overwrites a file.
func TestOpenMigratedMatchesMigrate(t *testing.T) {
	ctx := t.Context()
	migrated, _ := openDB(t, false)
	if _, err := migrated.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	path := newDSN(t, "copy.db")
	copied, err := store.OpenMigrated(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer copied.Close()
	schema := func(db *store.DB) string {
		if onPostgres() { // the catalog keeps no CREATE statements
			return strings.Join(schemaOf(t, db.RawSQL(), true), "\n")
		}
		var b strings.Builder
		rows, err := db.RawSQL().QueryContext(ctx, `SELECT type, name, COALESCE(sql, '') FROM sqlite_master ORDER BY type, name`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var typ, name, sql string
			if err := rows.Scan(&typ, &name, &sql); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s %s %s\n", typ, name, sql)
		}
		return b.String()
	}
	if a, b := schema(migrated), schema(copied); a != b || !strings.Contains(a, "CREATE TABLE reviews") && !strings.Contains(a, "table reviews") {
		t.Errorf("schema of the copy differs from Migrate's:\n%s\nvs\n%s", b, a)
	}
	sa, err1 := migrated.Status(ctx)
	sb, err2 := copied.Status(ctx)
	if err1 != nil || err2 != nil || sa != sb || sb.Current != sb.Known {
		t.Errorf("status: migrated %+v %v, copy %+v %v", sa, err1, sb, err2)
	}
	if _, err := store.OpenMigrated(ctx, path); err == nil {
		t.Error("OpenMigrated overwrote an existing database")
	}
}
