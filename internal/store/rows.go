package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// rowsPerInsert bounds the rows of one multi-row INSERT (insertRows): at
// most 14 parameters a row in the tables written so (audit events 11,
// usage records up to 14), well under SQLite's 32766 and PostgreSQL's
// 65535 parameters a statement.
const rowsPerInsert = 500

// insertRows runs head, n rows of cols placeholders each, and tail, as one
// statement per rowsPerInsert rows, in order; row(i, args) appends row i's
// values to args. An upsert's statement must not name one key twice:
// PostgreSQL refuses an ON CONFLICT DO UPDATE that would update a row
// twice (usage.LastOfEach).
func insertRows(ctx context.Context, tx *sql.Tx, n int, head string, cols int, tail string, row func(i int, args []any) []any) error {
	return insertRowsBy(ctx, tx, rowsPerInsert, n, head, cols, tail, row)
}

// insertRowsBy is insertRows with rowsPerInsert rows a statement.
func insertRowsBy(ctx context.Context, tx *sql.Tx, rowsPerInsert, n int, head string, cols int, tail string, row func(i int, args []any) []any) error {
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", cols), ", ") + ")"
	stmt := func(rows int) string { return head + strings.Repeat(one+", ", rows-1) + one + tail }
	// Every statement but the last has rowsPerInsert rows: its text and
	// the argument slice are made once (a flush of 50,000 pods built 12
	// MiB of statement texts otherwise).
	var full string
	if n >= rowsPerInsert {
		full = stmt(rowsPerInsert)
	}
	args := make([]any, 0, cols*min(n, rowsPerInsert))
	for start := 0; start < n; start += rowsPerInsert {
		end := min(start+rowsPerInsert, n)
		q := full
		if end-start < rowsPerInsert {
			q = stmt(end - start)
		}
		args = args[:0]
		for i := start; i < end; i++ {
			args = row(i, args)
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return err
		}
	}
	return nil
}

// A column of upsertRows: its name and whether it holds integers (a Go
// int, int64 or bool) rather than text (a string, or nil for NULL).
type upsertColumn struct {
	name string
	int  bool
}

// upsertRows inserts n rows into table's cols, then tail (an ON CONFLICT
// clause), in one transaction's statements; row(i, args) appends row i's
// values (strings, integers, bools, or nil for NULL) to args.
//
//   - SQLite: insertRows's multi-row INSERTs of rowsPerInsert rows.
//   - PostgreSQL: the rows copied (COPY ... FROM STDIN, in pgx's binary
//     format) into a temporary table of table's columns, then one INSERT
//     ... SELECT from it with tail: COPY itself cannot upsert. "Use COPY
//     FROM STDIN to load all the records in one command, instead of a
//     series of INSERT commands. This reduces parsing, planning, etc
//     overhead a great deal" (PostgreSQL's performance tips,
//     https://postgresql.org/docs/7/c49334943.htm; today's
//     https://www.postgresql.org/docs/current/populate.html). In make
//     bench's collector flush (50,000 pods in parts of 5,000, issue 33) a
//     part took 60-130 ms as one INSERT ... SELECT FROM unnest() of a
//     text[] or int8[] per column, the path before this one, and 45-60 ms
//     so (2026-12-07, the test bed's PostgreSQL 15: 11-23 ms the copy, the
//     rest the insert).
//
// On PostgreSQL each value is checked against its column's kind, and a
// wrong one is an error naming the table and column (SQLite stores what
// it is given: its columns have an affinity, not a type).
func (d *DB) upsertRows(ctx context.Context, tx *sql.Tx, table string, cols []upsertColumn, n int, tail string, row func(i int, args []any) []any) error {
	if n == 0 {
		return nil
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.name
	}
	list := strings.Join(names, ", ")
	head := "INSERT INTO " + table + " (" + list + ") "
	if !d.dialect.postgres {
		return insertRows(ctx, tx, n, head+"VALUES ", len(cols), tail, row)
	}
	stage := table + "_in"
	if _, err := tx.ExecContext(ctx, copyInQuery, &copyIn{stage: stage, table: table, cols: cols, names: names, n: n, row: row}); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, head+"SELECT "+list+" FROM pg_temp."+stage+tail)
	return err
}

// copyIn is what upsertRows copies on PostgreSQL: n rows of cols into the
// session's temporary table stage, made like table (its columns) at its
// first use on the connection and emptied at each commit ("ON COMMIT
// DELETE ROWS: All rows in the temporary table will be deleted at the end
// of each transaction block",
// https://www.postgresql.org/docs/current/sql-createtable.html). It is the
// one argument of copyInQuery, which pgConn.ExecContext runs through the
// transaction's own pgx connection (database/sql's Tx has no other way to
// it).
type copyIn struct {
	stage, table string
	cols         []upsertColumn
	names        []string
	n            int
	row          func(i int, args []any) []any
}

// copyInQuery is the query text that carries a copyIn.
const copyInQuery = "-- store: COPY FROM STDIN (copyIn)"

// run copies c's rows on conn, in the transaction conn is in.
func (c *copyIn) run(ctx context.Context, conn *pgx.Conn) (int64, error) {
	if _, err := conn.Exec(ctx, "CREATE TEMP TABLE IF NOT EXISTS "+c.stage+" (LIKE "+c.table+") ON COMMIT DELETE ROWS"); err != nil {
		return 0, fmt.Errorf("store: %s: temporary table: %w", c.table, err)
	}
	return conn.CopyFrom(ctx, pgx.Identifier{"pg_temp", c.stage}, c.names, &copyRows{c: c, i: -1})
}

// copyRows is a copyIn's rows as pgx's CopyFromSource, each value checked
// against its column's kind (an integer column's as int64).
type copyRows struct {
	c    *copyIn
	i    int
	args []any
	err  error
}

func (r *copyRows) Next() bool { r.i++; return r.err == nil && r.i < r.c.n }

func (r *copyRows) Values() ([]any, error) {
	r.args = r.c.row(r.i, r.args[:0])
	if len(r.args) != len(r.c.cols) {
		r.err = fmt.Errorf("store: %s: row %d has %d values, want %d", r.c.table, r.i, len(r.args), len(r.c.cols))
		return nil, r.err
	}
	for j, c := range r.c.cols {
		if c.int {
			v, err := asInt64(r.args[j])
			if err != nil {
				r.err = fmt.Errorf("store: %s.%s: %w", r.c.table, c.name, err)
				return nil, r.err
			}
			r.args[j] = v
			continue
		}
		switch v := r.args[j].(type) {
		case nil, string:
		default:
			r.err = fmt.Errorf("store: %s.%s: a %T where text is due", r.c.table, c.name, v)
			return nil, r.err
		}
	}
	return r.args, nil
}

func (r *copyRows) Err() error { return r.err }

// asInt64 is an integer column's value as int64 (a bool as 0 or 1, as
// SQLite's driver and the PostgreSQL connector's int8 codec write one).
func asInt64(v any) (int64, error) {
	switch v := v.(type) {
	case int64:
		return v, nil
	case int:
		return int64(v), nil
	case bool:
		if v {
			return 1, nil
		}
		return 0, nil
	}
	return 0, fmt.Errorf("a %T where an integer is due", v)
}
