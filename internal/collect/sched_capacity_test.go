package collect

// Issue 34 item 5, on the scheduling cluster: the inventory follows the
// nodes through the real collector's node informer into a real store, and
// from there the review scheduler's capacity trigger and the approval's
// capacity check (the store's Approve, whose rule is workflow's) act on it.

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/review"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/support/hpcluster"
	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// portal is a real store with an owner and an admin, for connections on
// workflow.ExampleContract's cluster "shared-hp".
type portal struct {
	t            *testing.T
	db           *store.DB
	owner, admin workflow.Actor
}

func newPortal(t *testing.T) *portal {
	p := &portal{t: t, db: migratedDB(t)}
	p.owner, p.admin = p.login("owner.red", "team-red-owners"), p.login("admin1", "platform-admins")
	return p
}

func (p *portal) login(subject string, groups ...string) workflow.Actor {
	p.t.Helper()
	u, err := p.db.RecordLogin(p.t.Context(), "https://idp.example.test", subject, subject+"@example.test", subject, groups, time.Now())
	if err != nil {
		p.t.Fatal(err)
	}
	return workflow.Actor{ID: u.ID, Email: u.Email}
}

// submitted files and submits a connection of team asking for count p5
// instances.
func (p *portal) submitted(team string, count int) int64 {
	p.t.Helper()
	ctx := p.t.Context()
	c := workflow.ExampleContract()
	c.Team, c.Namespaces = team, []string{"hyperpod-ns-" + team}
	for _, arn := range []*string{&c.ProjectRoleARN, &c.AccessRoleARN, &c.WorkloadRoleARN} {
		*arn = strings.Replace(*arn, "role/red-", "role/"+team+"-", 1)
	}
	c.Scheduling.Guaranteed = []workflow.Capacity{{InstanceType: hpcluster.P5.Name, Count: count}}
	conn, err := p.db.CreateConnection(ctx, c, p.owner, time.Now())
	if err != nil {
		p.t.Fatal(err)
	}
	if _, err := p.db.Transition(ctx, conn.ID, workflow.EventSubmit, p.owner, "", store.Expect{}, time.Now()); err != nil {
		p.t.Fatal(err)
	}
	return conn.ID
}

// approve approves the connection's current version: the store reads the
// inventory and the committed capacity inside the transaction.
func (p *portal) approve(id int64) error {
	ctx := p.t.Context()
	conn, err := p.db.Connection(ctx, id)
	if err != nil {
		p.t.Fatal(err)
	}
	v, err := p.db.Version(ctx, id, conn.CurrentVersion)
	if err != nil {
		p.t.Fatal(err)
	}
	_, _, err = p.db.Approve(ctx, id, p.admin, store.Expect{Version: v.Version, Hash: v.Hash, PlanHash: "plan-" + v.Hash[:8]}, "ok", workflow.ClusterFacts{}, time.Now())
	return err
}

// provision runs the queued provisioning job to success: the connection
// becomes active.
func (p *portal) provision() {
	p.t.Helper()
	ctx, now := p.t.Context(), time.Now()
	j, ok, err := p.db.ClaimJob(ctx, "w", now, time.Minute)
	if err != nil || !ok {
		p.t.Fatalf("ClaimJob = %v, %v", ok, err)
	}
	for _, err := range []error{
		p.db.StartJob(ctx, j.ID, "w", "plan", []string{"Namespace x"}, false, now),
		p.db.StepStarted(ctx, j.ID, "w", 0, "Namespace x", now),
		p.db.StepFinished(ctx, j.ID, "w", 0, "Namespace x", "created", "", now),
		p.db.CompleteJob(ctx, j.ID, "w", now),
	} {
		if err != nil {
			p.t.Fatal(err)
		}
	}
}

// Capacity follows the cluster: three healthy p5 nodes are the inventory
// without anyone clicking "Refresh"; one turning
// UnschedulablePendingReplacement and another cordoned lower it, open a
// capacity review of the live connection on the cluster and make an
// approval that fitted no longer fit; an admin's manual count still wins.
func TestSchedCapacityFollowsNodes(t *testing.T) {
	hc := hpcluster.Connect(t)
	for _, n := range []string{"p5-0", "p5-1", "p5-2"} {
		hc.AddNode(t, n, hpcluster.P5)
	}
	hc.AddNode(t, "g5-0", hpcluster.G5)
	p := newPortal(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := &Collector{Kube: hc.Kube, Kueue: hc.Kueue, Store: p.db, Cluster: "sched", Owner: "one",
		InventoryCluster: workflow.ExampleContract().ClusterName, InventorySettle: time.Second,
		Guarantees: accelOnly(func(context.Context) (usage.GuaranteeHistory, error) { return usage.GuaranteeHistory{}, nil })}
	if _, err := p.db.ClaimCollector(ctx, "sched", "one", time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	stop, err := c.Start(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	// waitInventory flushes (as Run does every interval) until the
	// inventory approvals count shows want p5 instances.
	waitInventory := func(want int) {
		t.Helper()
		hpcluster.WaitFor(t, "the inventory to show "+hpcluster.P5.Name+" × "+strconv.Itoa(want), func() (bool, error) {
			if err := c.Flush(ctx); err != nil {
				return false, err
			}
			inv, err := p.db.Inventory(ctx, "shared-hp")
			return err == nil && inv[hpcluster.P5.Name] == want && inv[hpcluster.G5.Name] == 1, err
		})
	}
	waitInventory(3)

	red := p.submitted("red", 2)
	if err := p.approve(red); err != nil {
		t.Fatalf("2 of 3 p5 instances: %v", err)
	}
	p.provision()
	blue := p.submitted("blue", 1)
	sched := &review.Scheduler{DB: p.db, Owner: "test"}
	tick := func() {
		t.Helper()
		if err := sched.Tick(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	tick() // the first observation of the cluster's capacity opens nothing
	if _, open, _ := p.db.OpenReviewOf(ctx, red); open {
		t.Fatal("a review opened before the capacity changed")
	}

	hc.SetNodeHealth(t, "p5-2", hpcluster.HealthUnschedulablePendingReplacement)
	waitInventory(2)
	tick()
	r, open, err := p.db.OpenReviewOf(ctx, red)
	if err != nil || !open || r.Trigger != workflow.TriggerCapacity ||
		!strings.Contains(r.Detail, hpcluster.P5.Name+" × 3") || !strings.Contains(r.Detail, hpcluster.P5.Name+" × 2") {
		t.Fatalf("review = %+v, %v, %v; want a capacity review from p5 × 3 to × 2", r, open, err)
	}
	// Red holds 2 of the 2 left: blue's 1 no longer fits.
	if err := p.approve(blue); !errors.Is(err, workflow.ErrOverCapacity) {
		t.Fatalf("approving blue's p5 × 1 with red's 2 of 2 = %v; want %v", err, workflow.ErrOverCapacity)
	}

	hc.Cordon(t, "p5-1", true)
	waitInventory(1)
	tick()
	if r, _, _ := p.db.OpenReviewOf(ctx, red); len(r.MoreTriggers) != 1 || !strings.Contains(r.MoreTriggers[0], hpcluster.P5.Name+" × 1") {
		t.Errorf("further triggers = %q; want the cordon's p5 × 1", r.MoreTriggers)
	}

	// The admin's count wins over what the nodes say, also after the
	// nodes change again.
	if err := p.db.SetInventory(ctx, "shared-hp", hpcluster.P5.Name, 3, p.admin, time.Now()); err != nil {
		t.Fatal(err)
	}
	hc.Cordon(t, "p5-1", false)
	hpcluster.WaitFor(t, "the uncordon observed", func() (bool, error) {
		if err := c.Flush(ctx); err != nil {
			return false, err
		}
		obs, err := p.db.Observed(ctx, "shared-hp")
		return err == nil && len(obs) == 2 && obs[1].InstanceType == hpcluster.P5.Name && obs[1].Capacity == 2, err
	})
	if inv, err := p.db.Inventory(ctx, "shared-hp"); err != nil || inv[hpcluster.P5.Name] != 3 {
		t.Fatalf("inventory = %v, %v; want the manual p5 × 3", inv, err)
	}
	if err := p.approve(blue); err != nil {
		t.Fatalf("approving blue's p5 × 1 with the manual 3: %v", err)
	}
}
