package workflow

import (
	"reflect"
	"slices"
	"testing"
)

func TestEnums(t *testing.T) {
	type enum struct {
		name    string
		values  []string
		valid   func(string) bool
		label   func(string) string
		choices []Choice
		bad     []string
	}
	strs := func(vs any) []string {
		rv := reflect.ValueOf(vs)
		out := make([]string, rv.Len())
		for i := range out {
			out[i] = rv.Index(i).String()
		}
		return out
	}
	enums := []enum{
		{"StudioMode", strs(AllStudioModes), func(s string) bool { return StudioMode(s).Valid() }, func(s string) string { return StudioMode(s).Label() }, StudioModeChoices(), []string{"", "Team-Domain", "domain"}},
		{"Orchestrator", strs(AllOrchestrators), func(s string) bool { return Orchestrator(s).Valid() }, func(s string) string { return Orchestrator(s).Label() }, OrchestratorChoices(), []string{"", "EKS", "kubernetes"}},
		{"WorkloadType", strs(AllWorkloadTypes), func(s string) bool { return WorkloadType(s).Valid() }, func(s string) string { return WorkloadType(s).Label() }, WorkloadTypeChoices(), []string{"", "fine_tuning", "serving"}},
		{"DataClassification", strs(AllDataClassifications), func(s string) bool { return DataClassification(s).Valid() }, func(s string) string { return DataClassification(s).Label() }, DataClassificationChoices(), []string{"", "secret", "Public"}},
		{"Sharing", strs(AllSharings), func(s string) bool { return Sharing(s).Valid() }, func(s string) string { return Sharing(s).Label() }, SharingChoices(), []string{"", "both", "lend_and_borrow"}},
		{"Preemption", strs(AllPreemptions), func(s string) bool { return Preemption(s).Valid() }, func(s string) string { return Preemption(s).Label() }, PreemptionChoices(), []string{"", "always", "LowerPriority"}},
	}
	wantCount := map[string]int{"StudioMode": 2, "Orchestrator": 2, "WorkloadType": 4, "DataClassification": 4, "Sharing": 4, "Preemption": 2}
	for _, e := range enums {
		if len(e.values) != wantCount[e.name] || len(e.choices) != len(e.values) {
			t.Errorf("%s: %d values, %d choices; want %d", e.name, len(e.values), len(e.choices), wantCount[e.name])
		}
		for i, v := range e.values {
			if !e.valid(v) {
				t.Errorf("%s(%q).Valid() = false", e.name, v)
			}
			if l := e.label(v); l == "" || l == v {
				t.Errorf("%s(%q).Label() = %q, want a human label", e.name, v, l)
			}
			if e.choices[i] != (Choice{Value: v, Label: e.label(v)}) {
				t.Errorf("%s choice %d = %+v, want %q with its label", e.name, i, e.choices[i], v)
			}
		}
		for _, v := range e.bad {
			if e.valid(v) {
				t.Errorf("%s(%q).Valid() = true", e.name, v)
			}
			if e.label(v) != v {
				t.Errorf("%s(%q).Label() = %q, want the value itself", e.name, v, e.label(v))
			}
		}
	}
}

func TestSharingBorrowsLends(t *testing.T) {
	tests := []struct {
		s              Sharing
		borrows, lends bool
	}{
		{SharingLend, false, true},
		{SharingBorrow, true, false},
		{SharingLendAndBorrow, true, true},
		{SharingNeither, false, false},
		{"", false, false},
	}
	for _, tt := range tests {
		if tt.s.Borrows() != tt.borrows || tt.s.Lends() != tt.lends {
			t.Errorf("%q: Borrows, Lends = %v, %v; want %v, %v", tt.s, tt.s.Borrows(), tt.s.Lends(), tt.borrows, tt.lends)
		}
	}
}

func TestExampleContract(t *testing.T) {
	c := ExampleContract()
	if errs := c.Validate(testEnv()); len(errs) != 0 {
		t.Fatalf("ExampleContract().Validate() = %v", errs)
	}
	if n := c.Normalize(); !reflect.DeepEqual(n, c) {
		t.Errorf("ExampleContract() is not normalized:\n got %+v\nwant %+v", c, n)
	}
	// The brief other packages rely on.
	if c.Team != "red" || c.AccountID != "111122223333" || c.Region != "us-east-1" || c.ClusterName != "shared-hp" ||
		c.Orchestrator != OrchestratorEKS || !slices.Equal(c.Scheduling.Guaranteed, []Capacity{{"ml.p5.48xlarge", 2}}) {
		t.Errorf("ExampleContract() = %+v", c)
	}
	// Each call is a fresh value: changing one does not change the next.
	c.Namespaces[0] = "changed"
	if ExampleContract().Namespaces[0] != "hyperpod-ns-red" {
		t.Error("ExampleContract() shares slices between calls")
	}
}

func TestNormalize(t *testing.T) {
	in := ExampleContract()
	in.Team = "  Red\t"
	in.BusinessOwner = " Owner.Red@Example.TEST "
	in.StudioMode = "Team-Domain"
	in.Region = " US-East-1"
	in.BusinessPurpose = "  line one\r\nline two\rline three  "
	in.WorkloadTypes = []WorkloadType{"training", " Inference", "training", "fine-tuning"}
	in.Namespaces = []string{"b-ns", "A-NS", "b-ns"}
	in.Scheduling.Guaranteed = []Capacity{{"ml.p5.48xlarge", 2}, {"ML.G5.8XLARGE", 1}}
	in.Scheduling.PriorityClasses = []string{"training", "Inference", "training"}
	in.Signals = []Signal{{"b", "X@Y.Z", "r"}, {"a", "x@y.z", "r"}}
	in.EgressAllowances = []Egress{{"Z.example.com", []int{8443, 443, 443}, "z"}, {"a.example.com", []int{443}, "a"}}
	in.EndDate = " 2027-01-01 "
	in.SlurmScope = SlurmScope{Account: " red ", Partition: "GPU", QoS: "\tnormal"}
	in.UnifiedDomainID = " dzd_ABC "
	in.EgressAllowances = append(in.EgressAllowances, Egress{"bad\xffname", nil, ""})
	before := deepClone(in)

	n := in.Normalize()

	checks := []struct {
		name      string
		got, want any
	}{
		{"team", n.Team, "red"},
		{"owner", n.BusinessOwner, "owner.red@example.test"},
		{"studio", n.StudioMode, StudioTeamDomain},
		{"region", n.Region, "us-east-1"},
		{"purpose", n.BusinessPurpose, "line one\nline two\nline three"},
		{"workload types", n.WorkloadTypes, []WorkloadType{"fine-tuning", "inference", "training"}},
		{"namespaces", n.Namespaces, []string{"a-ns", "b-ns"}},
		{"guaranteed", n.Scheduling.Guaranteed, []Capacity{{"ml.g5.8xlarge", 1}, {"ml.p5.48xlarge", 2}}},
		{"priority classes", n.Scheduling.PriorityClasses, []string{"inference", "training"}},
		{"signals", n.Signals, []Signal{{"a", "x@y.z", "r"}, {"b", "x@y.z", "r"}}},
		{"egress", n.EgressAllowances, []Egress{{"a.example.com", []int{443}, "a"}, {"bad\uFFFDname", nil, ""}, {"z.example.com", []int{443, 8443}, "z"}}},
		{"end date", n.EndDate, "2027-01-01"},
		{"slurm scope keeps case", n.SlurmScope, SlurmScope{Account: "red", Partition: "GPU", QoS: "normal"}},
		{"ids keep case", n.UnifiedDomainID, "dzd_ABC"},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.name, c.got, c.want)
		}
	}
	if !reflect.DeepEqual(in, before) {
		t.Error("Normalize changed the caller's contract")
	}
	if again := n.Normalize(); !reflect.DeepEqual(again, n) {
		t.Errorf("Normalize is not idempotent:\n%+v\n%+v", n, again)
	}
	empty := Contract{WorkloadTypes: []WorkloadType{}, Namespaces: []string{}, Signals: []Signal{}}.Normalize()
	if empty.WorkloadTypes != nil || empty.Namespaces != nil || empty.Signals != nil {
		t.Errorf("empty lists not nil after Normalize: %+v", empty)
	}
}

func TestFieldLabel(t *testing.T) {
	tests := []struct{ path, want string }{
		{"cluster_arn", "HyperPod cluster ARN"},
		{"scheduling.borrow_limit_percent", "Borrow limit"},
		{"slurm_scope", "Slurm scope"},
		{"slurm_scope.qos", "Slurm QoS"},
		{"namespaces[1]", "Namespaces, row 2"},
		{"workload_types[0]", "Workload types, row 1"},
		{"scheduling.guaranteed[0].count", "Guaranteed capacity, row 1: count"},
		{"scheduling.guaranteed[2].instance_type", "Guaranteed capacity, row 3: instance type"},
		{"signals[1].owner", "Watched signals, row 2: owner"},
		{"egress_allowances[0].ports[1]", "Network egress allowances, row 1: ports"},
		{"egress_allowances[3].reason", "Network egress allowances, row 4: reason"},
		{"unknown_field", "unknown_field"},
		{"namespaces[x]", "namespaces[x]"},
		{"namespaces[-1]", "namespaces[-1]"},
		{"broken]", "broken]"},
	}
	for _, tt := range tests {
		if got := FieldLabel(tt.path); got != tt.want {
			t.Errorf("FieldLabel(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
	// Every field has a label of its own, and every validation message
	// names a path FieldLabel knows.
	seen := map[string]bool{}
	for _, f := range contractFields {
		if f.Label == "" || seen[f.Label] {
			t.Errorf("field %s has an empty or repeated label %q", f.Path, f.Label)
		}
		seen[f.Label] = true
	}
	for _, row := range validationTable {
		for _, w := range row.want {
			if FieldLabel(w) == w {
				t.Errorf("FieldLabel(%q) has no label", w)
			}
		}
	}
}

// TestContractFieldsCoverEveryJSONField: the field table (labels, Diff)
// must name every leaf of the contract's JSON, or a change to an unlisted
// field would change the hash without showing in the diff.
func TestContractFieldsCoverEveryJSONField(t *testing.T) {
	listed := map[string]bool{}
	for _, f := range contractFields {
		listed[f.Path] = true
	}
	var walk func(prefix string, tp reflect.Type)
	walk = func(prefix string, tp reflect.Type) {
		for f := range tp.Fields() {
			name := prefix + jsonName(f)
			if listed[name] {
				continue
			}
			if f.Type.Kind() == reflect.Struct {
				walk(name+".", f.Type)
				continue
			}
			t.Errorf("JSON field %s is not in contractFields", name)
		}
	}
	walk("", reflect.TypeFor[Contract]())
}

func jsonName(f reflect.StructField) string {
	tag := f.Tag.Get("json")
	for i := range len(tag) {
		if tag[i] == ',' {
			return tag[:i]
		}
	}
	return tag
}

// deepClone copies every slice of c, so that a test can tell whether a
// function changed the caller's contract.
func deepClone(c Contract) Contract {
	c.WorkloadTypes = slices.Clone(c.WorkloadTypes)
	c.Namespaces = slices.Clone(c.Namespaces)
	c.Scheduling.Guaranteed = slices.Clone(c.Scheduling.Guaranteed)
	c.Scheduling.PriorityClasses = slices.Clone(c.Scheduling.PriorityClasses)
	c.Signals = slices.Clone(c.Signals)
	c.EgressAllowances = slices.Clone(c.EgressAllowances)
	for i := range c.EgressAllowances {
		c.EgressAllowances[i].Ports = slices.Clone(c.EgressAllowances[i].Ports)
	}
	return c
}
