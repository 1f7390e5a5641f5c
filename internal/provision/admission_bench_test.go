package provision

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hyperpod-governance/portal/internal/support/benchtable"
	"github.com/hyperpod-governance/portal/internal/support/hpcluster"
)

var (
	admissionCreates     = flag.Int("admission-creates", 1000, "job creates BenchmarkAdmissionJobCreate times in each namespace per iteration")
	admissionConcurrency = flag.Int("admission-concurrency", 4, "job creates BenchmarkAdmissionJobCreate runs at once, in either namespace")
	admissionCluster     = flag.String("admission-cluster", "kueue", "where BenchmarkAdmissionJobCreate runs: kueue (the scheduling cluster, Kueue's webhooks on both sides: the row) or bare (the test bed's API server, no webhooks: for comparison, not the row)")
)

// admissionTurn is how many creates one namespace makes before the other
// takes its turn.
const admissionTurn = 25

// BenchmarkAdmissionJobCreate is the admission row of
// ../shared/docs/performance.md, "a job create in a governed namespace
// against the same create in an ungoverned one: at most 1.2×".
//
// Where: the test bed's scheduling cluster (hack/testbed/cluster.sh), where
// Kueue's controller manager serves its webhooks, as on a HyperPod cluster
// with task governance, whose add-on runs Kueue (platform-reference.md).
// There an ungoverned namespace's Job create is not free of admission:
// Kueue's mutating webhook mjob.kb.io (CREATE of batch/v1 jobs) and its
// validating webhook vjob.kb.io (CREATE and UPDATE) take every Job create,
// in any namespace, both declared sideEffects None
// (sigs.k8s.io/kueue@v0.17.0 config/components/webhook/manifests.yaml), so
// the API server calls them on dry runs too. The benchmark checks that they
// did on both sides: Kueue's mutating webhook suspends a queued Job created
// unsuspended, and the dry run's answer shows it. What the row compares is
// what a team's governance adds to the create that Kueue's cluster makes
// anyway. On the bare API server (-admission-cluster=bare, not a row of
// make bench) the ungoverned side runs no admission at all, and the fixed
// cost of evaluating any bound ValidatingAdmissionPolicy, about 1.2× there
// with a policy of one `true` (docs/benchmarks.md), is the whole target.
//
// What: it applies a connection's plan through the provisioner (Applier.Apply of
// BuildPlan, as the worker applies it) with the cluster in deny mode, the
// mode the rules are rolled out to: the team namespace with its quota,
// LimitRange, Roles, Kueue queue and the contract's admission parameters,
// bound to the shared ValidatingAdmissionPolicy (admission.go). Beside it,
// a plain namespace the portal does not govern. It waits until the API
// server holds the team namespace to the contract (a Job without the
// queue label is refused) and checks that the other admits that Job.
//
// Then it times the same create in each: a batch/v1 Job, suspended, one
// GPU on the guaranteed instance type (rule 5 reads its containers), with
// the team's LocalQueue label and an allowed priority class, so that every
// rule of the policy is evaluated and passes (a governed create drawing a
// warning or a refusal fails the benchmark). Each create is a server-side
// dry run (dryRun=All): the API server runs every stage of the request but
// the write to storage, admission included ("Every stage runs as normal,
// except for the final storage stage. Admission controllers are run to
// check that the request is valid",
// https://kubernetes.io/docs/reference/using-api/api-concepts/#dry-run),
// so nothing piles up and no controller acts on the Jobs; both sides skip
// the same write, which makes the ratio stricter than with it. The two
// namespaces take turns of admissionTurn creates, the first side swapped
// every turn, each turn at -admission-concurrency creates at once through
// the same admin client (so authorization is the same on both sides: only
// what the namespace's governance adds differs), after one untimed turn
// each. The row (internal/support/benchtable): the governed creates' time
// against the ungoverned ones', -admission-creates of each per iteration.
//
//	go test -run '^$' -bench '^BenchmarkAdmissionJobCreate$' -benchtime=1x ./internal/provision/
func BenchmarkAdmissionJobCreate(b *testing.B) {
	var cfg *rest.Config
	where := "on Kueue's cluster (its webhooks on both sides)"
	switch *admissionCluster {
	case "kueue":
		// The fixture's lock keeps other tests' Kueue objects off the
		// cluster while it measures; its client is throttled for tests
		// (50 QPS), the creates here are not.
		cfg = rest.CopyConfig(hpcluster.Connect(b).Config)
		cfg.QPS, cfg.Burst = 1000, 2000
	case "bare":
		cfg, where = testbedConfig(b), "on an API server without webhooks"
	default:
		b.Fatalf("-admission-cluster=%q: want kueue or bare", *admissionCluster)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	a, err := NewApplier(cfg)
	if err != nil {
		b.Fatal(err)
	}
	run := runID(b)
	settings := itSettings(run)
	settings.AdmissionMode = AdmissionDeny
	plan := mustPlan(b, 71, itContract("red", "it-"+run+"-adm-bench"), settings)
	deleteAfter(b, a.Client, plan)
	if _, err := a.Apply(ctx, plan); err != nil {
		b.Fatalf("apply %s: %v", plan.Namespace, err)
	}
	admin, warned := warnedClient(b, cfg)
	bare := "it-" + run + "-adm-bare"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: bare}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = admin.CoreV1().Namespaces().Delete(context.Background(), bare, metav1.DeleteOptions{})
	})
	waitForQuota(ctx, b, admin, plan.Namespace)
	waitForAdmission(ctx, b, admin, warned, plan.Namespace, true)
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	if _, err := admin.BatchV1().Jobs(bare).Create(ctx, admissionJob(nil), dry); err != nil {
		b.Fatalf("the ungoverned namespace refused a job without a queue label: %v", err)
	}
	if w := warned.take(); len(w) > 0 {
		b.Fatalf("the ungoverned namespace warned about a job without a queue label: %q", w)
	}
	labels := map[string]string{KueueQueueLabel: LocalQueueName(plan.Namespace), KueuePriorityClassLabel: "training-priority"}
	if *admissionCluster == "kueue" {
		for _, ns := range []string{plan.Namespace, bare} {
			kueueSuspends(ctx, b, admin, ns, labels, dry)
		}
	}

	side := func(ns string) func() time.Duration {
		return func() time.Duration {
			d, err := createTurn(ctx, admin, ns, labels, dry)
			if err != nil {
				b.Fatalf("%s: %v", ns, err)
			}
			if w := warned.take(); len(w) > 0 {
				b.Fatalf("%s: a compliant job drew warnings %q", ns, w)
			}
			return d
		}
	}
	governed, ungoverned := side(plan.Namespace), side(bare)
	governed()
	ungoverned()
	var gov, unGov time.Duration
	creates := 0
	for b.Loop() {
		for turn := 0; turn*admissionTurn < *admissionCreates; turn++ {
			if turn%2 == 0 {
				gov += governed()
				unGov += ungoverned()
			} else {
				unGov += ungoverned()
				gov += governed()
			}
			creates += admissionTurn
		}
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(creates) }
	b.ReportMetric(per(gov), "ms/create-governed")
	b.ReportMetric(per(unGov), "ms/create-ungoverned")
	b.Logf("%d job creates (dry run) in each namespace at concurrency %d: governed %s (%.2f ms a create), ungoverned %s (%.2f ms)",
		creates, *admissionConcurrency, gov.Round(time.Millisecond), per(gov), unGov.Round(time.Millisecond), per(unGov))
	if err := benchtable.Record(b, benchtable.Row{
		Figure: fmt.Sprintf("admission: job create (dry run) in a governed namespace, deny mode, %s, concurrency %d", where, *admissionConcurrency),
		Value:  per(gov), Unit: "ms", Baseline: per(unGov), BaselineName: "ungoverned namespace",
		Kind: benchtable.RatioAtMost, Limit: 1.2,
	}); err != nil {
		b.Error(err)
	}
}

// kueueSuspends checks that Kueue's mutating webhook takes a Job create in
// ns: a queued Job created unsuspended comes back suspended from the dry
// run: Kueue's job webhook (sigs.k8s.io/kueue@v0.17.0
// pkg/controller/jobs/job/job_webhook.go, JobWebhook.Default) calls
// jobframework.ApplyDefaultForSuspend, which suspends it because "Jobs with
// queue names whose parents are not managed by Kueue are default
// suspended" (pkg/controller/jobframework/defaults.go).
func kueueSuspends(ctx context.Context, b *testing.B, c *kubernetes.Clientset, ns string, labels map[string]string, opts metav1.CreateOptions) {
	b.Helper()
	j := gpuJob(labels, "ml.p5.48xlarge")
	j.Spec.Suspend = nil
	got, err := c.BatchV1().Jobs(ns).Create(ctx, j, opts)
	if err != nil {
		b.Fatalf("%s: an unsuspended queued job: %v", ns, err)
	}
	if got.Spec.Suspend == nil || !*got.Spec.Suspend {
		b.Fatalf("%s: Kueue's webhook did not suspend a queued job (spec.suspend = %v): its webhooks are not in the create's path", ns, got.Spec.Suspend)
	}
}

// createTurn creates admissionTurn Jobs (gpuJob with labels, on the
// guaranteed instance type) in ns with opts, -admission-concurrency at
// once, and returns the wall time the turn took.
func createTurn(ctx context.Context, c *kubernetes.Clientset, ns string, labels map[string]string, opts metav1.CreateOptions) (time.Duration, error) {
	jobs := make(chan struct{}, admissionTurn)
	for range admissionTurn {
		jobs <- struct{}{}
	}
	close(jobs)
	var wg sync.WaitGroup
	errs := make(chan error, *admissionConcurrency)
	start := time.Now()
	for range *admissionConcurrency {
		wg.Go(func() {
			for range jobs {
				if _, err := c.BatchV1().Jobs(ns).Create(ctx, gpuJob(labels, "ml.p5.48xlarge"), opts); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	d := time.Since(start)
	close(errs)
	return d, <-errs
}
