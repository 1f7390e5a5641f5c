package usage

import (
	"cmp"
	"encoding/csv"
	"io"
	"slices"
	"strings"
	"time"
)

// The daily summary is HyperPod's summary usage report: per UTC day,
// namespace, team and instance type, the total, allocated (within the
// team's quota) and borrowed hours of NeuronCores, GPUs and vCPUs, and the
// missing data periods. AWS documents it in "Reports details and data
// breakdown" (docs.aws.amazon.com/sagemaker/latest/dg/
// sagemaker-hyperpod-usage-reporting-content.html: "Summary reports
// provide a per-day high-level overview of compute resource consumption
// across teams/namespaces, and instance types distinguishing between
// allocated (reserved quota) and borrowed (lended pool) utilization";
// both reports carry "Missing data periods: Gaps in data collection due to
// cluster downtime or monitoring issues"), and its generator writes these
// columns (awslabs/sagemaker-hyperpod-usage-report, report_generation/src/
// hyperpod_usage_report/generators/csv_generator.py, generate_summary_report:
// Date, Namespace, Team, Instance Type, then NeuronCore, GPU and vCPU
// "Total / Allocated / Borrowed utilization (hours)"). The portal's
// allocated is its guaranteed (usage.Hour).

// SummaryRow is one line of the daily summary: a team's use of one
// instance type in one namespace on one UTC day, and the missing data
// periods that touch the day. Accelerator-seconds are in the instance
// type's unit (GPUs, or whole Neuron devices); SummaryLine turns them into
// the report's hours.
type SummaryRow struct {
	Day                           time.Time
	Team, Namespace, InstanceType string

	GuaranteedAccelSeconds, BorrowedAccelSeconds int64
	CPUMilliSeconds, BorrowedCPUMilliSeconds     int64

	Missing []Missing
	Demo    bool
}

// DailySummary sums rows (hourly, or already summed per day: each counts
// on its Start's UTC day) per day, team, namespace and instance type, in
// that order, each line with the missing data periods that touch its day.
// A day of [from, to) without any row but touched by a missing data period
// gets a line of its own with no team, so that the gap is never silent.
func DailySummary(rows []Hour, missing []Missing, from, to time.Time) []SummaryRow {
	type key struct {
		day             int64
		team, ns, itype string
	}
	lines := map[key]*SummaryRow{}
	days := map[int64]bool{}
	for _, r := range rows {
		d := DayStart(r.Start)
		k := key{d.Unix(), r.Team, r.Namespace, r.InstanceType}
		l := lines[k]
		if l == nil {
			l = &SummaryRow{Day: d, Team: r.Team, Namespace: r.Namespace, InstanceType: r.InstanceType}
			lines[k] = l
		}
		days[d.Unix()] = true
		l.GuaranteedAccelSeconds += r.GuaranteedAccelSeconds
		l.BorrowedAccelSeconds += r.BorrowedAccelSeconds
		l.CPUMilliSeconds += r.CPUMilliSeconds
		l.BorrowedCPUMilliSeconds += r.BorrowedCPUMilliSeconds
		l.Demo = l.Demo || r.Source == SourceDemo
	}
	for _, d := range Days(from, to) {
		if !days[d.Unix()] && slices.ContainsFunc(missing, func(m Missing) bool { return m.Overlaps(d, d.AddDate(0, 0, 1)) }) {
			lines[key{day: d.Unix()}] = &SummaryRow{Day: d}
		}
	}
	out := make([]SummaryRow, 0, len(lines))
	for _, l := range lines {
		for _, m := range missing {
			if m.Overlaps(l.Day, l.Day.AddDate(0, 0, 1)) {
				l.Missing = append(l.Missing, m)
			}
		}
		out = append(out, *l)
	}
	slices.SortFunc(out, func(a, b SummaryRow) int {
		return cmp.Or(a.Day.Compare(b.Day), cmp.Compare(a.Team, b.Team), cmp.Compare(a.Namespace, b.Namespace),
			cmp.Compare(a.InstanceType, b.InstanceType))
	})
	return out
}

// SummaryLine is a SummaryRow in the report's units: hours as text with
// three decimals (Hours), the accelerator hours under GPU or NeuronCore as
// the instance type's accelerator resource says (acc; NeuronCore hours are
// device-hours times the documented cores per device, empty when those are
// not established, as on statements), vCPU hours.
type SummaryLine struct {
	Day, Team, Namespace, InstanceType string
	// Accelerator names the unit of the accelerator columns: "GPU",
	// "NeuronCore", or "" for an instance type without accelerators.
	Accelerator                               string
	AccelTotal, AccelAllocated, AccelBorrowed string
	VCPUTotal, VCPUAllocated, VCPUBorrowed    string
	Missing                                   string
}

// Line is r in the report's units, the instance type's accelerators from
// acc.
func (r SummaryRow) Line(acc map[string]InstanceAccel) SummaryLine {
	l := SummaryLine{Day: r.Day.Format(time.DateOnly), Team: r.Team, Namespace: r.Namespace, InstanceType: r.InstanceType,
		VCPUTotal: Hours(r.CPUMilliSeconds / 1000), VCPUAllocated: Hours((r.CPUMilliSeconds - r.BorrowedCPUMilliSeconds) / 1000),
		VCPUBorrowed: Hours(r.BorrowedCPUMilliSeconds / 1000), Missing: MissingText(r.Missing)}
	g, b := r.GuaranteedAccelSeconds, r.BorrowedAccelSeconds
	a := acc[r.InstanceType]
	switch {
	case a.Neuron && a.NeuronCoresPerDevice > 0:
		c := int64(a.NeuronCoresPerDevice)
		l.Accelerator, l.AccelTotal, l.AccelAllocated, l.AccelBorrowed = "NeuronCore", Hours((g+b)*c), Hours(g*c), Hours(b*c)
	case a.Neuron:
		l.Accelerator = "NeuronCore" // cores per device not established: no figure
	case a.Count > 0 || g+b > 0:
		l.Accelerator, l.AccelTotal, l.AccelAllocated, l.AccelBorrowed = "GPU", Hours(g+b), Hours(g), Hours(b)
	}
	return l
}

// MissingText lists missing data periods as the reports print them
// ("2026-11-03 10:00:00 to 2026-11-03 12:30:00 UTC"), separated by "; ".
func MissingText(ms []Missing) string {
	var parts []string
	for _, m := range ms {
		parts = append(parts, m.From.UTC().Format(time.DateTime)+" to "+m.To.UTC().Format(time.DateTime)+" UTC")
	}
	return strings.Join(parts, "; ")
}

// SummaryCSVHeader is the daily summary's CSV columns: HyperPod's summary
// report's (Date, Namespace, Team, Instance Type; NeuronCore, GPU and vCPU
// total, allocated and borrowed hours) in one header row, and the missing
// data periods that touch each day (HyperPod lists them above the table;
// a column keeps the file one table).
var SummaryCSVHeader = []string{"date", "namespace", "team", "instance_type",
	"neuroncore_total_hours", "neuroncore_allocated_hours", "neuroncore_borrowed_hours",
	"gpu_total_hours", "gpu_allocated_hours", "gpu_borrowed_hours",
	"vcpu_total_hours", "vcpu_allocated_hours", "vcpu_borrowed_hours", "missing_data_periods"}

// WriteSummaryCSV writes the daily summary's lines.
func WriteSummaryCSV(w io.Writer, lines []SummaryLine) error {
	cw := csv.NewWriter(w)
	_ = cw.Write(SummaryCSVHeader)
	for _, l := range lines {
		neuron, gpu := []string{"", "", ""}, []string{"", "", ""}
		switch l.Accelerator {
		case "NeuronCore":
			neuron = []string{l.AccelTotal, l.AccelAllocated, l.AccelBorrowed}
		case "GPU":
			gpu = []string{l.AccelTotal, l.AccelAllocated, l.AccelBorrowed}
		}
		rec := append([]string{l.Day, l.Namespace, l.Team, l.InstanceType}, neuron...)
		rec = append(append(rec, gpu...), l.VCPUTotal, l.VCPUAllocated, l.VCPUBorrowed, l.Missing)
		_ = cw.Write(rec)
	}
	cw.Flush()
	return cw.Error()
}

// ParseSummaryCSV reads a daily summary back (for tests and anyone checking
// a download), checking its header.
func ParseSummaryCSV(r io.Reader) ([]CSVRow, error) {
	return parseCSV(r, "summary", SummaryCSVHeader)
}

// SummaryTotal is the period's total, allocated and borrowed hours of one
// unit (GPU, NeuronCore or vCPU), formatted.
type SummaryTotal struct {
	Unit                       string
	Total, Allocated, Borrowed string
}

// SummaryTotals is the period's total, allocated and borrowed hours per
// unit: GPU, NeuronCore (where cores per device are established) and vCPU.
func SummaryTotals(rows []Hour, acc map[string]InstanceAccel) []SummaryTotal {
	var gpu, neuron [2]int64 // allocated, borrowed seconds of the unit
	var cpu [2]int64         // millicore-seconds
	for _, r := range rows {
		a := acc[r.InstanceType]
		switch {
		case a.Neuron && a.NeuronCoresPerDevice > 0:
			c := int64(a.NeuronCoresPerDevice)
			neuron[0] += r.GuaranteedAccelSeconds * c
			neuron[1] += r.BorrowedAccelSeconds * c
		case !a.Neuron:
			gpu[0] += r.GuaranteedAccelSeconds
			gpu[1] += r.BorrowedAccelSeconds
		}
		cpu[0] += r.GuaranteedCPUMilliSeconds()
		cpu[1] += r.BorrowedCPUMilliSeconds
	}
	var out []SummaryTotal
	add := func(unit string, v [2]int64) {
		out = append(out, SummaryTotal{Unit: unit, Total: Hours(v[0] + v[1]), Allocated: Hours(v[0]), Borrowed: Hours(v[1])})
	}
	if gpu != [2]int64{} {
		add("GPU", gpu)
	}
	if neuron != [2]int64{} {
		add("NeuronCore", neuron)
	}
	if len(rows) > 0 {
		add("vCPU", [2]int64{cpu[0] / 1000, cpu[1] / 1000})
	}
	return out
}
