package usage_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/usage"
)

// seededCluster is a reproducible cluster's records between 8:00 and
// 13:00: pods of four teams (two namespaces each, two instance types, some
// sharing a task, some still running), the Workloads of those tasks
// (waits, admissions, preemptions), guarantees that change mid-hour and
// node spans, some unhealthy.
func seededCluster(seed uint64) ([]usage.Alloc, []usage.Workload, []usage.NodeSpan, usage.GuaranteeHistory, usage.GuaranteeHistory) {
	r := rand.New(rand.NewPCG(seed, 41))
	teams := []string{"blue", "red", "red-2", "redb"} // "red-2" and "redb": byte order differs from some locales'
	itypes := []string{p5, "ml.trn1.32xlarge"}
	sec := func(lo, n int) time.Time { return at("8h").Add(time.Duration(lo+r.IntN(n)) * time.Second) }
	var allocs []usage.Alloc
	var wls []usage.Workload
	for i := range 120 {
		team := teams[r.IntN(len(teams))]
		a := usage.Alloc{Key: fmt.Sprintf("pod-%03d", i), Team: team, Namespace: fmt.Sprintf("hyperpod-ns-%s-%d", team, r.IntN(2)),
			InstanceType: itypes[r.IntN(2)], Accelerators: r.Int64N(9), CPUMilli: 1000 * r.Int64N(8), MemoryMiB: 1024 * r.Int64N(4),
			Start: sec(0, 4*3600)}
		if r.IntN(4) > 0 {
			a.End = a.Start.Add(time.Duration(r.IntN(2*3600)) * time.Second)
		}
		if r.IntN(3) > 0 {
			a.Task = fmt.Sprintf("wl-%s-%d", team, r.IntN(10))
		}
		allocs = append(allocs, a)
	}
	for _, team := range teams {
		for j := range 10 {
			created := sec(0, 3*3600)
			w := usage.Workload{Key: fmt.Sprintf("wl-%s-%d", team, j), Name: fmt.Sprintf("job-%d", j), Team: team,
				Namespace: fmt.Sprintf("hyperpod-ns-%s-%d", team, j%2), InstanceType: itypes[j%2], Created: created}
			t := created
			for k := range 1 + r.IntN(3) {
				wait := time.Duration(r.IntN(1800)) * time.Second
				w.Pending = append(w.Pending, usage.Span{From: t, To: t.Add(wait)})
				w.Admissions = append(w.Admissions, usage.Admission{At: t.Add(wait), WaitSeconds: int64(wait / time.Second)})
				t = t.Add(wait + time.Duration(r.IntN(3600))*time.Second)
				if k < 2 && r.IntN(2) == 0 {
					w.Preemptions = append(w.Preemptions, t)
				}
			}
			if r.IntN(2) == 0 {
				w.Finished = t
			}
			wls = append(wls, w)
		}
	}
	var nodes []usage.NodeSpan
	for n := range 6 {
		from := at("7h")
		for k := range 3 {
			to := from.Add(time.Duration(1800+r.IntN(3*3600)) * time.Second)
			if k == 2 {
				to = time.Time{}
			}
			nodes = append(nodes, usage.NodeSpan{Node: fmt.Sprintf("node-%d", n), InstanceType: itypes[n%2], Accelerators: 8,
				Schedulable: r.IntN(4) > 0, From: from, To: to})
			from = to
		}
	}
	g, cpu := usage.GuaranteeHistory{}, usage.GuaranteeHistory{}
	for _, team := range teams {
		for _, it := range itypes {
			g.Add(team, it, time.Time{}, r.Int64N(16))
			g.Add(team, it, sec(3600, 3600), r.Int64N(24))
			cpu.Add(team, it, time.Time{}, 1000*r.Int64N(32))
		}
	}
	return allocs, wls, nodes, g, cpu
}

// The collector's flush recomputes a cluster's hours team by team
// (usage.Integrator fed by store.EachTeamUsageIn), holding one team's
// records at a time: its rows must be those of IntegrateSplit and
// IntegrateCluster over all the records at once, whatever the order of the
// teams and of the records within a team.
func TestIntegratorTeamByTeam(t *testing.T) {
	for seed := range uint64(20) {
		allocs, wls, nodes, g, cpu := seededCluster(seed)
		from, until := at("9h20m"), at("12h34m56s")
		wantHours := usage.IntegrateSplit(from, until, slices.Clone(allocs), wls, g, cpu)
		wantCluster := usage.IntegrateCluster("c", from, until, nodes, allocs)
		if len(wantHours) == 0 || len(wantCluster) == 0 {
			t.Fatalf("seed %d: no rows to compare", seed)
		}
		byTeam := map[string]*[2][]any{}
		var teams []string
		for _, a := range allocs {
			if byTeam[a.Team] == nil {
				byTeam[a.Team] = &[2][]any{}
				teams = append(teams, a.Team)
			}
			byTeam[a.Team][0] = append(byTeam[a.Team][0], a)
		}
		for _, w := range wls {
			if byTeam[w.Team] == nil {
				byTeam[w.Team] = &[2][]any{}
				teams = append(teams, w.Team)
			}
			byTeam[w.Team][1] = append(byTeam[w.Team][1], w)
		}
		r := rand.New(rand.NewPCG(seed, 7))
		r.Shuffle(len(teams), func(i, j int) { teams[i], teams[j] = teams[j], teams[i] })
		in := usage.NewIntegrator("c", from, until, nodes, g, cpu)
		for _, team := range teams {
			var as []usage.Alloc
			var ws []usage.Workload
			for _, a := range byTeam[team][0] {
				as = append(as, a.(usage.Alloc))
			}
			for _, w := range byTeam[team][1] {
				ws = append(ws, w.(usage.Workload))
			}
			r.Shuffle(len(as), func(i, j int) { as[i], as[j] = as[j], as[i] })
			if err := in.Team(team, as, ws); err != nil {
				t.Fatal(err)
			}
		}
		if got := in.Hours(); !reflect.DeepEqual(got, wantHours) {
			t.Errorf("seed %d: team by team, %d rows differ from the whole's %d:\n%+v\nwant\n%+v", seed, len(got), len(wantHours), got, wantHours)
		}
		if got := in.ClusterHours(); !reflect.DeepEqual(got, wantCluster) {
			t.Errorf("seed %d: capacity rows team by team:\n%+v\nwant\n%+v", seed, got, wantCluster)
		}
	}
}

// A team's rows come from all its records at once: records of another
// team, or a team given twice, are refused rather than integrated.
func TestIntegratorRefusesPartsOfATeam(t *testing.T) {
	allocs, wls, _, g, cpu := seededCluster(1)
	from, until := at("9h"), at("12h")
	of := func(team string) ([]usage.Alloc, []usage.Workload) {
		var as []usage.Alloc
		var ws []usage.Workload
		for _, a := range allocs {
			if a.Team == team {
				as = append(as, a)
			}
		}
		for _, w := range wls {
			if w.Team == team {
				ws = append(ws, w)
			}
		}
		return as, ws
	}
	red, redW := of("red")
	blue, _ := of("blue")
	in := usage.NewIntegrator("c", from, until, nil, g, cpu)
	if err := in.Team("red", append(slices.Clone(red), blue[0]), redW); err == nil || !strings.Contains(err.Error(), `a pod of team "blue"`) {
		t.Errorf("a blue pod among red's: %v", err)
	}
	if err := in.Team("blue", nil, redW); err == nil || !strings.Contains(err.Error(), `a Workload of team "red"`) {
		t.Errorf("red's Workloads as blue's: %v", err)
	}
	if err := in.Team("red", red[:1], nil); err != nil {
		t.Fatal(err)
	}
	if err := in.Team("red", red[1:], redW); err == nil || !strings.Contains(err.Error(), "two parts") {
		t.Errorf("red's records in two parts: %v", err)
	}
}
