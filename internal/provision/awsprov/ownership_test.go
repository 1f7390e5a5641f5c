package awsprov

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/hyperpod-governance/portal/internal/support/awstest"
)

// A quota made in the console for the team, under another name, stops the
// job for good (no create, no update, no retry), until an admin adopts it;
// then the next run updates it to the contract and keeps its name.
func TestEnsureAdoptsAConsoleQuotaOnlyByChoice(t *testing.T) {
	f := awstest.NewSageMaker(t)
	api := smClient(f, 1)
	ctx := context.Background()
	c := testContract()
	console := f.AddForeignQuota("made-in-console", testCluster, c.Team, nil)

	var slept int
	_, err := EnsureComputeQuota(ctx, api, desired(t, c), fastPoll(&slept))
	var foreign *ForeignQuotaError
	if !errors.As(err, &foreign) || !IsPermanent(err) || foreign.ARN != console.ARN {
		t.Fatalf("err = %v, want a permanent ForeignQuotaError naming %s", err, console.ARN)
	}
	if f.Count("CreateComputeQuota")+f.Count("UpdateComputeQuota")+f.Count("AddTags") != 0 {
		t.Fatalf("calls %v: the portal changed a quota it did not make", f.Counts())
	}

	// The admin's choice: another team's or cluster's ARN is refused.
	if _, err := AdoptComputeQuota(ctx, api, console.ARN, "other-team", testCluster, 7); !errors.Is(err, ErrNotAQuota) {
		t.Errorf("adopt for another team: %v, want ErrNotAQuota", err)
	}
	if _, err := AdoptComputeQuota(ctx, api, "arn:aws:sagemaker:us-east-1:123456789012:domain/d-abc", c.Team, testCluster, 7); !errors.Is(err, ErrNotAQuota) {
		t.Errorf("adopt a domain ARN: %v, want ErrNotAQuota", err)
	}
	if res, err := AdoptComputeQuota(ctx, api, console.ARN, c.Team, testCluster, 7); err != nil || res.Action != "adopted" {
		t.Fatalf("adopt: %+v, %v", res, err)
	}
	res := ensure(t, api, c)
	if res.Action != Updated || res.ID != console.ID || f.Count("CreateComputeQuota") != 0 {
		t.Errorf("after adoption: %+v, creates %d; want the console quota updated", res, f.Count("CreateComputeQuota"))
	}
	if q := f.Quota(console.ID); q.Name != "made-in-console" || aws.ToInt32(q.Target.FairShareWeight) != 50 {
		t.Errorf("adopted quota %s weight %d, want its name kept and the contract's weight", q.Name, aws.ToInt32(q.Target.FairShareWeight))
	}
	// Another connection cannot adopt it now.
	var notOurs *NotOursError
	if _, err := AdoptComputeQuota(ctx, api, console.ARN, c.Team, testCluster, 8); !errors.As(err, &notOurs) {
		t.Errorf("adopt by another connection: %v, want NotOursError", err)
	}
}

// A quota with the portal's name that the portal did not make (no tag, or
// another connection's) is never updated or deleted, and revocation
// records it as kept.
func TestQuotaWithOurNameIsCheckedByTag(t *testing.T) {
	for _, tc := range []struct {
		name string
		tags map[string]string
	}{
		{"untagged", nil},
		{"another connection", map[string]string{TagConnection: "99", TagTeam: "ml-research"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := awstest.NewSageMaker(t)
			api := smClient(f, 1)
			ctx := context.Background()
			c := testContract()
			q := f.AddForeignQuota(QuotaName(c.Team), testCluster, c.Team, tc.tags)

			var slept int
			_, err := EnsureComputeQuota(ctx, api, desired(t, c), fastPoll(&slept))
			var foreign *ForeignQuotaError
			var notOurs *NotOursError
			if !(errors.As(err, &foreign) || errors.As(err, &notOurs)) || !IsPermanent(err) {
				t.Fatalf("ensure: %v, want a permanent ownership error", err)
			}
			r := &Runner{Clients: Clients{SageMaker: api}}
			call := quotaCall(desired(t, c))
			res, err := r.Remove(ctx, call)
			if err != nil || res.Action != Kept {
				t.Errorf("remove: %+v, %v; want kept", res, err)
			}
			if f.Count("UpdateComputeQuota")+f.Count("DeleteComputeQuota") != 0 || f.Quota(q.ID).Status != "Created" {
				t.Errorf("calls %v: the quota was changed", f.Counts())
			}
		})
	}
}

// A domain with the team's domain name that this connection did not make
// is neither updated nor deleted; revocation keeps it.
func TestDomainWithOurNameIsCheckedByTag(t *testing.T) {
	f, _ := newDomainEndpoints(t)
	api := smClient(f, 1)
	ctx := context.Background()
	spec := testDomainSpec()
	// Someone made "ml-research" with other settings and no portal tags.
	other := spec
	other.SecurityGroupIDs = []string{"sg-0fffffffffffffff0"}
	other.Tags = map[string]string{"owner": "someone"}
	n, _ := other.normalized()
	out, err := api.CreateDomain(ctx, n.createInput())
	if err != nil {
		t.Fatal(err)
	}
	var slept int
	_, err = EnsureDomain(ctx, api, spec, fastPoll(&slept))
	var notOurs *NotOursError
	if !errors.As(err, &notOurs) || !IsPermanent(err) {
		t.Fatalf("ensure: %v, want a permanent NotOursError", err)
	}
	r := &Runner{Clients: Clients{Domains: api}, Poll: fastPoll(&slept)}
	res, err := r.Remove(ctx, Call{Kind: KindDomain, Name: spec.Name, Domain: &spec})
	if err != nil || res.Action != Kept {
		t.Errorf("remove: %+v, %v; want kept", res, err)
	}
	if f.Count("UpdateDomain")+f.Count("DeleteDomain") != 0 {
		t.Errorf("calls %v: the domain was changed", f.Counts())
	}
	d, err := api.DescribeDomain(ctx, &sagemaker.DescribeDomainInput{DomainId: out.DomainId})
	if err != nil || d.Status == types.DomainStatusDeleting {
		t.Errorf("domain after revoke: %v, %v", d, err)
	}

	// Tagged as this connection's, the same domain is updated.
	f.SetDomainTags(aws.ToString(out.DomainId), spec.Tags)
	if res := ensureDomain(t, api, spec); res.Action != Updated {
		t.Errorf("ensure of our domain = %+v, want updated", res)
	}
}

// ListTags is as strict as the service: MaxResults at least 50, a
// SageMaker ARN.
func TestListTagsIsStrict(t *testing.T) {
	f := awstest.NewSageMaker(t)
	api := smClient(f, 1)
	ctx := context.Background()
	q := f.AddForeignQuota("q", testCluster, "t", map[string]string{"a": "b"})
	if _, err := api.ListTags(ctx, &sagemaker.ListTagsInput{ResourceArn: aws.String(q.ARN), MaxResults: aws.Int32(10)}); !hasCode(err, "ValidationException") {
		t.Errorf("MaxResults 10: %v, want ValidationException", err)
	}
	if _, err := api.ListTags(ctx, &sagemaker.ListTagsInput{ResourceArn: aws.String("arn:aws:eks:us-east-1:123456789012:cluster/x")}); !hasCode(err, "ValidationException") {
		t.Errorf("an EKS ARN: %v, want ValidationException", err)
	}
	tags, err := sageMakerTags(ctx, api, q.ARN)
	if err != nil || tags["a"] != "b" {
		t.Errorf("tags = %v, %v", tags, err)
	}
}
