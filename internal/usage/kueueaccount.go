package usage

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// BorrowSample is Kueue's account of a ClusterQueue's borrowing beside the
// portal's, from At on (until the key's next sample): Kueue is what the
// ClusterQueue's status reports borrowing of Resource on Flavor
// (status.flavorsUsage[].resources[].borrowed), Portal what the usage
// collector counts the queue's team holding above its guarantee on that
// instance type at that moment (the portal names flavors after instance
// types), both in the resource's units (accelerators).
//
// Kueue's borrowed is "quantity of quota that is borrowed from the cohort.
// In other words, it's the used quota that is over the nominalQuota"
// (sigs.k8s.io/kueue@v0.17.0 apis/kueue/v1beta2/clusterqueue_types.go,
// ResourceUsage.Borrowed); Kueue computes it as max(0, used - nominal),
// used being the quota the queue's admitted workloads reserve, and 0 for
// a queue in no cohort (pkg/cache/scheduler/cache.go, getUsage). The
// portal's is the same difference over what pods really hold on nodes
// (Integrate's rule, against the contract's guarantee): the two agree
// whenever the team's pods are exactly its admitted workloads and its
// guarantee is its queue's nominal quota.
type BorrowSample struct {
	Cluster, ClusterQueue, Flavor, Resource string
	Team                                    string
	At                                      time.Time
	Kueue, Portal                           int64
}

// Key names the sample's series.
func (s BorrowSample) Key() string {
	return s.ClusterQueue + " " + s.Flavor + " " + s.Resource
}

// Agree says the two accounts match.
func (s BorrowSample) Agree() bool { return s.Kueue == s.Portal }

// EvaluateKueueAccount compares Kueue's account of borrowing with the
// portal's at now: it fires when, for some ClusterQueue, flavor and
// resource, the two have disagreed without a break for longer than
// th.KueueAccountWindow. samples are each series' samples from now -
// th.KueueAccountWindow on, with the last one before (KueueBorrowing).
//
// The tolerance is in time, not in amount: both count whole accelerators,
// so at rest they are equal, but they change at different moments. Kueue
// counts a workload's quota from its admission, before its pods are
// scheduled and started, and stops when it evicts or finishes it, while
// its pods may still be terminating, for up to their
// terminationGracePeriodSeconds ("Defaults to 30 seconds", k8s.io/api@v0.37.2
// core/v1/types.go, PodSpec.TerminationGracePeriodSeconds); the portal counts what the pods hold on their nodes.
// A disagreement that outlasts the window is not that lag: pods Kueue does
// not account for (a job without a queue name, which Kueue leaves alone
// when manageJobsWithoutQueueName is false), a guarantee that is not the
// queue's nominal quota, or a collector that misses events.
func EvaluateKueueAccount(samples []BorrowSample, now time.Time, th Thresholds, owner string) SignalStatus {
	window := kueueWindow(th)
	s := SignalStatus{Kind: SignalKueueAccount, Owner: owner,
		Response:  "Cluster admins: compare the ClusterQueue's status (kubectl get clusterqueue -o yaml) with the team's pods; look for pods outside Kueue or a guarantee that is not the queue's nominal quota.",
		Threshold: fmt.Sprintf("fires when Kueue's borrowed quota (ClusterQueue status.flavorsUsage) and the portal's borrowed accelerators differ for a queue, flavor and resource for longer than %s", window),
		Intent:    "the portal's borrowed hours and Kueue's account of borrowing describe the same use"}
	series := map[string][]BorrowSample{}
	for _, b := range samples {
		if !b.At.After(now) {
			series[b.Key()] = append(series[b.Key()], b)
		}
	}
	if len(series) == 0 {
		s.State, s.Current = SignalNoData, "the usage collector has recorded no ClusterQueue's borrowing"
		return s
	}
	var diffs []string
	for _, ss := range series {
		slices.SortFunc(ss, func(a, b BorrowSample) int { return a.At.Compare(b.At) })
		last := ss[len(ss)-1]
		if last.Agree() {
			continue
		}
		since := last.At
		for i := len(ss) - 1; i >= 0 && !ss[i].Agree(); i-- {
			since = ss[i].At
		}
		if now.Sub(since) > window {
			diffs = append(diffs, fmt.Sprintf("ClusterQueue %s (team %s), flavor %s, %s: Kueue %d borrowed, the portal %d, since %s",
				last.ClusterQueue, cmp.Or(last.Team, "?"), last.Flavor, last.Resource, last.Kueue, last.Portal, since.UTC().Format(time.RFC3339)))
		}
	}
	slices.Sort(diffs)
	if len(diffs) == 0 {
		s.State, s.Current = SignalOK, fmt.Sprintf("%d queue, flavor and resource series agree (or differ for less than %s)", len(series), window)
		return s
	}
	s.State, s.Current = SignalFiring, strings.Join(diffs, "; ")
	return s
}

// kueueWindow is th's KueueAccountWindow, the default's when unset.
func kueueWindow(th Thresholds) time.Duration {
	return cmp.Or(th.KueueAccountWindow, DefaultThresholds.KueueAccountWindow)
}
