package web

import (
	"context"
	"errors"
	"html"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// fakeWorkloads stands in for the cluster's Kueue Workloads in handler
// tests (the real read has its integration test in internal/provision).
type fakeWorkloads struct {
	pending []provision.PendingWorkload
	err     error
	asked   *[][]string
}

func (f fakeWorkloads) PendingWorkloads(_ context.Context, ns []string) ([]provision.PendingWorkload, error) {
	if f.asked != nil {
		*f.asked = append(*f.asked, ns)
	}
	return f.pending, f.err
}

// activeRed files team red's example contract and marks it provisioned.
func activeRed(t *testing.T, h *harness) {
	t.Helper()
	h.postAs(h.signIn("owner.red"), "/teams/red/connections", formValues(formFromContract(workflow.ExampleContract())))
	if err := h.db.ExecForTest(context.Background(), `UPDATE connections SET state = 'active', approved_version = 1 WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
}

// The member's page: the team's namespace, queue, allowed priority classes
// (as the Kueue classes the label needs) and both snippets, escaped in a
// <pre>; the waiting workloads from the team's namespace with Kueue's
// reason; members, owners, admins and reviewers see it, other teams and
// finance get 404.
func TestSubmitPage(t *testing.T) {
	var asked [][]string
	fw := fakeWorkloads{asked: &asked, pending: []provision.PendingWorkload{{
		Namespace: "hyperpod-ns-red", Name: "train-x", Queue: "hyperpod-ns-red-localqueue", PriorityClass: "training-priority",
		Created: time.Now().Add(-2 * time.Hour), Condition: "QuotaReserved", Reason: "Pending",
		Message:         "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu <b>8 more</b>",
		QueueWaiting:    3,
		PositionUnknown: "position unknown: Kueue's visibility API did not answer (ServiceUnavailable)",
	}}}
	h := newHarness(t, false, func(o *Options) { o.Workloads = fw })
	activeRed(t, h)
	member := h.signIn("member.red")
	resp, body := h.get(member.c, "/teams/red/submit")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("member GET /teams/red/submit = %d", resp.StatusCode)
	}
	for _, want := range []string{
		`data-testid="access-namespace">hyperpod-ns-red<`,
		`data-testid="access-queue">hyperpod-ns-red-localqueue<`,
		"kueue.x-k8s.io/priority-class: inference-priority", "kueue.x-k8s.io/priority-class: training-priority",
		"kueue.x-k8s.io/queue-name: hyperpod-ns-red-localqueue",
		"hyp create hyp-pytorch-job", "--queue-name hyperpod-ns-red-localqueue", "--priority training-priority",
		"--namespace hyperpod-ns-red",
		// The placeholder is text inside <pre>, escaped.
		"&lt;your training image&gt;",
		`data-testid="pending-train-x"`, "<strong>Pending</strong>",
		html.EscapeString("insufficient unused quota for nvidia.com/gpu <b>8 more</b>"),
		`href="/teams/red/signals"`,
		// Why the place in the queue is missing, beside Kueue's count.
		`data-testid="pending-queue-waiting">3 waiting in this queue (position unknown)<`,
		`data-testid="pending-position-unknown">position unknown: Kueue&#39;s visibility API did not answer (ServiceUnavailable)<`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the member's page lacks %q", want)
		}
	}
	if strings.Contains(body, "<b>8 more</b>") {
		t.Error("Kueue's message is not escaped")
	}
	if len(asked) != 1 || !slices.Equal(asked[0], []string{"hyperpod-ns-red"}) {
		t.Errorf("workloads read from %v, want the team's namespace only", asked)
	}
	for _, who := range []string{"owner.red", "admin", "reviewer"} {
		if resp, _ := h.get(h.signIn(who).c, "/teams/red/submit"); resp.StatusCode != http.StatusOK {
			t.Errorf("%s GET /teams/red/submit = %d, want 200", who, resp.StatusCode)
		}
	}
	for _, who := range []string{"owner.blue", "finance"} {
		resp, body := h.get(noRedirect(h.signIn(who).c), "/teams/red/submit")
		if resp.StatusCode != http.StatusNotFound || strings.Contains(body, "hyperpod-ns-red") {
			t.Errorf("%s GET /teams/red/submit = %d, want 404 without red's names", who, resp.StatusCode)
		}
	}
	// Team blue has no live connection: nothing is read, nothing invented.
	asked = nil
	_, body = h.get(h.signIn("owner.blue").c, "/teams/blue/submit")
	if !strings.Contains(body, `data-testid="submit-empty"`) || !strings.Contains(body, `data-testid="pending-no-namespace"`) || len(asked) != 0 {
		t.Errorf("blue's page without a connection: read %v", asked)
	}
	// The team home links to it.
	if _, body := h.get(member.c, "/teams/red"); !strings.Contains(body, `href="/teams/red/submit"`) {
		t.Error("the team home does not link to the member's page")
	}
}

// Without a cluster the page says that waiting workloads need one and
// lists none; a cluster that fails is said so, without its error text.
func TestSubmitPageWithoutOrFailingCluster(t *testing.T) {
	h := newHarness(t, false)
	activeRed(t, h)
	_, body := h.get(h.signIn("member.red").c, "/teams/red/submit")
	if !strings.Contains(body, `data-testid="pending-no-cluster"`) || strings.Contains(body, `data-testid="pending-list"`) {
		t.Error("without a cluster the page should say waiting workloads need a cluster connection")
	}
	h = newHarness(t, false, func(o *Options) {
		o.Workloads = fakeWorkloads{err: errors.New("dial tcp 10.0.0.1:443: secret-internal-detail")}
	})
	activeRed(t, h)
	resp, body := h.get(h.signIn("member.red").c, "/teams/red/submit")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `data-testid="pending-failed"`) || strings.Contains(body, "secret-internal-detail") {
		t.Errorf("failing cluster = %d", resp.StatusCode)
	}
}

// The member's page lists what the contract lets the team run: each
// approved workload type with its kinds and a kubectl and (where the
// HyperPod CLI creates the kind) a `hyp create` snippet in the team's
// namespace; a type the contract does not approve is not offered, and a
// contract without training has no Job snippet.
func TestSubmitPageListsApprovedKinds(t *testing.T) {
	h := newHarness(t, false)
	activeRed(t, h) // training, fine-tuning, inference
	_, body := h.get(h.signIn("member.red").c, "/teams/red/submit")
	for _, want := range []string{
		`data-testid="run-kinds"`, `data-testid="run-type-training"`, `data-testid="run-type-fine-tuning"`, `data-testid="run-type-inference"`,
		`data-testid="run-kind-Job"`, `data-testid="run-kind-PyTorchJob"`, `data-testid="run-kind-HyperPodPyTorchJob"`,
		`data-testid="run-kind-JumpStartModel"`, `data-testid="run-kind-InferenceEndpointConfig"`,
		"apiVersion: kubeflow.org/v1", "apiVersion: sagemaker.amazonaws.com/v1", "apiVersion: inference.sagemaker.aws.amazon.com/v1",
		"kind: JumpStartModel", "kind: InferenceEndpointConfig",
		"hyp create hyp-pytorch-job", "hyp create hyp-jumpstart-endpoint", "hyp create hyp-custom-endpoint",
		"kubectl -n hyperpod-ns-red create -f -", "--namespace hyperpod-ns-red",
		"The HyperPod CLI has no command that creates a Job",
		"Submit a job to your queue",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the member's page (training, fine-tuning, inference) lacks %q", want)
		}
	}
	for _, not := range []string{`data-testid="run-type-interactive-spaces"`, "hyp create hyp-space", "kind: Workspace"} {
		if strings.Contains(body, not) {
			t.Errorf("the member's page offers %q, which the contract does not approve", not)
		}
	}

	// A contract of interactive spaces only: the spaces' snippets, no job.
	h = newHarness(t, false)
	c := workflow.ExampleContract()
	c.WorkloadTypes = []workflow.WorkloadType{workflow.WorkloadInteractive}
	h.postAs(h.signIn("owner.red"), "/teams/red/connections", formValues(formFromContract(c)))
	if err := h.db.ExecForTest(context.Background(), `UPDATE connections SET state = 'active', approved_version = 1 WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	_, body = h.get(h.signIn("member.red").c, "/teams/red/submit")
	for _, want := range []string{
		`data-testid="run-type-interactive-spaces"`, `data-testid="run-kind-Workspace"`, `data-testid="run-kind-WorkspaceConnection"`,
		"apiVersion: workspace.jupyter.org/v1alpha1", "kind: Workspace",
		"hyp create hyp-space \\\n  --name my-space", "--namespace hyperpod-ns-red",
		"hyp create hyp-space-access --name my-space --namespace hyperpod-ns-red",
		"/apis/connection.workspace.jupyter.org/v1alpha1/namespaces/hyperpod-ns-red/workspaceconnections",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the member's page (interactive spaces) lacks %q", want)
		}
	}
	for _, not := range []string{`data-testid="run-type-training"`, "hyp create hyp-pytorch-job", "Submit a job to your queue", "kind: Job\n"} {
		if strings.Contains(body, not) {
			t.Errorf("the member's page (interactive spaces only) offers %q", not)
		}
	}
}
