package store

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestSQLiteStatementsArePreparedOnce: a query run again on a connection
// reuses its prepared statement; the same text run while its first rows
// are still open (nested, inside one transaction) gets a statement of its
// own and both read the right rows; the cache stays bounded.
func TestSQLiteStatementsArePreparedOnce(t *testing.T) {
	ctx := context.Background()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.sql.SetMaxOpenConns(1) // one connection: its cache is the one used
	if _, err := d.sql.ExecContext(ctx, `CREATE TABLE t (n INTEGER)`); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := d.sql.ExecContext(ctx, `INSERT INTO t (n) VALUES (?)`, i); err != nil {
			t.Fatal(err)
		}
	}
	const q = `SELECT n FROM t WHERE n >= ? ORDER BY n`
	before := stmtPrepares.Load()
	for range 50 {
		got, err := column[int64](ctx, d.sql, q, 3)
		if err != nil || fmt.Sprint(got) != "[3 4]" {
			t.Fatalf("query = %v, %v", got, err)
		}
	}
	if n := stmtPrepares.Load() - before; n != 1 {
		t.Errorf("50 runs of one query prepared %d statements, want 1", n)
	}

	// Nested: the outer rows stay open while the same text runs again.
	tx, err := d.sql.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, q, 0)
	if err != nil {
		t.Fatal(err)
	}
	var outer, inner []int64
	for rows.Next() {
		var n int64
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		outer = append(outer, n)
		got, err := column[int64](ctx, tx, q, 4)
		if err != nil {
			t.Fatal(err)
		}
		inner = append(inner, got...)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if fmt.Sprint(outer) != "[0 1 2 3 4]" || fmt.Sprint(inner) != "[4 4 4 4 4]" {
		t.Errorf("nested runs of one query read outer %v inner %v; want [0 1 2 3 4] and [4 4 4 4 4]", outer, inner)
	}
	tx.Rollback()

	// Bounded: many distinct texts never hold more than stmtCacheMax.
	conn, err := d.sql.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for i := range stmtCacheMax + 10 {
		if _, err := conn.ExecContext(ctx, fmt.Sprintf(`SELECT %d`, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := conn.Raw(func(c any) error {
		if n := len(c.(*stmtConn).stmts); n > stmtCacheMax {
			t.Errorf("%d cached statements, want at most %d", n, stmtCacheMax)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// Big statements (more than stmtCacheBigArgs parameters: multi-row
	// INSERTs of every row count) are kept one at a time; the one kept is
	// reused while it is the one run.
	insert := func(rows int) {
		t.Helper()
		q := `INSERT INTO t (n) VALUES (?)` + strings.Repeat(`, (?)`, rows-1)
		args := make([]any, rows)
		for i := range args {
			args[i] = i
		}
		if _, err := conn.ExecContext(ctx, q, args...); err != nil {
			t.Fatal(err)
		}
	}
	bigKept := func() (big int) {
		t.Helper()
		if err := conn.Raw(func(c any) error {
			for q := range c.(*stmtConn).stmts {
				if strings.Count(q, "?") > stmtCacheBigArgs {
					big++
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return big
	}
	for rows := stmtCacheBigArgs + 1; rows < stmtCacheBigArgs+40; rows++ {
		insert(rows)
	}
	if n := bigKept(); n != 1 {
		t.Errorf("after 39 big statements of different texts, %d kept, want 1", n)
	}
	before = stmtPrepares.Load()
	for range 5 {
		insert(2 * stmtCacheBigArgs)
	}
	if n := stmtPrepares.Load() - before; n != 1 {
		t.Errorf("5 runs of one big statement prepared %d statements, want 1", n)
	}
}
