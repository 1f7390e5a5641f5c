package e2e

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/playwright-community/playwright-go"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/support/hpcluster"
	"github.com/hyperpod-governance/portal/internal/support/testenv"
)

// TestOwnerSeesUsageAndAPreemptionOnTheCluster runs the portal binary
// against the test bed's scheduling cluster (a real kube-scheduler, Kueue
// and kwok; internal/support/hpcluster): red and blue, each guaranteed one
// ml.p5.48xlarge (8 GPUs) in one cohort, share two. Red runs 16 GPUs,
// borrowing blue's idle 8; blue submits its 8 and Kueue preempts one of
// red's. Red's owner, on the team's usage page, watches the hour in
// progress fill: the GPU-hours red holds, borrowed ones among them, and the
// preemption Kueue recorded; blue's owner sees blue's hours and no
// preemption. Nothing in the test writes a Workload's status or a usage
// row: the counts it expects are read from what Kueue recorded.
func TestOwnerSeesUsageAndAPreemptionOnTheCluster(t *testing.T) {
	t.Parallel()
	hc := hpcluster.Connect(t)
	kubeconfig := testenv.Require(t, "PORTAL_TEST_SCHED_KUBECONFIG")
	for i := range 2 {
		hc.AddNode(t, fmt.Sprintf("p5-%d", i), hpcluster.P5)
	}
	hc.AddFlavor(t, hpcluster.P5)
	training := hc.AddPriorityClass(t, "training", 500)
	gpus8 := hpcluster.Guarantee{Flavor: hpcluster.P5, Resource: hpcluster.ResourceGPU, Count: 8}
	red := hc.AddHyperPodTeam(t, "red", "hyperpod", gpus8)
	blue := hc.AddHyperPodTeam(t, "blue", "hyperpod", gpus8)
	// The collector counts the namespaces the portal's plan labels with
	// the team (provision.LabelTeam), as it would have on approval.
	for _, team := range []hpcluster.Team{red, blue} {
		labelTeam(t, hc, team)
	}

	b := browser(t)
	p := startPortal(t, "--kubeconfig", kubeconfig, "--usage-interval", "1s", "--leader-election", "database")
	// Each team's approved guarantee of one ml.p5.48xlarge, as the store
	// records it when a connection's quota is applied (the collector splits
	// guaranteed from borrowed hours by it).
	recordGuarantees(t, p.DB, red.Name, blue.Name)

	submit := func(team hpcluster.Team, name string) *batchv1.Job {
		return hc.SubmitJob(t, team, hpcluster.JobSpec{Name: name, Pods: 1, Resource: hpcluster.ResourceGPU, Count: 8,
			PriorityClass: training, RunFor: time.Hour})
	}
	redJobs := []*batchv1.Job{submit(red, "red-a"), submit(red, "red-b")}
	for _, j := range redJobs {
		waitWorkload(t, hc, j, "admitted", kueue.WorkloadAdmitted)
	}
	redPage := signIn(t, b, p, "Olivia Owner (Red)")
	_, err := redPage.Goto(p.URL + "/teams/red/usage")
	mustOK(t, err, "owner.red opens red's usage")
	// Red borrows blue's idle 8: the hour in progress shows borrowed hours.
	waitForFigure(t, redPage, "live-borrowed-hours", "red's borrowed GPU-hours", func(s string) bool { return hoursAbove(s, 0) })
	screenshot(t, redPage, "sched-01-red-borrowing")

	blueJob := submit(blue, "blue-a")
	waitWorkload(t, hc, blueJob, "admitted", kueue.WorkloadAdmitted)
	preempted := 0
	for _, j := range redJobs {
		wl, err := hc.WorkloadOf(t.Context(), j)
		mustOK(t, err, "read "+j.Name+"'s Workload")
		if apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadPreempted) {
			preempted++
		}
	}
	if preempted != 1 {
		t.Fatalf("Kueue preempted %d of red's workloads to admit blue's 8 GPUs; the scenario needs 1", preempted)
	}
	// The preemption is counted in the hour Kueue recorded it in: the hour
	// in progress, or, when the hour turned since, the hours before it in
	// the page's totals (ci78 preempted at about 11:00:00, and the hour in
	// progress the page then showed, 11:00, rightly had none). Their sum
	// is red's preemptions since the scenario began, either way.
	waitForSum(t, redPage, []string{"live-preemptions", "preemptions"}, "red's preemptions", preempted)
	if got := text(t, redPage, "live-guaranteed-hours"); !hoursAbove(got, 0) {
		t.Errorf("red's guaranteed GPU-hours in the hour in progress = %q, want more than 0", got)
	}
	screenshot(t, redPage, "sched-02-red-preempted")

	bluePage := signIn(t, b, p, "Bianca Owner (Blue)")
	_, err = bluePage.Goto(p.URL + "/teams/blue/usage")
	mustOK(t, err, "owner.blue opens blue's usage")
	waitForFigure(t, bluePage, "live-guaranteed-hours", "blue's guaranteed GPU-hours", func(s string) bool { return hoursAbove(s, 0) })
	for id, want := range map[string]string{"live-preemptions": "0", "live-borrowed-hours": "0.00"} {
		if got := text(t, bluePage, id); got != want {
			t.Errorf("blue's %s = %q, want %s", id, got, want)
		}
	}
	screenshot(t, bluePage, "sched-03-blue-reclaimed")
}

// labelTeam puts the portal's team label on a HyperPod team's namespace.
func labelTeam(t *testing.T, hc *hpcluster.Cluster, team hpcluster.Team) {
	t.Helper()
	ctx := t.Context()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ns, err := hc.Kube.CoreV1().Namespaces().Get(ctx, team.Namespace, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[provision.LabelTeam] = team.Name
		_, err = hc.Kube.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{})
		return err
	})
	mustOK(t, err, "label namespace "+team.Namespace)
}

// recordGuarantees records each team's guarantee of one ml.p5.48xlarge
// since ever in the portal's database.
func recordGuarantees(t *testing.T, dbPath string, teams ...string) {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, dbPath)
	mustOK(t, err, "open the portal's database")
	defer db.Close()
	for _, team := range teams {
		mustOK(t, db.ExecForTest(ctx, fmt.Sprintf(
			`INSERT INTO team_guarantee_history (team, instance_type, from_at, count) VALUES ('%s', '%s', '0001-01-01T00:00:00.000000000Z', 1)`,
			team, hpcluster.P5.Name)), "record "+team+"'s guarantee")
	}
}

// waitWorkload waits until job's Workload has condition cond true.
func waitWorkload(t *testing.T, hc *hpcluster.Cluster, job *batchv1.Job, what, cond string) {
	t.Helper()
	hpcluster.WaitFor(t, job.Name+" "+what, func() (bool, error) {
		wl, err := hc.WorkloadOf(t.Context(), job)
		if err != nil {
			return false, nil // its Workload is not created yet
		}
		return apimeta.IsStatusConditionTrue(wl.Status.Conditions, cond), nil
	})
}

// waitForFigure reloads the page until the figure with testID satisfies
// ok: the collector writes the hour in progress at every pass (each second
// here). The bound only keeps a broken build from hanging.
func waitForFigure(t *testing.T, pg playwright.Page, testID, what string, ok func(string) bool) {
	t.Helper()
	var got string
	reloadUntil(t, pg, func() bool {
		if count(t, pg.GetByTestId(testID), testID) != 1 {
			return false
		}
		got = text(t, pg, testID)
		return ok(got)
	}, func() string { return fmt.Sprintf("%s never showed on %s (last %q)", what, pg.URL(), got) })
}

// reloadUntil reloads pg, once a second for up to two minutes, until done
// says so, and fails t with failure's message if it never does.
func reloadUntil(t *testing.T, pg playwright.Page, done func() bool, failure func() string) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		_, err := pg.Reload()
		mustOK(t, err, "reload "+pg.URL())
		if done() {
			return
		}
	}
	t.Fatal(failure())
}

// waitForSum reloads pg until the figures with testIDs, each an integer
// (one the page does not show counts 0), add up to want, for up to two
// minutes.
func waitForSum(t *testing.T, pg playwright.Page, testIDs []string, what string, want int) {
	t.Helper()
	var got []string
	reloadUntil(t, pg, func() bool {
		got = got[:0]
		sum := 0
		for _, id := range testIDs {
			if count(t, pg.GetByTestId(id), id) != 1 {
				continue
			}
			s := text(t, pg, id)
			n, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("%s on %s is %q, not a count", id, pg.URL(), s)
			}
			got = append(got, id+"="+s)
			sum += n
		}
		return sum == want
	}, func() string {
		return fmt.Sprintf("%s never added up to %d on %s (last %v)", what, want, pg.URL(), got)
	})
}

func hoursAbove(s string, v float64) bool {
	f, err := strconv.ParseFloat(s, 64)
	return err == nil && f > v
}
