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

func testPlan(suffix string, users ...User) Plan {
	acct := "red" + suffix
	return Plan{
		Cluster: "testbed",
		Parent:  Account{Name: "hyperpod-portal", Description: "teams of the HyperPod portal", Organization: "portal"},
		QoS:     QoS{Name: acct + "-qos", Priority: 100, GrpTRES: map[string]int{"gres/gpu": 4}, PreemptMode: "requeue"},
		Account: Account{Name: acct, Parent: "hyperpod-portal", Description: "team red", Organization: "red", Fairshare: 50,
			GrpTRES: map[string]int{"gres/gpu": 4}, QoS: []string{acct + "-qos"}, DefaultQoS: acct + "-qos"},
		Users: users,
	}
}

// TestCommands: the preview lists the QoS first, then the parent and the
// team's account, then each member, with the plan's values.
func TestCommands(t *testing.T) {
	p := testPlan("", User{"hp-red-1", "red", "gpu"})
	var got []string
	for _, c := range p.Commands() {
		got = append(got, c.String())
	}
	want := []string{
		"sacctmgr -i add qos red-qos Priority=100 GrpTRES=gres/gpu=4 PreemptMode=requeue",
		`sacctmgr -i add account hyperpod-portal Cluster=testbed "Description=teams of the HyperPod portal" Organization=portal`,
		`sacctmgr -i add account red Cluster=testbed Parent=hyperpod-portal "Description=team red" Organization=red Fairshare=50 GrpTRES=gres/gpu=4 QOS=red-qos DefaultQOS=red-qos`,
		"sacctmgr -i add user hp-red-1 Cluster=testbed Account=red Partition=gpu",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Commands =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestDriftNamesEachDifference(t *testing.T) {
	p := testPlan("", User{"hp-red-1", "red", "gpu"})
	q, a := p.QoS, p.Account
	q.GrpTRES = map[string]int{"gres/gpu": 8}
	a.Fairshare = 10
	s := State{QoS: &q, Parent: true, Account: &a, Users: []User{{"hp-red-2", "red", "gpu"}}}
	var got []string
	for _, d := range Drift(p, s) {
		got = append(got, d.String())
	}
	want := []string{
		`qos red-qos: GrpTRES is "gres/gpu=8", the plan says "gres/gpu=4"`,
		`account red: Fairshare is "10", the plan says "50"`,
		"user hp-red-1 (account red, partition gpu) is missing",
		"user hp-red-2 (account red, partition gpu) is not in the plan",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Drift =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if d := Drift(p, State{}); len(d) != 4 {
		t.Errorf("nothing there: %v", d)
	}
}

// TestPlanOnTheTestBedSlurm: on the test bed's real Slurm, applying the
// plan leaves exactly its QoS, account and associations (read back with
// sacctmgr show -P); a second apply runs nothing; a limit edited by hand
// is drift that the next apply repairs; a member dropped from the plan
// loses the association; revocation leaves nothing of the team, and a
// second revocation runs nothing.
func TestPlanOnTheTestBedSlurm(t *testing.T) {
	conf := testenv.Require(t, "PORTAL_TEST_SLURM_CONF")
	users := testenv.SlurmUsers(t, "red")
	r := slurm.Local{Conf: conf}
	ctx := t.Context()
	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1_000_000)
	acct := "red" + suffix
	p := testPlan(suffix, User{users[0], acct, "gpu"}, User{users[1], acct, "gpu"})
	t.Cleanup(func() { Revoke(context.Background(), r, p) })

	ran, err := Apply(ctx, r, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(ran) < 4 { // the parent may exist from another test
		t.Errorf("first apply ran %d commands: %v", len(ran), ran)
	}
	s, err := Read(ctx, r, p)
	if err != nil {
		t.Fatal(err)
	}
	if d := Drift(p, s); len(d) > 0 {
		t.Fatalf("after apply: %v", d)
	}
	if s.QoS.GrpTRES["gres/gpu"] != 4 || s.Account.Fairshare != 50 || s.Account.Parent != "hyperpod-portal" || len(s.Users) != 2 {
		t.Errorf("read back: qos %+v account %+v users %v", s.QoS, s.Account, s.Users)
	}
	if ran, err := Apply(ctx, r, p); err != nil || len(ran) != 0 {
		t.Errorf("second apply ran %v, %v; want nothing", ran, err)
	}

	// A hand edit: the account's GPU limit raised, the QoS's priority changed.
	for _, args := range [][]string{
		{"-i", "modify", "account", "where", "name=" + acct, "set", "GrpTRES=gres/gpu=16"},
		{"-i", "modify", "qos", "where", "name=" + p.QoS.Name, "set", "Priority=1"},
	} {
		if _, err := r.Run(ctx, "sacctmgr", args...); err != nil {
			t.Fatal(err)
		}
	}
	s, err = Read(ctx, r, p)
	if err != nil {
		t.Fatal(err)
	}
	d := Drift(p, s)
	if len(d) != 2 || d[0].Field != "Priority" || d[0].Have != "1" || d[1].Field != "GrpTRES" || d[1].Have != "gres/gpu=16" {
		t.Errorf("drift after the hand edit = %v", d)
	}
	if ran, err := Apply(ctx, r, p); err != nil || len(ran) != 2 {
		t.Errorf("repair ran %v, %v; want the QoS and the account modified", ran, err)
	}

	// An amendment that drops a member.
	p2 := p
	p2.Users = p.Users[:1]
	if ran, err := Apply(ctx, r, p2); err != nil || len(ran) != 1 || ran[0].Args[0] != "delete" {
		t.Errorf("dropping a member ran %v, %v", ran, err)
	}

	ran, err = Revoke(ctx, r, p)
	if err != nil || len(ran) != 3 {
		t.Fatalf("revoke ran %v, %v; want the member, the account, the QoS", ran, err)
	}
	rows, err := slurm.Query(ctx, r, "sacctmgr", "-P", "show", "associations", "where", "account="+acct)
	if err != nil || len(rows) != 0 {
		t.Errorf("after revoke, associations of %s: %v, %v", acct, rows, err)
	}
	qos, err := slurm.Query(ctx, r, "sacctmgr", "-P", "show", "qos", "where", "name="+p.QoS.Name)
	if err != nil || len(qos) != 0 {
		t.Errorf("after revoke, qos %s: %v, %v", p.QoS.Name, qos, err)
	}
	if s, err := Read(ctx, r, p); err != nil || !s.Parent {
		t.Errorf("the parent account must stay: %+v, %v", s, err)
	}
	if ran, err := Revoke(ctx, r, p); err != nil || len(ran) != 0 {
		t.Errorf("second revoke ran %v, %v", ran, err)
	}
}

// TestDriftAccountTextIgnoresCase: sacctmgr keeps an account's description
// and organization lower-cased, so they compare without case; a real
// difference asks for the plan's own text back.
func TestDriftAccountTextIgnoresCase(t *testing.T) {
	p := testPlan("")
	p.Account.Description = "Team Red"
	q, a := p.QoS, p.Account
	a.Description, a.Organization = "team red", "RED"
	if d := Drift(p, State{QoS: &q, Parent: true, Account: &a}); len(d) != 0 {
		t.Errorf("case only: %v", d)
	}
	a.Description = "someone else's"
	d := Drift(p, State{QoS: &q, Parent: true, Account: &a})
	if len(d) != 1 || d[0].Field != "Description" || d[0].Want != "Team Red" {
		t.Fatalf("Drift = %v", d)
	}
	if set := settings(d, "account red", []string{"Description", "Organization"}, nil); !slices.Equal(set, []string{"Description=Team Red"}) {
		t.Errorf("restore = %v", set)
	}
}

// TestRevokeCommandsAccountWholeUnlessElsewhere: revocation deletes the
// team's account whole (a cluster-scoped delete leaves the account
// behind), a leftover account too, but only this cluster's association
// when another cluster still uses the account.
func TestRevokeCommandsAccountWholeUnlessElsewhere(t *testing.T) {
	p := testPlan("")
	a, q := p.Account, p.QoS
	str := func(cmds []Command) []string {
		var out []string
		for _, c := range cmds {
			out = append(out, c.String())
		}
		return out
	}
	for name, tc := range map[string]struct {
		s    State
		want []string
	}{
		"whole": {State{Account: &a, AccountRecord: true, QoS: &q},
			[]string{"sacctmgr -i delete account where name=red", "sacctmgr -i delete qos where name=red-qos"}},
		"elsewhere": {State{Account: &a, AccountRecord: true, AccountElsewhere: true},
			[]string{"sacctmgr -i delete account where name=red cluster=testbed"}},
		"leftover": {State{AccountRecord: true}, []string{"sacctmgr -i delete account where name=red"}},
		"gone":     {State{}, nil},
	} {
		if got := str(p.RevokeCommands(tc.s)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}

// failingRunner answers every sacctmgr command with err, recording it.
type failingRunner struct {
	err error
	ran [][]string
}

func (f *failingRunner) Run(_ context.Context, _ string, args ...string) ([]byte, error) {
	f.ran = append(f.ran, args)
	return nil, f.err
}

// TestRunGoesOnWhenADeleteFindsNothing: a delete whose object someone else
// removed meanwhile (sacctmgr's "Nothing deleted", exit 1) does not stop a
// revocation; any other failure, and a "Nothing deleted" of another kind
// of command, does.
func TestRunGoesOnWhenADeleteFindsNothing(t *testing.T) {
	p := testPlan("", User{"hp-red-1", "red", "gpu"})
	s := State{Users: p.Users, AccountRecord: true, Account: &p.Account, QoS: &p.QoS}
	cmds := p.RevokeCommands(s)
	gone := &failingRunner{err: fmt.Errorf("slurm: sacctmgr -i delete: exit 1: Nothing deleted")}
	ran, err := run(context.Background(), gone, cmds)
	if err != nil || len(ran) != len(cmds) || len(gone.ran) != len(cmds) {
		t.Fatalf("revocation over deletes that find nothing: ran %d of %d, err %v", len(ran), len(cmds), err)
	}
	other := &failingRunner{err: fmt.Errorf("slurm: sacctmgr -i delete: exit 1: Problem talking to the database")}
	if ran, err := run(context.Background(), other, cmds); err == nil || len(ran) != 0 || len(other.ran) != 1 {
		t.Fatalf("a delete that failed otherwise: ran %d, err %v; want it to stop at the first", len(ran), err)
	}
	modify := []Command{{[]string{"modify", "qos", "where", "name=x", "set", "Priority=1"}, "restore"}}
	if _, err := run(context.Background(), gone, modify); err == nil {
		t.Fatal(`a modify that printed "Nothing deleted" passed as done`)
	}
}
