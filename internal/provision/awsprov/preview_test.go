package awsprov

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/datazone"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/identitystore"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/ssoadmin"

	"github.com/hyperpod-governance/portal/internal/support/awstest"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

func stackRunner(t *testing.T, st *awstest.Stack) *Runner {
	cfg := awstest.Config(1)
	base := func(c *awstest.Core) *string { return aws.String(c.URL()) }
	sm := sagemaker.NewFromConfig(cfg, func(o *sagemaker.Options) { o.BaseEndpoint = base(st.SageMaker.Core) })
	return &Runner{
		Clients: Clients{
			SageMaker: sm, Domains: sm, Scheduler: sm,
			SSOAdmin:      ssoadmin.NewFromConfig(cfg, func(o *ssoadmin.Options) { o.BaseEndpoint = base(st.SSOAdmin.Core) }),
			IdentityStore: identitystore.NewFromConfig(cfg, func(o *identitystore.Options) { o.BaseEndpoint = base(st.IdentityStore.Core) }),
			EKS:           eks.NewFromConfig(cfg, func(o *eks.Options) { o.BaseEndpoint = base(st.EKS.Core) }),
			DataZone:      datazone.NewFromConfig(cfg, func(o *datazone.Options) { o.BaseEndpoint = base(st.DataZone.Core) }),
			IAM:           iam.NewFromConfig(cfg, func(o *iam.Options) { o.BaseEndpoint = base(st.IAM.Core) }),
		},
		Poll: PollConfig{Interval: time.Second, Timeout: time.Minute, Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }},
	}
}

func previews(t *testing.T, r *Runner, calls []Call) map[string]Preview {
	out := map[string]Preview{}
	for _, c := range calls {
		out[string(c.Kind)+" "+c.Name] = r.Preview(context.Background(), c)
	}
	return out
}

func TestPreviewSaysWhatEachCallWouldDo(t *testing.T) {
	c := workflow.ExampleContract()
	st := awstest.NewStack(t, c.EKSClusterName, "team-red-members", "team-red-owners")
	r := stackRunner(t, st)
	s := planSettings()
	s.IdentityStoreID = st.IdentityStore.StoreID()
	calls, _, err := PlanFor(c, planTarget(), s)
	if err != nil {
		t.Fatal(err)
	}
	seeded := st.Creates()
	for name, p := range previews(t, r, calls) {
		want := PreviewCreate
		if strings.HasPrefix(name, "studio-assignment") {
			want = PreviewLater
		}
		if p.State != want {
			t.Errorf("before anything exists, %s: %+v, want %s", name, p, want)
		}
	}
	if writes := st.Creates(); len(writes) != len(seeded) {
		t.Fatalf("previewing created %v (seeded %v)", writes, seeded)
	}
	for _, call := range calls {
		if _, err := r.Ensure(context.Background(), call); err != nil {
			t.Fatalf("ensure %s: %v", call.Title(), err)
		}
	}
	for name, p := range previews(t, r, calls) {
		if p.State != PreviewUnchanged && p.State != PreviewLater {
			t.Errorf("after provisioning, %s: %+v, want unchanged", name, p)
		}
	}

	// A changed contract: the quota and the pod identity would be updated.
	c2 := c
	c2.Scheduling.Guaranteed = []workflow.Capacity{{InstanceType: "ml.p5.48xlarge", Count: 3}}
	c2.WorkloadRoleARN = "arn:aws:iam::111122223333:role/red-workload-v2"
	calls2, _, err := PlanFor(c2, planTarget(), s)
	if err != nil {
		t.Fatal(err)
	}
	got := previews(t, r, calls2)
	if got["compute-quota red-quota"].State != PreviewUpdate || got["pod-identity hyperpod-ns-red/red-workloads"].State != PreviewUpdate {
		t.Errorf("after a change: %+v", got)
	}

	// Another connection's plan naming red's roles would stop.
	other := planTarget()
	other.ConnectionID = 8
	calls3, _, _ := PlanFor(c, other, s)
	for _, call := range calls3 {
		if call.Kind == KindAccessEntry {
			if p := r.Preview(context.Background(), call); p.State != PreviewStops || !strings.Contains(p.Detail, "connection 7") {
				t.Errorf("connection 8 previewing red's entry %s: %+v", call.Name, p)
			}
		}
	}

	// A lookup the portal may not make says so.
	st.EKS.Deny("DescribeAccessEntry", -1)
	for _, call := range calls {
		if call.Kind == KindAccessEntry {
			if p := r.Preview(context.Background(), call); p.State != PreviewUnknown || !strings.Contains(p.Detail, "not authorized") {
				t.Errorf("denied lookup: %+v", p)
			}
		}
	}
}

func TestPreviewWarnsWhenTheStudioExecutionRoleLacksStudioActions(t *testing.T) {
	c := workflow.ExampleContract()
	st := awstest.NewStack(t, c.EKSClusterName, "team-red-members", "team-red-owners")
	r := stackRunner(t, st)
	s := planSettings()
	s.IdentityStoreID = st.IdentityStore.StoreID()
	calls, _, err := PlanFor(c, planTarget(), s)
	if err != nil {
		t.Fatal(err)
	}
	var studio, access Call
	for _, call := range calls {
		switch {
		case call.Kind == KindAccessEntry && call.Name == c.ProjectRoleARN:
			studio = call
		case call.Kind == KindAccessEntry && call.Name == c.AccessRoleARN:
			access = call
		}
	}
	if studio.StudioRole == nil || access.StudioRole != nil {
		t.Fatalf("only the Studio execution role's entry is checked: studio %+v, access %+v", studio.StudioRole, access.StudioRole)
	}
	if want := "arn:aws:eks:us-east-1:111122223333:cluster/" + c.EKSClusterName; studio.StudioRole.EKSClusterARN != want {
		t.Errorf("EKS cluster ARN %s, want %s", studio.StudioRole.EKSClusterARN, want)
	}

	// The role exists and may only describe the HyperPod cluster.
	st.IAM.AddRole(c.ProjectRoleARN, "sagemaker:DescribeCluster")
	p := r.Preview(context.Background(), studio)
	if p.State != PreviewCreate || len(p.Warnings) != 1 {
		t.Fatalf("preview %+v: want create and one warning", p)
	}
	for _, a := range StudioActions() {
		if strings.Contains(p.Warnings[0], a+" on") != (a != "sagemaker:DescribeCluster") {
			t.Errorf("warning %q: %s named wrongly", p.Warnings[0], a)
		}
	}
	if p := r.Preview(context.Background(), access); len(p.Warnings) != 0 {
		t.Errorf("the access role is not Studio's: %+v", p.Warnings)
	}

	// With every action allowed, no warning.
	st.IAM.AddRole(c.ProjectRoleARN, StudioActions()...)
	if p := r.Preview(context.Background(), studio); len(p.Warnings) != 0 {
		t.Errorf("all actions allowed: %+v", p.Warnings)
	}
	if n := st.IAM.Count("SimulatePrincipalPolicy"); n != 6 {
		t.Errorf("%d simulations, want 3 per preview", n)
	}

	// A failed lookup is a warning, not an error: the preview still says
	// what the call would do.
	st.IAM.Deny("SimulatePrincipalPolicy", -1)
	p = r.Preview(context.Background(), studio)
	if p.State != PreviewCreate || len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "Could not check") || !strings.Contains(p.Warnings[0], "AccessDenied") {
		t.Errorf("denied simulation: %+v", p)
	}
}

func TestCheckStudioRoleAgainstTheIAMEndpoint(t *testing.T) {
	m := awstest.NewIAM(t)
	cfg := awstest.Config(1)
	api := iam.NewFromConfig(cfg, func(o *iam.Options) { o.BaseEndpoint = aws.String(m.URL()) })
	role := StudioRole{RoleARN: "arn:aws:iam::111122223333:role/red-project",
		HyperPodClusterARN: "arn:aws:sagemaker:us-east-1:111122223333:cluster/a1b2c3d4e5f6",
		EKSClusterARN:      "arn:aws:eks:us-east-1:111122223333:cluster/shared"}
	// An unknown role is IAM's NoSuchEntity.
	if _, err := CheckStudioRole(context.Background(), api, role); err == nil || !strings.Contains(err.Error(), "NoSuchEntity") {
		t.Fatalf("unknown role: %v", err)
	}
	m.AddRole(role.RoleARN, "eks:DescribeCluster", "eks:DescribeAddon")
	missing, err := CheckStudioRole(context.Background(), api, role)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"sagemaker:DescribeCluster on " + role.HyperPodClusterARN,
		"eks:AccessKubernetesApi on " + role.EKSClusterARN,
		"eks:MutateViaKubernetesApi on " + role.EKSClusterARN,
	}
	if strings.Join(missing, "|") != strings.Join(want, "|") {
		t.Errorf("missing %q, want %q", missing, want)
	}
	// The endpoint is as strict as IAM: no action names, a bad ARN.
	for _, in := range []*iam.SimulatePrincipalPolicyInput{
		{PolicySourceArn: aws.String(role.RoleARN), ActionNames: []string{}},
		{PolicySourceArn: aws.String("red-project"), ActionNames: []string{"eks:DescribeCluster"}},
		{PolicySourceArn: aws.String(role.RoleARN), ActionNames: []string{"DescribeCluster"}},
	} {
		if _, err := api.SimulatePrincipalPolicy(context.Background(), in); err == nil || !strings.Contains(err.Error(), "InvalidInput") {
			t.Errorf("%+v: %v, want InvalidInput", in, err)
		}
	}
	// Pages: MaxItems 1 answers one result with a marker; the check
	// follows markers.
	out, err := api.SimulatePrincipalPolicy(context.Background(), &iam.SimulatePrincipalPolicyInput{
		PolicySourceArn: aws.String(role.RoleARN), ActionNames: []string{"eks:DescribeCluster", "eks:DescribeAddon"}, MaxItems: aws.Int32(1)})
	if err != nil || len(out.EvaluationResults) != 1 || !out.IsTruncated || aws.ToString(out.Marker) == "" {
		t.Fatalf("first page: %+v, %v", out, err)
	}
	if d := out.EvaluationResults[0]; aws.ToString(d.EvalActionName) != "eks:DescribeCluster" || d.EvalDecision != "allowed" || aws.ToString(d.EvalResourceName) != "*" {
		t.Errorf("first result: %+v", d)
	}
}

// The default Studio policies reach EKS with the scopes AWS's Studio setup
// gives them, and the EKS endpoint accepts each scope (it refuses namespaces
// on a cluster scope and a namespace scope without any, as EKS does).
func TestStudioAccessPoliciesAreAssociatedWithTheirScopes(t *testing.T) {
	c := workflow.ExampleContract()
	st := awstest.NewStack(t, c.EKSClusterName, "team-red-members", "team-red-owners")
	r := stackRunner(t, st)
	s := planSettings()
	s.IdentityStoreID = st.IdentityStore.StoreID()
	calls, _, err := PlanFor(c, planTarget(), s)
	if err != nil {
		t.Fatal(err)
	}
	for _, call := range calls {
		if call.Kind == KindAccessEntry && call.Name == c.ProjectRoleARN {
			if _, err := r.Ensure(context.Background(), call); err != nil {
				t.Fatal(err)
			}
		}
	}
	var got []string
	for _, p := range st.EKS.Policies(c.EKSClusterName, c.ProjectRoleARN) {
		got = append(got, strings.TrimPrefix(p.PolicyARN, "arn:aws:eks::aws:cluster-access-policy/")+"="+string(p.Scope)+":"+strings.Join(p.Namespaces, ","))
	}
	want := []string{
		"AmazonSagemakerHyperpodInferencePolicy=namespace:hyperpod-ns-red",
		"AmazonSagemakerHyperpodSpacePolicy=namespace:hyperpod-ns-red",
		"AmazonSagemakerHyperpodSpaceTemplatePolicy=namespace:jupyter-k8s-shared",
		"AmazonSagemakerHyperpodTrainingPolicy=namespace:hyperpod-ns-red",
		"AmazonSagemakerHyperpodUserClusterPolicy=cluster:",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("associated %q\nwant %q", got, want)
	}
}
