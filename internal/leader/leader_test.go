package leader_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hyperpod-governance/portal/internal/leader"
	"github.com/hyperpod-governance/portal/internal/store"
)

// fast are short durations for tests: the same rules, a quicker handover.
var fast = leader.Durations{LeaseDuration: 1500 * time.Millisecond, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond}

// failsafe bounds a wait that must end; it is not a timing.
const failsafe = 30 * time.Second

// The default durations are client-go-valid and hand over within 15 s.
func TestDefaultDurations(t *testing.T) {
	if err := leader.Default.Check(); err != nil {
		t.Fatal(err)
	}
	if d := leader.Default.WorstHandover(); d >= 15*time.Second {
		t.Errorf("a handover may take %s, not under 15 s", d)
	}
	for _, bad := range []leader.Durations{{LeaseDuration: time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond},
		{LeaseDuration: 3 * time.Second, RenewDeadline: time.Second, RetryPeriod: time.Second}} {
		if bad.Check() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// campaign runs e in the background; terms receives each lead's context.
type campaign struct {
	terms chan context.Context
	ended chan struct{}
	stop  context.CancelFunc
}

func run(t *testing.T, e leader.Elector) *campaign {
	ctx, cancel := context.WithCancel(context.Background())
	c := &campaign{terms: make(chan context.Context, 4), ended: make(chan struct{}), stop: cancel}
	go func() {
		defer close(c.ended)
		e.Run(ctx, func(lctx context.Context) { c.terms <- lctx; <-lctx.Done() })
	}()
	t.Cleanup(func() { cancel(); <-c.ended })
	return c
}

func (c *campaign) leads(t *testing.T, who string) context.Context {
	t.Helper()
	select {
	case lctx := <-c.terms:
		return lctx
	case <-time.After(failsafe):
		t.Fatalf("%s never became the leader", who)
		return nil
	}
}

func done(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(failsafe):
		t.Fatalf("%s: still running", what)
	}
}

// helperDB is set in the helper process of TestFileLockHandover: the
// SQLite file it campaigns on.
const helperDB = "PORTAL_LEADER_TEST_HELPER_DB"

// TestFileLockHelperProcess is the other process of TestFileLockHandover
// (it does nothing in a normal run): it campaigns as "a" on the database
// helperDB names, says "leading" on stdout when it leads, and waits to be
// killed.
func TestFileLockHelperProcess(t *testing.T) {
	path := os.Getenv(helperDB)
	if path == "" {
		return
	}
	db, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := leader.NewAdvisory(db, "a", fast, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.Run(context.Background(), func(ctx context.Context) {
		fmt.Println("leading")
		<-ctx.Done()
	})
}

// Two processes on one SQLite file: one leads, the other follows and
// names it; when the leader dies (SIGKILL: it releases nothing), the
// kernel drops its flock and the other takes over. A clean shutdown
// clears the leader's name at once. Leading writes nothing: the
// database's data version stays put while a process leads.
func TestFileLockHandover(t *testing.T) {
	path := filepath.Join(t.TempDir(), "portal.db")
	db, err := store.OpenMigrated(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })

	cmd := exec.Command(os.Args[0], "-test.run=^TestFileLockHelperProcess$", "-test.v")
	cmd.Env = append(os.Environ(), helperDB+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	leading := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "leading" {
				close(leading)
			}
		}
	}()
	select {
	case <-leading:
	case <-time.After(failsafe):
		t.Fatal("the other process never led")
	}

	b, err := leader.NewAdvisory(db, "b", fast, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.Status().Lock() != "sqlite file lock" {
		t.Errorf("lock = %q", b.Status().Lock())
	}
	cb := run(t, b)
	for b.Status().Leader() != "a" { // b has met the held lock
		select {
		case <-cb.terms:
			t.Fatal("b leads while a holds the lock")
		case <-time.After(fast.RetryPeriod):
		}
	}
	// a has written its name (once); several of a's checks and b's tries
	// later, nothing more was written.
	v1, ok, err := db.DataVersion(t.Context())
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	time.Sleep(5 * fast.RetryPeriod)
	if v2, _, err := db.DataVersion(t.Context()); err != nil || v2 != v1 {
		t.Errorf("the data version moved while a led and b followed: %q, then %q (%v)", v1, v2, err)
	}
	if b.Status().IsLeader() {
		t.Error("b says it leads while a holds the lock")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cb.leads(t, "b")
	// b writes its name once it leads (Advisory.Run records it after lead
	// starts): wait for it.
	for deadline := time.Now().Add(failsafe); ; {
		h, _, err := db.SingletonHolder(t.Context(), leader.LeaseName)
		if err == nil && h == "b" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("holder = %q, %v; want b", h, err)
		}
		time.Sleep(fast.RetryPeriod / 4)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(b.Status())
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP portal_is_leader 1 when this process is the leader and runs the singletons (drift checker, collector, review scheduler, outbox delivery, ...), else 0.
# TYPE portal_is_leader gauge
portal_is_leader{identity="b"} 1
# HELP portal_leader The leader this process last observed: 1, labelled with its identity and the lock the election runs on.
# TYPE portal_leader gauge
portal_leader{identity="b",lock="sqlite file lock"} 1
`)); err != nil {
		t.Error(err)
	}
	// b shuts down cleanly: its name is cleared, the lock released.
	cb.stop()
	<-cb.ended
	if _, _, err := db.SingletonHolder(t.Context(), leader.LeaseName); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after a clean shutdown the leader's name stays (%v)", err)
	}
	if l, err := db.TryAdvisoryLock(t.Context(), leader.AdvisoryLockKey); err != nil || l == nil {
		t.Errorf("after a clean shutdown the lock is still held: %v, %v", l, err)
	} else {
		l.Release(t.Context())
	}
}
