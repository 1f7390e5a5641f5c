package store_test

import (
	"fmt"
	"strings"
	"testing"
)

// upsertRows writes integers, bools and NULLs as each column says, and
// refuses a row of the wrong width and (on PostgreSQL, where the rows are
// copied in the columns' types) a value of the wrong kind with an error
// naming the column, writing nothing of the refused call. The PostgreSQL
// pass of make test (PORTAL_TEST_STORE_ENGINE=postgres) runs the copy's
// path (a later call on the connection finds its temporary table empty:
// one that still held an earlier call's n1 would update n1 twice in one
// statement, which PostgreSQL refuses); the SQLite pass insertRows's.
func TestUpsertRowsColumns(t *testing.T) {
	ctx := t.Context()
	db, _ := openDB(t, true)
	if err := db.UpsertNodeSpansForTest(ctx, [][]any{
		{"hp", "n1", "2026-11-03T10:00:00.000000000Z", nil, "ml.p5.48xlarge", int64(8), true},
		{"hp", "n2", "2026-11-03T10:00:00.000000000Z", "2026-11-03T11:00:00.000000000Z", "ml.p5.48xlarge", 4, false},
	}); err != nil {
		t.Fatal(err)
	}
	count := func() (n, sched, open, accel int) {
		t.Helper()
		if err := db.RawSQL().QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(schedulable), 0),
  COALESCE(SUM(CASE WHEN to_at IS NULL THEN 1 ELSE 0 END), 0), COALESCE(SUM(accelerators), 0) FROM usage_node_spans`).Scan(&n, &sched, &open, &accel); err != nil {
			t.Fatal(err)
		}
		return
	}
	if n, sched, open, accel := count(); n != 2 || sched != 1 || open != 1 || accel != 12 {
		t.Fatalf("%d rows, %d schedulable, %d open, %d accelerators; want 2, 1, 1, 12", n, sched, open, accel)
	}
	bads := []struct {
		row  []any
		want string // in PostgreSQL's error
	}{
		{[]any{"hp", "n3", "2026-11-03T10:00:00.000000000Z"}, "values"},
	}
	if db.Postgres() {
		// SQLite stores what it is given (its columns have an affinity,
		// not a type: https://sqlite.org/datatype3.html); the arrays
		// cannot.
		bads = append(bads, []struct {
			row  []any
			want string
		}{
			{[]any{"hp", "n3", "2026-11-03T10:00:00.000000000Z", nil, "ml.p5.48xlarge", "8", true}, "accelerators"},
			{[]any{"hp", 3, "2026-11-03T10:00:00.000000000Z", nil, "ml.p5.48xlarge", 8, true}, "node"},
		}...)
	}
	for _, bad := range bads {
		rows := [][]any{{"hp", "n4", "2026-11-03T10:00:00.000000000Z", nil, "ml.p5.48xlarge", 8, true}, bad.row}
		err := db.UpsertNodeSpansForTest(ctx, rows)
		if err == nil || (db.Postgres() && !strings.Contains(err.Error(), bad.want)) {
			t.Errorf("row %v: err %v, want one naming %q", bad.row, err, bad.want)
		}
	}
	if n, _, _, _ := count(); n != 2 {
		t.Fatalf("%d rows after the refused calls, want 2", n)
	}
	// More rows than one statement takes on either engine (500 on SQLite,
	// 5,000 on PostgreSQL), the last one updating n1 (its key is there).
	var many [][]any
	for i := range 5002 {
		many = append(many, []any{"hp", fmt.Sprintf("m%d", i), "2026-11-03T10:00:00.000000000Z", nil, "ml.p5.48xlarge", 1 + i%8, i%2 == 0})
	}
	many = append(many, []any{"hp", "n1", "2026-11-03T10:00:00.000000000Z", nil, "ml.p5.48xlarge", 8, false})
	if err := db.UpsertNodeSpansForTest(ctx, many); err != nil {
		t.Fatal(err)
	}
	// 5,002 new rows: 2,501 schedulable, 5,002 open, accelerators 1..8
	// cycling (625 full cycles of 36, then 1 and 2); n1 no longer schedulable.
	if n, sched, open, accel := count(); n != 5004 || sched != 2501 || open != 5003 || accel != 12+625*36+3 {
		t.Fatalf("%d rows, %d schedulable, %d open, %d accelerators; want 5004, 2501, 5003, %d", n, sched, open, accel, 12+625*36+3)
	}
}
