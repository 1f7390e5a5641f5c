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

	"github.com/hyperpod-governance/portal/internal/support/benchtable"
)

var (
	admissionCreates     = flag.Int("admission-creates", 1000, "job creates BenchmarkAdmissionJobCreate times in each namespace per iteration")
	admissionConcurrency = flag.Int("admission-concurrency", 4, "job creates BenchmarkAdmissionJobCreate runs at once, in either namespace")
)

// admissionTurn is how many creates one namespace makes before the other
// takes its turn.
const admissionTurn = 25

// BenchmarkAdmissionJobCreate is the admission row of
// ../shared/docs/performance.md, "a job create in a governed namespace
// against the same create in an ungoverned one: at most 1.2×". On the test
// bed's kube-apiserver it
// applies a connection's plan through the provisioner (Applier.Apply of
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
	cfg := testbedConfig(b)
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
		Figure: fmt.Sprintf("admission: job create (dry run) in a governed namespace, deny mode, concurrency %d", *admissionConcurrency),
		Value:  per(gov), Unit: "ms", Baseline: per(unGov), BaselineName: "ungoverned namespace",
		Kind: benchtable.RatioAtMost, Limit: 1.2,
	}); err != nil {
		b.Error(err)
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
