package usage

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// CostReader is the one read a period's money needs; internal/store's DB
// implements it (store.DB.CostInputSummed). It is declared here, where it
// is used, so that this package never imports the store.
type CostReader interface {
	// CostInputSummed returns the period's usage rows (each team's rows
	// may be summed between the times the rates change: a chargeback of
	// them equals that of every hourly row), the cluster's capacity rows,
	// the teams' guarantee history, and the missing data periods that
	// touch the period. It fills neither Rates, Accelerators nor Policy.
	CostInputSummed(ctx context.Context, p Period, changes []time.Time) (ChargeInput, []Missing, error)
}

// Pricing is what turns hours into money: the rate card (nil when none is
// configured) and what one instance of each type carries (AcceleratorsOf).
type Pricing struct {
	Rates        *RateCard
	Accelerators map[string]InstanceAccel
}

// Costs is a period's chargeback as the finance page, the team usage
// page's cost block, the statements (computed or frozen), their exports
// and the review evidence all show it: CostsOf is the only place that
// reads and prices one, so that a period shows the same figure everywhere.
type Costs struct {
	*Chargeback
	// Input is what the chargeback was computed from, priced (Rates,
	// Accelerators and Policy set): Under charges it again.
	Input   ChargeInput
	Missing []Missing
	// Priced is false without a rate card: the chargeback is then computed
	// at price zero, for its hours only.
	Priced bool
	// DemoUsage: some of the period's rows are demo rows (SourceDemo).
	DemoUsage bool
}

// CostsOf is the one function that computes money: it reads the period's
// input through r, prices it with pr (at price zero without a rate card)
// and charges it under pol. A team's money is CostsOf(...).Team(team).
func CostsOf(ctx context.Context, r CostReader, p Period, pol Policy, pr Pricing) (Costs, error) {
	in, missing, err := r.CostInputSummed(ctx, p, pr.Rates.Changes(p))
	if err != nil {
		return Costs{}, err
	}
	c := Costs{Missing: missing, Priced: pr.Rates != nil}
	in.Accelerators, in.Policy, in.Rates = pr.Accelerators, pol, pr.Rates
	if !c.Priced {
		in.Rates = zeroRates(in.Accelerators)
	}
	for _, h := range in.Hours {
		if h.Source == SourceDemo {
			c.DemoUsage = true
			break
		}
	}
	c.Input = in
	c.Chargeback, err = Charge(in)
	return c, err
}

// Under is the same period's chargeback under another policy, from the
// input already read (the finance page's preview of every method).
func (c Costs) Under(pol Policy) (*Chargeback, error) {
	if c.Chargeback != nil && c.Chargeback.Policy == pol {
		return c.Chargeback, nil
	}
	in := c.Input
	in.Policy = pol
	return Charge(in)
}

// zeroRates prices every known instance type at zero: the hours of a
// chargeback without money.
func zeroRates(accel map[string]InstanceAccel) *RateCard {
	var b strings.Builder
	b.WriteString(`{"currency": "XXX", "rates": [`)
	first := true
	for t := range accel {
		if !first {
			b.WriteString(",")
		}
		first = false
		fmt.Fprintf(&b, `{"instance_type": %q, "effective_from": "1970-01-01", "hourly": "0"}`, t)
	}
	b.WriteString("]}")
	card, err := ParseRateCard([]byte(b.String()))
	if err != nil {
		panic(err) // built from the accelerator table above
	}
	return card
}

// InstanceSpec is one instance type's row of the cluster's table of what
// an instance carries (provision.ResourcesPerInstance implements it): its
// accelerators in the unit its usage is counted in, whether they are whole
// Neuron devices, and the NeuronCores of one device (0: not established).
type InstanceSpec interface {
	AccelUnit() (count int, neuronDevices bool, neuronCoresPerDevice int)
}

// AcceleratorsOf is what one instance of each type carries, as money
// needs it, from the cluster's table (the same table plans use for quotas:
// provision.ClusterSettings.AcceleratorTable).
func AcceleratorsOf[S InstanceSpec](table map[string]S) map[string]InstanceAccel {
	out := make(map[string]InstanceAccel, len(table))
	for t, r := range table {
		n, neuron, cores := r.AccelUnit()
		out[t] = InstanceAccel{Count: n, Neuron: neuron, NeuronCoresPerDevice: cores}
	}
	return out
}
