package awsprov

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/ssoadmin"
	ssotypes "github.com/aws/aws-sdk-go-v2/service/ssoadmin/types"
	smithy "github.com/aws/smithy-go"

	"github.com/hyperpod-governance/portal/internal/support/awstest"
)

const (
	domainRole  = "arn:aws:iam::111122223333:role/portal-team-ml-research"
	domainVPC   = "vpc-0a1b2c3d4e5f60718"
	domainGroup = "9067c5b1-2b3c-4d5e-8f90-1234567890ab"
)

func testDomainSpec() DomainSpec {
	return DomainSpec{
		Name:             "ml-research",
		ExecutionRoleARN: domainRole,
		VpcID:            domainVPC,
		SubnetIDs:        []string{"subnet-1a1b2c3d4e5f60718", "subnet-0a1b2c3d4e5f60718"},
		SecurityGroupIDs: []string{"sg-0a1b2c3d4e5f60718"},
		Tags:             map[string]string{TagTeam: "ml-research", TagConnection: "7"},
	}
}

// ssoClient is a real ssoadmin client pointed at the test endpoint.
func ssoClient(s *awstest.SSOAdmin, maxAttempts int) *ssoadmin.Client {
	return ssoadmin.NewFromConfig(awstest.Config(maxAttempts), func(o *ssoadmin.Options) { o.BaseEndpoint = aws.String(s.URL()) })
}

// newDomainEndpoints is a SageMaker endpoint whose SSO domains register
// their application with the returned ssoadmin endpoint.
func newDomainEndpoints(t *testing.T) (*awstest.SageMaker, *awstest.SSOAdmin) {
	t.Helper()
	f, s := awstest.NewSageMaker(t), awstest.NewSSOAdmin(t)
	f.LinkSSOAdmin(s)
	return f, s
}

func ensureDomain(t *testing.T, api SageMakerDomainAPI, want DomainSpec) DomainResult {
	t.Helper()
	var slept int
	res, err := EnsureDomain(context.Background(), api, want, fastPoll(&slept))
	if err != nil {
		t.Fatalf("EnsureDomain: %v", err)
	}
	return res
}

func TestEnsureDomainCreatesPollsThenIsUnchanged(t *testing.T) {
	f, s := newDomainEndpoints(t)
	api := smClient(f, 1)
	var slept int
	res, err := EnsureDomain(context.Background(), api, testDomainSpec(), fastPoll(&slept))
	if err != nil {
		t.Fatal(err)
	}
	if res.Action != Created || !strings.HasPrefix(res.ID, "d-") || !strings.HasSuffix(res.ARN, ":domain/"+res.ID) ||
		!strings.HasPrefix(res.URL, "https://"+res.ID+".studio.") || res.SSOApplicationARN == "" {
		t.Errorf("result = %+v", res)
	}
	if apps := s.Applications(); !slices.Equal(apps, []string{res.SSOApplicationARN}) {
		t.Errorf("SSO applications = %v, want the domain's %s", apps, res.SSOApplicationARN)
	}
	if slept != f.SettleAfter-1 || f.Count("DescribeDomain") != f.SettleAfter {
		t.Errorf("slept %d times over %d describes; the domain settles after %d", slept, f.Count("DescribeDomain"), f.SettleAfter)
	}
	d := f.Domain(res.ID)
	wantTags := []string{TagConnection + "=7", TagTeam + "=ml-research"}
	var tags []string
	for _, tag := range d.Tags {
		tags = append(tags, aws.ToString(tag.Key)+"="+aws.ToString(tag.Value))
	}
	if d.Status != "InService" || d.AuthMode != "SSO" || d.AppNetworkAccessType != "VpcOnly" || d.VpcID != domainVPC ||
		d.ExecutionRole() != domainRole || !slices.Equal(d.SecurityGroups(), []string{"sg-0a1b2c3d4e5f60718"}) ||
		!slices.Equal(d.SubnetIDs, []string{"subnet-0a1b2c3d4e5f60718", "subnet-1a1b2c3d4e5f60718"}) ||
		!slices.Equal(tags, wantTags) || d.KmsKeyID != "" {
		t.Errorf("stored domain = %+v, tags %v", d, tags)
	}

	// Subnets in another order are the same subnets.
	spec := testDomainSpec()
	slices.Reverse(spec.SubnetIDs)
	again := ensureDomain(t, api, spec)
	if again.Action != Unchanged || again.ID != res.ID || again.SSOApplicationARN != res.SSOApplicationARN || again.URL != res.URL {
		t.Errorf("second ensure = %+v, want unchanged %+v", again, res)
	}
	if f.Count("CreateDomain") != 1 || f.Count("UpdateDomain") != 0 || f.Count("created:domain") != 1 || f.Count("updated:domain") != 0 {
		t.Errorf("create called %d (created %d), update %d (updated %d); want 1, 1, 0, 0",
			f.Count("CreateDomain"), f.Count("created:domain"), f.Count("UpdateDomain"), f.Count("updated:domain"))
	}
}

func TestEnsureDomainUpdatesWhatUpdateDomainCanChange(t *testing.T) {
	f, _ := newDomainEndpoints(t)
	api := smClient(f, 1)
	first := ensureDomain(t, api, testDomainSpec())

	spec := testDomainSpec()
	spec.ExecutionRoleARN = "arn:aws:iam::111122223333:role/portal-team-ml-research-v2"
	res := ensureDomain(t, api, spec)
	d := f.Domain(first.ID)
	if res.Action != Updated || res.ID != first.ID || d.ExecutionRole() != spec.ExecutionRoleARN || d.Status != "InService" ||
		!slices.Equal(d.SecurityGroups(), spec.SecurityGroupIDs) {
		t.Errorf("role change: %+v, stored role %s, groups %v, status %s", res, d.ExecutionRole(), d.SecurityGroups(), d.Status)
	}

	spec.SecurityGroupIDs = []string{"sg-0a1b2c3d4e5f60718", "sg-2a1b2c3d4e5f60718"}
	spec.SubnetIDs = append(spec.SubnetIDs, "subnet-2a1b2c3d4e5f60718")
	if res := ensureDomain(t, api, spec); res.Action != Updated {
		t.Errorf("security group and subnet change: %+v", res)
	}
	d = f.Domain(first.ID)
	if len(d.SecurityGroups()) != 2 || len(d.SubnetIDs) != 3 || d.ExecutionRole() != spec.ExecutionRoleARN {
		t.Errorf("stored after update: groups %v, subnets %v, role %s", d.SecurityGroups(), d.SubnetIDs, d.ExecutionRole())
	}

	if res := ensureDomain(t, api, spec); res.Action != Unchanged {
		t.Errorf("ensure after updates = %+v, want unchanged", res)
	}
	if f.Count("created:domain") != 1 || f.Count("updated:domain") != 2 || f.Count("UpdateDomain") != 2 {
		t.Errorf("created %d, updated %d (calls %d); want 1, 2, 2", f.Count("created:domain"), f.Count("updated:domain"), f.Count("UpdateDomain"))
	}
}

func TestEnsureDomainImmutableChangeIsPermanent(t *testing.T) {
	for name, change := range map[string]func(*DomainSpec){
		"VPC": func(s *DomainSpec) { s.VpcID = "vpc-9a1b2c3d4e5f60718" },
		"KMS key": func(s *DomainSpec) {
			s.KmsKeyID = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
		},
	} {
		t.Run(name, func(t *testing.T) {
			f, _ := newDomainEndpoints(t)
			api := smClient(f, 1)
			first := ensureDomain(t, api, testDomainSpec())
			spec := testDomainSpec()
			change(&spec)
			var slept int
			_, err := EnsureDomain(context.Background(), api, spec, fastPoll(&slept))
			if !errors.Is(err, ErrDomainRecreate) || !IsPermanent(err) || !strings.Contains(err.Error(), name) {
				t.Fatalf("err = %v, want a permanent ErrDomainRecreate naming the %s", err, name)
			}
			if f.Count("UpdateDomain") != 0 || f.Count("DeleteDomain") != 0 || f.Count("CreateDomain") != 1 || f.Domain(first.ID).VpcID != domainVPC {
				t.Errorf("update %d, delete %d, create %d calls: the domain must be left alone",
					f.Count("UpdateDomain"), f.Count("DeleteDomain"), f.Count("CreateDomain"))
			}
		})
	}
}

func TestEnsureDomainFailedReportsReason(t *testing.T) {
	f, s := newDomainEndpoints(t)
	const reason = "The subnet subnet-0a1b2c3d4e5f60718 has no free IP addresses"
	f.Set(func(f *awstest.SageMaker) { f.DomainFailure = reason })
	api := smClient(f, 1)
	for run := 1; run <= 2; run++ {
		var slept int
		_, err := EnsureDomain(context.Background(), api, testDomainSpec(), fastPoll(&slept))
		var failed *FailedError
		if !errors.As(err, &failed) || failed.Status != string(types.DomainStatusFailed) ||
			!strings.Contains(err.Error(), reason) || !IsPermanent(err) {
			t.Errorf("run %d: err = %v, want a permanent Failed error with the reason", run, err)
		}
	}
	if f.Count("created:domain") != 1 || len(s.Applications()) != 0 {
		t.Errorf("created %d, applications %v; want 1 failed domain and no application", f.Count("created:domain"), s.Applications())
	}
}

func TestEnsureDomainSurvivesThrottlingStorm(t *testing.T) {
	t.Run("SDK retries", func(t *testing.T) {
		f, _ := newDomainEndpoints(t)
		f.Throttle(3)
		res := ensureDomain(t, smClient(f, 5), testDomainSpec())
		if res.Action != Created || f.Count("created:domain") != 1 || f.Domains() != 1 {
			t.Errorf("result %+v, created %d, stored %d; want exactly one", res, f.Count("created:domain"), f.Domains())
		}
		if f.Count("ListDomains") != 4 {
			t.Errorf("list called %d times, want 3 throttled + 1", f.Count("ListDomains"))
		}
	})
	t.Run("job retries", func(t *testing.T) {
		f, _ := newDomainEndpoints(t)
		f.Throttle(3)
		api := smClient(f, 1)
		var res DomainResult
		var err error
		runs := 0
		for runs = 1; runs <= 10; runs++ {
			var slept int
			res, err = EnsureDomain(context.Background(), api, testDomainSpec(), fastPoll(&slept))
			if err == nil {
				break
			}
			if IsPermanent(err) || !strings.Contains(err.Error(), "ThrottlingException") {
				t.Fatalf("run %d: %v, want a transient throttling error", runs, err)
			}
		}
		if err != nil || runs != 4 || res.Action != Created || f.Count("created:domain") != 1 {
			t.Errorf("after %d runs: %+v, %v, created %d; want created once on run 4", runs, res, err, f.Count("created:domain"))
		}
	})
	t.Run("throttled while polling", func(t *testing.T) {
		f, _ := newDomainEndpoints(t)
		f.Set(func(f *awstest.SageMaker) { f.SettleAfter = 5 })
		api := smClient(f, 1)
		slept := 0
		_, err := EnsureDomain(context.Background(), api, testDomainSpec(), PollConfig{
			Interval: time.Second, Timeout: time.Minute,
			Sleep: func(context.Context, time.Duration) error {
				if slept++; slept == 2 {
					f.Throttle(1)
				}
				return nil
			},
		})
		if err == nil || IsPermanent(err) {
			t.Fatalf("err = %v, want transient", err)
		}
		if res := ensureDomain(t, api, testDomainSpec()); res.Action != Unchanged || f.Count("created:domain") != 1 {
			t.Errorf("rerun = %+v, created %d; want unchanged, 1", res, f.Count("created:domain"))
		}
	})
}

func TestEnsureDomainLostCreateResponseCreatesOnce(t *testing.T) {
	f, _ := newDomainEndpoints(t)
	f.Set(func(f *awstest.SageMaker) { f.LoseCreateResponses = 1 })
	res := ensureDomain(t, smClient(f, 3), testDomainSpec())
	if f.Count("created:domain") != 1 || f.Count("CreateDomain") != 2 || f.Domains() != 1 {
		t.Errorf("create calls %d, created %d, stored %d; want 2, 1, 1", f.Count("CreateDomain"), f.Count("created:domain"), f.Domains())
	}
	if res.ID == "" || res.SSOApplicationARN == "" || f.Domain(res.ID).Name != "ml-research" {
		t.Errorf("result = %+v", res)
	}
}

func TestEnsureDomainPollTimeout(t *testing.T) {
	f, _ := newDomainEndpoints(t)
	f.Set(func(f *awstest.SageMaker) { f.SettleAfter = 1000 })
	var slept int
	_, err := EnsureDomain(context.Background(), smClient(f, 1), testDomainSpec(), PollConfig{
		Interval: 10 * time.Second, Timeout: time.Minute,
		Sleep: func(context.Context, time.Duration) error { slept++; return nil },
	})
	var timeout *TimeoutError
	if !errors.As(err, &timeout) || timeout.Status != string(types.DomainStatusPending) || IsPermanent(err) {
		t.Fatalf("err = %v, want a transient timeout while Pending", err)
	}
	if slept != 6 {
		t.Errorf("slept %d times, want 6 (1m / 10s)", slept)
	}
}

func TestEnsureDomainRejectedIsPermanent(t *testing.T) {
	t.Run("by the service", func(t *testing.T) {
		f, _ := newDomainEndpoints(t)
		spec := testDomainSpec()
		spec.ExecutionRoleARN = "arn:aws:iam::111122223333:user/not-a-role"
		var slept int
		_, err := EnsureDomain(context.Background(), smClient(f, 3), spec, fastPoll(&slept))
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationException" || !IsPermanent(err) || !strings.Contains(err.Error(), "user/not-a-role") {
			t.Fatalf("err = %v, want a permanent ValidationException with the service's message", err)
		}
		if f.Count("CreateDomain") != 1 || f.Count("created:domain") != 0 {
			t.Errorf("create called %d times (created %d); a permanent error is not retried", f.Count("CreateDomain"), f.Count("created:domain"))
		}
	})
	for name, change := range map[string]func(*DomainSpec){
		"bad name":             func(s *DomainSpec) { s.Name = "ml_research" },
		"no VPC":               func(s *DomainSpec) { s.VpcID = "" },
		"no subnets":           func(s *DomainSpec) { s.SubnetIDs = nil },
		"no role":              func(s *DomainSpec) { s.ExecutionRoleARN = "" },
		"VpcOnly without SGs":  func(s *DomainSpec) { s.SecurityGroupIDs = nil },
		"unknown network type": func(s *DomainSpec) { s.AppNetworkAccessType = "Internet" },
	} {
		t.Run(name, func(t *testing.T) {
			f, _ := newDomainEndpoints(t)
			spec := testDomainSpec()
			change(&spec)
			var slept int
			_, err := EnsureDomain(context.Background(), smClient(f, 1), spec, fastPoll(&slept))
			if err == nil || !IsPermanent(err) {
				t.Fatalf("err = %v, want permanent", err)
			}
			if n := len(f.Log()); n != 0 {
				t.Errorf("%d calls made for a spec the API would reject: %v", n, f.Log())
			}
		})
	}
}

func TestEnsureDomainAccessDeniedIsPermanent(t *testing.T) {
	f, s := newDomainEndpoints(t)
	f.Deny("CreateDomain", -1)
	var slept int
	_, err := EnsureDomain(context.Background(), smClient(f, 3), testDomainSpec(), fastPoll(&slept))
	if !hasCode(err, "AccessDeniedException") || !IsPermanent(err) || !strings.Contains(err.Error(), "sagemaker:CreateDomain") {
		t.Errorf("CreateDomain denied: err = %v, want a permanent AccessDeniedException", err)
	}

	s.AddApplication("arn:aws:sso::111122223333:application/ssoins-7223a1b2c3d4e5f6/apl-0000000000000001")
	s.Deny("CreateApplicationAssignment", -1)
	_, err = EnsureGroupAssignment(context.Background(), ssoClient(s, 3), s.Applications()[0], domainGroup)
	if !hasCode(err, "AccessDeniedException") || !IsPermanent(err) || !strings.Contains(err.Error(), "sso:CreateApplicationAssignment") {
		t.Errorf("CreateApplicationAssignment denied: err = %v, want a permanent AccessDeniedException", err)
	}
	if s.Count("CreateApplicationAssignment") != 1 {
		t.Errorf("create called %d times; a permanent error is not retried", s.Count("CreateApplicationAssignment"))
	}
}

// Only the domain with exactly the team's name is the team's, on whichever
// page of ListDomains it is.
func TestEnsureDomainMatchesExactNameAcrossPages(t *testing.T) {
	f, _ := newDomainEndpoints(t)
	api := smClient(f, 1)
	for i := range 150 {
		spec := testDomainSpec()
		spec.Name = fmt.Sprintf("ml-research-%d", i) // contains ours
		in := spec
		in, _ = in.normalized()
		if _, err := api.CreateDomain(context.Background(), in.createInput()); err != nil {
			t.Fatal(err)
		}
	}
	res := ensureDomain(t, api, testDomainSpec())
	if res.Action != Created || f.Count("created:domain") != 151 || f.Count("ListDomains") != 2 {
		t.Errorf("result %+v, created %d, listed %d pages; want created as the 151st after reading 2 pages",
			res, f.Count("created:domain"), f.Count("ListDomains"))
	}
	if again := ensureDomain(t, api, testDomainSpec()); again.Action != Unchanged || again.ID != res.ID {
		t.Errorf("second ensure = %+v, want unchanged %s", again, res.ID)
	}
}

func TestDeleteDomainIsIdempotent(t *testing.T) {
	f, s := newDomainEndpoints(t)
	api, sso := smClient(f, 1), ssoClient(s, 1)
	ctx := context.Background()
	var slept int

	if err := DeleteDomain(ctx, api, "ml-research", "7", fastPoll(&slept)); err != nil {
		t.Fatalf("delete before create: %v", err)
	}
	res := ensureDomain(t, api, testDomainSpec())
	if _, err := EnsureGroupAssignment(ctx, sso, res.SSOApplicationARN, domainGroup); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := DeleteDomain(ctx, api, "ml-research", "7", fastPoll(&slept)); err != nil {
			t.Fatalf("delete %d: %v", i+1, err)
		}
	}
	if f.Domains() != 0 || f.Count("deleted:domain") != 1 || f.Count("DeleteDomain") != 1 {
		t.Errorf("stored %d, deleted %d (calls %d); want 0, 1, 1", f.Domains(), f.Count("deleted:domain"), f.Count("DeleteDomain"))
	}
	// The team's home directories outlive the domain.
	if f.Count("retained:home-efs") != 1 || f.Count("deleted:home-efs") != 0 {
		t.Errorf("home EFS retained %d, deleted %d; want retained", f.Count("retained:home-efs"), f.Count("deleted:home-efs"))
	}
	// The domain's application, and the assignment with it, are gone.
	if len(s.Applications()) != 0 {
		t.Errorf("applications after delete: %v", s.Applications())
	}
	if err := DeleteGroupAssignment(ctx, sso, res.SSOApplicationARN, domainGroup); err != nil {
		t.Errorf("delete assignment of a deleted domain: %v", err)
	}

	// The service's ResourceNotFound reaches us as the SDK's typed error.
	_, err := api.DescribeDomain(ctx, &sagemaker.DescribeDomainInput{DomainId: aws.String(res.ID)})
	var nf *types.ResourceNotFound
	if !errors.As(err, &nf) {
		t.Errorf("describing a deleted domain: %v, want *types.ResourceNotFound", err)
	}

	if again := ensureDomain(t, api, testDomainSpec()); again.Action != Created || again.ID == res.ID {
		t.Errorf("ensure after delete = %+v", again)
	}
}

func TestDeleteDomainWaitsForDeletion(t *testing.T) {
	f, _ := newDomainEndpoints(t)
	api := smClient(f, 1)
	res := ensureDomain(t, api, testDomainSpec())
	f.Set(func(f *awstest.SageMaker) { f.SettleAfter = 10 }) // more describes than a minute of polling makes
	var slept int
	err := DeleteDomain(context.Background(), api, "ml-research", "7", PollConfig{
		Interval: 10 * time.Second, Timeout: time.Minute,
		Sleep: func(context.Context, time.Duration) error { slept++; return nil },
	})
	var timeout *TimeoutError
	if !errors.As(err, &timeout) || timeout.Status != string(types.DomainStatusDeleting) || IsPermanent(err) {
		t.Fatalf("err = %v, want a transient timeout while Deleting", err)
	}
	// Ensure does not recreate a domain being deleted, and a later delete
	// waits for it without deleting again.
	if _, err := EnsureDomain(context.Background(), api, testDomainSpec(), fastPoll(&slept)); err == nil || IsPermanent(err) {
		t.Errorf("ensure while deleting: %v, want a transient error", err)
	}
	if err := DeleteDomain(context.Background(), api, "ml-research", "7", fastPoll(&slept)); err != nil {
		t.Fatal(err)
	}
	if f.Count("DeleteDomain") != 1 || f.Domain(res.ID).ID != "" || f.Count("created:domain") != 1 || f.Count("DescribeDomain") != 2+10 {
		t.Errorf("delete calls %d, stored %q, created %d, describes %d; want 1, gone, 1, 2+10",
			f.Count("DeleteDomain"), f.Domain(res.ID).ID, f.Count("created:domain"), f.Count("DescribeDomain"))
	}
}

func TestGroupAssignmentCreateUnchangedDelete(t *testing.T) {
	f, s := newDomainEndpoints(t)
	app := ensureDomain(t, smClient(f, 1), testDomainSpec()).SSOApplicationARN
	api, ctx := ssoClient(s, 1), context.Background()

	res, err := EnsureGroupAssignment(ctx, api, app, domainGroup)
	if err != nil || res.Action != Created || res.ID != domainGroup || res.ARN != app {
		t.Fatalf("first ensure = %+v, %v", res, err)
	}
	if got := s.Assignments(app); !slices.Equal(got, []string{"GROUP:" + domainGroup}) {
		t.Errorf("assignments = %v", got)
	}
	res, err = EnsureGroupAssignment(ctx, api, app, domainGroup)
	if err != nil || res.Action != Unchanged {
		t.Errorf("second ensure = %+v, %v; want unchanged", res, err)
	}
	if s.Count("CreateApplicationAssignment") != 1 || s.Count("created:assignment") != 1 {
		t.Errorf("create called %d, created %d; want 1, 1", s.Count("CreateApplicationAssignment"), s.Count("created:assignment"))
	}

	for i := range 2 {
		if err := DeleteGroupAssignment(ctx, api, app, domainGroup); err != nil {
			t.Fatalf("delete %d: %v", i+1, err)
		}
	}
	if len(s.Assignments(app)) != 0 || s.Count("deleted:assignment") != 1 {
		t.Errorf("assignments %v, deleted %d; want none, 1", s.Assignments(app), s.Count("deleted:assignment"))
	}
	if res, err := EnsureGroupAssignment(ctx, api, app, domainGroup); err != nil || res.Action != Created {
		t.Errorf("ensure after delete = %+v, %v; want created", res, err)
	}
}

// racingSSO creates the assignment itself just before the caller's create,
// as a concurrent run would between the caller's look-up and its create.
type racingSSO struct{ SSOAdminAPI }

func (r racingSSO) CreateApplicationAssignment(ctx context.Context, in *ssoadmin.CreateApplicationAssignmentInput, opts ...func(*ssoadmin.Options)) (*ssoadmin.CreateApplicationAssignmentOutput, error) {
	if _, err := r.SSOAdminAPI.CreateApplicationAssignment(ctx, in, opts...); err != nil {
		return nil, err
	}
	return r.SSOAdminAPI.CreateApplicationAssignment(ctx, in, opts...)
}

func TestGroupAssignmentConflictIsResolved(t *testing.T) {
	f, s := newDomainEndpoints(t)
	app := ensureDomain(t, smClient(f, 1), testDomainSpec()).SSOApplicationARN
	res, err := EnsureGroupAssignment(context.Background(), racingSSO{ssoClient(s, 1)}, app, domainGroup)
	if err != nil || res.Action != Unchanged {
		t.Errorf("ensure = %+v, %v; want unchanged after the conflict", res, err)
	}
	if s.Count("created:assignment") != 1 || s.Count("CreateApplicationAssignment") != 2 {
		t.Errorf("create called %d, created %d; want 2, 1", s.Count("CreateApplicationAssignment"), s.Count("created:assignment"))
	}
}

func TestGroupAssignmentToUnknownApplicationIsPermanent(t *testing.T) {
	s := awstest.NewSSOAdmin(t)
	const app = "arn:aws:sso::111122223333:application/ssoins-7223a1b2c3d4e5f6/apl-00000000000000ff"
	_, err := EnsureGroupAssignment(context.Background(), ssoClient(s, 3), app, domainGroup)
	var nf *ssotypes.ResourceNotFoundException
	if !errors.As(err, &nf) || !IsPermanent(err) || !strings.Contains(err.Error(), "Application "+app+" does not exist") {
		t.Fatalf("err = %v, want a permanent ResourceNotFoundException with the service's message", err)
	}
	if s.Count("CreateApplicationAssignment") != 1 || s.Count("created:assignment") != 0 {
		t.Errorf("create called %d, created %d; want 1, 0", s.Count("CreateApplicationAssignment"), s.Count("created:assignment"))
	}
}

// The endpoints refuse what the services refuse, through the real clients.
func TestDomainEndpointsAreStrict(t *testing.T) {
	f, s := newDomainEndpoints(t)
	sm, sso, ctx := smClient(f, 1), ssoClient(s, 1), context.Background()
	spec, _ := testDomainSpec().normalized()
	create := func(change func(*sagemaker.CreateDomainInput)) error {
		in := spec.createInput()
		change(in)
		_, err := sm.CreateDomain(ctx, in)
		return err
	}
	for name, change := range map[string]func(*sagemaker.CreateDomainInput){
		"auth mode":         func(in *sagemaker.CreateDomainInput) { in.AuthMode = "OIDC" },
		"network access":    func(in *sagemaker.CreateDomainInput) { in.AppNetworkAccessType = "Internet" },
		"no subnets":        func(in *sagemaker.CreateDomainInput) { in.SubnetIds = nil },
		"no VPC":            func(in *sagemaker.CreateDomainInput) { in.VpcId = nil },
		"subnet id":         func(in *sagemaker.CreateDomainInput) { in.SubnetIds = []string{"subnet_1"} },
		"VPC id":            func(in *sagemaker.CreateDomainInput) { in.VpcId = aws.String("vpc-xyz") },
		"security group id": func(in *sagemaker.CreateDomainInput) { in.DefaultUserSettings.SecurityGroups = []string{"default"} },
		"role ARN": func(in *sagemaker.CreateDomainInput) {
			in.DefaultUserSettings.ExecutionRole = aws.String("portal-team")
		},
		"no execution role":  func(in *sagemaker.CreateDomainInput) { in.DefaultUserSettings.ExecutionRole = nil },
		"VpcOnly, no groups": func(in *sagemaker.CreateDomainInput) { in.DefaultUserSettings.SecurityGroups = nil },
		"name":               func(in *sagemaker.CreateDomainInput) { in.DomainName = aws.String("ml research") },
	} {
		if err := create(change); !hasCode(err, "ValidationException") {
			t.Errorf("%s: err = %v, want ValidationException", name, err)
		}
	}
	if f.Domains() != 0 {
		t.Fatalf("%d domains stored from rejected creates", f.Domains())
	}

	out, err := sm.CreateDomain(ctx, spec.createInput())
	if err != nil {
		t.Fatal(err)
	}
	var inUse *types.ResourceInUse
	if err := create(func(*sagemaker.CreateDomainInput) {}); !errors.As(err, &inUse) {
		t.Errorf("duplicate name: err = %v, want *types.ResourceInUse", err)
	}
	_, err = sm.UpdateDomain(ctx, &sagemaker.UpdateDomainInput{DomainId: out.DomainId, DefaultUserSettings: &types.UserSettings{ExecutionRole: aws.String(domainRole)}})
	if !errors.As(err, &inUse) {
		t.Errorf("update while Pending: err = %v, want *types.ResourceInUse", err)
	}
	d, err := sm.DescribeDomain(ctx, &sagemaker.DescribeDomainInput{DomainId: out.DomainId})
	if err != nil || d.Status != types.DomainStatusPending || d.SingleSignOnApplicationArn != nil {
		t.Errorf("first describe: %v, status %s, application %v; want Pending with no application yet", err, d.Status, d.SingleSignOnApplicationArn)
	}
	d, err = sm.DescribeDomain(ctx, &sagemaker.DescribeDomainInput{DomainId: out.DomainId})
	if err != nil || d.Status != types.DomainStatusInService || aws.ToString(d.SingleSignOnApplicationArn) == "" ||
		aws.ToString(d.DefaultUserSettings.ExecutionRole) != domainRole || len(d.SubnetIds) != 2 || aws.ToString(d.VpcId) != domainVPC {
		t.Errorf("second describe: %v, %+v", err, d)
	}
	_, err = sm.UpdateDomain(ctx, &sagemaker.UpdateDomainInput{DomainId: out.DomainId, VpcId: aws.String("vpc-9a1b2c3d4e5f60718")})
	if !hasCode(err, "ValidationException") {
		t.Errorf("update of the VPC: err = %v, want ValidationException", err)
	}
	_, err = sm.DeleteDomain(ctx, &sagemaker.DeleteDomainInput{DomainId: out.DomainId, RetentionPolicy: &types.RetentionPolicy{HomeEfsFileSystem: "Keep"}})
	if !hasCode(err, "ValidationException") {
		t.Errorf("delete with retention Keep: err = %v, want ValidationException", err)
	}
	_, err = sm.DescribeDomain(ctx, &sagemaker.DescribeDomainInput{DomainId: aws.String("D-UPPER")})
	if !hasCode(err, "ValidationException") {
		t.Errorf("describe of a malformed id: err = %v, want ValidationException", err)
	}

	app := aws.ToString(d.SingleSignOnApplicationArn)
	assign := func(principalType ssotypes.PrincipalType, id string) error {
		_, err := sso.CreateApplicationAssignment(ctx, &ssoadmin.CreateApplicationAssignmentInput{
			ApplicationArn: aws.String(app), PrincipalId: aws.String(id), PrincipalType: principalType,
		})
		return err
	}
	if err := assign("ROLE", domainGroup); !hasCode(err, "ValidationException") {
		t.Errorf("principal type ROLE: err = %v, want ValidationException", err)
	}
	if err := assign(ssotypes.PrincipalTypeGroup, "ml-research"); !hasCode(err, "ValidationException") {
		t.Errorf("group name as principal id: err = %v, want ValidationException", err)
	}
	if err := assign(ssotypes.PrincipalTypeGroup, domainGroup); err != nil {
		t.Fatal(err)
	}
	var conflict *ssotypes.ConflictException
	if err := assign(ssotypes.PrincipalTypeGroup, domainGroup); !errors.As(err, &conflict) || IsPermanent(err) {
		t.Errorf("duplicate assignment: err = %v, want a transient *ConflictException", err)
	}
	list, err := sso.ListApplicationAssignments(ctx, &ssoadmin.ListApplicationAssignmentsInput{ApplicationArn: aws.String(app)})
	if err != nil || len(list.ApplicationAssignments) != 1 || aws.ToString(list.ApplicationAssignments[0].PrincipalId) != domainGroup ||
		list.ApplicationAssignments[0].PrincipalType != ssotypes.PrincipalTypeGroup {
		t.Errorf("list assignments: %v, %+v", err, list)
	}
	inst, err := sso.ListInstances(ctx, &ssoadmin.ListInstancesInput{})
	if err != nil || len(inst.Instances) != 1 || aws.ToString(inst.Instances[0].InstanceArn) != awstest.SSOInstanceARN ||
		aws.ToString(inst.Instances[0].IdentityStoreId) != awstest.SSOIdentityStoreID || !strings.Contains(app, awstest.SSOInstanceID) {
		t.Errorf("list instances: %v, %+v (application %s)", err, inst, app)
	}
}

// A domain with user profiles cannot be deleted: the revocation stops with
// a message saying what to do, rather than retrying until it gives up.
func TestDeleteDomainWithUserProfilesIsPermanent(t *testing.T) {
	f, _ := newDomainEndpoints(t)
	api := smClient(f, 1)
	var slept int
	ensureDomain(t, api, testDomainSpec())
	f.Set(func(f *awstest.SageMaker) { f.DomainUserProfiles = 3 })
	err := DeleteDomain(context.Background(), api, "ml-research", "7", fastPoll(&slept))
	var inUse *DomainInUseError
	if !errors.As(err, &inUse) || !IsPermanent(err) || !strings.Contains(err.Error(), "has 3 user profiles") || !strings.Contains(err.Error(), "on_revoke") {
		t.Fatalf("err = %v, want a permanent DomainInUseError with the service's message and what to do", err)
	}
	if f.Domains() != 1 || f.Count("deleted:domain") != 0 {
		t.Errorf("domains %d, deleted %d; want it still there", f.Domains(), f.Count("deleted:domain"))
	}
	f.Set(func(f *awstest.SageMaker) { f.DomainUserProfiles = 0 })
	if err := DeleteDomain(context.Background(), api, "ml-research", "7", fastPoll(&slept)); err != nil {
		t.Errorf("after the profiles are gone: %v", err)
	}
}
