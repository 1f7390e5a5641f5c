package provision_test

import (
	"context"
	"flag"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/support/benchtable"
	"github.com/hyperpod-governance/portal/internal/support/testenv"
)

var noopTenantsFlag = flag.Int("noop-tenants", 100, "number of unchanged tenants BenchmarkNoopReconcile checks and re-applies")

// noopRounds are the measured rounds of an iteration of
// BenchmarkNoopReconcile; its figures are their averages.
const noopRounds = 5

// BenchmarkNoopReconcile (issue 15, "no-op reconcile") provisions
// -noop-tenants tenants through the worker (not timed), then, per
// iteration, on the real kube-apiserver of the test bed:
//
//   - the baseline: one bare list per kind of the plans (the portal's
//     label selector), the least any reconcile can read;
//   - the drift checker's run over the tenants (DriftChecker.RunOnce with
//     DriftAllOf: the versions and plans from the store, one snapshot, the
//     results saved to the store);
//   - the re-apply of every tenant as production runs it: a re-apply job
//     per connection (queued as an admin's Re-apply queues it, not timed),
//     run by the worker, which claims the due re-apply jobs together (up
//     to ReapplyBatch) and runs them from one snapshot of all their plans
//     (reapplybatch.go: one list per kind for all of them, the namespace
//     checks included), recording each job's steps in the store,
//
// in noopRounds rounds after one not counted.
// It records through internal/support/benchtable: the requests of each (at most
// one list per kind), the writes (none), the resourceVersions changed
// (none), and the time of each next to the bare lists'. It runs on SQLite
// and, when the test bed has PostgreSQL, on PostgreSQL (the drift checker
// reads the versions and saves its reports there). Run it with
// -benchtime=1x:
//
//	go test -run '^$' -bench NoopReconcile -benchtime=1x ./internal/provision/ -noop-tenants=100
func BenchmarkNoopReconcile(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) { benchNoop(b, "sqlite", "") })
	b.Run("postgres", func(b *testing.B) {
		if os.Getenv("PORTAL_TEST_POSTGRES_URL") == "" {
			b.Skip("no PostgreSQL (PORTAL_TEST_POSTGRES_URL unset): run `make bench` or `make test`")
		}
		benchNoop(b, "postgres", testenv.PostgresDB(b, "portal_noop", false))
	})
}

func benchNoop(b *testing.B, engine, dsn string) {
	bed := newWBedOn(b, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	n := *noopTenantsFlag
	tenants := bed.noopTenants(ctx, "nb", n)
	plans := noopPlans(tenants)
	kinds := noopKinds(plans)
	var gvrs []schema.GroupVersionResource
	seen := map[schema.GroupVersionResource]bool{}
	for _, o := range plans[0].Objects {
		gvk := o.Obj.GroupVersionKind()
		m, err := bed.look.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			b.Fatal(err)
		}
		if !seen[m.Resource] {
			seen[m.Resource] = true
			gvrs = append(gvrs, m.Resource)
		}
	}
	if len(gvrs) != kinds {
		b.Fatalf("%d resources for %d kinds", len(gvrs), kinds)
	}
	checker := &provision.DriftChecker{
		List:     bed.provisionedOf(tenants),
		Plans:    bed.plans,
		CheckAll: provision.DriftAllOf(bed.applier, nil),
		Save:     bed.db.SaveDrift,
		Clock:    bed.clock.Now,
	}
	bed.quiet(ctx)
	before := bed.versions(ctx, tenants)
	worker := bed.worker("noop-bench")
	worker.PlansAll = bed.plansAll // as production's worker plans a batch

	var bareTime, driftTime, reapplyTime time.Duration
	var driftRequests, reapplyRequests, writes int
	// Each iteration is noopRounds rounds of the three, interleaved, after
	// one round not counted (the API server's first lists of a kind and
	// the store's first reads are slower): a machine shared with other
	// work slows all three alike.
	round := func() {
		// The floor: one bare list per kind, as a minimal client would.
		start := time.Now()
		for _, gvr := range gvrs {
			if _, err := bed.look.Client.Resource(gvr).List(ctx, metav1.ListOptions{LabelSelector: provision.LabelManagedBy + "=" + provision.ManagedBy}); err != nil {
				b.Fatal(err)
			}
		}
		bareTime += time.Since(start)

		bed.counter.Reset()
		start = time.Now()
		drifted, err := checker.RunOnce(ctx)
		driftTime += time.Since(start)
		if err != nil || drifted != 0 {
			b.Fatalf("drift check of unchanged tenants: %d drifted, %v", drifted, err)
		}
		_, total, _, w := bed.counter.Counts()
		driftRequests += total
		writes += w

		// The re-apply as production runs it: an admin's Re-apply
		// queues one job per connection (not timed), and the worker
		// claims them together and runs them from one snapshot
		// (reapplybatch.go, reconcile.go ForPlans), recording every
		// job's steps.
		ids := bed.queueReapply(ctx, tenants)
		bed.counter.Reset()
		start = time.Now()
		bed.runJobs(ctx, worker)
		reapplyTime += time.Since(start)
		byMethod, total, _, w := bed.counter.Counts()
		reapplyRequests += total
		writes += w
		if total != byMethod[http.MethodGet] {
			b.Errorf("re-apply sent %v: more than reads", byMethod)
		}
		for i, steps := range bed.reapplied(ctx, tenants, ids) {
			for name, outcome := range steps {
				if !strings.HasPrefix(outcome, string(provision.Unchanged)) {
					b.Errorf("re-apply %s of %s = %s", name, tenants[i].team, outcome)
				}
			}
		}
	}
	round()
	bareTime, driftTime, reapplyTime = 0, 0, 0
	driftRequests, reapplyRequests, writes = 0, 0, 0
	b.ResetTimer()
	for range b.N {
		for range noopRounds {
			round()
		}
	}
	b.StopTimer()
	changed := changedVersions(before, bed.versions(ctx, tenants))
	if len(changed) != 0 {
		b.Errorf("resourceVersions changed: %v", changed)
	}
	if saved, err := bed.db.Drift(ctx, tenants[0].conn.ID); err != nil || saved.Error != "" || len(saved.Items) != 0 || saved.CheckedAt.IsZero() {
		b.Errorf("the drift checker's report of %s = %+v, %v; want saved, no drift", tenants[0].team, saved, err)
	}

	iters := float64(b.N * noopRounds)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / iters }
	pre := "no-op reconcile/" + engine + "/"
	what := " of " + strconv.Itoa(n) + " unchanged tenants"
	record := func(r benchtable.Row) {
		if err := benchtable.Record(b, r); err != nil {
			b.Error(err)
		}
	}
	// Requests: the target is about one list per kind for all the tenants
	// (issue 15); the floor is the same number of lists. The drift
	// checker reaches it (one snapshot per batch of 200), and so does the
	// re-apply: the worker runs the 100 jobs as one batch from one
	// snapshot, which also answers their namespace checks. No write, and
	// no request per object.
	record(benchtable.Row{Figure: pre + "drift check" + what + ": requests", Value: float64(driftRequests) / iters, Unit: "requests",
		Baseline: float64(kinds), BaselineName: "lists (one per kind)", Kind: benchtable.AtMost, Limit: float64(kinds)})
	record(benchtable.Row{Figure: pre + "re-apply jobs" + what + ": requests", Value: float64(reapplyRequests) / iters, Unit: "requests",
		Baseline: float64(kinds), BaselineName: "lists (one per kind)", Kind: benchtable.AtMost, Limit: float64(kinds)})
	record(benchtable.Row{Figure: pre + "drift check and re-apply jobs: writes", Value: float64(writes), Unit: "writes", Kind: benchtable.AtMost, Limit: 0})
	record(benchtable.Row{Figure: pre + "resourceVersions changed", Value: float64(len(changed)), Unit: "objects", Kind: benchtable.AtMost, Limit: 0})
	// Time next to the bare lists of the same run. The re-apply jobs read
	// as the drift check does, and record each job's claim, start, about
	// 25 steps and completion in the store: the target of 3× the bare
	// lists is the issue's. The drift check also
	// reads the versions and builds the plans from the store and saves one
	// report per tenant (a transaction each, on SQLite or PostgreSQL): 5×
	// the bare lists (measured at 2 to 2.6× on the shared 2-core machine;
	// the store's 100 transactions are the part that grows with tenants,
	// not the cluster's).
	record(benchtable.Row{Figure: pre + "re-apply jobs" + what + " (store included): time", Value: ms(reapplyTime), Unit: "ms",
		Baseline: ms(bareTime), BaselineName: "bare lists", Kind: benchtable.RatioAtMost, Limit: 3})
	record(benchtable.Row{Figure: pre + "drift check" + what + " (store included): time", Value: ms(driftTime), Unit: "ms",
		Baseline: ms(bareTime), BaselineName: "bare lists", Kind: benchtable.RatioAtMost, Limit: 5})
	b.ReportMetric(float64(reapplyRequests)/iters, "requests/reapply")
	b.ReportMetric(float64(driftRequests)/iters, "requests/drift")
	b.ReportMetric(ms(bareTime), "ms/bare-lists")
	b.ReportMetric(ms(reapplyTime), "ms/reapply")
	b.ReportMetric(ms(driftTime), "ms/drift")
}

// quiet waits until no namespace of the cluster is terminating, then logs
// how many RoleBindings the cluster holds. The benchmarks run before this
// one (the provisioning benchmark, this one on the other engine) leave
// their tenants' namespaces terminating when they end (deleteAfter does
// not wait), and until the namespace controller has emptied them their
// RoleBindings are in the snapshot's RoleBinding list, which is not
// narrowed to the plans (a prune step removes the RoleBindings nobody
// planned): past SnapshotPageSize objects that list takes a request per
// page, which would count another benchmark's leftovers against this one.
func (b *wbed) quiet(ctx context.Context) {
	b.tb.Helper()
	nsGVR := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	start := time.Now()
	for {
		l, err := b.look.Client.Resource(nsGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			b.tb.Fatal(err)
		}
		terminating := 0
		for _, ns := range l.Items {
			if phase, _, _ := unstructured.NestedString(ns.Object, "status", "phase"); phase == "Terminating" {
				terminating++
			}
		}
		if terminating == 0 {
			break
		}
		if time.Since(start) > 10*time.Minute {
			b.tb.Fatalf("%d namespaces still terminating after %s", terminating, time.Since(start).Round(time.Second))
		}
		select {
		case <-ctx.Done():
			b.tb.Fatal(ctx.Err())
		case <-time.After(time.Second):
		}
	}
	rb, err := b.look.Client.Resource(schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.tb.Fatal(err)
	}
	b.tb.Logf("no namespace terminating after %s; the cluster holds %d RoleBindings (a snapshot lists %d per request)",
		time.Since(start).Round(time.Second), len(rb.Items), provision.SnapshotPageSize)
}
