package workflow

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Contract is one version of a connection contract: everything a team and the
// platform agree on before the team may use the shared cluster. A Contract is
// a plain value; versions are immutable once stored, and approvals bind to a
// version by Hash.
//
// Empty lists and the fields that only apply to one mode (Unified Studio ids,
// EKS cluster name, namespaces, Slurm scope, borrow limit, end date,
// decommission criteria) are omitted from the JSON when empty, so that an
// exported contract only shows what applies.
type Contract struct {
	// Team is the team's short name, a DNS-1123 label (also the HyperPod
	// task governance team name).
	Team string `json:"team"`

	// Purpose and owners. A connection with no purpose or no responsible
	// owner must be revoked (mission.md), so all are required.
	BusinessPurpose string `json:"business_purpose"`
	BusinessOwner   string `json:"business_owner"`
	OperationsOwner string `json:"operations_owner"`
	CostOwner       string `json:"cost_owner"`
	ExceptionOwner  string `json:"exception_owner"`

	// Studio context: a SageMaker Domain per team, or a Unified Studio
	// (DataZone) domain and project.
	StudioMode       StudioMode `json:"studio_mode"`
	UnifiedDomainID  string     `json:"unified_domain_id,omitempty"`
	UnifiedProjectID string     `json:"unified_project_id,omitempty"`

	// Cluster.
	AccountID      string       `json:"account_id"`
	Region         string       `json:"region"`
	Orchestrator   Orchestrator `json:"orchestrator"`
	ClusterName    string       `json:"cluster_name"` // the HyperPod cluster name
	ClusterARN     string       `json:"cluster_arn"`  // the HyperPod cluster ARN
	EKSClusterName string       `json:"eks_cluster_name,omitempty"`

	// Identities.
	ProjectRoleARN  string `json:"project_role_arn"`
	AccessRoleARN   string `json:"access_role_arn"`
	WorkloadRoleARN string `json:"workload_role_arn"`

	// Workloads.
	WorkloadTypes      []WorkloadType     `json:"workload_types,omitempty"`
	DataClassification DataClassification `json:"data_classification"`

	// Scope: namespaces on EKS, or the Slurm scope.
	Namespaces []string   `json:"namespaces,omitempty"`
	SlurmScope SlurmScope `json:"slurm_scope,omitzero"`

	Scheduling Scheduling `json:"scheduling"`

	// Monitoring and decommissioning.
	Signals              []Signal `json:"signals,omitempty"`
	ReviewCadenceDays    int      `json:"review_cadence_days"`
	EndDate              string   `json:"end_date,omitempty"` // civil date, YYYY-MM-DD
	DecommissionCriteria string   `json:"decommission_criteria,omitempty"`

	// Network: allowances beyond the namespace's default-deny policy.
	EgressAllowances []Egress `json:"egress_allowances,omitempty"`
}

// SlurmScope is where a Slurm connection's jobs run and are accounted.
type SlurmScope struct {
	Account   string `json:"account"`
	Partition string `json:"partition"`
	QoS       string `json:"qos"`
}

// Scheduling is the team's share of the cluster: what it is guaranteed, how
// it shares idle capacity, and how its tasks compete.
type Scheduling struct {
	Guaranteed []Capacity `json:"guaranteed,omitempty"`
	Sharing    Sharing    `json:"sharing"`
	// BorrowLimitPercent caps borrowing as a percentage of the guaranteed
	// capacity (HyperPod: 1-500). Set only when the team borrows.
	BorrowLimitPercent int        `json:"borrow_limit_percent,omitempty"`
	Preemption         Preemption `json:"preemption"`
	FairShareWeight    int        `json:"fair_share_weight"` // 0-100
	PriorityClasses    []string   `json:"priority_classes,omitempty"`
}

// Capacity is a number of instances of one type.
type Capacity struct {
	InstanceType string `json:"instance_type"`
	Count        int    `json:"count"`
}

// String renders a capacity row as people write it: "ml.p5.48xlarge × 4".
func (c Capacity) String() string { return c.InstanceType + " × " + strconv.Itoa(c.Count) }

// Signal is a watched signal with the person who responds and how.
type Signal struct {
	Name     string `json:"name"`
	Owner    string `json:"owner"`
	Response string `json:"response"`
}

// Egress is one network allowance out of the team's namespaces.
type Egress struct {
	Destination string `json:"destination"` // a CIDR block or a DNS name
	Ports       []int  `json:"ports,omitempty"`
	Reason      string `json:"reason"`
}

// Choice is one option of an enumerated field, for forms.
type Choice struct {
	Value string
	Label string
}

func choices[T ~string](all []T, label func(T) string) []Choice {
	out := make([]Choice, len(all))
	for i, v := range all {
		out[i] = Choice{Value: string(v), Label: label(v)}
	}
	return out
}

func labelOr[T ~string](labels map[T]string, v T) string {
	if l, ok := labels[v]; ok {
		return l
	}
	return string(v)
}

// StudioMode is how the team's users reach the cluster from SageMaker Studio.
type StudioMode string

// Studio modes.
const (
	StudioTeamDomain StudioMode = "team-domain"    // a SageMaker Domain per team
	StudioUnified    StudioMode = "unified-studio" // a Unified Studio project
)

// AllStudioModes lists the studio modes in display order.
var AllStudioModes = []StudioMode{StudioTeamDomain, StudioUnified}

var studioModeLabels = map[StudioMode]string{
	StudioTeamDomain: "SageMaker Domain for the team",
	StudioUnified:    "SageMaker Unified Studio project",
}

// Valid reports whether m is one of AllStudioModes.
func (m StudioMode) Valid() bool { return slices.Contains(AllStudioModes, m) }

// Label is m for people.
func (m StudioMode) Label() string { return labelOr(studioModeLabels, m) }

// StudioModeChoices lists the studio modes for a form.
func StudioModeChoices() []Choice { return choices(AllStudioModes, StudioMode.Label) }

// Orchestrator is what schedules the HyperPod cluster's jobs.
type Orchestrator string

// Orchestrators.
const (
	OrchestratorEKS   Orchestrator = "eks"
	OrchestratorSlurm Orchestrator = "slurm"
)

// AllOrchestrators lists the orchestrators in display order.
var AllOrchestrators = []Orchestrator{OrchestratorEKS, OrchestratorSlurm}

var orchestratorLabels = map[Orchestrator]string{
	OrchestratorEKS:   "Amazon EKS",
	OrchestratorSlurm: "Slurm",
}

// Valid reports whether o is one of AllOrchestrators.
func (o Orchestrator) Valid() bool { return slices.Contains(AllOrchestrators, o) }

// Label is o for people.
func (o Orchestrator) Label() string { return labelOr(orchestratorLabels, o) }

// OrchestratorChoices lists the orchestrators for a form.
func OrchestratorChoices() []Choice { return choices(AllOrchestrators, Orchestrator.Label) }

// WorkloadType is a kind of work the team may run.
type WorkloadType string

// Workload types.
const (
	WorkloadTraining    WorkloadType = "training"
	WorkloadFineTuning  WorkloadType = "fine-tuning"
	WorkloadInference   WorkloadType = "inference"
	WorkloadInteractive WorkloadType = "interactive-spaces"
)

// AllWorkloadTypes lists the workload types in display order.
var AllWorkloadTypes = []WorkloadType{WorkloadTraining, WorkloadFineTuning, WorkloadInference, WorkloadInteractive}

var workloadTypeLabels = map[WorkloadType]string{
	WorkloadTraining:    "Training",
	WorkloadFineTuning:  "Fine-tuning",
	WorkloadInference:   "Inference",
	WorkloadInteractive: "Interactive spaces (JupyterLab, Code Editor)",
}

// Valid reports whether w is one of AllWorkloadTypes.
func (w WorkloadType) Valid() bool { return slices.Contains(AllWorkloadTypes, w) }

// Label is w for people.
func (w WorkloadType) Label() string { return labelOr(workloadTypeLabels, w) }

// WorkloadTypeChoices lists the workload types for a form.
func WorkloadTypeChoices() []Choice { return choices(AllWorkloadTypes, WorkloadType.Label) }

// DataClassification is the most sensitive data the team's workloads touch.
type DataClassification string

// Data classifications, least to most sensitive.
const (
	DataPublic       DataClassification = "public"
	DataInternal     DataClassification = "internal"
	DataConfidential DataClassification = "confidential"
	DataRestricted   DataClassification = "restricted"
)

// AllDataClassifications lists the classifications, least sensitive first.
var AllDataClassifications = []DataClassification{DataPublic, DataInternal, DataConfidential, DataRestricted}

var dataClassificationLabels = map[DataClassification]string{
	DataPublic:       "Public",
	DataInternal:     "Internal",
	DataConfidential: "Confidential",
	DataRestricted:   "Restricted (two approvals, end date required)",
}

// Valid reports whether d is one of AllDataClassifications.
func (d DataClassification) Valid() bool { return slices.Contains(AllDataClassifications, d) }

// Label is d for people.
func (d DataClassification) Label() string { return labelOr(dataClassificationLabels, d) }

// DataClassificationChoices lists the classifications for a form.
func DataClassificationChoices() []Choice {
	return choices(AllDataClassifications, DataClassification.Label)
}

// Sharing says whether the team lends its idle guaranteed capacity to others
// and borrows theirs.
type Sharing string

// Sharing strategies.
const (
	SharingLend          Sharing = "lend"
	SharingBorrow        Sharing = "borrow"
	SharingLendAndBorrow Sharing = "lend-and-borrow"
	SharingNeither       Sharing = "neither"
)

// AllSharings lists the sharing strategies in display order.
var AllSharings = []Sharing{SharingLendAndBorrow, SharingLend, SharingBorrow, SharingNeither}

var sharingLabels = map[Sharing]string{
	SharingLend:          "Lend idle capacity, never borrow",
	SharingBorrow:        "Borrow idle capacity, never lend",
	SharingLendAndBorrow: "Lend and borrow idle capacity",
	SharingNeither:       "Neither lend nor borrow",
}

// Valid reports whether s is one of AllSharings.
func (s Sharing) Valid() bool { return slices.Contains(AllSharings, s) }

// Label is s for people.
func (s Sharing) Label() string { return labelOr(sharingLabels, s) }

// Borrows reports whether the team may borrow idle capacity.
func (s Sharing) Borrows() bool { return s == SharingBorrow || s == SharingLendAndBorrow }

// Lends reports whether the team lends its idle guaranteed capacity.
func (s Sharing) Lends() bool { return s == SharingLend || s == SharingLendAndBorrow }

// SharingChoices lists the sharing strategies for a form.
func SharingChoices() []Choice { return choices(AllSharings, Sharing.Label) }

// Preemption says whether the team's tasks may preempt lower-priority tasks.
type Preemption string

// Preemption policies.
const (
	PreemptLowerPriority Preemption = "lower-priority"
	PreemptNever         Preemption = "never"
)

// AllPreemptions lists the preemption policies in display order.
var AllPreemptions = []Preemption{PreemptLowerPriority, PreemptNever}

var preemptionLabels = map[Preemption]string{
	PreemptLowerPriority: "Preempt lower-priority tasks",
	PreemptNever:         "Never preempt",
}

// Valid reports whether p is one of AllPreemptions.
func (p Preemption) Valid() bool { return slices.Contains(AllPreemptions, p) }

// Label is p for people.
func (p Preemption) Label() string { return labelOr(preemptionLabels, p) }

// PreemptionChoices lists the preemption policies for a form.
func PreemptionChoices() []Choice { return choices(AllPreemptions, Preemption.Label) }

// Normalize returns c in its canonical form, the form that is stored and
// hashed: text trimmed and valid UTF-8 with \n line ends; emails, enums,
// names that are case-insensitive (team, region, namespaces, instance types,
// priority classes, DNS destinations) lower-cased; sets (workload types,
// namespaces, priority classes, ports) sorted and deduplicated; rows
// (capacity, signals, egress) sorted; empty lists nil. It never changes the
// caller's slices, and Normalize(Normalize(c)) == Normalize(c).
//
// Validate reports duplicates as the user wrote them, so validate first and
// store the normalized contract.
func (c Contract) Normalize() Contract {
	c = c.tidy()
	for _, f := range contractFields {
		if f.norm != nil {
			f.norm(&c)
		}
	}
	return c
}

// tidy is the part of Normalize that keeps every list's length and order, so
// that Validate can check tidy values and still report paths that index the
// lists as the user wrote them. The slices it returns are fresh copies. Each
// row of the field table (fields.go) tidies its own field.
func (c Contract) tidy() Contract {
	for _, f := range contractFields {
		f.tidy(&c)
	}
	return c
}

// line tidies a one-line value. Invalid UTF-8 becomes U+FFFD here so that
// the canonical JSON of a stored contract survives a decode round trip.
func line(s string) string { return strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD")) }

func lower(s string) string { return strings.ToLower(line(s)) }

// text tidies free text: forms send \r\n, files \n; both hash the same.
func text(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	return strings.TrimSpace(s)
}

// mapSlice returns f applied to every element, in a new slice; nil when
// empty, so that an empty list and a missing one are the same contract.
func mapSlice[T any](in []T, f func(T) T) []T {
	if len(in) == 0 {
		return nil
	}
	out := make([]T, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}

func sortedSet[T interface{ ~string | ~int }](in []T) []T {
	if len(in) == 0 {
		return nil
	}
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}

// runeLen counts characters, not bytes, for length rules people can follow.
func runeLen(s string) int { return utf8.RuneCountInString(s) }
