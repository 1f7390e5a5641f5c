package leader

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
)

// SingletonStore is the database lease: *store.DB.
type SingletonStore interface {
	ClaimSingleton(ctx context.Context, name, owner string, now time.Time, lease time.Duration) error
	SingletonHolder(ctx context.Context, name string) (owner string, heartbeat time.Time, err error)
	ReleaseSingleton(ctx context.Context, name, owner string) error
}

// DB elects through a row of the singletons table: the leader renews its
// heartbeat every RetryPeriod (store.ClaimSingleton); another process takes
// the row over once the heartbeat is LeaseDuration old. A leader that
// could not renew for RenewDeadline stops leading. The heartbeats carry
// each process's clock: keep the hosts' clocks synchronized (NTP), as
// with client-go's election.
type DB struct {
	Store     SingletonStore
	Name      string // default LeaseName
	Durations Durations
	Clock     func() time.Time // default time.Now
	Logger    *slog.Logger
	status    *Status
}

// NewDB is an election on the singletons row name, for the process
// identity.
func NewDB(st SingletonStore, name, identity string, d Durations, logger *slog.Logger) (*DB, error) {
	if err := d.Check(); err != nil {
		return nil, err
	}
	if name == "" {
		name = LeaseName
	}
	return &DB{Store: st, Name: name, Durations: d, Logger: logOr(logger), status: NewStatus(identity, "database lease")}, nil
}

// Status is the election's status.
func (d *DB) Status() *Status { return d.status }

func (d *DB) now() time.Time {
	if d.Clock != nil {
		return d.Clock()
	}
	return time.Now()
}

// Run campaigns until ctx is done (Elector's). On ctx done the row is
// released once lead has returned, so the next leader need not wait out
// the lease.
func (d *DB) Run(ctx context.Context, lead func(ctx context.Context)) {
	var (
		cancelLead context.CancelFunc
		done       chan struct{}
		renewed    time.Time
	)
	stop := func() {
		if cancelLead == nil {
			return
		}
		d.status.setLeading(false) // from the moment it gives up (see Advisory.Run)
		cancelLead()
		<-done
		cancelLead = nil
		d.Logger.Info("leader election: stopped leading; singletons stopped", "identity", d.status.identity)
	}
	defer func() {
		stop()
		if err := d.Store.ReleaseSingleton(context.WithoutCancel(ctx), d.Name, d.status.identity); err != nil {
			d.Logger.Warn("leader election: release the database lease", "err", err)
		}
	}()
	for ctx.Err() == nil {
		now := d.now()
		err := d.Store.ClaimSingleton(ctx, d.Name, d.status.identity, now, d.Durations.LeaseDuration)
		switch {
		case err == nil:
			renewed = now
			if cancelLead == nil {
				leadCtx, cancel := context.WithCancel(ctx)
				cancelLead, done = cancel, make(chan struct{})
				d.status.setLeading(true)
				d.Logger.Info("leader election: this process leads; starting the singletons", "identity", d.status.identity, "lease", "database "+d.Name)
				go func() { defer close(done); lead(leadCtx) }()
			}
		case errors.Is(err, store.ErrSingletonHeld):
			stop()
			if holder, _, herr := d.Store.SingletonHolder(ctx, d.Name); herr == nil {
				d.status.observed(holder)
			}
		case ctx.Err() != nil:
		default:
			d.Logger.Warn("leader election: the database lease", "err", err)
			if cancelLead != nil && now.Sub(renewed) >= d.Durations.RenewDeadline {
				d.Logger.Error("leader election: could not renew the lease in time; giving up leading", "renew_deadline", d.Durations.RenewDeadline)
				stop()
			}
		}
		sleep(ctx, d.Durations.RetryPeriod)
	}
}
