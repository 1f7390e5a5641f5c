package web

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
)

// The detailed task report beside a statement: the team's tasks of the
// month as the collector recorded them, exact accelerator-seconds within
// the month (a running task up to now), another team's absent; the
// statement's readers only.
func TestTeamTaskReport(t *testing.T) {
	h := newHarness(t, false, frozenClock)
	now := h.srv.opts.Now().UTC()
	month := usage.MonthOf(now)
	// job-a started 2 h before the month and ran 3 h: 1 h in the month
	// (8 GPUs × 3600 s); solo still runs since the month's first hour
	// (2 GPUs up to now); blue's task is blue's.
	start := month.From.Add(-2 * time.Hour)
	recs := store.UsageRecords{
		Allocs: []usage.Alloc{
			{Key: "uid-1", Task: "wl-1", Pod: "job-a-0", Team: "red", Namespace: "hyperpod-ns-red", InstanceType: "ml.p5.48xlarge",
				Accelerators: 8, Start: start, End: start.Add(3 * time.Hour), Status: "Succeeded"},
			{Key: "uid-2", Pod: "solo", Team: "red", Namespace: "hyperpod-ns-red", InstanceType: "ml.p5.48xlarge",
				Accelerators: 2, Start: month.From, Status: "Running", PriorityClass: "inference-priority"},
			{Key: "uid-3", Pod: "blue-secret", Team: "blue", Namespace: "hyperpod-ns-blue", InstanceType: "ml.p5.48xlarge",
				Accelerators: 1, Start: month.From, Status: "Running"},
		},
		Workloads: []usage.Workload{{Key: "wl-1", Name: "job-a", Team: "red", Namespace: "hyperpod-ns-red", InstanceType: "ml.p5.48xlarge",
			PriorityClass: "training-priority", Created: start}},
	}
	if err := h.db.PutUsageRecords(t.Context(), "shared", recs); err != nil {
		t.Fatal(err)
	}
	path := "/teams/red/statements/" + month.From.Format("2006-01") + "/tasks"
	resp, body := h.get(h.signIn("owner.red").c, path)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") {
		t.Fatalf("task report = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	rows, err := usage.ParseTasksCSV(strings.NewReader(body))
	if err != nil {
		t.Fatalf("the report does not parse back: %v\n%s", err, body)
	}
	soloSecs := 2 * int64(now.Sub(month.From)/time.Second)
	want := map[string][3]string{
		"job-a": {"training-priority", "Succeeded", "28800"},
		"solo":  {"inference-priority", "Running", strconv.FormatInt(soloSecs, 10)},
	}
	if len(rows) != len(want) {
		t.Fatalf("rows = %v, want job-a and solo only", rows)
	}
	for _, r := range rows {
		w, ok := want[r["task"]]
		if !ok || r["priority_class"] != w[0] || r["status"] != w[1] || r["accelerator_seconds"] != w[2] || r["team"] != "red" {
			t.Errorf("row %v, want %v", r, w)
		}
	}
	if strings.Contains(body, "blue-secret") {
		t.Error("red's task report lists blue's task")
	}
	for login, code := range map[string]int{"owner.blue": http.StatusNotFound, "member.red": http.StatusForbidden, "finance": http.StatusOK} {
		if resp, _ := h.get(noRedirect(h.signIn(login).c), path); resp.StatusCode != code {
			t.Errorf("%s GET %s = %d, want %d", login, path, resp.StatusCode, code)
		}
	}
	if resp, _ := h.get(h.signIn("owner.red").c, "/teams/red/statements/9999-01/tasks"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a future month's report = %d, want 404", resp.StatusCode)
	}
}
