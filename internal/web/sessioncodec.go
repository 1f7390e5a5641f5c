package web

import (
	"bytes"
	"encoding/gob"
	"sort"
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
	var d sessionData
	if err := gob.NewDecoder(bytes.NewReader(b)).Decode(&d); err != nil || d.Format != sessionFormat {
		return scs.GobCodec{}.Decode(b)
	}
	values := make(map[string]any, len(d.Pairs))
	for _, p := range d.Pairs {
		values[p.Key] = p.Value
	}
	return d.Deadline, values, nil
}
