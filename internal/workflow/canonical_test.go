package workflow

import (
	"bytes"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestCanonical(t *testing.T) {
	c := ExampleContract()
	c.EgressAllowances[0].Reason = "Data <& model> artifacts."
	got := string(c.Canonical())
	if !strings.HasPrefix(got, `{"team":"red","business_purpose":`) {
		t.Errorf("Canonical() does not start with the team and purpose: %s", got)
	}
	if !strings.Contains(got, `"reason":"Data <& model> artifacts."`) {
		t.Errorf("Canonical() escapes HTML: %s", got)
	}
	if strings.ContainsAny(got, "\n\t") || strings.Contains(got, `": `) {
		t.Errorf("Canonical() has insignificant whitespace: %s", got)
	}
	for _, absent := range []string{"unified_domain_id", "slurm_scope", "end_date", `"namespaces":null`} {
		if strings.Contains(got, absent) {
			t.Errorf("Canonical() of an EKS team-domain contract shows %s: %s", absent, got)
		}
	}
	// Fields appear in the order of the Contract type.
	var order []string
	for _, f := range contractFields {
		if !strings.HasPrefix(f.Path, "slurm_scope.") {
			order = append(order, f.Path)
		}
	}
	last := -1
	for _, p := range order {
		key := `"` + p[strings.LastIndexByte(p, '.')+1:] + `":`
		i := strings.Index(got, key)
		if i < 0 {
			continue // omitted when empty
		}
		if i < last {
			t.Errorf("%s appears before the field listed ahead of it", key)
		}
		last = i
	}
}

func TestHashStability(t *testing.T) {
	base := ExampleContract()
	h := base.Hash()
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(h) {
		t.Fatalf("Hash() = %q, want 64 hex digits", h)
	}
	if base.Hash() != h || ExampleContract().Hash() != h {
		t.Error("the same contract hashes differently")
	}

	// Each row writes the same contract two ways.
	same := []struct {
		name string
		a, b func(*Contract)
	}{
		{"owner case and spaces", func(c *Contract) { c.BusinessOwner = " Owner.Red@Example.TEST " }, nil},
		{"spaces around an ARN", func(c *Contract) { c.ClusterARN = " " + c.ClusterARN + "\n" }, nil},
		{"enum case", func(c *Contract) { c.Orchestrator = "EKS"; c.Scheduling.Sharing = "Lend-And-Borrow" }, nil},
		{"set order and duplicates", func(c *Contract) {
			c.WorkloadTypes = []WorkloadType{"training", "inference", "fine-tuning", "training"}
			c.Scheduling.PriorityClasses = []string{"training", "inference"}
		}, nil},
		{"row order", func(c *Contract) { c.Signals[0], c.Signals[1] = c.Signals[1], c.Signals[0] }, nil},
		{"line ends", func(c *Contract) { c.DecommissionCriteria = "one\r\ntwo" }, func(c *Contract) { c.DecommissionCriteria = "one\ntwo" }},
		{"empty and missing list", func(c *Contract) { c.Scheduling.PriorityClasses = []string{} }, func(c *Contract) { c.Scheduling.PriorityClasses = nil }},
	}
	for _, tt := range same {
		a, b := ExampleContract(), ExampleContract()
		tt.a(&a)
		if tt.b != nil {
			tt.b(&b)
		}
		if a.Hash() != b.Hash() {
			t.Errorf("%s: hashes differ\n%s\n%s", tt.name, a.Canonical(), b.Canonical())
		}
	}

	if a, b := (Contract{BusinessOwner: " Red@X.com "}), (Contract{BusinessOwner: "red@x.com"}); a.Hash() != b.Hash() {
		t.Errorf("%q and %q hash differently", a.BusinessOwner, b.BusinessOwner)
	}
	if a, b := (Contract{Namespaces: []string{}}), (Contract{}); a.Hash() != b.Hash() {
		t.Error("an empty list and no list hash differently")
	}

	differ := []func(*Contract){
		func(c *Contract) { c.Scheduling.Guaranteed[0].Count = 3 },
		func(c *Contract) { c.BusinessPurpose += "." },
		func(c *Contract) { c.ClusterName = "Shared-HP" }, // cluster names are case-sensitive
		func(c *Contract) { c.Scheduling.FairShareWeight = 0 },
		func(c *Contract) { c.SlurmScope.QoS = "x" },
		func(c *Contract) { c.EgressAllowances[0].Ports = append(c.EgressAllowances[0].Ports, 80) },
	}
	seen := map[string]int{h: -1}
	for i, change := range differ {
		c := ExampleContract()
		change(&c)
		hc := c.Hash()
		if j, dup := seen[hc]; dup {
			t.Errorf("change %d hashes like %d", i, j)
		}
		seen[hc] = i
	}
}

func TestHashIndependentOfJSONFieldOrder(t *testing.T) {
	want := ExampleContract().Hash()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(ExampleContract().Canonical(), &m); err != nil {
		t.Fatal(err)
	}
	// Rebuild the object with keys in reverse order.
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	var buf bytes.Buffer
	buf.WriteString("{\n")
	for i := len(keys) - 1; i >= 0; i-- {
		k := keys[i]
		buf.WriteString("  " + `"` + k + `": ` + string(m[k]))
		if i > 0 {
			buf.WriteString(",")
		}
		buf.WriteString("\n")
	}
	buf.WriteString("}")
	c, err := DecodeContract(buf.Bytes())
	if err != nil {
		t.Fatalf("DecodeContract: %v\n%s", err, buf.Bytes())
	}
	if got := c.Hash(); got != want {
		t.Errorf("hash of reordered JSON = %s, want %s", got, want)
	}
}

func TestDecodeContract(t *testing.T) {
	valid := string(ExampleContract().Canonical())
	tests := []struct {
		name    string
		in      string
		wantErr string
	}{
		{"canonical", valid, ""},
		{"indented", indent(valid), ""},
		{"trailing whitespace", valid + "\n\t ", ""},
		{"empty object", `{}`, ""},
		{"null", `null`, "must be a JSON object"},
		{"array", `[]`, "must be a JSON object"},
		{"string", `"team"`, "must be a JSON object"},
		{"empty", ``, "EOF"},
		{"unknown field", `{"team":"red","colour":"red"}`, `unknown field "colour"`},
		{"unknown nested field", `{"scheduling":{"guaranteed":[{"instance_type":"ml.p5.48xlarge","count":1,"gpus":8}]}}`, `unknown field "gpus"`},
		{"field in another case", `{"Team":"red"}`, `unknown field "Team"`},
		{"field twice", `{"team":"red","team":"blue"}`, `"team" appears twice`},
		{"nested field twice", `{"slurm_scope":{"qos":"a","qos":"b"}}`, `"qos" appears twice`},
		{"same key in sibling objects", `{"signals":[{"name":"a"},{"name":"b"}]}`, ""},
		{"key of another level", `{"count":1}`, `unknown field "count"`},
		{"trailing object", valid + `{}`, "unexpected data after"},
		{"trailing garbage", `{"team":"red"} x`, "unexpected data after"},
		{"wrong type", `{"review_cadence_days":"90"}`, "cannot unmarshal string"},
		{"float count", `{"scheduling":{"guaranteed":[{"count":1.5}]}}`, "cannot unmarshal number 1.5"},
		{"huge number", `{"review_cadence_days":1e400}`, "cannot unmarshal number"},
		{"truncated", valid[:len(valid)/2], "unexpected EOF"},
		{"string where object", `{"scheduling":"lots"}`, "cannot unmarshal string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := DecodeContract([]byte(tt.in))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("DecodeContract() error = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("DecodeContract() error = %v, want one containing %q", err, tt.wantErr)
			}
			if !reflect.DeepEqual(c, Contract{}) {
				t.Errorf("DecodeContract() returned a contract with its error: %+v", c)
			}
		})
	}
}

func TestDecodeKeepsTheContractAsWritten(t *testing.T) {
	c, err := DecodeContract([]byte(`{"team":" Red ","orchestrator":"eks","namespaces":["b","a","b"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Team != " Red " || !reflect.DeepEqual(c.Namespaces, []string{"b", "a", "b"}) {
		t.Errorf("DecodeContract normalized: %+v", c)
	}
	errs := c.Validate(testEnv())
	if errs.Get("namespaces[2]") == "" {
		t.Errorf("Validate after decode lost the duplicate namespace: %v", errs)
	}
}

func TestCanonicalRoundTrip(t *testing.T) {
	for _, c := range []Contract{ExampleContract(), slurmContract(), unifiedContract(), {}, {Team: "bad\xffteam", BusinessPurpose: "a\r\rb"}} {
		b1 := c.Canonical()
		d, err := DecodeContract(b1)
		if err != nil {
			t.Fatalf("DecodeContract(Canonical()) = %v\n%s", err, b1)
		}
		if b2 := d.Canonical(); !bytes.Equal(b1, b2) {
			t.Errorf("round trip changed the canonical JSON:\n%s\n%s", b1, b2)
		}
		if d.Hash() != c.Hash() {
			t.Error("round trip changed the hash")
		}
	}
}

func TestDiff(t *testing.T) {
	old := ExampleContract()
	tests := []struct {
		name   string
		change func(*Contract)
		want   []Change
	}{
		{"equal", func(c *Contract) {}, nil},
		{"only normalization", func(c *Contract) {
			c.BusinessOwner = "OWNER.RED@example.test "
			c.WorkloadTypes = []WorkloadType{"training", "inference", "fine-tuning"}
		}, nil},
		{"capacity", func(c *Contract) {
			c.Scheduling.Guaranteed = []Capacity{{"ml.p5.48xlarge", 4}, {"ml.g5.8xlarge", 2}}
		}, []Change{{"scheduling.guaranteed", "Guaranteed capacity", "ml.p5.48xlarge × 2", "ml.g5.8xlarge × 2, ml.p5.48xlarge × 4"}}},
		{"enum labels and numbers", func(c *Contract) {
			c.Scheduling.Sharing = SharingNeither
			c.Scheduling.BorrowLimitPercent = 0
			c.ReviewCadenceDays = 30
			c.DataClassification = DataConfidential
		}, []Change{
			{"data_classification", "Data classification", "Internal", "Confidential"},
			{"scheduling.sharing", "Lending and borrowing", "Lend and borrow idle capacity", "Neither lend nor borrow"},
			{"scheduling.borrow_limit_percent", "Borrow limit", "50%", ""},
			{"review_cadence_days", "Review cadence", "90 days", "30 days"},
		}},
		{"lists joined", func(c *Contract) {
			c.WorkloadTypes = []WorkloadType{WorkloadInteractive}
			c.Namespaces = []string{"hyperpod-ns-red", "red-inference"}
		}, []Change{
			{"workload_types", "Workload types", "Fine-tuning, Inference, Training", "Interactive spaces (JupyterLab, Code Editor)"},
			{"namespaces", "Namespaces", "hyperpod-ns-red", "hyperpod-ns-red, red-inference"},
		}},
		{"to slurm", func(c *Contract) {
			*c = slurmContract()
		}, []Change{
			{"orchestrator", "Orchestrator", "Amazon EKS", "Slurm"},
			{"eks_cluster_name", "EKS cluster name", "shared-hp-eks", ""},
			{"namespaces", "Namespaces", "hyperpod-ns-red", ""},
			{"slurm_scope.account", "Slurm account", "", "red"},
			{"slurm_scope.partition", "Slurm partition", "", "gpu"},
			{"slurm_scope.qos", "Slurm QoS", "", "normal"},
		}},
		{"rows", func(c *Contract) {
			c.Signals = c.Signals[:1]
			c.EgressAllowances[0].Ports = []int{443, 8443}
			c.EndDate = "2027-06-30"
		}, []Change{
			{"signals", "Watched signals",
				"Accelerator utilization (member.red@example.test): Below 40% for 7 days: propose a smaller guarantee at the next review.; " +
					"Pending and preempted tasks (member.red@example.test): Tasks pending for more than 4 hours: ask the exception owner for a temporary priority change.",
				"Accelerator utilization (member.red@example.test): Below 40% for 7 days: propose a smaller guarantee at the next review."},
			{"end_date", "End date", "", "2027-06-30"},
			{"egress_allowances", "Network egress allowances",
				"s3.us-east-1.amazonaws.com port 443 (Training data and model artifacts in the team's S3 buckets.)",
				"s3.us-east-1.amazonaws.com port 443, 8443 (Training data and model artifacts in the team's S3 buckets.)"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := ExampleContract()
			tt.change(&n)
			got := Diff(old, n)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Diff() =\n%s\nwant\n%s", fmtChanges(got), fmtChanges(tt.want))
			}
			if (len(got) == 0) != (old.Hash() == n.Hash()) {
				t.Errorf("Diff() is empty = %v, but hashes equal = %v", len(got) == 0, old.Hash() == n.Hash())
			}
			// Reversed, every change swaps Old and New.
			back := Diff(n, old)
			if len(back) != len(got) {
				t.Fatalf("Diff reversed has %d changes, want %d", len(back), len(got))
			}
			for i := range back {
				if back[i].Old != got[i].New || back[i].New != got[i].Old || back[i].Field != got[i].Field {
					t.Errorf("reversed change %d = %+v, forward %+v", i, back[i], got[i])
				}
			}
		})
	}
}

// TestDiffSeesEveryField: a change to any single field of the example
// contract shows as exactly that field in the diff. Every row of the field
// table is also diffed alone from the empty contract, with no entry here
// needed (TestEveryRowRoundTripsThroughItsCodec).
func TestDiffSeesEveryField(t *testing.T) {
	changes := map[string]func(*Contract){
		"team":                            func(c *Contract) { c.Team = "blue" },
		"business_purpose":                func(c *Contract) { c.BusinessPurpose = "Something else entirely." },
		"business_owner":                  func(c *Contract) { c.BusinessOwner = "a@b.c" },
		"operations_owner":                func(c *Contract) { c.OperationsOwner = "a@b.c" },
		"cost_owner":                      func(c *Contract) { c.CostOwner = "a@b.c" },
		"exception_owner":                 func(c *Contract) { c.ExceptionOwner = "a@b.c" },
		"studio_mode":                     func(c *Contract) { c.StudioMode = StudioUnified },
		"unified_domain_id":               func(c *Contract) { c.UnifiedDomainID = "dzd_x" },
		"unified_project_id":              func(c *Contract) { c.UnifiedProjectID = "p" },
		"account_id":                      func(c *Contract) { c.AccountID = "444455556666" },
		"region":                          func(c *Contract) { c.Region = "eu-west-1" },
		"orchestrator":                    func(c *Contract) { c.Orchestrator = OrchestratorSlurm },
		"cluster_name":                    func(c *Contract) { c.ClusterName = "other" },
		"cluster_arn":                     func(c *Contract) { c.ClusterARN = "arn:x" },
		"eks_cluster_name":                func(c *Contract) { c.EKSClusterName = "other" },
		"project_role_arn":                func(c *Contract) { c.ProjectRoleARN = "arn:x" },
		"access_role_arn":                 func(c *Contract) { c.AccessRoleARN = "arn:x" },
		"workload_role_arn":               func(c *Contract) { c.WorkloadRoleARN = "arn:x" },
		"workload_types":                  func(c *Contract) { c.WorkloadTypes = c.WorkloadTypes[:1] },
		"data_classification":             func(c *Contract) { c.DataClassification = DataPublic },
		"namespaces":                      func(c *Contract) { c.Namespaces = []string{"x"} },
		"slurm_scope.account":             func(c *Contract) { c.SlurmScope.Account = "x" },
		"slurm_scope.partition":           func(c *Contract) { c.SlurmScope.Partition = "x" },
		"slurm_scope.qos":                 func(c *Contract) { c.SlurmScope.QoS = "x" },
		"scheduling.guaranteed":           func(c *Contract) { c.Scheduling.Guaranteed[0].Count = 9 },
		"scheduling.sharing":              func(c *Contract) { c.Scheduling.Sharing = SharingBorrow },
		"scheduling.borrow_limit_percent": func(c *Contract) { c.Scheduling.BorrowLimitPercent = 100 },
		"scheduling.preemption":           func(c *Contract) { c.Scheduling.Preemption = PreemptNever },
		"scheduling.fair_share_weight":    func(c *Contract) { c.Scheduling.FairShareWeight = 1 },
		"scheduling.priority_classes":     func(c *Contract) { c.Scheduling.PriorityClasses = nil },
		"signals":                         func(c *Contract) { c.Signals[0].Response = "Other." },
		"review_cadence_days":             func(c *Contract) { c.ReviewCadenceDays = 30 },
		"end_date":                        func(c *Contract) { c.EndDate = "2030-01-01" },
		"decommission_criteria":           func(c *Contract) { c.DecommissionCriteria = "" },
		"egress_allowances":               func(c *Contract) { c.EgressAllowances[0].Reason = "Other." },
	}
	for _, f := range contractFields {
		change, ok := changes[f.Path]
		if !ok {
			// A row without a change here is still diffed alone, from
			// its example value: TestEveryRowRoundTripsThroughItsCodec.
			continue
		}
		c := ExampleContract()
		change(&c)
		got := Diff(ExampleContract(), c)
		if len(got) != 1 || got[0].Field != f.Path || got[0].Label != f.Label || got[0].Old == got[0].New {
			t.Errorf("changing %s: Diff() = %s", f.Path, fmtChanges(got))
		}
	}
}

func fmtChanges(cs []Change) string {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString("  " + c.Field + " [" + c.Label + "]: " + c.Old + " -> " + c.New + "\n")
	}
	return b.String()
}

func indent(s string) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, []byte(s), "", "  "); err != nil {
		panic(err)
	}
	return buf.String()
}
