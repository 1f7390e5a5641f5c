package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
)

// seedUsage writes a few hours of red's and blue's use this month into the
// running portal's database, as the collector would.
func seedUsage(t *testing.T, dbPath string) string {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	month := usage.MonthOf(time.Now())
	for h := range 3 {
		at := month.From.Add(time.Duration(h) * time.Hour)
		if err := db.PutUsageHours(ctx, []usage.Hour{
			{Team: "red", Namespace: "hyperpod-ns-red", InstanceType: "ml.p5.48xlarge", Start: at, GuaranteedAccelSeconds: 8 * 3600, BorrowedAccelSeconds: 1800, CPUMilliSeconds: 4000 * 3600},
			{Team: "blue", Namespace: "hyperpod-ns-blue", InstanceType: "ml.p5.48xlarge", Start: at, GuaranteedAccelSeconds: 4 * 3600},
		}); err != nil {
			t.Fatal(err)
		}
		if err := db.PutClusterHours(ctx, []usage.ClusterHour{{Cluster: "shared-hp", InstanceType: "ml.p5.48xlarge", Start: at,
			CapacityAccelSeconds: 16 * 3600, AllocatedAccelSeconds: 12*3600 + 1800}}); err != nil {
			t.Fatal(err)
		}
	}
	return month.From.Format("2006-01")
}

// redGuaranteedHours is red's guaranteed GPU-hours this month as the
// database holds them (the demo rows and the hours seedUsage wrote), in the
// statement's format.
func redGuaranteedHours(t *testing.T, dbPath string) string {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	month := usage.MonthOf(time.Now())
	rows, err := db.UsageHours(ctx, store.UsageFilter{Team: "red", From: month.From, To: month.To})
	if err != nil {
		t.Fatal(err)
	}
	var secs int64
	for _, r := range rows {
		secs += r.GuaranteedAccelSeconds
	}
	return usage.Hours(secs)
}

// TestFinanceSwitchesPolicyAndDownloadsCSV: finance sees every team's cost
// with demo prices labelled, switches the shared-cost policy (a reason is
// required), and downloads red's statement as a CSV that parses; red's
// owner sees the statement.
func TestFinanceSwitchesPolicyAndDownloadsCSV(t *testing.T) {
	t.Parallel()
	b := browser(t)
	dir := t.TempDir()
	card, err := filepath.Abs("../hack/demo-rate-card.json")
	if err != nil {
		t.Fatal(err)
	}
	dbPath := filepath.Join(dir, "cost.db")
	p := startPortal(t, "--db", dbPath, "--rate-card", card, "--demo-usage")
	// The dev portal seeds its demo usage in the background: let it finish,
	// so that the hours below replace the demo rows of those hours.
	waitForLog(t, p, "demo usage seeded")
	month := seedUsage(t, dbPath)

	fin := signIn(t, b, p, "Felix Finance")
	clickTo(t, fin, fin.GetByTestId("nav-finance"), "**/finance", "open usage and cost")
	mustOK(t, fin.GetByTestId("finance-team-red").WaitFor(), "see team red's cost")
	if n := count(t, fin.GetByTestId("demo-prices"), "demo price notices"); n != 1 {
		t.Errorf("demo prices are not labelled (%d notices)", n)
	}
	mustOK(t, fin.GetByTestId("policy-preview").WaitFor(), "see the preview of each policy")
	screenshot(t, fin, "40-finance")

	// No reason: refused, the choice kept.
	mustOK(t, fin.GetByTestId("method-even").Check(), "choose evenly")
	mustOK(t, fin.Locator("#overhead").Fill("5"), "type the overhead")
	clickTo(t, fin, fin.GetByTestId("policy-save"), "**/finance/policy", "save without a reason")
	mustOK(t, fin.GetByTestId("error-reason").WaitFor(), "see the reason error")
	if ok, err := fin.GetByTestId("method-even").IsChecked(); err != nil || !ok {
		t.Errorf("the form lost the chosen method (%v)", err)
	}
	mustOK(t, fin.Locator("#reason").Fill("idle capacity is everyone's"), "give a reason")
	clickTo(t, fin, fin.GetByTestId("policy-save"), "**/finance/policy", "save the policy")
	mustOK(t, fin.GetByTestId("policy-saved").WaitFor(), "see it saved")
	if got := text(t, fin, "policy-current"); !strings.Contains(got, "evenly") {
		t.Errorf("policy in force = %q", got)
	}
	if got := text(t, fin, "policy-overhead"); got != "5.00 %" {
		t.Errorf("overhead = %q", got)
	}
	screenshot(t, fin, "41-policy-saved")

	clickTo(t, fin, fin.GetByTestId("finance-team-red").Locator("a"), "**/teams/red/statements/"+month, "open red's statement")
	dl, err := fin.ExpectDownload(func() error { return fin.GetByTestId("statement-csv").Click() })
	mustOK(t, err, "download the CSV")
	path, err := dl.Path()
	mustOK(t, err, "save the CSV")
	f, err := os.Open(path)
	mustOK(t, err, "open the CSV")
	defer f.Close()
	rows, err := usage.ParseStatementCSV(f)
	mustOK(t, err, "parse the CSV")
	var sum usage.Money
	total := ""
	for _, r := range rows {
		switch r["item"] {
		case usage.ItemUsage, usage.ItemIdle, usage.ItemOverhead:
			m, err := usage.ParseAmount(r["cost"], r["currency"])
			mustOK(t, err, "read a cost")
			sum = sum.Add(m)
		case usage.ItemTotal:
			total = r["cost"]
		}
	}
	if want := redGuaranteedHours(t, dbPath); len(rows) == 0 || rows[0]["namespace"] != "hyperpod-ns-red" || rows[0]["guaranteed_gpu_hours"] != want || sum.Amount() != total {
		t.Errorf("CSV rows %v: costs add to %v, total %q; want red's guaranteed GPU-hours %s", rows, sum, total, want)
	}

	owner := signIn(t, b, p, "Olivia Owner (Red)")
	_, err = owner.Goto(p.URL + "/teams/red/statements/" + month)
	mustOK(t, err, "open red's statement as its owner")
	mustOK(t, owner.GetByTestId("statement-lines").WaitFor(), "see the statement")
	if got := text(t, owner, "statement-lines"); !strings.Contains(got, "hyperpod-ns-red") || strings.Contains(got, "hyperpod-ns-blue") {
		t.Errorf("statement lines = %q", got)
	}
	if got := text(t, owner, "statement-status"); !strings.Contains(got, "Projection") {
		t.Errorf("status = %q", got)
	}
	screenshot(t, owner, "42-owner-statement")
}
