package web

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/usage"
)

// A Slurm team's hours (issue 36), recorded as the Slurm usage reader
// records them (usage.SlurmRecords, usage.IntegrateSplit, ReplaceUsage
// under its own cluster), show on the same usage page, daily summary and
// statement as EKS hours, priced by the same rate card: an EKS row with
// the same figures in the same hour gives a statement line with the same
// hours and the same cost, and the EKS collector's replace of that hour
// leaves the Slurm row.
func TestSlurmHoursOnUsagePagesAndStatements(t *testing.T) {
	h := newHarness(t, false, withRateCard(t), frozenClock)
	ctx := t.Context()
	month := usage.MonthOf(h.srv.opts.Now()).From
	job := usage.SlurmJob{ID: "42", Account: "red-acct", Partition: "gpu", QOS: "normal", NodeList: "n1", State: "COMPLETED", GPUs: 3,
		Submit: month.Add(9 * time.Minute), Start: month.Add(10 * time.Minute), End: month.Add(40 * time.Minute)}
	allocs, wls := usage.SlurmRecords("slurm/hp", []usage.SlurmJob{job},
		func(a string) (string, bool) { return "red", a == "red-acct" }, func(usage.SlurmJob) string { return "ml.p5.48xlarge" })
	hours := usage.IntegrateSplit(month, month.Add(time.Hour), allocs, wls, usage.GuaranteeHistory{}, nil)
	if len(hours) != 1 || hours[0].BorrowedAccelSeconds != 3*1800 {
		t.Fatalf("integrated = %+v", hours)
	}
	eks := hours[0]
	eks.Namespace = "hyperpod-ns-red"
	for _, w := range []struct {
		cluster string
		rows    []usage.Hour
	}{{"slurm/hp", hours}, {"shared", []usage.Hour{eks}}} {
		if _, err := h.db.ClaimCollector(ctx, w.cluster, "t", month, month.Add(-time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := h.db.ReplaceUsage(ctx, w.cluster, month, month.Add(time.Hour), w.rows, nil, "t"); err != nil {
			t.Fatal(err)
		}
	}

	owner := h.signIn("owner.red")
	if _, body := h.get(owner.c, "/teams/red/usage"); !strings.Contains(body, `data-testid="borrowed-hours">3.00</dd>`) {
		t.Error("the team usage page does not count the Slurm hours beside the EKS ones (3.00 borrowed GPU-hours)")
	}
	_, body := h.get(owner.c, "/teams/red/usage/summary.csv")
	if !strings.Contains(body, ",slurm:red-acct,red,ml.p5.48xlarge,") || !strings.Contains(body, ",hyperpod-ns-red,red,ml.p5.48xlarge,") {
		t.Errorf("the daily summary lacks the Slurm or the EKS line:\n%s", body)
	}
	resp, body := h.get(owner.c, "/teams/red/statements/"+month.Format("2006-01")+"/csv")
	rows, err := usage.ParseStatementCSV(strings.NewReader(body))
	if resp.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("statement CSV = %d, %v", resp.StatusCode, err)
	}
	lines := map[string]map[string]string{}
	for _, r := range rows {
		if r["item"] == usage.ItemUsage {
			lines[r["namespace"]] = r
		}
	}
	s, e := lines["slurm:red-acct"], lines["hyperpod-ns-red"]
	if s == nil || e == nil || s["borrowed_gpu_hours"] != "1.500" || s["cost"] == "" ||
		s["borrowed_gpu_hours"] != e["borrowed_gpu_hours"] || s["guaranteed_gpu_hours"] != e["guaranteed_gpu_hours"] || s["cost"] != e["cost"] {
		t.Errorf("statement lines: Slurm %v, EKS %v; want the same hours (1.500 borrowed) and cost", s, e)
	}
}
