package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/support/awstest"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

func withAWS(o *Options) {
	o.DryRun = true
	o.Cluster = provision.DefaultClusterSettings()
	o.Cluster.AWS = awsprov.DevSettings()
	o.Cluster.AWS.TeamGroups = map[string][]string{"red": {"team-red-members", "team-red-owners"}}
}

func TestPlanListsTheAWSCalls(t *testing.T) {
	h := newHarness(t, false, withAWS)
	owner := h.signIn("owner.red")
	f := formValues(formFromContract(workflow.ExampleContract()))
	f.Set("intent", "submit")
	h.postAs(owner, "/teams/red/connections", f)
	_, body := h.get(h.signIn("admin").c, "/connections/1")
	before := strings.Index(body, `data-testid="plan-aws-before"`)
	objects := strings.Index(body, `data-testid="plan-summary"`)
	after := strings.Index(body, `data-testid="plan-aws-after"`)
	if before < 0 || objects < before || after < objects {
		t.Fatalf("plan sections out of order or missing: AWS before %d, objects %d, AWS after %d", before, objects, after)
	}
	for _, want := range []string{
		`data-testid="aws-call-compute-quota"`, "red-quota", "ml.p5.48xlarge×2", "LendAndBorrow (borrow up to 50%)", "CreateComputeQuota",
		`data-testid="aws-call-studio-domain"`, "red-studio", "vpc-0a1b2c3d4e5f60718",
		`data-testid="aws-call-studio-assignment"`, "team-red-owners",
		`data-testid="aws-call-access-entry"`, "arn:aws:iam::111122223333:role/red-project", "AmazonSagemakerHyperpodTrainingPolicy", "namespace hyperpod-ns-red", "taskVisibility",
		`data-testid="aws-call-pod-identity"`, "hyperpod-ns-red/red-workloads", "arn:aws:iam::111122223333:role/red-workload",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the plan lacks %q", want)
		}
	}
}

// Borrow-only sharing has no HyperPod strategy: with the AWS side on, the
// plan page says so and the approval is refused before any job exists.
func TestBorrowOnlyIsRefusedBeforeApproval(t *testing.T) {
	h := newHarness(t, false, withAWS)
	owner := h.signIn("owner.red")
	c := workflow.ExampleContract()
	c.Scheduling.Sharing = workflow.SharingBorrow
	f := formValues(formFromContract(c))
	f.Set("intent", "submit")
	h.postAs(owner, "/teams/red/connections", f)
	admin := h.signIn("admin")
	_, body := h.get(admin.c, "/connections/1")
	if !strings.Contains(body, `data-testid="plan-error"`) || !strings.Contains(body, "no borrow-only strategy") {
		t.Errorf("the plan page does not flag borrow-only sharing")
	}
	v, err := h.db.Version(context.Background(), 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	resp, body := h.postAs(admin, "/connections/1/decide", url.Values{"decision": {"approve"}, "reason": {"looks fine"}, "version": {"1"}, "hash": {v.Hash}, "plan_hash": {h.planHash(1, 1)}})
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "cannot be provisioned on this cluster") {
		t.Errorf("approving a borrow-only contract = %d, want 409 with the reason", resp.StatusCode)
	}
	if jobs, _ := h.db.JobsFor(context.Background(), 1); len(jobs) != 0 {
		t.Errorf("a job was queued: %+v", jobs)
	}
	if conn, _ := h.db.Connection(context.Background(), 1); conn.State != workflow.StateSubmitted {
		t.Errorf("state %s, want still submitted", conn.State)
	}
}

func TestConnectionPageListsAWSResources(t *testing.T) {
	h := newHarness(t, false, withAWS)
	owner, admin := h.signIn("owner.red"), h.signIn("admin")
	approvedConnection(t, h, owner, admin)
	ctx := context.Background()
	j, ok, err := h.db.ClaimJob(ctx, "w", time.Now(), time.Minute)
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	arn := "arn:aws:sagemaker:us-east-1:111122223333:compute-quota/q00000000001"
	if err := h.db.RecordAWSResource(ctx, j.ID, "w", workflow.AWSRecord{ConnectionID: 1, Kind: "compute-quota", Name: "red-quota",
		ResourceID: "q00000000001", ARN: arn, Version: 2, Action: "updated"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := h.db.RecordAWSResource(ctx, j.ID, "someone-else", workflow.AWSRecord{ConnectionID: 1, Kind: "pod-identity", Name: "x", Action: "created"}, time.Now()); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("a write without the lease = %v, want ErrLeaseLost", err)
	}
	for name, s := range map[string]session{"owner.red": owner, "member.red": h.signIn("member.red"), "admin": admin} {
		_, body := h.get(s.c, "/connections/1")
		if !strings.Contains(body, `data-testid="aws-resource-compute-quota"`) || !strings.Contains(body, arn) || !strings.Contains(body, "q00000000001") {
			t.Errorf("%s does not see the recorded compute quota", name)
		}
	}
	if resp, body := h.get(h.signIn("owner.blue").c, "/connections/1"); resp.StatusCode != http.StatusNotFound || strings.Contains(body, arn) {
		t.Errorf("another team's owner gets %d", resp.StatusCode)
	}
}

// Another team cannot name red's roles: the form says which field and why,
// and keeps what was typed.
func TestRolesOfAnotherConnectionAreRefused(t *testing.T) {
	h := newHarness(t, false)
	owner, admin := h.signIn("owner.red"), h.signIn("admin")
	approvedConnection(t, h, owner, admin)
	c := workflow.ExampleContract()
	c.Team, c.Namespaces = "blue", []string{"hyperpod-ns-blue"}
	c.ProjectRoleARN = "arn:aws:iam::111122223333:role/blue-project"
	c.WorkloadRoleARN = "arn:aws:iam::111122223333:role/blue-workload" // access role: still red's
	f := formValues(formFromContract(c))
	f.Set("intent", "submit")
	resp, body := h.postAs(h.signIn("owner.blue"), "/teams/blue/connections", f)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(fieldError(body, "access_role_arn"), "is not available") ||
		!strings.Contains(body, "role/blue-project") {
		t.Errorf("naming red's access role = %d; want the field error with the input kept", resp.StatusCode)
	}
	if strings.Contains(body, `data-testid="error-project_role_arn"`) {
		t.Error("blue's own project role was refused")
	}
}

// Before approval, each AWS call says what it would do on AWS as it is
// now; one that would stop (a role whose access entry someone else made)
// is a warning the approver reads before deciding.
func TestPlanPreviewsTheAWSCalls(t *testing.T) {
	c := workflow.ExampleContract()
	st := awstest.NewStack(t, c.EKSClusterName, "team-red-members", "team-red-owners")
	cfg := awstest.Config(1)
	runner := &awsprov.Runner{Clients: awsprov.Clients{
		SageMaker: sagemaker.NewFromConfig(cfg, func(o *sagemaker.Options) { o.BaseEndpoint = aws.String(st.SageMaker.URL()) }),
		EKS:       eks.NewFromConfig(cfg, func(o *eks.Options) { o.BaseEndpoint = aws.String(st.EKS.URL()) }),
		IAM:       iam.NewFromConfig(cfg, func(o *iam.Options) { o.BaseEndpoint = aws.String(st.IAM.URL()) }),
	}}
	// The Studio execution role may describe the clusters but not reach
	// the Kubernetes API.
	st.IAM.AddRole(c.ProjectRoleARN, "sagemaker:DescribeCluster", "eks:DescribeCluster", "eks:DescribeAddon")
	runner.Clients.Domains = runner.Clients.SageMaker.(*sagemaker.Client)
	// The platform admins' role already has an entry, made by hand.
	if _, err := awsprov.EnsureAccessEntry(context.Background(), runner.Clients.EKS, awsprov.AccessEntry{
		ClusterName: c.EKSClusterName, PrincipalARN: c.AccessRoleARN, KubernetesGroups: []string{"platform-admins"}}); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, false, withAWS, func(o *Options) { o.AWSPreview = provision.AWSPreviews{Lookup: runner} })
	owner := h.signIn("owner.red")
	f := formValues(formFromContract(c))
	f.Set("intent", "submit")
	h.postAs(owner, "/teams/red/connections", f)
	_, body := h.get(h.signIn("admin").c, "/connections/1")
	for _, want := range []string{`data-testid="aws-now"`, ">create<", ">would stop<", "does not take over access it did not grant", "checked when it runs",
		// The call that would stop is also a warning above the plan.
		"On AWS now, ", " would stop the job: ",
		// The Studio execution role's missing IAM actions.
		"The Studio execution role " + c.ProjectRoleARN + " is not allowed eks:AccessKubernetesApi on arn:aws:eks:us-east-1:111122223333:cluster/" + c.EKSClusterName,
		// What each grant lets the team see.
		`data-testid="aws-grant-AmazonSagemakerHyperpodUserClusterPolicy"`, "across the whole cluster", "in hyperpod-ns-red only"} {
		if !strings.Contains(body, want) {
			t.Errorf("the previewed plan lacks %q", want)
		}
	}
	if st.Creates()["access-entry"] != 1 || st.EKS.Count("UpdateAccessEntry") != 0 {
		t.Error("previewing changed something on AWS")
	}
}

// With a team role prefix in the AWS settings, the form refuses roles
// outside it, beside the field, and keeps what was typed.
func TestTeamRolePrefixRefusesOtherRolesOnTheForm(t *testing.T) {
	h := newHarness(t, false, withAWS, func(o *Options) { o.Cluster.AWS.TeamRolePrefix = "/hyperpod-teams/" })
	c := workflow.ExampleContract()
	c.ProjectRoleARN = "arn:aws:iam::111122223333:role/hyperpod-teams/red-project"
	c.AccessRoleARN = "arn:aws:iam::111122223333:role/hyperpod-teams/red-access"
	f := formValues(formFromContract(c)) // the workload role stays outside
	f.Set("intent", "submit")
	resp, body := h.postAs(h.signIn("owner.red"), "/teams/red/connections", f)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="error-workload_role_arn"`) ||
		!strings.Contains(body, "must be a team role under role/hyperpod-teams/") || !strings.Contains(body, "role/red-workload") {
		t.Errorf("a workload role outside the prefix = %d; want the field error with the input kept", resp.StatusCode)
	}
	if strings.Contains(body, `data-testid="error-project_role_arn"`) || strings.Contains(body, `data-testid="error-access_role_arn"`) {
		t.Error("roles under the prefix were refused")
	}
}

// A request filed meanwhile (here straight into the store, as a race would)
// that names the same role makes the approval refuse, inside its
// transaction.
func TestApprovalRefusesARoleClaimedMeanwhile(t *testing.T) {
	h := newHarness(t, false)
	owner, admin := h.signIn("owner.red"), h.signIn("admin")
	f := formValues(formFromContract(workflow.ExampleContract()))
	f.Set("intent", "submit")
	h.postAs(owner, "/teams/red/connections", f)
	if resp, _ := h.postAs(admin, "/admin/inventory", url.Values{"cluster": {"shared-hp"}, "instance_type": {"ml.p5.48xlarge"}, "count": {"8"}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("set inventory = %d", resp.StatusCode)
	}
	blue := workflow.ExampleContractFor("blue")
	blue.AccessRoleARN = workflow.ExampleContract().AccessRoleARN
	u, err := h.db.RecordLogin(context.Background(), "https://idp.example.test", "blue", "owner.blue@example.test", "Blue", nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	bc, err := h.db.CreateConnection(context.Background(), blue, workflow.Actor{ID: u.ID, Email: u.Email}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// Only a submitted request holds claims (a draft holds none).
	if _, err := h.db.Transition(context.Background(), bc.ID, workflow.EventSubmit, workflow.Actor{ID: u.ID, Email: u.Email}, "", store.Expect{}, time.Now()); err != nil {
		t.Fatal(err)
	}
	v, _ := h.db.Version(context.Background(), 1, 1)
	resp, body := h.postAs(admin, "/connections/1/decide", url.Values{"decision": {"approve"}, "reason": {"ok"}, "version": {"1"}, "hash": {v.Hash}, "plan_hash": {h.planHash(1, 1)}})
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "Not approved: role arn:aws:iam::111122223333:role/red-access is already named by another connection") {
		t.Errorf("approve = %d; want 409 naming the role", resp.StatusCode)
	}
	if conn, _ := h.db.Connection(context.Background(), 1); conn.State != workflow.StateSubmitted {
		t.Errorf("state %s, want submitted", conn.State)
	}
}

// The owner's view of the same request makes no AWS lookups.
func TestPlanPreviewIsForApproversOnly(t *testing.T) {
	c := workflow.ExampleContract()
	st := awstest.NewStack(t, c.EKSClusterName)
	sm := sagemaker.NewFromConfig(awstest.Config(1), func(o *sagemaker.Options) { o.BaseEndpoint = aws.String(st.SageMaker.URL()) })
	runner := &awsprov.Runner{Clients: awsprov.Clients{SageMaker: sm, Domains: sm,
		EKS: eks.NewFromConfig(awstest.Config(1), func(o *eks.Options) { o.BaseEndpoint = aws.String(st.EKS.URL()) })}}
	h := newHarness(t, false, withAWS, func(o *Options) { o.AWSPreview = provision.AWSPreviews{Lookup: runner} })
	owner := h.signIn("owner.red")
	f := formValues(formFromContract(c))
	f.Set("intent", "submit")
	h.postAs(owner, "/teams/red/connections", f)
	_, body := h.get(owner.c, "/connections/1")
	if strings.Contains(body, `data-testid="aws-now"`) || st.SageMaker.Count("ListComputeQuotas")+st.EKS.Count("DescribeAccessEntry") != 0 {
		t.Error("the owner's view looked up AWS")
	}
	_, body = h.get(h.signIn("admin").c, "/connections/1")
	if !strings.Contains(body, `data-testid="aws-now"`) || st.SageMaker.Count("ListComputeQuotas") == 0 {
		t.Error("the approver's view did not look up AWS")
	}
}

// TestApprovalRefusesARoleThatMayManageTheCluster: with the lifecycle
// check on (IAM's policy simulation against the local strict IAM
// endpoint), approval is refused, 409 naming the role and the action,
// while the access role may delete the cluster; nothing is recorded. Once
// the role holds only what a project role needs, the same approval goes
// through.
func TestApprovalRefusesARoleThatMayManageTheCluster(t *testing.T) {
	c := workflow.ExampleContract()
	st := awstest.NewStack(t, c.EKSClusterName, "team-red-members", "team-red-owners")
	client := iam.NewFromConfig(awstest.Config(1), func(o *iam.Options) { o.BaseEndpoint = aws.String(st.IAM.URL()) })
	clusterARN := "arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdef012345"
	st.IAM.AddRole(c.ProjectRoleARN, "sagemaker:DescribeCluster", "eks:DescribeCluster")
	st.IAM.AddRole(c.AccessRoleARN, "eks:DescribeCluster", "sagemaker:DeleteCluster", "sagemaker:UpdateComputeQuota")
	h := newHarness(t, false, func(o *Options) {
		o.LifecycleCheck = provision.AWSLifecycleCheck{IAM: client, ClusterARN: clusterARN}
	})
	owner, admin := h.signIn("owner.red"), h.signIn("admin")
	f := formValues(formFromContract(c))
	f.Set("intent", "submit")
	h.postAs(owner, "/teams/red/connections", f)
	if resp, _ := h.postAs(admin, "/admin/inventory", url.Values{"cluster": {"shared-hp"}, "instance_type": {"ml.p5.48xlarge"}, "count": {"8"}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("set inventory = %d", resp.StatusCode)
	}
	v, _ := h.db.Version(context.Background(), 1, 1)
	approve := url.Values{"decision": {"approve"}, "reason": {"ok"}, "version": {"1"}, "hash": {v.Hash}, "plan_hash": {h.planHash(1, 1)}}
	resp, body := h.postAs(admin, "/connections/1/decide", approve)
	for _, want := range []string{c.AccessRoleARN + " may sagemaker:DeleteCluster", c.AccessRoleARN + " may sagemaker:UpdateComputeQuota"} {
		if resp.StatusCode != http.StatusConflict || !strings.Contains(body, want) {
			t.Errorf("approve = %d; want 409 naming %q", resp.StatusCode, want)
		}
	}
	if strings.Contains(body, c.ProjectRoleARN+" may") {
		t.Error("the project role, allowed no lifecycle action, is named")
	}
	if conn, _ := h.db.Connection(context.Background(), 1); conn.State != workflow.StateSubmitted {
		t.Errorf("state %s, want submitted", conn.State)
	}
	// Every action the simulation asked about is one of the cited list.
	for _, a := range st.IAM.Simulated() {
		if !slices.Contains(awsprov.ClusterLifecycleActions(), a) {
			t.Errorf("simulated %s, not a cluster lifecycle action", a)
		}
	}
	st.IAM.RemoveRole(c.AccessRoleARN)
	st.IAM.AddRole(c.AccessRoleARN, "eks:DescribeCluster")
	// A project role IAM does not have (NoSuchEntity) cannot be checked: a
	// role made after the approval could be given any permission, so the
	// approval waits for it (409, naming it), and nothing is recorded.
	st.IAM.RemoveRole(c.ProjectRoleARN)
	if resp, body := h.postAs(admin, "/connections/1/decide", approve); resp.StatusCode != http.StatusConflict || !strings.Contains(body, "IAM has no role "+c.ProjectRoleARN) {
		t.Errorf("approve with the project role missing = %d, want 409 naming it\n%.400s", resp.StatusCode, body)
	}
	if conn, _ := h.db.Connection(context.Background(), 1); conn.State != workflow.StateSubmitted {
		t.Errorf("state %s after a refused approval, want submitted", conn.State)
	}
	st.IAM.AddRole(c.ProjectRoleARN, "eks:DescribeCluster")
	if resp, body := h.postAs(admin, "/connections/1/decide", approve); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("approve with harmless roles = %d, want 303\n%.400s", resp.StatusCode, body)
	}
}
