package leader

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
)

// AdvisoryLockKey is the PostgreSQL advisory lock key of the election:
// "portalld" in ASCII. The store's other keys are 0x706f7274616c7772
// ("portalwr", the writer lock, transaction-level), 0x706f7274616c746d
// ("portaltm", the test databases' template) and 0x706f7274616c6476
// ("portaldv", the data version's, migrations/00040); goose's migration
// lock is its own default key.
const AdvisoryLockKey int64 = 0x706f7274616c6c64

// AdvisoryStore is the lock election's database: *store.DB, on either
// engine.
type AdvisoryStore interface {
	// TryAdvisoryLock takes the lock key if free: a PostgreSQL advisory
	// lock, or a flock beside a SQLite file (store.DB.TryAdvisoryLock).
	TryAdvisoryLock(ctx context.Context, key int64) (*store.SessionLock, error)
	Postgres() bool
	// The holder's identity is recorded in the singletons row Name, for
	// the followers (an advisory lock carries no identity).
	RecordSingletonHolder(ctx context.Context, name, owner string, now time.Time) error
	SingletonHolder(ctx context.Context, name string) (owner string, heartbeat time.Time, err error)
	ReleaseSingleton(ctx context.Context, name, owner string) error
}

// Advisory elects through a lock the database's host keeps for the
// process holding it (store.DB.TryAdvisoryLock on AdvisoryLockKey): on
// PostgreSQL a session-level advisory lock (pg_try_advisory_lock) held on a
// connection of its own, on SQLite an exclusive flock on a file beside the
// database (a SQLite database is shared by the processes of one host only).
// The process that holds the lock leads while it holds it; nothing is
// written while it does (a lease row renewed every RetryPeriod moved the
// database's data version every second, and every replica's page and
// session caches with it: issue 15). On SQLite the kernel drops the lock
// when the holder dies, and the others take it at their next try. The
// rest of this comment is PostgreSQL's case: the process that holds the
// lock leads while it holds that connection. The leader runs a cheap query on it every RetryPeriod and
// stops leading (cancels lead's context) as soon as that fails; the
// others try the lock every RetryPeriod. The server releases the lock of
// a dead process when its connection closes (kill -9: the kernel closes
// the socket), so a handover takes about one RetryPeriod after the server
// notices, with no comparison of the hosts' clocks. A node lost without
// closing its sockets is noticed by the server's TCP keepalives
// (tcp_keepalives_idle; 300 s by default per AWS's "Dead connection
// handling in PostgreSQL", docs.aws.amazon.com/AmazonRDS/latest/
// AuroraUserGuide/Appendix.PostgreSQL.CommonDBATasks.DeadConnectionHandling.html,
// and the RDS User Guide's page of the same name); its leader stops on
// its own once a check fails or hangs for RenewDeadline. The winner records its identity in the
// singletons row Name (store.RecordSingletonHolder, overwriting any
// previous holder), which the followers read for their Status.
type Advisory struct {
	Store     AdvisoryStore
	Name      string // singletons row naming the holder; default LeaseName
	Key       int64  // default AdvisoryLockKey
	Durations Durations
	Logger    *slog.Logger
	status    *Status
}

// NewAdvisory is an election on the advisory lock AdvisoryLockKey of the
// database st is, for the process identity.
func NewAdvisory(st AdvisoryStore, identity string, d Durations, logger *slog.Logger) (*Advisory, error) {
	if err := d.Check(); err != nil {
		return nil, err
	}
	lock := "sqlite file lock"
	if st.Postgres() {
		lock = "postgresql advisory lock"
	}
	return &Advisory{Store: st, Name: LeaseName, Key: AdvisoryLockKey, Durations: d, Logger: logOr(logger),
		status: NewStatus(identity, lock)}, nil
}

// Status is the election's status.
func (a *Advisory) Status() *Status { return a.status }

// Run campaigns until ctx is done (Elector's). On ctx done, once lead
// has returned, the lock is released and the holder's row deleted, so
// the next leader starts at its next try.
func (a *Advisory) Run(ctx context.Context, lead func(ctx context.Context)) {
	var (
		held       *store.SessionLock
		recorded   bool
		cancelLead context.CancelFunc
		done       chan struct{}
	)
	bg := context.WithoutCancel(ctx)
	// The lock's queries (the check, the try) run on a context of their
	// own, bounded by RenewDeadline (a check that hangs, a partition,
	// counts as failed then: the leader stops rather than wait on it), and
	// never cancelled by ctx: a shutdown that cancelled one mid-query
	// would break its connection (pgx ends a connection whose query's
	// context is cancelled: pgconn's DeadlineContextWatcherHandler, its
	// default), and the server would release a lock held on it only once
	// it noticed, after Run had returned (the CI failure of 2026-12-06).
	lockCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(bg, a.Durations.RenewDeadline)
	}
	stop := func() {
		if cancelLead != nil {
			// Not leading from the moment it gives up, before its
			// singletons have wound down: /readyz and /metrics never
			// claim a term that has ended.
			a.status.setLeading(false)
			cancelLead()
			<-done
			cancelLead = nil
			a.Logger.Info("leader election: stopped leading; singletons stopped", "identity", a.status.identity)
		}
		if held != nil {
			held.Release(bg)
			held, recorded = nil, false
		}
	}
	defer func() {
		wasLeading := held != nil
		stop()
		if wasLeading {
			if err := a.Store.ReleaseSingleton(bg, a.Name, a.status.identity); err != nil {
				a.Logger.Warn("leader election: clear the leader's name", "err", err)
			}
		}
	}()
	for ctx.Err() == nil {
		if held != nil {
			cctx, cancel := lockCtx()
			err := held.Check(cctx)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					break
				}
				a.Logger.Error("leader election: lost the advisory lock's connection; giving up leading", "err", err)
				stop()
			}
		} else {
			tctx, cancel := lockCtx()
			l, err := a.Store.TryAdvisoryLock(tctx, a.Key)
			cancel()
			switch {
			case err != nil && ctx.Err() == nil:
				a.Logger.Warn("leader election: the advisory lock", "err", err)
			case l != nil && ctx.Err() != nil:
				l.Release(bg) // shut down while trying: not a term
			case l != nil:
				held = l
				leadCtx, cancel := context.WithCancel(ctx)
				cancelLead, done = cancel, make(chan struct{})
				a.status.setLeading(true)
				a.Logger.Info("leader election: this process leads; starting the singletons", "identity", a.status.identity, "lock", a.status.lock)
				go func() { defer close(done); lead(leadCtx) }()
			}
		}
		if held != nil && !recorded {
			// The row only records the holder; the lock decides.
			if err := a.Store.RecordSingletonHolder(ctx, a.Name, a.status.identity, time.Now()); err != nil {
				a.Logger.Warn("leader election: record the leader's name", "err", err)
			} else {
				recorded = true
			}
		}
		if held == nil {
			holder, _, err := a.Store.SingletonHolder(ctx, a.Name)
			switch {
			case err == nil:
				a.status.observed(holder)
			case errors.Is(err, store.ErrNotFound):
				a.status.observed("")
			}
		}
		sleep(ctx, a.Durations.RetryPeriod)
	}
}
