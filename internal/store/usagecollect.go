package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hyperpod-governance/portal/internal/usage"
)

// UsageRecords is what the usage collector learned since its last flush:
// pods' allocations (by pod UID), Workloads (by UID) and node state spans
// (by node and start), each replacing its earlier record; and Kueue's
// account of each ClusterQueue's borrowing beside its own (by queue,
// flavor, resource and instant), kept in kueue_borrowing.
type UsageRecords struct {
	Allocs    []usage.Alloc
	Workloads []usage.Workload
	Nodes     []usage.NodeSpan
	Borrowing []usage.BorrowSample
}

// PutUsageRecords records the collector's allocations, Workloads and node
// spans for cluster in one transaction; a record with the same key
// replaces the earlier one, so recording again never counts twice. Each
// kind is written by upsertRows: on SQLite in multi-row upserts of
// rowsPerInsert rows, on PostgreSQL copied, then upserted in one
// statement (the first flush of a large cluster carries every pod and
// Workload it follows: 50,000 and 10,000 in make bench, which as one
// multi-row statement each took 8.6 s on PostgreSQL and 1.7 s on
// SQLite). Within a call the last record of a key wins, as it did when
// each was upserted in turn.
func (d *DB) PutUsageRecords(ctx context.Context, cluster string, r UsageRecords) error {
	for _, a := range r.Allocs {
		if a.Key == "" {
			return errors.New("store: put usage records: an allocation without a pod UID")
		}
	}
	allocs := usage.LastOfEach(r.Allocs, func(a usage.Alloc) string { return a.Key })
	wls := usage.LastOfEach(r.Workloads, func(w usage.Workload) string { return w.Key })
	nodes := usage.LastOfEach(r.Nodes, func(n usage.NodeSpan) string { return n.Node + "\x00" + fmtTime(n.From) })
	hists := make([]string, len(wls))
	for i, w := range wls {
		hist, err := json.Marshal(workloadHistory{w.Pending, w.Admissions, w.Preemptions})
		if err != nil {
			return err
		}
		hists[i] = string(hist)
	}
	return d.inTx(ctx, func(tx *sql.Tx) error {
		if err := d.upsertRows(ctx, tx, "usage_allocs", allocColumns, len(allocs), `
ON CONFLICT (uid) DO UPDATE SET task = excluded.task, pod = excluded.pod, team = excluded.team,
  namespace = excluded.namespace, instance_type = excluded.instance_type, priority_class = excluded.priority_class,
  status = excluded.status, accelerators = excluded.accelerators, cpu_milli = excluded.cpu_milli,
  memory_mib = excluded.memory_mib, start_at = excluded.start_at, end_at = excluded.end_at`,
			func(i int, args []any) []any {
				a := allocs[i]
				return append(args, a.Key, cluster, a.Task, a.Pod, a.Team, a.Namespace, a.InstanceType, a.PriorityClass, a.Status,
					a.Accelerators, a.CPUMilli, a.MemoryMiB, fmtTime(a.Start), nullTime(a.End))
			}); err != nil {
			return fmt.Errorf("store: put usage records: pods: %w", err)
		}
		if err := d.upsertRows(ctx, tx, "usage_workloads", workloadColumns, len(wls), `
ON CONFLICT (uid) DO UPDATE SET name = excluded.name, team = excluded.team, namespace = excluded.namespace,
  instance_type = excluded.instance_type, priority_class = excluded.priority_class, created_at = excluded.created_at,
  finished_at = excluded.finished_at, history = excluded.history`,
			func(i int, args []any) []any {
				w := wls[i]
				return append(args, w.Key, cluster, w.Name, w.Team, w.Namespace, w.InstanceType, w.PriorityClass, fmtTime(w.Created),
					nullTime(w.Finished), hists[i])
			}); err != nil {
			return fmt.Errorf("store: put usage records: workloads: %w", err)
		}
		if err := d.upsertRows(ctx, tx, "usage_node_spans", nodeSpanColumns, len(nodes), `
ON CONFLICT (cluster, node, from_at) DO UPDATE SET to_at = excluded.to_at, instance_type = excluded.instance_type,
  accelerators = excluded.accelerators, schedulable = excluded.schedulable`,
			func(i int, args []any) []any {
				n := nodes[i]
				return append(args, cluster, n.Node, fmtTime(n.From), nullTime(n.To), n.InstanceType, n.Accelerators, n.Schedulable)
			}); err != nil {
			return fmt.Errorf("store: put usage records: node spans: %w", err)
		}
		return putBorrowing(ctx, tx, cluster, r.Borrowing)
	})
}

// The columns PutUsageRecords writes, in the order of its rows' values.
var (
	allocColumns = []upsertColumn{{"uid", false}, {"cluster", false}, {"task", false}, {"pod", false}, {"team", false},
		{"namespace", false}, {"instance_type", false}, {"priority_class", false}, {"status", false},
		{"accelerators", true}, {"cpu_milli", true}, {"memory_mib", true}, {"start_at", false}, {"end_at", false}}
	workloadColumns = []upsertColumn{{"uid", false}, {"cluster", false}, {"name", false}, {"team", false}, {"namespace", false},
		{"instance_type", false}, {"priority_class", false}, {"created_at", false}, {"finished_at", false}, {"history", false}}
	nodeSpanColumns = []upsertColumn{{"cluster", false}, {"node", false}, {"from_at", false}, {"to_at", false},
		{"instance_type", false}, {"accelerators", true}, {"schedulable", true}}
)

type workloadHistory struct {
	Pending     []usage.Span      `json:"pending,omitempty"`
	Admissions  []usage.Admission `json:"admissions,omitempty"`
	Preemptions []time.Time       `json:"preemptions,omitempty"`
}

// UsageRecordsIn returns cluster's records that touch [from, to): pods and
// node spans that held or offered something then (open ones included) and
// Workloads created before to and not finished before from.
func (d *DB) UsageRecordsIn(ctx context.Context, cluster string, from, to time.Time) (UsageRecords, error) {
	var r UsageRecords
	var err error
	f, t := fmtTime(from), fmtTime(to)
	if r.Allocs, err = d.allocs(ctx, allocsTouching, cluster, t, f); err != nil {
		return r, err
	}
	if r.Workloads, err = d.workloads(ctx, nil, workloadsTouching, cluster, t, f); err != nil {
		return r, err
	}
	r.Nodes, err = d.NodeSpansIn(ctx, cluster, from, to)
	return r, err
}

// The windows of UsageRecordsIn and EachTeamUsageIn: records that touch
// [from, to).
const (
	allocsTouching    = `cluster = ? AND start_at < ? AND (end_at IS NULL OR end_at >= ?)`
	workloadsTouching = `cluster = ? AND created_at < ? AND (finished_at IS NULL OR finished_at >= ?)`
)

// EachTeamUsageIn calls fn once per team with that team's records of
// UsageRecordsIn (its allocations and Workloads; no node spans: read
// them with NodeSpansIn), every record of the team in one call, teams in
// byte order; within a team, in no particular order (the integration
// does not depend on it: TestIntegratorTeamByTeam). Only one team's
// records are held at a time: the collector's flush recomputes a
// cluster's hours team by team (usage.Integrator), and holding the whole
// cluster's records, 50,000 pods in make bench, doubled its peak RSS
// through the GC's target. Each kind is read by one query ordered by team
// alone (a sort on more keys took twice as long on PostgreSQL), the two
// walked side by side.
func (d *DB) EachTeamUsageIn(ctx context.Context, cluster string, from, to time.Time, fn func(team string, r UsageRecords) error) error {
	return d.EachTeamUsageAsOf(ctx, cluster, from, to, nil, fn)
}

// EachTeamUsageAsOf is EachTeamUsageIn that calls began, when not nil,
// once what it reads is fixed, before fn is first called: after the first
// row of each kind was read (on SQLite the first step of a statement
// begins the connection's read transaction, which both statements share;
// on PostgreSQL each statement sees what was committed before it began).
// A record committed after began is not read. The collector's flush
// starts writing its records then (it lays them over what it reads), so
// that the reading does not take them too.
func (d *DB) EachTeamUsageAsOf(ctx context.Context, cluster string, from, to time.Time, began func(), fn func(team string, r UsageRecords) error) error {
	f, t := fmtTime(from), fmtTime(to)
	byTeam := d.dialect.byteOrder("team")
	// Both queries on one connection on SQLite, which steps two statements
	// of a connection side by side (a pool of one, :memory:, has no
	// second); PostgreSQL's protocol runs one query at a time per
	// connection, so there each takes its own from the pool.
	var q interface {
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	} = d.sql
	if !d.dialect.postgres {
		conn, err := d.sql.Conn(ctx)
		if err != nil {
			return fmt.Errorf("store: usage records: %w", err)
		}
		defer conn.Close()
		q = conn
	}
	ar, err := q.QueryContext(ctx, `SELECT `+allocColumnsRead+` FROM usage_allocs WHERE `+allocsTouching+
		` ORDER BY `+byTeam, cluster, t, f)
	if err != nil {
		return fmt.Errorf("store: usage allocations: %w", err)
	}
	defer ar.Close()
	wr, err := q.QueryContext(ctx, `SELECT `+workloadColumnsRead+` FROM usage_workloads WHERE `+workloadsTouching+
		` ORDER BY `+byTeam, cluster, t, f)
	if err != nil {
		return fmt.Errorf("store: usage workloads: %w", err)
	}
	defer wr.Close()
	a, aok, err := nextRow(ar, scanAlloc)
	if err != nil {
		return err
	}
	w, wok, err := nextRow(wr, scanWorkload)
	if err != nil {
		return err
	}
	if began != nil {
		began()
	}
	// Each team's slices start at the previous team's length (teams are
	// usually of a size): grown by doubling from nothing, they were a fifth
	// of the bytes a first flush of 50,000 pods allocated
	// (BenchmarkFlush50kPods's allocation profile), and the garbage the
	// GC then marked through. A team without records of a kind keeps a nil
	// slice of it.
	var lastA, lastW int
	for aok || wok {
		team := a.Team
		if !aok || (wok && w.Team < a.Team) {
			team = w.Team
		}
		var r UsageRecords
		if aok && a.Team == team {
			r.Allocs = make([]usage.Alloc, 0, max(lastA, 1))
		}
		if wok && w.Team == team {
			r.Workloads = make([]usage.Workload, 0, max(lastW, 1))
		}
		for aok && a.Team == team {
			r.Allocs = append(r.Allocs, a)
			if a, aok, err = nextRow(ar, scanAlloc); err != nil {
				return err
			}
		}
		for wok && w.Team == team {
			r.Workloads = append(r.Workloads, w)
			if w, wok, err = nextRow(wr, scanWorkload); err != nil {
				return err
			}
		}
		lastA, lastW = cmp.Or(len(r.Allocs), lastA), cmp.Or(len(r.Workloads), lastW)
		if err := fn(team, r); err != nil {
			return err
		}
	}
	return nil
}

// nextRow scans the next row of rows; ok is false after the last.
func nextRow[T any](rows *sql.Rows, scan func(*sql.Rows) (T, error)) (v T, ok bool, err error) {
	if !rows.Next() {
		return v, false, rows.Err()
	}
	v, err = scan(rows)
	return v, err == nil, err
}

// NodeSpansIn returns cluster's node spans that touch [from, to) (those of
// UsageRecordsIn).
func (d *DB) NodeSpansIn(ctx context.Context, cluster string, from, to time.Time) ([]usage.NodeSpan, error) {
	return d.nodeSpans(ctx, `cluster = ? AND from_at < ? AND (to_at IS NULL OR to_at >= ?)`, cluster, fmtTime(to), fmtTime(from))
}

// usageKeysPerQuery bounds the keys of one IN list (SQLite's default limit
// on bound parameters is 32,766; PostgreSQL's 65,535).
const usageKeysPerQuery = 500

// UsageRecordsOf returns what is recorded of cluster's pods (by UID) and
// Workloads (by key), whatever their age: on start the collector takes it
// as the state of the objects the informers report, before it folds in
// what they show (a recorded history is never rebuilt from less).
func (d *DB) UsageRecordsOf(ctx context.Context, cluster string, podUIDs, workloadKeys []string) (UsageRecords, error) {
	var r UsageRecords
	for keys := range slices.Chunk(podUIDs, usageKeysPerQuery) {
		in, args := idList(keys)
		as, err := d.allocs(ctx, `cluster = ? AND uid IN `+in, append([]any{cluster}, args...)...)
		if err != nil {
			return r, err
		}
		r.Allocs = append(r.Allocs, as...)
	}
	for keys := range slices.Chunk(workloadKeys, usageKeysPerQuery) {
		var err error
		in, args := idList(keys)
		if r.Workloads, err = d.workloads(ctx, r.Workloads, `cluster = ? AND uid IN `+in, append([]any{cluster}, args...)...); err != nil {
			return r, err
		}
	}
	return r, nil
}

// workloads appends to out the recorded Workloads matching where, by key.
func (d *DB) workloads(ctx context.Context, out []usage.Workload, where string, args ...any) ([]usage.Workload, error) {
	rows, err := d.sql.QueryContext(ctx, `SELECT `+workloadColumnsRead+` FROM usage_workloads WHERE `+where+` ORDER BY uid`, args...)
	if err != nil {
		return out, fmt.Errorf("store: usage workloads: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		w, err := scanWorkload(rows)
		if err != nil {
			return out, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// workloadColumnsRead are the columns scanWorkload reads, in its order.
const workloadColumnsRead = `uid, name, team, namespace, instance_type, priority_class, created_at, finished_at, history`

func scanWorkload(rows *sql.Rows) (usage.Workload, error) {
	var w usage.Workload
	var created, hist string
	var finished sql.NullString
	if err := rows.Scan(&w.Key, &w.Name, &w.Team, &w.Namespace, &w.InstanceType, &w.PriorityClass, &created, &finished, &hist); err != nil {
		return w, fmt.Errorf("store: usage workloads: %w", err)
	}
	var h workloadHistory
	if err := json.Unmarshal([]byte(hist), &h); err != nil {
		return w, fmt.Errorf("store: usage workload %s history: %w", w.Key, err)
	}
	w.Pending, w.Admissions, w.Preemptions = h.Pending, h.Admissions, h.Preemptions
	var err error
	if w.Created, err = parseTime(created); err != nil {
		return w, err
	}
	w.Finished, err = parseNullTime(finished)
	return w, err
}

// OpenUsageRecords returns cluster's allocations and node spans still open
// (no end recorded): on start, the collector reconciles them with what the
// cluster shows.
func (d *DB) OpenUsageRecords(ctx context.Context, cluster string) (UsageRecords, error) {
	var r UsageRecords
	var err error
	if r.Allocs, err = d.allocs(ctx, `cluster = ? AND end_at IS NULL`, cluster); err != nil {
		return r, err
	}
	r.Nodes, err = d.nodeSpans(ctx, `cluster = ? AND to_at IS NULL`, cluster)
	return r, err
}

func (d *DB) allocs(ctx context.Context, where string, args ...any) ([]usage.Alloc, error) {
	rows, err := d.sql.QueryContext(ctx, `SELECT `+allocColumnsRead+` FROM usage_allocs WHERE `+where+` ORDER BY start_at, uid`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: usage allocations: %w", err)
	}
	defer rows.Close()
	var out []usage.Alloc
	for rows.Next() {
		a, err := scanAlloc(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// allocColumnsRead are the columns scanAlloc reads, in its order.
const allocColumnsRead = `uid, task, pod, team, namespace, instance_type, priority_class, status, accelerators, cpu_milli, memory_mib, start_at, end_at`

func scanAlloc(rows *sql.Rows) (usage.Alloc, error) {
	var a usage.Alloc
	var start string
	var end sql.NullString
	if err := rows.Scan(&a.Key, &a.Task, &a.Pod, &a.Team, &a.Namespace, &a.InstanceType, &a.PriorityClass, &a.Status,
		&a.Accelerators, &a.CPUMilli, &a.MemoryMiB, &start, &end); err != nil {
		return a, fmt.Errorf("store: usage allocations: %w", err)
	}
	var err error
	if a.Start, err = parseTime(start); err != nil {
		return a, err
	}
	a.End, err = parseNullTime(end)
	return a, err
}

func (d *DB) nodeSpans(ctx context.Context, where string, args ...any) ([]usage.NodeSpan, error) {
	rows, err := d.sql.QueryContext(ctx, `
SELECT node, from_at, to_at, instance_type, accelerators, schedulable FROM usage_node_spans WHERE `+where+` ORDER BY node, from_at`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: usage node spans: %w", err)
	}
	defer rows.Close()
	var out []usage.NodeSpan
	for rows.Next() {
		var n usage.NodeSpan
		var from string
		var to sql.NullString
		if err := rows.Scan(&n.Node, &from, &to, &n.InstanceType, &n.Accelerators, &n.Schedulable); err != nil {
			return nil, fmt.Errorf("store: usage node spans: %w", err)
		}
		if n.From, err = parseTime(from); err != nil {
			return nil, err
		}
		if n.To, err = parseNullTime(to); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// ReplaceUsage replaces, in one transaction, the cluster-sourced hourly
// rows of cluster (and of no cluster) and cluster's capacity rows of every
// hour from the hour of from to the hour of until with hours and
// clusterHours, and moves the collector's heartbeat to until. Rows of
// those hours that the new computation no longer has are deleted, so a
// recomputation never leaves a stale hour behind and never adds to one.
// Demo rows, and the rows another collector's cluster wrote (the EKS
// collector's and the Slurm reader's, issue 36), are left alone.
func (d *DB) ReplaceUsage(ctx context.Context, cluster string, from, until time.Time, hours []usage.Hour, clusterHours []usage.ClusterHour, owner string) error {
	lo, hi := fmtTime(usage.HourStart(from)), fmtTime(usage.HourStart(until).Add(time.Hour))
	return d.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM usage_hours WHERE source = 'cluster' AND cluster IN (?, '') AND hour >= ? AND hour < ?`, cluster, lo, hi); err != nil {
			return fmt.Errorf("store: replace usage: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM usage_cluster_hours WHERE cluster = ? AND source = 'cluster' AND hour >= ? AND hour < ?`, cluster, lo, hi); err != nil {
			return fmt.Errorf("store: replace usage: %w", err)
		}
		res, err := tx.ExecContext(ctx, `UPDATE usage_collector SET last_at = ? WHERE cluster = ? AND owner = ?`, fmtTime(until), cluster, owner)
		if err != nil {
			return fmt.Errorf("store: replace usage: %w", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return ErrCollectorLost
		}
		if err := putUsageHours(ctx, tx, cluster, hours); err != nil {
			return err
		}
		return putClusterHours(ctx, tx, clusterHours)
	})
}

// ErrCollectorLost: another collector instance holds the cluster's
// heartbeat; this one must stop writing.
var ErrCollectorLost = errors.New("store: another usage collector holds this cluster")

// ClaimCollector makes owner the one usage collector of cluster, unless
// another owner's heartbeat is newer than staleBefore (it is still running:
// one instance at a time). It returns the previous heartbeat (zero on the
// first start): the time until which usage is known, from which the new
// instance reconciles.
func (d *DB) ClaimCollector(ctx context.Context, cluster, owner string, now, staleBefore time.Time) (last time.Time, err error) {
	err = d.inTx(ctx, func(tx *sql.Tx) error {
		var prevOwner, lastAt string
		switch err := tx.QueryRowContext(ctx, `SELECT owner, last_at FROM usage_collector WHERE cluster = ?`, cluster).Scan(&prevOwner, &lastAt); {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return fmt.Errorf("store: claim collector: %w", err)
		default:
			if last, err = parseTime(lastAt); err != nil {
				return err
			}
			if prevOwner != owner && last.After(staleBefore) {
				return fmt.Errorf("%w (%s, heartbeat %s)", ErrCollectorLost, prevOwner, lastAt)
			}
		}
		hb := cmp.Or(lastAt, fmtTime(now))
		_, err := tx.ExecContext(ctx, `
INSERT INTO usage_collector (cluster, owner, started_at, last_at) VALUES (?, ?, ?, ?)
ON CONFLICT (cluster) DO UPDATE SET owner = excluded.owner, started_at = excluded.started_at`, cluster, owner, fmtTime(now), hb)
		if err != nil {
			return fmt.Errorf("store: claim collector: %w", err)
		}
		return nil
	})
	return last, err
}

// TaskFilter selects the detailed task report: tasks whose pods held
// resources in [From, To) (To is also where still-running pods are counted
// until: pass the report's end or now, whichever is earlier), of a cluster,
// team and namespace when set.
type TaskFilter struct {
	Cluster   string
	Team      string
	Namespace string
	From, To  time.Time
}

// UsageTasks returns the detailed task report for f: one line per Workload
// (or per pod without one) with its execution window, status, priority
// class and accelerator-seconds within [From, To), by start.
func (d *DB) UsageTasks(ctx context.Context, f TaskFilter) ([]usage.Task, error) {
	where, args := `(? = '' OR cluster = ?) AND start_at < ? AND (end_at IS NULL OR end_at > ?)`, []any{f.Cluster, f.Cluster, fmtTime(f.To), fmtTime(f.From)}
	if f.Team != "" {
		where, args = where+" AND team = ?", append(args, f.Team)
	}
	if f.Namespace != "" {
		where, args = where+" AND namespace = ?", append(args, f.Namespace)
	}
	as, err := d.allocs(ctx, where, args...)
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	rows, err := d.sql.QueryContext(ctx, `SELECT uid, name, priority_class FROM usage_workloads WHERE (? = '' OR cluster = ?)`, f.Cluster, f.Cluster)
	if err != nil {
		return nil, fmt.Errorf("store: usage tasks: %w", err)
	}
	wpc := map[string]string{}
	for rows.Next() {
		var uid, name, pc string
		if err := rows.Scan(&uid, &name, &pc); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: usage tasks: %w", err)
		}
		names[uid], wpc[uid] = name, pc
	}
	rows.Close()
	return usage.TasksOf(as, names, wpc, f.From, f.To), nil
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return fmtTime(t)
}

func parseNullTime(s sql.NullString) (time.Time, error) {
	if !s.Valid {
		return time.Time{}, nil
	}
	return parseTime(s.String)
}
