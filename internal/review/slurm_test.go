package review_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/collect/slurmusage"
	"github.com/hyperpod-governance/portal/internal/review"
	"github.com/hyperpod-governance/portal/internal/slurm"
	"github.com/hyperpod-governance/portal/internal/support/testenv"
	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// slurmContract is the example contract on the Slurm orchestrator: the
// team's account instead of namespaces, on the same cluster.
func slurmContract() workflow.Contract {
	c := workflow.ExampleContract()
	c.Orchestrator = workflow.OrchestratorSlurm
	c.EKSClusterName = ""
	c.Namespaces = nil
	c.SlurmScope = workflow.SlurmScope{Account: "red-acct", Partition: "gpu", QoS: "red-gpu"}
	return c
}

// outboxSubjects are the subjects of connection id's notices of kind.
func (f *fixture) outboxSubjects(id int64, kind string) []string {
	f.t.Helper()
	rows, err := f.raw.QueryContext(f.t.Context(), `SELECT subject FROM outbox WHERE connection_id = ? AND kind = ? ORDER BY id`, id, kind)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// sinfoOf is sinfo's node lines (slurm.Nodes's format) of n nodes of
// partition gpu, the ones in states given theirs, the others idle.
func sinfoOf(n int, states map[int]string) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		st := states[i]
		if st == "" {
			st = "idle"
		}
		fmt.Fprintf(&b, "hp-gpu-%d|gpu|gpu:h100:8(S:0-1)|%s\n", i, st)
	}
	return b.String()
}

// TestSlurmCapacityChangeOpensReview: a Slurm connection goes through the
// capacity trigger as an EKS one does. The cluster's inventory kept from
// the Slurm nodes (slurmusage.InventoryRows of sinfo's lines, as the
// reader writes it) loses two of its ten nodes, one drained, one down and
// not responding: the next tick opens a capacity review of the Slurm
// connection naming 10 before and 8 after, notifies the reviewers and the
// team with no EKS word (namespace, queue), and a tick with the same
// nodes opens nothing more.
func TestSlurmCapacityChangeOpensReview(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	conn := f.active(slurmContract())
	write := func(out string) {
		t.Helper()
		nodes, err := slurm.ParseNodes([]byte(out))
		if err != nil {
			t.Fatal(err)
		}
		rows := slurmusage.InventoryRows(nodes, map[string]string{"gpu": "ml.p5.48xlarge"})
		if err := f.db.ReplaceObserved(ctx, "shared-hp", rows, workflow.Actor{Email: "Slurm usage reader"}, f.tick()); err != nil {
			t.Fatal(err)
		}
	}
	write(sinfoOf(10, nil))
	f.run(f.tick())
	f.run(f.tick())
	if rs := f.reviews(conn.ID); len(rs) != 0 {
		t.Fatalf("ten usable nodes, as seeded, opened a review: %+v", rs)
	}
	write(sinfoOf(10, map[int]string{3: "drained", 7: "down*"}))
	if inv, _ := f.db.Inventory(ctx, "shared-hp"); inv["ml.p5.48xlarge"] != 8 {
		t.Fatalf("inventory = %v; want 8 p5 (10 nodes, one drained, one down)", inv)
	}
	f.run(f.tick())
	r := f.open(conn.ID)
	if r.Trigger != workflow.TriggerCapacity || !strings.Contains(r.Detail, "ml.p5.48xlarge × 10") || !strings.Contains(r.Detail, "ml.p5.48xlarge × 8") {
		t.Errorf("review = %+v; want a capacity review from 10 to 8", r)
	}
	subjects := f.outboxSubjects(conn.ID, "review.opened")
	if len(subjects) != 2 {
		t.Fatalf("review.opened notices = %q; want the reviewers' and the team's", subjects)
	}
	for _, s := range subjects {
		if !strings.Contains(s, "capacity") || strings.Contains(s, "namespace") || strings.Contains(s, "queue") {
			t.Errorf("notice %q: want the capacity change, no EKS word", s)
		}
	}
	f.run(f.tick())
	if rs := f.reviews(conn.ID); len(rs) != 1 || len(f.open(conn.ID).MoreTriggers) != 0 {
		t.Errorf("the same nodes again: reviews %+v", rs)
	}
}

// TestSlurmOrphanReview: a Slurm connection whose owners no portal user
// in the team's owners group is, is flagged an orphan and reviewed, as an
// EKS one is (TestOrphanReview).
func TestSlurmOrphanReview(t *testing.T) {
	f := newFixture(t)
	c := slurmContract()
	c.BusinessOwner, c.CostOwner, c.ExceptionOwner, c.OperationsOwner = "nobody@example.test", "nobody@example.test", "nobody@example.test", "nobody@example.test"
	conn := f.active(c)
	f.run(f.tick())
	r := f.open(conn.ID)
	if r.Trigger != workflow.TriggerOrphan || f.conn(conn.ID).Orphan != workflow.OrphanNoOwner {
		t.Errorf("review = %+v, orphan %q; want an orphan review", r, f.conn(conn.ID).Orphan)
	}
}

const slurmRateCard = `{"currency": "USD", "rates": [{"instance_type": "ml.p5.48xlarge", "effective_from": "2025-01-01", "hourly": "98.32", "borrowed_hourly": "120.00"}]}`

// evidenceOf is the evidence of a connection of c on a fresh fixture whose
// team ran hours (their namespace set to ns), collected on 2026-03-20.
func evidenceOf(t *testing.T, c workflow.Contract, ns string, hours []usage.Hour) workflow.Evidence {
	t.Helper()
	f := newFixture(t)
	card, err := usage.ParseRateCard([]byte(slurmRateCard))
	if err != nil {
		t.Fatal(err)
	}
	f.s.Rates, f.s.Accelerators = card, map[string]usage.InstanceAccel{"ml.p5.48xlarge": {Count: 8}}
	conn := f.active(c)
	for i := range hours {
		hours[i].Namespace = ns
	}
	if err := f.db.PutUsageHours(t.Context(), hours); err != nil {
		t.Fatal(err)
	}
	ev, err := review.Collect(t.Context(), f.s, f.conn(conn.ID), "", day("2026-03-20"))
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// TestSlurmEvidenceUsageAndCost: the evidence of a Slurm connection takes
// the team's usage and cost from its `slurm:<account>` rows (the Slurm
// usage reader's): the GPU hours are the rows' seconds counted by hand,
// and usage and cost are exactly what the same hours give an EKS
// connection of the same team under its namespace (the same rows, read
// the same way: one computation of a team's money).
func TestSlurmEvidenceUsageAndCost(t *testing.T) {
	base := usage.HourStart(time.Date(2026, 3, 10, 14, 0, 0, 0, time.UTC))
	hours := func() []usage.Hour {
		return []usage.Hour{
			{Team: "red", InstanceType: "ml.p5.48xlarge", Start: base, GuaranteedAccelSeconds: 4 * 3600, BorrowedAccelSeconds: 1800,
				Running: 2, WaitP50Seconds: -1, WaitP90Seconds: -1, WaitP99Seconds: -1, Source: usage.SourceCluster},
			{Team: "red", InstanceType: "ml.p5.48xlarge", Start: base.Add(time.Hour), GuaranteedAccelSeconds: 2 * 3600,
				Running: 1, WaitP50Seconds: -1, WaitP90Seconds: -1, WaitP99Seconds: -1, Source: usage.SourceCluster},
		}
	}
	sl := evidenceOf(t, slurmContract(), usage.SlurmNamespace("red-acct"), hours())
	if sl.Usage == nil {
		t.Fatalf("a Slurm connection's evidence has no usage; gaps %q", sl.Gaps)
	}
	// 4 h + 2 h guaranteed, half an hour borrowed: counted by hand.
	if w := sl.Usage.Last30; w.GuaranteedGPUHours != 6 || w.BorrowedGPUHours != 0.5 || w.UsedGPUHours != 6.5 || w.Cost == "" {
		t.Errorf("last 30 days = %+v; want 6 guaranteed, 0.5 borrowed, 6.5 used GPU hours, priced", w)
	}
	if want := base.Add(2 * time.Hour); !sl.Usage.LastWorkload.Equal(want) {
		t.Errorf("last workload = %s; want %s", sl.Usage.LastWorkload, want)
	}
	eks := evidenceOf(t, workflow.ExampleContract(), "hyperpod-ns-red", hours())
	if !reflect.DeepEqual(sl.Usage, eks.Usage) {
		a, _ := json.Marshal(sl.Usage)
		b, _ := json.Marshal(eks.Usage)
		t.Errorf("the Slurm team's usage and cost differ from the same hours on EKS:\n%s\n%s", a, b)
	}
	for _, g := range sl.Gaps {
		if strings.Contains(g, "usage") || strings.Contains(g, "cost") {
			t.Errorf("gap %q with the Slurm rows recorded", g)
		}
	}
}

// TestSlurmReviewHoldNotices: a reviewer's hold decision on a Slurm
// connection proposes a hold; the admin's confirmation, drain and release
// and a later proposal each notify the team of what they do to the team's
// Slurm account (HoldWording), never of a queue.
func TestSlurmReviewHoldNotices(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	c := slurmContract()
	c.BusinessOwner, c.CostOwner, c.ExceptionOwner, c.OperationsOwner = "nobody@example.test", "nobody@example.test", "nobody@example.test", "nobody@example.test"
	conn := f.active(c)
	f.run(f.tick())
	r := f.open(conn.ID)
	reviewer := f.login("reviewer", "governance-reviewers")
	if _, err := f.db.DecideReview(ctx, r.ID, reviewer, workflow.DecideReviewInput{Decision: workflow.ReviewHold, Reason: "no owner left"}, f.tick()); err != nil {
		t.Fatal(err)
	}
	other := f.login("admin2", "platform-admins")
	for _, step := range []workflow.HoldStep{workflow.HoldStepConfirm, workflow.HoldStepDrain, workflow.HoldStepRelease} {
		if _, _, err := f.db.DecideHold(ctx, conn.ID, step, other, true, string(step)+"ed", f.tick()); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	if _, err := f.db.ProposeHold(ctx, conn.ID, workflow.SystemActor, "the end date passed", f.tick()); err != nil {
		t.Fatal(err)
	}
	for kind, step := range map[string]workflow.HoldStep{"hold.proposed": workflow.HoldStepPropose, "hold.confirm": workflow.HoldStepConfirm,
		"hold.drain": workflow.HoldStepDrain, "hold.release": workflow.HoldStepRelease} {
		subjects := f.outboxSubjects(conn.ID, kind)
		want := workflow.HoldWording(workflow.OrchestratorSlurm, step)
		found := false
		for _, s := range subjects {
			found = found || strings.Contains(s, want)
			if strings.Contains(s, "queue") {
				t.Errorf("%s notice %q speaks of a queue on a Slurm connection", kind, s)
			}
		}
		if !found {
			t.Errorf("%s notices %q: none says %q", kind, subjects, want)
		}
	}
}

// TestSlurmDrainOpensReviewOnTheTestBed: end to end on the test bed's
// Slurm: the Slurm usage reader keeps the cluster's inventory from sinfo;
// `scontrol update nodename=... state=drain` takes the node's capacity
// away, which opens a capacity review of the cluster's Slurm connection
// (from 1 to 0); resumed, the capacity is back.
func TestSlurmDrainOpensReviewOnTheTestBed(t *testing.T) {
	conf := testenv.Require(t, "PORTAL_TEST_SLURM_CONF")
	node := testenv.Require(t, "PORTAL_TEST_SLURM_NODE")
	partition := testenv.Require(t, "PORTAL_TEST_SLURM_PARTITION")
	f := newFixture(t)
	ctx := t.Context()
	run := slurm.Local{Conf: conf}
	conn := f.active(slurmContract())
	woken := 0
	r := &slurmusage.Reader{Runner: run, Store: f.db, Owner: "test", InventoryCluster: "shared-hp",
		InstanceTypes: map[string]string{partition: "ml.p5.48xlarge"}, InventoryChanged: func() { woken++ }}
	// capacity refreshes the inventory until the node's capacity is want
	// (a state change reaches sinfo within moments).
	capacity := func(want int) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
			if _, err := r.RefreshInventory(ctx); err != nil {
				t.Fatal(err)
			}
			inv, err := f.db.Inventory(ctx, "shared-hp")
			if err != nil {
				t.Fatal(err)
			}
			if n, ok := inv["ml.p5.48xlarge"]; ok && n == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("inventory = %v; want ml.p5.48xlarge × %d", inv, want)
			}
		}
	}
	capacity(1)
	f.run(f.tick())
	f.run(f.tick())
	if rs := f.reviews(conn.ID); len(rs) != 0 {
		t.Fatalf("the first observation opened a review: %+v", rs)
	}
	drained := false
	t.Cleanup(func() {
		if drained {
			run.Run(context.Background(), "scontrol", "update", "nodename="+node, "state=resume")
		}
	})
	if _, err := run.Run(ctx, "scontrol", "update", "nodename="+node, "state=drain", "reason=portal review test"); err != nil {
		t.Fatal(err)
	}
	drained = true
	capacity(0)
	f.run(f.tick())
	rv := f.open(conn.ID)
	if rv.Trigger != workflow.TriggerCapacity || !strings.Contains(rv.Detail, "ml.p5.48xlarge × 1") || !strings.Contains(rv.Detail, "ml.p5.48xlarge × 0") {
		t.Errorf("review = %+v; want a capacity review from 1 to 0", rv)
	}
	if _, err := run.Run(ctx, "scontrol", "update", "nodename="+node, "state=resume"); err != nil {
		t.Fatal(err)
	}
	drained = false
	capacity(1)
	if woken < 2 {
		t.Errorf("the reader woke the scheduler %d times; want once per change", woken)
	}
}
