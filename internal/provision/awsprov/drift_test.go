package awsprov

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/hyperpod-governance/portal/internal/support/awstest"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

func findingsByKind(fs []Finding) map[Kind]Finding {
	out := map[Kind]Finding{}
	for _, f := range fs {
		out[f.Call.Kind] = f
	}
	return out
}

// Changing the quota, the domain, an access entry's policy scope and the
// Pod Identity role behind the portal's back shows as drift; a clean state
// shows none; re-applying (Ensure) fixes it all; a deleted resource is
// "deleted".
func TestAWSDrift(t *testing.T) {
	ctx := context.Background()
	c := workflow.ExampleContract()
	st := awstest.NewStack(t, c.EKSClusterName, "team-red-members", "team-red-owners")
	r := stackRunner(t, st)
	s := planSettings()
	s.IdentityStoreID = st.IdentityStore.StoreID()
	calls, _, err := PlanFor(c, planTarget(), s)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[Kind]string{}
	ensureAll := func() {
		t.Helper()
		for _, call := range calls {
			res, err := r.Ensure(ctx, call)
			if err != nil {
				t.Fatalf("ensure %s: %v", call.Title(), err)
			}
			ids[call.Kind] = res.ID
		}
	}
	ensureAll()
	if fs, err := r.Drift(ctx, calls); err != nil || len(fs) != 0 {
		t.Fatalf("drift of a clean state = %+v, %v; want none", fs, err)
	}
	writes := st.Creates()

	// Behind the portal's back.
	st.SageMaker.ChangeQuota(ids[KindComputeQuota], func(w *int32, _ *string) { *w = 3 })
	sm := r.Clients.SageMaker.(*sagemaker.Client)
	if _, err := sm.UpdateDomain(ctx, &sagemaker.UpdateDomainInput{DomainId: aws.String(ids[KindDomain]),
		DefaultUserSettings: &smtypes.UserSettings{ExecutionRole: aws.String("arn:aws:iam::111122223333:role/someone-else")}}); err != nil {
		t.Fatal(err)
	}
	var entry Call
	for _, call := range calls {
		if call.Kind == KindAccessEntry && entry.AccessEntry == nil {
			entry = call
		}
	}
	// A namespace-scoped policy widened to the whole cluster.
	var policy string
	for _, p := range entry.AccessEntry.Policies {
		if len(p.Namespaces) > 0 && policy == "" {
			policy = p.PolicyARN
		}
	}
	if _, err := r.Clients.EKS.AssociateAccessPolicy(ctx, &eks.AssociateAccessPolicyInput{ClusterName: aws.String(c.EKSClusterName),
		PrincipalArn: aws.String(entry.Name), PolicyArn: aws.String(policy), AccessScope: &ekstypes.AccessScope{Type: ekstypes.AccessScopeTypeCluster}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Clients.EKS.UpdatePodIdentityAssociation(ctx, &eks.UpdatePodIdentityAssociationInput{ClusterName: aws.String(c.EKSClusterName),
		AssociationId: aws.String(ids[KindPodIdentity]), RoleArn: aws.String("arn:aws:iam::111122223333:role/someone-else")}); err != nil {
		t.Fatal(err)
	}

	fs, err := r.Drift(ctx, calls)
	if err != nil {
		t.Fatal(err)
	}
	got := findingsByKind(fs)
	for kind, field := range map[Kind]string{
		KindComputeQuota: "ComputeQuotaTarget.FairShareWeight",
		KindDomain:       "DefaultUserSettings.ExecutionRole",
		KindAccessEntry:  "accessScope " + policy[strings.LastIndex(policy, "/")+1:],
		KindPodIdentity:  "roleArn",
	} {
		if f, ok := got[kind]; !ok || f.What != "changed" || !slices.Contains(f.Fields, field) {
			t.Errorf("%s drift = %+v, want changed %s", kind, f, field)
		}
	}
	if len(fs) != 4 {
		t.Errorf("%d findings, want 4: %+v", len(fs), fs)
	}
	if now := st.Creates(); len(now) != len(writes) || st.SageMaker.Count("UpdateComputeQuota") != 0 {
		t.Error("the drift check wrote to AWS")
	}

	// Re-applying fixes everything.
	ensureAll()
	if fs, err := r.Drift(ctx, calls); err != nil || len(fs) != 0 {
		t.Errorf("drift after re-applying = %+v, %v; want none", fs, err)
	}

	// A deleted association, and a quota no longer the connection's.
	if _, err := r.Clients.EKS.DeletePodIdentityAssociation(ctx, &eks.DeletePodIdentityAssociationInput{ClusterName: aws.String(c.EKSClusterName),
		AssociationId: aws.String(ids[KindPodIdentity])}); err != nil {
		t.Fatal(err)
	}
	st.SageMaker.SetQuotaTags(ids[KindComputeQuota], nil)
	got = findingsByKind(must(r.Drift(ctx, calls)))
	if got[KindPodIdentity].What != "deleted" || got[KindComputeQuota].What != "changed" || !slices.Equal(got[KindComputeQuota].Fields, []string{"tags"}) {
		t.Errorf("findings = %+v, want the association deleted and the quota's tags changed", got)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
