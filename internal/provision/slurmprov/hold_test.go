package slurmprov

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// holdCluster is a fake of the three commands a hold runs: sacctmgr show
// associations (the account's GrpJobs), sacctmgr modify (GrpJobs=N, -1
// clears) and squeue/scancel over the account's jobs. It records every
// command.
type holdCluster struct {
	grpJobs string            // "" none
	account bool              // the account's association exists
	jobs    map[string]string // job ID -> state
	ran     []string
	fail    string // a command prefix that fails
}

func (h *holdCluster) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	cmd := name + " " + strings.Join(args, " ")
	h.ran = append(h.ran, cmd)
	if h.fail != "" && strings.HasPrefix(cmd, h.fail) {
		return nil, errors.New("slurm: " + cmd + ": exit 1: failed")
	}
	switch {
	case strings.HasPrefix(cmd, "sacctmgr -P show associations"):
		out := "Account|User|GrpJobs\n"
		if h.account {
			out += "red||" + h.grpJobs + "\nred|hp-red-1|\n"
		}
		return []byte(out), nil
	case strings.HasPrefix(cmd, "sacctmgr -i modify account"):
		v := strings.TrimPrefix(args[len(args)-1], "GrpJobs=")
		if v == "-1" {
			v = ""
		}
		h.grpJobs = v
		return nil, nil
	case name == "squeue":
		var out []string
		for id, st := range h.jobs {
			if slices.Contains(DrainStates, st) {
				out = append(out, id)
			}
		}
		slices.Sort(out)
		return []byte(strings.Join(out, "\n") + "\n"), nil
	case name == "scancel":
		state := strings.TrimPrefix(args[1], "--state=")
		for id, st := range h.jobs {
			if st == state {
				h.jobs[id] = "CANCELLED"
			}
		}
		return nil, nil
	}
	return nil, errors.New("unexpected " + cmd)
}

// TestHoldCommandsAreExact: the hold, the release and the drain are these
// commands, word for word.
func TestHoldCommandsAreExact(t *testing.T) {
	p := testPlan("", User{"hp-red-1", "red", "gpu"})
	if got, want := HoldCommand(p, true).String(), "sacctmgr -i modify account where name=red cluster=testbed set GrpJobs=0"; got != want {
		t.Errorf("hold = %q, want %q", got, want)
	}
	if got, want := HoldCommand(p, false).String(), "sacctmgr -i modify account where name=red cluster=testbed set GrpJobs=-1"; got != want {
		t.Errorf("release = %q, want %q", got, want)
	}
	want := [][]string{{"--account=red", "--state=RUNNING"}, {"--account=red", "--state=SUSPENDED"}}
	if got := DrainCommands(p); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("drain = %v, want %v", got, want)
	}
}

// TestSetHoldIsIdempotent: a hold sets GrpJobs=0 once (read, modify, read
// back); run again it only reads; a release clears it once; a hold on a
// missing account fails and writes nothing.
func TestSetHoldIsIdempotent(t *testing.T) {
	ctx := context.Background()
	p := testPlan("", User{"hp-red-1", "red", "gpu"})
	h := &holdCluster{account: true}
	show := "sacctmgr -P show associations where cluster=testbed account=red format=Account,User,GrpJobs"
	ran, err := SetHold(ctx, h, p, true)
	if err != nil || len(ran) != 1 || h.grpJobs != "0" {
		t.Fatalf("hold: %v, %v, GrpJobs %q", ran, err, h.grpJobs)
	}
	if want := []string{show, "sacctmgr -i modify account where name=red cluster=testbed set GrpJobs=0", show}; !slices.Equal(h.ran, want) {
		t.Errorf("hold ran\n%s\nwant\n%s", strings.Join(h.ran, "\n"), strings.Join(want, "\n"))
	}
	h.ran = nil
	if ran, err := SetHold(ctx, h, p, true); err != nil || len(ran) != 0 || !slices.Equal(h.ran, []string{show}) {
		t.Errorf("hold again: %v, %v, ran %v; want one read", ran, err, h.ran)
	}
	h.ran = nil
	if ran, err := SetHold(ctx, h, p, false); err != nil || len(ran) != 1 || h.grpJobs != "" ||
		h.ran[1] != "sacctmgr -i modify account where name=red cluster=testbed set GrpJobs=-1" {
		t.Errorf("release: %v, %v, GrpJobs %q, ran %v", ran, err, h.grpJobs, h.ran)
	}
	h.ran = nil
	if ran, err := SetHold(ctx, h, p, false); err != nil || len(ran) != 0 || len(h.ran) != 1 {
		t.Errorf("release again: %v, %v, ran %v", ran, err, h.ran)
	}
	gone := &holdCluster{}
	if _, err := SetHold(ctx, gone, p, true); err == nil || len(gone.ran) != 1 {
		t.Errorf("hold on a missing account: %v, ran %v; want an error and no write", err, gone.ran)
	}
}

// TestHoldDrift: the limit is compared with the hold, not with the plan
// (which never sets it).
func TestHoldDrift(t *testing.T) {
	p := testPlan("")
	for _, c := range []struct {
		held bool
		have string
		want string
	}{
		{true, "0", ""},
		{false, "", ""},
		{true, "", `account red: GrpJobs is "none", the plan says "0 (the connection is on hold)"`},
		{false, "0", `account red: GrpJobs is "0", the plan says "none (no hold)"`},
		{true, "5", `account red: GrpJobs is "5", the plan says "0 (the connection is on hold)"`},
	} {
		got := ""
		if d := HoldDrift(p, c.held, c.have); d != nil {
			got = d.String()
		}
		if got != c.want {
			t.Errorf("HoldDrift(held %v, %q) = %q, want %q", c.held, c.have, got, c.want)
		}
	}
	// The plan's own comparison never sees the field.
	q, a := p.QoS, p.Account
	if d := Drift(p, State{QoS: &q, Parent: true, Account: &a}); len(d) != 0 {
		t.Errorf("Drift of a held account = %v", d)
	}
}

// TestDrainIsIdempotent: a drain cancels the running and suspended jobs,
// leaves pending ones, and run again finds nothing and runs no scancel.
func TestDrainIsIdempotent(t *testing.T) {
	ctx := context.Background()
	p := testPlan("")
	h := &holdCluster{account: true, jobs: map[string]string{"11": "RUNNING", "12": "PENDING", "13": "SUSPENDED"}}
	jobs, ran, err := Drain(ctx, h, p)
	if err != nil || !slices.Equal(jobs, []string{"11", "13"}) ||
		!slices.Equal(ran, []string{"scancel --account=red --state=RUNNING", "scancel --account=red --state=SUSPENDED"}) {
		t.Fatalf("drain: %v, %v, %v", jobs, ran, err)
	}
	if h.ran[0] != "squeue --noheader --account=red --states=RUNNING,SUSPENDED --format=%i" {
		t.Errorf("the listing = %q", h.ran[0])
	}
	if h.jobs["11"] != "CANCELLED" || h.jobs["13"] != "CANCELLED" || h.jobs["12"] != "PENDING" {
		t.Errorf("jobs after the drain: %v", h.jobs)
	}
	h.ran = nil
	if jobs, ran, err := Drain(ctx, h, p); err != nil || len(jobs) != 0 || len(ran) != 0 || len(h.ran) != 1 {
		t.Errorf("drain again: %v, %v, %v, ran %v; want one listing", jobs, ran, err, h.ran)
	}
}

// TestHeldApplyCommands: for a held team, the command that adds the new
// account sets GrpJobs=0 in the same command (and nothing else changes:
// the other commands are ApplyCommands'); an existing account without the
// limit gets the hold command after the rest; one that has it gets
// nothing more.
func TestHeldApplyCommands(t *testing.T) {
	p := testPlan("b", User{"hp-red-1", "redb", "gpu"})
	plain := ApplyCommands(p, State{Parent: true})
	held := HeldApplyCommands(p, State{Parent: true}, "")
	if len(held) != len(plain) {
		t.Fatalf("held %v, plain %v", commandTexts(held), commandTexts(plain))
	}
	adds := 0
	for i := range held {
		c := held[i]
		if c.Args[0] == "add" && c.Args[1] == "account" && c.Args[2] == "redb" {
			adds++
			if !slices.Equal(c.Args, append(slices.Clone(plain[i].Args), "GrpJobs=0")) {
				t.Errorf("the account's add: %s; want %s GrpJobs=0", c, plain[i])
			}
			continue
		}
		if c.String() != plain[i].String() {
			t.Errorf("command %d: %s, want %s", i, c, plain[i])
		}
	}
	if adds != 1 {
		t.Errorf("%d commands add account redb: %v", adds, commandTexts(held))
	}
	if slices.ContainsFunc(plain, func(c Command) bool { return slices.Contains(c.Args, "GrpJobs=0") }) {
		t.Errorf("ApplyCommands itself sets GrpJobs: %v", commandTexts(plain))
	}

	exists := StateOf(p, p)
	exists.Parent = true
	got := HeldApplyCommands(p, exists, "")
	if len(got) != 1 || got[0].String() != HoldCommand(p, true).String() {
		t.Errorf("existing account without the limit: %v; want the hold command alone", commandTexts(got))
	}
	if got := HeldApplyCommands(p, exists, "0"); len(got) != 0 {
		t.Errorf("existing held account: %v; want nothing", commandTexts(got))
	}
}

// TestMovesAccount: a renamed account or another cluster moves the
// account association; a renamed QoS alone does not.
func TestMovesAccount(t *testing.T) {
	p := testPlan("")
	renamed := testPlan("b")
	elsewhere := p
	elsewhere.Cluster = "other"
	qos := p
	qos.QoS.Name = "gold"
	for _, c := range []struct {
		new  Plan
		want bool
	}{{p, false}, {renamed, true}, {elsewhere, true}, {qos, false}} {
		if got := MovesAccount(p, c.new); got != c.want {
			t.Errorf("MovesAccount(%s@%s → %s@%s) = %v", p.Account.Name, p.Cluster, c.new.Account.Name, c.new.Cluster, got)
		}
	}
}
