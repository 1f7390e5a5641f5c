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
	smithy "github.com/aws/smithy-go"

	"github.com/hyperpod-governance/portal/internal/support/awstest"
)

func testClasses() []SchedulerPriorityClass {
	return []SchedulerPriorityClass{{"inference", 100}, {"training", 50}, {"experimentation", 0}}
}

func schedulerSpec(t *testing.T, classes []SchedulerPriorityClass, fairShare bool) SchedulerSpec {
	t.Helper()
	s, err := SchedulerSpecFor(testCluster, classes, fairShare)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ensureScheduler(t *testing.T, api SchedulerAPI, want SchedulerSpec) Result {
	t.Helper()
	var slept int
	res, err := EnsureSchedulerConfig(context.Background(), api, want, fastPoll(&slept))
	if err != nil {
		t.Fatalf("EnsureSchedulerConfig: %v", err)
	}
	return res
}

func TestSchedulerSpecFor(t *testing.T) {
	s, err := SchedulerSpecFor(testCluster, testClasses(), true)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "abcdefghij12-portal-scheduler" || s.ClusterARN != testCluster || !s.FairShare || len(s.PriorityClasses) != 3 {
		t.Errorf("spec = %+v", s)
	}
	if !entityNamePattern.MatchString(s.Name) || len(s.Name) > 63 {
		t.Errorf("name %q is outside the API's pattern", s.Name)
	}

	long := strings.Repeat("a", 64)
	eleven := make([]SchedulerPriorityClass, 11)
	for i := range eleven {
		eleven[i] = SchedulerPriorityClass{Name: fmt.Sprintf("c%d", i), Weight: i}
	}
	for _, tc := range []struct {
		name    string
		cluster string
		classes []SchedulerPriorityClass
		want    string
	}{
		{"not a cluster ARN", "arn:aws:eks:us-east-1:123456789012:cluster/abcdefghij12", nil, "not a HyperPod cluster ARN"},
		{"empty cluster", "", nil, "not a HyperPod cluster ARN"},
		{"uppercase class", testCluster, []SchedulerPriorityClass{{"Training", 1}}, "not a DNS label"},
		{"leading hyphen", testCluster, []SchedulerPriorityClass{{"-training", 1}}, "not a DNS label"},
		{"empty class", testCluster, []SchedulerPriorityClass{{"", 1}}, "not a DNS label"},
		{"64 characters", testCluster, []SchedulerPriorityClass{{long, 1}}, "not a DNS label"},
		{"weight above 100", testCluster, []SchedulerPriorityClass{{"training", 101}}, "not 0-100"},
		{"negative weight", testCluster, []SchedulerPriorityClass{{"training", -1}}, "not 0-100"},
		{"duplicate", testCluster, []SchedulerPriorityClass{{"training", 1}, {"training", 2}}, "given twice"},
		{"eleven classes", testCluster, eleven, "at most 10"},
	} {
		_, err := SchedulerSpecFor(tc.cluster, tc.classes, true)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !IsPermanent(err) {
			t.Errorf("%s: err = %v, want a permanent error containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := SchedulerSpecFor(testCluster, []SchedulerPriorityClass{{strings.Repeat("a", 63), 0}, {"b", 100}}, false); err != nil {
		t.Errorf("63-character name, weights 0 and 100: %v", err)
	}
}

func TestEnsureSchedulerCreatesPollsThenIsUnchanged(t *testing.T) {
	f := awstest.NewSageMaker(t)
	api := smClient(f, 1)
	var slept int
	res, err := EnsureSchedulerConfig(context.Background(), api, schedulerSpec(t, testClasses(), true), fastPoll(&slept))
	if err != nil {
		t.Fatal(err)
	}
	if res.Action != Created || res.Version != 1 || res.ID == "" || !strings.HasSuffix(res.ARN, "/"+res.ID) {
		t.Errorf("result = %+v", res)
	}
	if f.Count("created:scheduler-config") != 1 || f.SchedulerConfigs() != 1 {
		t.Errorf("created %d, stored %d; want 1, 1", f.Count("created:scheduler-config"), f.SchedulerConfigs())
	}
	if slept != f.SettleAfter-1 || f.Count("DescribeClusterSchedulerConfig") != f.SettleAfter {
		t.Errorf("slept %d times over %d describes; the config settles after %d", slept, f.Count("DescribeClusterSchedulerConfig"), f.SettleAfter)
	}
	s := f.SchedulerConfig(res.ID)
	if s.Status != "Created" || s.Name != "abcdefghij12-portal-scheduler" || s.ClusterArn != testCluster || s.FairShare() != "Enabled" ||
		!slices.Equal(s.PriorityClasses(), []string{"inference=100", "training=50", "experimentation=0"}) {
		t.Errorf("stored config = %+v, classes %v", s, s.PriorityClasses())
	}

	// The same classes in another order are the same config.
	reordered := testClasses()
	slices.Reverse(reordered)
	again := ensureScheduler(t, api, schedulerSpec(t, reordered, true))
	if again.Action != Unchanged || again.ID != res.ID || again.Version != 1 {
		t.Errorf("second ensure = %+v, want unchanged %s v1", again, res.ID)
	}
	if f.Count("CreateClusterSchedulerConfig") != 1 || f.Count("UpdateClusterSchedulerConfig") != 0 ||
		f.Count("created:scheduler-config") != 1 || f.Count("updated:scheduler-config") != 0 {
		t.Errorf("after the second ensure: %v; want 1 create and no update in all", f.Counts())
	}
}

func TestEnsureSchedulerUpdatesWithTargetVersion(t *testing.T) {
	f := awstest.NewSageMaker(t)
	api := smClient(f, 1)
	first := ensureScheduler(t, api, schedulerSpec(t, testClasses(), true))

	classes := testClasses()
	classes[1].Weight = 70
	res := ensureScheduler(t, api, schedulerSpec(t, classes, true))
	if res.Action != Updated || res.ID != first.ID || res.Version != 2 {
		t.Errorf("update = %+v, want updated %s v2", res, first.ID)
	}
	s := f.SchedulerConfig(first.ID)
	if !slices.Contains(s.PriorityClasses(), "training=70") || s.Status != "Updated" || s.Version != 2 {
		t.Errorf("stored config after update: classes %v, status %s, v%d", s.PriorityClasses(), s.Status, s.Version)
	}

	// Fair share alone is a change too.
	if res := ensureScheduler(t, api, schedulerSpec(t, classes, false)); res.Action != Updated || res.Version != 3 {
		t.Errorf("second update = %+v, want updated v3", res)
	}
	if fs := f.SchedulerConfig(first.ID).FairShare(); fs != "Disabled" {
		t.Errorf("FairShare = %s, want Disabled", fs)
	}
	// A removed class is a change.
	if res := ensureScheduler(t, api, schedulerSpec(t, classes[:2], false)); res.Action != Updated || res.Version != 4 {
		t.Errorf("third update = %+v, want updated v4", res)
	}
	if got := f.SchedulerConfig(first.ID).PriorityClasses(); len(got) != 2 {
		t.Errorf("classes after removing one: %v", got)
	}
	if f.Count("created:scheduler-config") != 1 || f.Count("updated:scheduler-config") != 3 || f.SchedulerConfigs() != 1 {
		t.Errorf("created %d, updated %d, stored %d; want 1, 3, 1",
			f.Count("created:scheduler-config"), f.Count("updated:scheduler-config"), f.SchedulerConfigs())
	}

	// A stale TargetVersion is a ConflictException, which is transient: the
	// next run reads the current version.
	_, err := api.UpdateClusterSchedulerConfig(context.Background(), &sagemaker.UpdateClusterSchedulerConfigInput{
		ClusterSchedulerConfigId: aws.String(first.ID), TargetVersion: aws.Int32(1),
	})
	var conflict *types.ConflictException
	if !errors.As(err, &conflict) || IsPermanent(err) {
		t.Errorf("stale TargetVersion: err = %v, want a transient ConflictException", err)
	}
}

// A config made in the console under its own name is the cluster's one
// config: it is adopted and updated, never joined by a second.
func TestEnsureSchedulerAdoptsConfigUnderAnotherName(t *testing.T) {
	f := awstest.NewSageMaker(t)
	api := smClient(f, 1)
	ctx := context.Background()
	console, err := api.CreateClusterSchedulerConfig(ctx, &sagemaker.CreateClusterSchedulerConfigInput{
		Name:       aws.String("console-policy"),
		ClusterArn: aws.String(testCluster),
		SchedulerConfig: &types.SchedulerConfig{
			PriorityClasses:     []types.PriorityClass{{Name: aws.String("training"), Weight: aws.Int32(10)}},
			IdleResourceSharing: types.IdleResourceSharingDisabled,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(console.ClusterSchedulerConfigId)

	res := ensureScheduler(t, api, schedulerSpec(t, testClasses(), true))
	if res.Action != Updated || res.ID != id || res.Version != 2 {
		t.Errorf("result = %+v, want the console's config %s updated to v2", res, id)
	}
	s := f.SchedulerConfig(id)
	if s.Name != "console-policy" || len(s.PriorityClasses()) != 3 || s.FairShare() != "Enabled" {
		t.Errorf("adopted config = %s %v fair share %s", s.Name, s.PriorityClasses(), s.FairShare())
	}
	if s.Config.IdleResourceSharing == nil || *s.Config.IdleResourceSharing != "Disabled" {
		t.Errorf("IdleResourceSharing = %v, want the console's Disabled kept", s.Config.IdleResourceSharing)
	}
	if f.SchedulerConfigs() != 1 || f.Count("CreateClusterSchedulerConfig") != 1 || f.Count("created:scheduler-config") != 1 {
		t.Errorf("stored %d, create calls %d; want 1, 1 (the console's only)", f.SchedulerConfigs(), f.Count("CreateClusterSchedulerConfig"))
	}
	if again := ensureScheduler(t, api, schedulerSpec(t, testClasses(), true)); again.Action != Unchanged || again.ID != id {
		t.Errorf("rerun = %+v, want unchanged %s", again, id)
	}
}

// A config on another cluster is not this cluster's.
func TestEnsureSchedulerIgnoresOtherClusters(t *testing.T) {
	f := awstest.NewSageMaker(t)
	api := smClient(f, 1)
	other, err := SchedulerSpecFor("arn:aws:sagemaker:us-east-1:123456789012:cluster/zzzzzzzzzzzz", testClasses(), true)
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := ensureScheduler(t, api, other)
	res := ensureScheduler(t, api, schedulerSpec(t, testClasses(), true))
	if res.Action != Created || res.ID == elsewhere.ID || f.SchedulerConfigs() != 2 {
		t.Errorf("result %+v (other cluster's %s), stored %d; want a second config", res, elsewhere.ID, f.SchedulerConfigs())
	}
}

func TestEnsureSchedulerSurvivesThrottlingStorm(t *testing.T) {
	t.Run("SDK retries", func(t *testing.T) {
		f := awstest.NewSageMaker(t)
		f.Throttle(3)
		res := ensureScheduler(t, smClient(f, 5), schedulerSpec(t, testClasses(), true))
		if res.Action != Created || f.Count("created:scheduler-config") != 1 || f.SchedulerConfigs() != 1 {
			t.Errorf("result %+v, created %d, stored %d; want exactly one", res, f.Count("created:scheduler-config"), f.SchedulerConfigs())
		}
		if f.Count("ListClusterSchedulerConfigs") != 4 {
			t.Errorf("list called %d times, want 3 throttled + 1", f.Count("ListClusterSchedulerConfigs"))
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
			res, err = EnsureSchedulerConfig(context.Background(), api, schedulerSpec(t, testClasses(), true), fastPoll(&slept))
			if err == nil {
				break
			}
			if IsPermanent(err) || !strings.Contains(err.Error(), "ThrottlingException") {
				t.Fatalf("run %d: %v, want a transient throttling error", runs, err)
			}
		}
		if err != nil || runs != 4 || res.Action != Created || f.Count("created:scheduler-config") != 1 || f.SchedulerConfigs() != 1 {
			t.Errorf("after %d runs: %+v, %v, created %d; want created once on run 4", runs, res, err, f.Count("created:scheduler-config"))
		}
	})
	t.Run("throttled while polling", func(t *testing.T) {
		f := awstest.NewSageMaker(t)
		f.Set(func(f *awstest.SageMaker) { f.SettleAfter = 5 })
		api := smClient(f, 1)
		var slept int
		_, err := EnsureSchedulerConfig(context.Background(), api, schedulerSpec(t, testClasses(), true), PollConfig{
			Interval: time.Second, Timeout: time.Minute,
			Sleep: func(context.Context, time.Duration) error {
				slept++
				if slept == 2 {
					f.Throttle(1)
				}
				return nil
			},
		})
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "ThrottlingException" || IsPermanent(err) {
			t.Fatalf("err = %v, want a transient throttling error", err)
		}
		// The rerun finds the config being created and waits for it.
		res := ensureScheduler(t, api, schedulerSpec(t, testClasses(), true))
		if res.Action != Unchanged || f.Count("created:scheduler-config") != 1 || f.SchedulerConfigs() != 1 {
			t.Errorf("rerun = %+v, created %d; want unchanged, 1", res, f.Count("created:scheduler-config"))
		}
	})
}

func TestEnsureSchedulerLostCreateResponseCreatesOnce(t *testing.T) {
	f := awstest.NewSageMaker(t)
	f.Set(func(f *awstest.SageMaker) { f.LoseCreateResponses = 1 })
	res := ensureScheduler(t, smClient(f, 3), schedulerSpec(t, testClasses(), true))
	if f.Count("created:scheduler-config") != 1 || f.Count("CreateClusterSchedulerConfig") != 2 || f.SchedulerConfigs() != 1 {
		t.Errorf("create calls %d, created %d, stored %d; want 2, 1, 1",
			f.Count("CreateClusterSchedulerConfig"), f.Count("created:scheduler-config"), f.SchedulerConfigs())
	}
	if res.Version != 1 || res.ID == "" || f.SchedulerConfig(res.ID).Status != "Created" {
		t.Errorf("result = %+v, stored %+v", res, f.SchedulerConfig(res.ID))
	}
}

func TestEnsureSchedulerCreateFailedReportsReason(t *testing.T) {
	f := awstest.NewSageMaker(t)
	const reason = "Task governance add-on is not installed on cluster abcdefghij12"
	f.SetSchedulerFailure(reason)
	api := smClient(f, 1)
	for run := 1; run <= 2; run++ {
		var slept int
		_, err := EnsureSchedulerConfig(context.Background(), api, schedulerSpec(t, testClasses(), true), fastPoll(&slept))
		var failed *FailedError
		if !errors.As(err, &failed) || failed.Status != string(types.SchedulerResourceStatusCreateFailed) ||
			!strings.Contains(err.Error(), reason) || !IsPermanent(err) {
			t.Errorf("run %d: err = %v, want a permanent CreateFailed error with the reason", run, err)
		}
	}
	if f.Count("created:scheduler-config") != 1 || f.Count("CreateClusterSchedulerConfig") != 1 {
		t.Errorf("created %d (calls %d), want 1: a failed config is reported, not created again",
			f.Count("created:scheduler-config"), f.Count("CreateClusterSchedulerConfig"))
	}
}

func TestEnsureSchedulerRefusesInvalidSpecBeforeAnyCall(t *testing.T) {
	valid := SchedulerSpec{Name: "abcdefghij12-portal-scheduler", ClusterARN: testCluster, PriorityClasses: testClasses(), FairShare: true}
	for _, tc := range []struct {
		name string
		edit func(*SchedulerSpec)
	}{
		{"weight above 100", func(s *SchedulerSpec) { s.PriorityClasses[0].Weight = 101 }},
		{"class not a DNS label", func(s *SchedulerSpec) { s.PriorityClasses[0].Name = "High_Priority" }},
		{"duplicate class", func(s *SchedulerSpec) { s.PriorityClasses[1].Name = s.PriorityClasses[0].Name }},
		{"bad config name", func(s *SchedulerSpec) { s.Name = "portal scheduler" }},
		{"no name", func(s *SchedulerSpec) { s.Name = "" }},
		{"bad cluster ARN", func(s *SchedulerSpec) { s.ClusterARN = "cluster/abcdefghij12" }},
	} {
		f := awstest.NewSageMaker(t)
		s := valid
		s.PriorityClasses = slices.Clone(valid.PriorityClasses)
		tc.edit(&s)
		var slept int
		_, err := EnsureSchedulerConfig(context.Background(), smClient(f, 1), s, fastPoll(&slept))
		if err == nil || !IsPermanent(err) {
			t.Errorf("%s: err = %v, want permanent", tc.name, err)
		}
		if n := len(f.Log()); n != 0 {
			t.Errorf("%s: %d calls made (%v), want none", tc.name, n, f.Log())
		}
	}
	// The valid spec goes through, so the cases above fail for their edit.
	if res := ensureScheduler(t, smClient(awstest.NewSageMaker(t), 1), valid); res.Action != Created {
		t.Errorf("valid spec: %+v", res)
	}
}

func TestEnsureSchedulerAccessDeniedIsPermanent(t *testing.T) {
	for _, op := range []string{"ListClusterSchedulerConfigs", "CreateClusterSchedulerConfig"} {
		f := awstest.NewSageMaker(t)
		f.Deny(op, -1)
		var slept int
		_, err := EnsureSchedulerConfig(context.Background(), smClient(f, 3), schedulerSpec(t, testClasses(), true), fastPoll(&slept))
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "AccessDeniedException" || !IsPermanent(err) {
			t.Errorf("%s denied: err = %v, want a permanent AccessDeniedException", op, err)
		}
		if f.Count(op) != 1 || f.SchedulerConfigs() != 0 {
			t.Errorf("%s denied: called %d times, stored %d; a permanent error is not retried", op, f.Count(op), f.SchedulerConfigs())
		}
	}
}

func TestEnsureSchedulerPollTimeout(t *testing.T) {
	f := awstest.NewSageMaker(t)
	f.Set(func(f *awstest.SageMaker) { f.SettleAfter = 1000 })
	var slept int
	_, err := EnsureSchedulerConfig(context.Background(), smClient(f, 1), schedulerSpec(t, testClasses(), true), PollConfig{
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

// The test endpoint refuses what the service refuses, so the tests above
// would catch a request the service would not take.
func TestSchedulerEndpointIsStrict(t *testing.T) {
	f := awstest.NewSageMaker(t)
	api := smClient(f, 1)
	ctx := context.Background()
	class := func(name string, w int32) types.PriorityClass {
		return types.PriorityClass{Name: aws.String(name), Weight: aws.Int32(w)}
	}
	in := func(classes ...types.PriorityClass) *sagemaker.CreateClusterSchedulerConfigInput {
		return &sagemaker.CreateClusterSchedulerConfigInput{
			Name: aws.String("policy"), ClusterArn: aws.String(testCluster),
			SchedulerConfig: &types.SchedulerConfig{PriorityClasses: classes},
		}
	}
	for _, tc := range []struct {
		name string
		in   *sagemaker.CreateClusterSchedulerConfigInput
	}{
		{"weight 101", in(class("training", 101))},
		{"negative weight", in(class("training", -1))},
		{"uppercase class", in(class("Training", 1))},
		{"duplicate class", in(class("training", 1), class("training", 2))},
		{"bad fair share", func() *sagemaker.CreateClusterSchedulerConfigInput {
			c := in()
			c.SchedulerConfig.FairShare = "Sometimes"
			return c
		}()},
		{"bad cluster", func() *sagemaker.CreateClusterSchedulerConfigInput {
			c := in()
			c.ClusterArn = aws.String("arn:aws:sagemaker:us-east-1:123456789012:cluster/short")
			return c
		}()},
		{"bad name", func() *sagemaker.CreateClusterSchedulerConfigInput {
			c := in()
			c.Name = aws.String("-policy")
			return c
		}()},
	} {
		_, err := api.CreateClusterSchedulerConfig(ctx, tc.in)
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationException" {
			t.Errorf("%s: err = %v, want ValidationException", tc.name, err)
		}
	}
	if f.SchedulerConfigs() != 0 {
		t.Fatalf("stored %d configs from refused creates", f.SchedulerConfigs())
	}

	if _, err := api.CreateClusterSchedulerConfig(ctx, in(class("training", 100))); err != nil {
		t.Fatal(err)
	}
	// One per cluster, whatever the name.
	second := in()
	second.Name = aws.String("another")
	_, err := api.CreateClusterSchedulerConfig(ctx, second)
	var conflict *types.ConflictException
	if !errors.As(err, &conflict) || f.SchedulerConfigs() != 1 {
		t.Errorf("second config on the cluster: err = %v, stored %d; want ConflictException, 1", err, f.SchedulerConfigs())
	}
	// An update while Creating conflicts.
	list, err := api.ListClusterSchedulerConfigs(ctx, &sagemaker.ListClusterSchedulerConfigsInput{ClusterArn: aws.String(testCluster)})
	if err != nil || len(list.ClusterSchedulerConfigSummaries) != 1 {
		t.Fatalf("list: %v, %+v", err, list)
	}
	id := list.ClusterSchedulerConfigSummaries[0].ClusterSchedulerConfigId
	_, err = api.UpdateClusterSchedulerConfig(ctx, &sagemaker.UpdateClusterSchedulerConfigInput{ClusterSchedulerConfigId: id, TargetVersion: aws.Int32(1)})
	if !errors.As(err, &conflict) {
		t.Errorf("update while Creating: err = %v, want ConflictException", err)
	}
	// The SDK itself refuses a create without SchedulerConfig; the endpoint
	// refuses it too when it gets there.
	_, err = api.CreateClusterSchedulerConfig(ctx, &sagemaker.CreateClusterSchedulerConfigInput{Name: aws.String("x"), ClusterArn: aws.String(testCluster)})
	if err == nil {
		t.Errorf("create without SchedulerConfig succeeded")
	}
}
