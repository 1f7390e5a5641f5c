package store

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"
)

// SessionStore keeps server-side session data for github.com/alexedwards/scs.
// Tokens are stored as HMAC-SHA256 under the session key, never in clear.
type SessionStore struct {
	db  *DB
	key []byte
	now func() time.Time

	// refresh: see SetRefreshGranularity. found holds, per token hash,
	// what this store last read or wrote (a digest of the data and the
	// stored expiry); at most maxFound entries.
	refresh time.Duration
	mu      sync.Mutex
	found   map[string]foundSession

	// read: see FindCtx; per token hash, the row as read under a data
	// version; at most maxFound entries.
	read map[string]readSession

	// hashes: per token, its hash (the HMAC was a twentieth of a cached
	// page's cost, computed twice per request); at most maxFound entries.
	hashes map[string]string

	// writing: per token hash, the data and expiry a commit of this store
	// is writing now (see claimCommit).
	writing map[string]foundSession
}

// readSession and foundSession hold data that are never changed once
// stored (FindCtx returns copies).
type readSession struct {
	version string
	data    []byte
	expiry  int64
}

type foundSession struct {
	data   []byte
	expiry int64
}

const maxFound = 10000

// SetRefreshGranularity makes CommitCtx skip the write of a session whose
// data are exactly what this store last read (FindCtx) or wrote for it and
// whose expiry would move forward from that by less than d (issue 15). The session manager's idle timeout
// commits every session on every request only to move its expiry: without
// this each page view would be a database write. With it a session's idle
// expiry is refreshed at most once per d, so an idle session may end up to
// d before its idle timeout, never after. Skipping never writes anything
// another request or replica has not written: a session signed out
// meanwhile (deleted) stays deleted, and newer data written meanwhile stay.
// d = 0 (the default) writes every commit.
func (s *SessionStore) SetRefreshGranularity(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refresh = d
}

// Sessions returns the session store keyed by key (at least 32 bytes).
func (d *DB) Sessions(key []byte) (*SessionStore, error) {
	if len(key) < 32 {
		return nil, fmt.Errorf("store: sessions: key must be at least 32 bytes, got %d", len(key))
	}
	return &SessionStore{db: d, key: append([]byte(nil), key...), now: time.Now}, nil
}

func (s *SessionStore) hash(token string) string {
	s.mu.Lock()
	h, ok := s.hashes[token]
	s.mu.Unlock()
	if ok {
		return h
	}
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(token))
	h = hex.EncodeToString(m.Sum(nil))
	s.mu.Lock()
	if s.hashes == nil || len(s.hashes) >= maxFound {
		s.hashes = map[string]string{}
	}
	s.hashes[token] = h
	s.mu.Unlock()
	return h
}

// FindCtx returns the data of an unexpired session. The slice may be
// shared with other callers: read it, never write into it (scs only
// decodes it).
//
// When ctx carries the data version read at the start of the request
// (WithDataVersion), a session read under that same version is returned
// without reading its row again (issue 15: the read-through session
// cache). It is as fresh as a read: a sign-out, a new sign-in or any
// change to the session on any replica commits, which changes the version
// every replica's next request reads (DataVersion). The expiry is checked
// against the clock on every call.
func (s *SessionStore) FindCtx(ctx context.Context, token string) ([]byte, bool, error) {
	h := s.hash(token)
	version, versioned := DataVersionFrom(ctx)
	now := s.now().UnixNano()
	if versioned {
		s.mu.Lock()
		r, ok := s.read[h]
		s.mu.Unlock()
		if ok && r.version == version && r.expiry > now {
			s.noteFound(h, r.data, r.expiry)
			return r.data, true, nil
		}
	}
	var b []byte
	var expiry int64
	err := s.db.sql.QueryRowContext(ctx,
		`SELECT data, expiry FROM sessions WHERE token_hash = ? AND expiry > ?`,
		h, now).Scan(&b, &expiry)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("store: find session: %w", err)
	}
	kept := bytes.Clone(b)
	s.noteFound(h, kept, expiry)
	if versioned {
		s.mu.Lock()
		if s.read == nil || len(s.read) >= maxFound {
			s.read = map[string]readSession{}
		}
		s.read[h] = readSession{version: version, data: kept, expiry: expiry}
		s.mu.Unlock()
	}
	return b, true, nil
}

// noteFound remembers what the row of h holds (its data, never changed
// afterwards, and its expiry) as this store last read or wrote it, for
// CommitCtx (see SetRefreshGranularity).
func (s *SessionStore) noteFound(h string, data []byte, expiry int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refresh > 0 {
		if s.found == nil || len(s.found) >= maxFound {
			s.found = map[string]foundSession{}
		}
		s.found[h] = foundSession{data: data, expiry: expiry}
	}
}

// claimCommit decides whether committing b with expiry (nanoseconds) to
// the session h is skipped (skip), and marks a commit that writes
// (kept, non-nil: a copy of b; the caller writes it, then unmarks it).
//
// Skipped: a commit that would only move the expiry forward by less than
// the refresh granularity from what this store last read (FindCtx) or
// wrote for the session. What it read stays remembered: a user's
// concurrent requests (a page and its assets, several tabs) each find and
// commit the same session, and forgetting at the first commit made the
// others write. Skipped too: a commit that only moves the expiry while
// another commit of this store writes the same data with an expiry less
// than the granularity away from it. Once a granularity has passed, every
// request of a session in flight wants to move its expiry at once (64
// under the page benchmark's load), and those writes, one after another,
// each a new data version that every cached page then missed, stalled all
// of them (issue 15: the page runs whose p99 reached 100-400 ms). The same
// holds for new data: a commit is skipped while another commit of this
// store writes exactly the same data with an expiry less than the
// granularity before it. A group re-check (internal/web's recheckGate)
// gives every request of the session in flight the same re-checked data,
// and each wrote it: 64 writes of one session in the PostgreSQL page
// benchmark of 2026-12-04, each moving the data version. A commit of data
// that no write in flight or last read or written holds is never skipped.
func (s *SessionStore) claimCommit(h string, b []byte, expiry int64) (skip bool, kept []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refresh <= 0 {
		return false, nil
	}
	refresh := s.refresh.Nanoseconds()
	if f, ok := s.found[h]; ok && bytes.Equal(f.data, b) && expiry >= f.expiry && expiry-f.expiry < refresh {
		return true, nil
	}
	if w, ok := s.writing[h]; ok && bytes.Equal(w.data, b) && expiry >= w.expiry && expiry-w.expiry < refresh {
		return true, nil
	}
	if s.writing == nil {
		s.writing = map[string]foundSession{}
	}
	// Kept past the call (writing, then found): a copy, the caller's
	// buffer being its own. Skipped commits, the most, copy nothing.
	kept = append([]byte{}, b...) // never nil: nil means not writing
	s.writing[h] = foundSession{data: kept, expiry: expiry}
	return false, kept
}

// CommitCtx inserts or replaces a session.
func (s *SessionStore) CommitCtx(ctx context.Context, token string, b []byte, expiry time.Time) error {
	h := s.hash(token)
	skip, kept := s.claimCommit(h, b, expiry.UnixNano())
	if skip {
		return nil // see SetRefreshGranularity
	}
	if kept != nil { // writing: marked in s.writing until written
		b = kept
		defer func() {
			s.mu.Lock()
			if w, ok := s.writing[h]; ok && bytes.Equal(w.data, b) && w.expiry == expiry.UnixNano() {
				delete(s.writing, h)
			}
			s.mu.Unlock()
		}()
	}
	_, err := s.db.sql.ExecContext(ctx, `
INSERT INTO sessions (token_hash, data, expiry) VALUES (?, ?, ?)
ON CONFLICT (token_hash) DO UPDATE SET data = excluded.data, expiry = excluded.expiry`,
		h, b, expiry.UnixNano())
	if err != nil {
		return fmt.Errorf("store: commit session: %w", err)
	}
	s.noteFound(h, b, expiry.UnixNano())
	return nil
}

// DeleteCtx removes a session; deleting a missing one is not an error.
func (s *SessionStore) DeleteCtx(ctx context.Context, token string) error {
	h := s.hash(token)
	s.mu.Lock()
	delete(s.found, h)
	delete(s.read, h)
	s.mu.Unlock()
	if _, err := s.db.sql.ExecContext(ctx, `DELETE FROM sessions WHERE token_hash = ?`, h); err != nil {
		return fmt.Errorf("store: delete session: %w", err)
	}
	return nil
}

// Find, Commit and Delete satisfy scs.Store; the portal uses the Ctx variants.
func (s *SessionStore) Find(token string) ([]byte, bool, error) {
	return s.FindCtx(context.Background(), token)
}
func (s *SessionStore) Commit(token string, b []byte, expiry time.Time) error {
	return s.CommitCtx(context.Background(), token, b, expiry)
}
func (s *SessionStore) Delete(token string) error { return s.DeleteCtx(context.Background(), token) }

// DeleteExpired removes sessions that expired before now and returns how many.
func (s *SessionStore) DeleteExpired(ctx context.Context, now time.Time) (int64, error) {
	res, err := s.db.sql.ExecContext(ctx, `DELETE FROM sessions WHERE expiry <= ?`, now.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("store: delete expired sessions: %w", err)
	}
	return res.RowsAffected()
}

// Count returns the number of stored sessions, expired or not (for tests and metrics).
func (s *SessionStore) Count(ctx context.Context) (int, error) {
	var n int
	if err := s.db.sql.QueryRowContext(ctx, `SELECT count(*) FROM sessions`).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: count sessions: %w", err)
	}
	return n, nil
}

// Data returns the stored data of every session (for tests that check what
// a session holds, and for diagnostics).
func (s *SessionStore) Data(ctx context.Context) ([][]byte, error) {
	rows, err := s.db.sql.QueryContext(ctx, `SELECT data FROM sessions`)
	if err != nil {
		return nil, fmt.Errorf("store: session data: %w", err)
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, fmt.Errorf("store: session data: %w", err)
		}
		out = append(out, b)
	}
	return out, rows.Err()
}
