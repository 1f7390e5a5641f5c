package workflow

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// contractFields is the single list of the contract's fields, in form
// order: one row per field (a struct's fields, like slurm_scope.account,
// each have their own). Diff, FieldLabel, Normalize, Validate (its tidying
// and row caps), Limits and the contract form (its inputs, help, raw values
// and parsing, internal/web) all read it, and tests check that every field
// of the Contract type has a row (TestEveryContractFieldHasARow). See
// README "Adding a contract field".
var contractFields = slices.Concat(
	group("Purpose and owners",
		str("team", "Team", func(c *Contract) *string { return &c.Team }, lower, MaxOneLineLen).
			fixed("A connection without a purpose or a responsible owner is revoked.", "red"),
		str("business_purpose", "Business purpose", func(c *Contract) *string { return &c.BusinessPurpose }, text, MaxTextLen).
			area("What the team will do on the shared cluster and why it matters (at least 20 characters).", "Fine-tune the support-ticket classifier weekly on anonymised tickets.", 3),
		str("business_owner", "Business owner", func(c *Contract) *string { return &c.BusinessOwner }, lower, MaxEmailLen).
			line("Email of the person accountable for the business outcome; must be a portal user.", "owner.red@example.test"),
		str("operations_owner", "Operations owner", func(c *Contract) *string { return &c.OperationsOwner }, lower, MaxEmailLen).
			line("Email of who runs the workloads day to day.", "member.red@example.test"),
		str("cost_owner", "Cost owner", func(c *Contract) *string { return &c.CostOwner }, lower, MaxEmailLen).
			line("Email of who receives the chargeback.", "owner.red@example.test"),
		str("exception_owner", "Owner of exceptions", func(c *Contract) *string { return &c.ExceptionOwner }, lower, MaxEmailLen).
			line("Email of who decides on exceptions to the scheduling policy.", "owner.red@example.test"),
	),
	group("Studio",
		enum("studio_mode", "Studio", func(c *Contract) *StudioMode { return &c.StudioMode }, AllStudioModes).
			says("A SageMaker Domain for the team, or an existing Unified Studio project.", string(StudioTeamDomain)),
		str("unified_domain_id", "Unified Studio domain id", func(c *Contract) *string { return &c.UnifiedDomainID }, line, MaxOneLineLen).
			line("Only for Unified Studio.", "dzd_abc123def456"),
		str("unified_project_id", "Unified Studio project id", func(c *Contract) *string { return &c.UnifiedProjectID }, line, MaxOneLineLen).
			line("Only for Unified Studio.", "prj_abc123def456"),
	),
	group("Cluster",
		str("account_id", "AWS account id", func(c *Contract) *string { return &c.AccountID }, line, MaxOneLineLen).
			line("12 digits.", "111122223333"),
		str("region", "AWS region", func(c *Contract) *string { return &c.Region }, lower, MaxOneLineLen).
			line("Where the cluster runs.", "us-east-1"),
		enum("orchestrator", "Orchestrator", func(c *Contract) *Orchestrator { return &c.Orchestrator }, AllOrchestrators).
			says("How the HyperPod cluster schedules work. On EKS the portal sets up the team's namespace, queue and access; on Slurm its account, QoS and member associations (the Session Manager Run As tag stays an operator's step).", string(OrchestratorEKS)),
		str("cluster_name", "HyperPod cluster name", func(c *Contract) *string { return &c.ClusterName }, line, MaxOneLineLen).
			line("The shared cluster's name.", "shared-hp"),
		str("cluster_arn", "HyperPod cluster ARN", func(c *Contract) *string { return &c.ClusterARN }, line, MaxARNLen).
			line("arn:aws:sagemaker:<region>:<account>:cluster/<id>, in the account above.", "arn:aws:sagemaker:us-east-1:111122223333:cluster/abcd1234efgh"),
		str("eks_cluster_name", "EKS cluster name", func(c *Contract) *string { return &c.EKSClusterName }, line, MaxOneLineLen).
			line("For EKS: the EKS cluster that orchestrates HyperPod (not the HyperPod name).", "shared-hp-eks"),
	),
	group("Identities",
		str("project_role_arn", "Project role ARN", func(c *Contract) *string { return &c.ProjectRoleARN }, line, MaxARNLen).
			line("IAM role of the team's Studio project, in the account above.", "arn:aws:iam::111122223333:role/red-project"),
		str("access_role_arn", "Access role ARN", func(c *Contract) *string { return &c.AccessRoleARN }, line, MaxARNLen).
			line("IAM role the team's users assume to reach the cluster.", "arn:aws:iam::111122223333:role/red-access"),
		str("workload_role_arn", "Workload role ARN", func(c *Contract) *string { return &c.WorkloadRoleARN }, line, MaxARNLen).
			line("IAM role the team's pods get through EKS Pod Identity.", "arn:aws:iam::111122223333:role/red-workloads"),
	),
	group("Workloads and scope",
		set("workload_types", "Workload types", func(c *Contract) *[]WorkloadType { return &c.WorkloadTypes }, len(AllWorkloadTypes), checked).
			checks(WorkloadTypeChoices()).formLabel("Approved workload types").says("", string(WorkloadTraining)),
		enum("data_classification", "Data classification", func(c *Contract) *DataClassification { return &c.DataClassification }, AllDataClassifications).
			says("The most sensitive data the workloads touch. Restricted data needs an end date and two admins' approval.", string(DataInternal)),
		set("namespaces", "Namespaces", func(c *Contract) *[]string { return &c.Namespaces }, MaxNamespaces, oneLine).
			area("EKS only: one Kubernetes namespace per line (lower-case letters, digits, '-').", "hyperpod-ns-red", 2),
		str("slurm_scope.account", "Slurm account", func(c *Contract) *string { return &c.SlurmScope.Account }, line, MaxOneLineLen).
			key("slurm_account").line("Slurm only.", "red"),
		str("slurm_scope.partition", "Slurm partition", func(c *Contract) *string { return &c.SlurmScope.Partition }, line, MaxOneLineLen).
			key("slurm_partition").line("Slurm only.", "gpu"),
		str("slurm_scope.qos", "Slurm QoS", func(c *Contract) *string { return &c.SlurmScope.QoS }, line, MaxOneLineLen).
			key("slurm_qos").line("Slurm only.", "normal"),
	),
	group("Scheduling policy",
		guaranteedField.key("guaranteed").
			area("One line per instance type: type and count. The admin checks it against the cluster's free capacity.", "ml.p5.48xlarge 2", 2),
		enum("scheduling.sharing", "Lending and borrowing", func(c *Contract) *Sharing { return &c.Scheduling.Sharing }, AllSharings).
			key("sharing").says("Whether the team lends its idle capacity and borrows others'.", string(SharingLend)),
		number("scheduling.borrow_limit_percent", "Borrow limit", func(c *Contract) *int { return &c.Scheduling.BorrowLimitPercent }, true).
			unit("%").key("borrow_limit_percent").formLabel("Borrow limit (%)").
			line("Only when borrowing: at most this percentage of the guarantee (1-500).", "50"),
		enum("scheduling.preemption", "Preemption", func(c *Contract) *Preemption { return &c.Scheduling.Preemption }, AllPreemptions).
			key("preemption").says("Whether the team's tasks may preempt its own lower-priority tasks.", string(PreemptNever)),
		number("scheduling.fair_share_weight", "Fair-share weight", func(c *Contract) *int { return &c.Scheduling.FairShareWeight }, false).
			key("fair_share_weight").line("0-100: the team's weight when idle capacity is shared.", "10"),
		set("scheduling.priority_classes", "Priority classes", func(c *Contract) *[]string { return &c.Scheduling.PriorityClasses }, MaxPriorityClasses, commas).
			key("priority_classes").line("Comma-separated classes the team may use.", "production, experiment"),
	),
	group("Monitoring and decommissioning",
		signalsField.
			area("One per line: signal | owner email | response.", "GPU utilisation below 30% for a week | owner.red@example.test | shrink the guarantee", 3),
		number("review_cadence_days", "Review cadence", func(c *Contract) *int { return &c.ReviewCadenceDays }, true).
			unit(" days").formLabel("Review cadence (days)").
			line("How often reviewers check this connection (7-365).", "90"),
		str("end_date", "End date", func(c *Contract) *string { return &c.EndDate }, line, MaxOneLineLen).
			date("When the connection ends; required for restricted data. Leave empty and give decommission criteria otherwise.", "2030-06-30"),
		str("decommission_criteria", "Decommission criteria", func(c *Contract) *string { return &c.DecommissionCriteria }, text, MaxTextLen).
			area("When the connection should end if there is no end date.", "When the classifier is retired.", 2),
	),
	group("Network",
		egressField.key("egress").formLabel("Egress allowances").
			area("Beyond the default-deny policy, one per line: destination (CIDR or DNS name) | ports | reason.", "10.20.0.0/16 | 443 | internal artifact store", 2),
	),
)

// The fields holding rows of a struct, with how each row is written on one
// line of the form.
var (
	guaranteedField = table[Capacity]{
		path: "scheduling.guaranteed", label: "Guaranteed capacity",
		ref:    func(c *Contract) *[]Capacity { return &c.Scheduling.Guaranteed },
		rowCap: MaxGuaranteedRows,
		row:    func(g Capacity) string { return fmt.Sprintf("%s %d", g.InstanceType, g.Count) },
		parseRow: func(n int, l string) (Capacity, bool, []string) {
			f := strings.Fields(strings.NewReplacer("×", " ", " x ", " ").Replace(l))
			if len(f) != 2 {
				return Capacity{}, false, []string{fmt.Sprintf("line %d: write an instance type and a count, e.g. ml.p5.48xlarge 2", n)}
			}
			count, err := strconv.Atoi(f[1])
			if err != nil {
				return Capacity{}, false, []string{fmt.Sprintf("line %d: %q is not a whole number", n, clip(f[1]))}
			}
			return Capacity{InstanceType: f[0], Count: count}, true, nil
		},
		tidyRow: func(g Capacity) Capacity { return Capacity{lower(g.InstanceType), g.Count} },
		compare: func(a, b Capacity) int {
			if n := strings.Compare(a.InstanceType, b.InstanceType); n != 0 {
				return n
			}
			return a.Count - b.Count
		},
		parts: []Limit{
			{Field: "scheduling.guaranteed[].instance_type", Chars: MaxOneLineLen, texts: each(getGuaranteed, func(g Capacity) string { return g.InstanceType })},
		},
	}.field()

	signalsField = table[Signal]{
		path: "signals", label: "Watched signals",
		ref:    func(c *Contract) *[]Signal { return &c.Signals },
		rowCap: MaxSignals,
		row:    func(s Signal) string { return s.Name + " | " + s.Owner + " | " + s.Response },
		parseRow: func(n int, l string) (Signal, bool, []string) {
			p := splitPipes(l)
			if len(p) != 3 {
				return Signal{}, false, []string{fmt.Sprintf("line %d: write signal | owner email | response", n)}
			}
			return Signal{Name: p[0], Owner: p[1], Response: p[2]}, true, nil
		},
		tidyRow: func(g Signal) Signal {
			return Signal{Name: line(g.Name), Owner: lower(g.Owner), Response: text(g.Response)}
		},
		compare: func(a, b Signal) int {
			return slices.Compare([]string{a.Name, a.Owner, a.Response}, []string{b.Name, b.Owner, b.Response})
		},
		parts: []Limit{
			{Field: "signals[].name", Chars: MaxLineLen, texts: each(getSignals, func(s Signal) string { return s.Name })},
			{Field: "signals[].owner", Chars: MaxEmailLen, texts: each(getSignals, func(s Signal) string { return s.Owner })},
			{Field: "signals[].response", Chars: MaxRowTextLen, texts: each(getSignals, func(s Signal) string { return s.Response })},
		},
	}.field()

	egressField = table[Egress]{
		path: "egress_allowances", label: "Network egress allowances",
		ref:    func(c *Contract) *[]Egress { return &c.EgressAllowances },
		rowCap: MaxEgressRows,
		row: func(e Egress) string {
			ports := make([]string, len(e.Ports))
			for i, p := range e.Ports {
				ports[i] = strconv.Itoa(p)
			}
			return e.Destination + " | " + strings.Join(ports, ",") + " | " + e.Reason
		},
		// A line with a bad port is kept with its good ports.
		parseRow: func(n int, l string) (Egress, bool, []string) {
			p := splitPipes(l)
			if len(p) != 3 {
				return Egress{}, false, []string{fmt.Sprintf("line %d: write destination | ports | reason", n)}
			}
			e := Egress{Destination: p[0], Reason: p[2]}
			var bad []string
			for _, ps := range strings.Split(p[1], ",") {
				if ps = strings.TrimSpace(ps); ps == "" {
					continue
				}
				port, err := strconv.Atoi(ps)
				if err != nil {
					bad = append(bad, fmt.Sprintf("line %d: port %q is not a number", n, clip(ps)))
					continue
				}
				e.Ports = append(e.Ports, port)
			}
			return e, true, bad
		},
		tidyRow: func(e Egress) Egress {
			return Egress{Destination: lower(e.Destination), Ports: mapSlice(e.Ports, func(p int) int { return p }), Reason: text(e.Reason)}
		},
		normRow: func(e Egress) Egress { e.Ports = sortedSet(e.Ports); return e },
		compare: func(a, b Egress) int {
			if n := strings.Compare(a.Destination, b.Destination); n != 0 {
				return n
			}
			if n := slices.Compare(a.Ports, b.Ports); n != 0 {
				return n
			}
			return strings.Compare(a.Reason, b.Reason)
		},
		cutRow: func(e Egress) Egress { e.Ports = firstRows(e.Ports, MaxPortsPerEgress); return e },
		parts: []Limit{
			{Field: "egress_allowances[].destination", Chars: MaxOneLineLen, texts: each(getEgress, func(e Egress) string { return e.Destination })},
			{Field: "egress_allowances[].ports", Rows: MaxPortsPerEgress, counts: func(c Contract) []int {
				out := make([]int, len(c.EgressAllowances))
				for i, e := range c.EgressAllowances {
					out[i] = len(e.Ports)
				}
				return out
			}},
			{Field: "egress_allowances[].reason", Chars: MaxRowTextLen, texts: each(getEgress, func(e Egress) string { return e.Reason })},
		},
	}.field()
)

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
		if f.Path == path {
			return f.Label
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
func (f Field) show(c Contract) string {
	switch v := f.get(c).(type) {
	case string:
		return v
	case int:
		if f.Unit != "" && v == 0 {
			return ""
		}
		return strconv.Itoa(v) + f.Unit
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
	panic("workflow: field " + f.Path + " has a type show does not know")
}

func joinShown[T any](v []T, f func(T) string) string { return joinShownSep(v, ", ", f) }

func joinShownSep[T any](v []T, sep string, f func(T) string) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = f(x)
	}
	return strings.Join(s, sep)
}
