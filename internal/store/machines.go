package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// RecordMachineUse records one use of a machine identity (issue 37; what:
// the request's method and path) and returns
// its user record: the record a machine's requests name as their
// requester, keyed by (issuer, subject) as a person's is, with subject
// "machine:<name>", no email and no groups (a machine's groups are the
// groups file's, read at each use, so notice delivery never counts it as
// a team's owner). The record's upsert and the machine.use audit event
// (actor "machine:<name>", object the record) are one transaction, the
// request's only write, shared with the other API requests' uses that
// arrive together, as a personal token's use is (RecordTokenUse).
func (d *DB) RecordMachineUse(ctx context.Context, issuer, subject, what string, now time.Time) (User, error) {
	u, _, err := d.recordMachineUse(ctx, issuer, subject, what, now)
	return u, err
}

// recordMachineUse is RecordMachineUse that also says how many uses shared
// the use's transaction (tests).
func (d *DB) recordMachineUse(ctx context.Context, issuer, subject, what string, now time.Time) (User, int, error) {
	u := &apiUse{issuer: issuer, subject: subject, what: what, at: now}
	if err := d.uses.record(ctx, d, u); err != nil {
		return User{}, u.batchLen, err
	}
	return u.user, u.batchLen, nil
}

// upsertMachine records u's machine in users and returns its record as
// the upsert left it.
func upsertMachine(ctx context.Context, tx *sql.Tx, u *apiUse) (User, error) {
	ts := fmtTime(u.at)
	usr, err := scanUser(tx.QueryRowContext(ctx, `
INSERT INTO users (issuer, subject, email, name, groups_json, first_login_at, last_login_at, groups_checked_at)
VALUES (?, ?, '', ?, '[]', ?, ?, ?)
ON CONFLICT (issuer, subject) DO UPDATE SET last_login_at = excluded.last_login_at, groups_json = '[]'
RETURNING `+userColumns, u.issuer, u.subject, u.subject, ts, ts, ts))
	if err != nil {
		return User{}, fmt.Errorf("store: machine %s use: %w", u.subject, err)
	}
	return usr, nil
}
