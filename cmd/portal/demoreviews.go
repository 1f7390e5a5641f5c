package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// demoReviewTeams are the demo connections `make run` (--dev
// --demo-reviews) reviews: teams of their own, outside the demo users'
// teams, so that red's and blue's namespaces, roles and capacity stay free
// for the demo users' own requests. The first review is due today, the
// second overdue.
var demoReviewTeams = []struct {
	team, purpose string
	dueInDays     int
}{
	{"demo-green", "Demo data: evaluate retrieval models for the support assistant.", 0},
	{"demo-amber", "Demo data: nightly batch inference for the pricing forecasts.", -9},
}

// seedDemoReviews gives a development database with no connection yet two
// active demo connections, each with an open review labelled demo data
// (reviews.demo): one due today, one overdue, so that the reviewer's
// pages show the whole flow without a cluster. The connections go through
// the store's real commands (filed, submitted, approved, provisioned as a
// dry run). A database with any connection is left as it is, so restarts
// add nothing. It returns how many reviews it opened. It runs before the
// provisioner starts, so the jobs it claims are its own.
func seedDemoReviews(ctx context.Context, db *store.DB, cluster provision.ClusterSettings, now time.Time) (int, error) {
	existing, _, err := db.ListConnections(ctx, store.ListFilter{}, 0, 1)
	if err != nil || len(existing) > 0 {
		return 0, err
	}
	requester, err := db.RecordLogin(ctx, "dev-seed", "demo-requester", "demo.requester@example.test", "Demo requester (seed)", nil, now)
	if err != nil {
		return 0, err
	}
	approver, err := db.RecordLogin(ctx, "dev-seed", "demo-approver", "demo.approver@example.test", "Demo approver (seed)", nil, now)
	if err != nil {
		return 0, err
	}
	req := workflow.Actor{ID: requester.ID, Email: requester.Email}
	adm := workflow.Actor{ID: approver.ID, Email: approver.Email}
	opened := 0
	for _, d := range demoReviewTeams {
		c := workflow.ExampleContract()
		c.Team, c.BusinessPurpose = d.team, d.purpose
		c.BusinessOwner, c.OperationsOwner, c.CostOwner, c.ExceptionOwner = "demo.owner@example.test", "demo.ops@example.test", "demo.owner@example.test", "demo.owner@example.test"
		c.Namespaces = []string{cluster.NamespacePrefix + d.team}
		c.ProjectRoleARN = "arn:aws:iam::111122223333:role/" + d.team + "-project"
		c.AccessRoleARN = "arn:aws:iam::111122223333:role/" + d.team + "-access"
		c.WorkloadRoleARN = "arn:aws:iam::111122223333:role/" + d.team + "-workload"
		c.Scheduling.Guaranteed = []workflow.Capacity{{InstanceType: "ml.p5.48xlarge", Count: 1}}
		for i := range c.Signals {
			c.Signals[i].Owner = "demo.ops@example.test"
		}
		conn, err := db.CreateConnection(ctx, c, req, now)
		if err != nil {
			return opened, fmt.Errorf("demo connection %s: %w", d.team, err)
		}
		v, err := db.Version(ctx, conn.ID, 1)
		if err != nil {
			return opened, err
		}
		if _, err := db.Transition(ctx, conn.ID, workflow.EventSubmit, req, "", store.Expect{Version: 1, Hash: v.Hash}, now); err != nil {
			return opened, fmt.Errorf("demo connection %s: submit: %w", d.team, err)
		}
		plan, err := provision.BuildPlan(conn.ID, 1, v.Hash, v.Contract, cluster)
		if err != nil {
			return opened, fmt.Errorf("demo connection %s: plan: %w", d.team, err)
		}
		if _, _, err := db.Approve(ctx, conn.ID, adm, store.Expect{Version: 1, Hash: v.Hash, PlanHash: plan.Hash()}, "Demo data: approved by the seed.", workflow.ClusterFacts{}, now); err != nil {
			return opened, fmt.Errorf("demo connection %s: approve: %w", d.team, err)
		}
		if err := runDemoJob(ctx, db, conn.ID, now); err != nil {
			return opened, fmt.Errorf("demo connection %s: %w", d.team, err)
		}
		due := now.UTC().AddDate(0, 0, d.dueInDays).Format(workflow.DateLayout)
		ev, err := demoEvidence(v, adm.Email, d.dueInDays < 0, now)
		if err != nil {
			return opened, err
		}
		if _, err := db.OpenReview(ctx, conn.ID, workflow.OpenReviewInput{Trigger: workflow.TriggerScheduled,
			Detail: "Demo data: the contract's review cadence came due", DueOn: due, Evidence: ev, Demo: true}, now); err != nil {
			return opened, fmt.Errorf("demo review %s: %w", d.team, err)
		}
		opened++
	}
	return opened, nil
}

// runDemoJob completes connection id's provisioning job with one step
// that applies nothing. It is not recorded as a dry run (a dry run leaves
// the connection approved) but names no applied plan either, so that a
// later dry-run revocation of the demo connection in make run can end in
// revoked (store.CompleteJob: nothing was ever applied to a cluster).
func runDemoJob(ctx context.Context, db *store.DB, id int64, now time.Time) error {
	const owner = "dev-seed"
	j, ok, err := db.ClaimJob(ctx, owner, now, time.Minute)
	if err != nil {
		return err
	}
	if !ok || j.ConnectionID != id {
		return fmt.Errorf("the provisioning job of demo connection %d is not the next job (got %+v)", id, j)
	}
	steps := []string{"demo data: nothing applied"}
	if err := db.StartJob(ctx, j.ID, owner, "", steps, false, now); err != nil {
		return err
	}
	if err := db.StepStarted(ctx, j.ID, owner, 0, steps[0], now); err != nil {
		return err
	}
	if err := db.StepFinished(ctx, j.ID, owner, 0, steps[0], "configured", "demo data", now); err != nil {
		return err
	}
	return db.CompleteJob(ctx, j.ID, owner, now)
}

// demoEvidence is made-up evidence in the frozen evidence's shape
// (workflow.Evidence); what a demo cannot have is named as a gap. The
// overdue one also shows a signal and usage figures.
func demoEvidence(v store.Version, approver string, busy bool, now time.Time) ([]byte, error) {
	ev := workflow.Evidence{
		CollectedAt: now,
		Contract:    workflow.EvidenceContract{Version: v.Version, Hash: v.Hash, ApprovedAt: now, Contract: v.Contract},
		Changes:     []workflow.EvidenceChange{{Version: v.Version, Hash: v.Hash, ApprovedAt: now, ApprovedBy: approver, Fields: []string{"first approval"}}},
		Owners: []workflow.EvidenceOwner{
			{Role: "business", Email: v.Contract.BusinessOwner, InOwnersGroup: "unknown"},
			{Role: "operations", Email: v.Contract.OperationsOwner, InOwnersGroup: "unknown"},
		},
		Signals: []workflow.EvidenceSignal{},
		Gaps: []string{
			"drift: demo data, no cluster to compare with (make run has no --kubeconfig)",
			"owners' group membership: demo data, the demo owners never sign in",
		},
	}
	if busy {
		ev.Usage = &workflow.EvidenceUsage{
			Last30:       workflow.EvidenceWindow{Days: 30, GuaranteedGPUHours: 5760, UsedGPUHours: 1210.5, BorrowedGPUHours: 0},
			Last90:       workflow.EvidenceWindow{Days: 90, GuaranteedGPUHours: 17280, UsedGPUHours: 6433, BorrowedGPUHours: 120},
			LastWorkload: now.Add(-11 * 24 * time.Hour),
		}
		ev.Signals = append(ev.Signals, workflow.EvidenceSignal{Signal: "Accelerator utilization", FiredAt: now.Add(-2 * 24 * time.Hour),
			Detail: "Demo data: below 40% for 7 days"})
		ev.Gaps = append(ev.Gaps, "cost: demo data, figures are made up and no rate card prices them")
	} else {
		ev.Gaps = append(ev.Gaps, "usage: demo data, this demo team has no usage")
	}
	return json.Marshal(ev)
}
