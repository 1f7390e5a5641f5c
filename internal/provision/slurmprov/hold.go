package slurmprov

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hyperpod-governance/portal/internal/slurm"
)

// Holds (workflow/hold.go) on a Slurm connection. A hold stops the team's
// new jobs from starting while its running ones finish; a hold-and-drain
// also cancels the running ones; a release restores the plan.
//
// The mechanism is the group job limit of the team's account association,
// GrpJobs=0: "Maximum number of running jobs in aggregate for this
// association and its children. To clear an existing value, set a new
// value of -1" (sacctmgr(1), https://slurm.schedmd.com/sacctmgr.html,
// GrpJobs). The members' associations are the account's children, so no
// job of the account starts; a job submitted under it is accepted and
// stays PENDING with the reason AssocGrpJobsLimit, "The job's association
// has reached the maximum number of allowed jobs in aggregate"
// (https://slurm.schedmd.com/job_reason_codes.html), and starts once the
// limit is cleared. Running jobs go on: "When limits are lowered, running
// jobs will not be canceled to satisfy the new limits, but the new lower
// limits will be enforced" (https://slurm.schedmd.com/resource_limits.html).
// GrpSubmitJobs=0 would instead refuse the submission, and holding each
// job (scontrol hold) would miss the jobs submitted after it.
//
// The plan never sets GrpJobs (Commands, Apply and Drift leave the field
// alone), so a re-apply or an amendment neither clears a hold nor sees it
// as drift; an amendment that moves the account association elsewhere (a
// renamed account) puts the hold on the new one (ApplyKeepingHold); HoldDrift compares the field with the connection's hold
// instead, as the EKS side compares a queue's stopPolicy.
//
// Draining cancels the account's running (and suspended) jobs with scancel
// filters: "-A, --account=account Restrict the scancel operation to jobs
// under this charge account"; "-t, --state=job_state_name ... PENDING,
// RUNNING or SUSPENDED" (scancel(1), https://slurm.schedmd.com/scancel.html).
// Pending jobs are left pending, as the hold keeps them. A filter that
// matches no job cancels nothing, so a drain run again after a crash
// cancels only what still runs.

// HoldCommand sets the team's account's GrpJobs: 0 when held, cleared
// (-1) when not.
func HoldCommand(p Plan, held bool) Command {
	if held {
		return Command{[]string{"modify", "account", "where", "name=" + p.Account.Name, "cluster=" + p.Cluster, "set", "GrpJobs=0"},
			"hold: no job of the team's account starts (GrpJobs=0); running jobs finish"}
	}
	return Command{[]string{"modify", "account", "where", "name=" + p.Account.Name, "cluster=" + p.Cluster, "set", "GrpJobs=-1"},
		"release: the team's account has no job limit again, as the plan says (GrpJobs cleared)"}
}

// ReadHold reads the GrpJobs of the team's account association on the
// plan's cluster ("" when none is set). found is false when the account
// has no association there.
func ReadHold(ctx context.Context, r slurm.Runner, p Plan) (grpJobs string, found bool, err error) {
	rows, err := slurm.Query(ctx, r, "sacctmgr", "-P", "show", "associations", "where", "cluster="+p.Cluster, "account="+p.Account.Name,
		"format=Account,User,GrpJobs")
	if err != nil {
		return "", false, err
	}
	for _, a := range rows {
		if a["Account"] == p.Account.Name && a["User"] == "" {
			return a["GrpJobs"], true, nil
		}
	}
	return "", false, nil
}

// HoldDrift is the difference between the account's GrpJobs (ReadHold)
// and the hold: "0" when held, none when not. Nil when they agree.
func HoldDrift(p Plan, held bool, grpJobs string) *Difference {
	want, label := "", "none (no hold)"
	if held {
		want, label = "0", "0 (the connection is on hold)"
	}
	if grpJobs == want {
		return nil
	}
	have := grpJobs
	if have == "" {
		have = "none"
	}
	return &Difference{Object: "account " + p.Account.Name, Field: "GrpJobs", Want: label, Have: have}
}

// SetHold makes the account's GrpJobs match the hold (HoldCommand) unless
// it does already, and returns the command it ran (none when nothing
// differed): run again, it runs nothing. The account must exist: a hold
// creates nothing.
func SetHold(ctx context.Context, r slurm.Runner, p Plan, held bool) ([]Command, error) {
	have, found, err := ReadHold(ctx, r, p)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("slurmprov: account %s has no association on cluster %s: the hold sets its job limit and creates nothing (re-apply the plan first)", p.Account.Name, p.Cluster)
	}
	if HoldDrift(p, held, have) == nil {
		return nil, nil
	}
	c := HoldCommand(p, held)
	if _, err := r.Run(ctx, "sacctmgr", append([]string{"-i"}, c.Args...)...); err != nil {
		return nil, err
	}
	after, _, err := ReadHold(ctx, r, p)
	if err != nil {
		return []Command{c}, err
	}
	if d := HoldDrift(p, held, after); d != nil {
		return []Command{c}, fmt.Errorf("slurmprov: after %s: %s", c, d)
	}
	return []Command{c}, nil
}

// DrainStates are the job states a drain cancels: the jobs that hold
// resources. Pending jobs stay pending.
var DrainStates = []string{"RUNNING", "SUSPENDED"}

// DrainCommands are the scancel calls (their arguments) that cancel the
// account's jobs in DrainStates, one per state (scancel takes one).
func DrainCommands(p Plan) [][]string {
	var out [][]string
	for _, s := range DrainStates {
		out = append(out, []string{"--account=" + p.Account.Name, "--state=" + s})
	}
	return out
}

// Running lists the IDs of the account's jobs in DrainStates (squeue:
// "-A, --account", "-t, --states", "-h, --noheader", "%i" the job ID;
// https://slurm.schedmd.com/squeue.html).
func Running(ctx context.Context, r slurm.Runner, p Plan) ([]string, error) {
	out, err := r.Run(ctx, "squeue", "--noheader", "--account="+p.Account.Name, "--states="+strings.Join(DrainStates, ","), "--format=%i")
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			ids = append(ids, l)
		}
	}
	return ids, nil
}

// Drain cancels the account's running and suspended jobs: it lists them
// (Running) and, when there are any, runs DrainCommands. It returns the
// jobs it found and the commands it ran, as an operator would type them.
// Run again, it finds nothing and runs nothing.
func Drain(ctx context.Context, r slurm.Runner, p Plan) (jobs, ran []string, err error) {
	if jobs, err = Running(ctx, r, p); err != nil || len(jobs) == 0 {
		return jobs, nil, err
	}
	for _, args := range DrainCommands(p) {
		if _, err := r.Run(ctx, "scancel", args...); err != nil {
			return jobs, ran, err
		}
		ran = append(ran, "scancel "+strings.Join(args, " "))
	}
	return jobs, ran, nil
}

// MovesAccount reports whether an amendment from old to new puts the
// team's account association somewhere else (another account name, or
// another cluster): the new association is added, and the old one's
// limits, GrpJobs among them, stay behind.
func MovesAccount(old, new Plan) bool {
	return old.Account.Name != new.Account.Name || old.Cluster != new.Cluster
}

// HeldApplyCommands are ApplyCommands(p, s) for a team that is held: the
// command that adds p's account also sets GrpJobs=0, so that no job of
// the new account starts before the hold is on it (sacctmgr takes an
// association's limits, GrpJobs among them, when it adds the account:
// sacctmgr(1), "SPECIFICATIONS FOR ACCOUNTS", https://slurm.schedmd.com/sacctmgr.html);
// an account that exists already and whose GrpJobs (have, as ReadHold
// reads it) is not 0 gets HoldCommand after the rest. It is pure.
func HeldApplyCommands(p Plan, s State, have string) []Command {
	cmds := ApplyCommands(p, s)
	if s.Account == nil {
		for i, c := range cmds {
			if len(c.Args) > 2 && c.Args[0] == "add" && c.Args[1] == "account" && c.Args[2] == p.Account.Name {
				c.Args = append(slices.Clone(c.Args), "GrpJobs=0")
				c.Why += "; on hold (GrpJobs=0), as the account it replaces is"
				cmds[i] = c
			}
		}
		return cmds
	}
	if HoldDrift(p, true, have) != nil {
		cmds = append(cmds, HoldCommand(p, true))
	}
	return cmds
}

// ApplyKeepingHold is Apply for an amendment from old to p: when the
// amendment moves the team's account association (MovesAccount) and old's
// account is held (GrpJobs=0, as a hold job leaves it), p's account gets
// the hold too (HeldApplyCommands), and the apply fails unless it has it
// afterwards. Without this, a held team's renamed account would start its
// jobs until an admin applied the hold again.
//
// The hold is read from old's account on the cluster, where the hold jobs
// put it, before anything is written. An amendment resumed after its
// retire step removed the old account finds no hold there and applies p
// as Apply does, which never changes GrpJobs: the new account, added with
// GrpJobs=0 by the first attempt, keeps it.
//
// held says the portal has the team on hold (its hold confirmed): the
// new account is then added held whatever the old one's limit, for a hold
// job queued but not yet run (SlurmHoldSteps then finds it held).
func ApplyKeepingHold(ctx context.Context, r slurm.Runner, p, old Plan, held bool) ([]Command, error) {
	if !MovesAccount(old, p) {
		return Apply(ctx, r, p)
	}
	if !held {
		grp, found, err := ReadHold(ctx, r, old)
		if err != nil {
			return nil, err
		}
		if !found || grp != "0" {
			return Apply(ctx, r, p)
		}
	}
	s, err := Read(ctx, r, p)
	if err != nil {
		return nil, err
	}
	have := ""
	if s.Account != nil {
		if have, _, err = ReadHold(ctx, r, p); err != nil {
			return nil, err
		}
	}
	ran, err := run(ctx, r, HeldApplyCommands(p, s, have))
	if err != nil || len(ran) == 0 {
		return ran, err
	}
	after, err := Read(ctx, r, p)
	if err != nil {
		return ran, err
	}
	if left := Drift(p, after); len(left) > 0 {
		return ran, fmt.Errorf("slurmprov: after applying, the cluster still differs from the plan: %s", left[0])
	}
	if have, _, err = ReadHold(ctx, r, p); err != nil {
		return ran, err
	}
	if d := HoldDrift(p, true, have); d != nil {
		return ran, fmt.Errorf("slurmprov: after applying, the hold of account %s did not move to %s: %s", old.Account.Name, p.Account.Name, d)
	}
	return ran, nil
}
