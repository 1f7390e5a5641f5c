package web

import (
	"bytes"
	"encoding/gob"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alexedwards/scs/v2"
)

// sessionCodec encodes session data as scs.GobCodec does, but with the
// values in key order, so that the same session always encodes to the same
// bytes (gob writes a map in Go's random iteration order). The session
// store relies on it to tell a commit that only moves a session's idle
// expiry from one that changes its data (store.SessionStore.
// SetRefreshGranularity, issue 15). Data written by scs.GobCodec (before
// this codec) still decode.
type sessionCodec struct{}

// sessionData is the encoded form; Format tells it from GobCodec's.
type sessionData struct {
	Format   int
	Deadline time.Time
	Pairs    []sessionPair
}

type sessionPair struct {
	Key   string
	Value any
}

const sessionFormat = 1

func (sessionCodec) Encode(deadline time.Time, values map[string]any) ([]byte, error) {
	d := sessionData{Format: sessionFormat, Deadline: deadline, Pairs: make([]sessionPair, 0, len(values))}
	for k, v := range values {
		d.Pairs = append(d.Pairs, sessionPair{k, v})
	}
	sort.Slice(d.Pairs, func(i, j int) bool { return d.Pairs[i].Key < d.Pairs[j].Key })
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(&d); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func (sessionCodec) Decode(b []byte) (time.Time, map[string]any, error) {
	if deadline, values, ok := decodedSessions.get(b); ok {
		return deadline, values, nil
	}
	var d sessionData
	if err := gob.NewDecoder(bytes.NewReader(b)).Decode(&d); err != nil || d.Format != sessionFormat {
		return scs.GobCodec{}.Decode(b)
	}
	values := make(map[string]any, len(d.Pairs))
	for _, p := range d.Pairs {
		values[p.Key] = p.Value
	}
	decodedSessions.put(b, d.Deadline, values)
	return d.Deadline, values, nil
}

// decodedSessions keeps the decoded form of recently read session data by
// their exact bytes (issue 15: a new gob decoder per request compiled its
// types every time, a quarter of a small page's cost). The store still
// reads the session's row on every request, so a sign-out or a change on
// any replica shows at once: only the decoding of bytes already seen is
// skipped, and the same bytes always decode to the same values. Each caller
// gets its own copy of the values. Bounded: past decodedSessionsMax entries
// it starts over.
var decodedSessions = sessionDecodeCache{m: map[string]decodedSession{}}

const decodedSessionsMax = 1024

type sessionDecodeCache struct {
	mu   sync.Mutex
	m    map[string]decodedSession
	hits atomic.Int64 // for tests
}

type decodedSession struct {
	deadline time.Time
	values   map[string]any
}

func (c *sessionDecodeCache) get(b []byte) (time.Time, map[string]any, bool) {
	c.mu.Lock()
	e, ok := c.m[string(b)]
	c.mu.Unlock()
	if !ok {
		return time.Time{}, nil, false
	}
	c.hits.Add(1)
	return e.deadline, copyValues(e.values), true
}

func (c *sessionDecodeCache) put(b []byte, deadline time.Time, values map[string]any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= decodedSessionsMax {
		clear(c.m)
	}
	c.m[string(b)] = decodedSession{deadline, copyValues(values)}
}

// copyValues copies a session's values so that no caller shares what the
// cache holds: maps and the sessionUser's slices are copied, other values
// (strings) are immutable.
func copyValues(values map[string]any) map[string]any {
	out := make(map[string]any, len(values))
	for k, v := range values {
		if su, ok := v.(sessionUser); ok {
			su.Roles = slices.Clone(su.Roles)
			su.Memberships = slices.Clone(su.Memberships)
			su.Groups = slices.Clone(su.Groups)
			su.Tokens = slices.Clone(su.Tokens)
			v = su
		}
		out[k] = v
	}
	return out
}
