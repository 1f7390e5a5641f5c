package leader_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
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

// mortal is a store a process reaches until it dies: afterwards every call
// fails, as a killed process's would never happen (in particular it
// cannot release its lease).
type mortal struct {
	leader.SingletonStore
	dead atomic.Bool
}

var errDead = errors.New("the process is dead")

func (m *mortal) ClaimSingleton(ctx context.Context, name, owner string, now time.Time, lease time.Duration) error {
	if m.dead.Load() {
		return errDead
	}
	return m.SingletonStore.ClaimSingleton(ctx, name, owner, now, lease)
}

func (m *mortal) ReleaseSingleton(ctx context.Context, name, owner string) error {
	if m.dead.Load() {
		return errDead
	}
	return m.SingletonStore.ReleaseSingleton(ctx, name, owner)
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

// Two processes on one database: one leads, the other follows and names
// it; when the leader dies without releasing (every call it makes fails),
// it stops leading once it cannot renew, and the other takes over after
// the lease. A clean shutdown releases the lease at once.
func TestDatabaseLeaseHandover(t *testing.T) {
	db, err := store.OpenMigrated(t.Context(), filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	sa := &mortal{SingletonStore: db}
	a, err := leader.NewDB(sa, "", "a", fast, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := leader.NewDB(db, "", "b", fast, nil)
	if err != nil {
		t.Fatal(err)
	}
	ca := run(t, a)
	aTerm := ca.leads(t, "a")
	if !a.Status().IsLeader() || a.Status().Leader() != "a" {
		t.Errorf("a's status: leader %q, leading %v", a.Status().Leader(), a.Status().IsLeader())
	}
	cb := run(t, b)
	for b.Status().Leader() != "a" { // b has met the held lease
		select {
		case <-cb.terms:
			t.Fatal("b leads while a holds the lease")
		case <-time.After(fast.RetryPeriod):
		}
	}
	if b.Status().IsLeader() {
		t.Error("b says it leads while a holds the lease")
	}
	sa.dead.Store(true)
	done(t, aTerm, "a's term after it lost the database")
	cb.leads(t, "b")
	if a.Status().IsLeader() {
		t.Error("a still says it leads")
	}
	if h, _, err := db.SingletonHolder(t.Context(), leader.LeaseName); err != nil || h != "b" {
		t.Errorf("holder = %q, %v; want b", h, err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(b.Status())
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP portal_is_leader 1 when this process is the leader and runs the singletons (drift checker, collector, review scheduler, outbox delivery, ...), else 0.
# TYPE portal_is_leader gauge
portal_is_leader{identity="b"} 1
# HELP portal_leader The leader this process last observed: 1, labelled with its identity and the lock the election runs on.
# TYPE portal_leader gauge
portal_leader{identity="b",lock="database lease"} 1
`)); err != nil {
		t.Error(err)
	}
	// b shuts down cleanly: the lease is released, not left to expire.
	cb.stop()
	<-cb.ended
	if _, _, err := db.SingletonHolder(t.Context(), leader.LeaseName); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after a clean shutdown the lease is still held (%v)", err)
	}
}
