package views

import "github.com/a-h/templ"

// PeriodForm is the period picker of the usage pages: dates as typed (kept
// on an error) and each field's message.
type PeriodForm struct {
	From, To string // YYYY-MM-DD, UTC days, both included
	Errors   map[string]string
}

// MissingRow is a missing data period that touches the page's period.
type MissingRow struct {
	From, To, Reason string
}

// QuotaSuggestionView is a suggested guarantee with its reasoning.
type QuotaSuggestionView struct {
	InstanceType string
	Current      int
	// Proposed is what a change under approval asks for ("" elsewhere).
	Proposed  string
	Suggested int
	Enough    bool
	Reasoning []string
}

// WaitView is the period's wait-time percentiles (creation to admission).
type WaitView struct {
	Label         string // e.g. "Median hour" or "Worst hour"
	P50, P90, P99 string
}

// TeamUsage is the team usage page (/teams/:team/usage).
type TeamUsage struct {
	Team   string
	Period PeriodForm
	// PeriodLabel says which hours are shown, e.g. "2026-11-01 to
	// 2026-11-30 (UTC)".
	PeriodLabel string
	// UpTo, when the period reaches the hour in progress, says that the
	// figures stop at its start and why.
	UpTo    string
	Demo    bool // some rows are demo data: the page says so
	Missing []MissingRow
	// UtilizationNote says why utilization is not shown (no Prometheus
	// source configured); empty when it is.
	UtilizationNote string
	// Guarantee says what the guarantee line is, e.g. "2 × ml.p5.48xlarge
	// = 16 accelerators", or that the team has no approved connection.
	Guarantee  string
	Allocation TimeSeriesChart
	Hours      StackedBarChart
	// Totals of the period, already formatted.
	GuaranteedHours, BorrowedHours string
	PeakRunning, PeakPending       int
	Preemptions                    int
	Waits                          []WaitView
	Suggestions                    []QuotaSuggestionView
	NoData                         bool // no rows at all in the period
	// InProgress is the hour in progress so far, when the period reaches
	// it; nil otherwise.
	InProgress *HourInProgress

	// Cost is the cost block (cost to date, projected month end; without a
	// rate card it says why there is no money): CostBlockView. Nil: the
	// page shows no cost block.
	Cost templ.Component
}

// TeamUsageRow is one team on the cluster overview.
type TeamUsageRow struct {
	Team                  string
	Href                  string
	GuaranteeAccelerators string
	MeanAccelerators      string
	P95Accelerators       string
	BorrowedHours         string
	Status                string // "above", "below", "within", "none"
	StatusLabel           string
}

// UnhealthyRow is an instance type with unhealthy node time in the period.
type UnhealthyRow struct {
	Cluster, InstanceType string
	NodeHours             string
	LatestHour            string // unhealthy nodes in the latest recorded hour
}

// ClusterUsage is the admins' cluster overview (/admin/usage).
type ClusterUsage struct {
	Period                                   PeriodForm
	PeriodLabel                              string
	UpTo                                     string // as TeamUsage.UpTo
	Demo                                     bool
	Missing                                  []MissingRow
	Stacked                                  StackedBarChart // every team's accelerator-hours per day, and idle capacity
	CapacityHours, AllocatedHours, IdleHours string
	IdlePercent                              string
	Teams                                    []TeamUsageRow
	Unhealthy                                []UnhealthyRow
	NoData                                   bool
}

// HourInProgress is what the collector has recorded of the hour in
// progress so far. It recomputes the hour at every flush, so the figures
// grow until the hour ends; then they join the period's totals, which
// leave the hour out until it is complete.
type HourInProgress struct {
	Start                          string // "15:00 UTC"
	Recorded                       bool   // the collector has written a row for the hour
	GuaranteedHours, BorrowedHours string
	Running, Pending, Preempted    int
}

// UsageSummary is the daily summary page (/teams/:team/usage/summary, and
// /admin/usage/summary across teams): HyperPod's summary usage report.
type UsageSummary struct {
	// Team is the team shown; empty on the admins' page of every team.
	Team        string
	Period      PeriodForm
	PeriodLabel string
	UpTo        string
	Demo        bool
	Missing     []MissingRow
	// CSV is the download of the same lines, period included.
	CSV   string
	Lines []SummaryLineView
	// Totals of the period per accelerator unit and of vCPUs.
	Totals []SummaryTotalView
}

// SummaryLineView is one line of the daily summary, already formatted.
type SummaryLineView struct {
	Day, Team, Namespace, InstanceType string
	// Accelerator is the unit of the accelerator columns: GPU or NeuronCore
	// (empty for an instance type without accelerators).
	Accelerator                               string
	AccelTotal, AccelAllocated, AccelBorrowed string
	VCPUTotal, VCPUAllocated, VCPUBorrowed    string
	Missing                                   string
}

// SummaryTotalView is the period's total of one unit (GPU, NeuronCore or
// vCPU hours).
type SummaryTotalView struct {
	Unit                       string
	Total, Allocated, Borrowed string
}
