package collect

import (
	"context"
	"strings"
	"time"

	"github.com/hyperpod-governance/portal/internal/usage"
)

// GuaranteeHistory is where the product reads the teams' guarantees from
// (internal/store's *DB).
type GuaranteeHistory interface {
	GuaranteeHistory(ctx context.Context, team string) (usage.GuaranteeHistory, error)
}

// Guaranteed is each team's guarantee history in the two units usage is
// split by: accelerators of each instance type's counted resource, and CPU
// in millicores (the instances guaranteed times the vCPUs of one, as the
// ClusterQueue's cpu quota). A nil CPU leaves CPU unsplit.
type Guaranteed struct {
	Accelerators usage.GuaranteeHistory
	CPU          usage.GuaranteeHistory
}

// GuaranteesFrom is the Collector's Guarantees as the portal runs it: each
// team's guaranteed instances per instance type over time, from the
// store's guarantee history (the approved versions' Scheduling.Guaranteed
// from when each took effect), read once and given in accelerators at
// accelerators(itype) and in CPU millicores at cpu(itype) per instance; a
// nil cpu leaves CPU unsplit.
func GuaranteesFrom(db GuaranteeHistory, accelerators, cpu func(itype string) int64) func(ctx context.Context) (Guaranteed, error) {
	return func(ctx context.Context) (Guaranteed, error) {
		h, err := db.GuaranteeHistory(ctx, "")
		if err != nil {
			return Guaranteed{}, err
		}
		g := Guaranteed{Accelerators: h.InAccelerators(accelerators)}
		if cpu != nil {
			g.CPU = h.InAccelerators(cpu)
		}
		return g, nil
	}
}

// borrowKey is one series of Kueue's account of borrowing.
type borrowKey struct{ queue, flavor, resource string }

// borrowingLocked returns Kueue's account of each team's ClusterQueue's
// borrowing beside the collector's at now (usage.BorrowSample), for the
// series whose figures changed since they were last recorded. The caller
// holds mu.
//
// Kueue's figure is the ClusterQueue's status.flavorsUsage[].resources[]
// .borrowed (sigs.k8s.io/kueue@v0.17.0 apis/kueue/v1beta2/
// clusterqueue_types.go, ResourceUsage.Borrowed: "the used quota that is
// over the nominalQuota"; computed as max(0, used - nominal), 0 outside a
// cohort, in pkg/cache/scheduler/cache.go getUsage). The collector's is
// what the team's running pods hold on nodes of the instance type (the
// flavor: the portal names ResourceFlavors after instance types) above the
// team's guarantee in force at now: the difference Integrate splits into
// borrowed seconds. Only the resource each instance type is counted in
// (the settings' accelerator table) is compared, and only the queues of
// teams the collector knows (ClusterQueueOf); CPU and memory are never
// borrowed in the portal's account.
func (c *Collector) borrowingLocked(g usage.GuaranteeHistory, now time.Time) []usage.BorrowSample {
	if c.ClusterQueueOf == nil {
		return nil
	}
	queueTeam := map[string]string{}
	for _, team := range c.teams {
		queueTeam[c.ClusterQueueOf(team)] = team
	}
	cur := map[borrowKey]usage.BorrowSample{}
	sample := func(k borrowKey, team string) usage.BorrowSample {
		s, ok := cur[k]
		if !ok {
			s = usage.BorrowSample{Cluster: c.Cluster, ClusterQueue: k.queue, Flavor: k.flavor, Resource: k.resource, Team: team, At: now}
		}
		return s
	}
	for queue, team := range queueTeam {
		for fr, v := range c.queues[queue] {
			flavor, res, _ := strings.Cut(fr, "/")
			if res == "" || res != c.unit(flavor) {
				continue
			}
			k := borrowKey{queue, flavor, res}
			s := sample(k, team)
			s.Kueue = v
			cur[k] = s
		}
	}
	type held struct{ team, itype string }
	holding := map[held]int64{}
	for _, a := range c.pods {
		if a.End.IsZero() && a.Accelerators > 0 {
			holding[held{a.Team, a.InstanceType}] += a.Accelerators
		}
	}
	for h, n := range holding {
		res := c.unit(h.itype)
		over := n - g.At(h.team, h.itype, now)
		if res == "" || over <= 0 {
			continue
		}
		k := borrowKey{c.ClusterQueueOf(h.team), h.itype, res}
		s := sample(k, h.team)
		s.Portal = over
		cur[k] = s
	}
	var out []usage.BorrowSample
	for k, s := range cur {
		if last, ok := c.sampled[k]; !ok || last.Kueue != s.Kueue || last.Portal != s.Portal || last.Team != s.Team {
			out = append(out, s)
		}
	}
	// A series that is no longer reported (its queue or team went) ends
	// at zero on both sides.
	for k, last := range c.sampled {
		if _, ok := cur[k]; !ok && (last.Kueue != 0 || last.Portal != 0) {
			last.At, last.Kueue, last.Portal = now, 0, 0
			out = append(out, last)
		}
	}
	return out
}

// recordedBorrowing notes samples as written. The caller holds mu.
func (c *Collector) recordedBorrowing(samples []usage.BorrowSample) {
	for _, s := range samples {
		c.sampled[borrowKey{s.ClusterQueue, s.Flavor, s.Resource}] = s
	}
}
