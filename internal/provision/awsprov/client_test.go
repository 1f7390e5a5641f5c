package awsprov

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	smithy "github.com/aws/smithy-go"

	"github.com/hyperpod-governance/portal/internal/support/awstest"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// smClient is a real SageMaker client pointed at the test endpoint, with
// maxAttempts SDK attempts per call and no backoff.
func smClient(f *awstest.SageMaker, maxAttempts int) *sagemaker.Client {
	return sagemaker.NewFromConfig(awstest.Config(maxAttempts), func(o *sagemaker.Options) { o.BaseEndpoint = aws.String(f.URL()) })
}

// fastPoll polls without sleeping and records how often it would have slept.
func fastPoll(slept *int) PollConfig {
	return PollConfig{Interval: time.Second, Timeout: time.Minute, Sleep: func(ctx context.Context, d time.Duration) error {
		*slept++
		return ctx.Err()
	}}
}

func desired(t *testing.T, c workflow.Contract) *sagemaker.CreateComputeQuotaInput {
	t.Helper()
	in, err := ComputeQuotaFor(c, "", 7)
	if err != nil {
		t.Fatal(err)
	}
	return &in
}

func ensure(t *testing.T, api SageMakerAPI, c workflow.Contract) Result {
	t.Helper()
	var slept int
	res, err := EnsureComputeQuota(context.Background(), api, desired(t, c), fastPoll(&slept))
	if err != nil {
		t.Fatalf("EnsureComputeQuota: %v", err)
	}
	return res
}

func TestEnsureCreatesPollsThenIsUnchanged(t *testing.T) {
	f := awstest.NewSageMaker(t)
	api := smClient(f, 1)
	var slept int
	res, err := EnsureComputeQuota(context.Background(), api, desired(t, testContract()), fastPoll(&slept))
	if err != nil {
		t.Fatal(err)
	}
	if res.Action != Created || res.Version != 1 || res.ID == "" || !strings.HasSuffix(res.ARN, "/"+res.ID) {
		t.Errorf("result = %+v", res)
	}
	if f.Count("created:compute-quota") != 1 {
		t.Errorf("created %d quotas, want 1", f.Count("created:compute-quota"))
	}
	if slept != f.SettleAfter-1 || f.Count("DescribeComputeQuota") != f.SettleAfter {
		t.Errorf("slept %d times over %d describes; the quota settles after %d", slept, f.Count("DescribeComputeQuota"), f.SettleAfter)
	}
	q := f.Quota(res.ID)
	if q.Status != "Created" || *q.Target.TeamName != "ml-research" || *q.Config.ResourceSharingConfig.Strategy != "LendAndBorrow" ||
		len(q.Tags) != 2 || q.Activation != "Enabled" {
		t.Errorf("stored quota = %+v", q)
	}

	again := ensure(t, api, testContract())
	if again.Action != Unchanged || again.ID != res.ID || again.Version != 1 {
		t.Errorf("second ensure = %+v, want unchanged %s v1", again, res.ID)
	}
	if f.Count("CreateComputeQuota") != 1 || f.Count("UpdateComputeQuota") != 0 {
		t.Errorf("second ensure called create %d, update %d times; want 1, 0 in all",
			f.Count("CreateComputeQuota"), f.Count("UpdateComputeQuota"))
	}
}

// Each sharing and preemption value survives the round trip through the
// service's defaults: a second Ensure sees nothing to change.
func TestEnsureIsUnchangedForEveryPolicy(t *testing.T) {
	for _, sharing := range []workflow.Sharing{workflow.SharingLend, workflow.SharingNeither, workflow.SharingLendAndBorrow} {
		for _, preempt := range workflow.AllPreemptions {
			f := awstest.NewSageMaker(t)
			c := testContract()
			c.Scheduling.Sharing, c.Scheduling.Preemption, c.Scheduling.BorrowLimitPercent = sharing, preempt, 0
			c.Scheduling.FairShareWeight = 0
			ensure(t, smClient(f, 1), c)
			if res := ensure(t, smClient(f, 1), c); res.Action != Unchanged {
				t.Errorf("%s/%s: second ensure %s", sharing, preempt, res.Action)
			}
		}
	}
}

func TestEnsureUpdatesWithTargetVersion(t *testing.T) {
	f := awstest.NewSageMaker(t)
	api := smClient(f, 1)
	first := ensure(t, api, testContract())

	c := testContract()
	c.Scheduling.Guaranteed[0].Count = 8
	c.Scheduling.FairShareWeight = 80
	res := ensure(t, api, c)
	if res.Action != Updated || res.ID != first.ID || res.Version != 2 {
		t.Errorf("update = %+v, want updated %s v2", res, first.ID)
	}
	q := f.Quota(first.ID)
	if *q.Config.ComputeQuotaResources[0].Count != 8 || *q.Target.FairShareWeight != 80 || q.Status != "Updated" {
		t.Errorf("stored quota after update: resources %+v, target %+v, status %s", q.Config.ComputeQuotaResources, q.Target, q.Status)
	}

	c.Scheduling.Sharing, c.Scheduling.BorrowLimitPercent = workflow.SharingNeither, 0
	if res := ensure(t, api, c); res.Action != Updated || res.Version != 3 {
		t.Errorf("second update = %+v, want updated v3", res)
	}
	if *f.Quota(first.ID).Config.ResourceSharingConfig.Strategy != "DontLend" {
		t.Errorf("strategy not updated")
	}
	if f.Count("created:compute-quota") != 1 || f.Count("updated:compute-quota") != 2 {
		t.Errorf("created %d, updated %d; want 1, 2", f.Count("created:compute-quota"), f.Count("updated:compute-quota"))
	}

	// A stale TargetVersion is a ConflictException, which is transient: the
	// next run reads the current version.
	_, err := api.UpdateComputeQuota(context.Background(), &sagemaker.UpdateComputeQuotaInput{
		ComputeQuotaId: aws.String(first.ID), TargetVersion: aws.Int32(1),
	})
	var conflict *types.ConflictException
	if !errors.As(err, &conflict) || IsPermanent(err) {
		t.Errorf("stale TargetVersion: err = %v, want a transient ConflictException", err)
	}
}

func TestEnsureSurvivesThrottlingStorm(t *testing.T) {
	t.Run("SDK retries", func(t *testing.T) {
		f := awstest.NewSageMaker(t)
		f.Throttle(3)
		res := ensure(t, smClient(f, 5), testContract())
		if res.Action != Created || f.Count("created:compute-quota") != 1 || f.Quotas() != 1 {
			t.Errorf("result %+v, created %d, stored %d; want exactly one", res, f.Count("created:compute-quota"), f.Quotas())
		}
		if f.Count("ListComputeQuotas") != 4 {
			t.Errorf("list called %d times, want 3 throttled + 1", f.Count("ListComputeQuotas"))
		}
	})
	t.Run("job retries", func(t *testing.T) {
		// Without SDK retries each throttled call fails the step with a
		// transient error, and the job runs it again.
		f := awstest.NewSageMaker(t)
		f.Throttle(3)
		api := smClient(f, 1)
		var res Result
		var err error
		runs := 0
		for runs = 1; runs <= 10; runs++ {
			var slept int
			res, err = EnsureComputeQuota(context.Background(), api, desired(t, testContract()), fastPoll(&slept))
			if err == nil {
				break
			}
			if IsPermanent(err) || !strings.Contains(err.Error(), "ThrottlingException") {
				t.Fatalf("run %d: %v, want a transient throttling error", runs, err)
			}
		}
		if err != nil || runs != 4 || res.Action != Created || f.Count("created:compute-quota") != 1 {
			t.Errorf("after %d runs: %+v, %v, created %d; want created once on run 4", runs, res, err, f.Count("created:compute-quota"))
		}
	})
	t.Run("throttled while polling", func(t *testing.T) {
		f := awstest.NewSageMaker(t)
		f.Set(func(f *awstest.SageMaker) { f.SettleAfter = 5 })
		api := smClient(f, 1)
		var slept int
		_, err := EnsureComputeQuota(context.Background(), api, desired(t, testContract()), PollConfig{
			Interval: time.Second, Timeout: time.Minute,
			Sleep: func(context.Context, time.Duration) error {
				slept++
				if slept == 2 {
					f.Throttle(1)
				}
				return nil
			},
		})
		if err == nil || IsPermanent(err) {
			t.Fatalf("err = %v, want transient", err)
		}
		if res := ensure(t, api, testContract()); res.Action != Unchanged || f.Count("created:compute-quota") != 1 {
			t.Errorf("rerun = %+v, created %d; want unchanged, 1", res, f.Count("created:compute-quota"))
		}
	})
}

func TestEnsureLostCreateResponseCreatesOnce(t *testing.T) {
	f := awstest.NewSageMaker(t)
	f.Set(func(f *awstest.SageMaker) { f.LoseCreateResponses = 1 })
	res := ensure(t, smClient(f, 3), testContract())
	if f.Count("created:compute-quota") != 1 || f.Count("CreateComputeQuota") != 2 || f.Quotas() != 1 {
		t.Errorf("create calls %d, created %d, stored %d; want 2, 1, 1", f.Count("CreateComputeQuota"), f.Count("created:compute-quota"), f.Quotas())
	}
	if res.Version != 1 || res.ID == "" {
		t.Errorf("result = %+v", res)
	}
}

func TestEnsureCreateFailedReportsReason(t *testing.T) {
	f := awstest.NewSageMaker(t)
	const reason = "Insufficient capacity: instance group has 2 ml.p5.48xlarge, quota asks for 4"
	f.Set(func(f *awstest.SageMaker) { f.CreateFailure = reason })
	api := smClient(f, 1)
	for run := 1; run <= 2; run++ {
		var slept int
		_, err := EnsureComputeQuota(context.Background(), api, desired(t, testContract()), fastPoll(&slept))
		var failed *FailedError
		if !errors.As(err, &failed) || failed.Status != string(types.SchedulerResourceStatusCreateFailed) ||
			!strings.Contains(err.Error(), reason) || !IsPermanent(err) {
			t.Errorf("run %d: err = %v, want a permanent CreateFailed error with the reason", run, err)
		}
	}
	if f.Count("created:compute-quota") != 1 {
		t.Errorf("created %d, want 1: a failed quota is reported, not created again", f.Count("created:compute-quota"))
	}
}

func TestEnsureRejectedIsPermanent(t *testing.T) {
	f := awstest.NewSageMaker(t)
	c := testContract()
	c.Scheduling.Guaranteed[0].InstanceType = "ml.bogus.xlarge"
	var slept int
	_, err := EnsureComputeQuota(context.Background(), smClient(f, 3), desired(t, c), fastPoll(&slept))
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationException" || !IsPermanent(err) {
		t.Fatalf("err = %v, want a permanent ValidationException", err)
	}
	if !strings.Contains(err.Error(), "ml.bogus.xlarge") {
		t.Errorf("err = %v: lacks the service's message", err)
	}
	if f.Count("CreateComputeQuota") != 1 || f.Count("created:compute-quota") != 0 {
		t.Errorf("create called %d times (created %d); a permanent error is not retried", f.Count("CreateComputeQuota"), f.Count("created:compute-quota"))
	}
}

func TestEnsurePollTimeout(t *testing.T) {
	f := awstest.NewSageMaker(t)
	f.Set(func(f *awstest.SageMaker) { f.SettleAfter = 1000 })
	var slept int
	_, err := EnsureComputeQuota(context.Background(), smClient(f, 1), desired(t, testContract()), PollConfig{
		Interval: 10 * time.Second, Timeout: time.Minute,
		Sleep: func(context.Context, time.Duration) error { slept++; return nil },
	})
	var timeout *TimeoutError
	if !errors.As(err, &timeout) || timeout.Status != string(types.SchedulerResourceStatusCreating) || IsPermanent(err) {
		t.Fatalf("err = %v, want a transient timeout while Creating", err)
	}
	if slept != 6 {
		t.Errorf("slept %d times, want 6 (1m / 10s)", slept)
	}
}

func TestDeleteComputeQuotaIsIdempotent(t *testing.T) {
	f := awstest.NewSageMaker(t)
	api := smClient(f, 1)
	ctx := context.Background()
	name := QuotaName(testContract().Team)

	team := testContract().Team
	if err := DeleteComputeQuota(ctx, api, name, team, testCluster, "7"); err != nil {
		t.Fatalf("delete before create: %v", err)
	}
	res := ensure(t, api, testContract())
	f.Set(func(f *awstest.SageMaker) { f.SettleAfter = 5 }) // Deleting for 5 calls
	for i := range 2 {
		if err := DeleteComputeQuota(ctx, api, name, team, testCluster, "7"); err != nil {
			t.Fatalf("delete %d: %v", i+1, err)
		}
	}
	if f.Quotas() != 0 || f.Count("deleted:compute-quota") != 1 || f.Count("DeleteComputeQuota") != 1 {
		t.Errorf("stored %d, deleted %d, delete calls %d; want 0, 1, 1", f.Quotas(), f.Count("deleted:compute-quota"), f.Count("DeleteComputeQuota"))
	}

	// The service's ResourceNotFound reaches us as the SDK's typed error.
	_, err := api.DeleteComputeQuota(ctx, &sagemaker.DeleteComputeQuotaInput{ComputeQuotaId: aws.String(res.ID)})
	var nf *types.ResourceNotFound
	if !errors.As(err, &nf) {
		t.Errorf("deleting a deleted quota: %v, want *types.ResourceNotFound", err)
	}

	// Deletion takes time: while the quota is Deleting, Ensure waits
	// (transient); once it is Deleted, though still listed, Ensure creates
	// a new one.
	var slept int
	if _, err := EnsureComputeQuota(ctx, api, desired(t, testContract()), fastPoll(&slept)); !errors.Is(err, errQuotaDeleting) || IsPermanent(err) {
		t.Fatalf("ensure while deleting: %v, want a transient 'being deleted'", err)
	}
	for f.Quota(res.ID).Status != string(types.SchedulerResourceStatusDeleted) {
		if _, err := api.ListComputeQuotas(ctx, &sagemaker.ListComputeQuotasInput{}); err != nil {
			t.Fatal(err)
		}
	}
	f.Set(func(f *awstest.SageMaker) { f.SettleAfter = 2 })
	again := ensure(t, api, testContract())
	if f.Quota(res.ID).Status != string(types.SchedulerResourceStatusDeleted) {
		t.Errorf("the deleted quota is %q, want still listed as Deleted", f.Quota(res.ID).Status)
	}
	if again.Action != Created || again.ID == res.ID {
		t.Errorf("ensure after delete = %+v", again)
	}
}

// Only the quota with exactly the team's name on this cluster is ours.
func TestEnsureMatchesExactNameAndCluster(t *testing.T) {
	f := awstest.NewSageMaker(t)
	api := smClient(f, 1)
	other := testContract()
	other.Team = "ml-research-2" // its quota name contains ours
	ensure(t, api, other)
	elsewhere := testContract()
	elsewhere.ClusterARN = "arn:aws:sagemaker:us-east-1:123456789012:cluster/zzzzzzzzzzzz"
	ensure(t, api, elsewhere)

	res := ensure(t, api, testContract())
	if res.Action != Created || f.Count("created:compute-quota") != 3 {
		t.Errorf("result %+v, created %d; want a third quota", res, f.Count("created:compute-quota"))
	}
}

func TestIsPermanent(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("dial tcp: connection refused"), false},
		{context.DeadlineExceeded, false},
		{&smithy.GenericAPIError{Code: "ValidationException"}, true},
		{&smithy.GenericAPIError{Code: "AccessDeniedException"}, true},
		{&types.ResourceLimitExceeded{}, true},
		{&smithy.GenericAPIError{Code: "ThrottlingException"}, false},
		{&types.ConflictException{}, false},
		{&types.ResourceNotFound{}, false},
		{fmt.Errorf("compute quota: %w", ErrBorrowOnly), true},
		{fmt.Errorf("wrapped: %w", &FailedError{Status: string(types.SchedulerResourceStatusCreateFailed)}), true},
		{&TimeoutError{}, false},
		{&smithy.GenericAPIError{Code: "UnauthorizedException"}, true},
		{&smithy.GenericAPIError{Code: "ServiceQuotaExceededException"}, true},
		// A connection deleted between two calls: a rerun resolves it.
		{&smithy.GenericAPIError{Code: "ResourceNotFoundException"}, false},
		{fmt.Errorf("step: %w", &DataZoneSetupError{Reason: "no environment", Err: &smithy.GenericAPIError{Code: "ResourceNotFoundException"}}), true},
		// EKS: bad input, a cluster state an operator must change, limits.
		{&ekstypes.InvalidParameterException{}, true},
		{&ekstypes.InvalidRequestException{}, true},
		{&ekstypes.ClientException{}, true},
		{&ekstypes.ResourceLimitExceededException{}, true},
		{&ekstypes.AccessDeniedException{}, true},
		// A conflict (a create racing another, or its lost response retried)
		// and throttling resolve on a rerun.
		{&ekstypes.ResourceInUseException{}, false},
		{&ekstypes.ThrottlingException{}, false},
		{&ekstypes.ServerException{}, false},
		// Missing entry or association, deleted between two calls: transient;
		// a missing cluster, known from a create, is permanent.
		{&ekstypes.ResourceNotFoundException{}, false},
		{fmt.Errorf("step: %w", &ClusterNotFoundError{Cluster: "c", Err: &ekstypes.ResourceNotFoundException{}}), true},
	} {
		if got := IsPermanent(tc.err); got != tc.want {
			t.Errorf("IsPermanent(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}

	// A 5xx from the service, through the real client, is transient.
	f := awstest.NewSageMaker(t)
	f.Fail(1)
	_, err := smClient(f, 1).ListComputeQuotas(context.Background(), &sagemaker.ListComputeQuotasInput{})
	if err == nil || IsPermanent(err) {
		t.Errorf("5xx: err = %v, want transient", err)
	}
}
