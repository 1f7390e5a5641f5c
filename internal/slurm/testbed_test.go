package slurm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/support/testenv"
)

// bed is the test bed's Slurm (hack/testbed/slurm.sh).
type bed struct {
	r     Local
	users map[string][]string // team -> local accounts
}

func testBed(t *testing.T) bed {
	t.Helper()
	conf := testenv.Require(t, "PORTAL_TEST_SLURM_CONF")
	b := bed{r: Local{Conf: conf}, users: map[string][]string{}}
	for _, team := range []string{"red", "blue"} {
		b.users[team] = testenv.SlurmUsers(t, team)
	}
	return b
}

// sbatch submits a batch job as user (a member submits, not the portal).
func (b bed) sbatch(t *testing.T, user string, args ...string) string {
	t.Helper()
	argv := append([]string{"-u", user, "--", "sbatch", "--parsable", "--chdir=/tmp", "--output=/dev/null"}, args...)
	cmd := exec.Command("runuser", argv...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+b.r.Conf)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch as %s %v: %v: %s", user, args, err, out)
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	return id
}

func (b bed) admin(t *testing.T, args ...string) {
	t.Helper()
	if _, err := b.r.Run(t.Context(), "sacctmgr", append([]string{"-i"}, args...)...); err != nil {
		t.Fatal(err)
	}
}

// TestTestBedSlurmEnforcesAssociationLimits: the test bed's Slurm is a real
// one with accounting enforced. An account with a group limit of 4 GPUs
// runs a member's 3-GPU job and keeps a second pending with Slurm's
// association-limit reason; both then run in turn, and sacct records each
// with its GPUs and an elapsed time equal to its recorded end minus start.
func TestTestBedSlurmEnforcesAssociationLimits(t *testing.T) {
	b := testBed(t)
	ctx := t.Context()
	user := b.users["red"][0]
	acct := fmt.Sprintf("tb%d", time.Now().UnixNano()%1_000_000_000)
	b.admin(t, "add", "account", acct, "Description=test-bed", "Organization=portal")
	t.Cleanup(func() {
		ctx := context.Background()
		b.r.Run(ctx, "scancel", "--account="+acct)
		b.r.Run(ctx, "sacctmgr", "-i", "delete", "user", "name="+user, "account="+acct)
		b.r.Run(ctx, "sacctmgr", "-i", "delete", "account", acct)
	})
	b.admin(t, "add", "user", user, "account="+acct)
	b.admin(t, "modify", "account", acct, "set", "GrpTRES=gres/gpu=4")
	assocs, err := Query(ctx, b.r, "sacctmgr", "-P", "show", "associations", "where", "account="+acct, "format=Account,User,GrpTRES")
	if err != nil {
		t.Fatal(err)
	}
	var limited bool
	for _, a := range assocs {
		if a["User"] == "" && a["GrpTRES"] == "gres/gpu=4" {
			limited = true
		}
	}
	if !limited {
		t.Fatalf("the account's association has no GrpTRES=gres/gpu=4: %v", assocs)
	}

	// The first runs long enough for the scheduler to pass over the
	// second while it holds the GPUs, on a loaded machine too.
	first := b.sbatch(t, user, "--account="+acct, "--gres=gpu:3", "--wrap", "sleep 10")
	second := b.sbatch(t, user, "--account="+acct, "--gres=gpu:3", "--wrap", "sleep 1")
	var reason string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		q, err := Query(ctx, b.r, "squeue", "-j", first+","+second, "-o", "%i|%T|%r")
		if err != nil {
			t.Fatal(err)
		}
		state := map[string][2]string{}
		for _, j := range q {
			state[j["JOBID"]] = [2]string{j["STATE"], j["REASON"]}
		}
		// A job just submitted pends with reason None until the
		// scheduler's first pass over it: wait for that pass.
		if state[first][0] == "RUNNING" && state[second][0] == "PENDING" {
			if reason = state[second][1]; reason == "AssocGrpGRES" {
				break
			}
		}
	}
	if reason != "AssocGrpGRES" {
		t.Fatalf("the second job over the account's GPU limit: pending reason %q, want AssocGrpGRES", reason)
	}

	var jobs []map[string]string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		if jobs, err = Query(ctx, b.r, "sacct", "-X", "-P", "-j", first+","+second, "-o", "JobID,State,Account,User,Start,End,ElapsedRaw,AllocTRES"); err != nil {
			t.Fatal(err)
		}
		done := 0
		for _, j := range jobs {
			if j["State"] == "COMPLETED" {
				done++
			}
		}
		if done == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the jobs did not complete: %v", jobs)
		}
	}
	for _, j := range jobs {
		tres, err := TRES(j["AllocTRES"])
		if err != nil {
			t.Fatal(err)
		}
		start, err1 := time.ParseInLocation("2006-01-02T15:04:05", j["Start"], time.Local)
		end, err2 := time.ParseInLocation("2006-01-02T15:04:05", j["End"], time.Local)
		elapsed, err3 := strconv.Atoi(j["ElapsedRaw"])
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("job %s: %v %v %v", j["JobID"], err1, err2, err3)
		}
		if tres["gres/gpu"] != "3" || j["Account"] != acct || j["User"] != user || elapsed != int(end.Sub(start).Seconds()) || elapsed < 1 {
			t.Errorf("job %s: %v (elapsed %d s, end - start %s)", j["JobID"], j, elapsed, end.Sub(start))
		}
	}
}

// runAs runs a Slurm command as user (a member's shell or Studio session,
// not the portal) and returns its output.
func (b bed) runAs(t *testing.T, user string, args ...string) string {
	t.Helper()
	cmd := exec.Command("runuser", append([]string{"-u", user, "--"}, args...)...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+b.r.Conf)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v as %s: %v: %s", args, user, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestTestBedSlurmHidesOtherUsersJobs: the test bed's Slurm keeps jobs
// private (PrivateData=jobs in slurm.conf and slurmdbd.conf, as the
// readiness page's task visibility check asks): a red member's job is
// listed by squeue and sacct for that member and for the portal (root),
// and for a blue user neither lists it.
func TestTestBedSlurmHidesOtherUsersJobs(t *testing.T) {
	b := testBed(t)
	ctx := t.Context()
	red, blue := b.users["red"][0], b.users["blue"][0]
	acct := fmt.Sprintf("pv%d", time.Now().UnixNano()%1_000_000_000)
	b.admin(t, "add", "account", acct, "Description=test-bed", "Organization=portal")
	t.Cleanup(func() {
		ctx := context.Background()
		b.r.Run(ctx, "scancel", "--account="+acct)
		b.r.Run(ctx, "sacctmgr", "-i", "delete", "user", "name="+red, "account="+acct)
		b.r.Run(ctx, "sacctmgr", "-i", "delete", "account", acct)
	})
	b.admin(t, "add", "user", red, "account="+acct)
	id := b.sbatch(t, red, "--account="+acct, "--wrap", "sleep 120")
	// sacct has the record once slurmctld has sent it to slurmdbd.
	var rootSees string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		out, err := b.r.Run(ctx, "sacct", "--noheader", "-X", "--parsable2", "--jobs="+id, "--format=JobID")
		if err != nil {
			t.Fatal(err)
		}
		if rootSees = strings.TrimSpace(string(out)); rootSees == id {
			break
		}
	}
	if rootSees != id {
		t.Fatalf("sacct as root: %q; want job %s", rootSees, id)
	}
	out, err := b.r.Run(ctx, "squeue", "--noheader", "--jobs="+id, "--format=%i")
	if err != nil || strings.TrimSpace(string(out)) != id {
		t.Fatalf("squeue as root: %q, %v; want job %s", out, err, id)
	}
	squeue := []string{"squeue", "--noheader", "--all", "--format=%i"}
	sacct := []string{"sacct", "--noheader", "-X", "--parsable2", "--allusers", "--jobs=" + id, "--format=JobID"}
	if got := b.runAs(t, red, squeue...); !strings.Contains("\n"+got+"\n", "\n"+id+"\n") {
		t.Errorf("squeue as the job's owner %s: %q; want job %s", red, got, id)
	}
	if got := b.runAs(t, red, sacct...); got != id {
		t.Errorf("sacct as the job's owner %s: %q; want job %s", red, got, id)
	}
	if got := b.runAs(t, blue, squeue...); strings.Contains("\n"+got+"\n", "\n"+id+"\n") {
		t.Errorf("squeue as %s lists %s's job %s: %q", blue, red, id, got)
	}
	if got := b.runAs(t, blue, sacct...); got != "" {
		t.Errorf("sacct as %s shows %s's job %s: %q", blue, red, id, got)
	}
}

// TestTestBedSlurmWritesOneAtATime: the sacctmgr the tests (and the portals
// they start) find on PATH is the test bed's, which runs a write only under
// the test bed's lock and a read at once (hack/testbed/slurm.sh,
// sacctmgr_wrapper: Slurm 22.05's slurmdbd loses a user from its cache when
// another session adds an account meanwhile). With the lock held here, a
// write waits and a read does not; released, the write runs.
func TestTestBedSlurmWritesOneAtATime(t *testing.T) {
	b := testBed(t)
	bin := testenv.Require(t, "PORTAL_TEST_SLURM_BIN")
	got, err := exec.LookPath("sacctmgr")
	if err != nil || got != filepath.Join(bin, "sacctmgr") {
		t.Fatalf("sacctmgr on PATH is %q (%v), want the test bed's %s", got, err, filepath.Join(bin, "sacctmgr"))
	}
	f, err := os.OpenFile(testenv.Require(t, "PORTAL_TEST_SLURM_SACCTMGR_LOCK"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	acct := fmt.Sprintf("lock%d", time.Now().UnixNano()%1e9)
	t.Cleanup(func() { b.r.Run(context.Background(), "sacctmgr", "-i", "delete", "account", acct) })
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	_, err = b.r.Run(ctx, "sacctmgr", "-i", "add", "account", acct)
	cancel()
	if err == nil {
		t.Fatal("sacctmgr add account ran while the test bed's lock was held")
	}
	if _, err := b.r.Run(t.Context(), "sacctmgr", "-n", "-P", "show", "account", "where", "name="+acct, "format=Account"); err != nil {
		t.Fatalf("a read waited on the writers' lock or failed: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	b.admin(t, "add", "account", acct)
	rows, err := Query(t.Context(), b.r, "sacctmgr", "-P", "show", "account", "where", "name="+acct, "format=Account")
	if err != nil || len(rows) != 1 {
		t.Fatalf("after the lock was released: %v, %v; want account %s", rows, err, acct)
	}
}
