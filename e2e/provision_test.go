package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hyperpod-governance/portal/internal/review"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/support/awstest"
	"github.com/hyperpod-governance/portal/internal/support/testenv"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TestApprovalProvisionsOnTheCluster runs the portal against the test bed's
// real kube-apiserver and the local AWS endpoints (awstest, in this test's
// process; the portal's real SDK clients reach them through the
// --aws-endpoint-* flags, signed with test credentials from the
// environment): the admin sees the AWS calls in the plan, approves in the
// browser and watches the Kubernetes and AWS steps reach active; the owner
// then sees the namespace, the queue, ready-to-paste commands and the AWS
// resources.
func TestApprovalProvisionsOnTheCluster(t *testing.T) {
	t.Parallel()
	kubeconfig := testenv.Require(t, "PORTAL_TEST_KUBECONFIG")
	stack := awstest.NewStack(t, "shared-hp-eks", "team-red-owners", "team-red-members")
	// The example contract's roles exist in IAM, allowed no cluster
	// lifecycle action (an approval waits for a role IAM does not have).
	example := workflow.ExampleContractFor("red")
	stack.IAM.AddRole(example.ProjectRoleARN)
	stack.IAM.AddRole(example.AccessRoleARN)
	actAsHyperPod(t, kubeconfig, stack.SageMaker)
	settings := stack.SettingsFile(t, t.TempDir())
	b := browser(t)
	p := startPortalEnv(t, awstest.Env(), append([]string{"--kubeconfig", kubeconfig, "--aws-settings", settings, "--aws-region", "us-east-1",
		"--aws-poll-interval", "200ms"}, stack.Flags()...)...)

	owner := signIn(t, b, p, "Olivia Owner (Red)")
	_, err := owner.Goto(p.URL + "/teams/red/connections/new?example=1")
	mustOK(t, err, "open the form with the example")
	clickTo(t, owner, owner.GetByTestId("save-submit"), "**/connections/1", "save and submit")

	admin := signIn(t, b, p, "Ada Admin")
	_, err = admin.Goto(p.URL + "/connections/1")
	mustOK(t, err, "admin opens the request")
	// Compared with the live cluster: everything of the team is new.
	// HyperPod task governance makes the namespace from the compute quota.
	if got := text(t, admin, "plan-summary"); !strings.Contains(got, "made by HyperPod · Namespace hyperpod-ns-red") ||
		!strings.Contains(got, "create · RoleBinding hyperpod-ns-red/team-viewers") {
		t.Errorf("plan = %q", got)
	}
	if n := count(t, admin.GetByText("dry-run mode"), "dry-run notes"); n != 0 {
		t.Error("with a cluster configured the plan must not say dry run")
	}
	if got := text(t, admin, "plan-aws-before"); !strings.Contains(got, "red-quota") || !strings.Contains(got, "ml.p5.48xlarge×2") ||
		!strings.Contains(got, "create") {
		t.Errorf("AWS calls before the objects = %q", got)
	}
	if got := text(t, admin, "plan-aws-after"); !strings.Contains(got, "red-studio") || !strings.Contains(got, "arn:aws:iam::111122223333:role/red-project") ||
		!strings.Contains(got, "hyperpod-ns-red/red-workloads") {
		t.Errorf("AWS calls after the objects = %q", got)
	}
	screenshot(t, admin, "19-plan-with-aws-calls")
	mustOK(t, admin.Locator("#reason").Fill("Fits; provision it."), "give a reason")
	clickTo(t, admin, admin.GetByTestId("approve"), "**/connections/1", "approve")
	mustOK(t, admin.GetByTestId("progress").WaitFor(), "see the provisioning panel")
	// The panel refreshes itself; when the job finishes the page reloads.
	mustOK(t, admin.Locator(`[data-testid="connection-state"]:text("Active")`).WaitFor(
		playwright.LocatorWaitForOptions{Timeout: playwright.Float(60000)}), "watch the connection become active")
	if got := text(t, admin, "job-state"); got != "succeeded" {
		t.Errorf("job state = %q", got)
	}
	if n := count(t, admin.Locator(`[data-testid="job-steps"] tr.step-done`), "finished steps"); n < 10 {
		t.Errorf("only %d steps done", n)
	}
	if n := count(t, admin.GetByTestId("dry-run"), "dry-run labels"); n != 0 {
		t.Error("a real provisioning run is labelled dry run")
	}
	steps, err := admin.Locator(`[data-testid="job-steps"] tr.step-done`).AllTextContents()
	mustOK(t, err, "read the steps")
	all := strings.Join(steps, "\n")
	for _, want := range []string{"SageMaker compute quota red-quota", "SageMaker studio domain red-studio", "IAM Identity Center studio assignment team-red-owners",
		"EKS access entry arn:aws:iam::111122223333:role/red-access", "EKS pod identity hyperpod-ns-red/red-workloads"} {
		if !strings.Contains(all, want) {
			t.Errorf("no finished step %q among:\n%s", want, all)
		}
	}
	if got := stack.Creates(); got["compute-quota"] != 1 || got["domain"] != 1 || got["assignment"] != 2 || got["access-entry"] != 2 || got["pod-identity"] != 1 {
		t.Errorf("the AWS endpoints saw these creates: %v", got)
	}
	screenshot(t, admin, "20-provisioned-active")

	_, err = owner.Reload()
	mustOK(t, err, "owner reloads")
	if got := text(t, owner, "access-namespace"); got != "hyperpod-ns-red" {
		t.Errorf("owner sees namespace %q", got)
	}
	if got := text(t, owner, "access-queue"); got != "hyperpod-ns-red-localqueue" {
		t.Errorf("owner sees queue %q", got)
	}
	if n := count(t, owner.GetByTestId("access-not-live"), "not-live notes"); n != 0 {
		t.Error("an active connection is shown as not live")
	}
	snippets, err := owner.GetByTestId("snippet").AllTextContents()
	mustOK(t, err, "read the snippets")
	if len(snippets) < 3 || !strings.Contains(strings.Join(snippets, "\n"), "kubectl -n hyperpod-ns-red") {
		t.Errorf("snippets = %q", snippets)
	}
	if got := text(t, owner, "aws-resources"); !strings.Contains(got, "arn:aws:sagemaker:us-east-1:111122223333:compute-quota/") ||
		!strings.Contains(got, "pod-identity") {
		t.Errorf("the owner's AWS resources = %q", got)
	}
	screenshot(t, owner, "21-owner-active")

	// The member's page: the submit snippets (training jobs labelled with
	// the contract's training class, never the first allowed class,
	// inference-priority: issue 31), and a workload Kueue could
	// not fit, read live from the cluster with Kueue's reason. No Kueue
	// runs in the test bed: the test writes the condition its scheduler
	// writes (QuotaReserved False, reason Pending) through the status
	// subresource.
	const noFit = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor ml.p5.48xlarge, 8 more needed"
	pendingWorkload(t, kubeconfig, "hyperpod-ns-red", "e2e-train-waiting", noFit)
	member := signIn(t, b, p, "Mateo Member (Red)")
	_, err = member.Goto(p.URL + "/teams/red/submit")
	mustOK(t, err, "member opens the member's page")
	snips, err := member.GetByTestId("snippet").AllTextContents()
	mustOK(t, err, "read the member's snippets")
	if all := strings.Join(snips, "\n"); !strings.Contains(all, "kueue.x-k8s.io/queue-name: hyperpod-ns-red-localqueue") ||
		!strings.Contains(all, "hyp create hyp-pytorch-job") || !strings.Contains(all, "--priority training-priority") ||
		strings.Contains(all, "inference-priority") {
		t.Errorf("member's snippets = %q", snips)
	}
	if got := text(t, member, "pending-e2e-train-waiting"); !strings.Contains(got, "Pending") || !strings.Contains(got, noFit) {
		t.Errorf("the waiting workload's row = %q", got)
	}
	screenshot(t, member, "21b-member-submit-and-pending")

	// A change on the active connection: the owner raises the guarantee
	// from 2 to 3 instances; the connection keeps running on version 1.
	clickTo(t, owner, owner.GetByTestId("edit"), "**/connections/1/edit", "request a change")
	mustOK(t, owner.Locator(`[name="guaranteed"]`).Fill("ml.p5.48xlarge 3"), "raise the guarantee")
	clickTo(t, owner, owner.GetByTestId("save-submit"), "**/connections/1", "save and submit the change")
	if got := text(t, owner, "amendment"); !strings.Contains(got, "change v2 in review") {
		t.Errorf("owner sees the change as %q", got)
	}
	if got := text(t, owner, "connection-state"); got != "Active" {
		t.Errorf("while the change waits the connection is %q, want Active", got)
	}
	screenshot(t, owner, "22-change-in-review")

	// The admin sees both diffs: the contract's against the active
	// version, and what the provisioner will do on the cluster and AWS.
	_, err = admin.Goto(p.URL + "/connections/1")
	mustOK(t, err, "admin opens the change")
	body, err := admin.Content()
	mustOK(t, err, "read the page")
	if !strings.Contains(body, "What this change does to the active version 1") {
		t.Error("the admin does not see the contract diff against the active version")
	}
	rows, err := admin.GetByTestId("plan-diff-row").AllTextContents()
	mustOK(t, err, "read the plan diff")
	all = strings.Join(rows, "\n")
	if !strings.Contains(all, "ResourceQuota hyperpod-ns-red/") || !strings.Contains(all, "red-quota") || strings.Contains(all, "delete") {
		t.Errorf("plan diff rows:\n%s", all)
	}
	screenshot(t, admin, "23-change-both-diffs")
	updates := stack.SageMaker.Count("UpdateComputeQuota")
	mustOK(t, admin.Locator("#reason").Fill("Room for one more."), "give a reason")
	clickTo(t, admin, admin.GetByTestId("approve"), "**/connections/1", "approve the change")
	mustOK(t, admin.Locator(`[data-testid="active-version"]:text("approved version 2")`).WaitFor(
		playwright.LocatorWaitForOptions{Timeout: playwright.Float(60000)}), "watch version 2 become active")
	if n := count(t, admin.GetByTestId("amendment"), "open changes"); n != 0 {
		t.Error("the change is still shown as open after it was applied")
	}
	if got := stack.SageMaker.Count("UpdateComputeQuota") - updates; got != 1 {
		t.Errorf("the change updated the compute quota %d times, want once", got)
	}
	screenshot(t, admin, "24-change-applied")

	// A review that ends in a hold (issue 13): a review opens (as the
	// scheduler opens one when a signal fires), the reviewer decides
	// "hold" in the browser, the admin confirms the proposed hold; the
	// hold job sets stopPolicy Hold on HyperPod's LocalQueue on the
	// cluster. Then the admin revokes and the team's access is gone.
	rid := openReview(t, p.DB, 1, "e2e: the team's guarantee sat idle")
	rev := signIn(t, b, p, "Rita Reviewer")
	_, err = rev.Goto(fmt.Sprintf("%s/reviews/%d", p.URL, rid))
	mustOK(t, err, "the reviewer opens the review")
	mustOK(t, rev.GetByTestId("decision-hold").Check(), "choose hold")
	mustOK(t, rev.GetByTestId("reason").Fill("The project is paused; hold its queue."), "give the decision's reason")
	clickTo(t, rev, rev.GetByTestId("review-submit"), fmt.Sprintf("%s/reviews/%d", p.URL, rid), "decide hold")
	if got := text(t, rev, "review-decision"); !strings.Contains(got, "Hold") {
		t.Errorf("decision = %q, want hold", got)
	}
	screenshot(t, rev, "25-review-hold")
	_, err = admin.Goto(p.URL + "/connections/1")
	mustOK(t, err, "admin opens the held connection")
	if got := text(t, admin, "hold-state"); !strings.Contains(got, "hold proposed") {
		t.Errorf("hold panel = %q", got)
	}
	screenshot(t, admin, "25-hold-proposed")
	mustOK(t, admin.Locator("#hold_reason").Fill("Paused until the next quarter."), "give the hold's reason")
	clickTo(t, admin, admin.GetByTestId("hold-confirm"), "**/connections/1", "confirm the hold")
	mustOK(t, admin.Locator(`#progress:has(h2:text("Setting the hold")) [data-testid="job-state"]:text("succeeded")`).WaitFor(
		playwright.LocatorWaitForOptions{Timeout: playwright.Float(60000)}), "watch the hold job succeed")
	settled(t, admin, "the page settles after the hold job")
	if got := text(t, admin, "hold-state"); !strings.Contains(got, "on hold") {
		t.Errorf("hold panel after the confirmation = %q", got)
	}
	if got := stopPolicy(t, kubeconfig, "hyperpod-ns-red", "hyperpod-ns-red-localqueue"); got != "Hold" {
		t.Errorf("the LocalQueue's stopPolicy after the hold = %q, want Hold", got)
	}
	screenshot(t, admin, "26-held")
	mustOK(t, admin.Locator("#revoke_reason").Fill("The project ended."), "give the revocation's reason")
	clickTo(t, admin, admin.GetByTestId("revoke-submit"), "**/connections/1", "revoke")
	mustOK(t, admin.Locator(`[data-testid="connection-state"]:text("Revoked")`).WaitFor(
		playwright.LocatorWaitForOptions{Timeout: playwright.Float(60000)}), "watch the connection become revoked")
	if n := roleBindings(t, kubeconfig, "hyperpod-ns-red"); n != 0 {
		t.Errorf("%d role bindings left in the team's namespace after the revocation", n)
	}
	screenshot(t, admin, "27-revoked-after-hold")
}

// openReview opens a review of connection id in the portal's database with
// the evidence the scheduler collects, as the scheduler does when a team's
// signal fires; it returns the review's id.
func openReview(t *testing.T, dbPath string, id int64, detail string) int64 {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, dbPath)
	mustOK(t, err, "open the portal's database")
	defer db.Close()
	conn, err := db.Connection(ctx, id)
	mustOK(t, err, "read the connection")
	now := time.Now()
	ev, err := review.Collect(ctx, &review.Scheduler{DB: db}, conn, "", now)
	mustOK(t, err, "collect the review's evidence")
	raw, err := json.Marshal(ev)
	mustOK(t, err, "encode the evidence")
	r, err := db.OpenReview(ctx, id, workflow.OpenReviewInput{Trigger: workflow.TriggerSignal, Detail: detail, Evidence: raw}, now)
	mustOK(t, err, "open the review")
	return r.ID
}

// stopPolicy reads a LocalQueue's spec.stopPolicy on the cluster.
func stopPolicy(t *testing.T, kubeconfig, ns, name string) string {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	mustOK(t, err, "load the kubeconfig")
	dyn, err := dynamic.NewForConfig(cfg)
	mustOK(t, err, "dynamic client")
	lq, err := dyn.Resource(schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "localqueues"}).
		Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	mustOK(t, err, "read the LocalQueue")
	p, _, _ := unstructured.NestedString(lq.Object, "spec", "stopPolicy")
	return p
}

// roleBindings counts the RoleBindings in ns.
func roleBindings(t *testing.T, kubeconfig, ns string) int {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	mustOK(t, err, "load the kubeconfig")
	dyn, err := dynamic.NewForConfig(cfg)
	mustOK(t, err, "dynamic client")
	l, err := dyn.Resource(schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}).
		Namespace(ns).List(context.Background(), metav1.ListOptions{})
	mustOK(t, err, "list the role bindings")
	return len(l.Items)
}

// actAsHyperPod stands in for HyperPod task governance: when a compute
// quota is created on the SageMaker endpoint, it creates the team's
// namespace hyperpod-ns-<team> and LocalQueue hyperpod-ns-<team>-localqueue
// on the test bed, as their owner (its own field manager).
func actAsHyperPod(t *testing.T, kubeconfig string, sm *awstest.SageMaker) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	mustOK(t, err, "load the kubeconfig")
	dyn, err := dynamic.NewForConfig(cfg)
	mustOK(t, err, "dynamic client")
	apply := func(gvr schema.GroupVersionResource, obj map[string]any) {
		u := &unstructured.Unstructured{Object: obj}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ri := dyn.Resource(gvr)
		var err error
		if ns := u.GetNamespace(); ns != "" {
			_, err = ri.Namespace(ns).Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "hyperpod-task-governance", Force: true})
		} else {
			_, err = ri.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "hyperpod-task-governance", Force: true})
		}
		if err != nil {
			t.Errorf("HyperPod stand-in: apply %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	sm.Set(func(f *awstest.SageMaker) {
		f.OnQuotaCreated = func(team, _ string) {
			ns := "hyperpod-ns-" + team
			apply(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, map[string]any{
				"apiVersion": "v1", "kind": "Namespace",
				"metadata": map[string]any{"name": ns, "labels": map[string]any{
					"sagemaker.amazonaws.com/sagemaker-managed-queue": "true", "sagemaker.amazonaws.com/quota-allocation-id": team}},
			})
			apply(schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "localqueues"}, map[string]any{
				"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
				"metadata": map[string]any{"name": ns + "-localqueue", "namespace": ns},
				"spec":     map[string]any{"clusterQueue": ns + "-clusterqueue"},
			})
		}
	})
}

// pendingWorkload creates a Kueue Workload in ns and writes on it the
// condition Kueue's scheduler writes when it cannot fit it.
func pendingWorkload(t *testing.T, kubeconfig, ns, name, msg string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	mustOK(t, err, "load the kubeconfig")
	dyn, err := dynamic.NewForConfig(cfg)
	mustOK(t, err, "dynamic client")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wls := dyn.Resource(schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}).Namespace(ns)
	created, err := wls.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"queueName": ns + "-localqueue",
			"podSets": []any{map[string]any{"name": "main", "count": int64(1), "template": map[string]any{"spec": map[string]any{
				"restartPolicy": "Never", "containers": []any{map[string]any{"name": "main", "image": "example.test/train:1"}},
			}}}},
		},
	}}, metav1.CreateOptions{})
	mustOK(t, err, "create the workload")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = wls.Delete(ctx, name, metav1.DeleteOptions{})
	})
	mustOK(t, unstructured.SetNestedSlice(created.Object, []any{map[string]any{
		"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": msg,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	}}, "status", "conditions"), "set the condition")
	_, err = wls.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	mustOK(t, err, "write the workload's status")
}
