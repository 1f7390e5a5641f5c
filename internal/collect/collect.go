// Package collect is the usage collector: it follows the cluster with
// client-go informers (pods in team namespaces, nodes, Kueue Workloads and
// ClusterQueues), each object stripped by a transform to the few fields it
// needs, records every pod's allocation interval, every Workload's waiting,
// admission and preemption history and every node's health over time, and
// recomputes the hourly rows of internal/usage from those intervals. Each
// flush also records what each team's ClusterQueue reports borrowing
// beside the collector's own figure (usage.BorrowSample), for the signal
// that compares Kueue's account with the portal's.
//
// One instance runs per cluster at a time (a heartbeat in the store; a
// second one waits until the first's goes stale). It is restart-safe:
// records are keyed by UID and hours are recomputed and replaced, never
// added to; on start it loads what it recorded for every pod and Workload
// the informers report and folds their status into that (a recorded
// history is never replaced by a reconstruction from final conditions),
// and what it cannot recover (pods deleted while it was not running) is
// recorded as a missing data period. Each second is split by the guarantee
// in force at that second (usage.GuaranteeHistory): accelerators, and CPU
// by the CPU guarantee when Guaranteed.CPU is set (usage.IntegrateSplit).
// A flush writes the pods' records a part at a time and, meanwhile,
// recomputes the hours team by team from the store's records with its own
// laid over them (overlay; store.EachTeamUsageAsOf, usage.Integrator), so
// that it never holds a copy of every record at once nor reads back what
// it writes; the hours replace the stored ones once every record is
// written.
//
// It sits above both internal/store and internal/usage (it reads the
// cluster, computes with usage and writes through the store), beside
// internal/review: under internal/usage it was an arrow back up, since the
// store imports usage (issue 33; cmd/portal's TestImportBoundaries keeps
// every package of internal/usage/... off the store and the collector). It
// never imports internal/web, internal/views or internal/auth, and serves
// no pages.
package collect

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"
	kueueinformers "sigs.k8s.io/kueue/client-go/informers/externalversions"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Resources and labels the collector reads.
const (
	// The extended resources pods request accelerators with (the NVIDIA
	// and AWS Neuron device plugins; provision.ResourceNeuron cites the
	// Neuron documentation). Each instance type is counted in the one the
	// settings' table names (provision.ResourcesPerInstance).
	ResourceGPU          corev1.ResourceName = provision.ResourceNvidiaGPU
	ResourceNeuron       corev1.ResourceName = provision.ResourceNeuron
	ResourceNeuronDevice corev1.ResourceName = provision.ResourceNeuronDevice
	ResourceNeuronCore   corev1.ResourceName = provision.ResourceNeuronCore
	// LabelNodeHealth is HyperPod's node health label; only
	// HealthSchedulable means the node passed its health checks and runs
	// workloads (provision.LabelNodeHealth cites AWS's documentation).
	LabelNodeHealth   = provision.LabelNodeHealth
	HealthSchedulable = provision.HealthSchedulable
)

// Store is what the collector keeps in the portal's database.
type Store interface {
	ClaimCollector(ctx context.Context, cluster, owner string, now, staleBefore time.Time) (time.Time, error)
	PutUsageRecords(ctx context.Context, cluster string, r store.UsageRecords) error
	EachTeamUsageAsOf(ctx context.Context, cluster string, from, to time.Time, began func(), fn func(team string, r store.UsageRecords) error) error
	NodeSpansIn(ctx context.Context, cluster string, from, to time.Time) ([]usage.NodeSpan, error)
	OpenUsageRecords(ctx context.Context, cluster string) (store.UsageRecords, error)
	UsageRecordsOf(ctx context.Context, cluster string, podUIDs, workloadKeys []string) (store.UsageRecords, error)
	ReplaceUsage(ctx context.Context, cluster string, from, until time.Time, hours []usage.Hour, clusterHours []usage.ClusterHour, owner string) error
	AddMissing(ctx context.Context, m usage.Missing) error
	PruneUsage(ctx context.Context, cutoff time.Time) (int64, error)
	Observed(ctx context.Context, cluster string) ([]store.ObservedRow, error)
	ReplaceObserved(ctx context.Context, cluster string, rows []store.ObservedRow, by workflow.Actor, now time.Time) error
}

var _ Store = (*store.DB)(nil)

// Collector follows one cluster. Kube, Kueue, Store, Cluster, Owner and
// Guarantees are required.
type Collector struct {
	Kube    kubernetes.Interface
	Kueue   kueueclient.Interface
	Store   Store
	Cluster string
	// Owner names this instance in the heartbeat (host and process).
	Owner string
	// Guarantees returns each team's guarantees over time (the approved
	// contracts' guarantees from when each took effect), read once per
	// flush: each second is split by the guarantee in force then.
	Guarantees func(ctx context.Context) (Guaranteed, error)
	// Accelerators per instance type (provision.ClusterSettings.Accelerators):
	// the resource each instance type is counted in, and the count per
	// instance for nodes whose allocatable shows none.
	Accelerators map[string]provision.ResourcesPerInstance
	// ClusterQueueOf names each team's Kueue ClusterQueue
	// (provision.ClusterSettings.ClusterQueueName): each flush records
	// what that queue's status reports borrowing beside the collector's
	// own figure (borrowingLocked). nil records none.
	ClusterQueueOf func(team string) string
	Interval       time.Duration // between flushes; default one minute
	// InventoryCluster names the HyperPod cluster (the contracts'
	// cluster_name) whose observed inventory the collector keeps from its
	// nodes (inventory.go); empty: it keeps none.
	InventoryCluster string
	// InventorySettle: how long the node counts must hold before they are
	// written; default DefaultInventorySettle.
	InventorySettle time.Duration
	// InventoryChanged, when set, is called after the collector wrote a
	// changed inventory (the review scheduler's Wake: the capacity
	// trigger then runs at once, not at its next interval).
	InventoryChanged func()
	Retention        time.Duration // records older are pruned daily; 0 keeps all
	Now              func() time.Time
	Logger           *slog.Logger

	mu        sync.Mutex
	teams     map[string]string // namespace -> team
	nodes     map[string]*nodeState
	seenNodes map[string]bool // nodes the informer delivered since Start
	pods      map[types.UID]*podRec
	wls       map[types.UID]*wlState
	queues    map[string]map[string]int64      // ClusterQueue -> flavor/resource -> borrowed
	sampled   map[borrowKey]usage.BorrowSample // the borrowing last recorded per series
	dirty     changes
	dirtyFrom time.Time // earliest instant whose hour must be recomputed
	last      time.Time // the heartbeat: usage known until here
	synced    bool
	warned    map[string]bool // instance types with unconverted requests logged

	// The inventory (inventory.go): what was last written or found stored,
	// and when the node counts last changed and first changed since.
	invWritten                    string
	invChangedAt, invPendingSince time.Time

	// While Start loads what is stored for the objects the informers
	// report, pods and Workloads it has no state for wait here (the latest
	// object of each), so that none is rebuilt from its status alone and
	// recorded over a richer history (issue 38).
	loading      bool
	deferredPods map[types.UID]*slimPod
	deferredWLs  map[string]*kueue.Workload
}

// changes is what the collector learned since its last flush. Allocs
// point at records that are never changed once made (c.pods holds the
// same ones): each pod's change adds a pointer, not a copy of its record,
// which at 50,000 pods was 9.5 MiB of the collector's live heap.
type changes struct {
	Allocs    []*podRec
	Workloads []usage.Workload
	Nodes     []usage.NodeSpan
}

type nodeState struct {
	span           usage.NodeSpan // the open span
	coresPerDevice int64          // the node's NeuronCores per device; 0 unknown
}

type wlState struct {
	w          usage.Workload
	admittedAt time.Time // the admission in force; zero when not admitted
}

// storedWL is the state of a Workload whose history was recorded: it is
// admitted when its last wait ended in its last admission (a wait that
// ended otherwise ended with the Workload's finish).
func storedWL(w usage.Workload) *wlState {
	st := &wlState{w: w}
	if n := len(w.Admissions); n > 0 {
		if p := len(w.Pending); p == 0 || w.Pending[p-1].To.Equal(w.Admissions[n-1].At) {
			st.admittedAt = w.Admissions[n-1].At
		}
	}
	return st
}

func (c *Collector) now() time.Time {
	if c.Now != nil {
		return c.Now().UTC().Truncate(time.Second)
	}
	return time.Now().UTC().Truncate(time.Second)
}

func (c *Collector) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// Run claims the cluster, starts the informers, reconciles and flushes
// every Interval until ctx is done; then it flushes once more and returns.
// While another instance holds the cluster it waits.
func (c *Collector) Run(ctx context.Context) error {
	interval := cmp.Or(c.Interval, time.Minute)
	var last time.Time
	for {
		var err error
		now := c.now()
		last, err = c.Store.ClaimCollector(ctx, c.Cluster, c.Owner, now, now.Add(-3*interval))
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrCollectorLost) {
			return err
		}
		c.logger().Info("another usage collector is running; waiting", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
	// Records past the retention go first, then once a day.
	pruned := c.now()
	c.prune(ctx, pruned)
	stop, err := c.Start(ctx, last)
	if err != nil {
		return err
	}
	defer stop()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if now := c.now(); now.Sub(pruned) >= 24*time.Hour {
			pruned = now
			c.prune(ctx, now)
		}
		select {
		case <-ctx.Done():
			return c.Flush(context.WithoutCancel(ctx))
		case <-t.C:
		}
		if err := c.Flush(ctx); err != nil {
			if errors.Is(err, store.ErrCollectorLost) {
				return err
			}
			c.logger().Error("usage flush failed", "err", err)
		}
	}
}

func (c *Collector) prune(ctx context.Context, now time.Time) {
	if c.Retention <= 0 {
		return
	}
	if n, err := c.Store.PruneUsage(ctx, now.Add(-c.Retention)); err != nil {
		c.logger().Error("pruning usage failed", "err", err)
	} else if n > 0 {
		c.logger().Info("pruned usage records past retention", "rows", n)
	}
}

// Start starts the informers, waits until they have delivered the
// cluster's current state, and reconciles it with the records left open
// by an earlier run whose heartbeat was last (zero on the first start).
// stop ends the informers. The caller then calls Flush.
func (c *Collector) Start(ctx context.Context, last time.Time) (stop func(), err error) {
	if err := c.requireKueue(ctx); err != nil {
		return nil, err
	}
	now := c.now()
	c.mu.Lock()
	c.resetFollowed()
	c.last, c.dirtyFrom = cmp.Or(last, now), cmp.Or(last, now)
	c.mu.Unlock()

	open, err := c.Store.OpenUsageRecords(ctx, c.Cluster)
	if err != nil {
		return nil, err
	}
	if err := c.loadInventory(ctx, now); err != nil {
		return nil, err
	}
	c.mu.Lock()
	for _, n := range open.Nodes {
		c.nodes[n.Node] = &nodeState{span: n}
	}
	c.loading, c.deferredPods, c.deferredWLs = true, map[types.UID]*slimPod{}, map[string]*kueue.Workload{}
	c.mu.Unlock()

	runCtx, cancel := context.WithCancel(ctx)
	kf := informers.NewSharedInformerFactoryWithOptions(c.Kube, 0, informers.WithTransform(strip))
	qf := kueueinformers.NewSharedInformerFactoryWithOptions(c.Kueue, 0, kueueinformers.WithTransform(strip))
	// Namespaces and nodes first: a pod's team and instance type are
	// looked up when its event arrives.
	nsReg, err1 := kf.Core().V1().Namespaces().Informer().AddEventHandler(handler(c.onNamespace, nil))
	nodeReg, err2 := kf.Core().V1().Nodes().Informer().AddEventHandler(handler(c.onNode, c.onNodeGone))
	if err := errors.Join(err1, err2); err != nil {
		cancel()
		return nil, err
	}
	kf.Start(runCtx.Done())
	if !cache.WaitForCacheSync(runCtx.Done(), nsReg.HasSynced, nodeReg.HasSynced) {
		cancel()
		kf.Shutdown()
		return nil, fmt.Errorf("usage collector: namespaces and nodes did not sync: %w", context.Cause(runCtx))
	}
	podReg, err1 := kf.Core().V1().Pods().Informer().AddEventHandler(handler(c.onPod, c.onPodGone))
	wlReg, err2 := qf.Kueue().V1beta2().Workloads().Informer().AddEventHandler(handler(c.onWorkload, nil))
	cqReg, err3 := qf.Kueue().V1beta2().ClusterQueues().Informer().AddEventHandler(handler(c.onQueue, nil))
	if err := errors.Join(err1, err2, err3); err != nil {
		cancel()
		kf.Shutdown()
		return nil, err
	}
	kf.Start(runCtx.Done())
	qf.Start(runCtx.Done())
	stop = func() { cancel(); kf.Shutdown(); qf.Shutdown() }
	if !cache.WaitForCacheSync(runCtx.Done(), podReg.HasSynced, wlReg.HasSynced, cqReg.HasSynced) {
		stop()
		return nil, fmt.Errorf("usage collector: pods and Workloads did not sync: %w", context.Cause(runCtx))
	}
	if err := c.merge(ctx, now); err != nil {
		stop()
		return nil, err
	}
	if err := c.reconcile(ctx, open, last, now); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// merge ends the loading: it reads what is stored for the pods and
// Workloads the informers reported and the collector had no state for,
// takes that as their state, and only then folds in what the cluster shows,
// so that a restart or a new leader records nothing but what changed (a
// Workload rebuilt from its final conditions alone would lose its
// preemptions and earlier waits). Objects that arrive while it reads wait
// too, and are folded in after.
func (c *Collector) merge(ctx context.Context, now time.Time) error {
	for {
		c.mu.Lock()
		pods, wls := c.deferredPods, c.deferredWLs
		if len(pods) == 0 && len(wls) == 0 {
			c.loading, c.deferredPods, c.deferredWLs = false, nil, nil
			c.mu.Unlock()
			return nil
		}
		c.deferredPods, c.deferredWLs = map[types.UID]*slimPod{}, map[string]*kueue.Workload{}
		c.mu.Unlock()
		podKeys := make([]string, 0, len(pods))
		for uid := range pods {
			podKeys = append(podKeys, string(uid))
		}
		stored, err := c.Store.UsageRecordsOf(ctx, c.Cluster, podKeys, slices.Collect(maps.Keys(wls)))
		if err != nil {
			return err
		}
		c.mu.Lock()
		for _, a := range stored.Allocs {
			if c.pods[types.UID(a.Key)] == nil {
				c.pods[types.UID(a.Key)] = recOf(a)
			}
		}
		for _, w := range stored.Workloads {
			if c.wls[types.UID(w.Key)] == nil {
				c.wls[types.UID(w.Key)] = storedWL(w)
			}
		}
		for _, p := range pods {
			c.podLocked(p, now)
		}
		for _, w := range wls {
			c.workloadLocked(w)
		}
		c.mu.Unlock()
	}
}

// requireKueue checks, before any informer starts, that the cluster
// serves the Kueue version whose Workloads and ClusterQueues the collector
// reads (provision.KueueGroupVersion): on a cluster whose task governance
// add-on ships an older Kueue the informers would never sync, and the
// collector would only say so after its sync deadline, as "did not sync".
func (c *Collector) requireKueue(ctx context.Context) error {
	gv := provision.KueueGroupVersion
	served, err := (&provision.ClusterReader{Discovery: c.Kube.Discovery()}).Served(ctx, gv.Group)
	if err != nil {
		return fmt.Errorf("usage collector: %w", err)
	}
	if slices.Contains(served, gv.Version) {
		return nil
	}
	return fmt.Errorf("usage collector: Kueue %s is not served (%s): the collector reads Kueue Workloads and ClusterQueues of that version; upgrade the HyperPod task governance add-on (amazon-sagemaker-hyperpod-taskgovernance) to %s or later",
		gv.Version, (&provision.NotServedError{Want: gv, Served: served}).ServedText(), provision.KueueAddonVersion)
}

// reconcile closes the pods recorded as running that the cluster no longer
// has: they ended while the collector was not running, at a time nobody
// can tell any more. Their use is counted until the last heartbeat, and the
// rest of the outage is recorded as a missing data period. Pods still
// present were recovered exactly from their status by the informer.
func (c *Collector) reconcile(ctx context.Context, open store.UsageRecords, last, now time.Time) error {
	c.mu.Lock()
	c.synced = true
	// A node recorded that the cluster no longer has went while the
	// collector was down: its capacity counts until the last heartbeat.
	for name, st := range c.nodes {
		if !c.seenNodes[name] {
			span := st.span
			span.To = usage.Later(cmp.Or(last, now), span.From)
			c.dirty.Nodes = append(c.dirty.Nodes, span)
			c.dirtyFrom = usage.Earlier(c.dirtyFrom, span.To)
			delete(c.nodes, name)
			c.nodesChanged(now)
		}
	}
	var gone []string
	for _, a := range open.Allocs {
		if _, ok := c.pods[types.UID(a.Key)]; ok {
			continue
		}
		a.End = usage.Later(cmp.Or(last, a.Start), a.Start)
		a.Status = "Gone"
		c.markAlloc(recOf(a), a.End)
		gone = append(gone, a.Namespace+"/"+a.Pod)
	}
	c.mu.Unlock()
	if len(gone) == 0 || last.IsZero() || !last.Before(now) {
		return nil
	}
	slices.Sort(gone)
	return c.Store.AddMissing(ctx, usage.Missing{Cluster: c.Cluster, From: last, To: now,
		Reason: fmt.Sprintf("the usage collector was not running; %d pod(s) recorded as running were deleted before it restarted (%s), so their use after %s is unknown",
			len(gone), summarize(gone), last.Format(time.RFC3339))})
}

func summarize(names []string) string {
	if len(names) <= 3 {
		return fmt.Sprint(names)
	}
	return fmt.Sprintf("%v and %d more", names[:3], len(names)-3)
}

// Flush records what changed since the last flush, with Kueue's account
// of borrowing beside its own where either changed, and recomputes the
// hours it touched, up to now, replacing them in the store; then it writes
// the inventory if the node counts changed and settled.
func (c *Collector) Flush(ctx context.Context) error {
	now := c.now()
	err := c.flushUsage(ctx, now)
	if errors.Is(err, store.ErrCollectorLost) {
		return err
	}
	return errors.Join(err, c.flushInventory(ctx, now))
}

func (c *Collector) flushUsage(ctx context.Context, now time.Time) error {
	gs, err := c.Guarantees(ctx)
	if err != nil {
		return err
	}
	g, cpu := gs.Accelerators, gs.CPU
	c.mu.Lock()
	ch := c.dirty
	borrowing := c.borrowingLocked(g, now)
	c.dirty = changes{}
	from := usage.Earlier(c.dirtyFrom, c.last)
	c.dirtyFrom = now
	c.mu.Unlock()
	w := ch // what is written: each pod's last record
	w.Allocs = usage.LastOfEach(ch.Allocs, func(r *podRec) types.UID { return r.pod.UID })
	// The hours are recomputed from the store's records with the flush's
	// laid over them (overlay) while the flush writes them (put): once the
	// store's reading is fixed (began), so that it does not read them
	// back. The overlay makes the hours the same whenever the reading
	// sees a record written; they replace the stored ones only once every
	// record is written.
	rctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	began := make(chan struct{})
	var once sync.Once
	begin := func() { once.Do(func() { close(began) }) }
	type recomputed struct {
		in  *usage.Integrator
		err error
	}
	done := make(chan recomputed, 1)
	go func() {
		in, err := c.recompute(rctx, from, now, g, cpu, w, begin)
		begin()
		done <- recomputed{in, err}
	}()
	<-began
	if err := c.put(ctx, w, borrowing); err != nil {
		stop(err) // the hours would not be kept
		<-done
		c.requeue(ch, from)
		return err
	}
	c.mu.Lock()
	c.recordedBorrowing(borrowing)
	c.mu.Unlock()
	r := <-done
	if r.err == nil {
		r.err = c.Store.ReplaceUsage(ctx, c.Cluster, usage.HourStart(from), now, r.in.Hours(), r.in.ClusterHours(), c.Owner)
	}
	if r.err != nil {
		c.mu.Lock()
		c.dirtyFrom = usage.Earlier(c.dirtyFrom, from)
		c.mu.Unlock()
		return r.err
	}
	c.mu.Lock()
	c.last = now
	c.mu.Unlock()
	return nil
}

// putPods bounds the pods' records of one PutUsageRecords call (put).
const putPods = 5000

// put records ch and Kueue's borrowing: the pods' records putPods at a
// time, each part copied when it is written (the first flush of a large
// cluster carries every pod it follows: copying all 50,000 at once was 10
// MiB more live heap, doubled by the GC's target), the Workloads, node
// spans and borrowing with the last part. Each call is its own
// transaction: a part written before a later one failed is written again
// with the rest (put again after requeue), and writing a record again
// replaces it, so that never counts twice.
func (c *Collector) put(ctx context.Context, ch changes, borrowing []usage.BorrowSample) error {
	allocs := ch.Allocs
	part := make([]usage.Alloc, 0, min(len(allocs), putPods))
	copied := func(ps []*podRec) []usage.Alloc {
		part = part[:0]
		for _, r := range ps {
			part = append(part, r.alloc())
		}
		return part
	}
	for ; len(allocs) > putPods; allocs = allocs[putPods:] {
		if err := c.Store.PutUsageRecords(ctx, c.Cluster, store.UsageRecords{Allocs: copied(allocs[:putPods])}); err != nil {
			return err
		}
	}
	return c.Store.PutUsageRecords(ctx, c.Cluster, store.UsageRecords{Allocs: copied(allocs), Workloads: ch.Workloads, Nodes: ch.Nodes, Borrowing: borrowing})
}

func (c *Collector) requeue(r changes, from time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dirty.Allocs = append(r.Allocs, c.dirty.Allocs...)
	c.dirty.Workloads = append(r.Workloads, c.dirty.Workloads...)
	c.dirty.Nodes = append(r.Nodes, c.dirty.Nodes...)
	c.dirtyFrom = usage.Earlier(c.dirtyFrom, from)
}

// recompute integrates the hours from the hour of from up to now from
// what the store records with ch, the flush's records, laid over it
// (overlay), reading and integrating them team by team; began is called
// once the store's reading of the records is fixed
// (Store.EachTeamUsageAsOf).
func (c *Collector) recompute(ctx context.Context, from, now time.Time, g, cpu usage.GuaranteeHistory, ch changes, began func()) (*usage.Integrator, error) {
	lo, to := usage.HourStart(from), now.Add(time.Second)
	o := newOverlay(ch, lo, to)
	nodes, err := c.Store.NodeSpansIn(ctx, c.Cluster, lo, to)
	if err != nil {
		return nil, err
	}
	in := usage.NewIntegrator(c.Cluster, lo, now, o.nodeSpans(nodes), g, cpu)
	return in, integrateTeams(ctx, in, func(fn func(team string, r store.UsageRecords) error) error {
		return o.each(func(fn func(team string, r store.UsageRecords) error) error {
			return c.Store.EachTeamUsageAsOf(ctx, c.Cluster, lo, to, began, fn)
		}, fn)
	})
}

// resetFollowed empties what the collector follows (namespaces' teams,
// nodes, pods, Workloads, queues, the nodes seen since Start and the
// borrowing last recorded), as Start begins it. The caller holds mu.
func (c *Collector) resetFollowed() {
	c.teams, c.nodes, c.pods, c.wls, c.queues = map[string]string{}, map[string]*nodeState{}, map[types.UID]*podRec{}, map[types.UID]*wlState{}, map[string]map[string]int64{}
	c.seenNodes, c.sampled = map[string]bool{}, map[borrowKey]usage.BorrowSample{}
}

// errIntegrationFailed stops integrateTeams's reading after a team's
// integration failed (that error is the one returned).
var errIntegrationFailed = errors.New("usage collector: integration failed")

// integrateTeams feeds in the teams' records that each (a store's
// EachTeamUsageAsOf, with the flush's records laid over) reads,
// integrating one team on a goroutine of its own while the next is read:
// in a first flush of 50,000 pods reading the records back took about a
// quarter of the CPU and integrating them a tenth (BenchmarkFlush50kPods's
// profile, 2026-12-07, before the overlay), one after the other on one
// core. The hand-over is unbuffered, so that at most two
// teams' records are held at once (the one integrated, the one read), never
// the cluster's; in is used by that goroutine alone until it is done, and
// the teams reach it in the order read (Integrator.Team's rows do not
// depend on it, but its errors are the same).
func integrateTeams(ctx context.Context, in *usage.Integrator, each func(fn func(team string, r store.UsageRecords) error) error) error {
	type teamRecords struct {
		team string
		r    store.UsageRecords
	}
	work := make(chan teamRecords)
	failed := make(chan struct{}) // closed when a team's integration failed
	done := make(chan error, 1)
	go func() {
		var err error
		for t := range work {
			if err = in.Team(t.team, t.r.Allocs, t.r.Workloads); err != nil {
				close(failed)
				for range work { // until the reader sees failed
				}
				break
			}
		}
		done <- err
	}()
	readErr := each(func(team string, r store.UsageRecords) error {
		select {
		case work <- teamRecords{team, r}:
			return nil
		case <-failed:
			return errIntegrationFailed
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
	close(work)
	if err := <-done; err != nil {
		return err
	}
	return readErr
}

// QueueBorrowed is what each ClusterQueue reports borrowing
// (status.flavorsUsage[].resources[].borrowed), by "flavor/resource", in
// the resource's units (GPUs, cores as millicores, bytes): Kueue's own
// account, which each flush records beside the collector's
// (borrowingLocked).
func (c *Collector) QueueBorrowed() map[string]map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]map[string]int64, len(c.queues))
	for k, v := range c.queues {
		out[k] = maps.Clone(v)
	}
	return out
}

// markAlloc records a (new or changed) allocation for the next flush: a
// record never changed once made (see changes). The caller holds mu.
func (c *Collector) markAlloc(a *podRec, from time.Time) {
	c.dirty.Allocs = append(c.dirty.Allocs, a)
	c.dirtyFrom = usage.Earlier(c.dirtyFrom, from)
}

func handler(on func(any), gone func(any)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { on(obj) },
		UpdateFunc: func(_, obj any) { on(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if gone != nil {
				gone(obj)
			}
		},
	}
}
