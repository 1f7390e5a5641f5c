package views

// CostBlock is the small "cost to date and projected month end" component a
// team's pages embed (web.Server.TeamCostBlock builds it).
type CostBlock struct {
	Team  string
	Month string
	// Priced is false without a rate card; Why then says so.
	Priced     bool
	Why        string
	ToDate     string // "1234.56 USD"
	Projected  string
	DemoPrices bool
	DemoUsage  bool
	Missing    []string
	// StatementURL is the team's statement of the month, when the viewer
	// may read it ("" otherwise).
	StatementURL string
}

// Finance is the finance page.
type Finance struct {
	Month      string // "2026-11"
	Elapsed    string // "to 2026-11-14 09:00 UTC"
	Priced     bool
	NoPrices   string
	DemoPrices bool
	DemoUsage  bool
	RateNote   string
	Currency   string

	Teams       []FinanceTeam
	ClusterCost string
	// Unallocated is the platform cost ("—" when the teams paid above
	// cost); Premium what they paid above the cluster's cost ("—" when
	// not), with PremiumNote explaining it.
	Unallocated string
	Premium     string
	PremiumNote string
	Projected   string
	Missing     []string
	Unpriced    []string
	Notes       []string

	Statements []StatementRow
	// Window is which teams the page shows when there are more than one
	// page holds (Of is 0 when it shows every team).
	Window TeamWindow

	Policy  PolicyInfo
	History []PolicyInfo
	CanEdit bool
	Form    PolicyForm
	Errors  map[string]string
	Saved   string
	Methods []Choice
	// BasedOn is the policy version the form is filled against; saving
	// is refused when another was saved meanwhile.
	BasedOn int
	Preview Preview
}

// TeamWindow is the finance page's window of teams, by name: teams From
// to To, the First-th to the Last-th of Of, with the windows before and
// after ("" at either end).
type TeamWindow struct {
	From, To         string
	First, Last, Of  int
	PrevURL, NextURL string
}

// FinanceTeam is one team's month to date.
type FinanceTeam struct {
	Team                                 string
	GPUHours, NeuronHours, CPUHours      string
	Guaranteed, Borrowed, Idle, Overhead string
	ToDate, Projected                    string
	StatementURL                         string
}

// StatementRow is a frozen statement in the list.
type StatementRow struct {
	Team, Month, Total, Hash string
	URL, CSV, JSON           string
}

// PolicyInfo is a version of the shared-cost policy.
type PolicyInfo struct {
	Version  int
	Method   string
	Describe string
	Overhead string
	ChosenBy string
	ChosenAt string
	Reason   string
}

// PolicyForm is the policy editor's input, kept on an error.
type PolicyForm struct {
	Method, Overhead, Reason string
}

// Preview is next month's split under each policy, on a stated basis.
type Preview struct {
	Basis   string
	Methods []string
	Rows    []PreviewRow
	Empty   bool
	// PremiumNote explains the "premium collected above cost" row, when
	// a method has one.
	PremiumNote string
}

// PreviewRow is one team (or the unallocated rest) under each method.
type PreviewRow struct {
	Team    string
	Amounts []string
}

// StatementPage is one team's statement of one month.
type StatementPage struct {
	Team, Month                                 string
	Status                                      string // "Frozen on …" or "Projection: …"
	Frozen                                      bool
	Priced                                      bool
	NoPrices                                    string
	DemoPrices                                  bool
	DemoUsage                                   bool
	Currency                                    string
	Policy                                      string
	Hash                                        string
	Lines                                       []StatementLine
	Guaranteed, Borrowed, Idle, Overhead, Total string
	Projected                                   string
	Missing                                     []string
	Unpriced                                    []string
	CSV, JSON                                   string
	// Tasks is the detailed task report's CSV beside the statement.
	Tasks string
}

// StatementLine is one row of the summary columns.
type StatementLine struct {
	Namespace, InstanceType                                      string
	GuaranteedGPU, BorrowedGPU, GuaranteedNeuron, BorrowedNeuron string
	CPU, Cost                                                    string
}
