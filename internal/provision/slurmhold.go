package provision

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hyperpod-governance/portal/internal/provision/slurmprov"
	"github.com/hyperpod-governance/portal/internal/slurm"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Holds on a Slurm connection (slurmprov/hold.go has the mechanism and its
// sources). The hold's stopPolicy (workflow.Hold.StopPolicy) maps to:
//
//   - Hold: the team's account gets GrpJobs=0, so its new jobs stay
//     pending (reason AssocGrpJobsLimit) and running ones finish;
//   - HoldAndDrain: the same, then its running and suspended jobs are
//     cancelled (scancel --account --state);
//   - None: GrpJobs is cleared, the plan's limits alone again.
//
// Each step reads before it writes, so a hold job resumed after a crash
// runs each step once more and changes only what is not yet done.

// The Slurm hold actions.
const (
	// ActionSlurmHold sets (or, for a release, clears) the job limit of
	// the team's account: slurmprov.SetHold.
	ActionSlurmHold StepAction = "slurm-hold"
	// ActionSlurmDrain cancels the running jobs of the team's account:
	// slurmprov.Drain.
	ActionSlurmDrain StepAction = "slurm-drain"
)

// SlurmHoldSteps are the steps of a hold job on Slurm plans (the job's
// version's, then those of an amendment that moves the team's account:
// Worker.slurmHoldPlans) for the stopPolicy policy: each account's job
// limit, then, for HoldAndDrain, each account's drain (after the limits,
// so that nothing starts once the running jobs are cancelled). With more
// than one plan, an account not on the cluster is passed over
// (Step.SlurmMayBeAbsent): the amendment has not added it yet, and adds it
// held (slurmprov.ApplyKeepingHold), or has retired it.
func SlurmHoldSteps(plans []*slurmprov.Plan, policy string) []Step {
	var steps []Step
	absent := len(plans) > 1
	for _, p := range plans {
		steps = append(steps, Step{Action: ActionSlurmHold, Slurm: p, Hold: policy, SlurmMayBeAbsent: absent, Detail: SlurmHoldWording(policy, p.Account.Name)})
	}
	if policy == workflow.StopHoldAndDrain {
		for _, p := range plans {
			steps = append(steps, Step{Action: ActionSlurmDrain, Slurm: p, Hold: policy, SlurmMayBeAbsent: absent,
				Detail: "cancel the running and suspended jobs of account " + p.Account.Name + "; pending jobs stay pending"})
		}
	}
	return steps
}

// ConnectionFacts are what a Slurm hold or amendment job reads of its
// connection when it starts (Worker.Connection).
type ConnectionFacts struct {
	Hold workflow.Hold
	// ApprovedVersion is the version in effect; CurrentVersion, with
	// Amendment approved (its job applying it) or failed (its job stopped
	// part way), the change's.
	ApprovedVersion, CurrentVersion int
	Amendment                       workflow.Amendment
}

// LiveVersions are the versions whose Slurm accounts may be on the
// cluster: the approved one, and an approved change's while its job
// applies it or after it failed part way (its account may be added).
func (c ConnectionFacts) LiveVersions() []int {
	vs := []int{c.ApprovedVersion}
	if (c.Amendment == workflow.AmendApproved || c.Amendment == workflow.AmendFailed) && c.CurrentVersion != c.ApprovedVersion {
		vs = append(vs, c.CurrentVersion)
	}
	return vs
}

// slurmHoldPlans are the plans whose accounts a hold job sets: its own
// version's (p) and, read as the job starts, those of the connection's
// live versions (LiveVersions) whose account is another. A hold queued
// before an amendment that renames the account, and run after it (a retry,
// another worker), thus holds the renamed account, not only the one the
// amendment retires.
func (w *Worker) slurmHoldPlans(ctx context.Context, job workflow.Job, p *slurmprov.Plan) ([]*slurmprov.Plan, error) {
	plans := []*slurmprov.Plan{p}
	if w.Connection == nil {
		return plans, nil
	}
	facts, err := w.Connection(ctx, job.ConnectionID)
	if err != nil {
		return nil, fmt.Errorf("provision: hold job %d: read its connection: %w", job.ID, err)
	}
	for _, v := range facts.LiveVersions() {
		if v == job.Version || v <= 0 {
			continue
		}
		other, err := w.Plans(ctx, job.ConnectionID, v)
		if err != nil {
			return nil, fmt.Errorf("provision: hold job %d: the plan of version %d: %w", job.ID, v, err)
		}
		if other.Slurm != nil && !slices.ContainsFunc(plans, func(q *slurmprov.Plan) bool { return !slurmprov.MovesAccount(*q, *other.Slurm) }) {
			plans = append(plans, other.Slurm)
		}
	}
	return plans, nil
}

// SlurmHoldWording is what a hold with stopPolicy policy does to a Slurm
// connection's account, for the step's detail and the connection page.
func SlurmHoldWording(policy, account string) string {
	switch policy {
	case workflow.StopHold:
		return "GrpJobs=0 on account " + account + ": its new jobs stay pending (reason AssocGrpJobsLimit); running jobs finish"
	case workflow.StopHoldAndDrain:
		return "GrpJobs=0 on account " + account + ", then scancel of its running jobs: new jobs stay pending (reason AssocGrpJobsLimit)"
	}
	return "GrpJobs cleared on account " + account + ": its jobs start again under the plan's limits"
}

func slurmHoldStepName(s Step) string {
	if s.Action == ActionSlurmDrain {
		return "scancel: the running jobs of account " + s.Slurm.Account.Name + " on " + s.Slurm.Cluster
	}
	if s.Hold == workflow.StopNone {
		return "sacctmgr: clear GrpJobs of account " + s.Slurm.Account.Name + " on " + s.Slurm.Cluster + " (release)"
	}
	return "sacctmgr: GrpJobs=0 on account " + s.Slurm.Account.Name + " on " + s.Slurm.Cluster + " (" + s.Hold + ")"
}

// runSlurmHold runs an ActionSlurmHold or ActionSlurmDrain step through the
// worker's Slurm transport; its detail names the commands it ran.
func (w *Worker) runSlurmHold(ctx context.Context, st Step) (Outcome, string, error) {
	if w.Slurm == nil {
		return Failed, "", permanent(errors.New("provision: the portal has no Slurm transport configured (PORTAL_SLURM_CONF, docs/configuration.md): a Slurm connection cannot be held"))
	}
	if st.SlurmMayBeAbsent {
		if _, found, err := slurmprov.ReadHold(ctx, w.Slurm, *st.Slurm); err != nil {
			return Failed, "", err
		} else if !found {
			return Unchanged, "account " + st.Slurm.Account.Name + " is not on cluster " + st.Slurm.Cluster + ": the amendment that renames it has not added it yet (it adds it held) or has retired it", nil
		}
	}
	if st.Action == ActionSlurmDrain {
		jobs, ran, err := slurmprov.Drain(ctx, w.Slurm, *st.Slurm)
		if err != nil {
			return Failed, "", fmt.Errorf("%w (jobs: %s; ran: %s)", err, orNone(strings.Join(jobs, ", ")), orNone(strings.Join(ran, "; ")))
		}
		if len(jobs) == 0 {
			return Unchanged, "no running or suspended job of account " + st.Slurm.Account.Name, nil
		}
		return Deleted, "cancelled jobs " + strings.Join(jobs, ", ") + ": " + strings.Join(ran, "; "), nil
	}
	ran, err := slurmprov.SetHold(ctx, w.Slurm, *st.Slurm, st.Hold != workflow.StopNone)
	if err != nil {
		return Failed, "", err
	}
	if len(ran) == 0 && st.Hold == workflow.StopNone {
		return Unchanged, "account " + st.Slurm.Account.Name + " already has no job limit (GrpJobs)", nil
	}
	if len(ran) == 0 {
		return Unchanged, "account " + st.Slurm.Account.Name + " already has GrpJobs=0", nil
	}
	return Configured, ran[0].String(), nil
}

// SlurmHoldDrift compares the job limit of a Slurm plan's account with the
// connection's hold (its stopPolicy; "" is not compared: a hold job is
// queued or running). The plan never sets the limit, so only this notices
// a hold lifted, or a limit set, by hand.
func SlurmHoldDrift(ctx context.Context, r slurm.Runner, p *slurmprov.Plan, policy string) ([]workflow.DriftItem, error) {
	if policy == "" || r == nil {
		return nil, nil
	}
	have, found, err := slurmprov.ReadHold(ctx, r, *p)
	if err != nil || !found {
		return nil, err // a missing account is SlurmDrift's
	}
	d := slurmprov.HoldDrift(*p, policy != workflow.StopNone, have)
	if d == nil {
		return nil, nil
	}
	return []workflow.DriftItem{{Kind: "Slurm account", Ref: p.Account.Name, What: "changed", Fields: []string{"GrpJobs"},
		Detail: d.String() + "; Try again on the hold panel applies the hold again"}}, nil
}

// SlurmHoldCommand is one command of a hold job, as an operator would type
// it, and what it is for.
type SlurmHoldCommand struct {
	Command, Why string
}

// SlurmHoldCommands are the commands a hold job with stopPolicy policy runs
// on p's cluster where the cluster is not yet so (the connection page's
// preview): the job limit, and for HoldAndDrain the scancel calls.
func SlurmHoldCommands(p *slurmprov.Plan, policy string) []SlurmHoldCommand {
	c := slurmprov.HoldCommand(*p, policy != workflow.StopNone)
	out := []SlurmHoldCommand{{c.String(), c.Why}}
	if policy == workflow.StopHoldAndDrain {
		for _, args := range slurmprov.DrainCommands(*p) {
			out = append(out, SlurmHoldCommand{"scancel " + strings.Join(args, " "), "drain: cancel the account's " + strings.ToLower(strings.TrimPrefix(args[1], "--state=")) + " jobs"})
		}
	}
	return out
}
