package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
)

var pgSeq atomic.Int64

// PostgresDB returns the URL of a new database on the test bed's
// PostgreSQL (PORTAL_TEST_POSTGRES_URL; skipped or failed as Require says
// when it is unset), named after prefix, this process and a counter, and
// dropped when the test ends (WITH (FORCE): sessions a failed test left
// open are ended). With create the database exists, empty; without, only
// its name is taken (for store.OpenMigrated, which creates it from a
// migrated template).
func PostgresDB(t testing.TB, prefix string, create bool) string {
	t.Helper()
	dsn, drop, err := NewPostgresDB(Require(t, "PORTAL_TEST_POSTGRES_URL"), prefix, create)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Error(err)
		}
	})
	return dsn
}

// NewPostgresDB is PostgresDB outside a test (bench/pages' load program):
// a new database's URL on base's server and the func that drops it.
func NewPostgresDB(base, prefix string, create bool) (string, func() error, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, fmt.Errorf("PORTAL_TEST_POSTGRES_URL: %w", err)
	}
	name := fmt.Sprintf("%s_%d_%d_%d", prefix, os.Getpid(), time.Now().UnixNano()%1e6, pgSeq.Add(1))
	drop := func() error { return postgresAdmin(base, `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`) }
	if create {
		if err := postgresAdmin(base, `CREATE DATABASE "`+name+`"`); err != nil {
			return "", nil, err
		}
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}

// postgresAdmin runs stmt on the server's maintenance database.
func postgresAdmin(base, stmt string) error {
	db, err := sql.Open("pgx", base)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(context.Background(), stmt); err != nil {
		return fmt.Errorf("%s: %w", stmt, err)
	}
	return nil
}
