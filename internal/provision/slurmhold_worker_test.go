package provision_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/provision/slurmprov"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// appliedAccounting is a Slurm cluster whose accounting already holds the
// plan (so provisioning runs no command), with the account's GrpJobs and
// the account's jobs. It records every command that is not a read.
type appliedAccounting struct {
	mu      sync.Mutex
	p       slurmprov.Plan
	grpJobs string
	jobs    map[string]string // job ID -> state
	writes  []string
}

func tresText(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+strconv.Itoa(m[k]))
	}
	return strings.Join(parts, ",")
}

func (a *appliedAccounting) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.p
	cmd := name + " " + strings.Join(args, " ")
	format := args[len(args)-1]
	switch {
	case name == "sacctmgr" && args[1] == "show" && args[2] == "qos":
		return fmt.Appendf(nil, "Name|Priority|GrpTRES|Preempt|PreemptMode\n%s|%d|%s|%s|%s\n", p.QoS.Name, p.QoS.Priority, tresText(p.QoS.GrpTRES),
			strings.Join(p.QoS.Preempt, ","), p.QoS.PreemptMode), nil
	case name == "sacctmgr" && args[1] == "show" && args[2] == "account":
		// With "withcoord", sacctmgr 22.05 prints the coordinators under
		// "Coord Accounts" (slurmprov.Read).
		return fmt.Appendf(nil, "Account|Descr|Org|Coord Accounts\n%s|%s|%s|%s\n", p.Account.Name, p.Account.Description, p.Account.Organization,
			strings.Join(p.Coordinators, ",")), nil
	case name == "sacctmgr" && args[1] == "show" && format == "format=Cluster,Account":
		return fmt.Appendf(nil, "Cluster|Account\n%s|%s\n", p.Cluster, p.Account.Name), nil
	case name == "sacctmgr" && args[1] == "show" && format == "format=Account,User,GrpJobs":
		return fmt.Appendf(nil, "Account|User|GrpJobs\n%s||%s\n", p.Account.Name, a.grpJobs), nil
	case name == "sacctmgr" && args[1] == "show":
		out := "Account|User|Partition|ParentName|Share|GrpTRES|QOS|Def QOS\n" + p.Parent.Name + "||||1||normal|\n"
		out += fmt.Sprintf("%s|||%s|%d|%s|%s|%s\n", p.Account.Name, p.Account.Parent, p.Account.Fairshare, tresText(p.Account.GrpTRES),
			strings.Join(p.Account.QoS, ","), p.Account.DefaultQoS)
		for _, u := range p.Users {
			out += fmt.Sprintf("%s|%s|%s|%s|1|||\n", u.Account, u.Name, u.Partition, p.Account.Name)
		}
		return []byte(out), nil
	case name == "squeue":
		var ids []string
		for id, st := range a.jobs {
			if st == "RUNNING" || st == "SUSPENDED" {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		return []byte(strings.Join(ids, "\n")), nil
	}
	a.writes = append(a.writes, cmd)
	switch {
	case name == "sacctmgr" && slices.Contains(args, "GrpJobs=0"):
		a.grpJobs = "0"
	case name == "sacctmgr" && slices.Contains(args, "GrpJobs=-1"):
		a.grpJobs = ""
	case name == "scancel":
		for id, st := range a.jobs {
			if "--state="+st == args[1] {
				a.jobs[id] = "CANCELLED"
			}
		}
	default:
		return nil, errors.New("unexpected " + cmd)
	}
	return nil, nil
}

func (a *appliedAccounting) written() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.writes)
}

// heldSlurmBed is a Slurm bed provisioned on acct (no command: the
// accounting holds the plan already), with a hold proposed.
func heldSlurmBed(t *testing.T) (*bed, *appliedAccounting) {
	t.Helper()
	b := slurmBed(t, provision.DefaultClusterSettings())
	acct := &appliedAccounting{p: *b.plan.Slurm, jobs: map[string]string{"41": "RUNNING", "42": "PENDING"}}
	w := b.worker("provisioner", &fakeCluster{})
	w.Slurm = acct
	b.runOnce(w)
	if s := b.state(b.conn.ID); s != workflow.StateActive || len(acct.written()) != 0 {
		t.Fatalf("after provisioning: %s, wrote %v", s, acct.written())
	}
	if _, err := b.db.ProposeHold(t.Context(), b.conn.ID, workflow.Actor{Email: "reviewer@example.test"}, "end date passed", b.clock.Now()); err != nil {
		t.Fatal(err)
	}
	return b, acct
}

// decideSlurmHold takes an admin's hold step and returns its job.
func decideSlurmHold(t *testing.T, b *bed, step workflow.HoldStep) int64 {
	t.Helper()
	b.clock.Add(time.Minute)
	_, jobID, err := b.db.DecideHold(t.Context(), b.conn.ID, step, workflow.Actor{Email: "other-admin@example.test"}, true, "test "+string(step), b.clock.Now())
	if err != nil || jobID == 0 {
		t.Fatalf("%s: job %d, %v", step, jobID, err)
	}
	return jobID
}

// TestSlurmHoldJobs: on a Slurm connection a confirmed hold runs the one
// GrpJobs=0 command, a drain then cancels the running job (the pending one
// stays), and a release clears the limit; each step is recorded with the
// command it ran, and the audit names each hold step and its job's start
// and end. The drift check
// compares the limit with the hold: none while it is in effect, a hold
// lifted by hand is drift.
func TestSlurmHoldJobs(t *testing.T) {
	b, acct := heldSlurmBed(t)
	w := b.worker("w1", &fakeCluster{})
	w.Slurm = acct
	account := b.plan.Slurm.Account.Name
	hold := "sacctmgr -i modify account where name=" + account + " cluster=" + b.plan.Slurm.Cluster + " set GrpJobs=0"
	release := "sacctmgr -i modify account where name=" + account + " cluster=" + b.plan.Slurm.Cluster + " set GrpJobs=-1"

	job := decideSlurmHold(t, b, workflow.HoldStepConfirm)
	b.runOnce(w)
	if j := b.jobNow(job); j.State != workflow.JobSucceeded {
		t.Fatalf("hold job = %+v", j)
	}
	if ss := b.steps(job); len(ss) != 1 || ss[0].Outcome != string(provision.Configured) || ss[0].Detail != hold {
		t.Errorf("hold steps = %+v; want the one command %q", ss, hold)
	}
	if got := acct.written(); !slices.Equal(got, []string{hold}) || acct.jobs["41"] != "RUNNING" {
		t.Errorf("hold wrote %v, jobs %v; want %q alone and the running job left alone", got, acct.jobs, hold)
	}

	drift := func() []workflow.DriftItem {
		t.Helper()
		var saved []workflow.DriftItem
		d := &provision.DriftChecker{
			List: func(context.Context) ([]provision.ConnVersion, error) {
				return []provision.ConnVersion{{ConnectionID: b.conn.ID, Version: 1}}, nil
			},
			Plans:        w.Plans,
			Slurm:        acct,
			StopPolicies: b.db.HoldStopPolicies,
			Save: func(_ context.Context, _ int64, _ workflow.DriftBasis, items []workflow.DriftItem, checkErr string, _ time.Time) error {
				if checkErr != "" {
					t.Errorf("drift check failed: %s", checkErr)
				}
				saved = items
				return nil
			},
		}
		if _, err := d.RunOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		return saved
	}
	if items := drift(); len(items) != 0 {
		t.Errorf("drift while held = %+v; want none (the hold is not drift)", items)
	}
	acct.mu.Lock()
	acct.grpJobs = ""
	acct.mu.Unlock()
	if items := drift(); len(items) != 1 || items[0].Kind != "Slurm account" || !slices.Equal(items[0].Fields, []string{"GrpJobs"}) {
		t.Errorf("drift with the hold lifted by hand = %+v; want the account's GrpJobs", items)
	}
	acct.mu.Lock()
	acct.grpJobs = "0"
	acct.writes = nil
	acct.mu.Unlock()

	job = decideSlurmHold(t, b, workflow.HoldStepDrain)
	b.runOnce(w)
	if j := b.jobNow(job); j.State != workflow.JobSucceeded {
		t.Fatalf("drain job = %+v", j)
	}
	ss := b.steps(job)
	if len(ss) != 2 || ss[0].Outcome != string(provision.Unchanged) || ss[1].Outcome != string(provision.Deleted) ||
		!strings.Contains(ss[1].Detail, "cancelled jobs 41:") {
		t.Errorf("drain steps = %+v; want the limit unchanged, then job 41 cancelled", ss)
	}
	if got, want := acct.written(), []string{"scancel --account=" + account + " --state=RUNNING", "scancel --account=" + account + " --state=SUSPENDED"}; !slices.Equal(got, want) {
		t.Errorf("drain wrote %v, want %v", got, want)
	}
	if acct.jobs["41"] != "CANCELLED" || acct.jobs["42"] != "PENDING" {
		t.Errorf("jobs after the drain: %v; want 41 cancelled, 42 still pending", acct.jobs)
	}

	acct.mu.Lock()
	acct.writes = nil
	acct.mu.Unlock()
	job = decideSlurmHold(t, b, workflow.HoldStepRelease)
	b.runOnce(w)
	if j := b.jobNow(job); j.State != workflow.JobSucceeded {
		t.Fatalf("release job = %+v", j)
	}
	if got := acct.written(); !slices.Equal(got, []string{release}) || acct.grpJobs != "" {
		t.Errorf("release wrote %v, GrpJobs %q; want %q alone", got, acct.grpJobs, release)
	}
	if items := drift(); len(items) != 0 {
		t.Errorf("drift after the release = %+v", items)
	}
	var steps []string
	for _, e := range b.audit(b.conn.ID) {
		if strings.HasPrefix(e.Action, "hold.") {
			steps = append(steps, e.Action)
		}
	}
	if want := []string{"hold.propose", "hold.confirm", "hold.start", "hold.applied", "hold.drain", "hold.start", "hold.applied",
		"hold.release", "hold.start", "hold.applied"}; !slices.Equal(steps, want) {
		t.Errorf("audit hold events = %v, want %v", steps, want)
	}
}

// TestSlurmHoldDrainResumesAfterACrash: a worker dies after either step of
// a drain job (no hold confirmed before: the limit and the cancel both
// run); the next worker resumes it, and each command ran once in all.
func TestSlurmHoldDrainResumesAfterACrash(t *testing.T) {
	for crash := range 2 {
		b, acct := heldSlurmBed(t)
		account := b.plan.Slurm.Account.Name
		decideSlurmHold(t, b, workflow.HoldStepConfirm)
		// The confirm job is superseded by the drain's before it runs.
		job := decideSlurmHold(t, b, workflow.HoldStepDrain)
		dying := b.worker("dying", &fakeCluster{})
		dying.Slurm = acct
		dying.AfterStep = func(seq int) error {
			if seq == crash {
				return errCrash
			}
			return nil
		}
		if did, err := dying.RunOnce(t.Context()); !did || !errors.Is(err, errCrash) {
			t.Fatalf("crash after step %d: RunOnce = %v, %v", crash, did, err)
		}
		b.clock.Add(2 * time.Minute) // the lease expires
		next := b.worker("next", &fakeCluster{})
		next.Slurm = acct
		b.runOnce(next)
		if j := b.jobNow(job); j.State != workflow.JobSucceeded || j.Attempts != 2 {
			t.Fatalf("crash after step %d: job %+v, want succeeded at attempt 2", crash, j)
		}
		want := []string{"sacctmgr -i modify account where name=" + account + " cluster=" + b.plan.Slurm.Cluster + " set GrpJobs=0",
			"scancel --account=" + account + " --state=RUNNING", "scancel --account=" + account + " --state=SUSPENDED"}
		if got := acct.written(); !slices.Equal(got, want) || acct.grpJobs != "0" || acct.jobs["41"] != "CANCELLED" || acct.jobs["42"] != "PENDING" {
			t.Errorf("crash after step %d: wrote %v, GrpJobs %q, jobs %v; want each command once", crash, got, acct.grpJobs, acct.jobs)
		}
	}
}
