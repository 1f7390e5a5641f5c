package usage

import (
	"context"
	"log/slog"
	"sort"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// The evaluation loop of the signals: what EvaluateTeam and EvaluateCluster
// decide, over the rows a SignalStore keeps, recorded when they fire.

// SignalStore is what the signals' evaluator reads and records
// (internal/store's *DB): the stored hourly rows, the live contracts, and
// the events that fire. The store only reads and records; the evaluation is
// here, beside the pure evaluators.
type SignalStore interface {
	ClusterHours(ctx context.Context, cluster string, from, to time.Time) ([]ClusterHour, error)
	TeamHours(ctx context.Context, team string, from, to time.Time) ([]Hour, error)
	// LiveContracts is the approved contract of each team's newest live
	// connection.
	LiveContracts(ctx context.Context) (map[string]workflow.Contract, error)
	// RecordFired stores an event for each firing status that has no open
	// one of its team and signal yet, and says how many it stored.
	RecordFired(ctx context.Context, statuses []SignalStatus, now time.Time) (int, error)
	// KueueBorrowing is the collector's samples of Kueue's and the
	// portal's borrowing (cluster "" every cluster's) from from on, with
	// each series' last sample before from.
	KueueBorrowing(ctx context.Context, cluster string, from time.Time) ([]BorrowSample, error)
}

// Signals evaluates the watched signals over the stored usage rows: every
// team with a live connection (its newest one's approved contract) and the
// cluster.
type Signals struct {
	Store        SignalStore
	Accelerators map[string]int // per instance type
	Thresholds   Thresholds
	// ClusterOwner answers for the cluster's signals (the platform's
	// admins).
	ClusterOwner string
	// Utilization is how busy the GPUs each namespace holds are
	// (cmd/portal hands in the Prometheus client, which this package never
	// imports). nil: no --prometheus-url, and the utilization signal says
	// "no-data".
	Utilization Utilization
	Logger      *slog.Logger
}

// Statuses computes every signal at now; teams, when not nil, limits the
// teams' signals to those (and leaves out the cluster's).
func (s Signals) Statuses(ctx context.Context, now time.Time, teams []string) ([]SignalStatus, error) {
	th := s.Thresholds
	if th == (Thresholds{}) {
		th = DefaultThresholds
	}
	from := HourStart(now).Add(-th.Window())
	to := HourStart(now).Add(time.Hour)
	cluster, err := s.Store.ClusterHours(ctx, "", from, to)
	if err != nil {
		return nil, err
	}
	contracts, err := s.Store.LiveContracts(ctx)
	if err != nil {
		return nil, err
	}
	var out []SignalStatus
	if teams == nil {
		out = append(out, EvaluateCluster(cluster, now, th, s.ClusterOwner)...)
		samples, err := s.Store.KueueBorrowing(ctx, "", now.Add(-kueueWindow(th)))
		if err != nil {
			return nil, err
		}
		out = append(out, EvaluateKueueAccount(samples, now, th, s.ClusterOwner))
	}
	names := make([]string, 0, len(contracts))
	for t := range contracts {
		if teams == nil || containsStr(teams, t) {
			names = append(names, t)
		}
	}
	sort.Strings(names)
	for _, t := range names {
		hours, err := s.Store.TeamHours(ctx, t, from, to)
		if err != nil {
			return nil, err
		}
		series := s.utilization(ctx, t, hours, now, th)
		out = append(out, EvaluateTeam(TeamInput{Contract: contracts[t], Accelerators: s.Accelerators, Hours: hours, Utilization: series}, cluster, now, th)...)
	}
	return out, nil
}

// utilization reads, from the source, the hourly utilization of each
// namespace in which the team held accelerators during the utilization
// signal's window (the whole hours before now). A failure is the series'
// Err (that signal says so), not the evaluation's.
func (s Signals) utilization(ctx context.Context, team string, rows []Hour, now time.Time, th Thresholds) UtilizationSeries {
	if !Configured(s.Utilization) {
		return UtilizationSeries{}
	}
	end := HourStart(now)
	from := end.Add(-time.Duration(th.UtilizationDays) * 24 * time.Hour)
	out := UtilizationSeries{Configured: true, Points: map[string][]Point{}}
	var namespaces []string
	for _, r := range rows {
		if r.AccelSeconds() > 0 && !r.Start.Before(from) && r.Start.Before(end) && !containsStr(namespaces, r.Namespace) {
			namespaces = append(namespaces, r.Namespace)
		}
	}
	sort.Strings(namespaces)
	for _, ns := range namespaces {
		points, err := s.Utilization.NamespaceUtilization(ctx, ns, from, end, time.Hour)
		if err != nil {
			if s.Logger != nil {
				s.Logger.WarnContext(ctx, "utilization unavailable for the signals", "team", team, "namespace", ns, "err", err)
			}
			out.Err = err
			return out
		}
		out.Points[ns] = points
	}
	return out
}

// Evaluate computes every signal at now and records those that fire (one
// open event per team and signal); it returns how many new events it
// stored. The background loop calls it; it is safe to call concurrently.
func (s Signals) Evaluate(ctx context.Context, now time.Time) (int, error) {
	st, err := s.Statuses(ctx, now, nil)
	if err != nil {
		return 0, err
	}
	return s.Store.RecordFired(ctx, st, now)
}

// Run evaluates every interval until ctx is done.
func (s Signals) Run(ctx context.Context, interval time.Duration, clock func() time.Time) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if n, err := s.Evaluate(ctx, clock()); err != nil && ctx.Err() == nil {
			if s.Logger != nil {
				s.Logger.Error("signal evaluation failed", "err", err)
			}
		} else if n > 0 && s.Logger != nil {
			s.Logger.Info("signals fired", "new_events", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func containsStr(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
