package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// What the review scheduler (internal/review) reads and records. It decides
// nothing here: the rules are workflow's (ReviewIsDue, OrphanReason,
// ScheduleMissingReview, OnReviewEvent, ...), and every change to a
// connection goes through a workflow command applied by apply.

// ErrSingletonHeld: another instance holds the loop and its heartbeat is
// fresh; this one must not run.
var ErrSingletonHeld = errors.New("store: another instance runs this loop")

// ClaimSingleton makes owner the one running instance of the loop name, or
// keeps it so and renews its heartbeat: it succeeds when nobody holds it,
// owner already does, or the holder's heartbeat is older than lease (it
// died). Otherwise ErrSingletonHeld.
func (d *DB) ClaimSingleton(ctx context.Context, name, owner string, now time.Time, lease time.Duration) error {
	return d.inTx(ctx, func(tx *sql.Tx) error {
		var holder, hb string
		switch err := tx.QueryRowContext(ctx, `SELECT owner, heartbeat_at FROM singletons WHERE name = ?`, name).Scan(&holder, &hb); {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return fmt.Errorf("store: claim %s: %w", name, err)
		default:
			t, err := parseTime(hb)
			if err != nil {
				return err
			}
			if holder != owner && t.After(now.Add(-lease)) {
				return fmt.Errorf("%w (%s: held by %s, heartbeat %s)", ErrSingletonHeld, name, holder, hb)
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO singletons (name, owner, started_at, heartbeat_at) VALUES (?, ?, ?, ?)
ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, heartbeat_at = excluded.heartbeat_at,
  started_at = CASE WHEN singletons.owner = excluded.owner THEN singletons.started_at ELSE excluded.started_at END`,
			name, owner, fmtTime(now), fmtTime(now))
		if err != nil {
			return fmt.Errorf("store: claim %s: %w", name, err)
		}
		return nil
	})
}

// LiveConnections lists the connections that are active or under review
// (with an approved version), by id.
func (d *DB) LiveConnections(ctx context.Context) ([]Connection, error) {
	return d.queryConns(ctx, "live connections", `SELECT `+connCols+` FROM connections c JOIN users u ON u.id = c.requester_id
WHERE c.state IN (`+liveStatesSQL+`) AND c.approved_version IS NOT NULL ORDER BY c.id`)
}

// LiveConnectionsOwnedBy lists the live connections whose approved
// contract names email (any case) as one of its owners: the connections a
// sign-in of email may concern.
func (d *DB) LiveConnectionsOwnedBy(ctx context.Context, email string) ([]Connection, error) {
	return d.liveConnectionsNaming(ctx, "connections owned", email, "business_owner", "operations_owner", "cost_owner", "exception_owner")
}

// LiveConnectionsOfExceptionOwner lists the live connections whose
// approved contract names email (any case) as its exception owner.
func (d *DB) LiveConnectionsOfExceptionOwner(ctx context.Context, email string) ([]Connection, error) {
	return d.liveConnectionsNaming(ctx, "connections of an exception owner", email, "exception_owner")
}

// liveConnectionsNaming lists the live connections whose approved contract
// has email (any case) in one of the owner fields.
func (d *DB) liveConnectionsNaming(ctx context.Context, what, email string, fields ...string) ([]Connection, error) {
	named := make([]string, len(fields))
	for i, f := range fields {
		named[i] = `lower(trim(COALESCE(` + d.dialect.jsonText("v.body", f) + `, '')))`
	}
	return d.queryConns(ctx, what, `SELECT `+connCols+` FROM connections c JOIN users u ON u.id = c.requester_id
JOIN contract_versions v ON v.connection_id = c.id AND v.version = c.approved_version
WHERE c.state IN (`+liveStatesSQL+`) AND lower(trim(?)) IN (`+strings.Join(named, ", ")+`)
ORDER BY c.id`, email)
}

// ActivatedAt is when connection id became active: its last
// provisioning.succeeded audit event, or, without one (a connection made
// active before the audit named it), its last approval; zero when neither
// is recorded.
func (d *DB) ActivatedAt(ctx context.Context, id int64) (time.Time, error) {
	var at string
	err := d.sql.QueryRowContext(ctx, `SELECT COALESCE(
  (SELECT max(at) FROM audit_events WHERE object_type = 'connection' AND object_id = ? AND action = 'provisioning.succeeded'),
  (SELECT max(created_at) FROM decisions WHERE connection_id = ? AND kind = 'approve'), '')`, id, id).Scan(&at)
	if err != nil {
		return time.Time{}, fmt.Errorf("store: activated at: %w", err)
	}
	if at == "" {
		return time.Time{}, nil
	}
	return parseTime(at)
}

// ScheduleReview gives live connection id its next review date when it has
// none yet (workflow.ScheduleReview); a connection that has one meanwhile
// is left alone. It reports whether it set it.
func (d *DB) ScheduleReview(ctx context.Context, id int64, due, reason string, now time.Time) (bool, error) {
	set := false
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		cur, s, err := loadConn(ctx, tx, id, false)
		if err != nil {
			return err
		}
		e, ok, err := workflow.ScheduleMissingReview(s, due, reason, now)
		if err != nil {
			return err
		}
		_, _, err = apply(ctx, tx, &cur, e, now)
		set = ok && err == nil
		return err
	})
	return set, err
}

// ReviewEvent is what the scheduler records about one connection in one
// transaction: a review to open (or, when one is open, the trigger to add
// to it), the orphan flag, the amendment triggers it resolves, and the
// owners' membership as seen now.
type ReviewEvent struct {
	// Key names the event and the connection; an event whose key is
	// recorded already is skipped whole. "" records no key.
	Key string
	// Open opens a review with Trigger, Detail, DueOn and Evidence on an
	// active connection, or adds the trigger to the open review of one
	// under review.
	Open     bool
	Trigger  workflow.ReviewTrigger
	Detail   string
	DueOn    string
	Evidence []byte
	// Orphan, when not nil, is the orphan flag to set ("" clears it).
	Orphan *string
	// ResolveTriggers are review_triggers rows the event answers.
	ResolveTriggers []int64
	// Owners is each owner's membership of the owners group as seen now
	// (workflow.InGroupYes, ...), by e-mail address.
	Owners map[string]string
}

// ReviewEventOutcome is what RecordReviewEvent did.
type ReviewEventOutcome struct {
	Skipped bool // the key was recorded already: nothing done
	Opened  bool // a review opened
	Added   bool // the trigger was added to the open review
}

// RecordReviewEvent records ev on connection id in one transaction. A
// connection that is no longer live opens nothing (the key and the
// resolved triggers are still recorded).
func (d *DB) RecordReviewEvent(ctx context.Context, id int64, ev ReviewEvent, now time.Time) (ReviewEventOutcome, error) {
	var out ReviewEventOutcome
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		out = ReviewEventOutcome{}
		if ev.Key != "" {
			res, err := tx.ExecContext(ctx, `INSERT INTO review_events (key, connection_id, trigger, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`,
				ev.Key, id, string(ev.Trigger), fmtTime(now))
			if err != nil {
				return fmt.Errorf("store: review event: %w", err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				out.Skipped = true
				return nil
			}
		}
		cur, s, err := loadConn(ctx, tx, id, false)
		if err != nil {
			return err
		}
		in := workflow.ReviewEventInput{Open: ev.Open, Trigger: ev.Trigger, Detail: ev.Detail, DueOn: ev.DueOn, Evidence: ev.Evidence, Orphan: ev.Orphan}
		if in.ReviewOpen, err = hasOpenReview(ctx, tx, id); err != nil {
			return err
		}
		e, err := workflow.OnReviewEvent(s, in, now)
		if err != nil {
			return err
		}
		if _, _, err := apply(ctx, tx, &cur, e, now); err != nil {
			return err
		}
		out.Opened, out.Added = e.OpenReview != nil, e.NoteReview != nil
		for _, t := range ev.ResolveTriggers {
			if _, err := tx.ExecContext(ctx, `UPDATE review_triggers SET resolved_at = ? WHERE id = ? AND connection_id = ? AND resolved_at = ''`,
				fmtTime(now), t, id); err != nil {
				return fmt.Errorf("store: resolve review trigger %d: %w", t, err)
			}
		}
		for email, in := range ev.Owners {
			if _, err := tx.ExecContext(ctx, `INSERT INTO review_owner_seen (connection_id, email, in_group, seen_at) VALUES (?, ?, ?, ?)
ON CONFLICT (connection_id, email) DO UPDATE SET in_group = excluded.in_group, seen_at = excluded.seen_at`, id, email, in, fmtTime(now)); err != nil {
				return fmt.Errorf("store: owner seen: %w", err)
			}
		}
		return nil
	})
	return out, err
}

// OwnersSeen is each owner's membership of the owners group as the
// scheduler last recorded it for connection id, by e-mail address.
func (d *DB) OwnersSeen(ctx context.Context, id int64) (map[string]string, error) {
	rows, err := d.sql.QueryContext(ctx, `SELECT email, in_group FROM review_owner_seen WHERE connection_id = ?`, id)
	if err != nil {
		return nil, fmt.Errorf("store: owners seen: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var e, in string
		if err := rows.Scan(&e, &in); err != nil {
			return nil, fmt.Errorf("store: owners seen: %w", err)
		}
		out[e] = in
	}
	return out, rows.Err()
}

// AmendmentTrigger is an approved change of owners, roles, account,
// region, data classification or signals (review_triggers) not yet acted
// on.
type AmendmentTrigger struct {
	ID           int64
	ConnectionID int64
	Version      int
	Fields       []string
	CreatedAt    time.Time
}

// AppliedAmendmentTriggers lists the unresolved review triggers whose
// version is applied (the connection's approved version reached it), by id.
// A change approved but not yet applied waits: the review looks at what
// runs.
func (d *DB) AppliedAmendmentTriggers(ctx context.Context) ([]AmendmentTrigger, error) {
	rows, err := d.sql.QueryContext(ctx, `SELECT t.id, t.connection_id, t.version, t.fields, t.created_at FROM review_triggers t
JOIN connections c ON c.id = t.connection_id WHERE t.resolved_at = '' AND c.approved_version >= t.version ORDER BY t.id`)
	if err != nil {
		return nil, fmt.Errorf("store: review triggers: %w", err)
	}
	defer rows.Close()
	var out []AmendmentTrigger
	for rows.Next() {
		var t AmendmentTrigger
		var fields, at string
		if err := rows.Scan(&t.ID, &t.ConnectionID, &t.Version, &fields, &at); err != nil {
			return nil, fmt.Errorf("store: review triggers: %w", err)
		}
		t.Fields = strings.Fields(fields)
		if t.CreatedAt, err = parseTime(at); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// ClusterSeen is the last fingerprint of what ("capacity" or
// "orchestrator") the scheduler saw of cluster, and how many times it
// changed; ok false before the first observation.
func (d *DB) ClusterSeen(ctx context.Context, cluster, what string) (fingerprint string, generation int, ok bool, err error) {
	err = d.sql.QueryRowContext(ctx, `SELECT fingerprint, generation FROM review_cluster_seen WHERE cluster = ? AND what = ?`, cluster, what).Scan(&fingerprint, &generation)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, false, nil
	}
	if err != nil {
		return "", 0, false, fmt.Errorf("store: cluster seen: %w", err)
	}
	return fingerprint, generation, true, nil
}

// SetClusterSeen records the fingerprint of what of cluster and its
// generation.
func (d *DB) SetClusterSeen(ctx context.Context, cluster, what, fingerprint string, generation int, now time.Time) error {
	_, err := d.sql.ExecContext(ctx, `INSERT INTO review_cluster_seen (cluster, what, fingerprint, generation, seen_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (cluster, what) DO UPDATE SET fingerprint = excluded.fingerprint, generation = excluded.generation, seen_at = excluded.seen_at`,
		cluster, what, fingerprint, generation, fmtTime(now))
	if err != nil {
		return fmt.Errorf("store: cluster seen: %w", err)
	}
	return nil
}

// RemindOverdue leaves the notices of an overdue review in the outbox
// once: the review's reminder is keyed ("overdue:<review id>") in
// review_events, in the same transaction. It reports whether it sent them.
func (d *DB) RemindOverdue(ctx context.Context, r Review, notices []workflow.Notice, now time.Time) (bool, error) {
	sent := false
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO review_events (key, connection_id, trigger, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			fmt.Sprintf("overdue:%d", r.ID), r.ConnectionID, string(r.Trigger), fmtTime(now))
		if err != nil {
			return fmt.Errorf("store: overdue reminder: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		if err := insertNotices(ctx, tx, r.ConnectionID, r.Team, notices, now); err != nil {
			return err
		}
		sent = true
		return nil
	})
	return sent, err
}

// ApprovedVersion is a version of a connection as it was approved.
type ApprovedVersion struct {
	Version    Version
	ApprovedAt time.Time // its last approval
	ApprovedBy string
}

// ApprovedVersions lists connection id's versions that were approved, up
// to its approved version, oldest first.
func (d *DB) ApprovedVersions(ctx context.Context, id int64) ([]ApprovedVersion, error) {
	c, err := d.Connection(ctx, id)
	if err != nil {
		return nil, err
	}
	ds, err := d.Decisions(ctx, id)
	if err != nil {
		return nil, err
	}
	last := map[int]DecisionRow{}
	var order []int
	for _, r := range ds {
		if r.Kind != "approve" || r.Version > c.ApprovedVersion {
			continue
		}
		if _, ok := last[r.Version]; !ok {
			order = append(order, r.Version)
		}
		last[r.Version] = r
	}
	var out []ApprovedVersion
	for _, v := range order {
		ver, err := d.Version(ctx, id, v)
		if err != nil {
			return nil, err
		}
		out = append(out, ApprovedVersion{Version: ver, ApprovedAt: last[v].CreatedAt, ApprovedBy: last[v].ActorEmail})
	}
	return out, nil
}

// SingletonHolder is who holds the loop name and its last heartbeat;
// ErrNotFound when nobody ever did.
func (d *DB) SingletonHolder(ctx context.Context, name string) (string, time.Time, error) {
	var owner, hb string
	err := d.sql.QueryRowContext(ctx, `SELECT owner, heartbeat_at FROM singletons WHERE name = ?`, name).Scan(&owner, &hb)
	if errors.Is(err, sql.ErrNoRows) {
		return "", time.Time{}, ErrNotFound
	}
	if err != nil {
		return "", time.Time{}, fmt.Errorf("store: holder of %s: %w", name, err)
	}
	t, err := parseTime(hb)
	return owner, t, err
}

// ReleaseSingleton gives up the loop name if owner holds it (a clean
// shutdown), so another instance need not wait out the lease.
func (d *DB) ReleaseSingleton(ctx context.Context, name, owner string) error {
	return d.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM singletons WHERE name = ? AND owner = ?`, name, owner); err != nil {
			return fmt.Errorf("store: release %s: %w", name, err)
		}
		return nil
	})
}
