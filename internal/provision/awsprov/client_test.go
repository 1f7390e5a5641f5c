package awsprov

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	smithy "github.com/aws/smithy-go"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

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
	f := newFakeSageMaker(t)
	api := f.client(1)
	var slept int
	res, err := EnsureComputeQuota(context.Background(), api, desired(t, testContract()), fastPoll(&slept))
	if err != nil {
		t.Fatal(err)
	}
	if res.Action != Created || res.Version != 1 || res.ID == "" || !strings.HasSuffix(res.ARN, "/"+res.ID) {
		t.Errorf("result = %+v", res)
	}
	if f.count("created") != 1 {
		t.Errorf("created %d quotas, want 1", f.count("created"))
	}
	if slept != f.settleAfter-1 || f.count("DescribeComputeQuota") != f.settleAfter {
		t.Errorf("slept %d times over %d describes; the quota settles after %d", slept, f.count("DescribeComputeQuota"), f.settleAfter)
	}
	q := f.quota(res.ID)
	if q.Status != "Created" || *q.Target.TeamName != "ml-research" || *q.Config.ResourceSharingConfig.Strategy != "LendAndBorrow" ||
		len(q.Tags) != 2 || q.Activation != "Enabled" {
		t.Errorf("stored quota = %+v", q)
	}

	again := ensure(t, api, testContract())
	if again.Action != Unchanged || again.ID != res.ID || again.Version != 1 {
		t.Errorf("second ensure = %+v, want unchanged %s v1", again, res.ID)
	}
	if f.count("CreateComputeQuota") != 1 || f.count("UpdateComputeQuota") != 0 {
		t.Errorf("second ensure called create %d, update %d times; want 1, 0 in all",
			f.count("CreateComputeQuota"), f.count("UpdateComputeQuota"))
	}
}

// Each sharing and preemption value survives the round trip through the
// service's defaults: a second Ensure sees nothing to change.
func TestEnsureIsUnchangedForEveryPolicy(t *testing.T) {
	for _, sharing := range []workflow.Sharing{workflow.SharingLend, workflow.SharingNeither, workflow.SharingLendAndBorrow} {
		for _, preempt := range workflow.AllPreemptions {
			f := newFakeSageMaker(t)
			c := testContract()
			c.Scheduling.Sharing, c.Scheduling.Preemption, c.Scheduling.BorrowLimitPercent = sharing, preempt, 0
			c.Scheduling.FairShareWeight = 0
			ensure(t, f.client(1), c)
			if res := ensure(t, f.client(1), c); res.Action != Unchanged {
				t.Errorf("%s/%s: second ensure %s", sharing, preempt, res.Action)
			}
		}
	}
}

func TestEnsureUpdatesWithTargetVersion(t *testing.T) {
	f := newFakeSageMaker(t)
	api := f.client(1)
	first := ensure(t, api, testContract())

	c := testContract()
	c.Scheduling.Guaranteed[0].Count = 8
	c.Scheduling.FairShareWeight = 80
	res := ensure(t, api, c)
	if res.Action != Updated || res.ID != first.ID || res.Version != 2 {
		t.Errorf("update = %+v, want updated %s v2", res, first.ID)
	}
	q := f.quota(first.ID)
	if *q.Config.ComputeQuotaResources[0].Count != 8 || *q.Target.FairShareWeight != 80 || q.Status != "Updated" {
		t.Errorf("stored quota after update: resources %+v, target %+v, status %s", q.Config.ComputeQuotaResources, q.Target, q.Status)
	}

	c.Scheduling.Sharing, c.Scheduling.BorrowLimitPercent = workflow.SharingNeither, 0
	if res := ensure(t, api, c); res.Action != Updated || res.Version != 3 {
		t.Errorf("second update = %+v, want updated v3", res)
	}
	if *f.quota(first.ID).Config.ResourceSharingConfig.Strategy != "DontLend" {
		t.Errorf("strategy not updated")
	}
	if f.count("created") != 1 || f.count("updated") != 2 {
		t.Errorf("created %d, updated %d; want 1, 2", f.count("created"), f.count("updated"))
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
		f := newFakeSageMaker(t)
		f.set(func(f *fakeSageMaker) { f.throttleNext = 3 })
		res := ensure(t, f.client(5), testContract())
		if res.Action != Created || f.count("created") != 1 || f.stored() != 1 {
			t.Errorf("result %+v, created %d, stored %d; want exactly one", res, f.count("created"), f.stored())
		}
		if f.count("ListComputeQuotas") != 4 {
			t.Errorf("list called %d times, want 3 throttled + 1", f.count("ListComputeQuotas"))
		}
	})
	t.Run("job retries", func(t *testing.T) {
		// Without SDK retries each throttled call fails the step with a
		// transient error, and the job runs it again.
		f := newFakeSageMaker(t)
		f.set(func(f *fakeSageMaker) { f.throttleNext = 3 })
		api := f.client(1)
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
		if err != nil || runs != 4 || res.Action != Created || f.count("created") != 1 {
			t.Errorf("after %d runs: %+v, %v, created %d; want created once on run 4", runs, res, err, f.count("created"))
		}
	})
	t.Run("throttled while polling", func(t *testing.T) {
		f := newFakeSageMaker(t)
		f.set(func(f *fakeSageMaker) { f.settleAfter = 5 })
		api := f.client(1)
		var slept int
		_, err := EnsureComputeQuota(context.Background(), api, desired(t, testContract()), PollConfig{
			Interval: time.Second, Timeout: time.Minute,
			Sleep: func(context.Context, time.Duration) error {
				slept++
				if slept == 2 {
					f.set(func(f *fakeSageMaker) { f.throttleNext = 1 })
				}
				return nil
			},
		})
		if err == nil || IsPermanent(err) {
			t.Fatalf("err = %v, want transient", err)
		}
		if res := ensure(t, api, testContract()); res.Action != Unchanged || f.count("created") != 1 {
			t.Errorf("rerun = %+v, created %d; want unchanged, 1", res, f.count("created"))
		}
	})
}

func TestEnsureLostCreateResponseCreatesOnce(t *testing.T) {
	f := newFakeSageMaker(t)
	f.set(func(f *fakeSageMaker) { f.loseCreateResponses = 1 })
	res := ensure(t, f.client(3), testContract())
	if f.count("created") != 1 || f.count("CreateComputeQuota") != 2 || f.stored() != 1 {
		t.Errorf("create calls %d, created %d, stored %d; want 2, 1, 1", f.count("CreateComputeQuota"), f.count("created"), f.stored())
	}
	if res.Version != 1 || res.ID == "" {
		t.Errorf("result = %+v", res)
	}
}

func TestEnsureCreateFailedReportsReason(t *testing.T) {
	f := newFakeSageMaker(t)
	const reason = "Insufficient capacity: instance group has 2 ml.p5.48xlarge, quota asks for 4"
	f.set(func(f *fakeSageMaker) { f.createFailure = reason })
	api := f.client(1)
	for run := 1; run <= 2; run++ {
		var slept int
		_, err := EnsureComputeQuota(context.Background(), api, desired(t, testContract()), fastPoll(&slept))
		var failed *FailedError
		if !errors.As(err, &failed) || failed.Status != types.SchedulerResourceStatusCreateFailed ||
			!strings.Contains(err.Error(), reason) || !IsPermanent(err) {
			t.Errorf("run %d: err = %v, want a permanent CreateFailed error with the reason", run, err)
		}
	}
	if f.count("created") != 1 {
		t.Errorf("created %d, want 1: a failed quota is reported, not created again", f.count("created"))
	}
}

func TestEnsureRejectedIsPermanent(t *testing.T) {
	f := newFakeSageMaker(t)
	c := testContract()
	c.Scheduling.Guaranteed[0].InstanceType = "ml.bogus.xlarge"
	var slept int
	_, err := EnsureComputeQuota(context.Background(), f.client(3), desired(t, c), fastPoll(&slept))
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationException" || !IsPermanent(err) {
		t.Fatalf("err = %v, want a permanent ValidationException", err)
	}
	if !strings.Contains(err.Error(), "ml.bogus.xlarge") {
		t.Errorf("err = %v: lacks the service's message", err)
	}
	if f.count("CreateComputeQuota") != 1 || f.count("created") != 0 {
		t.Errorf("create called %d times (created %d); a permanent error is not retried", f.count("CreateComputeQuota"), f.count("created"))
	}
}

func TestEnsurePollTimeout(t *testing.T) {
	f := newFakeSageMaker(t)
	f.set(func(f *fakeSageMaker) { f.settleAfter = 1000 })
	var slept int
	_, err := EnsureComputeQuota(context.Background(), f.client(1), desired(t, testContract()), PollConfig{
		Interval: 10 * time.Second, Timeout: time.Minute,
		Sleep: func(context.Context, time.Duration) error { slept++; return nil },
	})
	var timeout *TimeoutError
	if !errors.As(err, &timeout) || timeout.Status != types.SchedulerResourceStatusCreating || IsPermanent(err) {
		t.Fatalf("err = %v, want a transient timeout while Creating", err)
	}
	if slept != 6 {
		t.Errorf("slept %d times, want 6 (1m / 10s)", slept)
	}
}

func TestDeleteComputeQuotaIsIdempotent(t *testing.T) {
	f := newFakeSageMaker(t)
	api := f.client(1)
	ctx := context.Background()
	name := QuotaName(testContract().Team)

	if err := DeleteComputeQuota(ctx, api, name, testCluster); err != nil {
		t.Fatalf("delete before create: %v", err)
	}
	res := ensure(t, api, testContract())
	for i := range 2 {
		if err := DeleteComputeQuota(ctx, api, name, testCluster); err != nil {
			t.Fatalf("delete %d: %v", i+1, err)
		}
	}
	if f.stored() != 0 || f.count("deleted") != 1 {
		t.Errorf("stored %d, deleted %d; want 0, 1", f.stored(), f.count("deleted"))
	}

	// The service's ResourceNotFound reaches us as the SDK's typed error.
	_, err := api.DeleteComputeQuota(ctx, &sagemaker.DeleteComputeQuotaInput{ComputeQuotaId: aws.String(res.ID)})
	var nf *types.ResourceNotFound
	if !errors.As(err, &nf) {
		t.Errorf("deleting a deleted quota: %v, want *types.ResourceNotFound", err)
	}

	// Ensure after delete creates it again.
	if again := ensure(t, api, testContract()); again.Action != Created || again.ID == res.ID {
		t.Errorf("ensure after delete = %+v", again)
	}
}

// Only the quota with exactly the team's name on this cluster is ours.
func TestEnsureMatchesExactNameAndCluster(t *testing.T) {
	f := newFakeSageMaker(t)
	api := f.client(1)
	other := testContract()
	other.Team = "ml-research-2" // its quota name contains ours
	ensure(t, api, other)
	elsewhere := testContract()
	elsewhere.ClusterARN = "arn:aws:sagemaker:us-east-1:123456789012:cluster/zzzzzzzzzzzz"
	ensure(t, api, elsewhere)

	res := ensure(t, api, testContract())
	if res.Action != Created || f.count("created") != 3 {
		t.Errorf("result %+v, created %d; want a third quota", res, f.count("created"))
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
		{fmt.Errorf("wrapped: %w", &FailedError{Status: types.SchedulerResourceStatusCreateFailed}), true},
		{&TimeoutError{}, false},
	} {
		if got := IsPermanent(tc.err); got != tc.want {
			t.Errorf("IsPermanent(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}

	// A 5xx from the service, through the real client, is transient.
	f := newFakeSageMaker(t)
	f.set(func(f *fakeSageMaker) { f.failNext = 1 })
	_, err := f.client(1).ListComputeQuotas(context.Background(), &sagemaker.ListComputeQuotasInput{})
	if err == nil || IsPermanent(err) {
		t.Errorf("5xx: err = %v, want transient", err)
	}
}
