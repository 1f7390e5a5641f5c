package slurmprov

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/slurm"
	"github.com/hyperpod-governance/portal/internal/support/testenv"
)

func commandTexts(cmds []Command) []string {
	var out []string
	for _, c := range cmds {
		out = append(out, c.String())
	}
	return out
}

func checkCommands(t *testing.T, what string, got []Command, want []string) {
	t.Helper()
	if g := commandTexts(got); !slices.Equal(g, want) {
		t.Errorf("%s =\n%s\nwant\n%s", what, strings.Join(g, "\n"), strings.Join(want, "\n"))
	}
}

// TestAmendCommandsRenameAccountAndQoS: an amendment renaming both the
// account and the QoS creates the new QoS, account, associations and
// coordinators first; then moves each member's default account, removes
// the old coordinators, the old associations, the old account and the old
// QoS, in that order.
func TestAmendCommandsRenameAccountAndQoS(t *testing.T) {
	old := testPlan("", User{"hp-red-1", "red", "gpu"}, User{"hp-red-2", "red", "gpu"})
	old.Coordinators = []string{"hp-red-1"}
	new := testPlan("2", User{"hp-red-1", "red2", "gpu"}, User{"hp-red-2", "red2", "gpu"})
	new.Coordinators = []string{"hp-red-1"}
	checkCommands(t, "AmendCommands", AmendCommands(old, new), []string{
		"sacctmgr -i add qos red2-qos Priority=100 GrpTRES=gres/gpu=4 PreemptMode=requeue",
		`sacctmgr -i add account red2 Cluster=testbed Parent=hyperpod-portal "Description=team red" Organization=red Fairshare=50 GrpTRES=gres/gpu=4 QOS=red2-qos DefaultQOS=red2-qos`,
		"sacctmgr -i add user hp-red-1 Cluster=testbed Account=red2 Partition=gpu",
		"sacctmgr -i add user hp-red-2 Cluster=testbed Account=red2 Partition=gpu",
		"sacctmgr -i add coordinator account=red2 names=hp-red-1",
		"sacctmgr -i modify user where name=hp-red-1 cluster=testbed set DefaultAccount=red2",
		"sacctmgr -i modify user where name=hp-red-2 cluster=testbed set DefaultAccount=red2",
		"sacctmgr -i delete coordinator account=red names=hp-red-1",
		"sacctmgr -i delete user where name=hp-red-1 cluster=testbed account=red partition=gpu",
		"sacctmgr -i delete user where name=hp-red-2 cluster=testbed account=red partition=gpu",
		"sacctmgr -i delete account where name=red",
		"sacctmgr -i delete qos where name=red-qos",
	})
}

// TestAmendCommandsRenameQoSOnly: renaming only the QoS adds the new one,
// points the account at it, then deletes the old QoS; the account and its
// members stay.
func TestAmendCommandsRenameQoSOnly(t *testing.T) {
	old := testPlan("", User{"hp-red-1", "red", "gpu"})
	new := old
	new.QoS.Name = "red-gold"
	new.Account.QoS, new.Account.DefaultQoS = []string{"red-gold"}, "red-gold"
	checkCommands(t, "AmendCommands", AmendCommands(old, new), []string{
		"sacctmgr -i add qos red-gold Priority=100 GrpTRES=gres/gpu=4 PreemptMode=requeue",
		"sacctmgr -i modify account where name=red cluster=testbed set QOS=red-gold DefaultQOS=red-gold",
		"sacctmgr -i delete qos where name=red-qos",
	})
}

// TestAmendCommandsSameNames: without a rename nothing is retired; a new
// limit and a new coordinator are the only commands.
func TestAmendCommandsSameNames(t *testing.T) {
	old := testPlan("", User{"hp-red-1", "red", "gpu"}, User{"hp-red-2", "red", "gpu"})
	old.Coordinators = []string{"hp-red-1"}
	new := old
	new.QoS.GrpTRES = map[string]int{"gres/gpu": 8}
	new.Coordinators = []string{"hp-red-1", "hp-red-2"}
	checkCommands(t, "AmendCommands", AmendCommands(old, new), []string{
		"sacctmgr -i modify qos where name=red-qos set GrpTRES=gres/gpu=8",
		"sacctmgr -i add coordinator account=red names=hp-red-2",
	})
	if Renamed(old, new) {
		t.Error("Renamed without a rename")
	}
	if c := RetireCommands(old, new, StateOf(old, old), defaultsOf(old)); len(c) != 0 {
		t.Errorf("RetireCommands without a rename: %v", commandTexts(c))
	}
}

// TestRetireCommandsKeepsOtherDefaults: a member whose default account is
// another team's keeps it, and a member the new plan dropped is not given
// the new account as default; the old account on another cluster too is
// only removed from this one, and its coordinators stay (coordinators are
// per account, and the other cluster still uses it).
func TestRetireCommandsKeepsOtherDefaults(t *testing.T) {
	old := testPlan("", User{"hp-red-1", "red", "gpu"}, User{"hp-red-2", "red", "gpu"}, User{"hp-red-3", "red", "gpu"})
	new := testPlan("2", User{"hp-red-1", "red2", "gpu"}, User{"hp-red-2", "red2", "gpu"})
	s := StateOf(old, old)
	s.AccountElsewhere = true
	s.Coordinators = []string{"hp-red-1"}
	checkCommands(t, "RetireCommands", RetireCommands(old, new, s, map[string]string{"hp-red-1": "red", "hp-red-2": "blue", "hp-red-3": "red"}), []string{
		"sacctmgr -i modify user where name=hp-red-1 cluster=testbed set DefaultAccount=red2",
		"sacctmgr -i delete user where name=hp-red-1 cluster=testbed account=red partition=gpu",
		"sacctmgr -i delete user where name=hp-red-2 cluster=testbed account=red partition=gpu",
		"sacctmgr -i delete user where name=hp-red-3 cluster=testbed account=red partition=gpu",
		"sacctmgr -i delete account where name=red cluster=testbed",
		"sacctmgr -i delete qos where name=red-qos",
	})
}

// TestCoordinatorsApplyDriftRevoke: the plan's coordinators are added
// after its members; a missing one is drift that apply adds, an extra one
// is drift that apply removes; revocation removes them first.
func TestCoordinatorsApplyDriftRevoke(t *testing.T) {
	p := testPlan("", User{"hp-red-1", "red", "gpu"}, User{"hp-red-2", "red", "gpu"})
	p.Coordinators = []string{"hp-red-1", "hp-red-2"}
	if c := p.Commands(); c[len(c)-1].String() != "sacctmgr -i add coordinator account=red names=hp-red-1,hp-red-2" {
		t.Errorf("last create command %s", c[len(c)-1])
	}
	s := StateOf(p, p)
	s.Coordinators = []string{"hp-red-2", "hp-red-9"}
	var got []string
	for _, d := range Drift(p, s) {
		got = append(got, d.String())
	}
	if want := []string{"coordinator hp-red-1 of account red is missing", "coordinator hp-red-9 of account red is not in the plan"}; !slices.Equal(got, want) {
		t.Errorf("Drift = %q, want %q", got, want)
	}
	checkCommands(t, "ApplyCommands", ApplyCommands(p, s), []string{
		"sacctmgr -i add coordinator account=red names=hp-red-1",
		"sacctmgr -i delete coordinator account=red names=hp-red-9",
	})
	checkCommands(t, "RevokeCommands", p.RevokeCommands(StateOf(p, p)), []string{
		"sacctmgr -i delete coordinator account=red names=hp-red-1,hp-red-2",
		"sacctmgr -i delete user where name=hp-red-1 cluster=testbed account=red partition=gpu",
		"sacctmgr -i delete user where name=hp-red-2 cluster=testbed account=red partition=gpu",
		"sacctmgr -i delete account where name=red",
		"sacctmgr -i delete qos where name=red-qos",
	})
}

// TestRenameOnTheTestBedSlurm: on the test bed's real Slurm, renaming only
// the QoS (the account points at the new one, the old QoS goes), then
// only the account (members, default accounts and coordinators move, the
// old account goes): after each, Apply then Retire leave no drift of the
// new plan and nothing of the old name, and a second Retire runs nothing.
// It uses the test bed's blue users: the red ones are the other
// accounting tests', which run meanwhile and would move their default
// account.
func TestRenameOnTheTestBedSlurm(t *testing.T) {
	conf := testenv.Require(t, "PORTAL_TEST_SLURM_CONF")
	users := testenv.SlurmUsers(t, "blue")
	r := slurm.Local{Conf: conf}
	ctx := t.Context()
	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1_000_000)
	acct := "red" + suffix
	if len(users) < 2 {
		t.Fatalf("the test bed has %d blue users, want 2", len(users))
	}
	p1 := testPlan(suffix, User{users[0], acct, "gpu"}, User{users[1], acct, "gpu"})
	p1.Coordinators = []string{users[0]}
	p2 := p1
	p2.QoS.Name = acct + "-gold"
	p2.Account.QoS, p2.Account.DefaultQoS = []string{p2.QoS.Name}, p2.QoS.Name
	p3 := testPlan(suffix+"b", User{users[0], acct + "b", "gpu"}, User{users[1], acct + "b", "gpu"})
	p3.QoS, p3.Account.QoS, p3.Account.DefaultQoS = p2.QoS, p2.Account.QoS, p2.Account.DefaultQoS
	p3.Coordinators = []string{users[0], users[1]}
	for _, p := range []Plan{p1, p2, p3} {
		t.Cleanup(func() { Revoke(context.Background(), r, p) })
	}
	if _, err := Apply(ctx, r, p1); err != nil {
		t.Fatal(err)
	}
	gone := func(q ...string) {
		t.Helper()
		rows, err := slurm.Query(ctx, r, "sacctmgr", append([]string{"-P", "show"}, q...)...)
		if err != nil || len(rows) != 0 {
			t.Errorf("sacctmgr show %s: %v, %v; want nothing", strings.Join(q, " "), rows, err)
		}
	}
	for _, step := range []struct{ old, new Plan }{{p1, p2}, {p2, p3}} {
		if _, err := Apply(ctx, r, step.new); err != nil {
			t.Fatalf("apply %s/%s: %v", step.new.Account.Name, step.new.QoS.Name, err)
		}
		ran, err := Retire(ctx, r, step.old, step.new)
		if err != nil {
			t.Fatalf("retire %s/%s: %v (ran %v)", step.old.Account.Name, step.old.QoS.Name, err, commandTexts(ran))
		}
		if want := AmendCommands(step.old, step.new); !slices.Equal(commandTexts(ran), commandTexts(want[len(want)-len(ran):])) {
			t.Errorf("Retire ran %v; want the tail of AmendCommands %v", commandTexts(ran), commandTexts(want))
		}
		s, err := Read(ctx, r, step.new)
		if err != nil {
			t.Fatal(err)
		}
		if d := Drift(step.new, s); len(d) > 0 {
			t.Errorf("after renaming to %s/%s: drift %v", step.new.Account.Name, step.new.QoS.Name, d)
		}
		if step.old.QoS.Name != step.new.QoS.Name {
			gone("qos", "where", "name="+step.old.QoS.Name)
		}
		if step.old.Account.Name != step.new.Account.Name {
			gone("associations", "where", "account="+step.old.Account.Name)
			gone("account", "where", "name="+step.old.Account.Name)
			rows, err := slurm.Query(ctx, r, "sacctmgr", "-P", "show", "user", "where", "name="+users[0]+","+users[1], "format=User,DefaultAccount")
			if err != nil || len(rows) != 2 || rows[0]["Def Acct"] != step.new.Account.Name || rows[1]["Def Acct"] != step.new.Account.Name {
				t.Errorf("default accounts %v, %v; want %s", rows, err, step.new.Account.Name)
			}
		}
		if ran, err := Retire(ctx, r, step.old, step.new); err != nil || len(ran) != 0 {
			t.Errorf("second retire ran %v, %v", commandTexts(ran), err)
		}
	}
}
