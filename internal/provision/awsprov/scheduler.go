package awsprov

// This file reconciles the cluster's HyperPod task governance scheduler
// config (the console's "cluster policy"): the priority classes jobs pick
// with kueue.x-k8s.io/priority-class, their weights, and whether idle
// compute is lent by fair share. Unlike compute quotas it is cluster-wide:
// the service keeps at most one per cluster.

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// SchedulerAPI is the part of the SageMaker API the scheduler config step
// calls. Every method must appear in Actions (actions_test.go checks).
type SchedulerAPI interface {
	CreateClusterSchedulerConfig(context.Context, *sagemaker.CreateClusterSchedulerConfigInput, ...func(*sagemaker.Options)) (*sagemaker.CreateClusterSchedulerConfigOutput, error)
	DescribeClusterSchedulerConfig(context.Context, *sagemaker.DescribeClusterSchedulerConfigInput, ...func(*sagemaker.Options)) (*sagemaker.DescribeClusterSchedulerConfigOutput, error)
	UpdateClusterSchedulerConfig(context.Context, *sagemaker.UpdateClusterSchedulerConfigInput, ...func(*sagemaker.Options)) (*sagemaker.UpdateClusterSchedulerConfigOutput, error)
	ListClusterSchedulerConfigs(context.Context, *sagemaker.ListClusterSchedulerConfigsInput, ...func(*sagemaker.Options)) (*sagemaker.ListClusterSchedulerConfigsOutput, error)
}

var _ SchedulerAPI = (*sagemaker.Client)(nil)

// SchedulerSpec is the scheduler config the cluster should have. Build it
// with SchedulerSpecFor.
type SchedulerSpec struct {
	// Name is used only when the config is created: an existing config of
	// the cluster is adopted whatever its name (EnsureSchedulerConfig).
	Name       string
	ClusterARN string
	// PriorityClasses compare regardless of order.
	PriorityClasses []SchedulerPriorityClass
	// FairShare lends idle compute by the teams' fair-share weights;
	// without it idle compute goes first come, first served.
	FairShare bool
}

// SchedulerPriorityClass is a priority class: Weight 0 is the lowest
// priority, 100 the highest.
type SchedulerPriorityClass struct {
	Name   string
	Weight int
}

// Limits of the SageMaker API model (PriorityClassList, PriorityWeight).
const (
	maxPriorityClasses = 10
	maxPriorityWeight  = 100
)

// schedulerNameSuffix ends the name of the scheduler config the portal
// creates.
const schedulerNameSuffix = "-portal-scheduler"

var (
	// clusterARNPattern is the API's pattern for a HyperPod ClusterArn; the
	// submatch is the cluster id.
	clusterARNPattern = regexp.MustCompile(`^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:cluster/([a-z0-9]{12})$`)
	// entityNamePattern is the API's pattern for the config's Name.
	entityNamePattern = regexp.MustCompile(`^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$`)
)

// SchedulerName is the name the portal gives the scheduler config of the
// cluster with id clusterID: "<cluster id>-portal-scheduler". It is derived
// from the cluster, not from a setting, because there is one config per
// cluster; a cluster id is 12 characters, so the name is 29, well within the
// API's 63.
func SchedulerName(clusterID string) string { return clusterID + schedulerNameSuffix }

// SchedulerSpecFor is the scheduler config for the cluster clusterARN with
// the portal's priority classes and fair-share setting. It calls nothing; it
// refuses what the API would refuse: a cluster ARN that is not a HyperPod
// cluster's, more than 10 classes, a class name that is not a DNS label
// (Kueue makes a WorkloadPriorityClass of each), a weight outside 0-100, or a
// name given twice. Such errors are permanent (IsPermanent).
func SchedulerSpecFor(clusterARN string, classes []SchedulerPriorityClass, fairShare bool) (SchedulerSpec, error) {
	m := clusterARNPattern.FindStringSubmatch(clusterARN)
	if m == nil {
		return SchedulerSpec{}, permanentf("scheduler config: %q is not a HyperPod cluster ARN (arn:aws:sagemaker:<region>:<account>:cluster/<id>)", clusterARN)
	}
	s := SchedulerSpec{
		Name:            SchedulerName(m[1]),
		ClusterARN:      clusterARN,
		PriorityClasses: slices.Clone(classes),
		FairShare:       fairShare,
	}
	return s, s.validate()
}

// validate checks what the API would refuse, so that EnsureSchedulerConfig
// refuses a hand-built spec before any call.
func (s SchedulerSpec) validate() error {
	if len(s.Name) > maxNameLen || !entityNamePattern.MatchString(s.Name) {
		return permanentf("scheduler config: name %q is not 1-63 letters, digits and hyphens", s.Name)
	}
	if !clusterARNPattern.MatchString(s.ClusterARN) {
		return permanentf("scheduler config %s: %q is not a HyperPod cluster ARN", s.Name, s.ClusterARN)
	}
	if len(s.PriorityClasses) > maxPriorityClasses {
		return permanentf("scheduler config %s: %d priority classes, at most %d allowed", s.Name, len(s.PriorityClasses), maxPriorityClasses)
	}
	seen := map[string]bool{}
	for _, p := range s.PriorityClasses {
		switch {
		case len(p.Name) > maxNameLen || !teamPattern.MatchString(p.Name):
			return permanentf("scheduler config %s: priority class %q is not a DNS label (1-63 lowercase letters, digits and hyphens)", s.Name, p.Name)
		case p.Weight < 0 || p.Weight > maxPriorityWeight:
			return permanentf("scheduler config %s: priority class %s has weight %d, not 0-%d", s.Name, p.Name, p.Weight, maxPriorityWeight)
		case seen[p.Name]:
			return permanentf("scheduler config %s: priority class %s is given twice", s.Name, p.Name)
		}
		seen[p.Name] = true
	}
	return nil
}

func (s SchedulerSpec) fairShare() types.FairShare {
	if s.FairShare {
		return types.FairShareEnabled
	}
	return types.FairShareDisabled
}

func (s SchedulerSpec) priorityClasses() []types.PriorityClass {
	out := make([]types.PriorityClass, 0, len(s.PriorityClasses))
	for _, p := range s.PriorityClasses {
		out = append(out, types.PriorityClass{Name: aws.String(p.Name), Weight: aws.Int32(int32(p.Weight))})
	}
	return out
}

// EnsureSchedulerConfig makes the scheduler config of the cluster
// want.ClusterARN have want's priority classes and fair-share setting, and
// waits until HyperPod has applied it (Created or Updated). It is
// idempotent: it lists the cluster's configs, creates one named want.Name
// when there is none, updates it (TargetVersion = the version it read) when
// the priority classes (in any order) or fair share differ, and does nothing
// otherwise. IdleResourceSharing is not the portal's: an update keeps the
// value the config has.
//
// A cluster has at most one scheduler config. One under another name (made
// in the console before the portal managed the cluster, or by an earlier
// naming) is adopted and updated, not refused: creating ours would fail
// (ConflictException) and leave the cluster without the portal's classes,
// and the name does not matter to the scheduler. Its name is kept: the API
// cannot rename it.
//
// A create that races another, or whose response was lost and was retried
// by the SDK (ConflictException / ResourceInUse), is resolved by listing
// again, so the portal never makes a second config.
//
// A spec that fails validation is refused before any call (permanent). A
// config that failed (CreateFailed, ...) is a permanent FailedError,
// except UpdateFailed, which leaves the config in place and is updated
// again; one still settling after poll.Timeout is a transient
// TimeoutError.
func EnsureSchedulerConfig(ctx context.Context, api SchedulerAPI, want SchedulerSpec, poll PollConfig) (Result, error) {
	poll = poll.withDefaults()
	if err := want.validate(); err != nil {
		return Result{}, err
	}

	found, err := findSchedulerConfig(ctx, api, want)
	if err != nil {
		return Result{}, err
	}
	if found == nil {
		out, cerr := api.CreateClusterSchedulerConfig(ctx, &sagemaker.CreateClusterSchedulerConfigInput{
			Name:       aws.String(want.Name),
			ClusterArn: aws.String(want.ClusterARN),
			SchedulerConfig: &types.SchedulerConfig{
				PriorityClasses: want.priorityClasses(),
				FairShare:       want.fairShare(),
			},
		})
		switch {
		case cerr == nil:
			d, err := waitSchedulerConfig(ctx, api, want.Name, aws.ToString(out.ClusterSchedulerConfigId), poll)
			if err != nil {
				return Result{}, err
			}
			return schedulerResult(d, Created), nil
		case hasCode(cerr, "ConflictException", "ResourceInUse"):
			if found, err = findSchedulerConfig(ctx, api, want); err != nil {
				return Result{}, err
			}
			if found == nil {
				return Result{}, fmt.Errorf("scheduler config %s: create conflicted but the cluster has no scheduler config: %w", want.Name, cerr)
			}
		default:
			return Result{}, fmt.Errorf("scheduler config %s: create: %w", want.Name, cerr)
		}
	}

	// It exists: let any change in flight settle, then compare.
	name, id := aws.ToString(found.Name), aws.ToString(found.ClusterSchedulerConfigId)
	cur, err := waitSchedulerConfig(ctx, api, name, id, poll)
	var failed *FailedError
	if errors.As(err, &failed) && failed.Status == string(types.SchedulerResourceStatusUpdateFailed) {
		err = nil // a failed update leaves the config in place; try ours
	}
	if err != nil {
		return Result{}, err
	}
	if !schedulerDiffers(want, cur) {
		return schedulerResult(cur, Unchanged), nil
	}
	cfg := &types.SchedulerConfig{PriorityClasses: want.priorityClasses(), FairShare: want.fairShare()}
	if cur.SchedulerConfig != nil {
		cfg.IdleResourceSharing = cur.SchedulerConfig.IdleResourceSharing
	}
	_, err = api.UpdateClusterSchedulerConfig(ctx, &sagemaker.UpdateClusterSchedulerConfigInput{
		ClusterSchedulerConfigId: aws.String(id),
		TargetVersion:            cur.ClusterSchedulerConfigVersion,
		SchedulerConfig:          cfg,
	})
	if err != nil {
		return Result{}, fmt.Errorf("scheduler config %s (%s): update from version %d: %w", name, id, aws.ToInt32(cur.ClusterSchedulerConfigVersion), err)
	}
	d, err := waitSchedulerConfig(ctx, api, name, id, poll)
	if err != nil {
		return Result{}, err
	}
	return schedulerResult(d, Updated), nil
}

// findSchedulerConfig returns the cluster's scheduler config, or nil when it
// has none. The service keeps at most one per cluster; should it list more,
// the one named want.Name is preferred, then the first listed. Deleted
// configs do not count; one being deleted is a transient error, as a create
// would conflict with it until it is gone.
func findSchedulerConfig(ctx context.Context, api SchedulerAPI, want SchedulerSpec) (*types.ClusterSchedulerConfigSummary, error) {
	in := &sagemaker.ListClusterSchedulerConfigsInput{
		ClusterArn: aws.String(want.ClusterARN),
		MaxResults: aws.Int32(100),
	}
	var found *types.ClusterSchedulerConfigSummary
	for {
		out, err := api.ListClusterSchedulerConfigs(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("scheduler config %s: list: %w", want.Name, err)
		}
		for i := range out.ClusterSchedulerConfigSummaries {
			s := &out.ClusterSchedulerConfigSummaries[i]
			if s.ClusterArn != nil && *s.ClusterArn != want.ClusterARN || s.Status == types.SchedulerResourceStatusDeleted {
				continue
			}
			if s.Status == types.SchedulerResourceStatusDeleting {
				return nil, fmt.Errorf("scheduler config %s (%s): is being deleted; retry later", aws.ToString(s.Name), aws.ToString(s.ClusterSchedulerConfigId))
			}
			if aws.ToString(s.Name) == want.Name {
				return s, nil
			}
			if found == nil {
				found = s
			}
		}
		if aws.ToString(out.NextToken) == "" {
			return found, nil
		}
		in.NextToken = out.NextToken
	}
}

// waitSchedulerConfig polls Describe until the config is Created or
// Updated, and fails with the FailureReason when it failed, or with a
// TimeoutError.
func waitSchedulerConfig(ctx context.Context, api SchedulerAPI, name, id string, poll PollConfig) (*sagemaker.DescribeClusterSchedulerConfigOutput, error) {
	return waitFor(ctx, poll, settling{kind: "scheduler config", name: name, id: id, done: schedulerDone, failed: schedulerFailed},
		func(ctx context.Context) (*sagemaker.DescribeClusterSchedulerConfigOutput, string, string, error) {
			d, err := api.DescribeClusterSchedulerConfig(ctx, &sagemaker.DescribeClusterSchedulerConfigInput{ClusterSchedulerConfigId: aws.String(id)})
			if err != nil {
				return nil, "", "", fmt.Errorf("scheduler config %s (%s): describe: %w", name, id, err)
			}
			return d, string(d.Status), aws.ToString(d.FailureReason), nil
		})
}

func schedulerResult(d *sagemaker.DescribeClusterSchedulerConfigOutput, a Action) Result {
	return Result{
		ID:      aws.ToString(d.ClusterSchedulerConfigId),
		ARN:     aws.ToString(d.ClusterSchedulerConfigArn),
		Version: aws.ToInt32(d.ClusterSchedulerConfigVersion),
		Action:  a,
	}
}

// schedulerDiffers reports whether the config as described differs from
// want in the priority classes (regardless of order) or fair share (absent
// is the API's default, Enabled).
func schedulerDiffers(want SchedulerSpec, cur *sagemaker.DescribeClusterSchedulerConfigOutput) bool {
	c := cur.SchedulerConfig
	if c == nil {
		c = &types.SchedulerConfig{}
	}
	fair := c.FairShare
	if fair == "" {
		fair = types.FairShareEnabled
	}
	return fair != want.fairShare() || classesKey(c.PriorityClasses) != classesKey(want.priorityClasses())
}

// classesKey is a canonical string of priority classes: sorted name=weight.
func classesKey(classes []types.PriorityClass) string {
	rows := make([]string, 0, len(classes))
	for _, p := range classes {
		rows = append(rows, fmt.Sprintf("%s=%d", aws.ToString(p.Name), aws.ToInt32(p.Weight)))
	}
	slices.Sort(rows)
	return strings.Join(rows, ",")
}
