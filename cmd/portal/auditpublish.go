package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/hyperpod-governance/portal/internal/evidence"
	"github.com/hyperpod-governance/portal/internal/signing"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// publishAuditHeads publishes the audit chain's head once a UTC day (issue
// 31 item 11), trying at start and at every tick: every replica runs it,
// and the day's row decides inside the transaction that records it which
// one publishes (store.DB.PublishAuditHead), so a day gets one publication
// whatever the replicas and restarts.
func publishAuditHeads(ctx context.Context, db *store.DB, s *signing.Signer, logger *slog.Logger, tick <-chan time.Time, now func() time.Time) {
	for {
		h, published, err := publishAuditHead(ctx, db, s, now())
		switch {
		case err != nil && ctx.Err() == nil:
			logger.Error("audit head publication", "err", err)
		case published:
			logger.Info("audit chain head published", "day", h.Day, "event_id", h.HeadID, "events", h.HeadCount, "hash", h.HeadHash, "key_id", h.KeyID)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
	}
}

// publishAuditHead publishes today's (UTC) head unless it was: the newest
// event, the count up to it, its hash and time, signed with the
// installation key (signing.HeadLine), and the notice that carries it to
// the admins by mail and webhook (workflow.AuditHeadNotice). published is
// false when the day was already published (by this or another replica)
// or the trail is empty.
func publishAuditHead(ctx context.Context, db *store.DB, s *signing.Signer, now time.Time) (p store.AuditHeadPublication, published bool, err error) {
	day := now.UTC().Format(time.DateOnly)
	// A read first: most ticks find the day published and sign nothing.
	if done, err := db.AuditHeadPublished(ctx, day); err != nil || done {
		return p, false, err
	}
	h, err := db.AuditHead(ctx)
	if err != nil || h.ID == 0 {
		return p, false, err
	}
	at := evidence.AuditTime(h.At)
	line := signing.HeadLine(day, h.ID, h.Count, h.Hash, at)
	sig := s.Sign(signing.PurposeAuditHead, line)
	p = store.AuditHeadPublication{Day: day, HeadID: h.ID, HeadCount: h.Count, HeadHash: h.Hash, HeadAt: at, KeyID: s.KeyID(), Signature: sig, PublishedAt: now}
	notice := workflow.AuditHeadNotice(workflow.AuditHead{Day: day, ID: h.ID, Count: h.Count, Hash: h.Hash, At: at, Line: line, KeyID: s.KeyID(), Signature: sig})
	published, err = db.PublishAuditHead(ctx, p, notice)
	return p, published, err
}
