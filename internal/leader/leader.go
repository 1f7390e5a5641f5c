// Package leader elects the one portal process that runs the singletons:
// the background loops that must not run in two replicas at once (drift
// checker, usage collector, month closer, signals, review scheduler,
// notification delivery, end-date holds). Provisioning job workers are not
// singletons: they run on every replica, each job leased to one of them
// (internal/provision).
//
// With a cluster configured, the election is a Kubernetes Lease
// (coordination.k8s.io/v1) in the portal's namespace, through client-go's
// tools/leaderelection; without one, a lock the database's host holds for
// the leader (Advisory): on PostgreSQL a session-level advisory lock held
// on a connection of its own, on SQLite an exclusive flock on a file
// beside the database (one host). Neither writes while it holds: an idle
// portal commits nothing, so the data version the page and session caches
// key on stays put (issue 15). Either way Elector.Run calls its lead
// function when this process becomes the leader, with a context cancelled
// when it stops being it, and waits for lead to return before it
// campaigns again: a process runs the singletons only while it holds the
// lease or the lock.
//
// The durations below are the Lease's; the database lock uses RetryPeriod
// (how often it checks and tries) and RenewDeadline (how long a check may
// hang). The durations (Default) make a handover after the leader dies
// (kill -9, a lost node) take at most Durations.WorstHandover = 11.4 s:
// the others see the lease expire LeaseDuration after they observed its
// last renewal and try every RetryPeriod (jittered). The leader gives up
// leading when it could not renew for RenewDeadline, which is shorter than
// LeaseDuration, so it stops before another may start (with clocks that
// advance alike; client-go's package doc explains the tolerance to clock
// skew).
package leader

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Durations are the election's timings, client-go's LeaderElectionConfig
// fields (k8s.io/client-go/tools/leaderelection): LeaseDuration is how
// long non-leaders wait, from the last renewal they observed, before they
// take the lease over; RenewDeadline how long the leader keeps trying to
// renew before it gives up leading; RetryPeriod the wait between tries.
// client-go requires LeaseDuration > RenewDeadline > 1.2 × RetryPeriod;
// its core components use 15 s / 10 s / 2 s.
type Durations struct {
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Default hands the singletons over within WorstHandover = 11.4 s of the
// leader's death, under the 15 s docs/replicas.md promises (measured: 10-13 s
// with 10 s/7 s/2 s, hence these shorter ones).
var Default = Durations{LeaseDuration: 6 * time.Second, RenewDeadline: 4 * time.Second, RetryPeriod: time.Second}

// jitter is client-go's leaderelection.JitterFactor: a candidate waits
// RetryPeriod plus up to JitterFactor × RetryPeriod between tries
// (wait.JitterUntil in LeaderElector.acquire).
const jitter = 1.2

// WorstHandover bounds the time from the leader's death to another's
// lead: the dead leader renewed at most RetryPeriod before dying; a
// candidate observes that renewal up to one jittered retry later, waits
// LeaseDuration from its observation, then takes the lease at its next
// jittered try.
func (d Durations) WorstHandover() time.Duration {
	return d.LeaseDuration + d.RetryPeriod + time.Duration(2*(1+jitter)*float64(d.RetryPeriod))
}

// Check applies client-go's rules to d.
func (d Durations) Check() error {
	if d.LeaseDuration <= d.RenewDeadline {
		return fmt.Errorf("leader: the lease duration (%s) must be longer than the renew deadline (%s)", d.LeaseDuration, d.RenewDeadline)
	}
	if float64(d.RenewDeadline) <= 1.2*float64(d.RetryPeriod) || d.RetryPeriod <= 0 {
		return fmt.Errorf("leader: the renew deadline (%s) must be longer than 1.2 × the retry period (%s)", d.RenewDeadline, d.RetryPeriod)
	}
	return nil
}

// DefaultIdentity names this process in the election: the host name (a
// pod's name in Kubernetes) and the process id.
func DefaultIdentity() string {
	h, _ := os.Hostname()
	return h + "_" + strconv.Itoa(os.Getpid())
}

// LeaseName is the Kubernetes Lease's name and the singletons row's.
const LeaseName = "hyperpod-portal-leader"

// Status is what this process knows of the election: its own identity,
// the leader it last observed and whether it leads. Safe for concurrent
// use; it is a prometheus.Collector (portal_is_leader, portal_leader).
type Status struct {
	identity, lock string
	mu             sync.Mutex
	leader         string
	leading        bool
}

// NewStatus is the status of a process named identity electing through
// lock ("kubernetes lease", "postgresql advisory lock" or "sqlite file
// lock").
func NewStatus(identity, lock string) *Status { return &Status{identity: identity, lock: lock} }

// Identity is this process's name in the election.
func (s *Status) Identity() string { return s.identity }

// Lock says what the election runs on.
func (s *Status) Lock() string { return s.lock }

// Leader is the identity of the leader last observed ("" before any).
func (s *Status) Leader() string { s.mu.Lock(); defer s.mu.Unlock(); return s.leader }

// IsLeader says whether this process runs the singletons now.
func (s *Status) IsLeader() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.leading }

func (s *Status) observed(leader string) { s.mu.Lock(); s.leader = leader; s.mu.Unlock() }

func (s *Status) setLeading(b bool) {
	s.mu.Lock()
	s.leading = b
	if b {
		s.leader = s.identity
	}
	s.mu.Unlock()
}

var (
	isLeaderDesc = prometheus.NewDesc("portal_is_leader", "1 when this process is the leader and runs the singletons (drift checker, collector, review scheduler, outbox delivery, ...), else 0.", []string{"identity"}, nil)
	leaderDesc   = prometheus.NewDesc("portal_leader", "The leader this process last observed: 1, labelled with its identity and the lock the election runs on.", []string{"identity", "lock"}, nil)
)

// Describe is prometheus.Collector's.
func (s *Status) Describe(ch chan<- *prometheus.Desc) { ch <- isLeaderDesc; ch <- leaderDesc }

// Collect is prometheus.Collector's.
func (s *Status) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	leader, leading := s.leader, s.leading
	s.mu.Unlock()
	v := 0.0
	if leading {
		v = 1
	}
	ch <- prometheus.MustNewConstMetric(isLeaderDesc, prometheus.GaugeValue, v, s.identity)
	if leader != "" {
		ch <- prometheus.MustNewConstMetric(leaderDesc, prometheus.GaugeValue, 1, leader, s.lock)
	}
}

// term runs lead for one term of leadership and lets the elector wait for
// it: start refuses once stop was called, so no lead begins after the
// elector stopped waiting.
type term struct {
	mu      sync.Mutex
	stopped bool
	wg      sync.WaitGroup
}

func (t *term) start() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	t.wg.Add(1)
	return true
}

func (t *term) stopAndWait() {
	t.mu.Lock()
	t.stopped = true
	t.mu.Unlock()
	t.wg.Wait()
}

func logOr(l *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return slog.New(slog.DiscardHandler)
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Elector is an election a process takes part in.
type Elector interface {
	// Run campaigns until ctx is done, calling lead each time this
	// process becomes the leader with a context cancelled when it stops
	// being it (or ctx is done), and waiting for lead to return before it
	// campaigns again or returns.
	Run(ctx context.Context, lead func(ctx context.Context))
	Status() *Status
}
