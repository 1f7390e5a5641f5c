package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// User is a person who has logged in at least once.
type User struct {
	ID         int64
	Issuer     string
	Subject    string
	Email      string
	Name       string
	Groups     []string
	FirstLogin time.Time
	LastLogin  time.Time
	// GroupsCheckedAt is when Groups were last confirmed (a login, a
	// session's re-check, notice delivery asking the directory).
	GroupsCheckedAt time.Time
	// DirName is the user's name in the organisation's directory, as
	// their last login recorded it ("" without a directory).
	DirName string
}

// RecordLogin inserts or updates the user identified by (issuer, subject)
// with the claims and groups of this login, and returns the stored row.
func (d *DB) RecordLogin(ctx context.Context, issuer, subject, email, name string, groups []string, now time.Time) (User, error) {
	if groups == nil {
		groups = []string{}
	}
	gj, err := json.Marshal(groups)
	if err != nil {
		return User{}, fmt.Errorf("store: record login: %w", err)
	}
	ts := fmtTime(now)
	u, err := scanUser(d.sql.QueryRowContext(ctx, `
INSERT INTO users (issuer, subject, email, name, groups_json, first_login_at, last_login_at, groups_checked_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (issuer, subject) DO UPDATE SET
    email = excluded.email, name = excluded.name,
    groups_json = excluded.groups_json, last_login_at = excluded.last_login_at,
    groups_checked_at = excluded.groups_checked_at
RETURNING `+userColumns, issuer, subject, email, name, string(gj), ts, ts, ts))
	if err != nil {
		return User{}, fmt.Errorf("store: record login: %w", err)
	}
	return u, nil
}

// GroupsConfirmRecordEvery is how stale the recorded confirmation of
// unchanged groups may get before ConfirmUserGroups writes it again: a
// session re-checks before every change, and writing each time would make
// every request (a refused one too) a write. Notice delivery's limit is a
// session's lifetime (hours), so an hour's lag costs nothing.
const GroupsConfirmRecordEvery = time.Hour

// ConfirmUserGroups records a user's groups as confirmed at now (a group
// re-check of their session, or notice delivery asking the directory):
// notice delivery trusts groups for a session's lifetime after that.
// Changed groups are always written; unchanged ones only when the recorded
// confirmation is older than GroupsConfirmRecordEvery.
func (d *DB) ConfirmUserGroups(ctx context.Context, id int64, groups []string, now time.Time) error {
	if groups == nil {
		groups = []string{}
	}
	gj, err := json.Marshal(groups)
	if err != nil {
		return fmt.Errorf("store: confirm groups: %w", err)
	}
	var old, checked string
	if err := d.sql.QueryRowContext(ctx, `SELECT groups_json, groups_checked_at FROM users WHERE id = ?`, id).Scan(&old, &checked); err != nil {
		return fmt.Errorf("store: confirm groups of user %d: %w", id, err)
	}
	if old == string(gj) {
		if at, err := parseTime(checked); err == nil && now.Sub(at) < GroupsConfirmRecordEvery {
			return nil
		}
	}
	if _, err := d.sql.ExecContext(ctx, `UPDATE users SET groups_json = ?, groups_checked_at = ? WHERE id = ?`, string(gj), fmtTime(now), id); err != nil {
		return fmt.Errorf("store: confirm groups of user %d: %w", id, err)
	}
	return nil
}

// SetUserDirName records the user's name in the organisation's directory
// (the login's, when groups come from the Identity Store), so that notice
// delivery can ask the directory for their groups.
func (d *DB) SetUserDirName(ctx context.Context, id int64, dirName string) error {
	if _, err := d.sql.ExecContext(ctx, `UPDATE users SET dir_name = ? WHERE id = ? AND dir_name != ?`, dirName, id, dirName); err != nil {
		return fmt.Errorf("store: directory name of user %d: %w", id, err)
	}
	return nil
}

// UserByID returns one user or ErrNotFound.
func (d *DB) UserByID(ctx context.Context, id int64) (User, error) {
	u, err := scanUser(d.sql.QueryRowContext(ctx, `SELECT `+userColumns+` FROM users WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return User{}, ErrNotFound
	}
	if err != nil {
		return User{}, fmt.Errorf("store: user %d: %w", id, err)
	}
	return u, nil
}

// userColumns are the users columns scanUser reads, in its order.
const userColumns = `id, issuer, subject, email, name, groups_json, first_login_at, last_login_at, groups_checked_at, dir_name`

// scanUser reads one row of userColumns.
func scanUser(row *sql.Row) (User, error) {
	var u User
	var gj, first, last, checked string
	err := row.Scan(&u.ID, &u.Issuer, &u.Subject, &u.Email, &u.Name, &gj, &first, &last, &checked, &u.DirName)
	if err != nil {
		return User{}, err
	}
	if err := json.Unmarshal([]byte(gj), &u.Groups); err != nil {
		return User{}, fmt.Errorf("groups: %w", err)
	}
	if u.FirstLogin, err = parseTime(first); err != nil {
		return User{}, err
	}
	if u.LastLogin, err = parseTime(last); err != nil {
		return User{}, err
	}
	if checked != "" { // '' only for a row from before migration 00027 ran
		if u.GroupsCheckedAt, err = parseTime(checked); err != nil {
			return User{}, err
		}
	}
	return u, nil
}

// UserByEmail returns the most recently seen user with this email.
func (d *DB) UserByEmail(ctx context.Context, email string) (User, error) {
	var id int64
	err := d.sql.QueryRowContext(ctx, `SELECT id FROM users WHERE lower(email) = lower(?) ORDER BY last_login_at DESC LIMIT 1`, email).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return User{}, ErrNotFound
	}
	if err != nil {
		return User{}, fmt.Errorf("store: user by email: %w", err)
	}
	return d.UserByID(ctx, id)
}
