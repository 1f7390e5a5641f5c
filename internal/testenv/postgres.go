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
	base := Require(t, "PORTAL_TEST_POSTGRES_URL")
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("PORTAL_TEST_POSTGRES_URL: %v", err)
	}
	name := fmt.Sprintf("%s_%d_%d_%d", prefix, os.Getpid(), time.Now().UnixNano()%1e6, pgSeq.Add(1))
	t.Cleanup(func() {
		if err := postgresAdmin(base, `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`); err != nil {
			t.Error(err)
		}
	})
	if create {
		if err := postgresAdmin(base, `CREATE DATABASE "`+name+`"`); err != nil {
			t.Fatal(err)
		}
	}
	u.Path = "/" + name
	return u.String()
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
