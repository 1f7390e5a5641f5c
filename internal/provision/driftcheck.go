package provision

import (
	"context"
	"log/slog"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// ConnVersion names a connection and the approved version live on the
// cluster.
type ConnVersion struct {
	ConnectionID int64
	Version      int
}

// DriftChecker periodically compares every provisioned connection with the
// plan of its approved version and saves what differs. Its edges are plain
// functions so that cmd/portal wires the store and the Applier without
// provision importing either's types.
type DriftChecker struct {
	List     func(ctx context.Context) ([]ConnVersion, error)
	Plans    func(ctx context.Context, connID int64, version int) (Plan, error)
	Check    func(ctx context.Context, p Plan) ([]workflow.DriftItem, error)
	Save     func(ctx context.Context, connID int64, items []workflow.DriftItem, checkErr string, now time.Time) error
	Interval time.Duration
	Clock    func() time.Time
	Logger   *slog.Logger
}

// RunOnce checks every provisioned connection once and returns how many
// have drift. A failed check is saved as such, never as "no drift".
func (d *DriftChecker) RunOnce(ctx context.Context) (int, error) {
	now := time.Now
	if d.Clock != nil {
		now = d.Clock
	}
	conns, err := d.List(ctx)
	if err != nil {
		return 0, err
	}
	drifted := 0
	for _, cv := range conns {
		if ctx.Err() != nil {
			return drifted, ctx.Err()
		}
		var items []workflow.DriftItem
		checkErr := ""
		p, err := d.Plans(ctx, cv.ConnectionID, cv.Version)
		if err == nil {
			items, err = d.Check(ctx, p)
		}
		if err != nil {
			checkErr = err.Error()
		}
		if len(items) > 0 {
			drifted++
		}
		if err := d.Save(context.WithoutCancel(ctx), cv.ConnectionID, items, checkErr, now()); err != nil {
			return drifted, err
		}
	}
	return drifted, nil
}

// Run checks every Interval (default 10 minutes) until ctx is done.
func (d *DriftChecker) Run(ctx context.Context) {
	interval := d.Interval
	if interval <= 0 {
		interval = 10 * time.Minute
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if n, err := d.RunOnce(ctx); err != nil && ctx.Err() == nil {
			if d.Logger != nil {
				d.Logger.Error("drift check failed", "err", err)
			}
		} else if n > 0 && d.Logger != nil {
			d.Logger.Warn("drift found", "connections", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
