package provision_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/provision/slurmprov"
	"github.com/hyperpod-governance/portal/internal/slurm"
	"github.com/hyperpod-governance/portal/internal/support/benchtable"
	"github.com/hyperpod-governance/portal/internal/support/testenv"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

var slurmTeams = flag.Int("slurm-teams", 100, "number of Slurm teams BenchmarkSlurmProvisionTenants provisions per iteration")

// BenchmarkSlurmProvisionTenants provisions -slurm-teams Slurm teams on the
// test bed's Slurm through the worker, from their approval (the jobs
// queued) to every connection active, and in the same iteration runs a
// bare shell script (sh, one "sacctmgr -i ..." line per command, nothing
// of the portal's) that issues the very sacctmgr commands the portal's
// jobs issue (slurmprov.ApplyCommands on a database holding the parent
// account and none of the team's objects: the QoS, the account, one
// association per member, the coordinators) for as many teams under fresh
// names, one command at a time as the worker runs one job at a time: the
// floor the portal's time is held to (docs/performance.md: at most 2×).
// The two take turns, ten teams at a time, so that both see the same load.
// The portal's jobs also read the accounting back before and after
// writing (slurmprov.Apply) and record each step in the store; the
// benchmark reports its sacctmgr calls per team beside the floor's.
//
// Every account, QoS and user the run made is deleted at the end (a few
// bulk sacctmgr deletes), so the test bed's accounting database does not
// grow across runs. SQLite only: the time is Slurm's (slurmdbd, MariaDB),
// the store's part is the same as BenchmarkProvisionTenants'. Run it with
// -benchtime=1x:
//
//	go test -run '^$' -bench SlurmProvisionTenants -benchtime=1x ./internal/provision/
//
// The row goes to the `make bench` table (internal/support/benchtable).
func BenchmarkSlurmProvisionTenants(b *testing.B) {
	conf, partition := os.Getenv("PORTAL_TEST_SLURM_CONF"), os.Getenv("PORTAL_TEST_SLURM_PARTITION")
	if conf == "" || partition == "" || os.Getenv("PORTAL_TEST_KUBECONFIG") == "" {
		if os.Getenv("PORTAL_TESTBED_REQUIRED") == "1" {
			b.Fatal("the test bed's Slurm is not there although PORTAL_TESTBED_REQUIRED=1 (PORTAL_TEST_SLURM_CONF, PORTAL_TEST_SLURM_PARTITION, PORTAL_TEST_KUBECONFIG)")
		}
		b.Skip("needs the test bed's Slurm (PORTAL_TEST_SLURM_CONF unset): run `make bench`, which starts the test bed and runs this benchmark")
	}
	bed := newWBedOn(b, "")
	s := bed.settings
	s.Slurm = provision.SlurmSettings{Cluster: testenv.SlurmClusterName(b, conf)}
	bed.useSettings(s)
	bed.edit = func(c *workflow.Contract) { slurmBenchContract(c, partition) }
	runner := &countingRunner{Runner: slurm.Local{Conf: conf}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	n := *slurmTeams
	bed.setInventory(ctx, n*(b.N+1))
	var made []slurmprov.Plan
	b.Cleanup(func() { removeSlurmTeams(b, runner.Runner, made) })

	var provisionTime, floorTime time.Duration
	var provisionCalls, floorCalls int64
	b.ResetTimer()
	for iter := range b.N {
		b.StopTimer()
		run := wintRandom(b)
		tenants := make([]wintTenant, n)
		for i := range tenants {
			tenants[i] = bed.approve(ctx, fmt.Sprintf("sb%s-%d-%03d", run, iter, i), bed.plans)
			made = append(made, *tenants[i].plan.Slurm)
		}
		fresh := make([]slurmprov.Plan, n)
		for i := range fresh {
			c := wintContract(fmt.Sprintf("sf%s-%d-%03d", run, iter, i))
			slurmBenchContract(&c, partition)
			p, err := provision.BuildPlan(int64(1_000_000+i), 1, c.Hash(), c, bed.settings)
			if err != nil || p.Slurm == nil {
				b.Fatalf("the floor's plan of %s: %v (Slurm %v)", c.Team, err, p.Slurm)
			}
			fresh[i] = *p.Slurm
			made = append(made, *p.Slurm)
		}
		ensureSlurmParent(ctx, b, runner.Runner, fresh[0])
		w := bed.worker("bench")
		w.Slurm = runner
		dir := b.TempDir()
		b.StartTimer()

		for lo := 0; lo < n; lo += provisionBatch {
			hi := min(lo+provisionBatch, n)
			d, calls := slurmFloor(ctx, b, conf, filepath.Join(dir, fmt.Sprintf("floor-%d.sh", lo)), fresh[lo:hi])
			floorTime += d
			floorCalls += calls
			before := runner.calls.Load()
			start := time.Now()
			for range hi - lo {
				bed.runOnce(ctx, w)
			}
			provisionTime += time.Since(start)
			provisionCalls += runner.calls.Load() - before
		}

		b.StopTimer()
		for _, tn := range tenants {
			if st := bed.state(ctx, tn.conn.ID); st != workflow.StateActive {
				b.Fatalf("%s is %s after provisioning, want active (job %+v)", tn.team, st, bed.job(ctx, tn.job.ID))
			}
		}
		assertSlurmTeams(ctx, b, runner.Runner, fresh)
		b.StartTimer()
	}
	b.StopTimer()
	teams := float64(n * b.N)
	b.ReportMetric(float64(provisionTime.Microseconds())/1000/teams, "ms/team-provision")
	b.ReportMetric(float64(floorTime.Microseconds())/1000/teams, "ms/team-floor")
	b.ReportMetric(float64(provisionCalls)/teams, "sacctmgr/team-provision")
	b.ReportMetric(float64(floorCalls)/teams, "sacctmgr/team-floor")
	b.Logf("%d teams × %d iterations: provision %v with %d sacctmgr calls (bare sacctmgr script %v, %d calls)",
		n, b.N, provisionTime.Round(time.Millisecond), provisionCalls, floorTime.Round(time.Millisecond), floorCalls)
	if err := benchtable.Record(b, benchtable.Row{
		Figure: fmt.Sprintf("Slurm: %d teams approval→active", n),
		Value:  provisionTime.Seconds() / float64(b.N), Unit: "s",
		Baseline: floorTime.Seconds() / float64(b.N), BaselineName: "bare sacctmgr script",
		Kind: benchtable.RatioAtMost, Limit: 2,
	}); err != nil {
		b.Error(err)
	}
}

// slurmBenchContract makes c (a wintContract, whose owners and signal
// owners are owner.TEAM and member.TEAM) a Slurm contract: account TEAM,
// QoS TEAM-gpu in partition. Its two members are users of their own, so
// no other test's users get hundreds of associations.
func slurmBenchContract(c *workflow.Contract, partition string) {
	c.Orchestrator, c.EKSClusterName, c.Namespaces = workflow.OrchestratorSlurm, "", nil
	c.SlurmScope = workflow.SlurmScope{Account: c.Team, Partition: partition, QoS: c.Team + "-gpu"}
}

// countingRunner counts the commands run through it.
type countingRunner struct {
	slurm.Runner
	calls atomic.Int64
}

func (r *countingRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	r.calls.Add(1)
	return r.Runner.Run(ctx, name, args...)
}

// floorCommands are the commands a worker's job runs for p on a database
// that has the portal's parent account and none of the team's objects.
func floorCommands(p slurmprov.Plan) []slurmprov.Command {
	return slurmprov.ApplyCommands(p, slurmprov.State{Parent: true})
}

// shQuote quotes a word for sh.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// slurmFloor writes the commands of plans, in order, to a shell script
// (set -e: it stops at the first that fails) and times sh running it with
// the test bed's slurm.conf: the bare script the benchmark holds the
// portal to. It returns the time and the number of commands.
func slurmFloor(ctx context.Context, tb testing.TB, conf, path string, plans []slurmprov.Plan) (time.Duration, int64) {
	tb.Helper()
	var sb strings.Builder
	sb.WriteString("set -e\n")
	var calls int64
	for _, p := range plans {
		for _, c := range floorCommands(p) {
			sb.WriteString("sacctmgr -i")
			for _, a := range c.Args {
				sb.WriteString(" " + shQuote(a))
			}
			sb.WriteString("\n")
			calls++
		}
	}
	if err := os.WriteFile(path, []byte(sb.String()), 0o600); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "sh", path)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+conf)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil {
		tb.Fatalf("the bare sacctmgr script %s: %v: %s", path, err, out)
	}
	return d, calls
}

// ensureSlurmParent adds the portal's parent account when it is not there
// yet, before anything is timed: the first job would add it, the floor's
// commands assume it.
func ensureSlurmParent(ctx context.Context, tb testing.TB, r slurm.Runner, p slurmprov.Plan) {
	tb.Helper()
	s, err := slurmprov.Read(ctx, r, p)
	if err != nil {
		tb.Fatal(err)
	}
	if s.Parent {
		return
	}
	for _, c := range p.Commands() {
		if c.Args[0] == "add" && c.Args[1] == "account" && c.Args[2] == p.Parent.Name {
			if _, err := r.Run(ctx, "sacctmgr", append([]string{"-i"}, c.Args...)...); err != nil {
				tb.Fatal(err)
			}
		}
	}
}

// assertSlurmTeams checks, in one query, that the floor left each plan's
// account and member associations.
func assertSlurmTeams(ctx context.Context, tb testing.TB, r slurm.Runner, plans []slurmprov.Plan) {
	tb.Helper()
	var accounts []string
	want := 0
	for _, p := range plans {
		accounts = append(accounts, p.Account.Name)
		want += 1 + len(p.Users)
	}
	rows, err := slurm.Query(ctx, r, "sacctmgr", "-P", "show", "associations", "where", "account="+strings.Join(accounts, ","), "format=Account,User")
	if err != nil {
		tb.Fatal(err)
	}
	if len(rows) != want {
		tb.Fatalf("the bare script left %d associations of its %d accounts, want %d", len(rows), len(plans), want)
	}
}

// removeSlurmTeams deletes every user, account and QoS of plans with a
// few bulk sacctmgr deletes (the users are the run's own: deleting them
// whole takes their associations and coordinator rights; then the
// accounts, then the QoS), and then checks that nothing of them is left,
// falling back to revoking each plan.
func removeSlurmTeams(tb testing.TB, r slurm.Runner, plans []slurmprov.Plan) {
	if len(plans) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var users, accounts, qos []string
	for _, p := range plans {
		for _, u := range p.Users {
			users = append(users, u.Name)
		}
		accounts = append(accounts, p.Account.Name)
		qos = append(qos, p.QoS.Name)
	}
	slices.Sort(users)
	users = slices.Compact(users)
	for _, del := range [][]string{
		{"delete", "user", "where", "name=" + strings.Join(users, ",")},
		{"delete", "account", "where", "name=" + strings.Join(accounts, ",")},
		{"delete", "qos", "where", "name=" + strings.Join(qos, ",")},
	} {
		if _, err := r.Run(ctx, "sacctmgr", append([]string{"-i"}, del...)...); err != nil {
			tb.Logf("cleanup: sacctmgr %s %s: %v", del[0], del[1], err)
		}
	}
	left := func() int {
		n := 0
		for _, q := range [][]string{
			{"associations", "where", "account=" + strings.Join(accounts, ",")},
			{"account", "where", "name=" + strings.Join(accounts, ",")},
			{"qos", "where", "name=" + strings.Join(qos, ",")},
			{"user", "where", "name=" + strings.Join(users, ",")},
		} {
			rows, err := slurm.Query(ctx, r, "sacctmgr", append([]string{"-P", "show"}, q...)...)
			if err != nil {
				tb.Errorf("cleanup: sacctmgr show %s: %v", q[0], err)
			}
			n += len(rows)
		}
		return n
	}
	if left() == 0 {
		return
	}
	for _, p := range plans {
		if _, err := slurmprov.Revoke(ctx, r, p); err != nil {
			tb.Errorf("cleanup: revoke %s: %v", p.Account.Name, err)
		}
	}
	if n := left(); n != 0 {
		tb.Errorf("cleanup: %d rows of the benchmark's teams are left in the accounting database", n)
	}
}
