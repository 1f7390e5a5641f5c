package store_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
)

var nov = usage.MonthOf(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))

func costCard(t *testing.T) *usage.RateCard {
	t.Helper()
	c, err := usage.ParseRateCard([]byte(`{"currency": "USD", "demo": true, "rates": [{"instance_type": "ml.p5.48xlarge", "effective_from": "2026-01-01", "hourly": "98.32"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var p5 = map[string]usage.InstanceAccel{"ml.p5.48xlarge": {Count: 8}}

// Policy versions are append-only, each with its audit event written in
// the same transaction; a change without a reason is refused.
func TestCostPolicyVersionsAudited(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	if p, err := f.db.CostPolicy(ctx); err != nil || p.Version != 0 || p.Policy != store.DefaultCostPolicy {
		t.Fatalf("before any choice: %+v, %v", p, err)
	}
	fin := f.user("finance")
	if _, err := f.db.SetCostPolicy(ctx, 0, usage.Policy{Method: usage.SplitByGuarantee, OverheadBasisPoints: 500}, "  ", fin, f.tick()); err != store.ErrReasonRequired {
		t.Fatalf("no reason: %v", err)
	}
	if _, err := f.db.SetCostPolicy(ctx, 0, usage.Policy{Method: "random"}, "why", fin, f.tick()); err == nil {
		t.Fatal("an unknown method was stored")
	}
	for i, m := range []usage.Method{usage.SplitByGuarantee, usage.SplitEvenly} {
		v, err := f.db.SetCostPolicy(ctx, i, usage.Policy{Method: m, OverheadBasisPoints: 1250}, "budget review", fin, f.tick())
		if err != nil || v.Version != i+1 {
			t.Fatalf("SetCostPolicy: %+v, %v", v, err)
		}
	}
	// A choice made against version 1 while version 2 is in force (two
	// finance users on the same page): refused inside the transaction,
	// nothing stored, nothing audited.
	if _, err := f.db.SetCostPolicy(ctx, 1, usage.Policy{Method: usage.SplitByUsage}, "late", fin, f.tick()); !errors.Is(err, store.ErrPolicyChanged) {
		t.Fatalf("a stale choice = %v, want ErrPolicyChanged", err)
	}
	cur, _ := f.db.CostPolicy(ctx)
	if cur.Version != 2 || cur.Policy.Method != usage.SplitEvenly || cur.ChosenBy != fin.Email || cur.Reason != "budget review" {
		t.Errorf("in force: %+v", cur)
	}
	ev, _ := f.db.AuditEvents(ctx, store.AuditFilter{Action: "cost.policy"}, 0, 10)
	if len(ev) != 2 || ev[0].Actor != fin.Email || ev[0].Version != 2 || !strings.Contains(ev[0].Reason, "even, overhead 12.50%: budget review") {
		t.Errorf("audit events %+v", ev)
	}
	for _, q := range []string{`UPDATE cost_policies SET method = 'usage'`, `DELETE FROM cost_policies`} {
		if _, err := f.raw.Exec(q); err == nil || !strings.Contains(err.Error(), "immutable") {
			t.Errorf("%s: %v", q, err)
		}
	}
}

// Closing a month freezes each team's statement once, with its hash in the
// audit trail; the frozen rows refuse UPDATE and DELETE; closing again does
// nothing; the current month is never closed.
func TestCloseMonthFreezesOnce(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	f.active("red") // guarantee: 2 × ml.p5.48xlarge
	if g, err := f.db.TeamGuarantees(ctx); err != nil || g["red"]["ml.p5.48xlarge"] != 2 {
		t.Fatalf("TeamGuarantees = %v, %v", g, err)
	}
	h := nov.From.Add(5 * time.Hour)
	if err := f.db.PutUsageHours(ctx, []usage.Hour{{Team: "red", Namespace: "hyperpod-ns-red", InstanceType: "ml.p5.48xlarge", Start: h, GuaranteedAccelSeconds: 8 * 3600}}); err != nil {
		t.Fatal(err)
	}
	if err := f.db.PutClusterHours(ctx, []usage.ClusterHour{{Cluster: "shared-hp", InstanceType: "ml.p5.48xlarge", Start: h, CapacityAccelSeconds: 16 * 3600, AllocatedAccelSeconds: 8 * 3600}}); err != nil {
		t.Fatal(err)
	}
	if err := f.db.AddMissing(ctx, usage.Missing{Cluster: "shared-hp", From: h.Add(time.Hour), To: h.Add(3 * time.Hour), Reason: "portal down"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.SetCostPolicy(ctx, 0, usage.Policy{Method: usage.SplitByGuarantee}, "reserve pays", f.admins[0], f.tick()); err != nil {
		t.Fatal(err)
	}
	card := costCard(t)
	if _, err := f.db.CloseMonth(ctx, nov, card, p5, nov.To.Add(-time.Hour)); err == nil {
		t.Fatal("a month that has not ended was closed")
	}
	if _, err := f.db.CloseMonth(ctx, nov, nil, p5, nov.To); err != store.ErrNoRateCard {
		t.Fatalf("without prices: %v", err)
	}
	closed, err := f.db.CloseMonth(ctx, nov, card, p5, nov.To.Add(2*time.Hour))
	if err != nil || !closed {
		t.Fatalf("CloseMonth = %v, %v", closed, err)
	}
	st, ok, err := f.db.FrozenStatement(ctx, "red", "2026-11")
	// red pays its hour (98.32) and, by guarantee, the idle hour of the
	// other instance (98.32).
	if err != nil || !ok || !st.Frozen || st.Total != "196.64" || len(st.Missing) != 1 || !st.DemoPrices {
		t.Fatalf("frozen statement %+v, %v, %v", st, ok, err)
	}
	list, _ := f.db.FrozenStatements(ctx, "red")
	if len(list) != 1 || list[0].Hash != st.Hash() {
		t.Fatalf("FrozenStatements = %+v", list)
	}
	ev, _ := f.db.AuditEvents(ctx, store.AuditFilter{Action: "cost.statement", Team: "red"}, 0, 10)
	if len(ev) != 1 || !strings.Contains(ev[0].Reason, "sha256 "+st.Hash()) {
		t.Errorf("audit of the frozen statement: %+v", ev)
	}
	// Again: nothing changes, nothing is appended.
	if closed, err := f.db.CloseMonth(ctx, nov, card, p5, nov.To.Add(48*time.Hour)); err != nil || closed {
		t.Fatalf("second CloseMonth = %v, %v", closed, err)
	}
	if ev, _ := f.db.AuditEvents(ctx, store.AuditFilter{ActionPrefix: "cost.month"}, 0, 10); len(ev) != 1 {
		t.Errorf("month_closed events %d", len(ev))
	}
	for _, q := range []string{`UPDATE cost_statements SET total = '0.00'`, `DELETE FROM cost_statements`,
		`UPDATE cost_months SET currency = 'EUR'`, `DELETE FROM cost_months`} {
		if _, err := f.raw.Exec(q); err == nil || !strings.Contains(err.Error(), "immutable") {
			t.Errorf("%s: %v", q, err)
		}
	}
	if m := store.LastClosableMonth(time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC), 2*time.Hour); m.From.Month() != time.October {
		t.Errorf("within the grace the month before last: %s", m.Label())
	}
	if m := store.LastClosableMonth(time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC), 2*time.Hour); m != nov {
		t.Errorf("after the grace: %s", m.Label())
	}
}
