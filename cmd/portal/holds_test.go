package main

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
)

// TestEndDateHoldsLoop: the loop makes its first pass at once (before the
// first tick) and returns when its context ends.
func TestEndDateHoldsLoop(t *testing.T) {
	ctx := t.Context()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	db.Close()
	var logs bytes.Buffer
	cctx, cancel := context.WithCancel(ctx)
	calls := 0
	now := func() time.Time {
		calls++
		cancel() // the first pass runs, then the loop sees ctx done
		return time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	}
	endDateHolds(cctx, db, time.Hour, now, slog.New(slog.NewTextHandler(&logs, nil)))
	if calls != 1 {
		t.Errorf("passes = %d, want 1 at once", calls)
	}
}
