package store_test

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, for creating and dropping test databases

	"github.com/hyperpod-governance/portal/internal/support/testenv"
)

// The store suite runs on both engines: make test runs `go test
// ./internal/store` once on SQLite and once more with
// PORTAL_TEST_STORE_ENGINE=postgres, against the test bed's PostgreSQL
// (hack/testbed/postgres.sh, PORTAL_TEST_POSTGRES_URL). Each test gets its
// own database: a temporary SQLite file, or a PostgreSQL database created
// for it (copied from a migrated template, see store.OpenMigrated) and
// dropped afterwards.

// onPostgres reports whether this run is the PostgreSQL pass.
func onPostgres() bool { return os.Getenv("PORTAL_TEST_STORE_ENGINE") == "postgres" }

// newDSN returns where a test's new database goes: on SQLite a path name
// in a temporary directory; on the PostgreSQL pass the URL of a database
// that does not exist yet, dropped when the test ends. Pass it to
// store.OpenMigrated, or create it empty with emptyDSN.
func newDSN(t testing.TB, name string) string {
	t.Helper()
	if !onPostgres() {
		return filepath.Join(t.TempDir(), name)
	}
	return newPostgresDSN(t)
}

// newPostgresDSN is newDSN for PostgreSQL whatever the pass (tests that
// compare the two engines use both): a database that does not exist yet.
func newPostgresDSN(t testing.TB) string {
	t.Helper()
	return testenv.PostgresDB(t, "portal_t", false)
}

// emptyDSN is newDSN for a database that exists but has no schema (for
// store.Open followed by Migrate): a new SQLite file is created by Open.
func emptyDSN(t testing.TB, name string) string {
	t.Helper()
	if onPostgres() {
		return emptyPostgresDSN(t)
	}
	return newDSN(t, name)
}

// emptyPostgresDSN is an empty PostgreSQL database whatever the pass.
func emptyPostgresDSN(t testing.TB) string {
	t.Helper()
	return testenv.PostgresDB(t, "portal_t", true)
}

// dropTrigger is the statement that drops trigger name of table, as an
// attacker with write access to the database would before tampering:
// PostgreSQL names a trigger with its table, SQLite alone.
func dropTrigger(name, table string) string {
	if onPostgres() {
		return "DROP TRIGGER " + name + " ON " + table
	}
	return "DROP TRIGGER " + name
}

// foreignKeyCheck lists foreign key violations: SQLite's PRAGMA
// foreign_key_check. PostgreSQL checks every foreign key at each statement
// (none here is deferred), so a database can hold no violation: nothing to
// list.
func foreignKeyCheck() string {
	if onPostgres() {
		return `SELECT 1 WHERE false`
	}
	return `PRAGMA foreign_key_check`
}

// tableCount counts the tables named name (0 or 1).
func tableCount(name string) string {
	if onPostgres() {
		return `SELECT count(*) FROM pg_class WHERE relkind = 'r' AND relname = '` + name + `'`
	}
	return `SELECT count(*) FROM sqlite_master WHERE name = '` + name + `'`
}

// indexNames lists the names of the indexes declared on table (not those
// of its primary key), sorted.
func indexNames(table string) string {
	if onPostgres() {
		return `SELECT indexname FROM pg_indexes WHERE schemaname = 'public' AND tablename = '` + table + `' AND indexname != '` + table + `_pkey' ORDER BY indexname`
	}
	return `SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = '` + table + `' AND sql IS NOT NULL ORDER BY name`
}

// syncSequences makes every identity column's next value follow the
// largest id, after a test wrote rows with explicit ids (SQLite's INTEGER
// PRIMARY KEY takes the largest id plus one; a PostgreSQL identity column
// a sequence that explicit ids do not advance).
func syncSequences(t testing.TB, raw *sql.DB) {
	t.Helper()
	if !onPostgres() {
		return
	}
	rows, err := raw.QueryContext(t.Context(), `SELECT table_name, column_name FROM information_schema.columns
WHERE table_schema = 'public' AND is_identity = 'YES' AND identity_generation = 'BY DEFAULT'`)
	if err != nil {
		t.Fatal(err)
	}
	var stmts []string
	for rows.Next() {
		var tbl, col string
		if err := rows.Scan(&tbl, &col); err != nil {
			t.Fatal(err)
		}
		stmts = append(stmts, fmt.Sprintf(`SELECT setval(pg_get_serial_sequence('%s', '%s'), COALESCE(max(%s), 0) + 1, false) FROM %s`, tbl, col, col, tbl))
	}
	rows.Close()
	for _, s := range stmts {
		if _, err := raw.ExecContext(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
}

// columnNames lists the columns of table in order.
func columnNames(table string) string {
	if onPostgres() {
		return `SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = '` + table + `' ORDER BY ordinal_position`
	}
	return `SELECT name FROM pragma_table_info('` + table + `')`
}
