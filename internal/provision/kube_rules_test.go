package provision

import (
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TestPriorityClassKueueNames: the Kueue class of a configured priority
// class is name+"-priority" (HyperPod task governance's naming), in both
// ClusterQueue modes: the portal creates its WorkloadPriorityClasses under
// that name, and the plan's warning names the label value a job would use.
func TestPriorityClassKueueNames(t *testing.T) {
	s := DefaultClusterSettings()
	if got := s.KueuePriorityClass("training"); got != "training-priority" {
		t.Errorf("KueuePriorityClass(training) = %q, want training-priority", got)
	}
	c := borrowingContract() // names experiment (defined) and research (not)
	p, err := BuildPlan(1, 1, c.Hash(), c, managedSettings())
	if err != nil {
		t.Fatal(err)
	}
	var wpcs []string
	for _, o := range p.Objects {
		if o.Kind == "WorkloadPriorityClass" {
			wpcs = append(wpcs, o.Name)
		}
	}
	want := []string{"inference-priority", "interactive-priority", "training-priority", "fine-tuning-priority", "experiment-priority"}
	if strings.Join(wpcs, " ") != strings.Join(want, " ") {
		t.Errorf("WorkloadPriorityClasses = %v, want %v", wpcs, want)
	}
	if !strings.Contains(strings.Join(p.Warnings, "\n"), "kueue.x-k8s.io/priority-class: research-priority") {
		t.Errorf("warnings do not name the Kueue class of the undefined class research: %q", p.Warnings)
	}
}

// TestPriorityClassNameCap: a configured class is a scheduler-config class
// name: a DNS label of at most workflow.MaxPriorityClassLen characters.
func TestPriorityClassNameCap(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{strings.Repeat("a", workflow.MaxPriorityClassLen), true},
		{strings.Repeat("a", workflow.MaxPriorityClassLen+1), false},
		{"high.priority", false},
		{"High", false},
	} {
		s := DefaultClusterSettings()
		s.PriorityClasses = []PriorityClass{{Name: tc.name, Value: 1}}
		err := s.Check()
		if (err == nil) != tc.ok {
			t.Errorf("Check with class %q = %v, want ok=%t", tc.name, err, tc.ok)
		}
	}
}

// TestContainerDefaultsSetNoLimit: the LimitRange sets default requests
// only (a default limit below a container's request makes the pod
// invalid), and the settings refuse a default limit.
func TestContainerDefaultsSetNoLimit(t *testing.T) {
	c := workflow.ExampleContract()
	p, err := BuildPlan(1, 1, c.Hash(), c, DefaultClusterSettings())
	if err != nil {
		t.Fatal(err)
	}
	lr := find(t, p, "LimitRange", NameLimitRange)
	items, _, _ := unstructured.NestedSlice(lr.Object, "spec", "limits")
	if len(items) != 1 {
		t.Fatalf("LimitRange items %v", items)
	}
	item := items[0].(map[string]any)
	if _, ok := item["default"]; ok {
		t.Errorf("LimitRange sets default limits %v: a container requesting more without a limit would be rejected", item["default"])
	}
	if _, ok := item["defaultRequest"]; !ok {
		t.Errorf("LimitRange sets no default requests: the quota (requests.cpu, requests.memory) would reject containers that name none")
	}
	for _, set := range []func(*ContainerDefaults){
		func(d *ContainerDefaults) { d.LimitMemory = "4Gi" },
		func(d *ContainerDefaults) { d.LimitCPU = "2" },
	} {
		s := DefaultClusterSettings()
		set(&s.DefaultLimits)
		if err := s.Check(); err == nil || !strings.Contains(err.Error(), "must be empty") {
			t.Errorf("settings with a default limit %+v: Check = %v, want refused", s.DefaultLimits, err)
		}
	}
}

func roleRules(t *testing.T, p Plan, kind, name string) []rbacv1.PolicyRule {
	t.Helper()
	var out struct {
		Rules []rbacv1.PolicyRule `json:"rules"`
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(find(t, p, kind, name).Object, &out); err != nil {
		t.Fatal(err)
	}
	return out.Rules
}

// allows reports whether rules allow verb on group/resource (named name,
// when the rule lists resourceNames).
func allows(rules []rbacv1.PolicyRule, verb, group, res, name string) bool {
	for _, r := range rules {
		if slices.Contains(r.Verbs, verb) && slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, res) &&
			(len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, name)) {
			return true
		}
	}
	return false
}

// TestRolesCoverHyperPodJobs: submitters run HyperPodPyTorchJobs and exec
// into their pods, viewers (and submitters, bound to the viewer Role too)
// see them and read logs, and nobody creates bare pods.
func TestRolesCoverHyperPodJobs(t *testing.T) {
	c := workflow.ExampleContract()
	p, err := BuildPlan(1, 1, c.Hash(), c, DefaultClusterSettings())
	if err != nil {
		t.Fatal(err)
	}
	view, submit := roleRules(t, p, "Role", NameViewerRole), roleRules(t, p, "Role", NameSubmitterRole)
	for _, v := range []string{"create", "delete", "patch"} {
		if !allows(submit, v, "sagemaker.amazonaws.com", "hyperpodpytorchjobs", "") {
			t.Errorf("submitters cannot %s hyperpodpytorchjobs.sagemaker.amazonaws.com", v)
		}
	}
	for _, v := range []string{"get", "list", "watch"} {
		if !allows(view, v, "sagemaker.amazonaws.com", "hyperpodpytorchjobs", "") {
			t.Errorf("viewers cannot %s hyperpodpytorchjobs.sagemaker.amazonaws.com", v)
		}
	}
	if !allows(submit, "create", "", "pods/exec", "") {
		t.Error("submitters cannot exec into their pods")
	}
	if !allows(view, "get", "", "pods/log", "") {
		t.Error("viewers cannot read pod logs")
	}
	if allows(submit, "create", "", "pods", "") || allows(view, "create", "", "pods", "") {
		t.Error("a Role lets the team create bare pods, which bypass the queue")
	}
	if allows(view, "create", "", "pods/exec", "") {
		t.Error("viewers can exec into pods")
	}
}

// TestQueueReaderIsTheTeamsOwn: the ClusterRole names the team's
// namespace and ClusterQueue only, and binds the submitter group.
func TestQueueReaderIsTheTeamsOwn(t *testing.T) {
	c := workflow.ExampleContract()
	p, err := BuildPlan(1, 1, c.Hash(), c, DefaultClusterSettings())
	if err != nil {
		t.Fatal(err)
	}
	rules := roleRules(t, p, "ClusterRole", QueueReaderName("hyperpod-ns-red"))
	if !allows(rules, "get", "", "namespaces", "hyperpod-ns-red") || allows(rules, "get", "", "namespaces", "hyperpod-ns-blue") {
		t.Errorf("queue reader rules %v: want get on namespace hyperpod-ns-red only", rules)
	}
	if !allows(rules, "get", "kueue.x-k8s.io", "clusterqueues", "hyperpod-ns-red-clusterqueue") || allows(rules, "get", "kueue.x-k8s.io", "clusterqueues", "hyperpod-ns-blue-clusterqueue") {
		t.Errorf("queue reader rules %v: want get on ClusterQueue hyperpod-ns-red-clusterqueue only", rules)
	}
	if allows(rules, "list", "", "namespaces", "") || allows(rules, "list", "kueue.x-k8s.io", "clusterqueues", "") {
		t.Errorf("queue reader rules %v list namespaces or ClusterQueues: every team's would show", rules)
	}
	crb := find(t, p, "ClusterRoleBinding", QueueReaderName("hyperpod-ns-red"))
	subjects, _, _ := unstructured.NestedSlice(crb.Object, "subjects")
	if len(subjects) != 1 || subjects[0].(map[string]any)["name"] != "team-red-submitters" {
		t.Errorf("queue reader bound to %v, want group team-red-submitters", subjects)
	}
	if crb.GetLabels()[LabelConnection] != "1" {
		t.Errorf("queue reader binding labels %v: revocation would not recognise it", crb.GetLabels())
	}
}

// TestBarePodPoliciesAreNamed: with the AWS side on, the plan says which
// EKS access policies let a role create bare pods.
func TestBarePodPoliciesAreNamed(t *testing.T) {
	c := workflow.ExampleContract()
	s := awsSettings()
	ns := []string{awsprov.TeamNamespace}
	s.AWS.Access.SubmitterPolicies = []awsprov.AccessGrant{{Policy: awsprov.PolicyHyperPodTraining, Scope: awsprov.AccessScopeNamespace, Namespaces: ns}}
	s.AWS.Access.StudioPolicies = []awsprov.AccessGrant{{Policy: awsprov.PolicyHyperPodSpace, Scope: awsprov.AccessScopeNamespace, Namespaces: ns}}
	p, err := BuildPlan(1, 1, c.Hash(), c, s)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(p.Warnings, "\n")
	if !strings.Contains(all, "the team's access role gets the EKS access policy AmazonSagemakerHyperpodTrainingPolicy (in hyperpod-ns-red), which lets it create bare pods") {
		t.Errorf("warnings do not name the Training policy's bare pods: %q", p.Warnings)
	}
	if strings.Contains(all, "Studio execution role") {
		t.Errorf("the Space policy only reads pods, but a warning names the Studio role: %q", p.Warnings)
	}
	plain, _ := BuildPlan(1, 1, c.Hash(), c, DefaultClusterSettings())
	if strings.Contains(strings.Join(plain.Warnings, "\n"), "bare pods") {
		t.Errorf("no AWS side, no access policy, but a bare-pod warning: %q", plain.Warnings)
	}
}

// TestNetworkPoliciesLetHyperPodIn: default deny would cut off the training
// operator and the metrics collectors; named policies let them in.
func TestNetworkPoliciesLetHyperPodIn(t *testing.T) {
	c := workflow.ExampleContract()
	p, err := BuildPlan(1, 1, c.Hash(), c, DefaultClusterSettings())
	if err != nil {
		t.Fatal(err)
	}
	op := find(t, p, "NetworkPolicy", NamePolicyTrainingOperator)
	for _, dir := range [][]string{{"ingress", "from"}, {"egress", "to"}} {
		rules, _, _ := unstructured.NestedSlice(op.Object, "spec", dir[0])
		if len(rules) != 1 {
			t.Fatalf("%s rules %v", dir[0], rules)
		}
		peers, _, _ := unstructured.NestedSlice(rules[0].(map[string]any), dir[1])
		ns, _, _ := unstructured.NestedString(peers[0].(map[string]any), "namespaceSelector", "matchLabels", "kubernetes.io/metadata.name")
		if ns != "aws-hyperpod" {
			t.Errorf("training operator %s peer namespace %q, want aws-hyperpod", dir[0], ns)
		}
	}
	obs := find(t, p, "NetworkPolicy", NamePolicyObservability)
	rules, _, _ := unstructured.NestedSlice(obs.Object, "spec", "ingress")
	peers, _, _ := unstructured.NestedSlice(rules[0].(map[string]any), "from")
	var got []string
	for _, peer := range peers {
		ns, _, _ := unstructured.NestedString(peer.(map[string]any), "namespaceSelector", "matchLabels", "kubernetes.io/metadata.name")
		got = append(got, ns)
	}
	if !slices.Equal(got, []string{"hyperpod-observability", "amazon-cloudwatch"}) {
		t.Errorf("observability ingress from %v, want hyperpod-observability and amazon-cloudwatch", got)
	}

	s := DefaultClusterSettings()
	s.ObservabilityNamespaces = []string{}
	p, err = BuildPlan(1, 1, c.Hash(), c, s)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(p.Objects, func(o Object) bool { return o.Name == NamePolicyObservability }) {
		t.Error("ObservabilityNamespaces is empty but the plan lets collectors in")
	}
	s.ObservabilityNamespaces = []string{"Not_A_Namespace"}
	if err := s.Check(); err == nil {
		t.Error("an invalid observability namespace passes the settings check")
	}
}
