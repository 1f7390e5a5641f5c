// Package slurmusage is the usage collector of a Slurm cluster (issue 36):
// it reads the teams' jobs from Slurm's accounting database with `sacct`
// (through slurm.Runner), records each job as the EKS collector records a
// pod and its Kueue Workload (usage.SlurmRecords), and recomputes the
// hourly rows with the same integrator and guarantee rule
// (usage.IntegrateSplit), under its own cluster name in the same tables.
// The usage pages, the daily summary, statements, exports and chargeback
// read those rows as they read the EKS collector's: there is no second
// implementation of the figures or the money.
//
// A Slurm account is a team's when a committed connection's approved
// contract names this cluster (cluster_name), the Slurm orchestrator and
// that account (slurm_scope.account); its rows carry the team, the
// namespace usage.SlurmNamespace(account) and the instance type of the
// job's partition (Reader.InstanceTypes).
//
// Like the EKS collector it holds a heartbeat in the store (one reader per
// cluster at a time), records are keyed so that reading a job again
// replaces it, and hours are recomputed and replaced, never added to. The
// accounting database keeps the jobs' history, so a reader that was down
// reads what happened meanwhile from sacct: no missing data period.
//
// With InventoryCluster set it also keeps the cluster's observed inventory
// from the Slurm nodes (sinfo, inventory.go), as the EKS collector keeps it
// from the Kubernetes nodes: a drained or down node leaves the capacity
// approvals count and opens the capacity-change reviews.
//
// It sits beside internal/collect, above internal/store, internal/usage
// and internal/slurm; it imports no Kubernetes client, web or view package
// (cmd/portal TestImportBoundaries).
package slurmusage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hyperpod-governance/portal/internal/slurm"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Store is what the reader keeps in the portal's database.
type Store interface {
	ClaimCollector(ctx context.Context, cluster, owner string, now, staleBefore time.Time) (time.Time, error)
	PutUsageRecords(ctx context.Context, cluster string, r store.UsageRecords) error
	EachTeamUsageIn(ctx context.Context, cluster string, from, to time.Time, fn func(team string, r store.UsageRecords) error) error
	OpenUsageRecords(ctx context.Context, cluster string) (store.UsageRecords, error)
	UsageRecordsOf(ctx context.Context, cluster string, podUIDs, workloadKeys []string) (store.UsageRecords, error)
	ReplaceUsage(ctx context.Context, cluster string, from, until time.Time, hours []usage.Hour, clusterHours []usage.ClusterHour, owner string) error
	CommittedVersions(ctx context.Context) ([]store.Version, error)
	Observed(ctx context.Context, cluster string) ([]store.ObservedRow, error)
	ReplaceObserved(ctx context.Context, cluster string, rows []store.ObservedRow, by workflow.Actor, now time.Time) error
}

var _ Store = (*store.DB)(nil)

// Reader follows one Slurm cluster's accounting. Runner, Store, Cluster,
// Owner and Guarantees are required.
type Reader struct {
	Runner slurm.Runner
	Store  Store
	// Cluster is the HyperPod cluster's name as the contracts give it
	// (cluster_name): the accounts of the Slurm contracts naming it are
	// read ("": of every Slurm contract, for a portal whose transport
	// reaches one Slurm cluster). Its records and rows are kept under
	// RecordCluster.
	Cluster string
	// Owner names this instance in the heartbeat.
	Owner string
	// Guarantees returns each team's guarantees over time in GPUs, read
	// once per flush (GuaranteesFrom): each second is split by the
	// guarantee in force then, as on EKS.
	Guarantees func(ctx context.Context) (usage.GuaranteeHistory, error)
	// InstanceTypes maps a partition to the instance type of its nodes;
	// a partition it does not name counts as usage.NoInstanceType (not
	// priced). On HyperPod a partition is made of instance groups: each
	// group's SlurmConfig.PartitionNames names the (at most one) Slurm
	// partition it belongs to, beside its InstanceType, in the cluster's
	// API configuration (ClusterSlurmConfigDetails,
	// https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ClusterSlurmConfigDetails.html;
	// DescribeCluster's instance groups).
	InstanceTypes map[string]string
	Interval      time.Duration // between flushes; default one minute
	// InventoryCluster, when set, is the cluster (the contracts'
	// cluster_name) whose observed inventory the reader keeps from the
	// Slurm nodes every Interval (inventory.go): what approvals count and
	// the review scheduler's capacity trigger watches.
	InventoryCluster string
	// InventoryChanged, when set, is called after the reader wrote a
	// changed inventory (the review scheduler's Wake).
	InventoryChanged func()
	// Lookback is how far back the first read goes, when no heartbeat
	// was ever recorded; default 24 hours.
	Lookback time.Duration
	// Margin is how far before the heartbeat each read starts, for job
	// records the accounting database received late; default 10 minutes.
	Margin time.Duration
	Now    func() time.Time
	Logger *slog.Logger

	last time.Time // the heartbeat: usage known until here
}

// RecordCluster is the cluster name of the reader's records, rows and
// heartbeat: apart from the EKS collector's.
func (r *Reader) RecordCluster() string { return "slurm/" + cmp.Or(r.Cluster, "default") }

// GuaranteesFrom is the Reader's Guarantees as the portal runs it: the
// store's guarantee history (the approved versions' guaranteed instances
// from when each took effect, the history the EKS collector reads), in
// GPUs at accelerators(itype) per instance.
func GuaranteesFrom(db interface {
	GuaranteeHistory(ctx context.Context, team string) (usage.GuaranteeHistory, error)
}, accelerators func(itype string) int64) func(ctx context.Context) (usage.GuaranteeHistory, error) {
	return func(ctx context.Context) (usage.GuaranteeHistory, error) {
		h, err := db.GuaranteeHistory(ctx, "")
		if err != nil {
			return nil, err
		}
		return h.InAccelerators(accelerators), nil
	}
}

func (r *Reader) now() time.Time {
	if r.Now != nil {
		return r.Now().UTC().Truncate(time.Second)
	}
	return time.Now().UTC().Truncate(time.Second)
}

func (r *Reader) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// Run claims the cluster and flushes every Interval until ctx is done, then
// once more. While another instance holds the cluster it waits.
func (r *Reader) Run(ctx context.Context) error {
	interval := cmp.Or(r.Interval, time.Minute)
	for {
		now := r.now()
		last, err := r.Store.ClaimCollector(ctx, r.RecordCluster(), r.Owner, now, now.Add(-3*interval))
		if err == nil {
			r.last = last
			break
		}
		if !errors.Is(err, store.ErrCollectorLost) {
			return err
		}
		r.logger().Info("another Slurm usage reader is running; waiting", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := r.Flush(ctx); err != nil {
			if errors.Is(err, store.ErrCollectorLost) {
				return err
			}
			r.logger().Error("Slurm usage flush failed", "err", err)
		}
		if _, err := r.RefreshInventory(ctx); err != nil {
			r.logger().Error("Slurm inventory refresh failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return r.Flush(context.WithoutCancel(ctx))
		case <-t.C:
		}
	}
}

// Claim makes this reader the cluster's one reader (Run does it first);
// for callers that flush by hand.
func (r *Reader) Claim(ctx context.Context) error {
	last, err := r.Store.ClaimCollector(ctx, r.RecordCluster(), r.Owner, r.now(), r.now().Add(-3*cmp.Or(r.Interval, time.Minute)))
	r.last = last
	return err
}

// Teams maps the Slurm accounts of this cluster's committed Slurm
// connections to their teams. Slurm keeps accounting names in lower case
// (sacct(1): "The content's of SLURM's database are maintained in lower
// case"), so accounts are compared in lower case.
func (r *Reader) Teams(ctx context.Context) (map[string]string, error) {
	vs, err := r.Store.CommittedVersions(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, v := range vs {
		c := v.Contract
		if c.Orchestrator != workflow.OrchestratorSlurm || (r.Cluster != "" && c.ClusterName != r.Cluster) || c.SlurmScope.Account == "" {
			continue
		}
		out[strings.ToLower(c.SlurmScope.Account)] = c.Team
	}
	return out, nil
}

// Flush reads the teams' jobs active since the heartbeat (less Margin;
// since Lookback on the first read) and the jobs recorded as running that
// sacct no longer reports among them, records them, and recomputes and
// replaces every hour they touched, up to now.
func (r *Reader) Flush(ctx context.Context) error {
	now := r.now()
	teams, err := r.Teams(ctx)
	if err != nil {
		return err
	}
	g, err := r.Guarantees(ctx)
	if err != nil {
		return err
	}
	since := now.Add(-cmp.Or(r.Lookback, 24*time.Hour))
	if !r.last.IsZero() {
		since = r.last.Add(-cmp.Or(r.Margin, 10*time.Minute))
	}
	from, err := r.read(ctx, teams, since)
	if err != nil {
		return err
	}
	lo := usage.HourStart(from)
	// Team by team, as the EKS collector (usage.Integrator); a Slurm
	// cluster records no node spans, so it has no capacity rows.
	in := usage.NewIntegrator(r.RecordCluster(), lo, now, nil, g, nil)
	if err := r.Store.EachTeamUsageIn(ctx, r.RecordCluster(), lo, now.Add(time.Second), func(team string, recs store.UsageRecords) error {
		return in.Team(team, recs.Allocs, recs.Workloads)
	}); err != nil {
		return err
	}
	if err := r.Store.ReplaceUsage(ctx, r.RecordCluster(), lo, now, in.Hours(), nil, r.Owner); err != nil {
		return err
	}
	r.last = now
	return nil
}

// read records the teams' jobs active since since, and those recorded as
// running that are not among them (they ended before since, in a record
// the accounting database received late), and returns the earliest
// instant whose hour must be recomputed.
func (r *Reader) read(ctx context.Context, teams map[string]string, since time.Time) (time.Time, error) {
	from := since
	if len(teams) == 0 {
		return from, nil
	}
	accounts := make([]string, 0, len(teams))
	for a := range teams {
		accounts = append(accounts, a)
	}
	slices.Sort(accounts)
	// -E a year ahead: a job whose eligible time is still to come (a
	// requeued job waits out a begin time; scontrol shows Reason=BeginTime)
	// is selected only by a window that reaches it (sacct(1), -s: "for a
	// job to be selected in the PENDING state it must have EligibleTime in
	// the requested time interval"; the test bed's requeued job is absent
	// with -E now).
	jobs, err := r.Jobs(ctx, "-A", strings.Join(accounts, ","), "-S", since.UTC().Format(sacctTime),
		"-E", since.Add(sacctAhead).UTC().Format(sacctTime))
	if err != nil {
		return from, err
	}
	open, err := r.Store.OpenUsageRecords(ctx, r.RecordCluster())
	if err != nil {
		return from, err
	}
	seen := map[string]bool{}
	for _, j := range jobs {
		seen[j.ID] = true
	}
	var gone []string
	for _, a := range open.Allocs {
		if !seen[a.Pod] && !slices.Contains(gone, a.Pod) {
			gone = append(gone, a.Pod)
		}
	}
	if len(gone) > 0 {
		late, err := r.Jobs(ctx, "-j", strings.Join(gone, ","))
		if err != nil {
			return from, err
		}
		for _, j := range late {
			if !j.End.IsZero() {
				from = usage.Earlier(from, j.End)
			}
		}
		jobs = append(jobs, late...)
	}
	team := func(account string) (string, bool) { t, ok := teams[strings.ToLower(account)]; return t, ok }
	itype := func(j usage.SlurmJob) string { return cmp.Or(r.InstanceTypes[j.Partition], usage.NoInstanceType) }
	allocs, wls := usage.SlurmRecords(r.RecordCluster(), jobs, team, itype)
	// A job read for the first time may have waited since before since
	// (held, or eligible only later): its hours from its submit are
	// recomputed.
	keys := make([]string, len(wls))
	for i, w := range wls {
		keys[i] = w.Key
	}
	stored, err := r.Store.UsageRecordsOf(ctx, r.RecordCluster(), nil, keys)
	if err != nil {
		return from, err
	}
	known := map[string]bool{}
	for _, w := range stored.Workloads {
		known[w.Key] = true
	}
	for _, w := range wls {
		if !known[w.Key] {
			from = usage.Earlier(from, w.Created)
		}
	}
	return from, r.Store.PutUsageRecords(ctx, r.RecordCluster(), store.UsageRecords{Allocs: allocs, Workloads: wls})
}

// sacctAhead is how far past since each read's window reaches (-E).
const sacctAhead = 366 * 24 * time.Hour

// sacctTime is the format of the times Jobs gives sacct (sacct(1), -S and
// -E accept YYYY-MM-DD[THH:MM[:SS]]), in UTC: SacctEnv's TZ.
const sacctTime = "2006-01-02T15:04:05"

// SacctEnv is the environment Jobs runs sacct with, so that its times mean
// the same whatever the zone of the node it runs on (the controller's,
// over Session Manager):
//   - SLURM_TIME_FORMAT=%s prints every time stamp as seconds since the
//     epoch: "A valid strftime() format can also be specified" (sacct(1),
//     ENVIRONMENT VARIABLES, SLURM_TIME_FORMAT,
//     https://slurm.schedmd.com/sacct.html), and %s is "the number of
//     seconds since the Epoch, 1970-01-01 00:00:00 +0000 (UTC)" (glibc's
//     strftime(3), https://man7.org/linux/man-pages/man3/strftime.3.html);
//   - TZ=UTC makes the -S and -E times Jobs passes UTC: "TZ ... This
//     variable shall represent timezone information" used by the time
//     functions sacct parses them with (POSIX Base Definitions 8.3 Other
//     Environment Variables,
//     https://pubs.opengroup.org/onlinepubs/9699919799/basedefs/V1_chap08.html).
var SacctEnv = []string{"SLURM_TIME_FORMAT=%s", "TZ=UTC"}

// SacctFormat is the fields Jobs asks sacct for, by the names of sacct(1)'s
// --format list (https://slurm.schedmd.com/sacct.html, "Job Accounting
// Fields"): JobID, the Account charged, the User, the Partition and QOS,
// AllocTRES (the allocated trackable resources: "cpu=4,gres/gpu=2,mem=…"),
// Submit ("The time the job was submitted"; reset on requeue), Start
// ("Initiation time of the job"), End ("Termination time of the job"),
// ElapsedRaw ("The job's elapsed time in seconds"), State (JOB STATE
// CODES) and NodeList ("None assigned" for a job given no nodes).
const SacctFormat = "JobID,Account,User,Partition,QOS,AllocTRES,Submit,Start,End,ElapsedRaw,State,NodeList"

// Jobs runs sacct with filter arguments and returns its job allocations.
// It asks for every user's jobs (-a, --allusers: "Displays all users'
// jobs when run by user root or if PrivateData is not configured"), one
// line per allocation without its steps (-X, --allocations), every record
// of a requeued job (-D, --duplicates: "all records that match the
// selection criteria will be returned"), in parsable form (-P,
// --parsable2: "'|' delimited without a '|' at the end") with a header
// naming the fields (sacct(1), https://slurm.schedmd.com/sacct.html).
// With -S and no -s, sacct selects "jobs in any state after the specified
// time": running ones too, and pending ones whose eligible time lies in
// the window (read's -E reaches ahead for those).
func (r *Reader) Jobs(ctx context.Context, filter ...string) ([]usage.SlurmJob, error) {
	args := append([]string{"-a", "-X", "-D", "-P", "--format=" + SacctFormat}, filter...)
	text, err := slurm.RunEnv(ctx, r.Runner, SacctEnv, "sacct", args...)
	if err != nil {
		return nil, err
	}
	rows, err := slurm.Rows(text)
	if err != nil {
		return nil, err
	}
	out := make([]usage.SlurmJob, 0, len(rows))
	for _, row := range rows {
		j, err := ParseJob(row)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}

// ParseJob converts one line of sacct's output (SacctFormat, run with
// SacctEnv: times in seconds since the epoch) into a job. Times sacct
// shows as "Unknown" or "None" (a pending job's Start, a running job's
// End) are zero.
func ParseJob(row map[string]string) (usage.SlurmJob, error) {
	j := usage.SlurmJob{ID: row["JobID"], Account: row["Account"], User: row["User"], Partition: row["Partition"],
		QOS: row["QOS"], NodeList: row["NodeList"], State: row["State"]}
	bad := func(field string, err error) (usage.SlurmJob, error) {
		return usage.SlurmJob{}, fmt.Errorf("slurm usage: job %s: %s %q: %w", j.ID, field, row[field], err)
	}
	var err error
	for _, f := range []struct {
		name string
		t    *time.Time
	}{{"Submit", &j.Submit}, {"Start", &j.Start}, {"End", &j.End}} {
		if *f.t, err = sacctTimeOf(row[f.name]); err != nil {
			return bad(f.name, err)
		}
	}
	if j.Submit.IsZero() {
		return bad("Submit", errors.New("no submit time"))
	}
	tres, err := slurm.TRES(row["AllocTRES"])
	if err != nil {
		return bad("AllocTRES", err)
	}
	if j.GPUs, err = count(tres["gres/gpu"]); err != nil {
		return bad("AllocTRES", err)
	}
	if j.CPUs, err = count(tres["cpu"]); err != nil {
		return bad("AllocTRES", err)
	}
	if j.MemoryMiB, err = mebibytes(tres["mem"]); err != nil {
		return bad("AllocTRES", err)
	}
	return j, nil
}

func sacctTimeOf(s string) (time.Time, error) {
	switch s {
	case "", "Unknown", "None":
		return time.Time{}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}, fmt.Errorf("not seconds since the epoch (sacct runs with SLURM_TIME_FORMAT=%%s)")
	}
	return time.Unix(n, 0).UTC(), nil
}

func count(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	return strconv.ParseInt(s, 10, 64)
}

// mebibytes reads a TRES memory amount ("1000M", "4G"; Slurm's units are
// powers of 1024, and a bare number is megabytes) in MiB.
func mebibytes(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	mult := map[byte]float64{'K': 1.0 / 1024, 'M': 1, 'G': 1024, 'T': 1024 * 1024}
	m, ok := mult[s[len(s)-1]]
	num := s
	if ok {
		num = s[:len(s)-1]
	} else {
		m = 1
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("%q is not an amount of memory", s)
	}
	return int64(f * m), nil
}
