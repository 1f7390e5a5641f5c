package provision

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// warnings collects the API server's Warning headers (client-go hands each
// to rest.Config.WarningHandler).
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

// take returns the warnings seen since the last take.
func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.seen
	w.seen = nil
	return out
}

// warnedClient is a client of cfg (a copy) whose warnings are collected.
func warnedClient(t testing.TB, cfg *rest.Config) (*kubernetes.Clientset, *warnings) {
	t.Helper()
	w := &warnings{}
	c := rest.CopyConfig(cfg)
	c.WarningHandler = w
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	return cs, w
}

// admissionJob is a suspended Job (no pods) with the given labels.
func admissionJob(labels map[string]string) *batchv1.Job {
	suspend := true
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "adm-", Labels: labels},
		Spec: batchv1.JobSpec{
			Suspend: &suspend,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "train", Image: "busybox"}},
			}},
		},
	}
}

// gpuJob is admissionJob with one GPU, on instanceType.
func gpuJob(labels map[string]string, instanceType string) *batchv1.Job {
	j := admissionJob(labels)
	j.Spec.Template.Spec.NodeSelector = map[string]string{LabelInstanceType: instanceType}
	j.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{ResourceNvidiaGPU: resource.MustParse("1")}
	return j
}

// gpuPod is a pod with one GPU (in limits: the request defaults to it), on
// instanceType.
func gpuPod(instanceType string, owners ...metav1.OwnerReference) *corev1.Pod {
	p := barePod(owners...)
	p.Spec.NodeSelector = map[string]string{LabelInstanceType: instanceType}
	p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{ResourceNvidiaGPU: resource.MustParse("1")}
	return p
}

func barePod(owners ...metav1.OwnerReference) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "adm-", OwnerReferences: owners},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "debug", Image: "busybox"}},
		},
	}
}

// waitForAdmission waits, with ctx's deadline, until the API server holds
// namespace ns to the contract: a Job without the queue label is refused
// (deny) or answered with a warning (warn), both naming the team's queue
// (not yet the parameters: the binding may see the policy before the
// ConfigMap). The policy's, binding's and parameters' informers reach the
// admission plugin a moment after they are written.
func waitForAdmission(ctx context.Context, t testing.TB, c *kubernetes.Clientset, w *warnings, ns string, deny bool) {
	t.Helper()
	for {
		_, err := c.BatchV1().Jobs(ns).Create(ctx, admissionJob(nil), metav1.CreateOptions{})
		got := w.take()
		switch {
		case deny && apierrors.IsForbidden(err) && strings.Contains(err.Error(), KueueQueueLabel+": "+LocalQueueName(ns)):
			return
		case !deny && err == nil && strings.Contains(strings.Join(got, "\n"), KueueQueueLabel+": "+LocalQueueName(ns)):
			return
		case ctx.Err() != nil:
			t.Fatalf("namespace %s: the admission rules never took effect (last: %v, warnings %q)", ns, err, got)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestAdmissionRulesIntegration applies two connections' plans on the test
// bed's real API server, one on a cluster in deny mode and one in warn
// mode, and holds their namespaces to the contract: (1) a Job must name
// the team's LocalQueue, (2) its priority class must be one the contract
// allows, (3) only the kinds of the approved workload types are created
// (checkKindRule; an amendment adding a type lets its kind in,
// checkKindAmendment), (4) a bare pod is refused, (5) a job or pod
// requesting GPUs on an instance type the contract does not guarantee is
// refused. In deny mode a violating object is refused with the clause, the
// allowed values and the change page in the message; in warn mode it is
// created, with the same words as a warning; the API server's counts of
// warnings and denials move with them;
// a compliant one is accepted in both, without a warning. Revocation
// removes the team's parameters and the namespace leaves the binding.
func TestAdmissionRulesIntegration(t *testing.T) {
	cfg := testbedConfig(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	a, err := NewApplier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	run := runID(t)
	denying := itSettings(run)
	denying.AdmissionMode = AdmissionDeny
	warning := itSettings(run)
	denyContract := itContract("red", "it-"+run+"-adm-deny")
	deny := mustPlan(t, 61, denyContract, denying)
	warn := mustPlan(t, 62, itContract("red", "it-"+run+"-adm-warn"), warning)
	deleteAfter(t, a.Client, deny, warn)
	// Rule 3's kinds, which the test bed does not serve by itself.
	installTestCRDs(ctx, t, a.Client)
	for _, p := range []Plan{deny, warn} {
		if _, err := a.Apply(ctx, p); err != nil {
			t.Fatalf("apply %s: %v", p.Namespace, err)
		}
	}
	admin, adminWarn := warnedClient(t, cfg)
	submitter, subWarn := warnedClient(t, userConfig(t, cfg, "submitter-red"))

	// The readiness page sees what the plans apply served.
	reader, err := NewClusterReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c := admissionCheck(ctx, ReadinessSources{Kube: reader, AdmissionMode: AdmissionDeny}); c.Status != CheckOK {
		t.Errorf("readiness on the test bed: %+v", c)
	}

	// The shared policy type-checks against the kinds it matches.
	policy, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, NameAdmissionPolicy, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// (kube-controller-manager's validatingadmissionpolicy-status-controller
	// writes status.typeChecking.)
	typeChecked := time.Now().Add(time.Minute)
	for policy.Status.ObservedGeneration < policy.Generation {
		if time.Now().After(typeChecked) {
			t.Fatalf("the policy's status was never type-checked (is kube-controller-manager's validatingadmissionpolicy-status-controller running?): %+v", policy.Status)
		}
		time.Sleep(200 * time.Millisecond)
		if policy, err = admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, NameAdmissionPolicy, metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if tc := policy.Status.TypeChecking; tc != nil && len(tc.ExpressionWarnings) > 0 {
		t.Errorf("the policy's expressions do not type-check: %+v", tc.ExpressionWarnings)
	}

	for _, p := range []Plan{deny, warn} {
		waitForQuota(ctx, t, admin, p.Namespace)
	}
	waitForAdmission(ctx, t, submitter, subWarn, deny.Namespace, true)
	waitForAdmission(ctx, t, submitter, subWarn, warn.Namespace, false)
	// The API server's counts of the policy's failed validations, before
	// the violations below (each a warning in warn mode, a denial in
	// deny mode).
	before, err := reader.AdmissionCounts(ctx)
	if err != nil {
		t.Fatalf("read the API server's counts: %v", err)
	}
	violations := 0

	for _, p := range []Plan{deny, warn} {
		queue := LocalQueueName(p.Namespace)
		page := "/connections/" + strconv.FormatInt(p.ConnectionID, 10) + "/edit"
		// The Job the member page's snippet submits: the team's queue,
		// an allowed class.
		good, err := submitter.BatchV1().Jobs(p.Namespace).Create(ctx, admissionJob(map[string]string{
			KueueQueueLabel: queue, KueuePriorityClassLabel: "training-priority",
		}), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%s: a compliant job was refused: %v", p.Namespace, err)
		}
		if w := subWarn.take(); len(w) > 0 {
			t.Errorf("%s: a compliant job drew warnings %q", p.Namespace, w)
		}
		// A pod its Job owns (as the Job controller makes them) is not bare.
		owned := barePod(metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: good.Name, UID: good.UID})
		if _, err := admin.CoreV1().Pods(p.Namespace).Create(ctx, owned, metav1.CreateOptions{}); err != nil {
			t.Errorf("%s: a pod owned by a job was refused: %v", p.Namespace, err)
		}
		if w := adminWarn.take(); len(w) > 0 {
			t.Errorf("%s: an owned pod drew warnings %q", p.Namespace, w)
		}
		// Rule 5, compliant: GPUs on the guaranteed instance type, and a
		// pod its controller made (Kueue placed its job) on any type.
		labels := map[string]string{KueueQueueLabel: queue, KueuePriorityClassLabel: "training-priority"}
		if _, err := submitter.BatchV1().Jobs(p.Namespace).Create(ctx, gpuJob(labels, "ml.p5.48xlarge"), metav1.CreateOptions{}); err != nil {
			t.Errorf("%s: a job with GPUs on the guaranteed type was refused: %v", p.Namespace, err)
		}
		if w := subWarn.take(); len(w) > 0 {
			t.Errorf("%s: a job with GPUs on the guaranteed type drew warnings %q", p.Namespace, w)
		}
		controller := true
		placed := gpuPod("ml.g5.8xlarge", metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: good.Name, UID: good.UID, Controller: &controller})
		if _, err := admin.CoreV1().Pods(p.Namespace).Create(ctx, placed, metav1.CreateOptions{}); err != nil {
			t.Errorf("%s: a job's pod with GPUs was refused: %v", p.Namespace, err)
		}
		if w := adminWarn.take(); len(w) > 0 {
			t.Errorf("%s: a job's pod with GPUs drew warnings %q", p.Namespace, w)
		}
		// An update that keeps the labels passes even for a job that
		// breaks the rules (created before them, or by warn mode).
		for _, tc := range []struct {
			rule   string
			client *kubernetes.Clientset
			w      *warnings
			create func() error
			want   []string // in the refusal or the warning
		}{
			{"1: no queue label", submitter, subWarn, func() error {
				_, err := submitter.BatchV1().Jobs(p.Namespace).Create(ctx, admissionJob(nil), metav1.CreateOptions{})
				return err
			}, []string{`clause "Namespaces"`, KueueQueueLabel + ": " + queue, "(it has none)", page}},
			{"1: another queue", submitter, subWarn, func() error {
				_, err := submitter.BatchV1().Jobs(p.Namespace).Create(ctx, admissionJob(map[string]string{KueueQueueLabel: "other-queue"}), metav1.CreateOptions{})
				return err
			}, []string{`clause "Namespaces"`, KueueQueueLabel + ": " + queue, "(it has other-queue)", page}},
			{"2: a class the contract does not allow", submitter, subWarn, func() error {
				_, err := submitter.BatchV1().Jobs(p.Namespace).Create(ctx, admissionJob(map[string]string{
					KueueQueueLabel: queue, KueuePriorityClassLabel: "experiment-priority",
				}), metav1.CreateOptions{})
				return err
			}, []string{`clause "Priority classes" (scheduling.priority_classes)`, "experiment-priority is not one the contract allows",
				"allowed: inference-priority, training-priority", page}},
			{"4: a bare pod", admin, adminWarn, func() error {
				_, err := admin.CoreV1().Pods(p.Namespace).Create(ctx, barePod(), metav1.CreateOptions{})
				return err
			}, []string{`clause "Approved workload types"`, "bare pod", queue, page}},
			{"5: a job with GPUs on a type the contract does not guarantee", submitter, subWarn, func() error {
				_, err := submitter.BatchV1().Jobs(p.Namespace).Create(ctx, gpuJob(labels, "ml.g5.8xlarge"), metav1.CreateOptions{})
				return err
			}, []string{`clause "Guaranteed capacity" (scheduling.guaranteed`, "a Job in namespace " + p.Namespace,
				"requests accelerators on instance type ml.g5.8xlarge (label " + LabelInstanceType + ")", "approved: ml.p5.48xlarge", page}},
			{"5: a pod with GPUs on a type the contract does not guarantee", admin, adminWarn, func() error {
				// Owned (not bare: rule 4 holds), by no controller.
				_, err := admin.CoreV1().Pods(p.Namespace).Create(ctx, gpuPod("ml.g5.8xlarge",
					metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: good.Name, UID: good.UID}), metav1.CreateOptions{})
				return err
			}, []string{`clause "Guaranteed capacity" (scheduling.guaranteed`, "a Pod in namespace " + p.Namespace,
				"requests accelerators on instance type ml.g5.8xlarge", "approved: ml.p5.48xlarge", page}},
		} {
			violations++
			err := tc.create()
			got := tc.w.take()
			if p.Namespace == deny.Namespace {
				if !apierrors.IsForbidden(err) {
					t.Errorf("deny, rule %s: %v, want Forbidden", tc.rule, err)
					continue
				}
				for _, s := range tc.want {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("deny, rule %s: the refusal does not say %q: %v", tc.rule, s, err)
					}
				}
				continue
			}
			if err != nil {
				t.Errorf("warn, rule %s: refused: %v", tc.rule, err)
				continue
			}
			text := strings.Join(got, "\n")
			for _, s := range tc.want {
				if !strings.Contains(text, s) {
					t.Errorf("warn, rule %s: the warnings %q do not say %q", tc.rule, got, s)
				}
			}
		}
	}

	// The counts moved by at least the violations above (other tests may
	// add theirs: the API server's counters are its own).
	after, err := reader.AdmissionCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if dw, dd := after.Warn-before.Warn, after.Deny-before.Deny; dw < int64(violations/2) || dd < int64(violations/2) {
		t.Errorf("the API server counted %d warnings and %d denials since %+v, want at least %d each", dw, dd, before, violations/2)
	}
	if c := admissionCountsCheck(ctx, ReadinessSources{Kube: reader, AdmissionMode: AdmissionDeny}, &Readiness{}); c.Status == CheckUnknown ||
		!strings.Contains(c.Detail, "Mode deny") {
		t.Errorf("the counts check on the test bed: %+v", c)
	}

	// (3) Only the approved workload kinds.
	checkKindRule(ctx, t, cfg, deny, deny, warn)

	// Drift: a hand edit of the team's parameters (a class the contract
	// does not allow) and a deleted binding are found; re-applying the
	// plan restores both, and the rules hold again.
	cm, err := admin.CoreV1().ConfigMaps(deny.Namespace).Get(ctx, NameAdmissionParams, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["priorityClasses"] += ",experiment-priority"
	if _, err := admin.CoreV1().ConfigMaps(deny.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, AdmissionBindingName(AdmissionDeny), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	items, err := a.Drift(ctx, deny)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	for _, it := range items {
		found[it.Kind] = it.What
	}
	if found["ConfigMap"] != "changed" || found["ValidatingAdmissionPolicyBinding"] != "deleted" {
		t.Errorf("drift %+v: want the edited parameters and the deleted binding", items)
	}
	if _, err := a.Apply(ctx, deny); err != nil {
		t.Fatal(err)
	}
	if items, err := a.Drift(ctx, deny); err != nil || len(items) > 0 {
		t.Errorf("after re-apply: drift %+v, %v", items, err)
	}
	waitForAdmission(ctx, t, submitter, subWarn, deny.Namespace, true)

	// An amendment that approves interactive spaces lets a Workspace in.
	checkKindAmendment(ctx, t, cfg, a, denyContract, denying, deny)

	// An amendment that adds a priority class lets a job labelled with it
	// in: refused before (rule 2, deny mode), accepted without a warning
	// once the amended plan is applied (the API server reads the new
	// parameters from its informer: retried until then).
	experiment := map[string]string{KueueQueueLabel: LocalQueueName(deny.Namespace), KueuePriorityClassLabel: denying.KueuePriorityClass("experiment")}
	if _, err := submitter.BatchV1().Jobs(deny.Namespace).Create(ctx, admissionJob(experiment), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("before the amendment, a job labelled %s: %v, want Forbidden", experiment[KueuePriorityClassLabel], err)
	}
	amendedContract := denyContract
	amendedContract.WorkloadTypes = append(slices.Clone(amendedContract.WorkloadTypes), workflow.WorkloadInteractive)
	amendedContract.Scheduling.PriorityClasses = append(slices.Clone(amendedContract.Scheduling.PriorityClasses), "experiment")
	amendedContract = amendedContract.Normalize()
	if _, err := a.Apply(ctx, mustPlan(t, deny.ConnectionID, amendedContract, denying)); err != nil {
		t.Fatalf("apply the amendment adding a priority class: %v", err)
	}
	for {
		subWarn.take()
		_, err := submitter.BatchV1().Jobs(deny.Namespace).Create(ctx, admissionJob(experiment), metav1.CreateOptions{})
		if err == nil {
			if w := subWarn.take(); len(w) > 0 {
				t.Errorf("amended: the job drew warnings %q", w)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("after the amendment adding experiment, a job labelled with it is still refused: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Revocation takes the team's parameters away and the locked namespace
	// out of the binding: a job without a queue label is then neither
	// refused nor warned about by the contract's rules. The shared policy
	// and binding stay for the other teams.
	for _, p := range []Plan{deny, warn} {
		runRevocation(ctx, t, a, RevocationPlan(p, RevokeLock))
		if _, err := admin.CoreV1().ConfigMaps(p.Namespace).Get(ctx, NameAdmissionParams, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: the parameters outlive revocation: %v", p.Namespace, err)
		}
		// The API server matches bindings against its informer's copy of
		// the namespace, which can lag the revoked label by a moment: the
		// job is retried until then (the deadline fails the test).
		for {
			adminWarn.take()
			_, err := admin.BatchV1().Jobs(p.Namespace).Create(ctx, admissionJob(nil), metav1.CreateOptions{})
			var held []string
			for _, w := range adminWarn.take() {
				if strings.Contains(w, "contract of connection") {
					held = append(held, w)
				}
			}
			if err == nil && len(held) == 0 {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("%s: revoked, a job is still held to the contract: %v, warnings %q", p.Namespace, err, held)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	for _, name := range []string{AdmissionBindingName(AdmissionDeny), AdmissionBindingName(AdmissionWarn)} {
		if _, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("the shared binding %s: %v, want it kept for the other teams", name, err)
		}
	}
}

// TestAdmissionRulesKueueConfigIntegration: the readiness check reads
// Kueue's configuration where Kueue's own install keeps it, on the test
// bed's API server, and says what it means for rule 1: managed, unmanaged
// (a warning outside deny mode), and not there (Kueue's default).
func TestAdmissionRulesKueueConfigIntegration(t *testing.T) {
	cfg := testbedConfig(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	reader, err := NewClusterReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: KueueConfigNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	cms := admin.CoreV1().ConfigMaps(KueueConfigNamespace)
	if _, err := cms.Get(ctx, KueueConfigMapName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Skipf("the test bed has a Kueue configuration ConfigMap already (%v): this test would change it", err)
	}
	t.Cleanup(func() { _ = cms.Delete(context.Background(), KueueConfigMapName, metav1.DeleteOptions{}) })
	check := func(mode AdmissionMode) Check {
		return kueueConfigCheck(ctx, ReadinessSources{Kube: reader, AdmissionMode: mode})
	}
	if c := check(AdmissionWarn); c.Status != CheckWarning || !strings.Contains(c.Detail, "default is assumed") {
		t.Errorf("no ConfigMap: %+v", c)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: KueueConfigMapName, Namespace: KueueConfigNamespace},
		Data:       map[string]string{KueueConfigKey: "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nmanageJobsWithoutQueueName: true\n"},
	}
	if cm, err = cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if c := check(AdmissionWarn); c.Status != CheckOK || !strings.Contains(c.Detail, "manageJobsWithoutQueueName true") {
		t.Errorf("managed: %+v", c)
	}
	cm.Data[KueueConfigKey] = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nmanageJobsWithoutQueueName: false\n"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if c := check(AdmissionWarn); c.Status != CheckWarning || !strings.Contains(c.Detail, "leaves manageJobsWithoutQueueName false") {
		t.Errorf("unmanaged, warn: %+v", c)
	}
	if c := check(AdmissionDeny); c.Status != CheckOK {
		t.Errorf("unmanaged, deny: %+v", c)
	}
}
