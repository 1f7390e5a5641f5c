package web

// Issue 34 item 3 on the scheduling cluster (a real kube-scheduler, Kueue
// v0.17.0 with its visibility API, kwok): the member page's waiting
// workloads carry the reason Kueue wrote and the place Kueue gives them in
// the LocalQueue, read through the real provision.ClusterReader.

import (
	"html"
	"net/http"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/support/hpcluster"
)

// Red's queue holds 8 GPUs on the only p5 node and borrows from no one (a
// cohort of its own). One 8-GPU job runs at the highest priority (so that
// nothing preempts it); two more cannot fit: the later one with a higher
// priority class than the earlier, so Kueue puts it first, which the page
// must show (an order the portal made up, by submission, would fail).
func TestSchedMemberPageWhyPending(t *testing.T) {
	hc := hpcluster.Connect(t)
	hc.AddNode(t, "p5-0", hpcluster.P5)
	hc.AddFlavor(t, hpcluster.P5)
	experiment := hc.AddPriorityClass(t, "experiment", 100)
	training := hc.AddPriorityClass(t, "training", 500)
	inference := hc.AddPriorityClass(t, "inference", 1000)
	team := hc.AddHyperPodTeam(t, "red", "red-alone", hpcluster.Guarantee{Flavor: hpcluster.P5, Resource: hpcluster.ResourceGPU, Count: 8})
	submit := func(name, class string) string {
		job := hc.SubmitJob(t, team, hpcluster.JobSpec{Name: name, Pods: 1, Resource: hpcluster.ResourceGPU, Count: 8, PriorityClass: class, RunFor: time.Hour})
		var wl *kueue.Workload
		hpcluster.WaitFor(t, "a Workload for "+name, func() (bool, error) {
			var err error
			wl, err = hc.WorkloadOf(t.Context(), job)
			return err == nil, err
		})
		return wl.Name
	}
	running := submit("red-run", inference)
	hpcluster.WaitFor(t, running+" admitted", func() (bool, error) {
		wl, err := hc.Kueue.KueueV1beta2().Workloads(team.Namespace).Get(t.Context(), running, metav1.GetOptions{})
		return err == nil && apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted), err
	})
	first := submit("red-first", experiment)
	urgent := submit("red-urgent", training)
	// Kueue's own account: both wait, each with the reason it wrote.
	hpcluster.WaitFor(t, "Kueue counting 2 pending in "+team.LocalQueue, func() (bool, error) {
		lq, err := hc.Kueue.KueueV1beta2().LocalQueues(team.Namespace).Get(t.Context(), team.LocalQueue, metav1.GetOptions{})
		return err == nil && lq.Status.PendingWorkloads == 2, err
	})
	reasons := map[string]*metav1.Condition{}
	for _, name := range []string{first, urgent} {
		hpcluster.WaitFor(t, name+" pending with Kueue's reason", func() (bool, error) {
			wl, err := hc.Kueue.KueueV1beta2().Workloads(team.Namespace).Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
			reasons[name] = c
			return c != nil && c.Status == metav1.ConditionFalse && c.Message != "", nil
		})
	}

	reader, err := provision.NewClusterReader(hc.Config)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, false, func(o *Options) { o.Workloads = reader })
	activeRed(t, h)
	resp, body := h.get(h.signIn("member.red").c, "/teams/red/submit")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("member GET /teams/red/submit = %d", resp.StatusCode)
	}
	if strings.Contains(body, `data-testid="pending-`+running+`"`) {
		t.Errorf("the admitted %s is listed as waiting", running)
	}
	for name, place := range map[string]string{urgent: "1 of 2 waiting in this queue", first: "2 of 2 waiting in this queue"} {
		_, row, ok := strings.Cut(body, `data-testid="pending-`+name+`"`)
		row, _, _ = strings.Cut(row, "</tr>")
		c := reasons[name]
		for _, want := range []string{"<strong>" + html.EscapeString(c.Reason) + "</strong>", html.EscapeString(c.Message), place} {
			if !ok || !strings.Contains(row, want) {
				t.Errorf("the row of %s lacks %q (Kueue: %s: %s); row: %s", name, want, c.Reason, c.Message, row)
			}
		}
	}
	t.Logf("Kueue's reason for %s: %s: %s", first, reasons[first].Reason, reasons[first].Message)
}
