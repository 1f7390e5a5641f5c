package web

import (
	"context"
	"sync"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
)

// monthCache keeps the month-to-date chargeback (monthSoFar) of the last
// few keys. The chargeback splits the whole installation's cost (a team's
// idle and overhead share depends on every other team's guarantee or usage,
// and the rounding is one largest-remainder pass over every team's
// amounts: internal/usage.Charge), so it cannot be computed for one team
// alone; computing it on every view of one team's usage page cost the
// whole installation's month (BenchmarkPagesAtScale, usage).
//
// The key is the period to date (the month up to the end of the current
// hour: the computation's granularity; the projection to month end, which
// depends on the exact time, is computed from the cached total on each
// view) and the store's cost input version, which triggers bump in the
// transaction that changes any input (store.DB.CostInputVersion,
// migrations/00022). Every request reads the version first, so each
// replica recomputes as soon as any replica, the collector or anyone else
// has committed a change: no replica serves a figure older than the data
// it read the version at. The rate card and the accelerator table are the
// Server's options, fixed for its life.
//
// A cached costView is shared by concurrent requests: read it, never
// change it.
type monthCache struct {
	mu      sync.Mutex
	entries map[monthKey]*monthEntry
	order   []monthKey
}

type monthKey struct {
	version int64
	toDate  usage.Period
}

type monthEntry struct {
	ready chan struct{}
	pol   store.CostPolicyVersion
	v     costView
	err   error
}

// monthCacheSize bounds the cache: one key is current at a time; a few
// more cover requests still finishing at the previous version or hour.
const monthCacheSize = 4

// get returns key's chargeback, computing it once for concurrent requests
// of the same key. An error is not kept.
func (c *monthCache) get(ctx context.Context, key monthKey, compute func() (store.CostPolicyVersion, costView, error)) (store.CostPolicyVersion, costView, error) {
	c.mu.Lock()
	if e, ok := c.entries[key]; ok {
		c.mu.Unlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			return store.CostPolicyVersion{}, costView{}, ctx.Err()
		}
		if e.err == nil {
			return e.pol, e.v, nil
		}
		return compute() // the computing request failed (say, it was cancelled)
	}
	if c.entries == nil {
		c.entries = map[monthKey]*monthEntry{}
	}
	e := &monthEntry{ready: make(chan struct{})}
	c.entries[key] = e
	c.order = append(c.order, key)
	for len(c.order) > monthCacheSize {
		delete(c.entries, c.order[0])
		c.order = c.order[1:]
	}
	c.mu.Unlock()
	e.pol, e.v, e.err = compute()
	if e.err != nil {
		c.mu.Lock()
		if c.entries[key] == e {
			delete(c.entries, key)
		}
		c.mu.Unlock()
	}
	close(e.ready)
	return e.pol, e.v, e.err
}

// len is the number of cached chargebacks (for tests).
func (c *monthCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
