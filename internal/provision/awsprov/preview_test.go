package awsprov

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/datazone"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/identitystore"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/ssoadmin"

	"github.com/hyperpod-governance/portal/internal/provision/awsprov/awstest"
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
