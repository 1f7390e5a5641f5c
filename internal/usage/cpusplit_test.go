package usage_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/hyperpod-governance/portal/internal/usage"
)

// Issue 31 item 9: CPU is split into within the guarantee and borrowed the
// way accelerators are, as HyperPod's usage report splits vCPU hours.
// Checked against the accelerator oracle (accelGuaranteeOracle, second by
// second) applied to the pods' CPU millicores, for hand-made and seeded
// pods; the accelerator split is the same as Integrate's.
func TestIntegrateSplitsCPULikeAccelerators(t *testing.T) {
	const ns1, ns2 = "hyperpod-ns-red-train", "hyperpod-ns-red-infer"
	type tc struct {
		name   string
		cpu    int64 // red's CPU guarantee in millicores
		allocs []usage.Alloc
	}
	cases := []tc{{
		// The figures by hand: guarantee 96 vCPUs (one ml.p5.48xlarge would
		// give 192; here 96 000 m). A holds 64 000 m from 10:00, B 48 000 m
		// from 10:30: B gets the 32 000 m A leaves and borrows 16 000 m for
		// 1800 s = 28 800 000 m·s.
		name: "by hand", cpu: 96_000,
		allocs: []usage.Alloc{
			{Key: "a", Team: red, Namespace: ns1, InstanceType: p5, Accelerators: 8, CPUMilli: 64_000, Start: at("10h")},
			{Key: "b", Team: red, Namespace: ns2, InstanceType: p5, Accelerators: 4, CPUMilli: 48_000, Start: at("10h30m")},
		},
	}}
	for i := range 12 {
		allocs := seededAllocs(i, ns1, ns2)
		r := rand.New(rand.NewPCG(uint64(i), 9))
		for j := range allocs {
			allocs[j].CPUMilli = 500 * (1 + r.Int64N(64))
		}
		cases = append(cases, tc{fmt.Sprintf("seeded %d", i), 500 * (1 + r.Int64N(96)), allocs})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			from, until := at("10h"), at("12h30m")
			g := usage.Guarantees{red: {p5: 16}}
			cpu := usage.Guarantees{red: {p5: c.cpu}}
			asCPU := make([]usage.Alloc, len(c.allocs))
			for i, a := range c.allocs {
				a.Accelerators = a.CPUMilli
				asCPU[i] = a
			}
			want := accelGuaranteeOracle(from, until, asCPU, cpu)
			split := usage.IntegrateSplit(from, until, c.allocs, nil, g.History(), cpu.History())
			got := map[nsHour][2]int64{}
			for _, h := range split {
				if h.CPUMilliSeconds != 0 {
					got[nsHour{h.Team, h.Namespace, h.Start.Unix()}] = [2]int64{h.GuaranteedCPUMilliSeconds(), h.BorrowedCPUMilliSeconds}
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("CPU [within borrowed] per namespace and hour:\ngot  %v\nwant %v", got, want)
			}
			// Everything else is Integrate's.
			plain := usage.Integrate(from, until, c.allocs, nil, g.History())
			for i := range split {
				split[i].BorrowedCPUMilliSeconds = 0
			}
			if !reflect.DeepEqual(split, plain) {
				t.Errorf("IntegrateSplit differs from Integrate beyond the CPU split:\n%+v\n%+v", split, plain)
			}
		})
	}
	// The hand case's figure, stated.
	h := usage.IntegrateSplit(at("10h"), at("11h"), cases[0].allocs, nil, nil, usage.Guarantees{red: {p5: 96_000}}.History())
	var borrowed int64
	for _, r := range h {
		borrowed += r.BorrowedCPUMilliSeconds
	}
	if borrowed != 16_000*1800 {
		t.Errorf("borrowed CPU = %d m·s, want 16 000 m × 1800 s", borrowed)
	}
	// Without a CPU history the CPU is left unsplit.
	for _, r := range usage.IntegrateSplit(at("10h"), at("11h"), cases[0].allocs, nil, nil, nil) {
		if r.BorrowedCPUMilliSeconds != 0 {
			t.Errorf("no CPU history: %+v has borrowed CPU", r)
		}
	}
}
