package awsprov

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

const testCluster = "arn:aws:sagemaker:us-east-1:123456789012:cluster/abcdefghij12"

func testContract() workflow.Contract {
	return workflow.Contract{
		Team:       "ml-research",
		ClusterARN: testCluster,
		Scheduling: workflow.Scheduling{
			Guaranteed:         []workflow.Capacity{{InstanceType: "ml.p5.48xlarge", Count: 4}, {InstanceType: "ml.g5.12xlarge", Count: 2}},
			Sharing:            workflow.SharingLendAndBorrow,
			BorrowLimitPercent: 100,
			Preemption:         workflow.PreemptLowerPriority,
			FairShareWeight:    50,
		},
	}
}

func TestComputeQuotaForMapping(t *testing.T) {
	for _, sharing := range workflow.AllSharings {
		for _, preempt := range workflow.AllPreemptions {
			t.Run(string(sharing)+"/"+string(preempt), func(t *testing.T) {
				c := testContract()
				c.Scheduling.Sharing, c.Scheduling.Preemption = sharing, preempt
				if !sharing.Borrows() {
					c.Scheduling.BorrowLimitPercent = 0
				}
				in, err := ComputeQuotaFor(c, "", 42)
				wantStrategy := map[workflow.Sharing]types.ResourceSharingStrategy{
					workflow.SharingLend:          types.ResourceSharingStrategyLend,
					workflow.SharingNeither:       types.ResourceSharingStrategyDontlend,
					workflow.SharingLendAndBorrow: types.ResourceSharingStrategyLendandborrow,
				}[sharing]
				if sharing == workflow.SharingBorrow {
					if !errors.Is(err, ErrBorrowOnly) || !IsPermanent(err) {
						t.Fatalf("borrow-only: err = %v, want permanent ErrBorrowOnly", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				cfg := in.ComputeQuotaConfig
				if got := cfg.ResourceSharingConfig.Strategy; got != wantStrategy {
					t.Errorf("strategy = %s, want %s", got, wantStrategy)
				}
				wantLimit := int32(0)
				if sharing == workflow.SharingLendAndBorrow {
					wantLimit = 100
				}
				if got := aws.ToInt32(cfg.ResourceSharingConfig.BorrowLimit); got != wantLimit {
					t.Errorf("borrow limit = %d, want %d", got, wantLimit)
				}
				wantPreempt := map[workflow.Preemption]types.PreemptTeamTasks{
					workflow.PreemptLowerPriority: types.PreemptTeamTasksLowerpriority,
					workflow.PreemptNever:         types.PreemptTeamTasksNever,
				}[preempt]
				if cfg.PreemptTeamTasks != wantPreempt {
					t.Errorf("preempt = %s, want %s", cfg.PreemptTeamTasks, wantPreempt)
				}
			})
		}
	}
}

func TestComputeQuotaForFields(t *testing.T) {
	in, err := ComputeQuotaFor(testContract(), "", 42)
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(in.Name) != "ml-research-quota" || aws.ToString(in.ClusterArn) != testCluster {
		t.Errorf("name, cluster = %q, %q", aws.ToString(in.Name), aws.ToString(in.ClusterArn))
	}
	if aws.ToString(in.ComputeQuotaTarget.TeamName) != "ml-research" || aws.ToInt32(in.ComputeQuotaTarget.FairShareWeight) != 50 {
		t.Errorf("target = %+v", in.ComputeQuotaTarget)
	}
	if in.ActivationState != types.ActivationStateEnabled {
		t.Errorf("activation = %q", in.ActivationState)
	}
	res := in.ComputeQuotaConfig.ComputeQuotaResources
	if len(res) != 2 || res[0].InstanceType != "ml.p5.48xlarge" || aws.ToInt32(res[0].Count) != 4 ||
		res[1].InstanceType != "ml.g5.12xlarge" || aws.ToInt32(res[1].Count) != 2 {
		t.Errorf("resources = %+v", res)
	}
	tags := map[string]string{}
	for _, tag := range in.Tags {
		tags[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
	}
	if tags[TagTeam] != "ml-research" || tags[TagConnection] != "42" || len(tags) != 2 {
		t.Errorf("tags = %v", tags)
	}

	// An explicit cluster ARN wins over the contract's.
	other := "arn:aws:sagemaker:us-east-1:123456789012:cluster/zzzzzzzzzzzz"
	if in, _ := ComputeQuotaFor(testContract(), other, 1); aws.ToString(in.ClusterArn) != other {
		t.Errorf("cluster = %q, want %q", aws.ToString(in.ClusterArn), other)
	}

	// Borrowing with no limit gets HyperPod's default explicitly.
	c := testContract()
	c.Scheduling.BorrowLimitPercent = 0
	if in, _ := ComputeQuotaFor(c, "", 1); aws.ToInt32(in.ComputeQuotaConfig.ResourceSharingConfig.BorrowLimit) != DefaultBorrowLimitPercent {
		t.Errorf("default borrow limit = %v", in.ComputeQuotaConfig.ResourceSharingConfig.BorrowLimit)
	}
}

func TestComputeQuotaForRejects(t *testing.T) {
	for name, mutate := range map[string]func(*workflow.Contract){
		"no cluster":       func(c *workflow.Contract) { c.ClusterARN = "" },
		"bad team":         func(c *workflow.Contract) { c.Team = "ML_Research" },
		"fair share 101":   func(c *workflow.Contract) { c.Scheduling.FairShareWeight = 101 },
		"borrow limit 501": func(c *workflow.Contract) { c.Scheduling.BorrowLimitPercent = 501 },
		"zero count":       func(c *workflow.Contract) { c.Scheduling.Guaranteed[0].Count = 0 },
		"duplicate type":   func(c *workflow.Contract) { c.Scheduling.Guaranteed[1].InstanceType = "ml.p5.48xlarge" },
		"unknown sharing":  func(c *workflow.Contract) { c.Scheduling.Sharing = "share" },
		"unknown preempt":  func(c *workflow.Contract) { c.Scheduling.Preemption = "always" },
	} {
		c := testContract()
		mutate(&c)
		if _, err := ComputeQuotaFor(c, "", 1); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestQuotaName(t *testing.T) {
	pattern := regexp.MustCompile(`^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$`)
	long1 := strings.Repeat("a", 60) + "-x1"
	long2 := strings.Repeat("a", 60) + "-x2"
	for _, team := range []string{"a", "ml-research", strings.Repeat("b", 57), strings.Repeat("c", 58), long1, long2} {
		n := QuotaName(team)
		if len(n) > 63 || !pattern.MatchString(n) || !strings.HasSuffix(n, "-quota") {
			t.Errorf("QuotaName(%q) = %q: invalid", team, n)
		}
	}
	if QuotaName("ml-research") != "ml-research-quota" {
		t.Errorf("QuotaName(ml-research) = %q", QuotaName("ml-research"))
	}
	if QuotaName(long1) == QuotaName(long2) {
		t.Errorf("long team names collide: %q", QuotaName(long1))
	}
}
