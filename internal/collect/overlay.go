package collect

import (
	"slices"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
	"k8s.io/apimachinery/pkg/types"
)

// overlay is what one flush writes (its pods' records, Workloads and node
// spans), laid over what the store holds, so that the flush recomputes
// the hours while it writes them: each record of the flush replaces the
// stored one of its key, as writing it does (store.PutUsageRecords), and
// the flush's records that touch the hours recomputed join the team's.
// Whether the store's reading saw a record before or after the flush
// wrote it then makes no difference. In a first flush of 50,000 pods
// reading back what had just been written was about a quarter of the
// flush's CPU (BenchmarkFlush50kPods's profile, 2026-12-07), and the
// recomputing waited for the writing.
//
// It is built from the flush's records alone (each of them is never
// changed once made; see changes) and read by one goroutine.
type overlay struct {
	lo, to time.Time // the records that touch [lo, to) are recomputed

	all       []*podRec          // every pod's record the flush writes
	pods      map[types.UID]bool // their pods: made at the first stored record read (none in a new store)
	workloads map[string]bool    // every Workload the flush writes
	nodes     map[nodeKey]bool   // every node span the flush writes

	teamPods      map[string][]*podRec        // by team: those that touch [lo, to)
	teamWorkloads map[string][]usage.Workload // by team: those that touch [lo, to)
	teams         []string                    // the teams of both, in byte order
	spans         []usage.NodeSpan            // those that touch [lo, to)
}

// nodeKey is a node span's key in the store (its node and start).
type nodeKey struct {
	node string
	from time.Time // in UTC, without a monotonic reading
}

func spanKey(n usage.NodeSpan) nodeKey { return nodeKey{n.Node, n.From.UTC()} }

// newOverlay lays ch over the store's records touching [lo, to). ch's
// pods' records are the last of each pod; its Workloads and node spans
// may hold more than one of a key, and the last wins (usage.LastOfEach),
// as it does in store.PutUsageRecords.
func newOverlay(ch changes, lo, to time.Time) *overlay {
	o := &overlay{lo: lo, to: to, all: ch.Allocs, workloads: make(map[string]bool, len(ch.Workloads)),
		nodes: make(map[nodeKey]bool, len(ch.Nodes)), teamPods: map[string][]*podRec{}, teamWorkloads: map[string][]usage.Workload{}}
	for _, r := range ch.Allocs {
		if o.touches(r.pod.Start, r.End) {
			o.teamPods[r.Team] = append(o.teamPods[r.Team], r)
		}
	}
	for _, w := range usage.LastOfEach(ch.Workloads, func(w usage.Workload) string { return w.Key }) {
		o.workloads[w.Key] = true
		if o.touches(w.Created, w.Finished) {
			o.teamWorkloads[w.Team] = append(o.teamWorkloads[w.Team], w)
		}
	}
	for _, n := range usage.LastOfEach(ch.Nodes, spanKey) {
		o.nodes[spanKey(n)] = true
		if o.touches(n.From, n.To) {
			o.spans = append(o.spans, n)
		}
	}
	for t := range o.teamPods {
		o.teams = append(o.teams, t)
	}
	for t := range o.teamWorkloads {
		if _, ok := o.teamPods[t]; !ok {
			o.teams = append(o.teams, t)
		}
	}
	slices.Sort(o.teams)
	return o
}

// touches says whether a record from start to end (zero: still open)
// touches [lo, to), as the store's reading decides it (records that
// start before to and did not end before lo).
func (o *overlay) touches(start, end time.Time) bool {
	return start.Before(o.to) && (end.IsZero() || !end.Before(o.lo))
}

// nodeSpans is the store's node spans touching [lo, to) with the flush's
// laid over them.
func (o *overlay) nodeSpans(stored []usage.NodeSpan) []usage.NodeSpan {
	out := slices.DeleteFunc(stored, func(n usage.NodeSpan) bool { return o.nodes[spanKey(n)] })
	return append(out, o.spans...)
}

// each is a store's EachTeamUsageIn (read) with the flush's records laid
// over each team's, and the teams only the flush has records of added in
// their place: fn sees every team once, in byte order.
func (o *overlay) each(read func(fn func(team string, r store.UsageRecords) error) error, fn func(team string, r store.UsageRecords) error) error {
	next := 0 // o.teams[next:] are still to be seen
	// ahead passes fn the flush's teams before team (all of them: all).
	ahead := func(team string, all bool) error {
		for ; next < len(o.teams) && (all || o.teams[next] < team); next++ {
			if err := fn(o.teams[next], o.over(o.teams[next], store.UsageRecords{})); err != nil {
				return err
			}
		}
		return nil
	}
	if err := read(func(team string, r store.UsageRecords) error {
		if err := ahead(team, false); err != nil {
			return err
		}
		if next < len(o.teams) && o.teams[next] == team {
			next++
		}
		return fn(team, o.over(team, r))
	}); err != nil {
		return err
	}
	return ahead("", true)
}

// over is team's stored records r with the flush's laid over them.
func (o *overlay) over(team string, r store.UsageRecords) store.UsageRecords {
	if len(r.Allocs) > 0 && o.pods == nil {
		o.pods = make(map[types.UID]bool, len(o.all))
		for _, p := range o.all {
			o.pods[p.pod.UID] = true
		}
	}
	r.Allocs = slices.DeleteFunc(r.Allocs, func(a usage.Alloc) bool { return o.pods[types.UID(a.Key)] })
	r.Allocs = slices.Grow(r.Allocs, len(o.teamPods[team]))
	for _, p := range o.teamPods[team] {
		r.Allocs = append(r.Allocs, p.alloc())
	}
	r.Workloads = slices.DeleteFunc(r.Workloads, func(w usage.Workload) bool { return o.workloads[w.Key] })
	r.Workloads = append(r.Workloads, o.teamWorkloads[team]...)
	return r
}
