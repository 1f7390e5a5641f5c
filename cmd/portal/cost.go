package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
)

// loadRateCard reads --rate-card; nil without one.
func loadRateCard(path string) (*usage.RateCard, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--rate-card: %w", err)
	}
	card, err := usage.ParseRateCard(b)
	if err != nil {
		return nil, fmt.Errorf("--rate-card %s: %w", path, err)
	}
	return card, nil
}

// closeGrace is how long after a month ends its statements are frozen:
// time for the collector to write the month's last hour.
const closeGrace = 2 * time.Hour

// monthCloser freezes last month's statements once it has ended (and the
// grace passed): at start and then every interval. CloseMonth is idempotent
// and transactional, so a restart, or two portals at once, never freeze a
// month twice.
type monthCloser struct {
	db       *store.DB
	rates    *usage.RateCard
	accel    map[string]usage.InstanceAccel
	now      func() time.Time
	logger   *slog.Logger
	interval time.Duration
}

func newMonthCloser(db *store.DB, rates *usage.RateCard, cluster provision.ClusterSettings, logger *slog.Logger) *monthCloser {
	return &monthCloser{db: db, rates: rates, accel: usage.AcceleratorsOf(cluster.AcceleratorTable()), now: time.Now, logger: logger, interval: 15 * time.Minute}
}

// once closes the last closable month if it is not closed yet.
func (m *monthCloser) once(ctx context.Context) {
	month := store.LastClosableMonth(m.now(), closeGrace)
	closed, err := m.db.CloseMonth(ctx, month, m.rates, m.accel, m.now())
	switch {
	case errors.Is(err, store.ErrNoRateCard):
		// Nothing to freeze without prices; the pages say so.
	case err != nil:
		m.logger.Error("closing the month's statements failed; will try again", "month", month.Label(), "err", err)
	case closed:
		m.logger.Info("month closed: statements frozen", "month", month.Label())
	}
}

// Run closes months until ctx ends.
func (m *monthCloser) Run(ctx context.Context) {
	t := time.NewTicker(m.interval)
	defer t.Stop()
	for {
		m.once(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
