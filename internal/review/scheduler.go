// Package review is the lifecycle review scheduler (issue 13): a background
// loop, one instance at a time (a claim with a heartbeat in the database),
// that gives every live connection a next review date, opens the reviews
// that come due and those that events call for, flags orphans, collects
// each review's evidence as it opens (frozen with it), and reminds people
// of overdue reviews.
//
// It decides nothing itself: the rules are internal/workflow's
// (ReviewIsDue, ScheduledTrigger, OrphanReason, OwnerLeft, OverdueNotices)
// and every change to a connection is a workflow command recorded by
// internal/store in one transaction. A tick is restart-safe: each review
// opens in its own transaction with the key of the event that called for it
// (review_events), and the database keeps at most one open review per
// connection, so a tick that died half-way redoes nothing twice.
//
// The triggers and what each watches:
//   - scheduled / end_date: connections.review_due (set when the connection
//     becomes active, moved by an applied change of cadence or end date and
//     by each decision); end_date when the end date set that day.
//   - amendment: review_triggers rows of an approved change of owners,
//     roles, account, region, data classification or signals, acted on once
//     the change is applied (the approved version reached it), then resolved.
//   - capacity / orchestrator: the inventory of each live connection's
//     cluster (observed and manual rows) and, when Orchestrator is set, the
//     orchestrator's version; a change since the last tick (not the first
//     observation) opens a review of every live connection on the cluster.
//   - owner_left: an owner of a live contract seen outside the team's
//     owners group: by their groups as recorded at their last sign-in, or by
//     the Identity Store group sync (Directory) when configured.
//   - signal: an open signal event of a team (signal_events) opens a review
//     of the team's live connections, once per event.
//   - orphan: a live connection with no business purpose, or no owner who is
//     a portal user in the team's owners group, is flagged (connections.
//     orphan) and reviewed at once; the flag clears when it no longer holds.
package review

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// SingletonName is the scheduler's claim in the singletons table.
const SingletonName = "review-scheduler"

// DefaultLease is how long a silent instance's claim holds.
const DefaultLease = 10 * time.Minute

// Directory answers who is in a group, from the Identity Store (cmd/portal
// binds awsprov.GroupMemberIDs and awsprov.UserID to it): the group sync.
type Directory interface {
	// GroupMemberIDs returns the user ids of the members of the group
	// whose display name is group (ListGroupMemberships).
	GroupMemberIDs(ctx context.Context, group string) ([]string, error)
	// UserID returns the id of the user whose userName is userName, ""
	// when the directory has none.
	UserID(ctx context.Context, userName string) (string, error)
}

// Scheduler is the review loop. DB is required; the rest is optional.
type Scheduler struct {
	DB *store.DB
	// Owner names this instance in the claim (default host:pid).
	Owner string
	// Lease is how long this instance's claim holds without a tick
	// (default DefaultLease); the loop's interval must be shorter.
	Lease time.Duration
	// OwnersGroups are the groups whose members own each team (the group
	// mapping's teams.<team>.owners). A team without any cannot be judged
	// for want of owners.
	OwnersGroups map[string][]string
	// Directory, when set, is asked who is in each owners group (the
	// group sync); owners are matched by their e-mail address as the
	// directory userName (--identity-store-user-attribute email).
	Directory Directory
	// Orchestrator, when set, returns the version of the cluster's
	// orchestrator (the EKS cluster's Kubernetes version).
	Orchestrator func(ctx context.Context, cluster string) (string, error)
	// Rates prices usage in the evidence (nil: no cost); Accelerators is
	// what one instance of each type carries.
	Rates        *usage.RateCard
	Accelerators map[string]usage.InstanceAccel
	Logger       *slog.Logger

	wakeOnce sync.Once
	wakeC    chan struct{} // see Wake
}

// Wake asks Run for a tick now instead of at the next interval (or the
// first minute): the collector calls it when the cluster's capacity
// changed, so that the capacity trigger's review opens within seconds of
// the change, not up to an interval later (issue 34). Never blocks; wakes
// that come while a tick runs make one more tick after it.
func (s *Scheduler) Wake() {
	select {
	case s.wake() <- struct{}{}:
	default:
	}
}

func (s *Scheduler) wake() chan struct{} {
	s.wakeOnce.Do(func() { s.wakeC = make(chan struct{}, 1) })
	return s.wakeC
}

func (s *Scheduler) owner() string {
	if s.Owner != "" {
		return s.Owner
	}
	h, _ := os.Hostname()
	return fmt.Sprintf("%s:%d", h, os.Getpid())
}

func (s *Scheduler) lease() time.Duration {
	if s.Lease > 0 {
		return s.Lease
	}
	return DefaultLease
}

func (s *Scheduler) log() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// Run ticks every interval until ctx is done, with the clock's time, and
// at once when woken (Wake). The first tick comes a minute after the start
// (or an interval, when shorter), out of the way of a starting portal's
// migrations and seeds, unless a wake comes first.
func (s *Scheduler) Run(ctx context.Context, interval time.Duration, clock func() time.Time) {
	first := time.NewTimer(min(interval, time.Minute))
	select {
	case <-ctx.Done():
		first.Stop()
		return
	case <-first.C:
	case <-s.wake():
		first.Stop()
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := s.Tick(ctx, clock()); err != nil && ctx.Err() == nil {
			if errors.Is(err, store.ErrSingletonHeld) {
				s.log().Debug("review scheduler: another instance runs", "err", err)
			} else {
				s.log().Error("review scheduler tick failed", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.wake():
		}
	}
}

// Tick runs the scheduler once at now: it claims the loop (store.
// ErrSingletonHeld when another instance holds it), then goes over every
// live connection. A failure on one connection is logged and the others
// still run; the first error is returned.
func (s *Scheduler) Tick(ctx context.Context, now time.Time) error {
	if err := s.DB.ClaimSingleton(ctx, SingletonName, s.owner(), now, s.lease()); err != nil {
		return err
	}
	var errs []error
	keep := func(what string, err error) {
		if err != nil {
			s.log().Error("review scheduler", "step", what, "err", err)
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
	}
	live, err := s.DB.LiveConnections(ctx)
	if err != nil {
		return err
	}
	t := &tick{s: s, now: now, members: map[string]memberSet{}}
	for _, c := range live {
		keep(fmt.Sprintf("connection %d", c.ID), t.connection(ctx, c))
	}
	keep("amendments", t.amendments(ctx))
	keep("clusters", t.clusters(ctx, live))
	keep("signals", t.signals(ctx, live))
	keep("overdue", t.overdue(ctx))
	return errors.Join(errs...)
}

// tick is one run's state: the directory's answers, asked once per group.
type tick struct {
	s       *Scheduler
	now     time.Time
	members map[string]memberSet
}

type memberSet struct {
	names map[string]bool
	err   error
}

// connection applies the calendar, orphan and owner rules to one live
// connection.
func (t *tick) connection(ctx context.Context, c store.Connection) error {
	db := t.s.DB
	v, err := db.Version(ctx, c.ID, c.ApprovedVersion)
	if err != nil {
		return err
	}
	// A connection activated before the scheduler existed gets its date
	// from its activation.
	if c.ReviewDue == "" {
		from, err := db.ActivatedAt(ctx, c.ID)
		if err != nil {
			return err
		}
		if from.IsZero() {
			from = c.UpdatedAt
		}
		due := workflow.NextReviewDue(from, v.Contract.ReviewCadenceDays, v.Contract.EndDate)
		if _, err := db.ScheduleReview(ctx, c.ID, due, "from its activation on "+from.UTC().Format(workflow.DateLayout), t.now); err != nil {
			return err
		}
		c.ReviewDue = due
	}
	owners, err := t.owners(ctx, c.Team, v.Contract)
	if err != nil {
		return err
	}
	// Owners who left the owners group.
	seen, err := db.OwnersSeen(ctx, c.ID)
	if err != nil {
		return err
	}
	now := map[string]string{}
	var left []string
	for _, o := range owners {
		if _, dup := now[o.Email]; dup {
			continue
		}
		now[o.Email] = o.InOwnersGroup
		if workflow.OwnerLeft(seen[o.Email], o.InOwnersGroup) {
			left = append(left, o.Email)
		}
	}
	_, groupKnown := t.s.OwnersGroups[c.Team]
	why := workflow.OrphanReason(v.Contract, owners, groupKnown && len(t.s.OwnersGroups[c.Team]) > 0)
	if len(left) > 0 {
		detail := fmt.Sprintf("%s no longer in the owners group of team %s", strings.Join(left, ", "), c.Team)
		if _, err := t.event(ctx, c, store.ReviewEvent{Open: true, Trigger: workflow.TriggerOwnerLeft, Detail: detail, Owners: now}, why); err != nil {
			return err
		}
	} else if !maps.Equal(seen, now) {
		if _, err := db.RecordReviewEvent(ctx, c.ID, store.ReviewEvent{Owners: now}, t.now); err != nil {
			return err
		}
	}
	// Orphans: flagged and reviewed at once; cleared when it no longer holds.
	if why != c.Orphan {
		ev := store.ReviewEvent{Orphan: &why}
		if why != "" {
			ev.Open, ev.Trigger, ev.Detail = true, workflow.TriggerOrphan, why
		}
		if _, err := t.event(ctx, c, ev, why); err != nil {
			return err
		}
	}
	// The calendar.
	if workflow.ReviewIsDue(c.ReviewDue, t.now) {
		trig := workflow.ScheduledTrigger(c.ReviewDue, v.Contract)
		// Keyed by the date and the connection's latest decided review:
		// once per due date while a review is open (its trigger added
		// once), and again after a decision that set the same date.
		latest, err := db.LatestDecidedReview(ctx, c.ID)
		if err != nil {
			return err
		}
		ev := store.ReviewEvent{Key: fmt.Sprintf("%s:conn:%d:%s:after:%d", trig, c.ID, c.ReviewDue, latest), Open: true, Trigger: trig,
			Detail: workflow.ScheduledDetail(trig, c.ReviewDue, v.Contract), DueOn: c.ReviewDue}
		if _, err := t.event(ctx, c, ev, why); err != nil {
			return err
		}
	}
	return nil
}

// event records ev on c, collecting the evidence first when it may open a
// review (c active; re-read: an earlier event of this tick may have opened
// one).
func (t *tick) event(ctx context.Context, c store.Connection, ev store.ReviewEvent, orphan string) (store.ReviewEventOutcome, error) {
	if ev.Open {
		cur, err := t.s.DB.Connection(ctx, c.ID)
		if err != nil {
			return store.ReviewEventOutcome{}, err
		}
		if cur.State == workflow.StateActive {
			if ev.Evidence, err = t.evidence(ctx, cur, orphan); err != nil {
				return store.ReviewEventOutcome{}, err
			}
		}
	}
	out, err := t.s.DB.RecordReviewEvent(ctx, c.ID, ev, t.now)
	if err == nil && (out.Opened || out.Added) {
		t.s.log().Info("review trigger", "connection", c.ID, "team", c.Team, "trigger", ev.Trigger, "opened", out.Opened, "detail", ev.Detail)
	}
	return out, err
}

// owners are the contract's owners with their membership of the team's
// owners group and their last sign-in.
func (t *tick) owners(ctx context.Context, team string, c workflow.Contract) ([]workflow.EvidenceOwner, error) {
	groups := t.s.OwnersGroups[team]
	owners := workflow.ContractOwners(c)
	for i := range owners {
		o := &owners[i]
		o.InOwnersGroup = workflow.InGroupUnknown
		u, err := t.s.DB.UserByEmail(ctx, o.Email)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return nil, err
		default:
			o.LastSignIn = u.LastLogin.UTC()
			if len(groups) > 0 {
				o.InOwnersGroup = yesNo(slices.ContainsFunc(u.Groups, func(g string) bool { return slices.Contains(groups, g) }))
			}
		}
		// The Identity Store, when configured, is the source of truth.
		if t.s.Directory != nil && len(groups) > 0 {
			known, in := t.inDirectory(ctx, groups, o.Email)
			if known {
				o.InOwnersGroup = yesNo(in)
			}
		}
	}
	return owners, nil
}

// inDirectory reports whether email (as the directory userName) is a
// member of any of groups in the directory; known is false when the
// directory could not answer. Each group is listed once per tick.
func (t *tick) inDirectory(ctx context.Context, groups []string, email string) (known, in bool) {
	uid, err := t.s.Directory.UserID(ctx, email)
	if err != nil {
		t.s.log().Warn("review scheduler: group sync: user lookup failed", "user", email, "err", err)
		return false, false
	}
	if uid == "" {
		return true, false // not in the directory: in no group
	}
	known = true
	for _, g := range groups {
		m, ok := t.members[g]
		if !ok {
			ids, err := t.s.Directory.GroupMemberIDs(ctx, g)
			m = memberSet{names: map[string]bool{}, err: err}
			for _, id := range ids {
				m.names[id] = true
			}
			if err != nil {
				t.s.log().Warn("review scheduler: group sync failed", "group", g, "err", err)
			}
			t.members[g] = m
		}
		if m.err != nil {
			known = false
			continue
		}
		if m.names[uid] {
			return true, true
		}
	}
	return known, false
}

func yesNo(b bool) string {
	if b {
		return workflow.InGroupYes
	}
	return workflow.InGroupNo
}

// amendments acts on the applied changes that call for a review.
func (t *tick) amendments(ctx context.Context) error {
	trs, err := t.s.DB.AppliedAmendmentTriggers(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, tr := range trs {
		c, err := t.s.DB.Connection(ctx, tr.ConnectionID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		detail := fmt.Sprintf("version %d changed %s", tr.Version, strings.Join(tr.Fields, ", "))
		ev := store.ReviewEvent{Key: fmt.Sprintf("amendment:%d", tr.ID), Open: c.State.Live(), Trigger: workflow.TriggerAmendment,
			Detail: detail, ResolveTriggers: []int64{tr.ID}}
		if _, err := t.event(ctx, c, ev, c.Orphan); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// clusters watches the capacity and orchestrator version of the clusters
// live connections run on.
func (t *tick) clusters(ctx context.Context, live []store.Connection) error {
	byCluster := map[string][]store.Connection{}
	for _, c := range live {
		byCluster[c.ClusterName] = append(byCluster[c.ClusterName], c)
	}
	names := make([]string, 0, len(byCluster))
	for n := range byCluster {
		names = append(names, n)
	}
	sort.Strings(names)
	var errs []error
	for _, cl := range names {
		inv, err := t.s.DB.Inventory(ctx, cl)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, t.watch(ctx, cl, "capacity", capacityFingerprint(inv), workflow.TriggerCapacity, byCluster[cl],
			func(before string) string {
				return fmt.Sprintf("the capacity of cluster %s changed from %s to %s", cl, orNone(before), orNone(capacityFingerprint(inv)))
			}))
		if t.s.Orchestrator != nil {
			ver, err := t.s.Orchestrator(ctx, cl)
			if err != nil {
				t.s.log().Warn("review scheduler: orchestrator version unavailable", "cluster", cl, "err", err)
				continue
			}
			if ver == "" {
				continue
			}
			errs = append(errs, t.watch(ctx, cl, "orchestrator", ver, workflow.TriggerOrchestrator, byCluster[cl],
				func(before string) string {
					return fmt.Sprintf("the orchestrator version of cluster %s changed from %s to %s", cl, before, ver)
				}))
		}
	}
	return errors.Join(errs...)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// capacityFingerprint is an inventory in words, sorted by instance type.
func capacityFingerprint(inv map[string]int) string {
	types := make([]string, 0, len(inv))
	for t := range inv {
		types = append(types, t)
	}
	sort.Strings(types)
	parts := make([]string, 0, len(types))
	for _, ty := range types {
		parts = append(parts, fmt.Sprintf("%s × %d", ty, inv[ty]))
	}
	return strings.Join(parts, ", ")
}

// watch compares what of cluster with what was last seen: the first
// observation is recorded; a change opens a review of each connection
// (keyed by the change's generation, so a tick that dies half-way opens
// the rest next time and none twice), then is recorded.
func (t *tick) watch(ctx context.Context, cluster, what, fp string, trig workflow.ReviewTrigger, conns []store.Connection, detail func(before string) string) error {
	before, gen, ok, err := t.s.DB.ClusterSeen(ctx, cluster, what)
	if err != nil {
		return err
	}
	if ok && before == fp {
		return nil
	}
	if ok {
		sum := sha256.Sum256([]byte(fp))
		for _, c := range conns {
			ev := store.ReviewEvent{Key: fmt.Sprintf("%s:%s:%d:%s:conn:%d", what, cluster, gen+1, hex.EncodeToString(sum[:6]), c.ID),
				Open: true, Trigger: trig, Detail: detail(before)}
			if _, err := t.event(ctx, c, ev, c.Orphan); err != nil {
				return err
			}
		}
		gen++
	}
	return t.s.DB.SetClusterSeen(ctx, cluster, what, fp, gen, t.now)
}

// signals opens a review of a team's live connections for each open
// signal event of the team, once per event.
func (t *tick) signals(ctx context.Context, live []store.Connection) error {
	evs, err := t.s.DB.SignalEvents(ctx, store.SignalFilter{OpenOnly: true, Limit: 1000})
	if err != nil {
		return err
	}
	var errs []error
	for i := len(evs) - 1; i >= 0; i-- { // oldest first
		e := evs[i]
		if e.Team == "" {
			continue
		}
		for _, c := range live {
			if c.Team != e.Team {
				continue
			}
			ev := store.ReviewEvent{Key: fmt.Sprintf("signal:%d:conn:%d", e.ID, c.ID), Open: true, Trigger: workflow.TriggerSignal,
				Detail: fmt.Sprintf("%s fired on %s: %s", e.Signal.Title(), e.FiredAt.UTC().Format(workflow.DateLayout), e.Detail)}
			if _, err := t.event(ctx, c, ev, c.Orphan); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// overdue reminds reviewers and owners of each open review
// workflow.OverdueReminderDays past due, once.
func (t *tick) overdue(ctx context.Context) error {
	// Only the reviews old enough for a reminder are read.
	cutoff := t.now.UTC().AddDate(0, 0, -workflow.OverdueReminderDays).Format(workflow.DateLayout)
	open, err := t.s.DB.ReviewQueue(ctx, store.ReviewFilter{DueBy: cutoff}, 10000)
	if err != nil {
		return err
	}
	for _, r := range open {
		if r.Demo {
			continue
		}
		ns := workflow.OverdueNotices(r.ConnectionID, r.Team, r.Trigger, r.DueOn, workflow.DaysOverdue(r.DueOn, t.now))
		if len(ns) == 0 {
			continue
		}
		if _, err := t.s.DB.RemindOverdue(ctx, r, ns, t.now); err != nil {
			return err
		}
	}
	return nil
}

// OwnerSignedIn applies the owner and orphan rules, at a sign-in, to the
// live connections whose approved contract names email as an owner: an
// owner who signs in without the team's owners group (the groups of this
// sign-in are recorded already) has left it, and the review opens now
// rather than at the next tick. It claims nothing: what it records is keyed
// and checked in each transaction like a tick's.
func (s *Scheduler) OwnerSignedIn(ctx context.Context, email string, now time.Time) error {
	live, err := s.DB.LiveConnectionsOwnedBy(ctx, email)
	if err != nil {
		return err
	}
	t := &tick{s: s, now: now, members: map[string]memberSet{}}
	var errs []error
	for _, c := range live {
		v, err := s.DB.Version(ctx, c.ID, c.ApprovedVersion)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !slices.ContainsFunc(workflow.ContractOwners(v.Contract), func(o workflow.EvidenceOwner) bool { return strings.EqualFold(o.Email, email) }) {
			continue
		}
		errs = append(errs, t.connection(ctx, c))
	}
	return errors.Join(errs...)
}
