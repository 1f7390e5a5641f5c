package provision

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/provision/slurmprov"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// slurmTestContract: team red on Slurm, 2 × ml.p5.48xlarge guaranteed,
// borrowing up to 50 % more, fair-share weight 50, the inference and
// training classes, preempting lower-priority tasks.
func slurmTestContract() workflow.Contract {
	c := slurmContract()
	c.SlurmScope = workflow.SlurmScope{Account: "Red", Partition: "GPU", QoS: "red-gpu"}
	return c.Normalize()
}

// TestSlurmPlanOracle: every number of the plan is computed here from its
// sources (the accelerator table, the settings' priority classes), not
// written down.
func TestSlurmPlanOracle(t *testing.T) {
	c := slurmTestContract()
	s := DefaultClusterSettings()
	s.Slurm = SlurmSettings{Cluster: "hp-slurm", PreemptableQoS: []string{"scavenger"}}
	p, warnings, err := SlurmPlan(c, s)
	if err != nil {
		t.Fatal(err)
	}
	gpus := 0
	for _, g := range c.Scheduling.Guaranteed {
		gpus += g.Count * DefaultAccelerators[g.InstanceType].Accelerators
	}
	limit := gpus * (100 + c.Scheduling.BorrowLimitPercent) / 100
	priority := 0
	for _, pc := range DefaultPriorityClasses {
		if slices.Contains(c.Scheduling.PriorityClasses, pc.Name) && int(pc.Value) > priority {
			priority = int(pc.Value)
		}
	}
	var users []slurmprov.User
	for _, email := range []string{c.BusinessOwner, c.OperationsOwner} { // the example's owners and signal owners
		name, _, _ := strings.Cut(email, "@")
		users = append(users, slurmprov.User{Name: name, Account: "red", Partition: "gpu"})
	}
	slices.SortFunc(users, func(a, b slurmprov.User) int { return strings.Compare(a.Name, b.Name) })
	var coordinators []string // the four owners' local parts, once each
	for _, email := range []string{c.BusinessOwner, c.OperationsOwner, c.CostOwner, c.ExceptionOwner} {
		if name, _, _ := strings.Cut(email, "@"); !slices.Contains(coordinators, name) {
			coordinators = append(coordinators, name)
		}
	}
	slices.Sort(coordinators)
	want := slurmprov.Plan{
		Cluster: "hp-slurm",
		Parent:  slurmprov.Account{Name: DefaultSlurmParentAccount, Description: "teams of the HyperPod portal", Organization: "hyperpod-portal"},
		QoS:     slurmprov.QoS{Name: "red-gpu", Priority: priority, GrpTRES: map[string]int{"gres/gpu": limit}, Preempt: []string{"scavenger"}},
		Account: slurmprov.Account{Name: "red", Parent: DefaultSlurmParentAccount, Description: "team red", Organization: "red",
			Fairshare: c.Scheduling.FairShareWeight, GrpTRES: map[string]int{"gres/gpu": limit}, QoS: []string{"red-gpu"}, DefaultQoS: "red-gpu"},
		Users: users, Coordinators: coordinators,
	}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("SlurmPlan =\n%+v\nwant\n%+v", p, want)
	}
	if limit != 24 || priority != 1000 { // sanity of the oracle itself: 2 × 8 H100, +50 %; inference
		t.Errorf("oracle: limit %d, priority %d", limit, priority)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings %v", warnings)
	}
}

// TestSlurmPlanFollowsEveryContractField breaks when a contract field stops
// reaching the plan: each change of the contract changes the plan's
// commands (what the approval pins).
func TestSlurmPlanFollowsEveryContractField(t *testing.T) {
	s := DefaultClusterSettings()
	s.Slurm.PreemptableQoS = []string{"scavenger"}
	commands := func(c workflow.Contract) string {
		t.Helper()
		p, _, err := SlurmPlan(c, s)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, cmd := range p.Commands() {
			out = append(out, cmd.String())
		}
		return strings.Join(out, "\n")
	}
	base := commands(slurmTestContract())
	for name, change := range map[string]func(*workflow.Contract){
		"slurm_scope.account":             func(c *workflow.Contract) { c.SlurmScope.Account = "red2" },
		"slurm_scope.partition":           func(c *workflow.Contract) { c.SlurmScope.Partition = "cpu" },
		"slurm_scope.qos":                 func(c *workflow.Contract) { c.SlurmScope.QoS = "red-2" },
		"scheduling.guaranteed count":     func(c *workflow.Contract) { c.Scheduling.Guaranteed[0].Count++ },
		"scheduling.guaranteed type":      func(c *workflow.Contract) { c.Scheduling.Guaranteed[0].InstanceType = "ml.g5.24xlarge" },
		"scheduling.borrow_limit_percent": func(c *workflow.Contract) { c.Scheduling.BorrowLimitPercent = 100 },
		"scheduling.sharing":              func(c *workflow.Contract) { c.Scheduling.Sharing = workflow.SharingLend },
		"scheduling.fair_share_weight":    func(c *workflow.Contract) { c.Scheduling.FairShareWeight = 10 },
		"scheduling.priority_classes":     func(c *workflow.Contract) { c.Scheduling.PriorityClasses = []string{"training"} },
		"scheduling.preemption":           func(c *workflow.Contract) { c.Scheduling.Preemption = workflow.PreemptNever },
		"business_owner":                  func(c *workflow.Contract) { c.BusinessOwner = "someone.else@example.test" },
		"operations_owner":                func(c *workflow.Contract) { c.OperationsOwner = "ops@example.test" },
		"cost_owner":                      func(c *workflow.Contract) { c.CostOwner = "cost@example.test" },
		"exception_owner":                 func(c *workflow.Contract) { c.ExceptionOwner = "exc@example.test" },
		"signals[].owner":                 func(c *workflow.Contract) { c.Signals[0].Owner = "watcher@example.test" },
		"cluster_name":                    func(c *workflow.Contract) { c.ClusterName = "other-hp" },
		"team":                            func(c *workflow.Contract) { c.Team = "blue" },
	} {
		c := slurmTestContract()
		change(&c)
		if commands(c.Normalize()) == base {
			t.Errorf("%s changed, the plan's commands did not", name)
		}
	}
}

func TestSlurmUser(t *testing.T) {
	for _, tc := range []struct {
		template, email, want, err string
	}{
		{"{local}", "Ana.Lopez@example.com", "ana.lopez", ""},
		{"hp-{local}", "ana@example.com", "hp-ana", ""},
		{"{team}-{local}", "ana@example.com", "red-ana", ""},
		{"{local}", "not-an-email", "", "not an email"},
		{"{local}", "a+b@example.com", "", "not a portable POSIX user name"},
		{"{local}", "-x@example.com", "", "not a portable POSIX user name"},
		{"{local}{local}{local}", "abcdefghijkl@example.com", "", "not a portable POSIX user name"}, // 36 characters
	} {
		got, err := SlurmUser(tc.template, tc.email, "red")
		if got != tc.want || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("SlurmUser(%q, %q) = %q, %v; want %q, %q", tc.template, tc.email, got, err, tc.want, tc.err)
		}
	}
}

// TestSlurmPlanRefuses: what the plan cannot set up safely is an error the
// approval page shows.
func TestSlurmPlanRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(*workflow.Contract, *ClusterSettings)
		want   string
	}{
		"default qos":    {func(c *workflow.Contract, _ *ClusterSettings) { c.SlurmScope.QoS = "Normal" }, "default QoS"},
		"parent account": {func(c *workflow.Contract, _ *ClusterSettings) { c.SlurmScope.Account = DefaultSlurmParentAccount }, "parent account"},
		"root account":   {func(c *workflow.Contract, _ *ClusterSettings) { c.SlurmScope.Account = "root" }, "root"},
		"neuron": {func(c *workflow.Contract, _ *ClusterSettings) {
			c.Scheduling.Guaranteed[0].InstanceType = "ml.trn1.32xlarge"
		}, "gres/gpu only"},
		"unknown type":      {func(c *workflow.Contract, s *ClusterSettings) { delete(s.Accelerators, "ml.p5.48xlarge") }, "accelerator table"},
		"two map to one":    {func(c *workflow.Contract, s *ClusterSettings) { s.Slurm.UserTemplate = "{team}" }, "both map to POSIX user"},
		"bad user template": {func(c *workflow.Contract, s *ClusterSettings) { s.Slurm.UserTemplate = "{local}+x" }, "not a portable POSIX user name"},
	} {
		c, s := slurmTestContract(), DefaultClusterSettings()
		s.Accelerators = maps.Clone(DefaultClusterSettings().AcceleratorTable())
		tc.change(&c, &s)
		if _, _, err := SlurmPlan(c, s); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
	}
	// Preempting lower-priority tasks with no QoS to preempt is a warning.
	if _, w, err := SlurmPlan(slurmTestContract(), DefaultClusterSettings()); err != nil || len(w) != 1 || !strings.Contains(w[0], "preemptable_qos") {
		t.Errorf("warnings %v, %v", w, err)
	}
}
