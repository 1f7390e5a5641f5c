package store_test

import (
	"errors"
	"testing"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TestBatchAppliesEachCommand: commands recorded in one batch write what
// the store's own methods write (the states, the approval's job, the audit
// chain, and the capacity totals, which the fixture's cleanup checks), and
// a batch that fails writes nothing at all, the commands before the
// failure included.
func TestBatchAppliesEachCommand(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	var ids []int64
	err := f.db.InBatch(ctx, func(b *store.Batch) error {
		for _, team := range []string{"red", "blue"} {
			c := contract(team, "hyperpod-ns-"+team, "")
			now := f.tick()
			eff, err := workflow.Create(f.owner, c, now)
			if err != nil {
				return err
			}
			id, err := b.Create(eff, now)
			if err != nil {
				return err
			}
			ids = append(ids, id)
			now = f.tick()
			if _, err := b.Command(id, false, now, func(s workflow.Conn) (workflow.Effect, error) {
				return workflow.Submit(s, f.owner, workflow.Pin{Version: s.CurrentVersion, Hash: s.CurrentHash}, now)
			}); err != nil {
				return err
			}
			if team == "blue" {
				continue
			}
			now = f.tick()
			jobID, err := b.Command(id, true, now, func(s workflow.Conn) (workflow.Effect, error) {
				in := workflow.ApprovalInput{Version: s.CurrentVersion, Hash: s.CurrentHash, PlanHash: "plan-x"}
				facts := workflow.ApprovalFacts{Contract: *eff.Version, Inventory: map[string]int{"ml.p5.48xlarge": 1000}}
				return workflow.Approve(s, f.admins[0], in, facts, now)
			})
			if err != nil {
				return err
			}
			if jobID == 0 {
				t.Error("the approval in a batch queued no job")
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if s := f.state(ids[0]); s != workflow.StateApproved {
		t.Errorf("red is %s, want approved", s)
	}
	if s := f.state(ids[1]); s != workflow.StateSubmitted {
		t.Errorf("blue is %s, want submitted", s)
	}
	if got := f.auditActions(ids[0]); len(got) != 3 || got[0] != "connection.create" || got[2] != "connection.approve" {
		t.Errorf("red's audit events %v, want create, submit, approve", got)
	}
	f.verifyAudit()

	// A refusal inside a batch rolls the whole batch back.
	before := f.snapshot()
	err = f.db.InBatch(ctx, func(b *store.Batch) error {
		now := f.tick()
		eff, err := workflow.Create(f.owner, contract("green", "hyperpod-ns-green", ""), now)
		if err != nil {
			return err
		}
		if _, err := b.Create(eff, now); err != nil {
			return err
		}
		_, err = b.Command(ids[1], false, now, func(s workflow.Conn) (workflow.Effect, error) {
			return workflow.Submit(s, f.owner, workflow.Pin{Version: s.CurrentVersion, Hash: s.CurrentHash}, now)
		})
		return err
	})
	var te *workflow.TransitionError
	if !errors.As(err, &te) {
		t.Errorf("submitting a submitted request in a batch = %v, want the lifecycle's refusal", err)
	}
	f.assertUnchanged(before, "a failed batch")
}
