package usage

import (
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"
)

// Statement is one team's charges for one month, in the shape the page, the
// CSV and the JSON share. A closed month's statement is frozen (stored once,
// its hash in the audit trail); the current month's is a projection
// computed on every read.
type Statement struct {
	Team     string `json:"team"`
	Month    string `json:"month"` // 2026-11
	Currency string `json:"currency"`
	// Frozen is false for the current month: a projection that changes as
	// usage arrives.
	Frozen     bool      `json:"frozen"`
	ComputedAt time.Time `json:"computed_at"`
	Policy     struct {
		Method          Method `json:"method"`
		OverheadPercent string `json:"overhead_percent"`
	} `json:"policy"`
	// DemoPrices: the rate card's prices are made up (make run).
	DemoPrices bool            `json:"demo_prices"`
	Lines      []StatementLine `json:"lines"`
	Guaranteed string          `json:"guaranteed"`
	Borrowed   string          `json:"borrowed"`
	IdleShare  string          `json:"idle_share"`
	Overhead   string          `json:"overhead_share"`
	Total      string          `json:"total"`
	Missing    []MissingPeriod `json:"missing_data_periods"`
	Unpriced   []Unpriced      `json:"unpriced,omitempty"`
}

// StatementLine carries the columns of HyperPod's summary report (team
// namespace, instance type, allocated i.e. guaranteed and borrowed GPU,
// Neuron-core and CPU hours) plus cost.
type StatementLine struct {
	Namespace                 string `json:"namespace"`
	InstanceType              string `json:"instance_type"`
	GuaranteedGPUHours        string `json:"guaranteed_gpu_hours"`
	BorrowedGPUHours          string `json:"borrowed_gpu_hours"`
	GuaranteedNeuronCoreHours string `json:"guaranteed_neuroncore_hours"`
	BorrowedNeuronCoreHours   string `json:"borrowed_neuroncore_hours"`
	CPUHours                  string `json:"cpu_hours"`
	Cost                      string `json:"cost"`
}

// MissingPeriod is a Missing as statements list it.
type MissingPeriod struct {
	Cluster string    `json:"cluster"`
	From    time.Time `json:"from"`
	To      time.Time `json:"to"`
	Reason  string    `json:"reason"`
}

// StatementOf builds a team's statement from a month's chargeback and the
// missing data periods that touch the month.
func StatementOf(cb *Chargeback, team string, missing []Missing, demoPrices bool, at time.Time) Statement {
	tc := cb.Team(team)
	s := Statement{Team: team, Month: cb.Period.From.Format("2006-01"), Currency: cb.Currency, ComputedAt: at.UTC().Truncate(time.Second),
		DemoPrices: demoPrices, Guaranteed: tc.Guaranteed.Amount(), Borrowed: tc.Borrowed.Amount(),
		IdleShare: tc.Idle.Amount(), Overhead: tc.Overhead.Amount(), Total: tc.Total.Amount(),
		Lines: []StatementLine{}, Missing: []MissingPeriod{}}
	s.Policy.Method, s.Policy.OverheadPercent = cb.Policy.Method, FormatOverhead(cb.Policy.OverheadBasisPoints)
	for _, l := range tc.Lines {
		sl := StatementLine{Namespace: l.Namespace, InstanceType: l.InstanceType, CPUHours: Hours(l.CPUMilliSeconds / 1000),
			GuaranteedGPUHours: Hours(0), BorrowedGPUHours: Hours(0), GuaranteedNeuronCoreHours: Hours(0), BorrowedNeuronCoreHours: Hours(0),
			Cost: l.Cost().Amount()}
		switch {
		case l.Neuron && l.NeuronCoresPerDevice > 0:
			// Usage is counted in devices; the report's column is cores.
			c := int64(l.NeuronCoresPerDevice)
			sl.GuaranteedNeuronCoreHours, sl.BorrowedNeuronCoreHours = Hours(l.GuaranteedAccelSeconds*c), Hours(l.BorrowedAccelSeconds*c)
		case l.Neuron:
			// Cores per device not established for this instance type:
			// no figure rather than device-hours under a cores heading.
			sl.GuaranteedNeuronCoreHours, sl.BorrowedNeuronCoreHours = "", ""
		default:
			sl.GuaranteedGPUHours, sl.BorrowedGPUHours = Hours(l.GuaranteedAccelSeconds), Hours(l.BorrowedAccelSeconds)
		}
		s.Lines = append(s.Lines, sl)
	}
	for _, m := range missing {
		if m.Overlaps(cb.Period.From, cb.Period.To) {
			s.Missing = append(s.Missing, MissingPeriod{Cluster: m.Cluster, From: m.From.UTC(), To: m.To.UTC(), Reason: m.Reason})
		}
	}
	for _, u := range cb.Unpriced {
		if slices.ContainsFunc(tc.Lines, func(l Line) bool { return l.InstanceType == u.InstanceType }) {
			s.Unpriced = append(s.Unpriced, u)
		}
	}
	return s
}

// JSON is the statement's canonical JSON (indented, fields in a fixed
// order): what is frozen and hashed.
func (s Statement) JSON() []byte {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		panic(err) // only strings, times and slices of them
	}
	return append(b, '\n')
}

// Hash is the SHA-256 of the canonical JSON, in hex.
func (s Statement) Hash() string { return HashBytes(s.JSON()) }

// HashBytes is the SHA-256 of b, in hex.
func HashBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// CSVHeader is the statement CSV's first row.
var CSVHeader = []string{"team", "month", "item", "namespace", "instance_type",
	"guaranteed_gpu_hours", "borrowed_gpu_hours", "guaranteed_neuroncore_hours", "borrowed_neuroncore_hours",
	"cpu_hours", "cost", "currency", "note"}

// CSV items: a usage line, the shares, the total, a missing data period.
const (
	ItemUsage    = "usage"
	ItemIdle     = "idle_share"
	ItemOverhead = "overhead_share"
	ItemTotal    = "total"
	ItemMissing  = "missing_data"
	ItemUnpriced = "unpriced"
)

// WriteCSV writes the statement as CSV: one row per usage line, then the
// shares and the total, then its missing data periods.
func (s Statement) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	row := func(item, ns, it string, hours [5]string, cost, note string) {
		_ = cw.Write(append([]string{s.Team, s.Month, item, ns, it}, append(hours[:], cost, s.Currency, note)...))
	}
	_ = cw.Write(CSVHeader)
	for _, l := range s.Lines {
		row(ItemUsage, l.Namespace, l.InstanceType, [5]string{l.GuaranteedGPUHours, l.BorrowedGPUHours, l.GuaranteedNeuronCoreHours,
			l.BorrowedNeuronCoreHours, l.CPUHours}, l.Cost, "")
	}
	row(ItemIdle, "", "", [5]string{}, s.IdleShare, "share of idle capacity: "+string(s.Policy.Method))
	row(ItemOverhead, "", "", [5]string{}, s.Overhead, "platform overhead "+s.Policy.OverheadPercent+"%: "+string(s.Policy.Method))
	note := "frozen"
	if !s.Frozen {
		note = "projection: the month is not closed"
	}
	if s.DemoPrices {
		note += "; demo prices"
	}
	row(ItemTotal, "", "", [5]string{}, s.Total, note)
	for _, m := range s.Missing {
		row(ItemMissing, "", "", [5]string{}, "", fmt.Sprintf("%s to %s (%s): %s", m.From.Format(time.RFC3339), m.To.Format(time.RFC3339), m.Cluster, m.Reason))
	}
	for _, u := range s.Unpriced {
		row(ItemUnpriced, "", u.InstanceType, [5]string{}, "", Hours(u.AccelSeconds)+" accelerator-hours not priced: "+u.Reason)
	}
	cw.Flush()
	return cw.Error()
}

// CSVRow is one parsed row of a statement CSV.
type CSVRow map[string]string

// ParseStatementCSV reads a statement CSV back, checking its header.
func ParseStatementCSV(r io.Reader) ([]CSVRow, error) {
	return parseCSV(r, "statement", CSVHeader)
}

// parseCSV reads a CSV whose first record must be header, as rows keyed
// by the header's names; what names the CSV in the error.
func parseCSV(r io.Reader, what string, header []string) ([]CSVRow, error) {
	recs, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 || !slices.Equal(recs[0], header) {
		return nil, fmt.Errorf("%s CSV: the header is not %v", what, header)
	}
	out := make([]CSVRow, 0, len(recs)-1)
	for _, rec := range recs[1:] {
		row := CSVRow{}
		for i, h := range header {
			row[h] = rec[i]
		}
		out = append(out, row)
	}
	return out, nil
}
