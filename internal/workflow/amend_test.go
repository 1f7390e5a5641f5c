package workflow

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestReviewTriggers(t *testing.T) {
	base := ExampleContract()
	tests := []struct {
		name   string
		change func(*Contract)
		want   []string
	}{
		{"nothing", func(*Contract) {}, nil},
		{"purpose only", func(c *Contract) { c.BusinessPurpose += " More." }, nil},
		{"capacity only", func(c *Contract) { c.Scheduling.Guaranteed[0].Count = 3 }, nil},
		{"end date only", func(c *Contract) { c.EndDate = "2026-12-31" }, nil},
		{"business owner", func(c *Contract) { c.BusinessOwner = "ceo@example.test" }, []string{"business_owner"}},
		{"operations owner", func(c *Contract) { c.OperationsOwner = "ops@example.test" }, []string{"operations_owner"}},
		{"cost owner", func(c *Contract) { c.CostOwner = "cfo@example.test" }, []string{"cost_owner"}},
		{"exception owner", func(c *Contract) { c.ExceptionOwner = "x@example.test" }, []string{"exception_owner"}},
		{"project role", func(c *Contract) { c.ProjectRoleARN += "2" }, []string{"project_role_arn"}},
		{"access role", func(c *Contract) { c.AccessRoleARN += "2" }, []string{"access_role_arn"}},
		{"workload role", func(c *Contract) { c.WorkloadRoleARN += "2" }, []string{"workload_role_arn"}},
		{"account", func(c *Contract) { c.AccountID = "444455556666" }, []string{"account_id"}},
		{"region", func(c *Contract) { c.Region = "us-west-2" }, []string{"region"}},
		{"data classification", func(c *Contract) { c.DataClassification = DataRestricted }, []string{"data_classification"}},
		{"a signal's owner", func(c *Contract) { c.Signals[1].Owner = "other@example.test" }, []string{"signals"}},
		{"a signal added", func(c *Contract) {
			c.Signals = append(c.Signals, Signal{Name: "Cost", Owner: "owner.red@example.test", Response: "Ask."})
		}, []string{"signals"}},
		{"several, in ReviewTriggerFields order", func(c *Contract) {
			c.Signals[0].Response = "Other."
			c.Region = "us-west-2"
			c.CostOwner = "cfo@example.test"
			c.BusinessPurpose += " More."
		}, []string{"cost_owner", "region", "signals"}},
		{"case is no change", func(c *Contract) { c.BusinessOwner = strings.ToUpper(c.BusinessOwner) }, nil},
	}
	for _, tt := range tests {
		c := ExampleContract()
		c.Signals = slices.Clone(c.Signals)
		c.Scheduling.Guaranteed = slices.Clone(c.Scheduling.Guaranteed)
		tt.change(&c)
		if got := ReviewTriggers(base, c); !slices.Equal(got, tt.want) {
			t.Errorf("ReviewTriggers %s = %v, want %v", tt.name, got, tt.want)
		}
	}
	// Every trigger field is a contract field.
	for _, f := range ReviewTriggerFields {
		if !slices.ContainsFunc(contractFields, func(cf Field) bool { return cf.Path == f }) {
			t.Errorf("review trigger %q is not a contract field", f)
		}
	}
}

func TestIsRenewal(t *testing.T) {
	old := ExampleContract()
	old.EndDate = "2026-06-30"
	tests := []struct {
		name   string
		change func(*Contract)
		want   bool
	}{
		{"end date moved", func(c *Contract) { c.EndDate = "2026-12-31" }, true},
		{"end date earlier", func(c *Contract) { c.EndDate = "2026-04-30" }, true},
		{"nothing", func(*Contract) {}, false},
		{"end date and capacity", func(c *Contract) {
			c.EndDate = "2026-12-31"
			c.Scheduling.Guaranteed = []Capacity{{InstanceType: p5, Count: 3}}
		}, false},
		{"end date and purpose", func(c *Contract) { c.EndDate = "2026-12-31"; c.BusinessPurpose += " More." }, false},
		{"purpose only", func(c *Contract) { c.BusinessPurpose += " More." }, false},
	}
	for _, tt := range tests {
		c := old
		tt.change(&c)
		if got := IsRenewal(old, c); got != tt.want {
			t.Errorf("IsRenewal %s = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestAmendmentCapacity(t *testing.T) {
	caps := func(pairs ...any) []Capacity {
		var out []Capacity
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, Capacity{InstanceType: pairs[i].(string), Count: pairs[i+1].(int)})
		}
		return out
	}
	const g5 = "ml.g5.xlarge"
	inv := map[string]int{p5: 8, g5: 4}
	tests := []struct {
		name                           string
		committed, approved, requested []Capacity
		want                           bool
	}{
		{"unchanged, fits", caps(p5, 2), caps(p5, 2), caps(p5, 2), true},
		{"unchanged on an over-committed cluster", caps(p5, 9), caps(p5, 2), caps(p5, 2), true},
		{"decrease on an over-committed cluster", caps(p5, 9), caps(p5, 4), caps(p5, 1), true},
		{"type dropped", caps(p5, 9), caps(p5, 4), nil, true},
		{"increase that fits", caps(p5, 5), caps(p5, 2), caps(p5, 3), true},
		{"increase to exactly full", caps(p5, 4), caps(p5, 2), caps(p5, 4), true},
		{"increase that does not fit", caps(p5, 5), caps(p5, 2), caps(p5, 4), false},
		{"increase on an over-committed cluster", caps(p5, 9), caps(p5, 2), caps(p5, 3), false},
		{"new type that fits", caps(p5, 9), caps(p5, 2), caps(p5, 2, g5, 4), true},
		{"new type that does not fit", nil, caps(p5, 2), caps(p5, 2, g5, 5), false},
		{"new type the cluster lacks", nil, caps(p5, 2), caps(p5, 2, "ml.trn1.32xlarge", 1), false},
		{"decrease of one type, increase of another that fits", caps(g5, 1), caps(p5, 4, g5, 1), caps(p5, 1, g5, 3), true},
		{"decrease of one type does not pay for another", caps(p5, 9, g5, 3), caps(p5, 4, g5, 1), caps(p5, 1, g5, 2), false},
		{"instance types compared case-insensitively", caps(p5, 9), caps("ML.P5.48XLARGE", 2), caps(p5, 2), true},
	}
	for _, tt := range tests {
		if got := ApprovalCapacity(inv, tt.committed, true, tt.approved, tt.requested).OK(); got != tt.want {
			t.Errorf("amendment capacity %s = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestAmendmentErrors(t *testing.T) {
	approved := ExampleContract()
	tests := []struct {
		name   string
		change func(*Contract)
		want   []string // fields, in form order
	}{
		{"nothing", func(*Contract) {}, nil},
		{"everything mutable", func(c *Contract) {
			c.BusinessPurpose += " More."
			c.Region, c.CostOwner, c.EndDate = "us-west-2", "cfo@example.test", "2026-12-31"
			c.Scheduling.Guaranteed = []Capacity{{InstanceType: p5, Count: 5}}
			c.DataClassification = DataRestricted
		}, nil},
		{"namespace renamed", func(c *Contract) { c.Namespaces = []string{"hyperpod-ns-red2"} }, []string{"namespaces"}},
		{"namespace added", func(c *Contract) { c.Namespaces = []string{"hyperpod-ns-red", "hyperpod-ns-red2"} }, []string{"namespaces"}},
		{"orchestrator", func(c *Contract) { c.Orchestrator = OrchestratorSlurm }, []string{"orchestrator"}},
		{"cluster", func(c *Contract) { c.ClusterName = "other-hp" }, []string{"cluster_name"}},
		{"team", func(c *Contract) { c.Team = "blue" }, []string{"team"}},
		{"all four", func(c *Contract) {
			c.Team, c.ClusterName, c.Orchestrator, c.Namespaces = "blue", "other-hp", OrchestratorSlurm, []string{"x"}
		}, []string{"team", "orchestrator", "cluster_name", "namespaces"}},
		{"namespace case is no change", func(c *Contract) { c.Namespaces = []string{"HYPERPOD-NS-RED"} }, nil},
	}
	for _, tt := range tests {
		c := ExampleContract()
		tt.change(&c)
		fe := AmendmentErrors(approved, c)
		var got []string
		for _, e := range fe {
			got = append(got, e.Field)
			if !strings.Contains(e.Message, "cannot change on an active connection") || !strings.Contains(e.Message, "in the approved version") {
				t.Errorf("AmendmentErrors %s: %s message %q", tt.name, e.Field, e.Message)
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("AmendmentErrors %s = %v, want %v", tt.name, got, tt.want)
		}
	}
	fe := AmendmentErrors(approved, func() Contract { c := ExampleContract(); c.Namespaces = []string{"hyperpod-ns-red2"}; return c }())
	if len(fe) != 1 || !strings.Contains(fe[0].Message, `"hyperpod-ns-red"`) {
		t.Errorf("the error does not quote the approved namespace: %v", fe)
	}
}

// A change to a restricted connection needs two admins, even one that
// moves the classification away from restricted.
func TestRestrictedConnectionChangeNeedsTwo(t *testing.T) {
	old := ExampleContract()
	old.DataClassification = DataRestricted
	c := old
	c.DataClassification = DataInternal
	s := Conn{ID: 1, Team: "red", State: StateActive, CurrentVersion: 2, CurrentHash: "h2", ApprovedVersion: 1, ApprovedHash: "h1",
		Amendment: AmendSubmitted, RequesterID: 1, EditorIDs: []int64{1}, SubmitterIDs: []int64{1}}
	f := ApprovalFacts{Contract: c, Approved: old, Inventory: map[string]int{"ml.p5.48xlarge": 10}}
	in := ApprovalInput{Version: 2, Hash: "h2", PlanHash: "p", Reason: "ok"}
	e, err := Approve(s, Actor{ID: 8}, in, f, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil || e.Amend != nil || e.Job != nil || len(e.Audit) != 1 || e.Audit[0].Action != "amendment.approve_partial" {
		t.Fatalf("first approval of a restricted connection's downgrade = %+v, %v; want a partial approval", e, err)
	}
	f.ApproverIDs = []int64{8}
	e, err = Approve(s, Actor{ID: 9}, in, f, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil || e.Amend == nil || *e.Amend != AmendApproved || e.Job == nil {
		t.Fatalf("second approval = %+v, %v; want the change approved", e, err)
	}
}

// The page's policy asks the same as Approve: after one approval of a
// change that takes a restricted connection's data out of restricted, a
// second admin may still approve; a change of internal data has its one.
func TestApprovalsNeededForAChange(t *testing.T) {
	admin := NewPrincipal(9, "s9", "", "Ada", []Role{RoleAdmin}, nil)
	o := Object{Team: "red", State: StateActive, Amendment: AmendSubmitted, RequesterID: 1, EditorIDs: []int64{1},
		ApproverIDs: []int64{4}, DataClassification: DataInternal, ApprovedDataClassification: DataRestricted}
	if n := ApprovalsNeededFor(o); n != 2 {
		t.Errorf("ApprovalsNeededFor(restricted -> internal change) = %d, want 2", n)
	}
	if d := Decide(admin, ActionApprove, o); !d.Allowed {
		t.Errorf("second approval of a restricted connection's change refused: %s", d.Reason)
	}
	o.ApprovedDataClassification = DataInternal
	if d := Decide(admin, ActionApprove, o); d.Allowed {
		t.Error("a second approval of an internal change is allowed; it already has its one")
	}
	o.State, o.Amendment = StateSubmitted, AmendNone
	o.ApprovedDataClassification = DataRestricted // not a change: ignored
	if n := ApprovalsNeededFor(o); n != 1 {
		t.Errorf("ApprovalsNeededFor(internal request) = %d, want 1", n)
	}
}
