package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hyperpod-governance/portal/internal/signing"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// The installation's signing key and the daily publication of the audit
// chain's head (migrations/00031_signing.sql; internal/signing).

// EnsureSigningKey returns the active signing key, inserting cand as it if
// there is none, in one write transaction (write transactions serialize
// across processes, see dialect.beginWrite): replicas starting at once all
// end with the one key the first of them inserted. created is true when
// cand was inserted; the insertion is audited (signing.key_created) in the
// same transaction, so the chain records which key the installation signs
// with from then on.
func (d *DB) EnsureSigningKey(ctx context.Context, cand signing.Sealed, now time.Time) (key signing.Sealed, created bool, err error) {
	err = d.inTx(ctx, func(tx *sql.Tx) error {
		key, err = activeSigningKey(ctx, tx)
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrNotFound) {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO signing_keys (key_id, slot, algorithm, public_key, sealed_private_key, created_at) VALUES (?, 'active', ?, ?, ?, ?)`,
			cand.KeyID, signing.Algorithm, cand.Public, cand.Private, fmtTime(cand.CreatedAt)); err != nil {
			return fmt.Errorf("store: signing key: %w", err)
		}
		key, created = cand, true
		return appendAudit(ctx, tx, AuditEvent{At: now, Actor: "portal", Action: "signing.key_created", ObjectType: "signing_key",
			Reason: fmt.Sprintf("evidence signing key %s (%s, public key %s) made; bundles and published audit heads are signed with it", cand.KeyID, signing.Algorithm, cand.Public)})
	})
	if err != nil {
		return signing.Sealed{}, false, err
	}
	return key, created, nil
}

func activeSigningKey(ctx context.Context, q queryer) (signing.Sealed, error) {
	var k signing.Sealed
	var at string
	err := q.QueryRowContext(ctx, `SELECT key_id, public_key, sealed_private_key, created_at FROM signing_keys WHERE slot = 'active'`).
		Scan(&k.KeyID, &k.Public, &k.Private, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return k, ErrNotFound
	}
	if err != nil {
		return k, fmt.Errorf("store: signing key: %w", err)
	}
	if k.CreatedAt, err = parseTime(at); err != nil {
		return k, fmt.Errorf("store: signing key %s: %w", k.KeyID, err)
	}
	return k, nil
}

// AuditHeadPublication is the audit chain's head as published for one UTC
// day: the head event, the number of events up to it, its time (as its
// chain hash covers it), and the installation key's signature of
// signing.HeadLine.
type AuditHeadPublication struct {
	Day         string // 2006-01-02, UTC
	HeadID      int64
	HeadCount   int
	HeadHash    string
	HeadAt      string
	KeyID       string
	Signature   string
	PublishedAt time.Time
}

// AuditHeadPublished reports whether day's head was published (a read,
// for the loop to skip signing when another replica already did).
func (d *DB) AuditHeadPublished(ctx context.Context, day string) (bool, error) {
	var n int
	if err := d.sql.QueryRowContext(ctx, `SELECT COUNT(*) FROM audit_head_publications WHERE day = ?`, day).Scan(&n); err != nil {
		return false, fmt.Errorf("store: audit head publication: %w", err)
	}
	return n > 0, nil
}

// PublishAuditHead records p as its day's publication, with its notice in
// the outbox (workflow.AuditHeadNotice; internal/notify delivers it by mail and
// webhook) and an audit event, in one transaction, unless that day was
// already published: then it records nothing and returns false. Whoever
// commits first wins; a crash before the commit leaves nothing, and the
// next attempt publishes.
func (d *DB) PublishAuditHead(ctx context.Context, p AuditHeadPublication, notice workflow.Notice) (bool, error) {
	published := false
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO audit_head_publications (day, head_id, head_count, head_hash, head_at, key_id, signature, published_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (day) DO NOTHING`, p.Day, p.HeadID, p.HeadCount, p.HeadHash, p.HeadAt, p.KeyID, p.Signature, fmtTime(p.PublishedAt))
		if err != nil {
			return fmt.Errorf("store: publish audit head: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		published = true
		if err := insertNotices(ctx, tx, 0, "", []workflow.Notice{notice}, p.PublishedAt); err != nil {
			return err
		}
		return appendAudit(ctx, tx, AuditEvent{At: p.PublishedAt, Actor: "portal", Action: "audit.head_published", ObjectType: "audit",
			Reason: fmt.Sprintf("%s: head event %d (%d events) %s at %s, signed by %s, sent to %s", p.Day, p.HeadID, p.HeadCount, p.HeadHash, p.HeadAt, p.KeyID, notice.To)})
	})
	return published, err
}

// AuditHeadPublications are the published heads, newest day first, at
// most limit.
func (d *DB) AuditHeadPublications(ctx context.Context, limit int) ([]AuditHeadPublication, error) {
	rows, err := d.sql.QueryContext(ctx, `SELECT day, head_id, head_count, head_hash, head_at, key_id, signature, published_at
FROM audit_head_publications ORDER BY day DESC LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("store: audit head publications: %w", err)
	}
	defer rows.Close()
	var out []AuditHeadPublication
	for rows.Next() {
		var p AuditHeadPublication
		var at string
		if err := rows.Scan(&p.Day, &p.HeadID, &p.HeadCount, &p.HeadHash, &p.HeadAt, &p.KeyID, &p.Signature, &at); err != nil {
			return nil, fmt.Errorf("store: audit head publications: %w", err)
		}
		if p.PublishedAt, err = parseTime(at); err != nil {
			return nil, fmt.Errorf("store: audit head publication %s: %w", p.Day, err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}
