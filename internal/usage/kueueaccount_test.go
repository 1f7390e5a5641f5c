package usage

import (
	"strings"
	"testing"
	"time"
)

// Kueue's and the portal's borrowing fire only when they have differed
// without a break for longer than the window: a lag shorter than it (a
// preempted pod still terminating after Kueue released its quota) does
// not, an agreement in between restarts the count, and the event says
// which queue, flavor and resource and both figures.
func TestKueueAccountSignal(t *testing.T) {
	th := DefaultThresholds
	th.KueueAccountWindow = 10 * time.Minute
	at := func(min int, kueue, portal int64) BorrowSample {
		return BorrowSample{Cluster: "hp", ClusterQueue: "hyperpod-ns-red-clusterqueue", Team: "red", Flavor: "ml.p5.48xlarge",
			Resource: "nvidia.com/gpu", At: sigNow.Add(time.Duration(min) * time.Minute), Kueue: kueue, Portal: portal}
	}
	for _, tc := range []struct {
		name    string
		samples []BorrowSample
		want    SignalState
	}{
		{"nothing recorded", nil, SignalNoData},
		{"agree", []BorrowSample{at(-60, 0, 0), at(-30, 8, 8)}, SignalOK},
		{"differ for exactly the window", []BorrowSample{at(-60, 0, 0), at(-10, 0, 8)}, SignalOK},
		{"differ for a second more", []BorrowSample{at(-60, 0, 0), at(-10, 0, 8).shift(-time.Second)}, SignalFiring},
		{"differ since before the read, in force", []BorrowSample{at(-600, 8, 0)}, SignalFiring},
		{"differing figures change but keep differing", []BorrowSample{at(-60, 0, 0), at(-20, 0, 8), at(-5, 8, 16)}, SignalFiring},
		{"an agreement restarts the count", []BorrowSample{at(-60, 0, 8), at(-9, 8, 8), at(-5, 0, 8)}, SignalOK},
		{"agree again now", []BorrowSample{at(-60, 0, 8), at(0, 0, 0)}, SignalOK},
		{"a sample after now is not read", []BorrowSample{at(-60, 0, 0), at(1, 0, 8)}, SignalOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := EvaluateKueueAccount(tc.samples, sigNow, th, "admins")
			if s.State != tc.want || s.Kind != SignalKueueAccount || s.Team != "" || s.Owner != "admins" {
				t.Fatalf("= %+v; want %s", s, tc.want)
			}
			if s.State == SignalFiring {
				for _, part := range []string{"hyperpod-ns-red-clusterqueue", "ml.p5.48xlarge", "nvidia.com/gpu", "Kueue ", "the portal "} {
					if !strings.Contains(s.Current, part) {
						t.Errorf("detail %q does not name %q", s.Current, part)
					}
				}
			}
		})
	}
	// The detail carries the figures in force now.
	s := EvaluateKueueAccount([]BorrowSample{at(-60, 0, 0), at(-20, 0, 8), at(-5, 8, 16)}, sigNow, th, "admins")
	if !strings.Contains(s.Current, "Kueue 8 borrowed, the portal 16, since "+sigNow.Add(-20*time.Minute).Format(time.RFC3339)) {
		t.Errorf("detail = %q", s.Current)
	}
	// Unset, the window is the default's, not zero.
	if s := EvaluateKueueAccount([]BorrowSample{at(-5, 0, 8)}, sigNow, Thresholds{}, "admins"); s.State != SignalOK {
		t.Errorf("a 5-minute difference with the default window: %s", s.State)
	}
}

func (s BorrowSample) shift(d time.Duration) BorrowSample { s.At = s.At.Add(d); return s }
