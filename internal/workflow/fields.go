package workflow

import (
	"strconv"
	"strings"
)

// field is one field of the contract as people see it: its path (as in
// FieldError.Field), its label, and its value. The table below is the single
// list of the contract's fields, in form order; Diff, FieldLabel and the
// tests that check every field is covered all read it.
type field struct {
	path  string
	label string
	get   func(Contract) any
	unit  string // shown after a non-zero number: "%", " days"
}

var contractFields = []field{
	{path: "team", label: "Team", get: func(c Contract) any { return c.Team }},
	{path: "business_purpose", label: "Business purpose", get: func(c Contract) any { return c.BusinessPurpose }},
	{path: "business_owner", label: "Business owner", get: func(c Contract) any { return c.BusinessOwner }},
	{path: "operations_owner", label: "Operations owner", get: func(c Contract) any { return c.OperationsOwner }},
	{path: "cost_owner", label: "Cost owner", get: func(c Contract) any { return c.CostOwner }},
	{path: "exception_owner", label: "Owner of exceptions", get: func(c Contract) any { return c.ExceptionOwner }},
	{path: "studio_mode", label: "Studio", get: func(c Contract) any { return c.StudioMode }},
	{path: "unified_domain_id", label: "Unified Studio domain id", get: func(c Contract) any { return c.UnifiedDomainID }},
	{path: "unified_project_id", label: "Unified Studio project id", get: func(c Contract) any { return c.UnifiedProjectID }},
	{path: "account_id", label: "AWS account id", get: func(c Contract) any { return c.AccountID }},
	{path: "region", label: "AWS region", get: func(c Contract) any { return c.Region }},
	{path: "orchestrator", label: "Orchestrator", get: func(c Contract) any { return c.Orchestrator }},
	{path: "cluster_name", label: "HyperPod cluster name", get: func(c Contract) any { return c.ClusterName }},
	{path: "cluster_arn", label: "HyperPod cluster ARN", get: func(c Contract) any { return c.ClusterARN }},
	{path: "eks_cluster_name", label: "EKS cluster name", get: func(c Contract) any { return c.EKSClusterName }},
	{path: "project_role_arn", label: "Project role ARN", get: func(c Contract) any { return c.ProjectRoleARN }},
	{path: "access_role_arn", label: "Access role ARN", get: func(c Contract) any { return c.AccessRoleARN }},
	{path: "workload_role_arn", label: "Workload role ARN", get: func(c Contract) any { return c.WorkloadRoleARN }},
	{path: "workload_types", label: "Workload types", get: func(c Contract) any { return c.WorkloadTypes }},
	{path: "data_classification", label: "Data classification", get: func(c Contract) any { return c.DataClassification }},
	{path: "namespaces", label: "Namespaces", get: func(c Contract) any { return c.Namespaces }},
	{path: "slurm_scope.account", label: "Slurm account", get: func(c Contract) any { return c.SlurmScope.Account }},
	{path: "slurm_scope.partition", label: "Slurm partition", get: func(c Contract) any { return c.SlurmScope.Partition }},
	{path: "slurm_scope.qos", label: "Slurm QoS", get: func(c Contract) any { return c.SlurmScope.QoS }},
	{path: "scheduling.guaranteed", label: "Guaranteed capacity", get: func(c Contract) any { return c.Scheduling.Guaranteed }},
	{path: "scheduling.sharing", label: "Lending and borrowing", get: func(c Contract) any { return c.Scheduling.Sharing }},
	{path: "scheduling.borrow_limit_percent", label: "Borrow limit", unit: "%", get: func(c Contract) any { return c.Scheduling.BorrowLimitPercent }},
	{path: "scheduling.preemption", label: "Preemption", get: func(c Contract) any { return c.Scheduling.Preemption }},
	{path: "scheduling.fair_share_weight", label: "Fair-share weight", get: func(c Contract) any { return c.Scheduling.FairShareWeight }},
	{path: "scheduling.priority_classes", label: "Priority classes", get: func(c Contract) any { return c.Scheduling.PriorityClasses }},
	{path: "signals", label: "Watched signals", get: func(c Contract) any { return c.Signals }},
	{path: "review_cadence_days", label: "Review cadence", unit: " days", get: func(c Contract) any { return c.ReviewCadenceDays }},
	{path: "end_date", label: "End date", get: func(c Contract) any { return c.EndDate }},
	{path: "decommission_criteria", label: "Decommission criteria", get: func(c Contract) any { return c.DecommissionCriteria }},
	{path: "egress_allowances", label: "Network egress allowances", get: func(c Contract) any { return c.EgressAllowances }},
}

// Labels of the parts of list rows and of whole groups, for paths that are
// not a field of their own in contractFields.
var partLabels = map[string]string{
	"slurm_scope":                           "Slurm scope",
	"scheduling.guaranteed[].instance_type": "instance type",
	"scheduling.guaranteed[].count":         "count",
	"signals[].name":                        "signal",
	"signals[].owner":                       "owner",
	"signals[].response":                    "response",
	"egress_allowances[].destination":       "destination",
	"egress_allowances[].ports":             "ports",
	"egress_allowances[].reason":            "reason",
}

// FieldLabel returns the human label of a field path as used in FieldError:
// "cluster_arn" is "HyperPod cluster ARN", "namespaces[1]" is "Namespaces,
// row 2", "scheduling.guaranteed[0].count" is "Guaranteed capacity, row 1:
// count". An unknown path is returned as it is.
func FieldLabel(path string) string {
	for _, f := range contractFields {
		if f.path == path {
			return f.label
		}
	}
	if l, ok := partLabels[path]; ok {
		return l
	}
	open := strings.IndexByte(path, '[')
	shut := strings.IndexByte(path, ']')
	if open < 0 || shut < open {
		return path
	}
	n, err := strconv.Atoi(path[open+1 : shut])
	if err != nil || n < 0 {
		return path
	}
	list, rest := path[:open], path[shut+1:]
	label := FieldLabel(list) + ", row " + strconv.Itoa(n+1)
	if rest == "" {
		return label
	}
	// A row's part, ignoring any deeper index: "egress_allowances[0].ports[1]"
	// is the first allowance's ports.
	part := list + "[]" + rest
	if i := strings.IndexByte(rest, '['); i >= 0 {
		part = list + "[]" + rest[:i]
	}
	if l, ok := partLabels[part]; ok {
		return label + ": " + l
	}
	return label + ": " + strings.TrimPrefix(rest, ".")
}

// show renders a field's value for people: enums by their label, lists
// joined, capacity rows as "ml.p5.48xlarge × 4".
func (f field) show(c Contract) string {
	switch v := f.get(c).(type) {
	case string:
		return v
	case int:
		if f.unit != "" && v == 0 {
			return ""
		}
		return strconv.Itoa(v) + f.unit
	case interface{ Label() string }:
		return v.Label()
	case []WorkloadType:
		return joinShown(v, func(w WorkloadType) string { return w.Label() })
	case []string:
		return strings.Join(v, ", ")
	case []Capacity:
		return joinShown(v, Capacity.String)
	case []Signal:
		return joinShownSep(v, "; ", func(s Signal) string {
			return s.Name + " (" + s.Owner + "): " + s.Response
		})
	case []Egress:
		return joinShownSep(v, "; ", func(e Egress) string {
			ports := make([]string, len(e.Ports))
			for i, p := range e.Ports {
				ports[i] = strconv.Itoa(p)
			}
			return e.Destination + " port " + strings.Join(ports, ", ") + " (" + e.Reason + ")"
		})
	}
	panic("workflow: field " + f.path + " has a type show does not know")
}

func joinShown[T any](v []T, f func(T) string) string { return joinShownSep(v, ", ", f) }

func joinShownSep[T any](v []T, sep string, f func(T) string) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = f(x)
	}
	return strings.Join(s, sep)
}
