package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"
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
// twice (lastOfEachKey).
func insertRows(ctx context.Context, tx *sql.Tx, n int, head string, cols int, tail string, row func(i int, args []any) []any) error {
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

// lastOfEachKey is rs with only the last record of each key, in the order
// of those last records.
func lastOfEachKey[T any](rs []T, key func(T) string) []T {
	last := make(map[string]int, len(rs))
	for i, r := range rs {
		last[key(r)] = i
	}
	if len(last) == len(rs) {
		return rs
	}
	out := make([]T, 0, len(last))
	for i, r := range rs {
		if last[key(r)] == i {
			out = append(out, r)
		}
	}
	return out
}

// A column of upsertRows: its name and, for PostgreSQL's arrays, whether
// it holds integers (int8) rather than text.
type upsertColumn struct {
	name string
	int  bool
}

// upsertRows inserts n rows into table's cols, then tail (an ON CONFLICT
// clause), in one transaction's statements; row(i, args) appends row i's
// values (strings, integers, bools, or nil for NULL) to args.
//
//   - SQLite: insertRows's multi-row INSERTs of rowsPerInsert rows.
//   - PostgreSQL: INSERT ... SELECT FROM unnest() of one array per column
//     (text[] or int8[]) per rowsPerArrayInsert rows: the server parses,
//     plans and binds one statement of len(cols) parameters instead of one
//     of 500 rows' worth per 500 rows (make bench, issue 33: the
//     collector's first flush of 50,000 pods and 10,000 Workloads spent
//     685 ms of its 1,144 ms writing them as multi-row INSERTs). "unnest
//     ... expands multiple arrays (possibly of different data types) to a
//     set of rows" (https://www.postgresql.org/docs/current/functions-array.html).
//
// The same rule as insertRows: no key twice (lastOfEachKey).
func (d *DB) upsertRows(ctx context.Context, tx *sql.Tx, table string, cols []upsertColumn, n int, tail string, row func(i int, args []any) []any) error {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.name
	}
	head := "INSERT INTO " + table + " (" + strings.Join(names, ", ") + ") "
	if !d.dialect.postgres {
		return insertRows(ctx, tx, n, head+"VALUES ", len(cols), tail, row)
	}
	for start := 0; start < n; start += rowsPerArrayInsert {
		end := min(start+rowsPerArrayInsert, n)
		if err := upsertArrays(ctx, tx, table, head, cols, end-start, tail, func(i int, args []any) []any { return row(start+i, args) }); err != nil {
			return err
		}
	}
	return nil
}

// rowsPerArrayInsert bounds the rows of one PostgreSQL upsert of column
// arrays (upsertRows): its arrays and their encoding are held at once, so
// 50,000 rows in one statement made the collector's flush benchmark's peak
// RSS grow by about 45 MiB; 5,000 a statement kept the time it saved.
const rowsPerArrayInsert = 5000

// upsertArrays is one statement of upsertRows on PostgreSQL: n rows as one
// array per column.
func upsertArrays(ctx context.Context, tx *sql.Tx, table, head string, cols []upsertColumn, n int, tail string, row func(i int, args []any) []any) error {
	texts := make([][]pgtype.Text, len(cols))
	ints := make([][]int64, len(cols))
	for j, c := range cols {
		if c.int {
			ints[j] = make([]int64, 0, n)
		} else {
			texts[j] = make([]pgtype.Text, 0, n)
		}
	}
	args := make([]any, 0, len(cols))
	for i := range n {
		args = row(i, args[:0])
		if len(args) != len(cols) {
			return fmt.Errorf("store: %s: row %d has %d values, want %d", table, i, len(args), len(cols))
		}
		for j, c := range cols {
			if c.int {
				v, err := asInt64(args[j])
				if err != nil {
					return fmt.Errorf("store: %s.%s: %w", table, c.name, err)
				}
				ints[j] = append(ints[j], v)
				continue
			}
			switch v := args[j].(type) {
			case nil:
				texts[j] = append(texts[j], pgtype.Text{})
			case string:
				texts[j] = append(texts[j], pgtype.Text{String: v, Valid: true})
			default:
				return fmt.Errorf("store: %s.%s: a %T where text is due", table, c.name, v)
			}
		}
	}
	q := strings.Builder{}
	q.WriteString(head + "SELECT * FROM unnest(")
	params := make([]any, len(cols))
	for j, c := range cols {
		if j > 0 {
			q.WriteString(", ")
		}
		if c.int {
			q.WriteString("?::int8[]")
			params[j] = ints[j]
		} else {
			q.WriteString("?::text[]")
			params[j] = texts[j]
		}
	}
	q.WriteString(")" + tail)
	_, err := tx.ExecContext(ctx, q.String(), params...)
	return err
}

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
