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

// APIToken is a stored personal access token (migrations/00035): the rules'
// view of it and when and from where it was last used. The secret is not
// here: only its hash is stored, and only TokenByHash reads by it.
type APIToken struct {
	workflow.Token
	LastUsedAt   time.Time // zero before the first use
	LastUsedFrom string
}

// CreateToken stores t (made by workflow.CheckTokenRequest) with the hash of
// its secret and records token.create in the audit trail, in one
// transaction, and returns its id.
func (d *DB) CreateToken(ctx context.Context, t workflow.Token, secretHash string, by workflow.Actor) (int64, error) {
	teams := t.Teams
	if teams == nil {
		teams = []string{}
	}
	tj, err := json.Marshal(teams)
	if err != nil {
		return 0, fmt.Errorf("store: create token: %w", err)
	}
	var id int64
	err = d.inTx(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `
INSERT INTO api_tokens (user_id, name, scope, teams_json, secret_hash, created_at, expires_at)
VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id`, t.UserID, t.Name, string(t.Scope), string(tj), secretHash,
			fmtTime(t.CreatedAt), fmtTime(t.ExpiresAt)).Scan(&id); err != nil {
			return fmt.Errorf("store: create token: %w", err)
		}
		reason := fmt.Sprintf("%q, %s, expires %s", t.Name, t.Scope, t.ExpiresAt.UTC().Format("2006-01-02"))
		if len(t.Teams) > 0 {
			reason += ", teams " + strings.Join(t.Teams, " ")
		}
		return appendAudit(ctx, tx, AuditEvent{At: t.CreatedAt, ActorID: by.ID, Actor: by.Email, Action: "token.create",
			ObjectType: "token", ObjectID: id, Reason: reason})
	})
	return id, err
}

const tokenColumns = `id, user_id, name, scope, teams_json, created_at, expires_at, revoked_at, last_used_at, last_used_from`

func scanToken(row interface{ Scan(...any) error }) (APIToken, error) {
	var t APIToken
	var scope, tj, created, expires, revoked, used string
	if err := row.Scan(&t.ID, &t.UserID, &t.Name, &scope, &tj, &created, &expires, &revoked, &used, &t.LastUsedFrom); err != nil {
		return t, err
	}
	t.Scope = workflow.TokenScope(scope)
	if err := json.Unmarshal([]byte(tj), &t.Teams); err != nil {
		return t, fmt.Errorf("store: token %d: teams: %w", t.ID, err)
	}
	var err error
	if t.CreatedAt, err = parseTime(created); err != nil {
		return t, fmt.Errorf("store: token %d: %w", t.ID, err)
	}
	if t.ExpiresAt, err = parseTime(expires); err != nil {
		return t, fmt.Errorf("store: token %d: %w", t.ID, err)
	}
	for _, f := range []struct {
		s  string
		to *time.Time
	}{{revoked, &t.RevokedAt}, {used, &t.LastUsedAt}} {
		if f.s == "" {
			continue
		}
		if *f.to, err = parseTime(f.s); err != nil {
			return t, fmt.Errorf("store: token %d: %w", t.ID, err)
		}
	}
	return t, nil
}

// TokensOf returns a person's tokens, newest first.
func (d *DB) TokensOf(ctx context.Context, userID int64) ([]APIToken, error) {
	if err := d.uses.settle(ctx); err != nil {
		return nil, err
	}
	rows, err := d.sql.QueryContext(ctx, `SELECT `+tokenColumns+` FROM api_tokens WHERE user_id = ? ORDER BY id DESC`, userID)
	if err != nil {
		return nil, fmt.Errorf("store: tokens of user %d: %w", userID, err)
	}
	defer rows.Close()
	var out []APIToken
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("store: tokens of user %d: %w", userID, err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// Token returns one token or ErrNotFound.
func (d *DB) Token(ctx context.Context, id int64) (APIToken, error) {
	if err := d.uses.settle(ctx); err != nil {
		return APIToken{}, err
	}
	t, err := scanToken(d.sql.QueryRowContext(ctx, `SELECT `+tokenColumns+` FROM api_tokens WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return t, ErrNotFound
	}
	return t, err
}

// TokenByHash returns the token whose secret hashes to secretHash, or
// ErrNotFound. It says nothing of whether the token may be used
// (workflow.CheckTokenUse).
func (d *DB) TokenByHash(ctx context.Context, secretHash string) (APIToken, error) {
	t, err := scanToken(d.sql.QueryRowContext(ctx, `SELECT `+tokenColumns+` FROM api_tokens WHERE secret_hash = ?`, secretHash))
	if errors.Is(err, sql.ErrNoRows) {
		return t, ErrNotFound
	}
	if err != nil {
		return t, fmt.Errorf("store: token by hash: %w", err)
	}
	return t, nil
}

// RevokeToken records token id revoked at now by by, with token.revoke in
// the audit trail. Revoking a revoked token changes nothing and records
// nothing; an unknown id is ErrNotFound.
func (d *DB) RevokeToken(ctx context.Context, id int64, by workflow.Actor, now time.Time) error {
	return d.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND revoked_at = ''`, fmtTime(now), id)
		if err != nil {
			return fmt.Errorf("store: revoke token %d: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("store: revoke token %d: %w", id, err)
		} else if n == 0 {
			var one int
			if err := tx.QueryRowContext(ctx, `SELECT 1 FROM api_tokens WHERE id = ?`, id).Scan(&one); errors.Is(err, sql.ErrNoRows) {
				return ErrNotFound
			} else if err != nil {
				return fmt.Errorf("store: revoke token %d: %w", id, err)
			}
			return nil
		}
		return appendAudit(ctx, tx, AuditEvent{At: now, ActorID: by.ID, Actor: by.Email, Action: "token.revoke",
			ObjectType: "token", ObjectID: id})
	})
}

// ErrTokenRevoked: RecordTokenUse found the token revoked (by a revocation
// that committed after the request read it).
var ErrTokenRevoked = errors.New("store: the token is revoked")

// RecordTokenUse records one use of token id (what: the request's method
// and path, never its query; from: the client address) as token.use in the
// audit trail and as the token's last use. The token must still be in force
// when the use is recorded: a revocation that committed before the use's
// transaction refuses the use (ErrTokenRevoked), and nothing is recorded
// for it.
//
// Uses that arrive together share one write transaction (group commit,
// uses.go): every API request records its use, and one transaction a
// request made the API as slow as the audit trail's writer (64 clients
// listing connections queued on one SQLite write lock each). The call
// returns when its use is committed, or refused, or ctx ends first (the use
// may then still be recorded: the request did arrive). The API's writes
// record theirs so, before they run; its reads with QueueTokenUse.
func (d *DB) RecordTokenUse(ctx context.Context, id int64, by workflow.Actor, what, from string, now time.Time) error {
	_, err := d.recordTokenUse(ctx, id, by, what, from, now)
	return err
}

// QueueTokenUse records a read's use of token id as RecordTokenUse does,
// after the read's answer: it returns once the use is queued, and the use
// commits with the next batch of uses, a few milliseconds later (or waits
// for its batch when maxQueuedUses were already queued). The read was
// answered, so its use is recorded even if a revocation commits before
// the batch (the token's last use is not: a revoked token's stays as it
// was). The audit trail's and the tokens' readers in this process wait
// for the uses queued before them (settle), and Close commits what is
// queued; a crash loses what was queued, at most maxQueuedUses reads'
// uses, and a failed batch's are counted (LostAPIUses). Writes record
// theirs with RecordTokenUse, refused inside its transaction.
func (d *DB) QueueTokenUse(ctx context.Context, id int64, by workflow.Actor, what, from string, now time.Time) error {
	return d.uses.queue(ctx, d, &apiUse{id: id, by: by, what: what, from: from, at: now, served: true})
}

// LostAPIUses is how many reads' uses (QueueTokenUse) were not recorded
// because their transaction failed, since the handle was opened.
func (d *DB) LostAPIUses() int64 { return d.uses.lost.Load() }

// recordTokenUse is RecordTokenUse that also says how many uses shared the
// use's transaction (tests).
func (d *DB) recordTokenUse(ctx context.Context, id int64, by workflow.Actor, what, from string, now time.Time) (int, error) {
	u := &apiUse{id: id, by: by, what: what, from: from, at: now}
	err := d.uses.record(ctx, d, u)
	return u.batchLen, err
}
