package provision

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// borrowingContract is team blue: two instance types, borrowing without
// lending, never preempting, a CIDR and a DNS egress allowance, a second
// namespace and a priority class the cluster does not define.
func borrowingContract() workflow.Contract {
	c := workflow.ExampleContract()
	c.Team = "blue"
	c.BusinessOwner, c.OperationsOwner, c.CostOwner, c.ExceptionOwner = "owner.blue@example.test", "member.blue@example.test", "owner.blue@example.test", "owner.blue@example.test"
	c.ProjectRoleARN = "arn:aws:iam::111122223333:role/blue-project"
	c.AccessRoleARN = "arn:aws:iam::111122223333:role/blue-access"
	c.WorkloadRoleARN = "arn:aws:iam::111122223333:role/blue-workload"
	c.Namespaces = []string{"hyperpod-ns-blue", "blue-batch"}
	c.Scheduling = workflow.Scheduling{
		Guaranteed:         []workflow.Capacity{{InstanceType: "ml.g5.8xlarge", Count: 4}, {InstanceType: "ml.p4d.24xlarge", Count: 1}},
		Sharing:            workflow.SharingBorrow,
		BorrowLimitPercent: 100,
		Preemption:         workflow.PreemptNever,
		FairShareWeight:    20,
		PriorityClasses:    []string{"experiment", "research"},
	}
	c.EgressAllowances = []workflow.Egress{
		{Destination: "10.20.0.0/16", Ports: []int{443, 5432}, Reason: "The team's feature store and Postgres in the data VPC."},
		{Destination: "huggingface.co", Ports: []int{443}, Reason: "Base model weights."},
	}
	return c.Normalize()
}

func slurmContract() workflow.Contract {
	c := workflow.ExampleContract()
	c.Orchestrator = workflow.OrchestratorSlurm
	c.EKSClusterName = ""
	c.Namespaces = nil
	c.SlurmScope = workflow.SlurmScope{Account: "red", Partition: "gpu", QoS: "red-gpu"}
	return c.Normalize()
}

func managedSettings() ClusterSettings {
	s := DefaultClusterSettings()
	s.ClusterQueueManagedByPortal = true
	s.Cohort = "shared-gpus"
	return s
}

// TestBuildPlanGolden pins the whole plan of representative contracts:
// summary, warnings, hash and YAML. Regenerate with
// go test ./internal/provision -run TestBuildPlanGolden -update
func TestBuildPlanGolden(t *testing.T) {
	for _, tc := range []struct {
		name     string
		contract workflow.Contract
		settings ClusterSettings
	}{
		// HyperPod task governance owns the ClusterQueue: the plan points a
		// LocalQueue at it and warns about the DNS egress allowance.
		{"example", workflow.ExampleContract(), DefaultClusterSettings()},
		// The portal owns the ClusterQueue.
		{"borrowing", borrowingContract(), managedSettings()},
		{"slurm", slurmContract(), DefaultClusterSettings()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := workflow.ValidationEnv{Now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			if errs := tc.contract.Validate(env); len(errs) > 0 {
				t.Fatalf("test contract is not valid, so the golden file would pin nonsense: %v", errs)
			}
			var b strings.Builder
			b.WriteString("# BuildPlan(7, 3, hash, " + tc.name + "); regenerate with go test ./internal/provision -run TestBuildPlanGolden -update\n")
			p, err := BuildPlan(7, 3, tc.contract.Hash(), tc.contract, tc.settings)
			if err != nil {
				b.WriteString("## Error\n" + err.Error() + "\n")
			} else {
				b.WriteString("## Summary\n" + strings.Join(p.Summary(), "\n") + "\n")
				b.WriteString("## Warnings\n")
				for _, w := range p.Warnings {
					b.WriteString("- " + w + "\n")
				}
				b.WriteString("## Hash\n" + p.Hash() + "\n")
				b.WriteString("## YAML\n" + p.YAML())
				if p.Slurm != nil {
					b.WriteString("## Slurm\n")
					for _, c := range p.Slurm.Commands() {
						b.WriteString(c.String() + "\n")
					}
				}
			}
			golden(t, filepath.Join("testdata", tc.name+".golden"), b.String())
		})
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s differs from the output at line %d:\n got: %q\nwant: %q\n(run with -update if the change is intended)", path, i+1, g, w)
			}
		}
	}
}

// TestBuildPlanSlurm: a Slurm contract's plan is its Slurm accounting,
// no Kubernetes object, and its hash covers the exact commands.
func TestBuildPlanSlurm(t *testing.T) {
	c := slurmContract()
	p, err := BuildPlan(1, 1, c.Hash(), c, DefaultClusterSettings())
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Objects) != 0 || len(p.AWS) != 0 || p.Slurm == nil {
		t.Fatalf("a Slurm plan has %d objects, %d AWS calls, Slurm %v; want only Slurm", len(p.Objects), len(p.AWS), p.Slurm)
	}
	for _, cmd := range p.Slurm.Commands() {
		if !strings.Contains(p.HashedText(), cmd.String()) {
			t.Errorf("the hashed text lacks %q", cmd)
		}
	}
	if _, err := BuildPlan(1, 1, "not-the-hash", c, DefaultClusterSettings()); err == nil {
		t.Error("a Slurm plan built under another version's hash")
	}
}

func TestBuildPlanDeterministicAndBoundToTheContract(t *testing.T) {
	c := workflow.ExampleContract()
	p1, err := BuildPlan(1, 1, c.Hash(), c, managedSettings())
	if err != nil {
		t.Fatal(err)
	}
	p2, err := BuildPlan(1, 1, c.Hash(), c, managedSettings())
	if err != nil {
		t.Fatal(err)
	}
	if p1.Hash() != p2.Hash() || p1.YAML() != p2.YAML() {
		t.Fatalf("two builds of the same contract differ")
	}
	if len(p1.Hash()) != 64 {
		t.Errorf("Hash() = %q, want 64 hex digits", p1.Hash())
	}

	more := workflow.ExampleContract()
	more.Scheduling.Guaranteed[0].Count = 3
	p3, err := BuildPlan(1, 2, more.Hash(), more, managedSettings())
	if err != nil {
		t.Fatal(err)
	}
	if p3.Hash() == p1.Hash() {
		t.Errorf("plans of different contracts have the same hash")
	}

	if _, err := BuildPlan(1, 1, more.Hash(), c, managedSettings()); err == nil || !strings.Contains(err.Error(), "not the hash of this contract") {
		t.Errorf("BuildPlan with another version's hash: error = %v, want a hash mismatch", err)
	}
}

func TestBuildPlanLabelsNamesAndOrder(t *testing.T) {
	for _, c := range []workflow.Contract{workflow.ExampleContract(), borrowingContract()} {
		p, err := BuildPlan(42, 5, c.Hash(), c, managedSettings())
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			LabelTeam: c.Team, LabelConnection: "42", LabelContractVersion: "5", LabelManagedBy: ManagedBy,
		}
		seen := map[string]bool{}
		var kinds []string
		for _, o := range p.Objects {
			kinds = append(kinds, o.Kind)
			key := o.Kind + " " + o.Ref()
			if seen[key] {
				t.Errorf("%s is in the plan twice", key)
			}
			seen[key] = true
			if errs := validation.IsDNS1123Subdomain(o.Name); len(errs) > 0 {
				t.Errorf("%s: name is not valid: %v", key, errs)
			}
			if o.Obj.GetName() != o.Name || o.Obj.GetNamespace() != o.Namespace || o.Obj.GetKind() != o.Kind {
				t.Errorf("%s: Object fields disagree with its object %s %s/%s", key, o.Obj.GetKind(), o.Obj.GetNamespace(), o.Obj.GetName())
			}
			labels := o.Obj.GetLabels()
			if o.Shared {
				if len(labels) != 1 || labels[LabelManagedBy] != ManagedBy || len(o.Obj.GetAnnotations()) != 0 {
					t.Errorf("%s is shared by all teams but carries %v %v", key, labels, o.Obj.GetAnnotations())
				}
				continue
			}
			if o.Team {
				// The team's ClusterQueue: every connection of the team
				// applies it, so it carries the team's labels and names the
				// connections it sums, never one connection's label,
				// version or hash (issue 31 item 6).
				if o.Kind != "ClusterQueue" || len(labels) != 2 || labels[LabelManagedBy] != ManagedBy || labels[LabelTeam] != c.Team ||
					o.Obj.GetAnnotations()[AnnotationTeamConnections] != "42" || o.Obj.GetAnnotations()[AnnotationContractHash] != "" {
					t.Errorf("%s is the team's but carries %v %v", key, labels, o.Obj.GetAnnotations())
				}
				continue
			}
			for k, v := range want {
				if labels[k] != v {
					t.Errorf("%s: label %s = %q, want %q", key, k, labels[k], v)
				}
			}
			if got := o.Obj.GetAnnotations()[AnnotationContractHash]; got != c.Hash() {
				t.Errorf("%s: contract hash annotation = %q, want %q", key, got, c.Hash())
			}
			clusterScoped := map[string]bool{"Namespace": true, "ClusterQueue": true, "ClusterRole": true, "ClusterRoleBinding": true}
			if !clusterScoped[o.Kind] && o.Namespace != p.Namespace {
				t.Errorf("%s: not in the team namespace %s", key, p.Namespace)
			}
		}
		// Guardrails before access: the namespace first, the bindings last,
		// the quota and the default-deny policy before any binding.
		if kinds[0] != "Namespace" {
			t.Errorf("first object is a %s, want the Namespace", kinds[0])
		}
		firstBinding := slices.Index(kinds, "RoleBinding")
		for _, k := range []string{"ResourceQuota", "LimitRange", "NetworkPolicy", "LocalQueue", "ClusterQueue", "ServiceAccount", "Role"} {
			if i := slices.Index(kinds, k); i < 0 || i > firstBinding {
				t.Errorf("%s at %d, want it before the first RoleBinding (%d): %v", k, i, firstBinding, kinds)
			}
		}
		if kinds[len(kinds)-1] != "RoleBinding" {
			t.Errorf("last object is a %s, want a RoleBinding", kinds[len(kinds)-1])
		}
	}
}

func find(t *testing.T, p Plan, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range p.Objects {
		if o.Kind == kind && o.Name == name {
			return o.Obj
		}
	}
	t.Fatalf("plan has no %s %s; it has %v", kind, name, p.Summary())
	return nil
}

func nested(t *testing.T, u *unstructured.Unstructured, path ...string) string {
	t.Helper()
	v, _, err := unstructured.NestedFieldNoCopy(u.Object, path...)
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(path, "."), err)
	}
	if v == nil {
		return "<nil>"
	}
	switch v := v.(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	}
	t.Fatalf("%s is a %T", strings.Join(path, "."), v)
	return ""
}

func TestResourceQuotaFromGuarantee(t *testing.T) {
	for _, tc := range []struct {
		name       string
		guaranteed []workflow.Capacity
		sharing    workflow.Sharing
		borrow     int
		want       map[string]string
	}{
		{"no borrowing is the guarantee", []workflow.Capacity{{InstanceType: "ml.p5.48xlarge", Count: 2}}, workflow.SharingLend, 0,
			map[string]string{"requests.nvidia.com/gpu": "16", "requests.cpu": "384", "requests.memory": "4Ti", "pods": "220"}},
		{"borrowing 50% adds half", []workflow.Capacity{{InstanceType: "ml.p5.48xlarge", Count: 2}}, workflow.SharingLendAndBorrow, 50,
			map[string]string{"requests.nvidia.com/gpu": "24", "requests.cpu": "576", "requests.memory": "6Ti", "pods": "330"}},
		{"borrowing 500% is six times", []workflow.Capacity{{InstanceType: "ml.g5.8xlarge", Count: 1}}, workflow.SharingBorrow, 500,
			map[string]string{"requests.nvidia.com/gpu": "6", "requests.cpu": "192", "requests.memory": "768Gi", "pods": "660"}},
		{"whole devices, rounded down", []workflow.Capacity{{InstanceType: "ml.g5.8xlarge", Count: 1}}, workflow.SharingBorrow, 50,
			map[string]string{"requests.nvidia.com/gpu": "1", "requests.cpu": "48", "requests.memory": "192Gi", "pods": "165"}},
		{"types add up, accelerators per resource", []workflow.Capacity{
			{InstanceType: "ml.g5.8xlarge", Count: 4}, {InstanceType: "ml.p4d.24xlarge", Count: 1}, {InstanceType: "ml.trn1.32xlarge", Count: 2}, {InstanceType: "ml.m5.xlarge", Count: 1},
		}, workflow.SharingNeither, 0,
			map[string]string{"requests.nvidia.com/gpu": "12", "requests.aws.amazon.com/neuron": "32", "requests.aws.amazon.com/neurondevice": "32",
				"requests.cpu": "484", "requests.memory": "2704Gi", "pods": "880"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := workflow.ExampleContract()
			c.Scheduling.Guaranteed, c.Scheduling.Sharing, c.Scheduling.BorrowLimitPercent = tc.guaranteed, tc.sharing, tc.borrow
			c = c.Normalize()
			p, err := BuildPlan(1, 1, c.Hash(), c, DefaultClusterSettings())
			if err != nil {
				t.Fatal(err)
			}
			q := find(t, p, "ResourceQuota", NameResourceQuota)
			hard, _, _ := unstructured.NestedStringMap(q.Object, "spec", "hard")
			if len(hard) != len(tc.want) {
				t.Errorf("quota %v, want %v", hard, tc.want)
			}
			for k, v := range tc.want {
				if hard[k] != v {
					t.Errorf("quota %s = %q, want %q (all: %v)", k, hard[k], v, hard)
				}
			}
		})
	}
}

// Trainium jobs ask for their devices as aws.amazon.com/neuron (the Neuron
// documentation) or aws.amazon.com/neurondevice (the HyperPod CLI, on
// HyperPod's 2.19 device plugin; see ResourceNeuronDevice): the portal's
// ClusterQueue covers both, each with the whole guarantee, and not
// neuroncore; the plan says so. A GPU-only guarantee covers neither.
func TestClusterQueueCoversBothNeuronDeviceNames(t *testing.T) {
	c := workflow.ExampleContract()
	c.Scheduling.Guaranteed = []workflow.Capacity{{InstanceType: "ml.trn1.32xlarge", Count: 2}, {InstanceType: "ml.p5.48xlarge", Count: 1}}
	c = c.Normalize()
	p, err := BuildPlan(1, 1, c.Hash(), c, managedSettings())
	if err != nil {
		t.Fatal(err)
	}
	cq := find(t, p, "ClusterQueue", "hyperpod-ns-red-clusterqueue")
	groups, _, _ := unstructured.NestedSlice(cq.Object, "spec", "resourceGroups")
	if len(groups) != 1 {
		t.Fatalf("resource groups = %v", groups)
	}
	g := groups[0].(map[string]any)
	covered := fmt.Sprint(g["coveredResources"])
	if covered != "[cpu memory aws.amazon.com/neuron aws.amazon.com/neurondevice nvidia.com/gpu]" {
		t.Errorf("covered resources = %s", covered)
	}
	quota := map[string]string{}
	for _, f := range g["flavors"].([]any) {
		fm := f.(map[string]any)
		for _, r := range fm["resources"].([]any) {
			rm := r.(map[string]any)
			quota[fm["name"].(string)+" "+rm["name"].(string)] = fmt.Sprint(rm["nominalQuota"])
		}
	}
	for k, want := range map[string]string{
		"ml.trn1.32xlarge aws.amazon.com/neuron": "32", "ml.trn1.32xlarge aws.amazon.com/neurondevice": "32", "ml.trn1.32xlarge nvidia.com/gpu": "0",
		"ml.p5.48xlarge aws.amazon.com/neuron": "0", "ml.p5.48xlarge aws.amazon.com/neurondevice": "0", "ml.p5.48xlarge nvidia.com/gpu": "8",
	} {
		if quota[k] != want {
			t.Errorf("nominal quota %s = %q, want %s (all %v)", k, quota[k], want, quota)
		}
	}
	if !strings.Contains(strings.Join(p.Warnings, "\n"), "both of their names") {
		t.Errorf("no warning about the two names: %v", p.Warnings)
	}

	c.Scheduling.Guaranteed = []workflow.Capacity{{InstanceType: "ml.p5.48xlarge", Count: 1}}
	c = c.Normalize()
	if p, err = BuildPlan(1, 1, c.Hash(), c, managedSettings()); err != nil {
		t.Fatal(err)
	}
	cq = find(t, p, "ClusterQueue", "hyperpod-ns-red-clusterqueue")
	groups, _, _ = unstructured.NestedSlice(cq.Object, "spec", "resourceGroups")
	if covered := fmt.Sprint(groups[0].(map[string]any)["coveredResources"]); covered != "[cpu memory nvidia.com/gpu]" || strings.Contains(strings.Join(p.Warnings, "\n"), "both of their names") {
		t.Errorf("GPU only: covered %s, warnings %v", covered, p.Warnings)
	}
}

func TestClusterQueueSharingAndPreemption(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		cohort                  string
		sharing                 workflow.Sharing
		borrow                  int
		preemption              workflow.Preemption
		borrowing, lending      string // of the GPU resource; "<nil>" when unset
		within, reclaim, warned string
	}{
		{"lend and borrow", "c", workflow.SharingLendAndBorrow, 50, workflow.PreemptLowerPriority, "8", "<nil>", "LowerPriority", "Any", ""},
		{"lend only", "c", workflow.SharingLend, 0, workflow.PreemptNever, "0", "<nil>", "Never", "Any", ""},
		{"borrow only", "c", workflow.SharingBorrow, 200, workflow.PreemptNever, "32", "0", "Never", "Never", ""},
		{"neither", "c", workflow.SharingNeither, 0, workflow.PreemptLowerPriority, "0", "0", "LowerPriority", "Never", ""},
		{"no cohort: no limits, a warning", "", workflow.SharingLendAndBorrow, 50, workflow.PreemptLowerPriority, "<nil>", "<nil>", "LowerPriority", "Never", "no Kueue cohort"},
		{"no cohort, neither: no warning", "", workflow.SharingNeither, 0, workflow.PreemptNever, "<nil>", "<nil>", "Never", "Never", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := workflow.ExampleContract()
			c.Scheduling.Sharing, c.Scheduling.BorrowLimitPercent, c.Scheduling.Preemption = tc.sharing, tc.borrow, tc.preemption
			s := managedSettings()
			s.Cohort = tc.cohort
			p, err := BuildPlan(1, 1, c.Hash(), c, s)
			if err != nil {
				t.Fatal(err)
			}
			cq := find(t, p, "ClusterQueue", "hyperpod-ns-red-clusterqueue")
			flavors, _, _ := unstructured.NestedSlice(cq.Object, "spec", "resourceGroups")
			rg := flavors[0].(map[string]any)
			if got := rg["coveredResources"]; !slices.Equal(toStrings(got), []string{"cpu", "memory", "nvidia.com/gpu"}) {
				t.Errorf("coveredResources = %v", got)
			}
			f := rg["flavors"].([]any)[0].(map[string]any)
			if f["name"] != "ml.p5.48xlarge" {
				t.Errorf("flavor %v, want ml.p5.48xlarge", f["name"])
			}
			gpu := &unstructured.Unstructured{Object: f["resources"].([]any)[2].(map[string]any)}
			if got := nested(t, gpu, "nominalQuota"); got != "16" {
				t.Errorf("GPU nominalQuota = %s, want 16", got)
			}
			if got := nested(t, gpu, "borrowingLimit"); got != tc.borrowing {
				t.Errorf("GPU borrowingLimit = %s, want %s", got, tc.borrowing)
			}
			if got := nested(t, gpu, "lendingLimit"); got != tc.lending {
				t.Errorf("GPU lendingLimit = %s, want %s", got, tc.lending)
			}
			if got := nested(t, cq, "spec", "preemption", "withinClusterQueue"); got != tc.within {
				t.Errorf("withinClusterQueue = %s, want %s", got, tc.within)
			}
			if got := nested(t, cq, "spec", "preemption", "reclaimWithinCohort"); got != tc.reclaim {
				t.Errorf("reclaimWithinCohort = %s, want %s", got, tc.reclaim)
			}
			// The team's namespaces, not this connection's alone (issue 31
			// item 6: the queue is the team's).
			if got := nested(t, cq, "spec", "namespaceSelector", "matchLabels", LabelTeam); got != c.Team {
				t.Errorf("namespaceSelector selects team %s, want %s", got, c.Team)
			}
			warned := strings.Join(p.Warnings, "\n")
			if tc.warned == "" && strings.Contains(warned, "cohort") || tc.warned != "" && !strings.Contains(warned, tc.warned) {
				t.Errorf("warnings %q, want one containing %q", warned, tc.warned)
			}
		})
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

func TestNetworkPoliciesFromEgress(t *testing.T) {
	c := borrowingContract()
	c.EgressAllowances = append(c.EgressAllowances, workflow.Egress{Destination: "2001:db8::/32", Ports: []int{443}, Reason: "IPv6 mirror."})
	c = c.Normalize()
	portal := DefaultClusterSettings()
	portal.ClusterQueueManagedByPortal = true // the contract names two namespaces
	p, err := BuildPlan(1, 1, c.Hash(), c, portal)
	if err != nil {
		t.Fatal(err)
	}
	var policies []string
	for _, o := range p.Objects {
		if o.Kind == "NetworkPolicy" {
			policies = append(policies, o.Name)
		}
	}
	want := []string{NamePolicyDefaultDeny, NamePolicySameNamespace, NamePolicyDNS, NamePolicyPodIdentity,
		NamePolicyTrainingOperator, NamePolicyObservability, "allow-egress-10-20-0-0-16", "allow-egress-2001-db8---32"}
	if !slices.Equal(policies, want) {
		t.Errorf("network policies %v, want %v", policies, want)
	}
	np := find(t, p, "NetworkPolicy", "allow-egress-10-20-0-0-16")
	rules, _, _ := unstructured.NestedSlice(np.Object, "spec", "egress")
	rule := &unstructured.Unstructured{Object: rules[0].(map[string]any)}
	ps, _, _ := unstructured.NestedSlice(rule.Object, "ports")
	if len(ps) != 2 || ps[0].(map[string]any)["port"] != int64(443) || ps[1].(map[string]any)["port"] != int64(5432) {
		t.Errorf("ports %v, want 443 and 5432", ps)
	}
	var dnsWarning bool
	for _, w := range p.Warnings {
		if strings.Contains(w, "huggingface.co") && strings.Contains(w, "NOT allowed") {
			dnsWarning = true
		}
	}
	if !dnsWarning {
		t.Errorf("no warning about the DNS destination huggingface.co: %q", p.Warnings)
	}
	for _, o := range p.Objects {
		if strings.Contains(o.Name, "huggingface") {
			t.Errorf("a DNS destination became an object: %s", o.Name)
		}
	}

	s := portal
	s.PodIdentityAgentCIDRs = []string{}
	p, err = BuildPlan(1, 1, c.Hash(), c, s)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range p.Objects {
		if o.Name == NamePolicyPodIdentity {
			t.Errorf("PodIdentityAgentCIDRs is empty but the plan allows the agent")
		}
	}
}

func TestBuildPlanNamespace(t *testing.T) {
	c := workflow.ExampleContract()
	c.Namespaces = nil
	s := DefaultClusterSettings()
	s.NamespacePrefix = "teams-"
	if _, err := BuildPlan(1, 1, c.Hash(), c, s); err == nil || !strings.Contains(err.Error(), "NamespacePrefix") {
		t.Errorf("a namespace prefix other than HyperPod's in HyperPod-managed mode: %v, want a settings error", err)
	}
	s.ClusterQueueManagedByPortal = true
	p, err := BuildPlan(1, 1, c.Hash(), c, s)
	if err != nil {
		t.Fatal(err)
	}
	if p.Namespace != "teams-red" {
		t.Errorf("namespace = %s, want prefix + team teams-red", p.Namespace)
	}
	if got := find(t, p, "LocalQueue", "teams-red-localqueue").GetNamespace(); got != "teams-red" {
		t.Errorf("LocalQueue in %s", got)
	}
	for _, tc := range []struct {
		namespaces       []string
		want, notPlanned string
	}{
		// Normalize sorts the set: "first" is alphabetical.
		{[]string{"red-serving", "red-batch"}, "red-batch", "red-serving"},
		// prefix + team wins when listed, wherever it sorts.
		{[]string{"teams-red", "a-red"}, "teams-red", "a-red"},
	} {
		c.Namespaces = tc.namespaces
		c := c.Normalize()
		p, err = BuildPlan(1, 1, c.Hash(), c, s)
		if err != nil {
			t.Fatal(err)
		}
		if p.Namespace != tc.want || len(p.Warnings) < 2 || !strings.Contains(p.Warnings[0], "namespaces ("+tc.notPlanned+") are not") {
			t.Errorf("namespaces %v: namespace %s, warnings %q: want %s and a warning naming %s", tc.namespaces, p.Namespace, p.Warnings, tc.want, tc.notPlanned)
		}
	}
}

// A system component's namespace is never planned (issue 10 item 14): the
// built-in names always, and the settings' reserved_namespaces, so that an
// approval or a job of a contract approved before the name was reserved
// is refused too.
func TestBuildPlanRefusesReservedNamespaces(t *testing.T) {
	s := DefaultClusterSettings()
	s.ClusterQueueManagedByPortal = true
	s.ReservedNamespaces = []string{"team-infra", "platform-*"}
	for _, ns := range []string{"kueue-system", "cert-manager", "aws-hyperpod", "amazon-cloudwatch", "kube-system", "jupyter-k8s-shared", "team-infra", "platform-ingress"} {
		c := workflow.ExampleContract()
		c.Namespaces = []string{ns}
		_, err := BuildPlan(1, 1, c.Hash(), c, s)
		if err == nil || !strings.Contains(err.Error(), "reserved for the cluster's own components") {
			t.Errorf("namespace %s: %v, want it refused as reserved", ns, err)
		}
	}
	c := workflow.ExampleContract()
	c.Namespaces = []string{"red-batch"}
	if _, err := BuildPlan(1, 1, c.Hash(), c, s); err != nil {
		t.Errorf("a team namespace: %v", err)
	}
}

func TestBuildPlanErrors(t *testing.T) {
	c := workflow.ExampleContract()
	unknown := workflow.ExampleContract()
	unknown.Scheduling.Guaranteed = []workflow.Capacity{{InstanceType: "ml.p9.96xlarge", Count: 1}}
	badFormat := DefaultClusterSettings()
	badFormat.KubernetesGroups.ViewerGroupFormat = "viewers"
	badQuantity := DefaultClusterSettings()
	badQuantity.DefaultLimits.LimitMemory = "lots"
	// Kueue's CRD schema alone accepts a negative nominalQuota (its webhook
	// refuses it), so the settings must never let one through.
	negative := DefaultClusterSettings()
	negative.Accelerators = map[string]ResourcesPerInstance{"ml.p5.48xlarge": {Accelerators: -8, CPU: 192, MemoryGiB: 2048}}
	for _, tc := range []struct {
		name    string
		connID  int64
		c       workflow.Contract
		s       ClusterSettings
		wantErr string
	}{
		{"instance type without figures", 1, unknown, DefaultClusterSettings(), "ml.p9.96xlarge is not in the cluster settings"},
		{"no connection", 0, c, DefaultClusterSettings(), "connection id 0"},
		{"group format without team", 1, c, badFormat, "ViewerGroupFormat"},
		{"default limit not a quantity", 1, c, badQuantity, "LimitMemory"},
		{"negative figures", 1, c, negative, "must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := BuildPlan(tc.connID, 1, tc.c.Hash(), tc.c, tc.s)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// In HyperPod-managed mode (the default) the team namespace and LocalQueue
// are HyperPod's: the plan adds only the portal's labels to the namespace,
// checks the queue without applying it, refuses any other namespace, and
// revocation leaves both.
func TestHyperPodOwnsNamespaceAndQueue(t *testing.T) {
	c := workflow.ExampleContract()
	p, err := BuildPlan(1, 1, c.Hash(), c, DefaultClusterSettings())
	if err != nil {
		t.Fatal(err)
	}
	owners := map[string]Owner{}
	for _, o := range p.Objects {
		owners[o.Kind] = o.Owner
	}
	if owners["Namespace"] != OwnerHyperPod || owners["LocalQueue"] != OwnerHyperPodChecked || owners["ResourceQuota"] != OwnerPortal {
		t.Errorf("owners %v: want the namespace and the queue HyperPod's, the rest the portal's", owners)
	}
	if strings.Contains(p.YAML(), "kind: LocalQueue") {
		t.Error("the plan's YAML applies HyperPod's LocalQueue")
	}
	ns := find(t, p, "Namespace", "hyperpod-ns-red")
	if len(ns.Object) != 3 || ns.GetLabels()[LabelConnection] != "1" { // apiVersion, kind, metadata: labels only
		t.Errorf("namespace object %v: want only the portal's metadata", ns.Object)
	}

	other := c
	other.Namespaces = []string{"hyperpod-ns-red", "red-batch"}
	other = other.Normalize()
	_, err = BuildPlan(1, 1, other.Hash(), other, DefaultClusterSettings())
	var reason ErrHyperPodNamespace
	if !errors.As(err, &reason) || !strings.Contains(err.Error(), "red-batch") || !strings.Contains(err.Error(), "owns the team namespace hyperpod-ns-red") {
		t.Errorf("another namespace in HyperPod-managed mode: %v, want refused with the reason", err)
	}

	for _, mode := range []RevokeMode{RevokeLock, RevokeDelete} {
		for _, st := range RevocationPlan(p, mode) {
			o := st.Object
			if (o.Kind == "Namespace" || o.Kind == "LocalQueue") && (st.Action == ActionDelete || st.Action == ActionDeleteAll) {
				t.Errorf("%s revocation deletes HyperPod's %s %s", mode, o.Kind, o.Ref())
			}
			if o.Kind == "LocalQueue" && st.Action != ActionLeave {
				t.Errorf("%s revocation runs %s on HyperPod's queue", mode, st.Name())
			}
		}
	}
}

// A plan's YAML is sigs.k8s.io/yaml's, object by object, whether the
// object's YAML was remembered (objectYAML) or not: the second rendering
// of the same plan, and of objects that print alike but differ in type
// ("1" and 1), are exactly yaml.Marshal's.
func TestPlanYAMLIsYAMLMarshal(t *testing.T) {
	p, err := BuildPlan(7, 1, workflow.ExampleContract().Normalize().Hash(), workflow.ExampleContract(), DefaultClusterSettings())
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, o := range p.Objects {
		if o.Owner == OwnerHyperPodChecked {
			continue
		}
		y, err := yaml.Marshal(o.Obj.Object)
		if err != nil {
			t.Fatal(err)
		}
		want.WriteString("---\n")
		want.Write(y)
	}
	for i := range 2 {
		if got := p.YAML(); got != want.String() {
			t.Fatalf("rendering %d of the plan differs from yaml.Marshal's:\n%s\nwant:\n%s", i+1, got, want.String())
		}
	}
	for _, obj := range []map[string]any{{"a": "1"}, {"a": int64(1)}, {"a": "1"}, {"a": 1.5}, {"a": int64(1)}} {
		want, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := objectYAML(obj); err != nil || string(got) != string(want) {
			t.Errorf("objectYAML(%#v) = %q, %v; want %q", obj, got, err, want)
		}
	}
}
