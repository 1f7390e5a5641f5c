package awsprov

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	smithy "github.com/aws/smithy-go"

	"github.com/hyperpod-governance/portal/internal/support/awstest"
)

const (
	testEKSCluster = "hyperpod-eks-ml"
	teamRoleARN    = "arn:aws:iam::" + awstest.Account + ":role/portal/team-ml-research"
	otherRoleARN   = "arn:aws:iam::" + awstest.Account + ":role/portal/team-ml-research-v2"
	policyPrefix   = "arn:aws:eks::aws:cluster-access-policy/"
	trainingPolicy = policyPrefix + "AmazonSagemakerHyperpodTrainingPolicy"
	userPolicy     = policyPrefix + "AmazonSagemakerHyperpodUserClusterPolicy"
	viewPolicy     = policyPrefix + "AmazonEKSViewPolicy"
)

// eksClient is a real EKS client pointed at the test endpoint, with
// maxAttempts SDK attempts per call and no backoff.
func eksClient(e *awstest.EKS, maxAttempts int) *eks.Client {
	return eks.NewFromConfig(awstest.Config(maxAttempts), func(o *eks.Options) { o.BaseEndpoint = aws.String(e.URL()) })
}

func newEKS(t *testing.T) *awstest.EKS {
	e := awstest.NewEKS(t)
	e.AddCluster(testEKSCluster)
	return e
}

func teamEntry() AccessEntry {
	return AccessEntry{
		ClusterName:      testEKSCluster,
		PrincipalARN:     teamRoleARN,
		KubernetesGroups: []string{"ml-research-users", "hyperpod-scientists"},
		Policies: []AccessPolicy{
			{PolicyARN: trainingPolicy, Namespaces: []string{"hyperpod-ns-ml-research"}},
			{PolicyARN: userPolicy},
		},
		Tags: map[string]string{TagTeam: "ml-research", TagConnection: "7"},
	}
}

func ensureEntry(t *testing.T, api EKSAPI, want AccessEntry) Result {
	t.Helper()
	res, err := EnsureAccessEntry(context.Background(), api, want)
	if err != nil {
		t.Fatalf("EnsureAccessEntry: %v", err)
	}
	return res
}

// policies renders the endpoint's stored policies as "name=scope:ns,ns".
func policies(e *awstest.EKS, principal string) []string {
	var out []string
	for _, p := range e.Policies(testEKSCluster, principal) {
		out = append(out, strings.TrimPrefix(p.PolicyARN, policyPrefix)+"="+string(p.Scope)+":"+strings.Join(p.Namespaces, ","))
	}
	return out
}

func TestEnsureAccessEntryCreatesThenIsUnchanged(t *testing.T) {
	e := newEKS(t)
	api := eksClient(e, 1)
	res := ensureEntry(t, api, teamEntry())
	if res.Action != Created || res.ID != teamRoleARN ||
		!strings.HasPrefix(res.ARN, "arn:aws:eks:"+awstest.Region+":"+awstest.Account+":access-entry/"+testEKSCluster+"/role/") {
		t.Errorf("result = %+v", res)
	}
	a := e.AccessEntry(testEKSCluster, teamRoleARN)
	if a.ARN != res.ARN || a.Type != "STANDARD" || !slices.Equal(a.KubernetesGroups, teamEntry().KubernetesGroups) ||
		a.Tags[TagTeam] != "ml-research" || a.Tags[TagConnection] != "7" {
		t.Errorf("stored entry = %+v", a)
	}
	want := []string{
		"AmazonSagemakerHyperpodTrainingPolicy=namespace:hyperpod-ns-ml-research",
		"AmazonSagemakerHyperpodUserClusterPolicy=cluster:",
	}
	if got := policies(e, teamRoleARN); !slices.Equal(got, want) {
		t.Errorf("stored policies = %q, want %q", got, want)
	}

	// Groups in another order, policies in another order: nothing to do.
	again := teamEntry()
	slices.Reverse(again.KubernetesGroups)
	slices.Reverse(again.Policies)
	if res2 := ensureEntry(t, api, again); res2.Action != Unchanged || res2.ARN != res.ARN || res2.ID != teamRoleARN {
		t.Errorf("second ensure = %+v, want unchanged %s", res2, res.ARN)
	}
	for op, n := range map[string]int{
		"CreateAccessEntry": 1, "UpdateAccessEntry": 0, "AssociateAccessPolicy": 2, "DisassociateAccessPolicy": 0,
		"created:access-entry": 1, "created:access-policy": 2, "updated:access-policy": 0,
	} {
		if got := e.Count(op); got != n {
			t.Errorf("after two runs %s = %d, want %d", op, got, n)
		}
	}
}

func TestEnsureAccessEntryUpdatesGroups(t *testing.T) {
	e := newEKS(t)
	api := eksClient(e, 1)
	first := ensureEntry(t, api, teamEntry())

	want := teamEntry()
	want.KubernetesGroups = []string{"ml-research-users", "ml-research-admins"}
	if res := ensureEntry(t, api, want); res.Action != Updated || res.ARN != first.ARN {
		t.Errorf("update = %+v, want updated %s", res, first.ARN)
	}
	if got := e.AccessEntry(testEKSCluster, teamRoleARN).KubernetesGroups; !slices.Equal(got, want.KubernetesGroups) {
		t.Errorf("stored groups = %q, want %q", got, want.KubernetesGroups)
	}

	// No groups: the update clears them rather than leaving them alone.
	want.KubernetesGroups = nil
	if res := ensureEntry(t, api, want); res.Action != Updated {
		t.Errorf("clearing groups = %+v, want updated", res)
	}
	if got := e.AccessEntry(testEKSCluster, teamRoleARN).KubernetesGroups; len(got) != 0 {
		t.Errorf("stored groups = %q, want none", got)
	}
	if res := ensureEntry(t, api, want); res.Action != Unchanged {
		t.Errorf("ensure with no groups again = %+v, want unchanged", res)
	}
	if e.Count("updated:access-entry") != 2 || e.Count("created:access-entry") != 1 || e.Count("AssociateAccessPolicy") != 2 {
		t.Errorf("updated %d, created %d, associated %d; want 2, 1, 2",
			e.Count("updated:access-entry"), e.Count("created:access-entry"), e.Count("AssociateAccessPolicy"))
	}
}

func TestEnsureAccessEntryReconcilesPolicies(t *testing.T) {
	e := newEKS(t)
	api := eksClient(e, 1)
	ctx := context.Background()
	ensureEntry(t, api, teamEntry())

	// Someone associates a policy by hand; the portal owns the entry.
	if _, err := api.AssociateAccessPolicy(ctx, &eks.AssociateAccessPolicyInput{
		ClusterName: aws.String(testEKSCluster), PrincipalArn: aws.String(teamRoleARN), PolicyArn: aws.String(viewPolicy),
		AccessScope: &ekstypes.AccessScope{Type: ekstypes.AccessScopeTypeCluster},
	}); err != nil {
		t.Fatal(err)
	}

	// The training policy gains a namespace; the cluster policy is dropped.
	want := teamEntry()
	want.Policies = []AccessPolicy{{PolicyARN: trainingPolicy, Namespaces: []string{"hyperpod-ns-ml-research", "ml-research-*"}}}
	if res := ensureEntry(t, api, want); res.Action != Updated {
		t.Errorf("ensure = %+v, want updated", res)
	}
	if got := policies(e, teamRoleARN); !slices.Equal(got, []string{"AmazonSagemakerHyperpodTrainingPolicy=namespace:hyperpod-ns-ml-research,ml-research-*"}) {
		t.Errorf("stored policies = %q", got)
	}
	if e.Count("updated:access-policy") != 1 || e.Count("deleted:access-policy") != 2 || e.Count("UpdateAccessEntry") != 0 {
		t.Errorf("rescoped %d, disassociated %d, entry updates %d; want 1, 2, 0",
			e.Count("updated:access-policy"), e.Count("deleted:access-policy"), e.Count("UpdateAccessEntry"))
	}

	// Namespace scope to cluster scope.
	want.Policies = []AccessPolicy{{PolicyARN: trainingPolicy}}
	ensureEntry(t, api, want)
	if got := policies(e, teamRoleARN); !slices.Equal(got, []string{"AmazonSagemakerHyperpodTrainingPolicy=cluster:"}) {
		t.Errorf("stored policies = %q", got)
	}

	// Namespaces compare as a set.
	want.Policies = []AccessPolicy{{PolicyARN: trainingPolicy, Namespaces: []string{"b", "a"}}}
	ensureEntry(t, api, want)
	want.Policies[0].Namespaces = []string{"a", "b", "a"}
	if res := ensureEntry(t, api, want); res.Action != Unchanged {
		t.Errorf("same namespaces in another order = %+v, want unchanged", res)
	}

	// A policy listed twice is the caller's mistake, caught before any call.
	calls := e.Count("ListAssociatedAccessPolicies")
	want.Policies = append(want.Policies, AccessPolicy{PolicyARN: trainingPolicy})
	if _, err := EnsureAccessEntry(ctx, api, want); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("duplicate policy: err = %v", err)
	}
	if e.Count("ListAssociatedAccessPolicies") != calls {
		t.Errorf("a duplicate policy still made calls")
	}
}

func TestEnsureAccessEntrySurvivesThrottlingStorm(t *testing.T) {
	t.Run("SDK retries", func(t *testing.T) {
		e := newEKS(t)
		e.Throttle(3)
		res := ensureEntry(t, eksClient(e, 5), teamEntry())
		if res.Action != Created || e.Count("created:access-entry") != 1 || e.AccessEntries(testEKSCluster) != 1 {
			t.Errorf("result %+v, created %d, stored %d; want exactly one", res, e.Count("created:access-entry"), e.AccessEntries(testEKSCluster))
		}
		if e.Count("DescribeAccessEntry") != 4 {
			t.Errorf("describe called %d times, want 3 throttled + 1", e.Count("DescribeAccessEntry"))
		}
		if len(policies(e, teamRoleARN)) != 2 {
			t.Errorf("policies = %q", policies(e, teamRoleARN))
		}
	})
	t.Run("job retries", func(t *testing.T) {
		// Without SDK retries each throttled call fails the step with a
		// transient error, and the job runs it again.
		e := newEKS(t)
		e.Throttle(3)
		api := eksClient(e, 1)
		var res Result
		var err error
		runs := 0
		for runs = 1; runs <= 10; runs++ {
			res, err = EnsureAccessEntry(context.Background(), api, teamEntry())
			if err == nil {
				break
			}
			if IsPermanent(err) || !strings.Contains(err.Error(), "ThrottlingException") {
				t.Fatalf("run %d: %v, want a transient throttling error", runs, err)
			}
		}
		if err != nil || runs != 4 || res.Action != Created || e.Count("created:access-entry") != 1 {
			t.Errorf("after %d runs: %+v, %v, created %d; want created once on run 4", runs, res, err, e.Count("created:access-entry"))
		}
	})
	t.Run("throttled after the create", func(t *testing.T) {
		// The run fails between creating the entry and associating its
		// policies; the rerun finds the entry and finishes the policies.
		e := newEKS(t)
		api := throttleAfterCreate{eksClient(e, 1), e}
		_, err := EnsureAccessEntry(context.Background(), api, teamEntry())
		if err == nil || IsPermanent(err) || !strings.Contains(err.Error(), "list access policies") {
			t.Fatalf("first run: %v, want a transient error listing policies", err)
		}
		if e.AccessEntries(testEKSCluster) != 1 || len(policies(e, teamRoleARN)) != 0 {
			t.Fatalf("after the failed run: %d entries, policies %q", e.AccessEntries(testEKSCluster), policies(e, teamRoleARN))
		}
		res := ensureEntry(t, api, teamEntry())
		if res.Action != Updated || e.Count("CreateAccessEntry") != 1 || e.AccessEntries(testEKSCluster) != 1 || len(policies(e, teamRoleARN)) != 2 {
			t.Errorf("rerun = %+v, creates %d, entries %d, policies %q; want updated, 1, 1, both",
				res, e.Count("CreateAccessEntry"), e.AccessEntries(testEKSCluster), policies(e, teamRoleARN))
		}
	})
}

// throttleAfterCreate throttles the call that follows each successful
// CreateAccessEntry.
type throttleAfterCreate struct {
	EKSAPI
	e *awstest.EKS
}

func (a throttleAfterCreate) CreateAccessEntry(ctx context.Context, in *eks.CreateAccessEntryInput, opts ...func(*eks.Options)) (*eks.CreateAccessEntryOutput, error) {
	out, err := a.EKSAPI.CreateAccessEntry(ctx, in, opts...)
	if err == nil {
		a.e.Throttle(1)
	}
	return out, err
}

func TestEnsureAccessEntryLostCreateResponseCreatesOnce(t *testing.T) {
	e := newEKS(t)
	e.Set(func(e *awstest.EKS) { e.LoseCreateResponses = 1 })
	res := ensureEntry(t, eksClient(e, 3), teamEntry())
	if e.Count("CreateAccessEntry") != 2 || e.Count("created:access-entry") != 1 || e.AccessEntries(testEKSCluster) != 1 {
		t.Errorf("create calls %d, created %d, stored %d; want 2, 1, 1",
			e.Count("CreateAccessEntry"), e.Count("created:access-entry"), e.AccessEntries(testEKSCluster))
	}
	if res.Action != Created || res.ARN != e.AccessEntry(testEKSCluster, teamRoleARN).ARN {
		t.Errorf("result = %+v", res)
	}
	if len(policies(e, teamRoleARN)) != 2 {
		t.Errorf("policies after the conflict = %q, want both", policies(e, teamRoleARN))
	}
}

func TestEnsureAccessEntryAccessDeniedIsPermanent(t *testing.T) {
	e := newEKS(t)
	e.Deny("CreateAccessEntry", -1)
	_, err := EnsureAccessEntry(context.Background(), eksClient(e, 3), teamEntry())
	var denied *ekstypes.AccessDeniedException
	if !errors.As(err, &denied) || !IsPermanent(err) {
		t.Fatalf("err = %v, want a permanent AccessDeniedException", err)
	}
	if !strings.Contains(err.Error(), "is not authorized to perform: eks:CreateAccessEntry") {
		t.Errorf("err = %v: lacks the service's message", err)
	}
	if e.Count("CreateAccessEntry") != 1 || e.AccessEntries(testEKSCluster) != 0 {
		t.Errorf("create called %d times, stored %d; a permanent error is not retried", e.Count("CreateAccessEntry"), e.AccessEntries(testEKSCluster))
	}
}

func TestEnsureAccessEntryRejectedIsPermanent(t *testing.T) {
	t.Run("system group", func(t *testing.T) {
		e := newEKS(t)
		want := teamEntry()
		want.KubernetesGroups = []string{"ml-research-users", "system:masters"}
		_, err := EnsureAccessEntry(context.Background(), eksClient(e, 3), want)
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "InvalidParameterException" || !IsPermanent(err) {
			t.Fatalf("err = %v, want a permanent InvalidParameterException", err)
		}
		if !strings.Contains(err.Error(), "system:masters") {
			t.Errorf("err = %v: lacks the service's message", err)
		}
		if e.Count("CreateAccessEntry") != 1 || e.AccessEntries(testEKSCluster) != 0 {
			t.Errorf("create called %d times, stored %d", e.Count("CreateAccessEntry"), e.AccessEntries(testEKSCluster))
		}
	})
	t.Run("not an access policy", func(t *testing.T) {
		e := newEKS(t)
		want := teamEntry()
		want.Policies = append(want.Policies, AccessPolicy{PolicyARN: "arn:aws:iam::aws:policy/AdministratorAccess"})
		_, err := EnsureAccessEntry(context.Background(), eksClient(e, 3), want)
		var bad *ekstypes.InvalidParameterException
		if !errors.As(err, &bad) || !IsPermanent(err) || !strings.Contains(err.Error(), "AdministratorAccess") {
			t.Fatalf("err = %v, want a permanent InvalidParameterException naming the policy", err)
		}
	})
	t.Run("access entries not enabled", func(t *testing.T) {
		e := newEKS(t)
		e.SetAuthenticationMode(testEKSCluster, "CONFIG_MAP")
		_, err := EnsureAccessEntry(context.Background(), eksClient(e, 3), teamEntry())
		var bad *ekstypes.InvalidRequestException
		if !errors.As(err, &bad) || !IsPermanent(err) || !strings.Contains(err.Error(), "authentication mode") {
			t.Fatalf("err = %v, want a permanent InvalidRequestException about the authentication mode", err)
		}
	})
}

func TestEKSUnknownClusterIsPermanent(t *testing.T) {
	e := newEKS(t)
	api := eksClient(e, 3)
	const hyperpodName = "ml-research-hyperpod" // the HyperPod cluster's name, not the EKS one
	want := teamEntry()
	want.ClusterName = hyperpodName
	_, err := EnsureAccessEntry(context.Background(), api, want)
	var nf *ClusterNotFoundError
	if !errors.As(err, &nf) || nf.Cluster != hyperpodName || !IsPermanent(err) {
		t.Fatalf("access entry: err = %v, want a permanent ClusterNotFoundError", err)
	}
	if msg := err.Error(); !strings.Contains(msg, `"`+hyperpodName+`" not found`) || !strings.Contains(msg, "HyperPod") ||
		!strings.Contains(msg, "No cluster found for name: "+hyperpodName) {
		t.Errorf("message %q does not say which cluster is missing and why", msg)
	}
	if e.Count("CreateAccessEntry") != 1 {
		t.Errorf("create called %d times, want 1", e.Count("CreateAccessEntry"))
	}

	_, err = EnsurePodIdentity(context.Background(), api, PodIdentity{ClusterName: hyperpodName, Namespace: "ml-research", ServiceAccount: "trainer", RoleARN: teamRoleARN})
	if !errors.As(err, &nf) || !IsPermanent(err) || e.Count("CreatePodIdentityAssociation") != 0 {
		t.Errorf("pod identity: err = %v, creates %d; want a permanent ClusterNotFoundError before any create", err, e.Count("CreatePodIdentityAssociation"))
	}

	// Deleting from a cluster that does not exist has nothing to do.
	if err := DeleteAccessEntry(context.Background(), api, hyperpodName, teamRoleARN, ""); err != nil {
		t.Errorf("delete access entry: %v", err)
	}
	if err := DeletePodIdentity(context.Background(), api, hyperpodName, "ml-research", "trainer"); err != nil {
		t.Errorf("delete pod identity: %v", err)
	}
}

func TestDeleteAccessEntryIsIdempotent(t *testing.T) {
	e := newEKS(t)
	api := eksClient(e, 1)
	ctx := context.Background()
	if err := DeleteAccessEntry(ctx, api, testEKSCluster, teamRoleARN, ""); err != nil {
		t.Fatalf("delete before create: %v", err)
	}
	first := ensureEntry(t, api, teamEntry())
	for i := range 2 {
		if err := DeleteAccessEntry(ctx, api, testEKSCluster, teamRoleARN, ""); err != nil {
			t.Fatalf("delete %d: %v", i+1, err)
		}
	}
	if e.AccessEntries(testEKSCluster) != 0 || e.Count("deleted:access-entry") != 1 || e.Count("deleted:access-policy") != 2 {
		t.Errorf("stored %d, deleted %d entries and %d policies; want 0, 1, 2",
			e.AccessEntries(testEKSCluster), e.Count("deleted:access-entry"), e.Count("deleted:access-policy"))
	}
	// The service's ResourceNotFoundException reaches us as the SDK's typed
	// error, and is transient on its own.
	_, err := api.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: aws.String(testEKSCluster), PrincipalArn: aws.String(teamRoleARN)})
	var nf *ekstypes.ResourceNotFoundException
	if !errors.As(err, &nf) || IsPermanent(err) {
		t.Errorf("describing a deleted entry: %v, want a transient *ResourceNotFoundException", err)
	}
	if again := ensureEntry(t, api, teamEntry()); again.Action != Created || again.ARN == first.ARN || len(policies(e, teamRoleARN)) != 2 {
		t.Errorf("ensure after delete = %+v, policies %q", again, policies(e, teamRoleARN))
	}
}

func TestEnsurePodIdentity(t *testing.T) {
	e := newEKS(t)
	api := eksClient(e, 1)
	ctx := context.Background()
	want := PodIdentity{ClusterName: testEKSCluster, Namespace: "hyperpod-ns-ml-research", ServiceAccount: "trainer", RoleARN: teamRoleARN,
		Tags: map[string]string{TagTeam: "ml-research"}}

	res, err := EnsurePodIdentity(ctx, api, want)
	if err != nil {
		t.Fatal(err)
	}
	if res.Action != Created || !regexp.MustCompile(`^a-[a-z0-9]{17}$`).MatchString(res.ID) ||
		res.ARN != "arn:aws:eks:"+awstest.Region+":"+awstest.Account+":podidentityassociation/"+testEKSCluster+"/"+res.ID {
		t.Errorf("result = %+v", res)
	}
	stored := e.PodIdentities(testEKSCluster)
	if len(stored) != 1 || stored[0].ID != res.ID || stored[0].RoleARN != teamRoleARN || stored[0].Tags[TagTeam] != "ml-research" {
		t.Errorf("stored = %+v", stored)
	}

	if again, err := EnsurePodIdentity(ctx, api, want); err != nil || again.Action != Unchanged || again.ID != res.ID || again.ARN != res.ARN {
		t.Errorf("second ensure = %+v, %v; want unchanged %s", again, err, res.ID)
	}
	if e.Count("CreatePodIdentityAssociation") != 1 || e.Count("UpdatePodIdentityAssociation") != 0 {
		t.Errorf("create %d, update %d; want 1, 0", e.Count("CreatePodIdentityAssociation"), e.Count("UpdatePodIdentityAssociation"))
	}

	// Another service account in the namespace is another association.
	other := want
	other.ServiceAccount = "notebook"
	if r, err := EnsurePodIdentity(ctx, api, other); err != nil || r.Action != Created || r.ID == res.ID {
		t.Errorf("other service account = %+v, %v", r, err)
	}

	want.RoleARN = otherRoleARN
	upd, err := EnsurePodIdentity(ctx, api, want)
	if err != nil || upd.Action != Updated || upd.ID != res.ID || upd.ARN != res.ARN {
		t.Errorf("role change = %+v, %v; want updated %s", upd, err, res.ID)
	}
	for _, p := range e.PodIdentities(testEKSCluster) {
		if p.ServiceAccount == "trainer" && p.RoleARN != otherRoleARN || p.ServiceAccount == "notebook" && p.RoleARN != teamRoleARN {
			t.Errorf("stored %s/%s role %s", p.Namespace, p.ServiceAccount, p.RoleARN)
		}
	}

	for i := range 2 {
		if err := DeletePodIdentity(ctx, api, testEKSCluster, want.Namespace, want.ServiceAccount); err != nil {
			t.Fatalf("delete %d: %v", i+1, err)
		}
	}
	if left := e.PodIdentities(testEKSCluster); len(left) != 1 || left[0].ServiceAccount != "notebook" || e.Count("deleted:pod-identity") != 1 {
		t.Errorf("after delete: %+v, deleted %d; want only notebook, 1", left, e.Count("deleted:pod-identity"))
	}
	if r, err := EnsurePodIdentity(ctx, api, want); err != nil || r.Action != Created || r.ID == res.ID {
		t.Errorf("ensure after delete = %+v, %v", r, err)
	}
}

func TestEnsurePodIdentityLostCreateResponseCreatesOnce(t *testing.T) {
	e := newEKS(t)
	e.Set(func(e *awstest.EKS) { e.LoseCreateResponses = 1 })
	want := PodIdentity{ClusterName: testEKSCluster, Namespace: "hyperpod-ns-ml-research", ServiceAccount: "trainer", RoleARN: teamRoleARN}
	res, err := EnsurePodIdentity(context.Background(), eksClient(e, 3), want)
	if err != nil {
		t.Fatal(err)
	}
	stored := e.PodIdentities(testEKSCluster)
	if e.Count("CreatePodIdentityAssociation") != 2 || e.Count("created:pod-identity") != 1 || len(stored) != 1 {
		t.Fatalf("create calls %d, created %d, stored %d; want 2, 1, 1",
			e.Count("CreatePodIdentityAssociation"), e.Count("created:pod-identity"), len(stored))
	}
	if res.Action != Created || res.ID != stored[0].ID || res.ARN != stored[0].ARN {
		t.Errorf("result = %+v, stored %+v", res, stored[0])
	}
}

// The endpoint answers what the real service does, with the codes the SDK
// turns into its typed errors.
func TestEKSEndpointErrorCodes(t *testing.T) {
	e := newEKS(t)
	api := eksClient(e, 1)
	ctx := context.Background()
	ensureEntry(t, api, teamEntry())
	if _, err := EnsurePodIdentity(ctx, api, PodIdentity{ClusterName: testEKSCluster, Namespace: "ml", ServiceAccount: "sa", RoleARN: teamRoleARN}); err != nil {
		t.Fatal(err)
	}
	cluster := aws.String(testEKSCluster)
	for _, tc := range []struct {
		name, code string
		call       func() error
	}{
		{"duplicate access entry", "ResourceInUseException", func() error {
			_, err := api.CreateAccessEntry(ctx, &eks.CreateAccessEntryInput{ClusterName: cluster, PrincipalArn: aws.String(teamRoleARN)})
			return err
		}},
		{"STS session principal", "InvalidParameterException", func() error {
			_, err := api.CreateAccessEntry(ctx, &eks.CreateAccessEntryInput{ClusterName: cluster,
				PrincipalArn: aws.String("arn:aws:sts::" + awstest.Account + ":assumed-role/team/session")})
			return err
		}},
		{"unknown entry type", "InvalidParameterException", func() error {
			_, err := api.CreateAccessEntry(ctx, &eks.CreateAccessEntryInput{ClusterName: cluster, PrincipalArn: aws.String(otherRoleARN), Type: aws.String("ADMIN")})
			return err
		}},
		{"namespace scope without namespaces", "InvalidParameterException", func() error {
			_, err := api.AssociateAccessPolicy(ctx, &eks.AssociateAccessPolicyInput{ClusterName: cluster, PrincipalArn: aws.String(teamRoleARN),
				PolicyArn: aws.String(viewPolicy), AccessScope: &ekstypes.AccessScope{Type: ekstypes.AccessScopeTypeNamespace}})
			return err
		}},
		{"cluster scope with namespaces", "InvalidParameterException", func() error {
			_, err := api.AssociateAccessPolicy(ctx, &eks.AssociateAccessPolicyInput{ClusterName: cluster, PrincipalArn: aws.String(teamRoleARN),
				PolicyArn: aws.String(viewPolicy), AccessScope: &ekstypes.AccessScope{Type: ekstypes.AccessScopeTypeCluster, Namespaces: []string{"ml"}}})
			return err
		}},
		{"unknown scope type", "InvalidParameterException", func() error {
			_, err := api.AssociateAccessPolicy(ctx, &eks.AssociateAccessPolicyInput{ClusterName: cluster, PrincipalArn: aws.String(teamRoleARN),
				PolicyArn: aws.String(viewPolicy), AccessScope: &ekstypes.AccessScope{Type: "everything"}})
			return err
		}},
		{"policy for a missing entry", "ResourceNotFoundException", func() error {
			_, err := api.AssociateAccessPolicy(ctx, &eks.AssociateAccessPolicyInput{ClusterName: cluster, PrincipalArn: aws.String(otherRoleARN),
				PolicyArn: aws.String(viewPolicy), AccessScope: &ekstypes.AccessScope{Type: ekstypes.AccessScopeTypeCluster}})
			return err
		}},
		{"disassociating a policy not associated", "ResourceNotFoundException", func() error {
			_, err := api.DisassociateAccessPolicy(ctx, &eks.DisassociateAccessPolicyInput{ClusterName: cluster, PrincipalArn: aws.String(teamRoleARN), PolicyArn: aws.String(viewPolicy)})
			return err
		}},
		{"duplicate pod identity", "ResourceInUseException", func() error {
			_, err := api.CreatePodIdentityAssociation(ctx, &eks.CreatePodIdentityAssociationInput{ClusterName: cluster,
				Namespace: aws.String("ml"), ServiceAccount: aws.String("sa"), RoleArn: aws.String(otherRoleARN)})
			return err
		}},
		{"pod identity for a user", "InvalidParameterException", func() error {
			_, err := api.CreatePodIdentityAssociation(ctx, &eks.CreatePodIdentityAssociationInput{ClusterName: cluster,
				Namespace: aws.String("ml"), ServiceAccount: aws.String("other"), RoleArn: aws.String("arn:aws:iam::" + awstest.Account + ":user/alice")})
			return err
		}},
		{"pod identity namespace not a label", "InvalidParameterException", func() error {
			_, err := api.CreatePodIdentityAssociation(ctx, &eks.CreatePodIdentityAssociationInput{ClusterName: cluster,
				Namespace: aws.String("ML_Research"), ServiceAccount: aws.String("sa"), RoleArn: aws.String(teamRoleARN)})
			return err
		}},
		{"missing association", "ResourceNotFoundException", func() error {
			_, err := api.DescribePodIdentityAssociation(ctx, &eks.DescribePodIdentityAssociationInput{ClusterName: cluster, AssociationId: aws.String("a-00000000000000999")})
			return err
		}},
		{"page size out of range", "InvalidParameterException", func() error {
			_, err := api.ListPodIdentityAssociations(ctx, &eks.ListPodIdentityAssociationsInput{ClusterName: cluster, MaxResults: aws.Int32(500)})
			return err
		}},
		{"unknown cluster", "ResourceNotFoundException", func() error {
			_, err := api.ListAccessEntries(ctx, &eks.ListAccessEntriesInput{ClusterName: aws.String("nope")})
			return err
		}},
	} {
		err := tc.call()
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != tc.code {
			t.Errorf("%s: err = %v, want %s", tc.name, err, tc.code)
		}
	}
	if e.AccessEntries(testEKSCluster) != 1 || len(e.PodIdentities(testEKSCluster)) != 1 || len(policies(e, teamRoleARN)) != 2 {
		t.Errorf("rejected calls changed state: %d entries, %d associations, policies %q",
			e.AccessEntries(testEKSCluster), len(e.PodIdentities(testEKSCluster)), policies(e, teamRoleARN))
	}
	// A list through the real client pages and filters.
	out, err := api.ListAccessEntries(ctx, &eks.ListAccessEntriesInput{ClusterName: cluster, AssociatedPolicyArn: aws.String(userPolicy)})
	if err != nil || !slices.Equal(out.AccessEntries, []string{teamRoleARN}) {
		t.Errorf("ListAccessEntries by policy = %v, %v", out, err)
	}
}

// A role that already has an access entry this connection did not make
// (another connection's, or one made by hand, say a platform admin's) is
// never rewritten, and revoking the connection never deletes it.
func TestAccessEntryOfAnotherOwnerIsNeverTakenOver(t *testing.T) {
	e := newEKS(t)
	api := eksClient(e, 1)
	ctx := context.Background()
	admin := AccessEntry{ClusterName: testEKSCluster, PrincipalARN: teamRoleARN, KubernetesGroups: []string{"platform-admins"},
		Policies: []AccessPolicy{{PolicyARN: userPolicy}}}
	ensureEntry(t, api, admin) // made outside the portal: no connection tag

	// In this order: the entry made by hand first, then another
	// connection's in its place.
	for _, o := range []struct{ name, owner string }{{"made by hand", ""}, {"another connection's", "8"}} {
		name, owner := o.name, o.owner
		if owner != "" {
			if err := DeleteAccessEntry(ctx, api, testEKSCluster, teamRoleARN, ""); err != nil {
				t.Fatal(err)
			}
			other := teamEntry()
			other.Tags = map[string]string{TagTeam: "blue", TagConnection: owner}
			ensureEntry(t, api, other)
		}
		before := e.AccessEntry(testEKSCluster, teamRoleARN)
		updates, assoc := e.Count("UpdateAccessEntry"), e.Count("AssociateAccessPolicy")
		_, err := EnsureAccessEntry(ctx, api, teamEntry()) // connection 7
		var notOurs *NotOursError
		if !errors.As(err, &notOurs) || !IsPermanent(err) || notOurs.Owner != owner || !strings.Contains(err.Error(), "does not take over") {
			t.Errorf("%s: err = %v, want a permanent NotOursError naming owner %q", name, err, owner)
		}
		if e.Count("UpdateAccessEntry") != updates || e.Count("AssociateAccessPolicy") != assoc ||
			!slices.Equal(e.AccessEntry(testEKSCluster, teamRoleARN).KubernetesGroups, before.KubernetesGroups) {
			t.Errorf("%s: the entry was changed", name)
		}
		err = DeleteAccessEntry(ctx, api, testEKSCluster, teamRoleARN, "7")
		if !errors.As(err, &notOurs) || e.AccessEntries(testEKSCluster) != 1 {
			t.Errorf("%s: revoking connection 7 = %v, %d entries left; want it kept", name, err, e.AccessEntries(testEKSCluster))
		}
	}
	// Its own entry, connection 7 deletes.
	if err := DeleteAccessEntry(ctx, api, testEKSCluster, teamRoleARN, ""); err != nil {
		t.Fatal(err)
	}
	ensureEntry(t, api, teamEntry())
	if err := DeleteAccessEntry(ctx, api, testEKSCluster, teamRoleARN, "7"); err != nil || e.AccessEntries(testEKSCluster) != 0 {
		t.Errorf("own entry: %v, %d left", err, e.AccessEntries(testEKSCluster))
	}
}

// The endpoint refuses an UpdatePodIdentityAssociation that changes
// nothing, as EKS does ("You must change at least one of these in an
// update"); EnsurePodIdentity only updates a role that differs.
func TestPodIdentityUpdateMustChangeSomething(t *testing.T) {
	e := newEKS(t)
	api := eksClient(e, 1)
	ctx := context.Background()
	res, err := EnsurePodIdentity(ctx, api, PodIdentity{ClusterName: testEKSCluster, Namespace: "hyperpod-ns-ml-research", ServiceAccount: "trainer", RoleARN: teamRoleARN})
	if err != nil {
		t.Fatal(err)
	}
	_, err = api.UpdatePodIdentityAssociation(ctx, &eks.UpdatePodIdentityAssociationInput{ClusterName: aws.String(testEKSCluster), AssociationId: aws.String(res.ID)})
	if !hasCode(err, "InvalidParameterException") {
		t.Errorf("an update changing nothing = %v; want InvalidParameterException", err)
	}
}
