package web

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// The contract form keeps lists in textareas, one item per line, so the
// page needs no JavaScript. formFromContract and contractFromForm are
// inverses for every valid contract; on bad input the raw text is kept and
// re-rendered untouched.

func joinLines(items []string) string { return strings.Join(items, "\n") }

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func splitPipes(l string) []string {
	parts := strings.Split(l, "|")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

func itoa0(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// formFromContract renders a contract into the form's raw values.
func formFromContract(c workflow.Contract) views.ContractValues {
	v := views.ContractValues{
		Team: c.Team, BusinessPurpose: c.BusinessPurpose, BusinessOwner: c.BusinessOwner,
		OperationsOwner: c.OperationsOwner, CostOwner: c.CostOwner, ExceptionOwner: c.ExceptionOwner,
		StudioMode: string(c.StudioMode), UnifiedDomainID: c.UnifiedDomainID, UnifiedProjectID: c.UnifiedProjectID,
		AccountID: c.AccountID, Region: c.Region, Orchestrator: string(c.Orchestrator), ClusterName: c.ClusterName,
		ClusterARN: c.ClusterARN, EKSClusterName: c.EKSClusterName, ProjectRoleARN: c.ProjectRoleARN,
		AccessRoleARN: c.AccessRoleARN, WorkloadRoleARN: c.WorkloadRoleARN,
		DataClassification: string(c.DataClassification), Namespaces: joinLines(c.Namespaces),
		SlurmAccount: c.SlurmScope.Account, SlurmPartition: c.SlurmScope.Partition, SlurmQoS: c.SlurmScope.QoS,
		Sharing: string(c.Scheduling.Sharing), BorrowLimitPercent: itoa0(c.Scheduling.BorrowLimitPercent),
		Preemption: string(c.Scheduling.Preemption), FairShareWeight: strconv.Itoa(c.Scheduling.FairShareWeight),
		PriorityClasses: strings.Join(c.Scheduling.PriorityClasses, ", "), ReviewCadenceDays: itoa0(c.ReviewCadenceDays),
		EndDate: c.EndDate, DecommissionCriteria: c.DecommissionCriteria,
	}
	for _, w := range c.WorkloadTypes {
		v.WorkloadTypes = append(v.WorkloadTypes, string(w))
	}
	var rows []string
	for _, g := range c.Scheduling.Guaranteed {
		rows = append(rows, fmt.Sprintf("%s %d", g.InstanceType, g.Count))
	}
	v.Guaranteed = joinLines(rows)
	rows = nil
	for _, s := range c.Signals {
		rows = append(rows, s.Name+" | "+s.Owner+" | "+s.Response)
	}
	v.Signals = joinLines(rows)
	rows = nil
	for _, e := range c.EgressAllowances {
		ports := make([]string, len(e.Ports))
		for i, p := range e.Ports {
			ports[i] = strconv.Itoa(p)
		}
		rows = append(rows, e.Destination+" | "+strings.Join(ports, ",")+" | "+e.Reason)
	}
	v.Egress = joinLines(rows)
	return v
}

// contractFromForm parses the raw values. Syntax problems (a count that is
// not a number, a line without its parts) become field errors keyed by
// form field; the domain's Validate checks everything else.
func contractFromForm(v views.ContractValues) (workflow.Contract, map[string]string) {
	errs := map[string]string{}
	num := func(field, s string) int {
		s = strings.TrimSpace(s)
		if s == "" {
			return 0
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			errs[field] = fmt.Sprintf("%q is not a whole number", clip(s))
		}
		return n
	}
	c := workflow.Contract{
		Team: v.Team, BusinessPurpose: v.BusinessPurpose, BusinessOwner: v.BusinessOwner,
		OperationsOwner: v.OperationsOwner, CostOwner: v.CostOwner, ExceptionOwner: v.ExceptionOwner,
		StudioMode: workflow.StudioMode(v.StudioMode), UnifiedDomainID: v.UnifiedDomainID, UnifiedProjectID: v.UnifiedProjectID,
		AccountID: v.AccountID, Region: v.Region, Orchestrator: workflow.Orchestrator(v.Orchestrator),
		ClusterName: v.ClusterName, ClusterARN: v.ClusterARN, EKSClusterName: v.EKSClusterName,
		ProjectRoleARN: v.ProjectRoleARN, AccessRoleARN: v.AccessRoleARN, WorkloadRoleARN: v.WorkloadRoleARN,
		DataClassification: workflow.DataClassification(v.DataClassification), Namespaces: lines(v.Namespaces),
		SlurmScope:        workflow.SlurmScope{Account: v.SlurmAccount, Partition: v.SlurmPartition, QoS: v.SlurmQoS},
		ReviewCadenceDays: num("review_cadence_days", v.ReviewCadenceDays), EndDate: strings.TrimSpace(v.EndDate),
		DecommissionCriteria: v.DecommissionCriteria,
	}
	for _, w := range v.WorkloadTypes {
		c.WorkloadTypes = append(c.WorkloadTypes, workflow.WorkloadType(w))
	}
	c.Scheduling = workflow.Scheduling{
		Sharing: workflow.Sharing(v.Sharing), BorrowLimitPercent: num("borrow_limit_percent", v.BorrowLimitPercent),
		Preemption: workflow.Preemption(v.Preemption), FairShareWeight: num("fair_share_weight", v.FairShareWeight),
	}
	for _, p := range strings.Split(v.PriorityClasses, ",") {
		if p = strings.TrimSpace(p); p != "" {
			c.Scheduling.PriorityClasses = append(c.Scheduling.PriorityClasses, p)
		}
	}
	var bad []string
	for i, l := range lines(v.Guaranteed) {
		f := strings.Fields(strings.NewReplacer("×", " ", " x ", " ").Replace(l))
		if len(f) != 2 {
			bad = append(bad, fmt.Sprintf("line %d: write an instance type and a count, e.g. ml.p5.48xlarge 2", i+1))
			continue
		}
		n, err := strconv.Atoi(f[1])
		if err != nil {
			bad = append(bad, fmt.Sprintf("line %d: %q is not a whole number", i+1, clip(f[1])))
			continue
		}
		c.Scheduling.Guaranteed = append(c.Scheduling.Guaranteed, workflow.Capacity{InstanceType: f[0], Count: n})
	}
	if len(bad) > 0 {
		errs["guaranteed"] = someLines(bad)
	}
	bad = nil
	for i, l := range lines(v.Signals) {
		p := splitPipes(l)
		if len(p) != 3 {
			bad = append(bad, fmt.Sprintf("line %d: write signal | owner email | response", i+1))
			continue
		}
		c.Signals = append(c.Signals, workflow.Signal{Name: p[0], Owner: p[1], Response: p[2]})
	}
	if len(bad) > 0 {
		errs["signals"] = someLines(bad)
	}
	bad = nil
	for i, l := range lines(v.Egress) {
		p := splitPipes(l)
		if len(p) != 3 {
			bad = append(bad, fmt.Sprintf("line %d: write destination | ports | reason", i+1))
			continue
		}
		e := workflow.Egress{Destination: p[0], Reason: p[2]}
		for _, ps := range strings.Split(p[1], ",") {
			if ps = strings.TrimSpace(ps); ps == "" {
				continue
			}
			n, err := strconv.Atoi(ps)
			if err != nil {
				bad = append(bad, fmt.Sprintf("line %d: port %q is not a number", i+1, clip(ps)))
				continue
			}
			e.Ports = append(e.Ports, n)
		}
		c.EgressAllowances = append(c.EgressAllowances, e)
	}
	if len(bad) > 0 {
		errs["egress"] = someLines(bad)
	}
	return c, errs
}

// limitHelp says each form field's size caps (workflow.Limits), keyed by
// form field name, for its help text: "At most 2000 characters.", "At most
// 20 entries; signal: at most 200 characters; ...". The one-line backstop
// (workflow.MaxOneLineLen) is left out: those fields' own format, which the
// help states, is stricter.
func limitHelp() map[string]string {
	parts := map[string][]string{}
	for _, l := range workflow.Limits {
		if l.Rows == 0 && l.Chars == workflow.MaxOneLineLen {
			continue
		}
		path := strings.Replace(l.Field, "[]", "[0]", 1)
		name, _ := formField(path)
		phrase := l.What()
		switch {
		case l.Rows > 0 && !strings.Contains(l.Field, "[]"):
			phrase = fmt.Sprintf("at most %d entries", l.Rows)
		case strings.Contains(l.Field, "[]"):
			_, part, _ := strings.Cut(workflow.FieldLabel(path), ": ")
			if l.Rows > 0 {
				phrase = fmt.Sprintf("%s: at most %d per entry", part, l.Rows)
			} else {
				phrase = part + ": " + phrase
			}
		}
		parts[name] = append(parts[name], phrase)
	}
	out := make(map[string]string, len(parts))
	for name, ps := range parts {
		h := strings.Join(ps, "; ") + "."
		out[name] = strings.ToUpper(h[:1]) + h[1:]
	}
	return out
}

// clip shortens a value quoted in a message: the field itself keeps the
// whole input.
func clip(s string) string {
	const most = 40
	if r := []rune(s); len(r) > most {
		return string(r[:most]) + "…"
	}
	return s
}

// someLines keeps a form's list of per-line problems short: the first few,
// and how many more. A pasted list of thousands of bad lines gets a short
// answer.
func someLines(bad []string) string {
	const shown = 5
	if len(bad) <= shown {
		return strings.Join(bad, "; ")
	}
	return strings.Join(bad[:shown], "; ") + fmt.Sprintf("; and %d more lines", len(bad)-shown)
}

var indexRE = regexp.MustCompile(`\[(\d+)\]`)

// formField maps a validation error's JSON path to the form field it is
// shown beside, with a "line N:" prefix for list items.
func formField(path string) (string, string) {
	prefix := ""
	if m := indexRE.FindStringSubmatch(path); m != nil {
		n, _ := strconv.Atoi(m[1])
		prefix = fmt.Sprintf("line %d: ", n+1)
		path = path[:strings.Index(path, "[")]
	}
	path = strings.TrimPrefix(path, "scheduling.")
	switch {
	case strings.HasPrefix(path, "slurm_scope."):
		return "slurm_" + strings.TrimPrefix(path, "slurm_scope."), prefix
	case path == "slurm_scope":
		return "slurm_account", prefix
	case path == "egress_allowances":
		return "egress", prefix
	case path == "workload_types":
		return "workload_types", ""
	}
	return path, prefix
}

// mergeFieldErrors adds the domain's errors to the form's syntax errors.
func mergeFieldErrors(form map[string]string, fe workflow.FieldErrors) map[string]string {
	for _, e := range fe {
		f, prefix := formField(e.Field)
		if _, ok := form[f]; ok && prefix == "" {
			continue // the syntax error says more
		}
		msg := prefix + e.Message
		if old, ok := form[f]; ok {
			msg = old + "; " + msg
		}
		form[f] = msg
	}
	return form
}
