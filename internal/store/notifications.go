package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Notification delivery (migrations/00017_notifications.sql). The outbox rows
// apply writes with every state change are dispatched once into one delivery
// per configured channel; each delivery is claimed with a lease, tried, and
// completed or given a next attempt. internal/notify runs it.

// Channel is a way a notice reaches people.
type Channel string

// The channels. In-app is always on; email and webhook only when configured.
const (
	ChannelInApp   Channel = "inapp"
	ChannelEmail   Channel = "email"
	ChannelWebhook Channel = "webhook"
)

// ErrDeliveryLeaseLost: the delivery was claimed again by someone else (its lease had
// run out) or is already done; the caller's outcome is not recorded.
var ErrDeliveryLeaseLost = errors.New("store: the delivery's lease was lost")

// Delivery is one outbox row on one channel.
type Delivery struct {
	ID          int64
	OutboxID    int64
	Channel     Channel
	Recipients  string
	Attempts    int
	NextAttempt time.Time
	LastError   string
	Delivered   time.Time // zero until delivered

	// The outbox row.
	ConnectionID int64
	Team         string
	Kind         string
	Audience     string
	Subject      string
	// Body is more text after the subject ("" for most notices): a
	// published audit head's fields and signature.
	Body    string
	Created time.Time
}

// DispatchOutbox gives every outbox row not yet dispatched (up to limit, in
// order) one delivery per channel, and marks it dispatched, in one
// transaction: a row is dispatched exactly once, on the channels configured
// at that moment. It returns how many outbox rows it dispatched.
func (d *DB) DispatchOutbox(ctx context.Context, channels []Channel, now time.Time, limit int) (int, error) {
	if len(channels) == 0 {
		return 0, errors.New("store: dispatch: no channel")
	}
	// A read first: the loop runs every few seconds, and most runs find
	// nothing, which then takes no write lock.
	var pending bool
	if err := d.sql.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM outbox WHERE dispatched_at = '')`).Scan(&pending); err != nil {
		return 0, fmt.Errorf("store: dispatch: %w", err)
	}
	if !pending {
		return 0, nil
	}
	n := 0
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		ids, err := column[int64](ctx, tx, `SELECT id FROM outbox WHERE dispatched_at = '' ORDER BY id LIMIT ?`, limit)
		if err != nil {
			return err
		}
		ts := fmtTime(now)
		for _, id := range ids {
			for _, ch := range channels {
				if _, err := tx.ExecContext(ctx, `INSERT INTO deliveries (outbox_id, channel, next_attempt_at, created_at) VALUES (?, ?, ?, ?)
ON CONFLICT (outbox_id, channel) DO NOTHING`, id, ch, ts, ts); err != nil {
					return fmt.Errorf("store: dispatch outbox %d: %w", id, err)
				}
			}
			if _, err := tx.ExecContext(ctx, `UPDATE outbox SET dispatched_at = ? WHERE id = ?`, ts, id); err != nil {
				return fmt.Errorf("store: dispatch outbox %d: %w", id, err)
			}
		}
		n = len(ids)
		return nil
	})
	return n, err
}

const deliveryColumns = `d.id, d.outbox_id, d.channel, d.recipients, d.attempts, d.next_attempt_at, d.last_error, d.delivered_at,
 coalesce(o.connection_id, 0), o.team, o.kind, o.recipients, o.subject, o.body, o.created_at`

func scanDelivery(sc interface{ Scan(...any) error }) (Delivery, error) {
	var dl Delivery
	var next, delivered, created string
	if err := sc.Scan(&dl.ID, &dl.OutboxID, &dl.Channel, &dl.Recipients, &dl.Attempts, &next, &dl.LastError, &delivered,
		&dl.ConnectionID, &dl.Team, &dl.Kind, &dl.Audience, &dl.Subject, &dl.Body, &created); err != nil {
		return Delivery{}, err
	}
	var err error
	if dl.NextAttempt, err = parseTime(next); err != nil {
		return Delivery{}, fmt.Errorf("store: delivery %d: %w", dl.ID, err)
	}
	if delivered != "" {
		if dl.Delivered, err = parseTime(delivered); err != nil {
			return Delivery{}, fmt.Errorf("store: delivery %d: %w", dl.ID, err)
		}
	}
	if dl.Created, err = parseTime(created); err != nil {
		return Delivery{}, fmt.Errorf("store: delivery %d: %w", dl.ID, err)
	}
	return dl, nil
}

// ClaimDelivery takes the channel's oldest due delivery that nobody holds:
// its lease runs until now+lease, and its attempts count up by one (the
// attempt number fences the outcome: CompleteDelivery and FailDelivery of an
// attempt whose lease was taken over record nothing). A claim whose process
// died is claimed again once its lease has run out. ok is false when nothing
// is due.
func (d *DB) ClaimDelivery(ctx context.Context, ch Channel, now time.Time, lease time.Duration) (dl Delivery, ok bool, err error) {
	ts := fmtTime(now)
	var due bool
	if err := d.sql.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM deliveries WHERE channel = ? AND delivered_at = '' AND next_attempt_at <= ? AND lease_until <= ?)`,
		ch, ts, ts).Scan(&due); err != nil {
		return Delivery{}, false, fmt.Errorf("store: claim delivery: %w", err)
	}
	if !due { // nothing to claim: no write lock taken
		return Delivery{}, false, nil
	}
	err = d.inTx(ctx, func(tx *sql.Tx) error {
		var id int64
		switch err := tx.QueryRowContext(ctx, `
UPDATE deliveries SET attempts = attempts + 1, lease_until = ?
WHERE id = (SELECT id FROM deliveries WHERE channel = ? AND delivered_at = '' AND next_attempt_at <= ? AND lease_until <= ?
            ORDER BY next_attempt_at, id LIMIT 1`+d.dialect.skipLocked()+`)
RETURNING id`, fmtTime(now.Add(lease)), ch, ts, ts).Scan(&id); {
		case errors.Is(err, sql.ErrNoRows):
			return nil
		case err != nil:
			return fmt.Errorf("store: claim delivery: %w", err)
		}
		if dl, err = scanDelivery(tx.QueryRowContext(ctx, `SELECT `+deliveryColumns+` FROM deliveries d JOIN outbox o ON o.id = d.outbox_id WHERE d.id = ?`, id)); err != nil {
			return fmt.Errorf("store: claim delivery: %w", err)
		}
		ok = true
		return nil
	})
	return dl, ok, err
}

// finish records a delivered attempt inside tx: fenced by the attempt, and
// the outbox row delivered once every channel is.
func finish(ctx context.Context, tx *sql.Tx, dl Delivery, recipients string, now time.Time) error {
	ts := fmtTime(now)
	res, err := tx.ExecContext(ctx, `UPDATE deliveries SET delivered_at = ?, recipients = ?, last_error = '', lease_until = ''
WHERE id = ? AND attempts = ? AND delivered_at = ''`, ts, recipients, dl.ID, dl.Attempts)
	if err != nil {
		return fmt.Errorf("store: delivery %d: %w", dl.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrDeliveryLeaseLost
	}
	if _, err := tx.ExecContext(ctx, `UPDATE outbox SET delivered_at = ? WHERE id = ? AND delivered_at = ''
AND NOT EXISTS (SELECT 1 FROM deliveries WHERE outbox_id = ? AND delivered_at = '')`, ts, dl.OutboxID, dl.OutboxID); err != nil {
		return fmt.Errorf("store: outbox %d: %w", dl.OutboxID, err)
	}
	return nil
}

// CompleteDelivery records the claimed attempt dl as delivered to
// recipients.
func (d *DB) CompleteDelivery(ctx context.Context, dl Delivery, recipients string, now time.Time) error {
	return d.inTx(ctx, func(tx *sql.Tx) error { return finish(ctx, tx, dl, recipients, now) })
}

// DeliverInApp writes the in-app notifications of the claimed attempt dl,
// one per user, and records it delivered, in one transaction: each user gets
// the notice exactly once however often it is tried.
func (d *DB) DeliverInApp(ctx context.Context, dl Delivery, users []int64, recipients string, now time.Time) error {
	return d.inTx(ctx, func(tx *sql.Tx) error {
		var conn any
		if dl.ConnectionID != 0 {
			conn = dl.ConnectionID
		}
		personal := 0
		if _, ok := workflow.Audience(dl.Audience).Person(); ok {
			personal = 1
		}
		for _, u := range users {
			if _, err := tx.ExecContext(ctx, `INSERT INTO notifications (user_id, outbox_id, connection_id, kind, subject, created_at, team, personal)
VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (outbox_id, user_id) DO NOTHING`,
				u, dl.OutboxID, conn, dl.Kind, dl.Subject, fmtTime(dl.Created), dl.Team, personal); err != nil {
				return fmt.Errorf("store: notification: %w", err)
			}
		}
		return finish(ctx, tx, dl, recipients, now)
	})
}

// FailDelivery records the claimed attempt dl as failed with errText (which
// must hold no secret), to be tried again at next.
func (d *DB) FailDelivery(ctx context.Context, dl Delivery, recipients, errText string, next time.Time) error {
	if errText == "" {
		errText = "failed"
	}
	res, err := d.sql.ExecContext(ctx, `UPDATE deliveries SET last_error = ?, recipients = ?, next_attempt_at = ?, lease_until = ''
WHERE id = ? AND attempts = ? AND delivered_at = ''`, errText, recipients, fmtTime(next), dl.ID, dl.Attempts)
	if err != nil {
		return fmt.Errorf("store: delivery %d: %w", dl.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrDeliveryLeaseLost
	}
	return nil
}

// FailingDeliveries lists the deliveries not yet delivered that failed at
// least once, oldest first: the admins' page of failures.
func (d *DB) FailingDeliveries(ctx context.Context, limit int) ([]Delivery, error) {
	rows, err := d.sql.QueryContext(ctx, `SELECT `+deliveryColumns+` FROM deliveries d JOIN outbox o ON o.id = d.outbox_id
WHERE d.delivered_at = '' AND d.last_error != '' ORDER BY d.id LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("store: failing deliveries: %w", err)
	}
	defer rows.Close()
	var out []Delivery
	for rows.Next() {
		dl, err := scanDelivery(rows)
		if err != nil {
			return nil, fmt.Errorf("store: failing deliveries: %w", err)
		}
		out = append(out, dl)
	}
	return out, rows.Err()
}

// Deliveries lists every delivery of an outbox row, by channel (tests and
// diagnostics).
func (d *DB) Deliveries(ctx context.Context, outboxID int64) ([]Delivery, error) {
	rows, err := d.sql.QueryContext(ctx, `SELECT `+deliveryColumns+` FROM deliveries d JOIN outbox o ON o.id = d.outbox_id
WHERE d.outbox_id = ? ORDER BY d.channel`, outboxID)
	if err != nil {
		return nil, fmt.Errorf("store: deliveries: %w", err)
	}
	defer rows.Close()
	var out []Delivery
	for rows.Next() {
		dl, err := scanDelivery(rows)
		if err != nil {
			return nil, fmt.Errorf("store: deliveries: %w", err)
		}
		out = append(out, dl)
	}
	return out, rows.Err()
}

// Recipient is a portal user as notice delivery sees them: who they are and
// the groups of their last login (or re-check), from which their roles and
// team ownerships are resolved at delivery time, when those groups were
// confirmed, and their directory user name ("" when unknown).
type Recipient struct {
	ID        int64
	Email     string
	Groups    []string
	CheckedAt time.Time
	DirName   string
}

// Recipients lists every portal user with their last known groups.
func (d *DB) Recipients(ctx context.Context) ([]Recipient, error) {
	rows, err := d.sql.QueryContext(ctx, `SELECT id, email, groups_json, groups_checked_at, dir_name FROM users ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("store: recipients: %w", err)
	}
	defer rows.Close()
	var out []Recipient
	for rows.Next() {
		var r Recipient
		var gj, checked string
		if err := rows.Scan(&r.ID, &r.Email, &gj, &checked, &r.DirName); err != nil {
			return nil, fmt.Errorf("store: recipients: %w", err)
		}
		if err := json.Unmarshal([]byte(gj), &r.Groups); err != nil {
			return nil, fmt.Errorf("store: recipients: user %d: groups: %w", r.ID, err)
		}
		if checked != "" {
			if r.CheckedAt, err = parseTime(checked); err != nil {
				return nil, fmt.Errorf("store: recipients: user %d: %w", r.ID, err)
			}
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Notification is one in-app notice of one user.
type Notification struct {
	ID           int64
	ConnectionID int64  // 0: about no connection
	Team         string // the team the notice is about ("" for none)
	Kind         string
	Subject      string
	Created      time.Time
	Read         bool
}

// Notifications returns userID's notifications, newest first (at most
// limit). Only that user's: every query here is keyed by the user.
func (d *DB) Notifications(ctx context.Context, userID int64, scope workflow.NoticeScope, limit int) ([]Notification, error) {
	return d.NotificationsBefore(ctx, userID, scope, 0, limit)
}

// NotificationsBefore is Notifications with id < before (0: from the
// newest): a page after the one that ended at before.
func (d *DB) NotificationsBefore(ctx context.Context, userID int64, scope workflow.NoticeScope, before int64, limit int) ([]Notification, error) {
	cond, args := noticeScopeSQL(scope)
	if before > 0 {
		cond, args = cond+" AND id < ?", append(args, before)
	}
	rows, err := d.sql.QueryContext(ctx, `SELECT id, coalesce(connection_id, 0), team, kind, subject, created_at, read_at != ''
FROM notifications WHERE user_id = ? AND `+cond+` ORDER BY id DESC LIMIT ?`,
		append(append([]any{userID}, args...), limit)...)
	if err != nil {
		return nil, fmt.Errorf("store: notifications: %w", err)
	}
	defer rows.Close()
	var out []Notification
	for rows.Next() {
		var n Notification
		var created string
		if err := rows.Scan(&n.ID, &n.ConnectionID, &n.Team, &n.Kind, &n.Subject, &created, &n.Read); err != nil {
			return nil, fmt.Errorf("store: notifications: %w", err)
		}
		if n.Created, err = parseTime(created); err != nil {
			return nil, fmt.Errorf("store: notification %d: %w", n.ID, err)
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// Notification returns userID's notification id within scope, or
// ErrNotFound: another user's, or one scope leaves out, is not found.
func (d *DB) Notification(ctx context.Context, userID int64, scope workflow.NoticeScope, id int64) (Notification, error) {
	cond, args := noticeScopeSQL(scope)
	var n Notification
	var created string
	err := d.sql.QueryRowContext(ctx, `SELECT id, coalesce(connection_id, 0), team, kind, subject, created_at, read_at != ''
FROM notifications WHERE id = ? AND user_id = ? AND `+cond, append([]any{id, userID}, args...)...).Scan(&n.ID, &n.ConnectionID, &n.Team, &n.Kind, &n.Subject, &created, &n.Read)
	if errors.Is(err, sql.ErrNoRows) {
		return n, ErrNotFound
	}
	if err != nil {
		return n, fmt.Errorf("store: notification: %w", err)
	}
	if n.Created, err = parseTime(created); err != nil {
		return n, fmt.Errorf("store: notification %d: %w", n.ID, err)
	}
	return n, nil
}

// noticeScopeSQL is the condition on the notifications row that keeps
// the notices scope lets its user read (workflow.NoticeScope), and its
// arguments: notices about no team, addressed to the reader by name, or
// about a team the scope names (every team when AllTeams).
func noticeScopeSQL(scope workflow.NoticeScope) (string, []any) {
	cond, args := noticeTeamsSQL(scope)
	if len(scope.Within) == 0 || scope.None {
		return cond, args
	}
	for _, t := range scope.Within {
		args = append(args, t)
	}
	return "(" + cond + " AND (team = '' OR team IN (" + strings.TrimSuffix(strings.Repeat("?,", len(scope.Within)), ",") + ")))", args
}

// noticeTeamsSQL is noticeScopeSQL without scope.Within.
func noticeTeamsSQL(scope workflow.NoticeScope) (string, []any) {
	switch {
	case scope.None:
		return "1 = 0", nil
	case scope.AllTeams:
		return "1 = 1", nil
	case len(scope.Teams) == 0:
		return "(team = '' OR personal = 1)", nil
	}
	args := make([]any, len(scope.Teams))
	for i, t := range scope.Teams {
		args[i] = t
	}
	return "(team = '' OR personal = 1 OR team IN (" + strings.TrimSuffix(strings.Repeat("?,", len(scope.Teams)), ",") + "))", args
}

// UnreadNotifications counts userID's unread notifications within scope:
// one range of the notifications_unread partial index, the scope read from
// the rows themselves (the header shows it on every page).
func (d *DB) UnreadNotifications(ctx context.Context, userID int64, scope workflow.NoticeScope) (int, error) {
	var n int
	cond, args := noticeScopeSQL(scope)
	if err := d.sql.QueryRowContext(ctx, `SELECT count(*) FROM notifications WHERE user_id = ? AND read_at = '' AND `+cond,
		append([]any{userID}, args...)...).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: unread notifications: %w", err)
	}
	return n, nil
}

// MarkNotificationRead marks userID's notification id read. Another user's
// notification, one outside scope, or one that does not exist, is
// ErrNotFound (and nothing changes); one already read stays as it is.
func (d *DB) MarkNotificationRead(ctx context.Context, userID int64, scope workflow.NoticeScope, id int64, now time.Time) error {
	cond, args := noticeScopeSQL(scope)
	return d.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE notifications SET read_at = ? WHERE id = ? AND user_id = ? AND read_at = '' AND `+cond,
			append([]any{fmtTime(now), id, userID}, args...)...)
		if err != nil {
			return fmt.Errorf("store: mark read: %w", err)
		}
		if n, _ := res.RowsAffected(); n > 0 {
			return nil
		}
		var mine int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM notifications WHERE id = ? AND user_id = ? AND `+cond,
			append([]any{id, userID}, args...)...).Scan(&mine); err != nil {
			return fmt.Errorf("store: mark read: %w", err)
		}
		if mine == 0 {
			return ErrNotFound
		}
		return nil
	})
}

// MarkAllNotificationsRead marks every unread notification of userID
// within scope read and returns how many.
func (d *DB) MarkAllNotificationsRead(ctx context.Context, userID int64, scope workflow.NoticeScope, now time.Time) (int64, error) {
	cond, args := noticeScopeSQL(scope)
	res, err := d.sql.ExecContext(ctx, `UPDATE notifications SET read_at = ? WHERE user_id = ? AND read_at = '' AND `+cond,
		append([]any{fmtTime(now), userID}, args...)...)
	if err != nil {
		return 0, fmt.Errorf("store: mark all read: %w", err)
	}
	return res.RowsAffected()
}

// JoinRecipients is how a delivery records who it went to.
func JoinRecipients(emails []string) string { return strings.Join(emails, ", ") }
