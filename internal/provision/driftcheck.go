package provision

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hyperpod-governance/portal/internal/slurm"
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
	List  func(ctx context.Context) ([]ConnVersion, error)
	Plans func(ctx context.Context, connID int64, version int) (Plan, error)
	// CheckAll checks up to Batch plans at once (DriftAllOf: one list per
	// kind for the batch, not requests per object), one result per plan,
	// in order. lists is the pass's: every
	// batch of one RunOnce gets the same, so a kind listed without a label
	// selector is listed once per pass.
	CheckAll func(ctx context.Context, plans []Plan, lists *ListCache) []DriftResult
	// Batch is how many connections CheckAll checks at once (default
	// DriftBatch).
	Batch int
	// StopPolicies, when set, is the Kueue stopPolicy each connection's
	// hold puts on its queues (workflow.Hold.StopPolicy), read once per
	// pass; a connection it leaves out (a hold job of it is queued or
	// running) is not compared. A queue whose live stopPolicy differs is
	// drift (StopPolicyDrift): the plan never sets the field, so only this
	// notices something setting a hold back.
	StopPolicies func(ctx context.Context) (map[int64]string, error)
	// Save records a connection's report with what it was compared with
	// (store.SaveDrift drops a report the connection has moved on from).
	Save func(ctx context.Context, connID int64, basis workflow.DriftBasis, items []workflow.DriftItem, checkErr string, now time.Time) error
	// Slurm reads the accounting of the Slurm connections (SlurmDrift,
	// and SlurmHoldDrift with StopPolicies); nil: their check fails,
	// saying so.
	Slurm    slurm.Runner
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
	var stops map[int64]string
	if d.StopPolicies != nil {
		if stops, err = d.StopPolicies(ctx); err != nil {
			return 0, err
		}
	}
	return d.runBatches(ctx, conns, stops, now)
}

// DriftBatch is DriftChecker.Batch's default: the connections one snapshot
// covers. It bounds the objects held at once (about 20 per connection) and
// the length of the lists' label selector (a connection ID each).
const DriftBatch = 200

// runBatches checks the plans of up to Batch connections at once.
func (d *DriftChecker) runBatches(ctx context.Context, conns []ConnVersion, stops map[int64]string, now func() time.Time) (int, error) {
	size := d.Batch
	if size <= 0 {
		size = DriftBatch
	}
	drifted := 0
	lists := NewListCache()
	for start := 0; start < len(conns); start += size {
		if ctx.Err() != nil {
			return drifted, ctx.Err()
		}
		batch := conns[start:min(start+size, len(conns))]
		items := make([][]workflow.DriftItem, len(batch))
		errs := make([]error, len(batch))
		var plans []Plan
		var at []int
		for i, cv := range batch {
			p, err := d.Plans(ctx, cv.ConnectionID, cv.Version)
			if err != nil {
				errs[i] = err
				continue
			}
			if p.Slurm != nil {
				items[i], errs[i] = SlurmDrift(ctx, d.Slurm, p.Slurm)
				if errs[i] == nil {
					// The hold's job limit, compared with the hold
					// (SlurmHoldDrift), as a queue's stopPolicy is.
					var held []workflow.DriftItem
					held, errs[i] = SlurmHoldDrift(ctx, d.Slurm, p.Slurm, stops[cv.ConnectionID])
					items[i] = append(items[i], held...)
				}
				continue
			}
			p.StopPolicy = stops[cv.ConnectionID]
			plans = append(plans, p)
			at = append(at, i)
		}
		if len(plans) > 0 {
			res := d.CheckAll(ctx, plans, lists)
			for j, i := range at {
				if j >= len(res) {
					errs[i] = fmt.Errorf("provision: drift: no result for connection %d", batch[i].ConnectionID)
					continue
				}
				items[i], errs[i] = res[j].Items, res[j].Err
			}
		}
		for i, cv := range batch {
			checkErr := ""
			if errs[i] != nil {
				checkErr = errs[i].Error()
			}
			if len(items[i]) > 0 {
				drifted++
			}
			basis := workflow.DriftBasis{Version: cv.Version, StopPolicy: stops[cv.ConnectionID]}
			if err := d.Save(context.WithoutCancel(ctx), cv.ConnectionID, basis, items[i], checkErr, now()); err != nil {
				return drifted, err
			}
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
