package web

import (
	"bytes"
	"encoding/gob"
	"reflect"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

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
	if b, ok := decodedSessions.unchanged(deadline, values); ok {
		decodedSessions.reused.Add(1)
		return b, nil
	}
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
	if e, ok := decodedSessions.get(b); ok {
		values := copyValues(e.values)
		decodedSessions.issue(values, e)
		return e.deadline, values, nil
	}
	var d sessionData
	if err := gob.NewDecoder(bytes.NewReader(b)).Decode(&d); err != nil || d.Format != sessionFormat {
		return scs.GobCodec{}.Decode(b)
	}
	values := make(map[string]any, len(d.Pairs))
	for _, p := range d.Pairs {
		values[p.Key] = p.Value
	}
	e := decodedSessions.put(b, d.Deadline, values)
	values = copyValues(values)
	decodedSessions.issue(values, e)
	return d.Deadline, values, nil
}

// decodedSessions keeps the decoded form of recently read session data by
// their exact bytes (issue 15: a new gob decoder per request compiled its
// types every time, a quarter of a small page's cost). The store gives the
// session's row as read under the request's data version (store.
// SessionStore.FindCtx), so a sign-out or a change on any replica shows at
// once: only the decoding of bytes already seen is skipped, and the same
// bytes always decode to the same values. Each caller
// gets its own copy of the values. Bounded: past decodedSessionsMax entries
// it starts over.
var decodedSessions = sessionDecodeCache{m: map[string]*decodedSession{}}

const decodedSessionsMax = 1024

type sessionDecodeCache struct {
	mu   sync.Mutex
	m    map[string]*decodedSession
	hits atomic.Int64 // for tests

	// issued: per values map Decode handed out (by its address), the
	// entry it came from, so that Encode of the same map, unchanged,
	// returns the entry's bytes instead of encoding again (the idle
	// timeout makes scs encode every session on every request; a new gob
	// encoder sends its type descriptors each time, a third of a cached
	// page's cost). At most decodedSessionsMax entries.
	issued map[unsafe.Pointer]*decodedSession
	reused atomic.Int64 // for tests
}

// decodedSession is one entry: never changed once made, and its values
// never handed out (callers get copies), so it is also what a handed-out
// copy is compared with.
type decodedSession struct {
	b        []byte // the bytes (Encode hands them to scs, which only stores them)
	deadline time.Time
	values   map[string]any
}

func (c *sessionDecodeCache) issue(values map[string]any, e *decodedSession) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.issued == nil || len(c.issued) >= decodedSessionsMax {
		c.issued = map[unsafe.Pointer]*decodedSession{}
	}
	c.issued[reflect.ValueOf(values).UnsafePointer()] = e
}

// unchanged returns the bytes values were decoded from when values is a
// map Decode handed out and it still holds exactly what it held then (a
// map at a reused address holding other values is simply encoded). The
// codec is deterministic, so encoding would give the same bytes.
func (c *sessionDecodeCache) unchanged(deadline time.Time, values map[string]any) ([]byte, bool) {
	p := reflect.ValueOf(values).UnsafePointer()
	c.mu.Lock()
	e, ok := c.issued[p]
	delete(c.issued, p)
	c.mu.Unlock()
	if !ok || !e.deadline.Equal(deadline) || !sameValues(e.values, values) {
		return nil, false
	}
	return e.b, true
}

func (c *sessionDecodeCache) get(b []byte) (*decodedSession, bool) {
	c.mu.Lock()
	e, ok := c.m[string(b)]
	c.mu.Unlock()
	if ok {
		c.hits.Add(1)
	}
	return e, ok
}

func (c *sessionDecodeCache) put(b []byte, deadline time.Time, values map[string]any) *decodedSession {
	e := &decodedSession{b: slices.Clone(b), deadline: deadline, values: copyValues(values)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= decodedSessionsMax {
		clear(c.m)
	}
	c.m[string(e.b)] = e
	return e
}

// sameValues reports whether two sessions' values are equal: the types
// the portal stores (strings, sessionUser) without reflection, the rest
// with reflect.DeepEqual.
func sameValues(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, av := range a {
		bv, ok := b[k]
		if !ok {
			return false
		}
		switch av := av.(type) {
		case string:
			if bs, ok := bv.(string); !ok || av != bs {
				return false
			}
		case sessionUser:
			if bu, ok := bv.(sessionUser); !ok || !av.equal(bu) {
				return false
			}
		default:
			if !reflect.DeepEqual(av, bv) {
				return false
			}
		}
	}
	return true
}

// equal compares every field (TestSessionUserEqualSeesEveryField changes
// each in turn: a field added here and not compared fails it).
func (u sessionUser) equal(v sessionUser) bool {
	return u.UserID == v.UserID && u.Subject == v.Subject && u.Email == v.Email && u.Name == v.Name &&
		slices.Equal(u.Roles, v.Roles) && slices.Equal(u.Memberships, v.Memberships) &&
		slices.Equal(u.Groups, v.Groups) && u.DirName == v.DirName && bytes.Equal(u.Tokens, v.Tokens) &&
		u.CheckedAt.Equal(v.CheckedAt) && u.CheckedAt.Location() == v.CheckedAt.Location()
}

// copyValues copies a session's values so that no caller shares what the
// cache holds: maps and the sessionUser's slices are copied, other values
// (strings) are immutable. The sealed tokens are the exception: they are
// the session's largest value (a twelfth of the bytes each cached page
// view allocated, make bench, issue 33) and nothing writes into them
// (sealer.open decrypts into a new slice; a re-check replaces them whole),
// so the copy shares them with its capacity cut to its length, and an
// append reallocates rather than writing into the cache's bytes.
func copyValues(values map[string]any) map[string]any {
	out := make(map[string]any, len(values))
	for k, v := range values {
		if su, ok := v.(sessionUser); ok {
			su.Roles = slices.Clone(su.Roles)
			su.Memberships = slices.Clone(su.Memberships)
			su.Groups = slices.Clone(su.Groups)
			su.Tokens = slices.Clip(su.Tokens)
			v = su
		}
		out[k] = v
	}
	return out
}
