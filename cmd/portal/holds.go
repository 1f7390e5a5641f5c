package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
)

// endDateHolds runs the end-date rule (store.EndDateHolds) at once and then
// every interval until ctx is done: 14 and 3 days before a live
// connection's contract end date its owners are told, and once the date
// has passed the system proposes a hold that an admin confirms. Each stage
// is recorded once per connection and end date, so restarts and a second
// replica repeat nothing. Nothing is revoked or held without an admin.
// (The review scheduler of issue 13 may take this loop over.)
func endDateHolds(ctx context.Context, db *store.DB, every time.Duration, now func() time.Time, logger *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		rep, err := db.EndDateHolds(ctx, now())
		switch {
		case err != nil && ctx.Err() == nil:
			logger.Error("end-date holds", "err", err)
		case rep.Notices+rep.Proposals > 0:
			logger.Info("end-date holds", "notices", rep.Notices, "proposals", rep.Proposals)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// exceptionSweep runs the exceptions' automatic steps
// (store.SweepExceptions) at once and then every interval until ctx is
// done: an exception whose end passed is reverted (the intent recorded with
// its reapply job, which the provisioning workers run), and the revert is
// recorded done once that job succeeded. Each step changes an exception
// only from the state it found, so a restart, a crash between the steps or
// a second replica does each once.
func exceptionSweep(ctx context.Context, db *store.DB, every time.Duration, now func() time.Time, logger *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		rep, err := db.SweepExceptions(ctx, now())
		switch {
		case err != nil && ctx.Err() == nil:
			logger.Error("exception sweep", "err", err)
		case rep.Expired+rep.Applied+rep.Reverted+rep.Requeued > 0:
			logger.Info("exception sweep", "expired", rep.Expired, "applied", rep.Applied, "reverted", rep.Reverted, "requeued", rep.Requeued)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
