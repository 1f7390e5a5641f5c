package provision

import (
	"slices"
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

func awsSettings() ClusterSettings {
	s := DefaultClusterSettings()
	s.AWS = awsprov.DevSettings()
	s.AWS.TeamGroups = map[string][]string{"red": {"team-red-members"}}
	return s
}

func TestPlanWithAWSCalls(t *testing.T) {
	c := workflow.ExampleContract()
	plain, err := BuildPlan(7, 3, c.Hash(), c, DefaultClusterSettings())
	if err != nil {
		t.Fatal(err)
	}
	p, err := BuildPlan(7, 3, c.Hash(), c, awsSettings())
	if err != nil {
		t.Fatal(err)
	}
	if len(plain.AWS) != 0 || len(p.AWS) != 6 {
		t.Fatalf("AWS calls: %d without settings (want 0), %d with (want 6)", len(plain.AWS), len(p.AWS))
	}
	if p.YAML() != plain.YAML() || p.Hash() == plain.Hash() {
		t.Error("AWS calls must leave the Kubernetes objects alone and change the plan's hash")
	}
	// The approval pins the AWS half too: another VPC is another plan.
	other := awsSettings()
	other.AWS.Studio.VpcID = "vpc-0a1b2c3d4e5f69999"
	q, err := BuildPlan(7, 3, c.Hash(), c, other)
	if err != nil || q.Hash() == p.Hash() {
		t.Errorf("changing the domain's VPC kept the hash (%v)", err)
	}
	// The Pod Identity association names the ServiceAccount the plan makes.
	pi := p.AWS[len(p.AWS)-1].PodIdentity
	if pi == nil || !slices.ContainsFunc(p.Objects, func(o Object) bool {
		return o.Kind == "ServiceAccount" && o.Name == pi.ServiceAccount && o.Namespace == pi.Namespace
	}) {
		t.Errorf("pod identity %+v names no ServiceAccount of the plan", pi)
	}

	steps := ApplySteps(p)
	names := stepNames(steps)
	if !strings.HasPrefix(names[0], "SageMaker compute quota red-quota") {
		t.Errorf("first step %q, want the compute quota (HyperPod makes the ClusterQueue the LocalQueue points at)", names[0])
	}
	lastObject := slices.IndexFunc(steps, func(s Step) bool { return s.AWS != nil && s.AWS.Phase == awsprov.Access })
	if lastObject < 0 || slices.ContainsFunc(steps[lastObject:], func(s Step) bool { return s.AWS == nil }) {
		t.Errorf("AWS access steps must come after every Kubernetes object: %q", names)
	}
	if len(steps) != len(p.Objects)+len(p.AWS) {
		t.Errorf("%d steps for %d objects and %d calls", len(steps), len(p.Objects), len(p.AWS))
	}
	if !strings.Contains(steps[0].Detail, "ml.p5.48xlarge×2") {
		t.Errorf("the dry-run record of the quota step says %q", steps[0].Detail)
	}
	if StepsHash(steps) == StepsHash(ApplySteps(plain)) {
		t.Error("StepsHash ignores the AWS steps")
	}
}

func TestRevocationPlanWithAWSCalls(t *testing.T) {
	c := workflow.ExampleContract()
	p, err := BuildPlan(7, 3, c.Hash(), c, awsSettings())
	if err != nil {
		t.Fatal(err)
	}
	names := stepNames(RevocationPlan(p, RevokeLock))
	want := []string{
		"remove EKS pod identity hyperpod-ns-red/red-workloads",
		"remove EKS access entry " + c.AccessRoleARN,
		"remove EKS access entry " + c.ProjectRoleARN,
		"delete ClusterRoleBinding hyperpod-portal-hyperpod-ns-red-queue-reader",
		"delete RoleBinding hyperpod-ns-red/team-submitters",
	}
	if !slices.Equal(names[:5], want) {
		t.Errorf("revocation starts with %q, want access removed first: %q", names[:5], want)
	}
	tail := []string{
		"lock Namespace hyperpod-ns-red",
		"delete ConfigMap hyperpod-ns-red/hyperpod-portal-contract",
		"remove SageMaker compute quota red-quota",
		"remove IAM Identity Center studio assignment team-red-members",
		"keep SageMaker studio domain red-studio",
	}
	if got := names[len(names)-len(tail):]; !slices.Equal(got, tail) {
		t.Errorf("revocation ends with %q, want %q", got, tail)
	}
}
