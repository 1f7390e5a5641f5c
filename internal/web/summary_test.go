package web

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
)

// summaryFixture stores, over three past UTC days, hourly rows of red on
// ml.p5.48xlarge (GPU) in two namespaces and on ml.trn1.32xlarge (Neuron:
// 2 cores per device in the default table), and of blue; red has no row on
// the third day, which a missing data period touches. Every quantity is a
// multiple of 36 seconds (of 36,000 millicore-seconds), so each sum is a
// whole hundredth of an hour and the expected text is exact.
func summaryFixture(t *testing.T, h *harness) (from time.Time, rows []usage.Hour, miss usage.Missing) {
	t.Helper()
	from = usage.DayStart(h.srv.opts.Now()).AddDate(0, 0, -10)
	for i := range 3 * 24 {
		at := from.Add(time.Duration(i) * time.Hour)
		k := int64(i%7 + 1)
		if i < 48 {
			rows = append(rows,
				usage.Hour{Team: "red", Namespace: "hyperpod-ns-red", InstanceType: "ml.p5.48xlarge", Start: at,
					GuaranteedAccelSeconds: 36 * 100 * k, BorrowedAccelSeconds: 36 * k * (k - 1), CPUMilliSeconds: 36_000 * 50 * k,
					BorrowedCPUMilliSeconds: 36_000 * 5 * (k - 1), Source: usage.SourceCluster},
				usage.Hour{Team: "red", Namespace: "hyperpod-ns-red-infer", InstanceType: "ml.p5.48xlarge", Start: at,
					BorrowedAccelSeconds: 36 * k, CPUMilliSeconds: 36_000 * k, BorrowedCPUMilliSeconds: 36_000 * k, Source: usage.SourceCluster})
			if i%5 == 0 {
				rows = append(rows, usage.Hour{Team: "red", Namespace: "hyperpod-ns-red", InstanceType: "ml.trn1.32xlarge", Start: at,
					GuaranteedAccelSeconds: 36 * 400, BorrowedAccelSeconds: 36 * 10 * k, CPUMilliSeconds: 36_000 * 128, Source: usage.SourceCluster})
			}
		}
		rows = append(rows, usage.Hour{Team: "blue", Namespace: "hyperpod-ns-blue", InstanceType: "ml.p5.48xlarge", Start: at,
			GuaranteedAccelSeconds: 36 * 7, CPUMilliSeconds: 36_000, Source: usage.SourceCluster})
	}
	for i := range rows {
		rows[i].WaitP50Seconds, rows[i].WaitP90Seconds, rows[i].WaitP99Seconds = -1, -1, -1
	}
	if err := h.db.PutUsageHours(t.Context(), rows); err != nil {
		t.Fatal(err)
	}
	miss = usage.Missing{Cluster: "shared-hp", From: from.Add(53 * time.Hour), To: from.Add(55*time.Hour + 30*time.Minute), Reason: "collector down (test)"}
	if err := h.db.AddMissing(t.Context(), miss); err != nil {
		t.Fatal(err)
	}
	return from, rows, miss
}

// hundredths formats seconds that are a whole number of hundredths of an
// hour as the reports do (three decimals).
func hundredths(secs int64) string { return fmt.Sprintf("%d.%02d0", secs/3600, secs%3600/36) }

// expectedSummary is the oracle: the stored rows of team (every team's for
// "") summed per day, namespace and instance type in CSV columns.
func expectedSummary(rows []usage.Hour, team string) map[string]map[string]string {
	type sums struct{ g, b, cpu, bcpu int64 }
	by := map[string]*sums{}
	itypes := map[string]string{}
	for _, r := range rows {
		if team != "" && r.Team != team {
			continue
		}
		k := r.Start.Format(time.DateOnly) + "|" + r.Team + "|" + r.Namespace + "|" + r.InstanceType
		if by[k] == nil {
			by[k] = &sums{}
		}
		by[k].g += r.GuaranteedAccelSeconds
		by[k].b += r.BorrowedAccelSeconds
		by[k].cpu += r.CPUMilliSeconds
		by[k].bcpu += r.BorrowedCPUMilliSeconds
		itypes[k] = r.InstanceType
	}
	out := map[string]map[string]string{}
	for k, s := range by {
		row := map[string]string{"neuroncore_total_hours": "", "neuroncore_allocated_hours": "", "neuroncore_borrowed_hours": "",
			"gpu_total_hours": "", "gpu_allocated_hours": "", "gpu_borrowed_hours": "",
			"vcpu_total_hours": hundredths(s.cpu / 1000), "vcpu_allocated_hours": hundredths((s.cpu - s.bcpu) / 1000),
			"vcpu_borrowed_hours": hundredths(s.bcpu / 1000)}
		if itypes[k] == "ml.trn1.32xlarge" { // 2 NeuronCores per device
			row["neuroncore_total_hours"], row["neuroncore_allocated_hours"], row["neuroncore_borrowed_hours"] =
				hundredths(2*(s.g+s.b)), hundredths(2*s.g), hundredths(2*s.b)
		} else {
			row["gpu_total_hours"], row["gpu_allocated_hours"], row["gpu_borrowed_hours"] = hundredths(s.g+s.b), hundredths(s.g), hundredths(s.b)
		}
		out[k] = row
	}
	return out
}

// Issue 31 item 9: the daily summary, HyperPod's summary report, as CSV:
// every line the sum of the stored rows of its day, namespace and instance
// type (computed here from the rows), GPU or NeuronCore hours by the
// instance type's accelerator, vCPU hours split, the missing data period
// on the lines of the days it touches and on a line of its own for a day
// without usage; another team's rows absent.
func TestUsageSummaryCSVFigures(t *testing.T) {
	h := newHarness(t, false, frozenClock)
	from, rows, miss := summaryFixture(t, h)
	q := "?from=" + from.Format(time.DateOnly) + "&to=" + from.AddDate(0, 0, 2).Format(time.DateOnly)
	missText := miss.From.Format(time.DateTime) + " to " + miss.To.Format(time.DateTime) + " UTC"
	for _, tc := range []struct{ login, path, team string }{
		{"owner.red", "/teams/red/usage/summary.csv", "red"},
		{"admin", "/admin/usage/summary.csv", ""},
	} {
		resp, body := h.get(noRedirect(h.signIn(tc.login).c), tc.path+q)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") {
			t.Fatalf("%s GET %s = %d %s", tc.login, tc.path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		got, err := usage.ParseSummaryCSV(strings.NewReader(body))
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.path, err, body)
		}
		want := expectedSummary(rows, tc.team)
		day3 := from.AddDate(0, 0, 2).Format(time.DateOnly)
		seen := map[string]bool{}
		for _, r := range got {
			k := r["date"] + "|" + r["team"] + "|" + r["namespace"] + "|" + r["instance_type"]
			if tc.team == "red" && r["namespace"] == "" && r["date"] == day3 && r["team"] == "red" {
				// Red's day without usage, touched by the missing period.
				if r["missing_data_periods"] != missText || r["gpu_total_hours"] != "" || r["vcpu_total_hours"] != "0.000" {
					t.Errorf("%s: the missing-only day's line = %v", tc.path, r)
				}
				seen["missing-only"] = true
				continue
			}
			w, ok := want[k]
			if !ok {
				t.Errorf("%s: unexpected line %v", tc.path, r)
				continue
			}
			seen[k] = true
			for col, v := range w {
				if r[col] != v {
					t.Errorf("%s %s: %s = %q, want %q", tc.path, k, col, r[col], v)
				}
			}
			wantMissing := ""
			if r["date"] == day3 {
				wantMissing = missText
			}
			if r["missing_data_periods"] != wantMissing {
				t.Errorf("%s %s: missing_data_periods = %q, want %q", tc.path, k, r["missing_data_periods"], wantMissing)
			}
		}
		for k := range want {
			if !seen[k] {
				t.Errorf("%s: no line %s", tc.path, k)
			}
		}
		if tc.team == "red" && (!seen["missing-only"] || strings.Contains(body, "hyperpod-ns-blue")) {
			t.Errorf("red's summary: missing-only line %v, blue's rows shown: %v", seen["missing-only"], strings.Contains(body, "hyperpod-ns-blue"))
		}
	}
}

// The summary page shows the same lines and the period's totals, computed
// here from the stored rows, and links its CSV with the period.
func TestUsageSummaryPage(t *testing.T) {
	h := newHarness(t, false, frozenClock)
	from, rows, _ := summaryFixture(t, h)
	to := from.AddDate(0, 0, 2).Format(time.DateOnly)
	q := "?from=" + from.Format(time.DateOnly) + "&to=" + to
	resp, body := h.get(noRedirect(h.signIn("member.red").c), "/teams/red/usage/summary"+q)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET = %d", resp.StatusCode)
	}
	var gpuG, gpuB, nG, nB, cpu, bcpu int64
	for _, r := range rows {
		if r.Team != "red" {
			continue
		}
		if r.InstanceType == "ml.trn1.32xlarge" {
			nG, nB = nG+2*r.GuaranteedAccelSeconds, nB+2*r.BorrowedAccelSeconds
		} else {
			gpuG, gpuB = gpuG+r.GuaranteedAccelSeconds, gpuB+r.BorrowedAccelSeconds
		}
		cpu, bcpu = cpu+r.CPUMilliSeconds, bcpu+r.BorrowedCPUMilliSeconds
	}
	totals := map[string][3]string{
		"GPU":        {hundredths(gpuG + gpuB), hundredths(gpuG), hundredths(gpuB)},
		"NeuronCore": {hundredths(nG + nB), hundredths(nG), hundredths(nB)},
		"vCPU":       {hundredths(cpu / 1000), hundredths((cpu - bcpu) / 1000), hundredths(bcpu / 1000)},
	}
	for unit, w := range totals {
		want := fmt.Sprintf(`<tr data-testid="total-%s"><th scope="row">%s</th><td>%s</td><td>%s</td><td>%s</td></tr>`, unit, unit, w[0], w[1], w[2])
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks the %s total %s", unit, want)
		}
	}
	for k, w := range expectedSummary(rows, "red") {
		p := strings.Split(k, "|")
		acc, cells := "GPU", []string{w["gpu_total_hours"], w["gpu_allocated_hours"], w["gpu_borrowed_hours"]}
		if p[3] == "ml.trn1.32xlarge" {
			acc, cells = "NeuronCore", []string{w["neuroncore_total_hours"], w["neuroncore_allocated_hours"], w["neuroncore_borrowed_hours"]}
		}
		line := "<td>" + strings.Join(append(append(p, acc), append(cells, w["vcpu_total_hours"], w["vcpu_allocated_hours"], w["vcpu_borrowed_hours"])...), "</td><td>") + "</td>"
		if !strings.Contains(body, line) {
			t.Errorf("the page lacks the line %s", line)
		}
	}
	csv := `href="/teams/red/usage/summary.csv?from=` + from.Format(time.DateOnly) + `&amp;to=` + to + `"`
	if !strings.Contains(body, csv) || !strings.Contains(body, `data-testid="missing-periods"`) || !strings.Contains(body, "collector down (test)") {
		t.Errorf("the page lacks the CSV link %s or the missing data periods", csv)
	}
}

// The team summary is authorized exactly as the team usage page (another
// team's owner gets 404 and nothing of it), the admins' summary admits
// admins only; bad dates answer 400 with the message on the form, the
// input kept, for the page and the CSV alike.
func TestUsageSummaryAuthorizationAndPeriod(t *testing.T) {
	h := newHarness(t, false, frozenClock)
	summaryFixture(t, h)
	for _, path := range []string{"/teams/red/usage", "/teams/red/usage/summary", "/teams/red/usage/summary.csv"} {
		for _, u := range []string{"owner.red", "member.red", "finance", "admin", "reviewer", "owner.blue"} {
			want, _ := h.get(noRedirect(h.signIn(u).c), "/teams/red/usage")
			resp, body := h.get(noRedirect(h.signIn(u).c), path)
			if resp.StatusCode != want.StatusCode {
				t.Errorf("%s GET %s = %d, the usage page %d", u, path, resp.StatusCode, want.StatusCode)
			}
			if u == "owner.blue" && (resp.StatusCode != http.StatusNotFound || strings.Contains(body, "hyperpod-ns-red")) {
				t.Errorf("owner.blue GET %s = %d, want 404 without red's rows", path, resp.StatusCode)
			}
		}
	}
	for _, path := range []string{"/admin/usage/summary", "/admin/usage/summary.csv"} {
		for u, code := range map[string]int{"admin": 200, "owner.red": 403, "finance": 403, "reviewer": 403} {
			if resp, _ := h.get(noRedirect(h.signIn(u).c), path); resp.StatusCode != code {
				t.Errorf("%s GET %s = %d, want %d", u, path, resp.StatusCode, code)
			}
		}
	}
	s := h.signIn("admin")
	for _, path := range []string{"/teams/red/usage/summary", "/teams/red/usage/summary.csv", "/admin/usage/summary", "/admin/usage/summary.csv"} {
		for _, tc := range []struct{ query, testID, kept string }{
			{"from=yesterday", "error-from", `value="yesterday"`},
			{"to=2026-13-01", "error-to", `value="2026-13-01"`},
			{"from=2026-01-10&to=2026-01-01", "error-period", "ends (2026-01-01) before it starts (2026-01-10)"},
		} {
			resp, body := h.get(noRedirect(s.c), path+"?"+tc.query)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `data-testid="`+tc.testID+`"`) || !strings.Contains(body, tc.kept) {
				t.Errorf("GET %s?%s = %d; want 400 with %s and %q", path, tc.query, resp.StatusCode, tc.testID, tc.kept)
			}
		}
	}
}

// Issue 31 item 9: the task report lists the month's missing data periods
// (a row each) and, on each task, those during its window.
func TestTaskReportListsMissingDataPeriods(t *testing.T) {
	h := newHarness(t, false, frozenClock)
	month := usage.MonthOf(usage.MonthOf(h.srv.opts.Now()).From.AddDate(0, 0, -1)) // last month: whole
	start := month.From
	recs := store.UsageRecords{Allocs: []usage.Alloc{
		{Key: "uid-1", Pod: "early", Team: "red", Namespace: "hyperpod-ns-red", InstanceType: "ml.p5.48xlarge",
			Accelerators: 8, Start: start, End: start.Add(time.Minute), Status: "Succeeded"},
		{Key: "uid-2", Pod: "through", Team: "red", Namespace: "hyperpod-ns-red", InstanceType: "ml.p5.48xlarge",
			Accelerators: 1, Start: start, Status: "Running"},
	}}
	if err := h.db.PutUsageRecords(t.Context(), "shared", recs); err != nil {
		t.Fatal(err)
	}
	miss := usage.Missing{Cluster: "shared", From: start.Add(2 * time.Minute), To: start.Add(3 * time.Minute), Reason: "collector down (test)"}
	if err := h.db.AddMissing(t.Context(), miss); err != nil {
		t.Fatal(err)
	}
	_, body := h.get(h.signIn("owner.red").c, "/teams/red/statements/"+month.From.Format("2006-01")+"/tasks")
	rows, err := usage.ParseTasksCSV(strings.NewReader(body))
	if err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	text := miss.From.Format(time.DateTime) + " to " + miss.To.Format(time.DateTime) + " UTC"
	want := map[string][2]string{ // status, missing_data_periods
		"collector down (test)": {usage.MissingDataStatus, text},
		"early":                 {"Succeeded", ""}, // ended before the gap
		"through":               {"Running", text},
	}
	if len(rows) != len(want) {
		t.Fatalf("rows = %v, want %v", rows, want)
	}
	for _, r := range rows {
		if w, ok := want[r["task"]]; !ok || r["status"] != w[0] || r["missing_data_periods"] != w[1] {
			t.Errorf("row %v, want %v", r, w)
		}
	}
	if r := rows[0]; r["status"] != usage.MissingDataStatus || r["start"] != miss.From.Format(time.RFC3339) || r["end"] != miss.To.Format(time.RFC3339) {
		t.Errorf("the first row is not the missing data period: %v", r)
	}
}
