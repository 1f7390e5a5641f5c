package leader_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, for the test database and the terminating session

	"github.com/hyperpod-governance/portal/internal/leader"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/support/testenv"
)

// newPostgres creates a migrated database on the test bed's PostgreSQL
// (dropped afterwards) and returns its URL and an admin handle on it.
func newPostgres(t *testing.T) (string, *sql.DB) {
	t.Helper()
	dsn := testenv.PostgresDB(t, "portal_leader", false)
	db, err := store.OpenMigrated(t.Context(), dsn) // creates it
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	admin, err := sql.Open("pgx", os.Getenv("PORTAL_TEST_POSTGRES_URL"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	return dsn, admin
}

func openStore(t *testing.T, dsn string) *store.DB {
	t.Helper()
	db, err := store.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// dead is a process's database that refuses every new try of the lock
// once the process is dead: a killed process never campaigns again. The
// lock it already holds lives on its connection until the server ends the
// session.
type dead struct {
	leader.AdvisoryStore
	gone atomic.Bool
}

func (d *dead) TryAdvisoryLock(ctx context.Context, key int64) (*store.SessionLock, error) {
	if d.gone.Load() {
		return nil, errors.New("the process is dead")
	}
	return d.AdvisoryStore.TryAdvisoryLock(ctx, key)
}

// eventually waits for cond, polling every RetryPeriod, failing after the
// failsafe wait.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(failsafe)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(fast.RetryPeriod)
	}
}

// Two processes (two *store.DB pools) on one PostgreSQL database elect
// with the advisory lock: exactly one leads and the follower names it.
// When the leader's session ends from outside (pg_terminate_backend on the
// backend holding the lock, as the server does when a process is killed),
// the old leader notices on its connection check and stops leading (its
// lead context is cancelled), and the other takes the lock and leads; the
// old one, still running, follows and names the new leader. A clean
// shutdown releases the lock and clears the name.
func TestAdvisoryLockHandover(t *testing.T) {
	dsn, admin := newPostgres(t)
	dbA, dbB := openStore(t, dsn), openStore(t, dsn)
	sa := &dead{AdvisoryStore: dbA}
	a, err := leader.NewAdvisory(sa, "a", fast, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := leader.NewAdvisory(dbB, "b", fast, nil)
	if err != nil {
		t.Fatal(err)
	}
	ca := run(t, a)
	aTerm := ca.leads(t, "a")
	if !a.Status().IsLeader() || a.Status().Leader() != "a" || a.Status().Lock() != "postgresql advisory lock" {
		t.Errorf("a's status: leader %q, leading %v, lock %q", a.Status().Leader(), a.Status().IsLeader(), a.Status().Lock())
	}
	cb := run(t, b)
	eventually(t, "b names a as the leader", func() bool {
		select {
		case <-cb.terms:
			t.Fatal("b leads while a holds the lock")
		default:
		}
		return b.Status().Leader() == "a"
	})
	if b.Status().IsLeader() {
		t.Error("b says it leads while a holds the lock")
	}

	// The backend holding the election's lock: pg_locks shows a bigint
	// key's high half in classid, its low half in objid, with objsubid 1
	// (PostgreSQL docs, 54.12 pg_locks).
	var pid int
	if err := admin.QueryRowContext(t.Context(), `SELECT l.pid FROM pg_locks l JOIN pg_database d ON d.oid = l.database
WHERE l.locktype = 'advisory' AND l.granted AND d.datname = $1 AND l.classid::bigint = $2 AND l.objid::bigint = $3 AND l.objsubid = 1`,
		dbName(t, dsn), uint64(leader.AdvisoryLockKey)>>32, uint64(leader.AdvisoryLockKey)&0xffffffff).Scan(&pid); err != nil {
		t.Fatalf("the lock's backend: %v", err)
	}
	sa.gone.Store(true)
	var ok bool
	if err := admin.QueryRowContext(t.Context(), `SELECT pg_terminate_backend($1)`, pid).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, ok, err)
	}
	done(t, aTerm, "a's term after its session was terminated")
	cb.leads(t, "b")
	if a.Status().IsLeader() {
		t.Error("a still says it leads")
	}
	eventually(t, "a names b as the leader", func() bool { return a.Status().Leader() == "b" })
	if h, _, err := dbA.SingletonHolder(t.Context(), leader.LeaseName); err != nil || h != "b" {
		t.Errorf("holder = %q, %v; want b", h, err)
	}

	// b shuts down cleanly: the lock and the name are released at once.
	cb.stop()
	<-cb.ended
	if _, _, err := dbA.SingletonHolder(t.Context(), leader.LeaseName); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after a clean shutdown the leader's name is still recorded (%v)", err)
	}
	l, err := dbA.TryAdvisoryLock(t.Context(), leader.AdvisoryLockKey)
	if err != nil || l == nil {
		t.Fatalf("after a clean shutdown the lock is still held (%v)", err)
	}
	l.Release(t.Context())
}

func dbName(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return u.Path[1:]
}

// A clean shutdown releases the lock before Run returns, whenever it
// comes. The leader's database is reached through slowLink, which holds
// each of the server's replies for a few milliseconds (a busy machine or
// a distant server), and its retry period is 1 ms, so the connection
// check is in flight for most of each term and a shutdown usually lands
// mid-query. A check run on Run's own context then had pgx end the
// connection (pgconn's default context watcher), and the server released
// the lock only once the session's close reached it, after Run had
// returned: the next process's try found the lock still held (the CI
// failure of 2026-12-06, in TestAdvisoryLockHandover).
func TestAdvisoryShutdownReleasesTheLockAtOnce(t *testing.T) {
	dsn, _ := newPostgres(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = slowLink(t, u.Host, 3*time.Millisecond)
	db, other := openStore(t, u.String()), openStore(t, dsn)
	busy := leader.Durations{LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: time.Millisecond}
	for i := range 20 {
		e, err := leader.NewAdvisory(db, "a", busy, nil)
		if err != nil {
			t.Fatal(err)
		}
		c := run(t, e)
		c.leads(t, "a")
		time.Sleep(200*time.Millisecond + time.Duration(i)*700*time.Microsecond) // past the term's first record (a transaction of many round trips through the link), at different points of the loop
		c.stop()
		<-c.ended
		l, err := other.TryAdvisoryLock(t.Context(), leader.AdvisoryLockKey)
		if err != nil || l == nil {
			t.Fatalf("term %d: after a clean shutdown the lock is still held (%v)", i, err)
		}
		l.Release(t.Context())
	}
}

// slowLink forwards connections from a loopback port to upstream,
// holding each piece of the server's replies for delay; it returns the
// port's host:port.
func slowLink(t *testing.T, upstream string, delay time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			go func() { io.Copy(s, c); s.Close() }()
			go func() {
				buf := make([]byte, 32<<10)
				for {
					n, err := s.Read(buf)
					if n > 0 {
						time.Sleep(delay)
						if _, werr := c.Write(buf[:n]); werr != nil {
							break
						}
					}
					if err != nil {
						break
					}
				}
				c.Close()
			}()
		}
	}()
	return ln.Addr().String()
}
