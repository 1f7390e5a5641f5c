package awsprov

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	smithy "github.com/aws/smithy-go"
)

// SageMakerAPI is the part of the SageMaker API the compute quota steps call.
// *sagemaker.Client satisfies it; so does a client pointed at a test endpoint.
// Every method here must appear in Actions (actions_test.go checks).
type SageMakerAPI interface {
	CreateComputeQuota(context.Context, *sagemaker.CreateComputeQuotaInput, ...func(*sagemaker.Options)) (*sagemaker.CreateComputeQuotaOutput, error)
	DescribeComputeQuota(context.Context, *sagemaker.DescribeComputeQuotaInput, ...func(*sagemaker.Options)) (*sagemaker.DescribeComputeQuotaOutput, error)
	UpdateComputeQuota(context.Context, *sagemaker.UpdateComputeQuotaInput, ...func(*sagemaker.Options)) (*sagemaker.UpdateComputeQuotaOutput, error)
	ListComputeQuotas(context.Context, *sagemaker.ListComputeQuotasInput, ...func(*sagemaker.Options)) (*sagemaker.ListComputeQuotasOutput, error)
	DeleteComputeQuota(context.Context, *sagemaker.DeleteComputeQuotaInput, ...func(*sagemaker.Options)) (*sagemaker.DeleteComputeQuotaOutput, error)
	// ListTags reads whose a quota is (TagConnection) before it is changed
	// or deleted; AddTags marks a quota an admin chose to adopt.
	ListTags(context.Context, *sagemaker.ListTagsInput, ...func(*sagemaker.Options)) (*sagemaker.ListTagsOutput, error)
	AddTags(context.Context, *sagemaker.AddTagsInput, ...func(*sagemaker.Options)) (*sagemaker.AddTagsOutput, error)
}

var _ SageMakerAPI = (*sagemaker.Client)(nil)

// Action says what EnsureComputeQuota did.
type Action string

// Actions of EnsureComputeQuota.
const (
	Created   Action = "created"
	Updated   Action = "updated"
	Unchanged Action = "unchanged"
)

// Result is the compute quota after EnsureComputeQuota, to record in the DB.
type Result struct {
	ID      string
	ARN     string
	Version int32
	Action  Action
}

// PollConfig says how EnsureComputeQuota waits for the quota to settle.
// Zero values get defaults: Interval 5s, Timeout 10m, Sleep a context-aware
// timer.
type PollConfig struct {
	Interval time.Duration
	Timeout  time.Duration
	// Sleep waits d or until ctx ends; tests replace it to run without delay.
	Sleep func(ctx context.Context, d time.Duration) error
}

func (p PollConfig) withDefaults() PollConfig {
	if p.Interval <= 0 {
		p.Interval = 5 * time.Second
	}
	if p.Timeout <= 0 {
		p.Timeout = 10 * time.Minute
	}
	if p.Sleep == nil {
		p.Sleep = sleepCtx
	}
	return p
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// EnsureComputeQuota makes the cluster's compute quota named desired.Name
// match desired, and waits until HyperPod has applied it. It is idempotent:
// it finds the quota by exact name on the cluster (ListComputeQuotas), creates
// it when missing, updates it (TargetVersion = the version it read) when its
// config, target or activation state differ, and does nothing otherwise.
// Tags are set only on create: UpdateComputeQuota cannot change them.
//
// Ownership: a quota is this connection's when its TagConnection tag is the
// one desired carries (ListTags: neither Describe nor List returns tags).
// An existing quota is read, compared and updated only when it is; one
// tagged for another connection is a permanent *NotOursError. HyperPod keeps
// one quota per team on a cluster, so a quota that allocates to the team
// under another name, or one with the portal's name but no portal tag (both
// made in the console or another tool) is never taken over on its own: it
// is a permanent *ForeignQuotaError, which says how an admin adopts it
// (AdoptComputeQuota tags it as this connection's, and the next run updates
// it to the contract, keeping its name).
//
// A create that races another, or whose response was lost and was retried by
// the SDK (ConflictException / ResourceInUse), is resolved by looking the
// quota up again, so a quota is never created twice.
func EnsureComputeQuota(ctx context.Context, api SageMakerAPI, desired *sagemaker.CreateComputeQuotaInput, poll PollConfig) (Result, error) {
	poll = poll.withDefaults()
	name, cluster := aws.ToString(desired.Name), aws.ToString(desired.ClusterArn)
	if name == "" || cluster == "" {
		return Result{}, errors.New("compute quota: desired has no name or cluster ARN")
	}
	team, owner := teamOf(desired), tagValue(desired.Tags, TagConnection)

	found, err := findComputeQuota(ctx, api, name, team, cluster)
	if err != nil {
		return Result{}, err
	}
	if found == nil {
		out, cerr := api.CreateComputeQuota(ctx, desired)
		switch {
		case cerr == nil:
			d, err := waitComputeQuota(ctx, api, name, aws.ToString(out.ComputeQuotaId), poll)
			if err != nil {
				return Result{}, err
			}
			return resultOf(d, Created), nil
		case hasCode(cerr, "ConflictException", "ResourceInUse"):
			if found, err = findComputeQuota(ctx, api, name, team, cluster); err != nil {
				return Result{}, err
			}
			if found == nil {
				return Result{}, fmt.Errorf("compute quota %s: create conflicted but no quota has that name or team: %w", name, cerr)
			}
		default:
			return Result{}, fmt.Errorf("compute quota %s: create: %w", name, cerr)
		}
	}
	if err := checkQuotaOwner(ctx, api, found, name, cluster, owner); err != nil {
		return Result{}, err
	}
	id := aws.ToString(found.ComputeQuotaId)

	// It exists and is ours: let any change in flight settle, then compare.
	cur, err := waitComputeQuota(ctx, api, name, id, poll)
	var failed *FailedError
	if errors.As(err, &failed) && failed.Status == string(types.SchedulerResourceStatusUpdateFailed) {
		// A failed update leaves the quota in place; try ours.
		cur, err = describe(ctx, api, id)
	}
	if err != nil {
		return Result{}, err
	}
	if !differs(desired, cur) {
		return resultOf(cur, Unchanged), nil
	}
	_, err = api.UpdateComputeQuota(ctx, &sagemaker.UpdateComputeQuotaInput{
		ComputeQuotaId:     aws.String(id),
		TargetVersion:      cur.ComputeQuotaVersion,
		ComputeQuotaConfig: desired.ComputeQuotaConfig,
		ComputeQuotaTarget: desired.ComputeQuotaTarget,
		ActivationState:    activation(desired.ActivationState),
		Description:        desired.Description,
	})
	if err != nil {
		return Result{}, fmt.Errorf("compute quota %s: update from version %d: %w", id, aws.ToInt32(cur.ComputeQuotaVersion), err)
	}
	d, err := waitComputeQuota(ctx, api, name, id, poll)
	if err != nil {
		return Result{}, err
	}
	return resultOf(d, Updated), nil
}

// DeleteComputeQuota deletes the cluster's compute quota named name (or,
// adopted, the one allocating to team under another name). A quota that
// does not exist (never created, being deleted or deleted) is not an error.
// owner, when not empty, is the connection id the quota must be tagged with:
// a quota that is not that connection's is left alone and reported as a
// *NotOursError (or *ForeignQuotaError), so revoking one connection never
// removes a quota the portal did not make for it.
func DeleteComputeQuota(ctx context.Context, api SageMakerAPI, name, team, clusterARN, owner string) error {
	found, err := findComputeQuota(ctx, api, name, team, clusterARN)
	if errors.Is(err, errQuotaDeleting) {
		return nil // already on its way out
	}
	if err != nil || found == nil {
		return err
	}
	if owner != "" {
		if err := checkQuotaOwner(ctx, api, found, name, clusterARN, owner); err != nil {
			return err
		}
	}
	id := aws.ToString(found.ComputeQuotaId)
	_, err = api.DeleteComputeQuota(ctx, &sagemaker.DeleteComputeQuotaInput{ComputeQuotaId: aws.String(id)})
	if err != nil && !hasCode(err, "ResourceNotFound") {
		return fmt.Errorf("compute quota %s: delete: %w", id, err)
	}
	return nil
}

// errQuotaDeleting is wrapped by findComputeQuota's error for a quota that
// is being deleted: transient for a create (retry later), done for a delete.
var errQuotaDeleting = errors.New("is being deleted; retry later")

// findComputeQuota returns the cluster's quota named exactly name, else
// the one allocating to team (ComputeQuotaTarget.TeamName) under another
// name, else nil. NameContains is a substring filter and a team can only be
// matched here, so every quota of the cluster is listed and matched again.
// Quotas Deleted (the service lists them for a while) do not count; one
// being Deleting is an error wrapping errQuotaDeleting.
func findComputeQuota(ctx context.Context, api SageMakerAPI, name, team, cluster string) (*types.ComputeQuotaSummary, error) {
	in := &sagemaker.ListComputeQuotasInput{
		ClusterArn: aws.String(cluster),
		MaxResults: aws.Int32(100),
	}
	var byName, byTeam *types.ComputeQuotaSummary
	for {
		out, err := api.ListComputeQuotas(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("compute quota %s: list: %w", name, err)
		}
		for i, q := range out.ComputeQuotaSummaries {
			if q.ClusterArn != nil && *q.ClusterArn != cluster || q.Status == types.SchedulerResourceStatusDeleted {
				continue
			}
			switch {
			case aws.ToString(q.Name) == name:
				byName = &out.ComputeQuotaSummaries[i]
			case team != "" && q.ComputeQuotaTarget != nil && aws.ToString(q.ComputeQuotaTarget.TeamName) == team:
				byTeam = &out.ComputeQuotaSummaries[i]
			}
		}
		if aws.ToString(out.NextToken) == "" {
			break
		}
		in.NextToken = out.NextToken
	}
	found := byName
	if found == nil {
		found = byTeam
	}
	if found != nil && found.Status == types.SchedulerResourceStatusDeleting {
		return nil, fmt.Errorf("compute quota %s (%s): %w", aws.ToString(found.Name), aws.ToString(found.ComputeQuotaId), errQuotaDeleting)
	}
	return found, nil
}

func describe(ctx context.Context, api SageMakerAPI, id string) (*sagemaker.DescribeComputeQuotaOutput, error) {
	d, err := api.DescribeComputeQuota(ctx, &sagemaker.DescribeComputeQuotaInput{ComputeQuotaId: aws.String(id)})
	if err != nil {
		return nil, fmt.Errorf("compute quota %s: describe: %w", id, err)
	}
	return d, nil
}

// waitComputeQuota polls Describe until the quota is Created or Updated, and
// fails with the FailureReason when it failed, or with a TimeoutError.
func waitComputeQuota(ctx context.Context, api SageMakerAPI, name, id string, poll PollConfig) (*sagemaker.DescribeComputeQuotaOutput, error) {
	return waitFor(ctx, poll, settling{kind: "compute quota", name: name, id: id, done: schedulerDone, failed: schedulerFailed},
		func(ctx context.Context) (*sagemaker.DescribeComputeQuotaOutput, string, string, error) {
			d, err := describe(ctx, api, id)
			if err != nil {
				return nil, "", "", err
			}
			return d, string(d.Status), aws.ToString(d.FailureReason), nil
		})
}

// The statuses of HyperPod task governance resources (compute quotas,
// scheduler configs) that end a wait.
var (
	schedulerDone   = []string{string(types.SchedulerResourceStatusCreated), string(types.SchedulerResourceStatusUpdated)}
	schedulerFailed = []string{
		string(types.SchedulerResourceStatusCreateFailed), string(types.SchedulerResourceStatusCreateRollbackFailed),
		string(types.SchedulerResourceStatusUpdateFailed), string(types.SchedulerResourceStatusUpdateRollbackFailed),
		string(types.SchedulerResourceStatusDeleteFailed), string(types.SchedulerResourceStatusDeleteRollbackFailed),
	}
)

func resultOf(d *sagemaker.DescribeComputeQuotaOutput, a Action) Result {
	return Result{ID: aws.ToString(d.ComputeQuotaId), ARN: aws.ToString(d.ComputeQuotaArn), Version: aws.ToInt32(d.ComputeQuotaVersion), Action: a}
}

func activation(s types.ActivationState) types.ActivationState {
	if s == "" {
		return types.ActivationStateEnabled
	}
	return s
}

// differs reports whether the quota as described differs from desired in
// anything UpdateComputeQuota can change. Absent fields compare as the API's
// defaults, and resources compare regardless of order.
func differs(desired *sagemaker.CreateComputeQuotaInput, cur *sagemaker.DescribeComputeQuotaOutput) bool {
	if activation(desired.ActivationState) != activation(cur.ActivationState) {
		return true
	}
	dt, ct := desired.ComputeQuotaTarget, cur.ComputeQuotaTarget
	if dt == nil {
		dt = &types.ComputeQuotaTarget{}
	}
	if ct == nil {
		ct = &types.ComputeQuotaTarget{}
	}
	if aws.ToString(dt.TeamName) != aws.ToString(ct.TeamName) || aws.ToInt32(dt.FairShareWeight) != aws.ToInt32(ct.FairShareWeight) {
		return true
	}
	return configKey(desired.ComputeQuotaConfig) != configKey(cur.ComputeQuotaConfig)
}

// configKey is a canonical string of the parts of a quota config we set.
func configKey(c *types.ComputeQuotaConfig) string {
	if c == nil {
		c = &types.ComputeQuotaConfig{}
	}
	preempt := c.PreemptTeamTasks
	if preempt == "" {
		preempt = types.PreemptTeamTasksLowerpriority // the API's default
	}
	strategy, limit := types.ResourceSharingStrategyLendandborrow, int32(DefaultBorrowLimitPercent) // the API's defaults
	if r := c.ResourceSharingConfig; r != nil {
		if r.Strategy != "" {
			strategy = r.Strategy
		}
		if r.BorrowLimit != nil {
			limit = *r.BorrowLimit
		}
	}
	if strategy != types.ResourceSharingStrategyLendandborrow {
		limit = 0 // only borrowing uses it
	}
	rows := make([]string, 0, len(c.ComputeQuotaResources))
	for _, r := range c.ComputeQuotaResources {
		rows = append(rows, fmt.Sprintf("%s=%d/%d/%g/%g", r.InstanceType, aws.ToInt32(r.Count), aws.ToInt32(r.Accelerators), aws.ToFloat32(r.VCpu), aws.ToFloat32(r.MemoryInGiB)))
	}
	slices.Sort(rows)
	return fmt.Sprintf("%s|%s|%d|%s", preempt, strategy, limit, strings.Join(rows, ","))
}

// Error codes that retrying the same request cannot fix.
var permanentCodes = map[string]bool{
	"ValidationException":         true,
	"AccessDeniedException":       true,
	"AccessDenied":                true,
	"ResourceLimitExceeded":       true,
	"UnrecognizedClientException": true,
	"InvalidSignatureException":   true,
	"IncompleteSignature":         true,
	"MissingAuthenticationToken":  true,
	"InvalidClientTokenId":        true,
	"NotAuthorized":               true,
	"OptInRequired":               true,
	"UnknownOperationException":   true,
	// DataZone's names for missing permissions and account limits.
	"UnauthorizedException":         true,
	"ServiceQuotaExceededException": true,
	// EKS: a malformed or refused parameter (a group starting with
	// "system:", a bad ARN or scope), a request the cluster's state refuses
	// (authentication mode CONFIG_MAP, so no access entries: an operator has
	// to change it), a client-side fault, and account limits. EKS's
	// ResourceNotFoundException is not here: see ClusterNotFoundError.
	"InvalidParameterException":      true,
	"InvalidRequestException":        true,
	"ClientException":                true,
	"ResourceLimitExceededException": true,
}

// IsPermanent reports whether err will recur if the same step is retried, so
// the job should stop and show the message, rather than retry later.
//
// Permanent: the codes above (bad input, missing permissions, account limits),
// a resource the service failed to create, update or delete (FailedError:
// a quota, domain or scheduler config with its FailureReason), a DataZone
// domain, project or environment that is missing or unusable
// (DataZoneSetupError: ResourceNotFoundException alone stays transient, as
// it also means a resource deleted between two calls), an EKS cluster that
// does not exist (ClusterNotFoundError: EKS's ResourceNotFoundException
// alone stays transient for the same reason), and contracts
// this package cannot map (ErrBorrowOnly and other mapping errors are checked
// by the caller before any call). Transient: throttling, 5xx, timeouts,
// network errors, ConflictException (a stale TargetVersion or a change in
// flight: the next run reads the current version and tries again) and
// ResourceInUse. Unknown error codes are treated as transient, but with the
// step's retry budget bounding them.
func IsPermanent(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrBorrowOnly) {
		return true
	}
	// Errors of this package that know they are permanent: FailedError,
	// DataZoneSetupError, ClusterNotFoundError, NotOursError, ...
	var marked interface{ Permanent() bool }
	if errors.As(err, &marked) && marked.Permanent() {
		return true
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() >= http.StatusInternalServerError {
		return false
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return permanentCodes[ae.ErrorCode()]
	}
	return false
}

// hasCode reports whether err is an API error with one of codes.
func hasCode(err error, codes ...string) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && slices.Contains(codes, ae.ErrorCode())
}
