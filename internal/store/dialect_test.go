package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// schemaOf describes the schema of a migrated database in terms both
// engines share, one sorted line per fact: each table, each column with
// its type (PostgreSQL's spelled as the migrations write it for SQLite:
// bigint INTEGER, text TEXT, bytea BLOB) and nullability, each primary key,
// and each index with its uniqueness, columns and whether it is partial
// (indexes that back a UNIQUE constraint are named "(constraint)": the
// engines name them differently). goose's own table is left out.
func schemaOf(t *testing.T, raw *sql.DB, postgres bool) []string {
	t.Helper()
	var out []string
	query := func(q string, args ...any) [][]string { return queryRows(t, raw, q, args...) }
	if !postgres {
		for _, tr := range query(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name != 'goose_db_version'`) {
			tbl := tr[0]
			out = append(out, "table "+tbl)
			var pk []string
			for _, c := range query(`SELECT name, upper(type), "notnull", pk FROM pragma_table_info(?) ORDER BY pk, cid`, tbl) {
				null := "NULL"
				if c[2] == "1" || c[3] != "0" {
					null = "NOT NULL"
				}
				out = append(out, fmt.Sprintf("column %s.%s %s %s", tbl, c[0], c[1], null))
				if c[3] != "0" {
					pk = append(pk, c[0])
				}
			}
			out = append(out, fmt.Sprintf("primary key %s (%s)", tbl, strings.Join(pk, ", ")))
			for _, ix := range query(`SELECT name, "unique", origin, partial FROM pragma_index_list(?)`, tbl) {
				if ix[2] == "pk" {
					continue
				}
				name := ix[0]
				if ix[2] == "u" {
					name = "(constraint)"
				}
				var cols []string
				for _, c := range query(`SELECT COALESCE(name, '(expression)') FROM pragma_index_info(?) ORDER BY seqno`, ix[0]) {
					cols = append(cols, c[0])
				}
				out = append(out, fmt.Sprintf("index %s %s unique=%s partial=%s (%s)", tbl, name, ix[1], ix[3], strings.Join(cols, ", ")))
			}
		}
	} else {
		types := map[string]string{"bigint": "INTEGER", "text": "TEXT", "bytea": "BLOB"}
		for _, tr := range query(`SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE' AND table_name != 'goose_db_version'`) {
			tbl := tr[0]
			out = append(out, "table "+tbl)
			for _, c := range query(`SELECT column_name, data_type, is_nullable FROM information_schema.columns WHERE table_schema = 'public' AND table_name = ?`, tbl) {
				if c[0] == "rowid" && tbl == "aws_resources" {
					continue // SQLite's implicit rowid, explicit (migrations/00005)
				}
				typ, ok := types[c[1]]
				if !ok {
					typ = "unexpected " + c[1]
				}
				null := "NULL"
				if c[2] == "NO" {
					null = "NOT NULL"
				}
				out = append(out, fmt.Sprintf("column %s.%s %s %s", tbl, c[0], typ, null))
			}
			for _, ix := range query(`
SELECT i.relname, ix.indisunique, ix.indisprimary, ix.indpred IS NOT NULL,
  EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = ix.indexrelid AND c.contype = 'u'),
  (SELECT string_agg(pg_get_indexdef(ix.indexrelid, k, true), ', ' ORDER BY k) FROM generate_series(1, ix.indnatts) AS k)
FROM pg_index ix JOIN pg_class i ON i.oid = ix.indexrelid JOIN pg_class t ON t.oid = ix.indrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE n.nspname = 'public' AND t.relname = ?`, tbl) {
				b01 := func(s string) string {
					if s == "true" {
						return "1"
					}
					return "0"
				}
				if ix[2] == "true" {
					out = append(out, fmt.Sprintf("primary key %s (%s)", tbl, ix[5]))
					continue
				}
				name := ix[0]
				if ix[4] == "true" {
					name = "(constraint)"
				}
				out = append(out, fmt.Sprintf("index %s %s unique=%s partial=%s (%s)", tbl, name, b01(ix[1]), b01(ix[3]), ix[5]))
			}
		}
	}
	slices.Sort(out)
	return out
}

// The same migrations make the same tables, columns, keys and indexes on
// both engines: a migration written for SQLite alone (a type PostgreSQL
// spells differently, a statement only SQLite runs) fails here.
func TestPostgresSchemaMatchesSQLite(t *testing.T) {
	ctx := t.Context()
	lite, err := store.OpenMigrated(ctx, filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	// Migrated here, not copied from the template: this is the schema
	// `portal migrate` makes.
	pgDSN := emptyPostgresDSN(t)
	pg, err := store.Open(ctx, pgDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	if _, err := pg.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	a, b := schemaOf(t, lite.RawSQL(), false), schemaOf(t, pg.RawSQL(), true)
	if len(a) < 50 {
		t.Fatalf("SQLite schema has only %d facts: %q", len(a), a)
	}
	for _, l := range a {
		if !slices.Contains(b, l) {
			t.Errorf("PostgreSQL lacks: %s", l)
		}
	}
	for _, l := range b {
		if !slices.Contains(a, l) {
			t.Errorf("SQLite lacks: %s", l)
		}
	}
}

// Several replicas run `portal migrate` at once on a new database (an init
// container per pod): each succeeds, and every migration is applied once.
func TestConcurrentMigrate(t *testing.T) {
	ctx := t.Context()
	dsn := emptyDSN(t, "portal.db")
	known, count := knownMigrations(t)
	const replicas = 4
	var wg sync.WaitGroup
	errs := make([]error, replicas)
	for i := range replicas {
		wg.Go(func() {
			db, err := store.Open(ctx, dsn)
			if err != nil {
				errs[i] = err
				return
			}
			defer db.Close()
			st, err := db.Migrate(ctx)
			if err == nil && (st.Current != known || st.Known != known) {
				err = fmt.Errorf("status %+v, want %d", st, known)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %d: Migrate: %v", i, err)
		}
	}
	db, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n, distinct int
	if err := db.RawSQL().QueryRowContext(ctx, `SELECT count(*), count(DISTINCT version_id) FROM goose_db_version WHERE version_id > 0`).Scan(&n, &distinct); err != nil {
		t.Fatal(err)
	}
	if n != count || distinct != count {
		t.Errorf("goose_db_version has %d rows (%d versions), want each of the %d migrations once", n, distinct, count)
	}
}

// openTwice opens two handles on one new migrated database: two pools, as
// two replicas of the portal have.
func openTwice(t *testing.T) (*store.DB, *store.DB) {
	t.Helper()
	a, path := openDB(t, true)
	b, err := store.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return a, b
}

// Two replicas appending audit events at once never fork the hash chain:
// each append reads the head and writes the next event inside one write
// transaction, and write transactions are serialized across processes
// (BEGIN IMMEDIATE on SQLite, the writer advisory lock on PostgreSQL).
func TestConcurrentReplicasKeepOneAuditChain(t *testing.T) {
	ctx := t.Context()
	a, b := openTwice(t)
	now := time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)
	const workers, each = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers)
	for i, db := range []*store.DB{a, b, a, b, a, b, a, b}[:2*workers] {
		wg.Go(func() {
			for n := range each {
				if err := db.RecordClusterEvent(ctx, "test.append", workflow.SystemActor, fmt.Sprintf("worker %d event %d", i, n), now); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("append: %v", err)
	}
	n, brk, err := a.VerifyAudit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if brk != nil {
		t.Fatalf("the chain forked under concurrent appends: break at event %d (%s)", brk.ID, brk.Reason)
	}
	if n != 2*workers*each {
		t.Errorf("chain has %d events, want %d", n, 2*workers*each)
	}
}

// Claimers on two replicas take every job exactly once.
func TestConcurrentReplicasClaimEachJobOnce(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	other := f.replica(t)
	const jobs = 12
	for i := range jobs {
		f.approved(fmt.Sprintf("team%c", 'a'+i)) // queues its provisioning job
	}
	now := f.tick()
	var (
		mu      sync.Mutex
		claimed = map[int64][]string{}
		wg      sync.WaitGroup
	)
	for i, db := range []*store.DB{f.db, other, f.db, other} {
		wg.Go(func() {
			owner := fmt.Sprintf("replica%d", i)
			for {
				j, ok, err := db.ClaimJob(ctx, owner, now, time.Hour)
				if err != nil {
					t.Errorf("%s: ClaimJob: %v", owner, err)
					return
				}
				if !ok {
					return
				}
				mu.Lock()
				claimed[j.ID] = append(claimed[j.ID], owner)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(claimed) != jobs {
		t.Errorf("%d jobs claimed, want %d", len(claimed), jobs)
	}
	for id, by := range claimed {
		if len(by) != 1 {
			t.Errorf("job %d claimed %d times: %v", id, len(by), by)
		}
	}
}

// Batch claimers (ClaimJobs, the worker's re-apply batches) on two
// replicas, racing single claimers (ClaimJob), take every job exactly once.
func TestConcurrentReplicasClaimJobsEachJobOnce(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	other := f.replica(t)
	ids := f.reapplyJobs("team", 12)
	now := f.tick()
	var (
		mu      sync.Mutex
		claimed = map[int64][]string{}
		wg      sync.WaitGroup
	)
	start := make(chan struct{})
	for i, db := range []*store.DB{f.db, other, f.db, other} {
		wg.Go(func() {
			<-start
			owner := fmt.Sprintf("replica%d", i)
			for {
				var got []workflow.Job
				if i == 3 {
					j, ok, err := db.ClaimJob(ctx, owner, now, time.Hour)
					if err != nil {
						t.Errorf("%s: ClaimJob: %v", owner, err)
						return
					}
					if ok {
						got = append(got, j)
					}
				} else {
					js, err := db.ClaimJobs(ctx, owner, workflow.JobReapply, now, time.Hour, 2)
					if err != nil {
						t.Errorf("%s: ClaimJobs: %v", owner, err)
						return
					}
					got = js
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, j := range got {
					claimed[j.ID] = append(claimed[j.ID], owner)
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if len(claimed) != len(ids) {
		t.Errorf("%d jobs claimed, want %d", len(claimed), len(ids))
	}
	for id, by := range claimed {
		if len(by) != 1 {
			t.Errorf("job %d claimed %d times: %v", id, len(by), by)
		}
		if j := f.job(id); j.Attempts != 1 || j.LeaseOwner != by[0] {
			t.Errorf("job %d: attempts %d, leased to %q; want one attempt, leased to %s", id, j.Attempts, j.LeaseOwner, by[0])
		}
	}
}

// On PostgreSQL ClaimJobs, as ClaimJob, skips the jobs whose rows another
// transaction holds and takes the others, instead of waiting.
func TestPostgresClaimJobsSkipsLockedJob(t *testing.T) {
	if !onPostgres() {
		t.Skip("PostgreSQL's row locks; SQLite has one writer at a time (the PostgreSQL pass runs this)")
	}
	f := newFixture(t, 1)
	ctx := t.Context()
	ids := f.reapplyJobs("lock", 3)
	lockJobRow(t, f, ids[1])
	bounded, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	got, err := f.db.ClaimJobs(bounded, "w", workflow.JobReapply, f.tick(), time.Hour, 10)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(bounded.Err(), context.DeadlineExceeded) {
		t.Fatalf("the claim waited for the locked job instead of skipping it: %v", err)
	}
	var claimed []int64
	for _, j := range got {
		claimed = append(claimed, j.ID)
	}
	if err != nil || !slices.Equal(claimed, []int64{ids[0], ids[2]}) {
		t.Fatalf("ClaimJobs = %v, %v; want jobs %d and %d (job %d is locked)", claimed, err, ids[0], ids[2], ids[1])
	}
}

// On PostgreSQL a claimer skips a job whose row another transaction holds
// (FOR UPDATE SKIP LOCKED) and takes the next one, instead of waiting for
// it. The context only bounds the test should the claim wait.
func TestPostgresClaimSkipsLockedJob(t *testing.T) {
	if !onPostgres() {
		t.Skip("PostgreSQL's row locks; SQLite has one writer at a time (the PostgreSQL pass runs this)")
	}
	f := newFixture(t, 1)
	ctx := t.Context()
	var ids []int64
	for _, team := range []string{"red", "blue"} {
		_, j := f.approved(team)
		ids = append(ids, j.ID)
	}
	lockJobRow(t, f, ids[0])
	bounded, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	j, ok, err := f.db.ClaimJob(bounded, "w", f.tick(), time.Hour)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(bounded.Err(), context.DeadlineExceeded) {
		t.Fatalf("the claim waited for the locked job instead of skipping it: %v", err)
	}
	if err != nil || !ok || j.ID != ids[1] {
		t.Fatalf("ClaimJob = %d, %v, %v; want job %d (job %d is locked)", j.ID, ok, err, ids[1], ids[0])
	}
}

// The duplicate-key check reads each driver's error code.
func TestUniqueViolationByCode(t *testing.T) {
	db, _ := openDB(t, true)
	ctx := t.Context()
	ins := `INSERT INTO singletons (name, owner, heartbeat_at, started_at) VALUES ('x', 'a', 'b', 'c')`
	if _, err := db.RawSQL().ExecContext(ctx, ins); err != nil {
		t.Fatal(err)
	}
	_, err := db.RawSQL().ExecContext(ctx, ins)
	if err == nil || !store.IsUniqueViolation(err) {
		t.Errorf("duplicate primary key: %v, IsUniqueViolation = false", err)
	}
	if store.IsUniqueViolation(errors.New("UNIQUE constraint failed: singletons.name")) {
		t.Error("a message that merely says UNIQUE counted as a violation")
	}
	_, err = db.RawSQL().ExecContext(ctx, `INSERT INTO singletons (name, owner, heartbeat_at, started_at) VALUES ('y', NULL, 'b', 'c')`)
	if err == nil || store.IsUniqueViolation(err) {
		t.Errorf("a NOT NULL failure: %v, counted as a duplicate", err)
	}
}

// The database URL's password appears in no error.
func TestOpenRedactsPassword(t *testing.T) {
	for _, dsn := range []string{
		"postgres://portal:s3cret-pw@127.0.0.1:1/portal?sslmode=disable&connect_timeout=1",
		"postgresql://portal:s3cret-pw@127.0.0.1:1/portal?sslmode=bogus",
		"postgres://portal:s3cret-pw@[::1/portal",
	} {
		db, err := store.Open(t.Context(), dsn)
		if err == nil {
			db.Close()
			t.Fatalf("Open(%s) succeeded", store.RedactDSN(dsn))
		}
		if strings.Contains(err.Error(), "s3cret-pw") {
			t.Errorf("error names the password: %v", err)
		}
		if r := store.RedactDSN(dsn); strings.Contains(r, "s3cret-pw") {
			t.Errorf("RedactDSN(...) = %s", r)
		}
	}
}

// lockJobRow holds job id's row locked (SELECT ... FOR UPDATE in an open
// transaction) until the test ends.
func lockJobRow(t *testing.T, f *fixture, id int64) {
	t.Helper()
	holder, err := f.raw.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Rollback() }) //nolint:errcheck
	if _, err := holder.ExecContext(t.Context(), `SELECT id FROM jobs WHERE id = ? FOR UPDATE`, id); err != nil {
		t.Fatal(err)
	}
}

// replica opens the fixture's database a second time, as another replica
// does, until the test ends.
func (f *fixture) replica(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(t.Context(), f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// queryRows is every row of q on raw, each column as text (NULL as "").
func queryRows(t testing.TB, raw *sql.DB, q string, args ...any) [][]string {
	t.Helper()
	rows, err := raw.QueryContext(t.Context(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var res [][]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			row[i] = v.String
		}
		res = append(res, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return res
}
