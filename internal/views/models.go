package views

import "strings"

// Page carries what the layout needs on every page.
type Page struct {
	Title     string
	User      *User // nil when nobody is signed in
	Nav       []NavItem
	CSRFToken string
	// DevIdP is true when the built-in development identity provider is in
	// use: every page then shows a banner saying so.
	DevIdP  bool
	Version string
	Flash   string
	// Unread is the signed-in user's unread notifications, shown in the
	// header beside the link to /notifications.
	Unread int
}

// User is the signed-in person as shown in the header and on the home page.
type User struct {
	Name        string
	Email       string
	Roles       []string
	Memberships []Membership
}

// Membership is one team the user belongs to.
type Membership struct {
	Team string
	Role string // "owner" or "member"
	Href string
}

// NavItem is one navigation link.
type NavItem struct {
	Label  string
	Href   string
	TestID string
	Active bool
}

// Landing is the signed-out front page.
type Landing struct {
	SignedOut bool // just signed out: say so
}

// Home is the signed-in front page: one card per role the user holds.
type Home struct {
	Cards []HomeCard
}

// HomeCard points to the home page of one role or team.
type HomeCard struct {
	Title  string
	Body   string
	Href   string
	Action string
	TestID string
	// UsageHref, when set, links the team's usage page beside the action.
	UsageHref string
}

// RoleHome is the empty-state home page of one role (team owner or member,
// admin, reviewer, finance): what will appear here and what to do now.
type RoleHome struct {
	Heading    string
	Lead       string
	EmptyTitle string
	EmptyBody  string
	Next       []string // what the user can do or expect next
	TestID     string
}

// ErrorPage is shown for every error the user sees.
type ErrorPage struct {
	Status    int
	Title     string
	Message   string
	Detail    []string // optional extra lines, e.g. the groups we saw
	RequestID string
	Action    string // link label, e.g. "Try signing in again"
	ActionURL string
}

// Choice is one option of a select or checkbox group.
type Choice struct {
	Value string
	Label string
}

// ContractValues are the contract form's raw inputs by input name, kept as
// typed so a form with errors re-renders exactly what the user entered: one
// value per input, or one per checked box.
type ContractValues map[string][]string

// Get returns the first value of an input, "" when it has none.
func (v ContractValues) Get(name string) string {
	if vs := v[name]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// Set sets an input's value.
func (v ContractValues) Set(name, value string) { v[name] = []string{value} }

// Input kinds of the contract form (workflow.Input).
const (
	InputFixed  = "fixed"  // no input: the value is shown (the team)
	InputLine   = "line"   // <input type="text">
	InputDate   = "date"   // <input type="date">
	InputText   = "text"   // <textarea>
	InputSelect = "select" // <select>
	InputChecks = "checks" // checkboxes
)

// FormField is one input of the contract form, with its value and error.
type FormField struct {
	Name    string // the input's name and id
	Input   string // one of the Input kinds
	Label   string
	Help    string
	Limit   string // its size caps (workflow.Limits), appended to its help
	Example string // the placeholder
	Rows    int    // a text area's height
	Choices []Choice
	Value   string   // the raw value
	Values  []string // the checked boxes
	Error   string
}

// FieldGroup is one fieldset of the contract form.
type FieldGroup struct {
	Legend string
	Fields []FormField
}

// ContractForm is the new/edit connection request page.
type ContractForm struct {
	Heading     string
	Action      string // where the form posts
	CancelURL   string
	ExampleURL  string // prefills the form with a complete example
	BaseVersion int    // the version being edited (0 for a new request)
	Groups      []FieldGroup
	Errors      map[string]string // form field name -> message
	Notice      string            // e.g. someone else saved meanwhile
	SlurmNotice string            // the orchestrator is Slurm: what the portal sets up and what it does not
}

// ConnectionRow is one line of a connection list.
type ConnectionRow struct {
	ID         int64
	Href       string
	Team       string
	State      string
	StateLabel string
	Cluster    string
	Purpose    string
	Requester  string
	Updated    string
	Waiting    string // queue age, e.g. "3 days"
	// Orphan says why the connection is an orphan ("" when it is not).
	Orphan string
}

// ConnectionList is a filterable, paginated list of connections.
type ConnectionList struct {
	Heading   string
	Lead      string
	Rows      []ConnectionRow
	Team      string
	State     string
	Cluster   string
	Query     string
	Teams     []Choice
	States    []Choice
	NextURL   string
	CreateURL string // set when the user may file a request
	UsageURL  string // the team's usage page, when the user may see it
	// SubmitURL and SignalsURL (a team's home only): the member's page
	// and the team's signals.
	SubmitURL, SignalsURL string
	EmptyTitle            string
	EmptyBody             string
	TestID                string
}

// FieldRow is one label/value line of a contract.
type FieldRow struct {
	Label string
	Value string
}

// ChangeRow is one changed field between two versions.
type ChangeRow struct {
	Label string
	Old   string
	New   string
}

// VersionRow is one contract version in the history.
type VersionRow struct {
	Version  int
	Hash     string
	Author   string
	At       string
	Approved bool
	JSONURL  string
	YAMLURL  string
}

// DecisionView is one admin decision.
type DecisionView struct {
	Kind    string
	Actor   string
	Version int
	Reason  string
	At      string
}

// AuditRow is one audit event.
type AuditRow struct {
	ID      int64
	Object  string
	Href    string
	Team    string
	At      string
	Actor   string
	Action  string
	Version int
	Reason  string
}

// CapacityRowView is one instance type of the approval's capacity math.
type CapacityRowView struct {
	// Held, for a change to a live connection, is what its active version
	// already guarantees of the type: a count up to it always fits.
	Held         int
	InstanceType string
	Capacity     int
	Committed    int
	Requested    int
	After        int
	OK           bool
}

// SlurmView is what the portal sets up for a Slurm contract (the plan's
// exact sacctmgr commands, or why there is no plan) and what stays an
// operator's step.
type SlurmView struct {
	Error    string          // why no plan could be built
	Cluster  string          // the Slurm cluster (ClusterName) the commands run on
	Template string          // the POSIX user template the members were mapped with
	Commands []SlurmStepView // the plan's commands, in order
	Steps    []SlurmStepView // what the portal does not do
	// Hold is the hold in effect ("" none: HoldView.State) and
	// HoldCommands what its job ran on top of the plan.
	Hold         string
	HoldCommands []SlurmStepView
}

// SlurmStepView is one command or manual step.
type SlurmStepView struct {
	What    string
	Command string
}

// ConnectionDetail is one connection: contract, history, decisions, actions.
type ConnectionDetail struct {
	// EvidenceURL is the connection's evidence bundle (printable page;
	// + ".json" the download), "" when the user may not export it.
	EvidenceURL     string
	ID              int64
	Team            string
	State           string
	StateLabel      string
	Purpose         string
	CurrentVersion  int
	ApprovedVersion int
	Hash            string
	// Amendment, on a live connection with a change open, is where the
	// change is ("in review"); AmendmentState its code. The header then
	// reads "active on v3 · change v4 in review".
	Amendment      string
	AmendmentState string
	// ShownVersion is the version whose contract the page shows: the
	// current one, or on a live connection with no change open its
	// approved one (a later withdrawn or rejected change is history).
	ShownVersion int
	// EditLabel is the edit button's words: "Edit", "Request a change",
	// "Edit the change".
	EditLabel string
	Fields    []FieldRow
	DiffTitle string
	Diff      []ChangeRow
	Versions  []VersionRow
	Decisions []DecisionView
	Audit     []AuditRow
	// AuditMore: the connection has more events than Audit lists (the
	// latest); AuditURL, when set, is the audit trail filtered to it.
	AuditMore bool
	AuditURL  string

	EditURL       string // set when the user may edit
	SubmitURL     string
	WithdrawURL   string
	DecideURL     string // base URL for approve / reject / request-changes
	DecideNote    string // why this admin cannot decide, when they cannot
	ApprovalsNeed int
	ApprovalsHave int
	Capacity      []CapacityRowView
	// QuotaSuggestions, on the approval of a change to the guarantee: what
	// the team's last 30 days of usage suggest, with the reasoning.
	QuotaSuggestions []QuotaSuggestionView
	CapacityOK       bool
	Notice           string
	ReasonError      string
	Reason           string
	DiffURL          string // compare any two versions
	Plan             *PlanView
	// PlanDiff, while a live connection's change is open, is what the
	// change does on the cluster and AWS against the active version.
	PlanDiff     *PlanDiffView
	AWSResources []AWSResourceRow
	Progress     *Progress
	Access       *Access
	Drift        *DriftView
	Slurm        *SlurmView // a Slurm contract: its commands and what the portal does not do
	// AdoptQuota, for admins after provisioning stopped on a compute quota
	// made outside the portal: the form that adopts it.
	AdoptQuota *AdoptQuotaView

	// Revocation, for admins while the state allows it: the form's action,
	// what revoking will do, and the reason with its error on a re-render.
	RevokeURL    string
	RevokeNote   string
	RevokeReason string
	RevokeError  string

	// Orphan says why the connection is an orphan ("" when it is not);
	// Reviews is its lifecycle reviews (next due date, open review,
	// history, a recommendation of revocation waiting for an admin).
	Orphan  string
	Reviews *ConnectionReviews
	// Hold, while the connection has one: where it is, and the admin's
	// steps (hold.go in internal/web).
	Hold *HoldView
	// Exceptions is the connection's exceptions panel (exception.go in
	// internal/web); nil when it has none and this user may grant none.
	Exceptions *ExceptionsView
}

// ExceptionsView is a connection's exceptions with an expiry: each one's
// class, reason, who granted it, start and end, and where it stands; the
// grant form and the early revocation for those who may decide.
type ExceptionsView struct {
	Rows []ExceptionRow
	// GrantURL and RevokeURL are the forms' actions; "" when this user
	// may not decide (Note says why, to an admin of the team).
	GrantURL, RevokeURL string
	Note                string
	// Classes are the priority classes an exception may grant (the
	// cluster's, less the contract's); MaxDays the cluster's longest.
	Classes []string
	MaxDays int
	// Class, Days and Reason are the last attempt's, kept on a re-render;
	// Errors the messages by field (priority_class, days, reason, form).
	Class, Days, Reason string
	Errors              map[string]string
	// RevokeID and RevokeReason are the last early-revocation attempt's.
	RevokeID     int64
	RevokeReason string
}

// ExceptionRow is one exception.
type ExceptionRow struct {
	ID        int64
	Class     string // the class and the Kueue class name it adds
	Reason    string
	GrantedBy string
	Start     string
	End       string
	State     string // active, reverting, reverted
	Status    string // where it stands, in words
	Active    bool   // may be revoked early
	Ended     string // who ended it early and why, or ""
}

// HoldView is a connection's hold panel: where the hold is, who moved it
// last and why, and the steps this admin may take (none for others).
type HoldView struct {
	State  string // proposed, hold, drain
	Label  string
	By     string
	Reason string
	At     string
	URL    string // the steps' form action; "" when this user takes none
	// Steps are the steps offered, in order: confirm, drain, release,
	// decline.
	Steps []HoldStepView
	// Note says why this admin takes no step, when an admin cannot.
	Note string
	// Ownership says which field of which queue a hold job writes, when a
	// queue is HyperPod's (the portal takes over its spec.stopPolicy).
	Ownership string
	// Explain says what the hold does on this connection's cluster, when
	// it is not a Kueue queue (a Slurm connection's account); "" shows
	// the queue's wording.
	Explain string
	// DrainWord is what the admin types to confirm a drain (the team).
	DrainWord string
	// DrainEffect is what a drain does to running work, on the
	// confirmation's label.
	DrainEffect string
	// Step, Input, Confirm and Error are the last attempt's, on a
	// re-render after a refusal.
	Step    string
	Input   string
	Confirm string
	Error   string
}

// HoldStepView is one hold step's button.
type HoldStepView struct {
	Step   string // confirm, drain, release, decline
	Label  string
	Danger bool
}

// HoldRow is a hold waiting for an admin on the admin queue.
type HoldRow struct {
	ID      int64
	Href    string
	Team    string
	Purpose string
	By      string
	Reason  string
	Waiting string
}

// AdoptQuotaView is the form that adopts, at an admin's explicit choice, a
// compute quota for the team that was made outside the portal (in the
// SageMaker console): the next provisioning run updates it to the contract.
type AdoptQuotaView struct {
	URL   string
	ARN   string // the quota the job found, or what the admin typed
	Error string // why the last attempt was refused, on a re-render
}

// Progress is the latest provisioning job of a connection and its steps.
type Progress struct {
	RefreshURL string // set while the job is queued or running: the page polls it
	Kind       string
	State      string
	Attempts   int
	LastError  string
	DryRun     bool
	NextTry    string
	Steps      []StepView
	RetryURL   string // admins: queue the job again after a failure
	CSRFToken  string
}

// StepView is one step of a provisioning job.
type StepView struct {
	Seq      int
	Name     string
	State    string
	Outcome  string
	Detail   string
	Attempts int
}

// PlanView is the provisioning plan of a contract version: what the
// provisioner will create on the cluster if it is approved.
type PlanView struct {
	// AWSBefore are the AWS calls made before the Kubernetes objects
	// (the compute quota), AWSAfter those made after them (Studio, EKS
	// access entries, Pod Identity).
	AWSBefore []AWSCallView
	AWSAfter  []AWSCallView
	Summary   []string
	Warnings  []string
	YAML      string
	Hash      string
	Error     string // why there is no plan (e.g. Slurm, or an invalid draft)
	DryRun    bool   // no cluster configured: the plan is recorded, not applied
	// ForeignNamespace is the plan's namespace when it already exists on
	// the cluster and neither the portal (for this team) nor HyperPod
	// created it: approving needs the explicit "adopt" box.
	ForeignNamespace string
	// Exceptions say which values of the plan come from the connection's
	// exceptions in effect, and until when.
	Exceptions []string
}

// InventoryRow is one instance type of a cluster's inventory.
type InventoryRow struct {
	Cluster      string
	InstanceType string
	Count        int    // what approvals count
	Basis        string // "manual override", "nodes", "instance groups"
	Committed    int
	// What the last refresh from the cluster saw ("" when not read):
	// instance groups "current / target", nodes "schedulable of total",
	// and the count observed, shown next to an override.
	Groups, Nodes, Observed string
}

// Inventory is the admin's cluster inventory page.
type Inventory struct {
	Rows   []InventoryRow
	Values InventoryValues
	Errors map[string]string
	Saved  string
	// CanRefresh: the portal reads the cluster or SageMaker, so the
	// "Refresh from cluster" form is shown. RefreshCluster prefills it.
	CanRefresh     bool
	RefreshCluster string
	RefreshError   string
	// LastRefresh says when and by whom each cluster was last read.
	LastRefresh []string
}

// ReadinessCheck is one row of the cluster readiness page.
type ReadinessCheck struct {
	Name, Status, Detail, Todo string
}

// Readiness is the admin's cluster readiness page.
type Readiness struct {
	Checks []ReadinessCheck
	// Admission is the contracts' admission rules' roll-out mode and the
	// API server's counts of them; nil when not known.
	Admission *ReadinessAdmission
}

// ReadinessAdmission is the roll-out mode of the contracts' admission
// rules (warn, audit, deny) and, when Counted, the failed validations the
// API server counted by enforcement action.
type ReadinessAdmission struct {
	Mode              string
	Counted           bool
	Warn, Deny, Audit int64
}

// InventoryValues are the inventory form's raw inputs.
type InventoryValues struct {
	Cluster, InstanceType, Count string
}

// AuditPage is the portal-wide audit trail for admins and reviewers.
type AuditPage struct {
	Rows      []AuditRow
	Team      string
	Action    string
	Actor     string
	Object    string
	NextURL   string
	CSVURL    string
	JSONURL   string
	ChainOK   bool
	ChainNote string
	// The chain's head: publish it elsewhere (`portal audit head`) so that
	// `portal audit verify --head` can tell when newest events were removed.
	HeadCount int
	HeadID    int64
	HeadHash  string
	// HeadLogEvery: the portal logs the head every this many events.
	HeadLogEvery int
}

// VersionDiff compares two versions of one contract.
type VersionDiff struct {
	ConnectionID int64
	From, To     int
	Versions     []int
	Changes      []ChangeRow
	BackURL      string
}

// Access tells the team how to use its connection: where its work runs and
// ready-to-paste commands.
type Access struct {
	Namespace  string
	LocalQueue string
	Quota      string
	Live       bool // provisioned on the cluster (false: approved, dry run)
	Commands   []Snippet
	// RulesMode says what the cluster's roll-out mode does with a broken
	// rule; Rules are the contract's admission rules in words
	// (provision.ExplainAdmission); AmendURL is where the owner asks to
	// change them.
	RulesMode string
	Rules     []Rule
	AmendURL  string
}

// Rule is one admission rule: the contract clause a refusal names, and what
// it asks.
type Rule struct {
	Clause, Says string
}

// Snippet is one command with what it does.
type Snippet struct {
	Title string
	Code  string
}

// DriftView is the last drift check of a connection.
type DriftView struct {
	ConnectionID int64
	Href         string
	Team         string
	CheckedAt    string
	Error        string
	Items        []string
	ReapplyURL   string // admins: re-apply the approved plan
}

// AWSCallView is one AWS call of a plan.
type AWSCallView struct {
	// Now is what the call would do on AWS as it is (create, update,
	// unchanged, would stop, ...), empty when not looked up; NowDetail
	// says more.
	Now, NowDetail string
	Service        string
	Kind           string
	Name           string
	Operations     string
	Fields         [][2]string
	// Grants are an access entry's access policies: what each lets the
	// role see and do, and where.
	Grants []AWSGrantView
}

// AWSGrantView is one EKS access policy of an access entry.
type AWSGrantView struct{ Policy, Scope, Allows string }

// AWSResourceRow is an AWS resource provisioning made for a connection.
type AWSResourceRow struct {
	Kind, Name, ID, ARN string
	Version             int
	Action              string
	At                  string
}

// SchedulerView is the cluster's task-governance scheduler config as the
// portal's settings want it, the latest job that reconciles it, and what
// the reconciles did.
type SchedulerView struct {
	Unavailable string // why it cannot be reconciled here (AWS off, no cluster ARN)
	DryRun      bool   // the jobs record the calls they would make and make none
	Name        string
	ClusterARN  string
	FairShare   bool
	Classes     []SchedulerClassRow
	Job         *Progress // the latest scheduler job, nil when there has been none
	Error       string    // why the last POST queued nothing
	History     []AuditRow
}

// SchedulerClassRow is one priority class.
type SchedulerClassRow struct {
	Name   string
	Value  int
	Weight int
}

// orDash shows "—" for an empty value.
func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// Submit is the member's page of a team: how to submit work to each live
// connection and which of the team's workloads wait, and why.
type Submit struct {
	Team         string
	Connections  []SubmitConn
	PendingState PendingState
	Pending      []PendingRow
	SignalsURL   string
}

// SubmitConn is one live connection: its queue, classes and snippets.
type SubmitConn struct {
	ID      int64
	Href    string
	Cluster string
	Access  Access
	// PriorityClasses: Value is the Kueue class a job's label names,
	// Label the contract's class.
	PriorityClasses []Choice
	// Exceptions are the connection's exceptions in effect, each with its
	// end (a class the team may use until then).
	Exceptions []ExceptionRow
	// Runs: the contract's approved workload types and their kinds.
	Runs []RunType
}

// RunType is an approved workload type and the kinds that run it.
type RunType struct {
	Type, Label string
	Kinds       []RunKind
}

// runLabels joins the types' labels: "Training, Inference".
func runLabels(runs []RunType) string {
	var out []string
	for _, r := range runs {
		out = append(out, r.Label)
	}
	return strings.Join(out, ", ")
}

// RunKind is one kind the team may create, with a kubectl snippet and a
// HyperPod CLI one (CLI "" when the CLI does not create the kind).
type RunKind struct {
	Kind, APIVersion, Resource string
	Kubectl, CLI               string
}

// PendingState says whether the pending workloads could be read.
type PendingState string

const (
	PendingRead        PendingState = "read"         // read live from the cluster
	PendingNoCluster   PendingState = "no-cluster"   // no cluster configured
	PendingNoNamespace PendingState = "no-namespace" // no live connection to read
	PendingReadFailed  PendingState = "failed"       // the cluster did not answer
)

// PendingRow is one waiting workload with Kueue's reason.
type PendingRow struct {
	Namespace, Name, Queue, PriorityClass string
	// QueueWaiting: the workload's place in its LocalQueue and Kueue's
	// count of the queue's pending workloads, as text ("" when neither is
	// known).
	QueueWaiting string
	// PositionUnknown: why Kueue's visibility API gave no position ("" when
	// it answered).
	PositionUnknown string
	Waiting         string
	Reason, Message string
}

// Signals is a signals page: a team's (Team set) or every team's and the
// cluster's.
type Signals struct {
	Team             string
	Statuses         []SignalRow
	Events           []SignalEventRow
	AckURL           string
	NoLiveConnection bool
}

// SignalRow is one signal's status now.
type SignalRow struct {
	Title, Team, State         string
	Threshold, Current, Intent string
	Owner, Response            string
}

// SignalEventRow is a signal that fired; AckAction is set when the viewer
// may acknowledge it; Note and Error re-show a refused acknowledgement.
type SignalEventRow struct {
	ID                      int64
	Title, Team, FiredAt    string
	Detail, Owner, Response string
	Open                    bool
	AckBy, AckAt, AckNote   string
	AckAction               string
	AckID                   int64 // set: the form posts the event\'s id
	Note, Error             string
}

// ExceptionsHome is /exceptions: the live connections whose approved
// contract names the reader as exception owner, and for admins every
// connection with an exception in effect.
type ExceptionsHome struct {
	Mine   []ExceptionsHomeRow
	Active []ExceptionsHomeRow // admins only; nil for others
	Admin  bool
	// MaxDays is the cluster's longest exception.
	MaxDays int
}

// ExceptionsHomeRow is one connection of the exceptions page.
type ExceptionsHomeRow struct {
	ID      int64
	Team    string
	Purpose string
	URL     string // its page's exceptions panel
	// InEffect lists the classes of its exceptions in effect, with their
	// ends ("" for none).
	InEffect string
	// OwnTeam: the reader is of the team, so cannot grant it one.
	OwnTeam bool
}
