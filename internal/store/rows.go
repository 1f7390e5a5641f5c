package store

import (
	"context"
	"database/sql"
	"strings"
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
	for start := 0; start < n; start += rowsPerInsert {
		end := min(start+rowsPerInsert, n)
		var q strings.Builder
		q.WriteString(head)
		args := make([]any, 0, cols*(end-start))
		for i := start; i < end; i++ {
			if i > start {
				q.WriteString(", ")
			}
			q.WriteString(one)
			args = row(i, args)
		}
		q.WriteString(tail)
		if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
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
