package views

// The reviewer's pages (issue 13): the queue of open reviews, one review
// with its frozen evidence and its decision, and the reviews on a
// connection's page.

// ReviewQueue is /reviews: the open reviews, longest due first.
type ReviewQueue struct {
	Rows     []ReviewQueueRow
	Teams    []Choice
	Triggers []Choice
	Team     string // the filters as applied
	Trigger  string
	// FilterError says which filter value was not understood (and so not
	// applied).
	FilterError string
	NextURL     string // the next page, when there is one
	Open        int    // open reviews, and of them overdue
	Overdue     int
	Today       string
	Filtered    bool
}

// ReviewQueueRow is one open review.
type ReviewQueueRow struct {
	ID             int64
	Href           string
	ConnectionID   int64
	ConnectionHref string
	Team           string
	Purpose        string
	TriggerLabel   string
	Event          bool // an event rather than the calendar
	Detail         string
	DueOn          string
	DaysOverdue    int
	OpenedAt       string
	MoreTriggers   []string
	Orphan         string
	Demo           bool
}

// ReviewPage is /reviews/:id.
type ReviewPage struct {
	ID             int64
	ConnectionID   int64
	ConnectionHref string
	Team           string
	Version        int
	VersionJSONURL string
	VersionYAMLURL string
	TriggerLabel   string
	Detail         string
	DueOn          string
	DaysOverdue    int
	OpenedAt       string
	EvidenceHash   string
	FrozenAt       string
	MoreTriggers   []string
	Demo           bool
	// Orphan is the connection's orphan flag as it is now.
	Orphan string
	// Evidence is the frozen evidence as collected; EvidenceError says why
	// it cannot be shown (then Evidence is nil).
	Evidence      *ReviewEvidenceView
	EvidenceError string

	Open          bool
	DecisionLabel string
	Decision      string
	DecidedBy     string
	DecidedAt     string
	Reason        string
	Deadline      string

	// The decision form, when the viewer may decide: where it posts, the
	// choices, and the input and errors of a refused attempt. DecideNote
	// says why the viewer cannot decide, when they oversee but may not.
	DecideURL  string
	DecideNote string
	Decisions  []Choice
	Form       ReviewForm
	MinDate    string // the earliest deadline (tomorrow)
}

// ReviewForm is a decision as typed, with its errors by field.
type ReviewForm struct {
	Decision string
	Reason   string
	Deadline string
	Errors   map[string]string
}

// ReviewEvidenceView is workflow.Evidence as the review page shows it.
type ReviewEvidenceView struct {
	CollectedAt     string
	ContractVersion int
	ContractHash    string
	ApprovedAt      string
	Fields          []FieldRow
	Changes         []EvidenceChangeRow
	Drift           *EvidenceDriftView
	Owners          []EvidenceOwnerRow
	Usage           *EvidenceUsageView
	Signals         []EvidenceSignalRow
	// Exceptions are the connection's exceptions with an expiry the
	// evidence lists, one line each.
	Exceptions []string
	Orphan     string
	Gaps       []string
}

// EvidenceChangeRow is one version approved since the last review.
type EvidenceChangeRow struct {
	Version    int
	Hash       string
	ApprovedAt string
	ApprovedBy string
	Fields     string
}

// EvidenceDriftView is the last drift report.
type EvidenceDriftView struct {
	CheckedAt string
	Status    string
	Findings  []string
}

// EvidenceOwnerRow is one owner of the contract.
type EvidenceOwnerRow struct {
	Role          string
	Email         string
	InOwnersGroup string
	LastSignIn    string
}

// EvidenceUsageView is usage and cost over 30 and 90 days.
type EvidenceUsageView struct {
	Windows      []EvidenceWindowRow
	LastWorkload string
}

// EvidenceWindowRow is one window of usage.
type EvidenceWindowRow struct {
	Days       int
	Guaranteed string
	Used       string
	Borrowed   string
	Cost       string
	Missing    bool
}

// EvidenceSignalRow is one open signal.
type EvidenceSignalRow struct {
	Signal  string
	FiredAt string
	Detail  string
}

// ConnectionReviews is the reviews part of a connection's page.
type ConnectionReviews struct {
	// ReviewDue is the next scheduled review's date ("" when not set),
	// DaysOverdue how late it is.
	ReviewDue   string
	DaysOverdue int
	// OpenHref links the open review, when one is open and the viewer may
	// read it; OpenLabel says what it is.
	OpenHref  string
	OpenLabel string
	// History: the connection's reviews, newest first (empty when the
	// viewer may not read reviews).
	History []ReviewHistoryRow
	// Recommendation: a reviewer's recommendation of revocation that waits
	// for an admin.
	Recommendation *RecommendationView
}

// ReviewHistoryRow is one review of a connection.
type ReviewHistoryRow struct {
	Href         string
	OpenedAt     string
	TriggerLabel string
	Decision     string // label; "" while open
	DecidedBy    string
	DecidedAt    string
	Reason       string
	Deadline     string
	Demo         bool
}

// RecommendationView is a recommendation of revocation waiting for an
// admin, with the admin's decline form when they may decline it.
type RecommendationView struct {
	ReviewHref string
	By         string
	At         string
	Reason     string
	// DeclineURL is set when the viewer may decline it; DeclineNote says
	// why an admin may not.
	DeclineURL    string
	DeclineNote   string
	DeclineReason string
	DeclineError  string
}

// RecommendationRow is one recommendation of revocation on the admin queue.
type RecommendationRow struct {
	ConnectionID   int64
	ConnectionHref string
	ReviewHref     string
	Team           string
	Purpose        string
	By             string
	At             string
	Reason         string
	Orphan         string
}
