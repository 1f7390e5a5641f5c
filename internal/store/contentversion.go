package store

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
)

// ContentVersion is DataVersion less the API's uses: a token that changes
// whenever a transaction commits, except one that recorded personal
// tokens' uses and nothing else (RecordTokenUse's batches, uses.go: each
// token's last use and its token.use events). Every API request records
// its use, so under DataVersion the API's cached list (the page cache,
// cacheAPI in internal/web) and the token lookups kept under the version
// (TokenAndUser) were read again after every batch of uses (issue 33,
// make bench's API row). What is kept under a content version must not
// show what a use writes: a token's last use or the audit trail (their
// pages use DataVersion, which every use moves). The rule of DataVersion
// holds: read it BEFORE the data kept under it.
//
//   - SQLite: DataVersion's token, except for the versions a batch of uses
//     made (useCommits): the batch reads the WAL-index header after its
//     writes, before its commit (it holds the write lock: nothing else can
//     commit in between) and again after it, and when iChange grew by
//     exactly one, the only commit between the two headers was its own,
//     and the version after is the version before (or what that one
//     stands for). SQLite increments iChange on each commit and nowhere
//     else (wal.c, walFrames: "if( isCommit ){ pWal->hdr.iChange++ ...
//     walIndexWriteHdr(pWal)"; modernc.org/sqlite v1.62.0 lib, _walFrames,
//     the one place Fhdr.FiChange changes). Another process's commit in
//     between makes it grow by more, and the version after stands for
//     itself: nothing cached is served for it.
//   - PostgreSQL: portal_content_version_state()
//     (migrations/00041_content_version.sql): the data version's sequence,
//     which a transaction of uses does not bump (it sets portal.api_use
//     for itself and bumps a sequence of its own, which DataVersion reads
//     too).
func (d *DB) ContentVersion(ctx context.Context) (token string, ok bool, err error) {
	if d.dialect.postgres {
		token, err := d.pgContent.read(ctx)
		if err != nil {
			return "", false, fmt.Errorf("store: content version: %w", err)
		}
		return token, token != "", nil
	}
	token, ok, err = d.DataVersion(ctx)
	if !ok || err != nil {
		return token, ok, err
	}
	return d.version.uses.content(ctx, token), true, nil
}

// useCommits maps the SQLite versions that batches of uses made to the
// version each stands for: the last version a transaction other than a
// batch of uses made. It keeps the latest useCommitsKept; an older one
// stands for itself again (nothing cached is found for it: a miss, never
// a wrong answer).
//
// A batch's version is readable from its commit on, and mapped only once
// the batch has read the header after it: a request that read it in
// between would find nothing kept for it and read the store again (make
// bench at 5130d37: one API read in twenty). While a batch commits
// (pending), a version that is neither mapped nor the one the batch began
// from waits for the batch to end and is looked up again; other
// versions never wait.
type useCommits struct {
	mu      sync.RWMutex
	to      map[string]string
	order   []string      // the keys of to, oldest first
	pending string        // the version a batch that is committing began from
	ended   chan struct{} // closed when that batch has ended
}

const useCommitsKept = 256

func (u *useCommits) content(ctx context.Context, raw string) string {
	for waited := false; ; waited = true {
		u.mu.RLock()
		c, ok := u.to[raw]
		pending, ended := u.pending, u.ended
		u.mu.RUnlock()
		if ok {
			return c
		}
		if waited || pending == "" || pending == raw {
			return raw
		}
		select {
		case <-ended:
		case <-ctx.Done():
			return raw
		}
	}
}

// begin says that a batch that began from version before is committing.
func (u *useCommits) begin(before string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.pending, u.ended = before, make(chan struct{})
}

// end says that the batch has ended: committed as version after, which
// stands for the version it began from, when after is not "". restart,
// when not "", is the header the commit wrote before after, as it
// restarted the WAL (walRestartHeader): it shows the data the batch
// began from, so it stands for that version too.
func (u *useCommits) end(after, restart string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if after != "" {
		before := u.pending
		if c, ok := u.to[before]; ok {
			before = c
		}
		u.keep(after, before)
		if restart != "" {
			u.keep(restart, before)
		}
	}
	close(u.ended)
	u.pending, u.ended = "", nil
}

// keep maps version v to c, forgetting the oldest mapping past
// useCommitsKept. Called with mu held.
func (u *useCommits) keep(v, c string) {
	if u.to == nil {
		u.to = map[string]string{}
	}
	if _, ok := u.to[v]; !ok {
		u.order = append(u.order, v)
	}
	u.to[v] = c
	if len(u.order) > useCommitsKept {
		delete(u.to, u.order[0])
		u.order = u.order[1:]
	}
}

// header is the WAL-index header as DataVersion reads it, with its
// connection's generation; ok is false when DataVersion does not read it
// (not yet mapped, or being written).
func (v *sqliteVersion) header() (gen int, h [walIndexHeaderSize]byte, ok bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.conn == nil || v.shm == nil {
		return 0, h, false
	}
	h, ok = v.shm.read()
	return v.gen, h, ok
}

// walIChange and walMxFrame are a header's iChange and mxFrame, its third
// and fifth words in host byte order
// (https://sqlite.org/walformat.html#the_wal_index_file_format).
func walIChange(h [walIndexHeaderSize]byte) uint32 { return binary.NativeEndian.Uint32(h[8:]) }

func walMxFrame(h [walIndexHeaderSize]byte) uint32 { return binary.NativeEndian.Uint32(h[16:]) }

// walRestartHeader is the header a commit that restarted the WAL wrote
// first, given the headers before and after it (both read while the
// committing connection held the write lock), and false when the commit
// did not restart it (the salts are unchanged). A writer whose WAL has
// been checkpointed whole starts it over at its first frame: wal.c
// walFrames calls walRestartLog, whose walRestartHdr sets mxFrame to 0,
// adds one to the first salt, draws the second, and writes the header
// (walIndexWriteHdr) before any frame; only the commit's own header, after
// its frames, adds one to iChange (modernc.org/sqlite v1.62.0 lib,
// _walFrames, _walRestartHdr). Between the two a reader finds this
// header: same iChange, no frame in the WAL, so the data of the header
// before (the database file holds every frame). Its salts are the ones
// the header after carries, and its checksum is walIndexWriteHdr's,
// walChecksumBytes in native byte order over the 40 bytes before it.
// Unmapped, it cost the API's list on SQLite about 60 renders a 5 s run
// of make bench (none on PostgreSQL): under that load a commit restarted
// the WAL every 150 ms or so, the requests that read this header missed
// the page cache and rendered the list again, and the page kept under it
// replaced the one kept under the content version, which the next
// requests rendered again (issue 33: the renders' versions, logged, came
// in pairs: this header, then the content version before it).
// TestWALRestartHeaderIsSQLites compares it with SQLite's own.
func walRestartHeader(before, after [walIndexHeaderSize]byte) ([walIndexHeaderSize]byte, bool) {
	if [8]byte(before[32:40]) == [8]byte(after[32:40]) {
		return before, false
	}
	h := before
	binary.NativeEndian.PutUint32(h[16:], 0) // mxFrame (walMxFrame)
	copy(h[32:40], after[32:40])             // aSalt
	var s1, s2 uint32
	for i := 0; i < 40; i += 8 {
		s1 += binary.NativeEndian.Uint32(h[i:]) + s2
		s2 += binary.NativeEndian.Uint32(h[i+4:]) + s1
	}
	binary.NativeEndian.PutUint32(h[40:], s1)
	binary.NativeEndian.PutUint32(h[44:], s2)
	return h, true
}

// inUsesTx is inTx for a batch of personal tokens' uses (uses.go): its
// commit does not move ContentVersion. On PostgreSQL the transaction
// sets portal.api_use as it takes the writers' lock (pgUsesWriterLock),
// before f, so that the statement triggers bump the
// uses' sequence (migrations/00041); on SQLite the header is read after
// f and after the commit (useCommits), both while d.writer keeps this
// process's other writers out.
func (d *DB) inUsesTx(ctx context.Context, f func(*sql.Tx) error) error {
	var gen int
	var before [walIndexHeaderSize]byte
	begun := false
	return d.inTxWith(ctx, pgUsesWriterLock, func(tx *sql.Tx) error {
		if err := f(tx); err != nil {
			return err
		}
		if d.version != nil {
			var ok bool
			if gen, before, ok = d.version.header(); ok {
				d.version.uses.begin(headerTokenOf(gen, before))
				begun = true
			}
		}
		return nil
	}, func(err error) {
		if !begun {
			return
		}
		after, restart := "", ""
		if g, h, ok := d.version.header(); err == nil && ok && g == gen && walIChange(h) == walIChange(before)+1 {
			after = headerTokenOf(gen, h)
			if r, ok := walRestartHeader(before, h); ok {
				restart = headerTokenOf(gen, r)
			}
		}
		d.version.uses.end(after, restart)
	})
}

type contentVersionKey struct{}

// WithContentVersion returns ctx carrying token, the ContentVersion read
// at the start of an API request (TokenAndUser, and the API's page cache).
func WithContentVersion(ctx context.Context, token string) context.Context {
	return context.WithValue(ctx, contentVersionKey{}, token)
}

// ContentVersionFrom returns the token WithContentVersion put in ctx.
func ContentVersionFrom(ctx context.Context) (string, bool) {
	t, ok := ctx.Value(contentVersionKey{}).(string)
	return t, ok && t != ""
}

// TokenAndUser is TokenByHash and the token's person (UserByID). Under the
// content version ctx carries (WithContentVersion), read before, both are
// read once and kept for the next request with the same token and version:
// every API request authenticates, and two reads a request were most of an
// API read's cost once its answer was cached. The token's revocation, a
// person's groups and everything else authorization reads move the
// content version; a use does not, so the token returned may show an
// older last use (RecordTokenUse re-checks the revocation as it records
// the use). An unknown token is never kept.
func (d *DB) TokenAndUser(ctx context.Context, secretHash string) (APIToken, User, error) {
	version, versioned := ContentVersionFrom(ctx)
	if versioned {
		if e, ok := d.tokens.find(version, secretHash); ok {
			return e.token.clone(), e.user.clone(), nil
		}
	}
	t, err := d.TokenByHash(ctx, secretHash)
	if err != nil {
		return t, User{}, err
	}
	u, err := d.UserByID(ctx, t.UserID)
	if err != nil {
		return t, User{}, err
	}
	if versioned {
		d.tokens.keep(version, secretHash, tokenAndUser{t.clone(), u.clone()})
	}
	return t, u, nil
}

// tokenCache is TokenAndUser's: the tokens read under one content
// version, at most tokenCacheSize of them.
type tokenCache struct {
	mu      sync.Mutex
	version string
	byHash  map[string]tokenAndUser
}

type tokenAndUser struct {
	token APIToken
	user  User
}

const tokenCacheSize = 1024

func (c *tokenCache) find(version, hash string) (tokenAndUser, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.version != version {
		return tokenAndUser{}, false
	}
	e, ok := c.byHash[hash]
	return e, ok
}

func (c *tokenCache) keep(version, hash string, e tokenAndUser) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.version != version {
		c.version, c.byHash = version, map[string]tokenAndUser{}
	}
	if len(c.byHash) < tokenCacheSize {
		c.byHash[hash] = e
	}
}

func (t APIToken) clone() APIToken {
	t.Teams = slices.Clone(t.Teams)
	return t
}

func (u User) clone() User {
	u.Groups = slices.Clone(u.Groups)
	return u
}
