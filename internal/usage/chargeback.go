package usage

import (
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Method is how a shared-cost policy splits the cluster's idle capacity and
// the platform overhead among the teams.
type Method string

const (
	// SplitByGuarantee: in proportion to each team's guarantee, priced ("you
	// reserved it, you pay for it").
	SplitByGuarantee Method = "guarantee"
	// SplitByUsage: in proportion to each team's direct charges.
	SplitByUsage Method = "usage"
	// SplitEvenly: the same share for every team with a guarantee or usage.
	SplitEvenly Method = "even"
	// SplitUnallocated: nobody; it stays platform cost.
	SplitUnallocated Method = "unallocated"
)

// Methods lists every method, in the order pages offer them.
var Methods = []Method{SplitByGuarantee, SplitByUsage, SplitEvenly, SplitUnallocated}

// Describe is the method's one-line explanation for pages.
func (m Method) Describe() string {
	switch m {
	case SplitByGuarantee:
		return "in proportion to each team's guarantee (you reserved it, you pay for it)"
	case SplitByUsage:
		return "in proportion to each team's usage"
	case SplitEvenly:
		return "evenly among the teams"
	case SplitUnallocated:
		return "left unallocated, as platform cost"
	}
	return string(m)
}

// ParseMethod reads a method's name.
func ParseMethod(s string) (Method, error) {
	for _, m := range Methods {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("%q is not a split method (one of guarantee, usage, even, unallocated)", s)
}

// MaxOverheadBasisPoints caps the platform overhead at 100 %.
const MaxOverheadBasisPoints = 10000

// Policy is the shared-cost policy finance chooses.
type Policy struct {
	Method Method
	// OverheadBasisPoints is the platform overhead added on top of the
	// cluster's cost, in hundredths of a percent (1250 = 12.5 %).
	OverheadBasisPoints int
}

// Validate reports what is wrong with p.
func (p Policy) Validate() error {
	if _, err := ParseMethod(string(p.Method)); err != nil {
		return err
	}
	if p.OverheadBasisPoints < 0 || p.OverheadBasisPoints > MaxOverheadBasisPoints {
		return fmt.Errorf("overhead %s %% is not between 0 and 100", FormatOverhead(p.OverheadBasisPoints))
	}
	return nil
}

// ParseOverhead reads a percentage with at most two decimals ("12.5") as
// basis points.
func ParseOverhead(s string) (int, error) {
	m, err := ParseAmount(strings.TrimSuffix(strings.TrimSpace(s), "%"), "XXX")
	if err != nil {
		return 0, fmt.Errorf("overhead %q is not a percentage such as 12.5", s)
	}
	if m.Minor < 0 || m.Minor > MaxOverheadBasisPoints {
		return 0, fmt.Errorf("overhead %q is not between 0 and 100", s)
	}
	return int(m.Minor), nil
}

// FormatOverhead writes basis points as a percentage ("12.50").
func FormatOverhead(bp int) string { return Money{Minor: int64(bp), Currency: "XXX"}.Amount() }

// Period is [From, To) in whole UTC hours.
type Period struct{ From, To time.Time }

// MonthOf is the calendar month (UTC) containing t.
func MonthOf(t time.Time) Period {
	t = t.UTC()
	from := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	return Period{From: from, To: from.AddDate(0, 1, 0)}
}

// Label is "2026-11" for a calendar month, else the two bounds.
func (p Period) Label() string {
	if m := MonthOf(p.From); m == p {
		return p.From.Format("2006-01")
	}
	return p.From.Format(time.RFC3339) + " – " + p.To.Format(time.RFC3339)
}

// InstanceAccel is what one instance of a type carries, in the unit its
// usage is counted in (provision.ResourcesPerInstance): Count accelerators
// per instance, the divisor of the hourly instance price. Neuron says they
// are Neuron devices (aws.amazon.com/neuron) rather than GPUs
// (nvidia.com/gpu); NeuronCoresPerDevice turns device-hours into the
// Neuron-core hours of HyperPod's report (0: not established, the column
// is left empty). Callers fill it from the provision settings.
type InstanceAccel struct {
	Count                int
	Neuron               bool
	NeuronCoresPerDevice int
}

// ChargeInput is everything one chargeback needs. Guarantees are each
// team's guaranteed instances per instance type over time (the store's
// guarantee history): a guarantee amended mid-period weighs at each value
// for the time it was in force, so a change this month never moves last
// month's split.
type ChargeInput struct {
	Hours        []Hour
	Cluster      []ClusterHour
	Rates        *RateCard
	Accelerators map[string]InstanceAccel
	Guarantees   GuaranteeHistory
	Policy       Policy
	Period       Period
}

// Line is one team's use of one instance type in one namespace over the
// period: the rows of HyperPod's summary report, plus their direct cost.
type Line struct {
	Team, Namespace, InstanceType string
	// Neuron: the accelerator-seconds are Neuron device-seconds, of
	// NeuronCoresPerDevice cores each (InstanceAccel).
	Neuron                 bool
	NeuronCoresPerDevice   int
	GuaranteedAccelSeconds int64
	BorrowedAccelSeconds   int64
	CPUMilliSeconds        int64
	Guaranteed, Borrowed   Money
}

// Cost is the line's direct cost.
func (l Line) Cost() Money { return l.Guaranteed.Add(l.Borrowed) }

// TeamCharge is what one team pays for the period.
type TeamCharge struct {
	Team  string
	Lines []Line
	// Direct charges for hours held within the guarantee and above it.
	Guaranteed, Borrowed Money
	// Shares of the cluster's idle capacity and of the platform overhead.
	Idle, Overhead Money
	Total          Money
}

// Unpriced is use the rate card cannot price (no rate in force, or the
// instance type's accelerator count is unknown); it is charged nothing.
type Unpriced struct {
	InstanceType string
	AccelSeconds int64
	Reason       string
}

// Chargeback is the period's split of the cluster's cost. The teams' totals
// plus Unallocated equal ClusterCost to the minor unit.
type Chargeback struct {
	Period   Period
	Policy   Policy
	Currency string
	// ClusterCost is Infrastructure (capacity at the rates in force) plus
	// Overhead (the policy's percentage of it).
	ClusterCost, Infrastructure, Overhead Money
	// IdleCost is the capacity no team held, at the rates in force.
	IdleCost Money
	Teams    []TeamCharge
	// Unallocated is platform cost: the idle capacity and overhead the
	// policy leaves to nobody, and capacity held but not attributed to a
	// team's rows. It is negative when borrowed hours carry a premium rate
	// that brings in more than the idle capacity cost; never because teams
	// held more than the capacity recorded (that capacity is counted at
	// what they held, and Notes say so).
	Unallocated Money
	Unpriced    []Unpriced
	Notes       []string
}

// Team returns a team's charge (zero when it had none).
func (c *Chargeback) Team(team string) TeamCharge {
	for _, t := range c.Teams {
		if t.Team == team {
			return t
		}
	}
	z := Money{Currency: c.Currency}
	return TeamCharge{Team: team, Guaranteed: z, Borrowed: z, Idle: z, Overhead: z, Total: z}
}

type lineKey struct{ team, ns, itype string }

type rateSeconds struct{ g, b int64 }

type lineAcc struct {
	line   Line
	byRate []rateSeconds
}

// Charge splits the cluster's cost for the period among the teams under
// the policy. Exact fractions of minor units are rounded once, at the end,
// by the largest-remainder method over every amount shown (each line's
// guaranteed and borrowed cost, each team's idle and overhead share, and the
// unallocated rest), ties going to the earlier team and line by name, so
// that the rounded amounts add up to the rounded cluster cost.
func Charge(in ChargeInput) (*Chargeback, error) {
	if in.Rates == nil {
		return nil, errors.New("usage: no rate card: usage can be shown, but not priced")
	}
	if err := in.Policy.Validate(); err != nil {
		return nil, err
	}
	if !in.Period.From.Before(in.Period.To) {
		return nil, fmt.Errorf("usage: empty period %s", in.Period.Label())
	}
	c := &charger{in: in, out: &Chargeback{Period: in.Period, Policy: in.Policy, Currency: in.Rates.Currency},
		unpriced: map[string]*Unpriced{}}
	infra, idleCost := c.clusterCost()
	overhead := new(big.Rat).Mul(infra, big.NewRat(int64(in.Policy.OverheadBasisPoints), 10000))
	total := new(big.Rat).Add(infra, overhead)
	lines := c.teamLines()
	teams := c.teamsOf(lines)
	keys := slices.SortedFunc(maps.Keys(lines), func(a, b lineKey) int {
		return cmpStrings(a.team, b.team, a.ns, b.ns, a.itype, b.itype)
	})
	lineExact, direct := c.lineAmounts(lines, keys)
	share := c.sharer(teams, direct, idleCost, overhead)
	c.split(teams, keys, lines, lineExact, share, idleCost, overhead, total)
	c.out.Infrastructure = c.money(roundRat(infra))
	c.out.Overhead = c.money(c.out.ClusterCost.Minor - c.out.Infrastructure.Minor)
	c.out.IdleCost = c.money(roundRat(idleCost))
	for _, t := range slices.Sorted(maps.Keys(c.unpriced)) {
		c.out.Unpriced = append(c.out.Unpriced, *c.unpriced[t])
	}
	return c.out, nil
}

// charger carries one chargeback through its steps: the cluster's cost
// (clusterCost), the teams' lines (teamLines, lineAmounts), the weights of
// the shares (sharer) and the rounded split (split).
type charger struct {
	in       ChargeInput
	out      *Chargeback
	unpriced map[string]*Unpriced
}

// typeRate is an instance type at one of its rates (an index into the
// rate card's rates of the type).
type typeRate struct {
	itype string
	rate  int
}

func (c *charger) money(v int64) Money { return Money{Minor: v, Currency: c.out.Currency} }

func (c *charger) inPeriod(t time.Time) bool {
	return !t.Before(c.in.Period.From) && t.Before(c.in.Period.To)
}

func (c *charger) markUnpriced(itype string, s int64, reason string) {
	u := c.unpriced[itype]
	if u == nil {
		u = &Unpriced{InstanceType: itype, Reason: reason}
		c.unpriced[itype] = u
	}
	u.AccelSeconds += s
}

// rateOf finds the rate index of an hour, or says why it cannot be priced.
func (c *charger) rateOf(itype string, at time.Time) (int, string) {
	if c.in.Accelerators[itype].Count <= 0 {
		return -1, "accelerators per instance unknown"
	}
	i := c.in.Rates.rateIndex(itype, at)
	if i < 0 {
		return -1, "no rate in force"
	}
	return i, ""
}

// priced is seconds × the rate's hourly price / (accelerators × 3600):
// exact minor units.
func (c *charger) priced(seconds map[typeRate]int64) *big.Rat {
	sum := new(big.Rat)
	for k, s := range seconds {
		sum.Add(sum, priceSeconds(s, c.in.Rates.rates[k.itype][k.rate].Hourly, c.in.Accelerators[k.itype].Count))
	}
	return sum
}

// clusterCost is the cluster's capacity (infra) and its idle part at the
// rates in force, exactly, with a note per instance type whose teams held
// more than the capacity recorded.
func (c *charger) clusterCost() (infra, idleCost *big.Rat) {
	capacity, idle := map[typeRate]int64{}, map[typeRate]int64{}
	type gap struct{ hours, seconds int64 }
	unknown := map[string]*gap{}
	for _, ch := range c.in.Cluster {
		if !c.inPeriod(ch.Start) {
			continue
		}
		// An hour in which the teams held more than the capacity recorded
		// (usage from before the collector first saw the nodes, whose
		// capacity it never recorded, or node churn) had at least what was
		// held: the cluster's cost counts that, so the teams are never
		// charged more than the cluster cost and unallocated does not go
		// negative because of it (issue 38).
		held := ch.CapacityAccelSeconds
		if ch.AllocatedAccelSeconds > held {
			g := unknown[ch.InstanceType]
			if g == nil {
				g = &gap{}
				unknown[ch.InstanceType] = g
			}
			g.hours++
			g.seconds += ch.AllocatedAccelSeconds - held
			held = ch.AllocatedAccelSeconds
		}
		r, why := c.rateOf(ch.InstanceType, ch.Start)
		if why != "" {
			c.markUnpriced(ch.InstanceType, held, why)
			continue
		}
		k := typeRate{ch.InstanceType, r}
		capacity[k] += held
		idle[k] += ch.IdleAccelSeconds()
	}
	for _, itype := range slices.Sorted(maps.Keys(unknown)) {
		g := unknown[itype]
		c.out.Notes = append(c.out.Notes, fmt.Sprintf("Capacity unknown: in %d hour(s) of %s the teams held %s accelerator-hours more than the capacity recorded "+
			"(usage from before the collector first saw the nodes, or node churn). The teams are charged for what they held, and the cluster's cost "+
			"counts that held capacity at the same rates, so it is not taken from the unallocated amount.", g.hours, itype, Hours(g.seconds)))
	}
	return c.priced(capacity), c.priced(idle)
}

// teamLines sums the teams' rows by line, and each line's seconds by rate.
func (c *charger) teamLines() map[lineKey]*lineAcc {
	lines := map[lineKey]*lineAcc{}
	for i := range c.in.Hours {
		h := &c.in.Hours[i]
		if !c.inPeriod(h.Start) {
			continue
		}
		k := lineKey{h.Team, h.Namespace, h.InstanceType}
		la := lines[k]
		if la == nil {
			acc := c.in.Accelerators[h.InstanceType]
			la = &lineAcc{line: Line{Team: h.Team, Namespace: h.Namespace, InstanceType: h.InstanceType,
				Neuron: acc.Neuron, NeuronCoresPerDevice: acc.NeuronCoresPerDevice}}
			lines[k] = la
		}
		la.line.GuaranteedAccelSeconds += h.GuaranteedAccelSeconds
		la.line.BorrowedAccelSeconds += h.BorrowedAccelSeconds
		la.line.CPUMilliSeconds += h.CPUMilliSeconds
		r, why := c.rateOf(h.InstanceType, h.Start)
		if why != "" {
			c.markUnpriced(h.InstanceType, h.AccelSeconds(), why)
			continue
		}
		for len(la.byRate) <= r {
			la.byRate = append(la.byRate, rateSeconds{})
		}
		la.byRate[r].g += h.GuaranteedAccelSeconds
		la.byRate[r].b += h.BorrowedAccelSeconds
	}
	return lines
}

// teamsOf is every team with usage or a guarantee in the period, by name.
func (c *charger) teamsOf(lines map[lineKey]*lineAcc) []string {
	teamSet := map[string]bool{}
	for k := range lines {
		teamSet[k.team] = true
	}
	for t, types := range c.in.Guarantees {
		for itype := range types {
			c.in.Guarantees.During(t, itype, c.in.Period.From, c.in.Period.To, func(_, _ time.Time, n int64) {
				if n > 0 {
					teamSet[t] = true
				}
			})
		}
	}
	return slices.Sorted(maps.Keys(teamSet))
}

// lineAmounts is each line's exact guaranteed and borrowed cost (in the
// order of keys) and each team's direct cost, their sum.
func (c *charger) lineAmounts(lines map[lineKey]*lineAcc, keys []lineKey) ([][2]*big.Rat, map[string]*big.Rat) {
	lineExact := make([][2]*big.Rat, len(keys))
	direct := map[string]*big.Rat{}
	for i, k := range keys {
		g, b := new(big.Rat), new(big.Rat)
		n := c.in.Accelerators[k.itype].Count
		for r, s := range lines[k].byRate {
			rate := c.in.Rates.rates[k.itype][r]
			g.Add(g, priceSeconds(s.g, rate.Hourly, n))
			b.Add(b, priceSeconds(s.b, rate.Borrowed, n))
		}
		lineExact[i] = [2]*big.Rat{g, b}
		if direct[k.team] == nil {
			direct[k.team] = new(big.Rat)
		}
		direct[k.team].Add(direct[k.team], g).Add(direct[k.team], b)
	}
	return lineExact, direct
}

// sharer weighs the teams by the policy's method and returns each team's
// exact share of a pool (nothing when no team weighs anything, with a note
// when there was something to split).
func (c *charger) sharer(teams []string, direct map[string]*big.Rat, idleCost, overhead *big.Rat) func(pool *big.Rat, i int) *big.Rat {
	weights := make([]*big.Rat, len(teams))
	for i := range weights {
		weights[i] = new(big.Rat)
	}
	switch c.in.Policy.Method {
	case SplitByGuarantee:
		// A guarantee's weight is its price over the period: over each
		// piece of it in which the guarantee stays the same, instances ×
		// the hourly prices in force, per second.
		for i, t := range teams {
			for itype := range c.in.Guarantees[t] {
				c.in.Guarantees.During(t, itype, c.in.Period.From, c.in.Period.To, func(from, to time.Time, n int64) {
					if n > 0 {
						weights[i].Add(weights[i], new(big.Rat).Mul(big.NewRat(n, 1), c.in.Rates.priceOver(itype, from, to)))
					}
				})
			}
		}
	case SplitByUsage:
		for i, t := range teams {
			if d := direct[t]; d != nil {
				weights[i].Set(d)
			}
		}
	case SplitEvenly:
		for i := range teams {
			weights[i].SetInt64(1)
		}
	}
	sumW := new(big.Rat)
	for _, w := range weights {
		sumW.Add(sumW, w)
	}
	if c.in.Policy.Method != SplitUnallocated && sumW.Sign() == 0 && (idleCost.Sign() != 0 || overhead.Sign() != 0) {
		c.out.Notes = append(c.out.Notes, fmt.Sprintf("No team has a %s to split by: the idle capacity and overhead stay unallocated.",
			map[Method]string{SplitByGuarantee: "guarantee", SplitByUsage: "usage", SplitEvenly: "guarantee or usage"}[c.in.Policy.Method]))
	}
	return func(pool *big.Rat, i int) *big.Rat {
		if sumW.Sign() == 0 {
			return new(big.Rat)
		}
		r := new(big.Rat).Mul(pool, weights[i])
		return r.Quo(r, sumW)
	}
}

// split lays out the exact amounts (per team, its lines' guaranteed and
// borrowed cost, then its idle and overhead shares; the unallocated rest
// last), rounds them together to the rounded cluster cost, and fills the
// teams' charges, the unallocated amount and the cluster cost.
func (c *charger) split(teams []string, keys []lineKey, lines map[lineKey]*lineAcc, lineExact [][2]*big.Rat,
	share func(pool *big.Rat, i int) *big.Rat, idleCost, overhead, total *big.Rat) {
	type teamSlots struct {
		lines          []int
		idle, overhead int
	}
	var exact []*big.Rat
	slots := make([]teamSlots, len(teams))
	rest := new(big.Rat).Set(total)
	li := 0
	for ti, t := range teams {
		for li < len(keys) && keys[li].team == t {
			slots[ti].lines = append(slots[ti].lines, len(exact))
			exact = append(exact, lineExact[li][0], lineExact[li][1])
			rest.Sub(rest, lineExact[li][0]).Sub(rest, lineExact[li][1])
			li++
		}
		is, os := share(idleCost, ti), share(overhead, ti)
		slots[ti].idle, slots[ti].overhead = len(exact), len(exact)+1
		exact = append(exact, is, os)
		rest.Sub(rest, is).Sub(rest, os)
	}
	exact = append(exact, rest)
	rounded := apportion(exact, roundRat(total))

	li = 0
	for ti, t := range teams {
		tc := TeamCharge{Team: t, Guaranteed: c.money(0), Borrowed: c.money(0)}
		for _, at := range slots[ti].lines {
			l := lines[keys[li]].line
			li++
			l.Guaranteed, l.Borrowed = c.money(rounded[at]), c.money(rounded[at+1])
			tc.Lines = append(tc.Lines, l)
			tc.Guaranteed = tc.Guaranteed.Add(l.Guaranteed)
			tc.Borrowed = tc.Borrowed.Add(l.Borrowed)
		}
		tc.Idle, tc.Overhead = c.money(rounded[slots[ti].idle]), c.money(rounded[slots[ti].overhead])
		tc.Total = tc.Guaranteed.Add(tc.Borrowed).Add(tc.Idle).Add(tc.Overhead)
		c.out.Teams = append(c.out.Teams, tc)
	}
	c.out.Unallocated = c.money(rounded[len(rounded)-1])
	c.out.ClusterCost = c.money(roundRat(total))
}

// priceSeconds is accelerator-seconds at an hourly instance price, exactly.
func priceSeconds(seconds int64, hourly Money, accelerators int) *big.Rat {
	n := new(big.Int).Mul(big.NewInt(seconds), big.NewInt(hourly.Minor))
	return new(big.Rat).SetFrac(n, big.NewInt(int64(accelerators)*3600))
}

// priceOver is the hourly price in force over [from, to), summed per
// second (minor units × hours, exactly).
func (c *RateCard) priceOver(itype string, from, to time.Time) *big.Rat {
	sum := new(big.Rat)
	rs := c.rates[itype]
	for i, r := range rs {
		f, t := Later(r.From, from), to
		if i+1 < len(rs) {
			t = Earlier(rs[i+1].From, to)
		}
		if t.After(f) {
			sum.Add(sum, big.NewRat(int64(t.Sub(f)/time.Second)*r.Hourly.Minor, 3600))
		}
	}
	return sum
}

// apportion rounds exact amounts to integers that add up to target, by the
// largest-remainder method: each is floored, and the shortfall goes one unit
// at a time to the largest fractional parts (the excess is taken from the
// smallest), ties to the earlier amount.
func apportion(exact []*big.Rat, target int64) []int64 {
	out := make([]int64, len(exact))
	fr := make([]*big.Rat, len(exact))
	var sum int64
	for i, e := range exact {
		out[i], fr[i] = floorRat(e)
		sum += out[i]
	}
	if len(exact) == 0 {
		return out
	}
	order := make([]int, len(exact))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return fr[order[a]].Cmp(fr[order[b]]) > 0 })
	short := target - sum
	for short > 0 {
		for _, i := range order {
			if short == 0 {
				break
			}
			out[i]++
			short--
		}
	}
	for short < 0 {
		for j := len(order) - 1; j >= 0 && short < 0; j-- {
			out[order[j]]--
			short++
		}
	}
	return out
}

func cmpStrings(pairs ...string) int {
	for i := 0; i+1 < len(pairs); i += 2 {
		if c := strings.Compare(pairs[i], pairs[i+1]); c != 0 {
			return c
		}
	}
	return 0
}

// Project extends an amount accrued over elapsed to the whole period, in
// proportion to time (rounded half away from zero). With nothing elapsed it
// is the amount itself.
func Project(toDate Money, elapsed, whole time.Duration) Money {
	if elapsed <= 0 || elapsed >= whole {
		return toDate
	}
	r := new(big.Rat).SetFrac(new(big.Int).Mul(big.NewInt(toDate.Minor), big.NewInt(int64(whole/time.Second))),
		big.NewInt(int64(elapsed/time.Second)))
	return Money{Minor: roundRat(r), Currency: toDate.Currency}
}

// Hours formats accelerator- or CPU-seconds as hours with three decimals
// (truncated), the unit of HyperPod's report.
func Hours(seconds int64) string {
	ms := seconds * 1000 / 3600
	return strconv.FormatInt(ms/1000, 10) + "." + fmt.Sprintf("%03d", ms%1000)
}
