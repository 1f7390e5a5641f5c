package web

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// The month-to-date chargeback is computed once per cost input version and
// hour (monthCache), and every replica recomputes as soon as any input
// changes, however it was written: a usage row inserted directly in SQL, a
// guarantee, a new cost policy. Two Servers on one database (two replicas,
// each its own store handle) each see every change on their next view.
func TestMonthSoFarCacheFollowsInputsOnEveryReplica(t *testing.T) {
	h := newHarness(t, false, withRateCard(t))
	seedCostHours(t, h)
	ctx := context.Background()
	replicas := []*Server{h.srv, secondServer(t, h)}
	owner := workflowPrincipal(t, h, "owner.red")
	views := func() []string {
		t.Helper()
		var out []string
		for _, s := range replicas {
			b, _, err := s.TeamCostBlock(ctx, owner, "red")
			if err != nil || !b.Priced {
				t.Fatalf("cost block = %+v, %v", b, err)
			}
			out = append(out, b.ToDate)
		}
		return out
	}
	first := views()
	if first[0] != first[1] {
		t.Fatalf("replicas disagree before any change: %q", first)
	}
	// Viewed again with nothing changed: the cached chargeback itself.
	now := h.srv.opts.Now()
	_, _, _, v1, err := h.srv.monthSoFar(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, v2, err := h.srv.monthSoFar(ctx, now)
	if err != nil || v1.cb != v2.cb || h.srv.monthCache.len() != 1 {
		t.Errorf("unchanged inputs: recomputed (%p, %p), %d cached, %v", v1.cb, v2.cb, h.srv.monthCache.len(), err)
	}

	prev := first
	step := func(what string, change func()) {
		t.Helper()
		change()
		got := views()
		for i := range got {
			if got[i] == prev[i] {
				t.Errorf("after %s, replica %d still shows red's month to date as %s", what, i+1, got[i])
			}
		}
		if got[0] != got[1] {
			t.Errorf("after %s, the replicas disagree: %q", what, got)
		}
		prev = got
	}
	month := usage.MonthOf(now).From
	step("a usage row written directly in SQL", func() {
		if err := h.db.ExecForTest(ctx, `INSERT INTO usage_hours (team, namespace, instance_type, hour, guaranteed_accel_s)
VALUES ('red', 'hyperpod-ns-red2', 'ml.p5.48xlarge', '`+month.Format("2006-01-02T15:04:05Z")+`', 14400)`); err != nil {
			t.Fatal(err)
		}
	})
	setPolicy := func(m usage.Method) func() {
		return func() {
			pol, err := h.db.CostPolicy(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.db.SetCostPolicy(ctx, pol.Version, usage.Policy{Method: m, OverheadBasisPoints: 2500},
				"test", workflow.Actor{Email: "finance@example.test"}, now); err != nil {
				t.Fatal(err)
			}
		}
	}
	step("a new cost policy (split evenly)", setPolicy(usage.SplitEvenly))
	// Nobody has a guarantee yet: red's shares drop to nothing.
	step("a new cost policy (split by guarantee)", setPolicy(usage.SplitByGuarantee))
	step("a guarantee in force written directly in SQL", func() {
		if err := replicas[1].opts.DB.ExecForTest(ctx, `INSERT INTO team_capacity (team, instance_type, count) VALUES ('red', 'ml.p5.48xlarge', 2), ('blue', 'ml.p5.48xlarge', 1)`,
			`INSERT INTO team_guarantee_history (team, instance_type, from_at, count) VALUES ('red', 'ml.p5.48xlarge', '`+month.Format(time.RFC3339)+`', 2),
  ('blue', 'ml.p5.48xlarge', '`+month.Format(time.RFC3339)+`', 1)`); err != nil {
			t.Fatal(err)
		}
	})
	step("a cluster capacity row", func() {
		if err := h.db.PutClusterHours(ctx, []usage.ClusterHour{{Cluster: "shared-hp", InstanceType: "ml.p5.48xlarge", Start: month,
			CapacityAccelSeconds: 64 * 3600, AllocatedAccelSeconds: 13 * 3600}}); err != nil {
			t.Fatal(err)
		}
	})
	if n := h.srv.monthCache.len(); n > monthCacheSize {
		t.Errorf("%d chargebacks cached, more than %d", n, monthCacheSize)
	}
}

// The usage page reads the team's rows once for its period and the quota
// suggestions' 30 days before the period's end, and splits them: each part
// is what reading it alone gives (a short period long ago, the default
// period).
func TestTeamUsageReadsHoursOnce(t *testing.T) {
	h := newHarness(t, false, frozenClock)
	seedUsage(t, h)
	ctx := context.Background()
	now := h.srv.opts.Now()
	g, err := h.db.Guarantees(ctx, "red")
	if err != nil {
		t.Fatal(err)
	}
	end := usage.HourStart(now)
	// Five busy days before the short period below, inside its suggestions'
	// 30 days: they count for the suggestions, not for the period's hours.
	day := usage.DayStart(now)
	if err := h.db.ExecForTest(ctx, `UPDATE usage_hours SET borrowed_accel_s = 40 * 3600 WHERE team = 'red' AND hour >= '`+
		day.AddDate(0, 0, -27).Format(time.RFC3339)+`' AND hour < '`+day.AddDate(0, 0, -22).Format(time.RFC3339)+`'`); err != nil {
		t.Fatal(err)
	}
	for _, p := range [][2]time.Time{
		{usage.DayStart(now).AddDate(0, 0, -20), usage.DayStart(now).AddDate(0, 0, -17)},
		{usage.DayStart(now).AddDate(0, 0, -29), end},
	} {
		reads := h.srv.teamHourReads.Load()
		u, err := h.srv.teamUsageView(ctx, "red", p[0], p[1])
		if err != nil {
			t.Fatal(err)
		}
		if n := h.srv.teamHourReads.Load() - reads; n != 1 {
			t.Errorf("period %v: the view read the team's hours %d times, want once", p, n)
		}
		want, err := h.srv.quotaSuggestions(ctx, "red", g["red"], nil, p[1])
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(u.Suggestions, want) {
			t.Errorf("period %v: suggestions %+v, want %+v", p, u.Suggestions, want)
		}
		rows, missing, err := h.srv.teamHours(ctx, "red", p[0], p[1])
		if err != nil {
			t.Fatal(err)
		}
		var gs int64
		for _, r := range rows {
			gs += r.GuaranteedAccelSeconds
		}
		if u.GuaranteedHours != hoursText(gs) || len(u.Missing) != len(missing) {
			t.Errorf("period %v: %s guaranteed hours, %d missing; want %s, %d", p, u.GuaranteedHours, len(u.Missing), hoursText(gs), len(missing))
		}
	}
}
