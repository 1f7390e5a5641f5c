package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// pageFigure is the text of the usage page's element with testid.
func pageFigure(t *testing.T, page, testid string) string {
	t.Helper()
	m := regexp.MustCompile(`data-testid="` + regexp.QuoteMeta(testid) + `">([^<]*)<`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the page has no %s", testid)
	}
	return m[1]
}

// getUsage reads path with token into an apiUsage.
func (h *harness) getUsage(token, path string) apiUsage {
	h.t.Helper()
	resp, body := h.api(apiReq{token: token, path: path})
	var u apiUsage
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &u) != nil {
		h.t.Fatalf("GET %s = %d\n%s", path, resp.StatusCode, body)
	}
	return u
}

// TestAPIUsageIsThePagesFigures: for one month (the 30 seeded days), the
// API's figures of team red are the usage page's (its totals, peaks,
// preemptions and waits as the page prints them), its days are the daily
// summary CSV's, and all of them are the seeding's (the oracle: 16
// guaranteed and 4 borrowed GPUs every recorded hour, 2 preemptions, 3
// running, waits of 1m, 2m and 5m).
func TestAPIUsageIsThePagesFigures(t *testing.T) {
	h := newHarness(t, false, frozenClock)
	seedUsage(t, h)
	owner := h.signIn("owner.red")
	tok := h.newToken(owner, workflow.TokenRead)
	now := h.srv.opts.Now()
	from, to := usage.DayStart(now).AddDate(0, 0, -29).Format(time.DateOnly), usage.DayStart(now).Format(time.DateOnly)
	q := "?from=" + from + "&to=" + to
	u := h.getUsage(tok, "/api/v1/teams/red/usage"+q)
	_, page := h.get(owner.c, "/teams/red/usage"+q)
	n := periodHours(h)
	// The page.
	for id, got := range map[string]string{
		"guaranteed-hours": hoursText(u.Totals.GuaranteedAccelSeconds), "borrowed-hours": hoursText(u.Totals.BorrowedAccelSeconds),
		"preemptions": strconv.Itoa(u.Totals.Preemptions), "peak-running": strconv.Itoa(u.Totals.PeakRunning), "peak-pending": strconv.Itoa(u.Totals.PeakPending),
	} {
		if want := pageFigure(t, page, id); got != want {
			t.Errorf("%s: the API says %s, the page %s", id, got, want)
		}
	}
	if u.Waits == nil || !strings.Contains(page, fmt.Sprintf("Median hour (of %d with admissions)", u.Waits.HoursWithAdmissions)) ||
		!strings.Contains(page, waitText(u.Waits.MedianHour.P50)) || !strings.Contains(page, waitText(u.Waits.WorstHour.P99)) {
		t.Errorf("the waits are not the page's: %+v", u.Waits)
	}
	// The oracle.
	if u.Totals.GuaranteedAccelSeconds != 16*3600*n || u.Totals.BorrowedAccelSeconds != 4*3600*n || u.Totals.GuaranteedHours != float64(16*n) ||
		u.Totals.Preemptions != 2 || u.Totals.PeakRunning != 3 || u.Totals.PeakPending != 1 || !u.Demo {
		t.Errorf("totals %+v, want %d hours of 16 guaranteed and 4 borrowed GPUs, 2 preemptions, peaks 3 and 1", u.Totals, n)
	}
	if w := u.Waits; w == nil || w.HoursWithAdmissions != int(n) || w.MedianHour != (apiWait{60, 120, 300}) || w.WorstHour != (apiWait{60, 120, 300}) {
		t.Errorf("waits %+v", u.Waits)
	}
	if len(u.Missing) != 1 || u.Missing[0].Reason != "collector down (test)" {
		t.Errorf("missing data periods %+v", u.Missing)
	}
	// Per day: every day of the period, each the daily summary's. The
	// figures run to the last complete hour: in the first hour of a UTC day
	// today has none, and the period touches 29 days.
	wantDays := 30
	if usage.HourStart(now).Equal(usage.DayStart(now)) {
		wantDays = 29
	}
	if len(u.Items) != wantDays || u.Per != "day" {
		t.Fatalf("%d days per %s, want %d per day", len(u.Items), u.Per, wantDays)
	}
	_, csvBody := h.get(owner.c, "/teams/red/usage/summary.csv"+q)
	rows, err := usage.ParseSummaryCSV(strings.NewReader(csvBody))
	if err != nil {
		t.Fatal(err)
	}
	csvDay := map[string]usage.CSVRow{}
	for _, r := range rows {
		csvDay[r["date"]] = r
	}
	var g, b int64
	for _, d := range u.Items {
		g, b = g+d.GuaranteedAccelSeconds, b+d.BorrowedAccelSeconds
		r := csvDay[d.Start.Format(time.DateOnly)]
		if r["gpu_allocated_hours"] != usage.Hours(d.GuaranteedAccelSeconds) || r["gpu_borrowed_hours"] != usage.Hours(d.BorrowedAccelSeconds) {
			t.Errorf("day %s: the API says %d and %d s, the summary CSV %v", d.Start.Format(time.DateOnly), d.GuaranteedAccelSeconds, d.BorrowedAccelSeconds, r)
		}
	}
	if g != u.Totals.GuaranteedAccelSeconds || b != u.Totals.BorrowedAccelSeconds {
		t.Errorf("the days add to %d and %d s, the totals say %+v", g, b, u.Totals)
	}
	// Per hour: each recorded hour.
	hu := h.getUsage(tok, "/api/v1/teams/red/usage"+q+"&per=hour")
	if int64(len(hu.Items)) != n || hu.Totals != u.Totals {
		t.Fatalf("%d hours (want %d), totals %+v", len(hu.Items), n, hu.Totals)
	}
	for _, it := range hu.Items {
		if it.GuaranteedAccelSeconds != 16*3600 || it.Running == nil || *it.Running != 3 || it.Wait == nil || it.Wait.P99 != 300 {
			t.Fatalf("hour %+v", it)
		}
	}
	// Bad queries: problems naming the parameter, as the page's form does.
	for p, field := range map[string]string{"?from=yesterday": "from", "?to=2026-02-30": "to", "?from=2026-03-02&to=2026-03-01": "period", "?per=week": "per"} {
		resp, body := h.api(apiReq{token: tok, path: "/api/v1/teams/red/usage" + p})
		var pd problemDoc
		if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(body, &pd) != nil || len(pd.Errors) == 0 || pd.Errors[0].Field != field {
			t.Errorf("%s = %d, want 400 naming %s\n%s", p, resp.StatusCode, field, body)
		}
	}
}

// TestAPIStatementsAreTheExports: a team's statements through the API are
// the JSON exports, byte for byte (a closed month's whose hash the audit
// trail records, and the month in progress's projection); the list is
// /finance's; the figures are the rate card's (the oracle: 8 GPU-hours at
// 98.32/8 and 1 borrowed at 120/8 is 113.32 on red's line).
func TestAPIStatementsAreTheExports(t *testing.T) {
	h := newHarness(t, false, withRateCard(t), frozenClock)
	seedCostHours(t, h)
	now := h.srv.opts.Now()
	last := usage.MonthOf(usage.MonthOf(now).From.Add(-time.Hour))
	if closed, err := h.db.CloseMonth(t.Context(), last, h.srv.opts.RateCard, h.srv.accelerators(), now); err != nil || !closed {
		t.Fatalf("CloseMonth = %v, %v", closed, err)
	}
	owner := h.signIn("owner.red")
	tok := h.newToken(owner, workflow.TokenRead)
	lastM, cur := last.From.Format("2006-01"), usage.MonthOf(now).From.Format("2006-01")
	for _, m := range []string{lastM, cur} {
		resp, body := h.api(apiReq{token: tok, path: "/api/v1/teams/red/statements/" + m})
		_, export := h.get(owner.c, "/teams/red/statements/"+m+"/json")
		if resp.StatusCode != http.StatusOK || string(body) != export {
			t.Errorf("%s: API %d, not the JSON export:\n%s\n%s", m, resp.StatusCode, body, export)
		}
		var st usage.Statement
		if err := json.Unmarshal(body, &st); err != nil || len(st.Lines) != 1 || st.Lines[0].Cost != "113.32" || st.Frozen != (m == lastM) {
			t.Errorf("%s: statement %+v (%v), want red's one line at 113.32", m, st, err)
		}
		if etag := resp.Header.Get("ETag"); (m == lastM) != (etag == `"`+usage.HashBytes(body)+`"`) {
			t.Errorf("%s: ETag %q", m, etag)
		}
	}
	resp, body := h.api(apiReq{token: tok, path: "/api/v1/teams/red/statements"})
	var list struct {
		Items   []apiStatementRow
		Current struct{ Month string }
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &list) != nil {
		t.Fatalf("list = %d\n%s", resp.StatusCode, body)
	}
	_, export := h.get(owner.c, "/teams/red/statements/"+lastM+"/json")
	_, finance := h.get(h.signIn("finance").c, "/finance")
	_, stPage := h.get(owner.c, "/teams/red/statements/"+lastM)
	if len(list.Items) != 1 || list.Items[0].Month != lastM || list.Items[0].Hash != usage.HashBytes([]byte(export)) ||
		!strings.Contains(finance, list.Items[0].Hash[:12]) || !strings.Contains(finance, list.Items[0].Links.CSV) ||
		!strings.Contains(stPage, list.Items[0].Hash) || !strings.Contains(finance, list.Items[0].Total+" "+list.Items[0].Currency) ||
		list.Current.Month != cur {
		t.Errorf("list %+v, want last month's frozen statement as /finance lists it, and %s in progress", list, cur)
	}
}

// TestAPITeamRoutesAreScopedAsThePages: for every person, both teams and
// each of the team routes, the API answers with the status of the page
// that shows the same thing (usage: the usage page; statements: the
// statement page), through a read token and through the session; a token
// limited to red is 404 for blue's whatever its person may read.
func TestAPITeamRoutesAreScopedAsThePages(t *testing.T) {
	h := newHarness(t, false, withRateCard(t))
	month := usage.MonthOf(h.srv.opts.Now()).From.Format("2006-01")
	routes := map[string]string{ // API path (team as %s): page path
		"/api/v1/teams/%s/usage":                   "/teams/%s/usage",
		"/api/v1/teams/%s/statements":              "/teams/%s/statements/" + month,
		"/api/v1/teams/%s/statements/" + month:     "/teams/%s/statements/" + month,
		"/api/v1/teams/%s/statements/" + "2026-13": "/teams/%s/statements/2026-13",
	}
	for _, who := range []string{"owner.red", "member.red", "owner.blue", "finance", "admin", "reviewer", "revadmin"} {
		s := h.signIn(who)
		tok := h.newToken(s, workflow.TokenRead)
		for _, team := range []string{"red", "blue"} {
			for api, pg := range routes {
				pr, _ := h.get(noRedirect(s.c), fmt.Sprintf(pg, team))
				for via, r := range map[string]apiReq{"token": {token: tok}, "session": {client: s.c}} {
					r.path = fmt.Sprintf(api, team)
					if resp, _ := h.api(r); resp.StatusCode != pr.StatusCode {
						t.Errorf("%s's %s: GET %s = %d, the page %d", who, via, r.path, resp.StatusCode, pr.StatusCode)
					}
				}
			}
		}
	}
	redOnly := h.newToken(h.signIn("revadmin"), workflow.TokenRead, "red")
	for api := range routes {
		if resp, body := h.api(apiReq{token: redOnly, path: fmt.Sprintf(api, "blue")}); resp.StatusCode != http.StatusNotFound || strings.Contains(string(body), "hyperpod-ns-blue") {
			t.Errorf("a token limited to red: GET %s = %d, want 404", fmt.Sprintf(api, "blue"), resp.StatusCode)
		}
	}
}
