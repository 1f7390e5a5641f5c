// This file maps a contract's scheduling policy to a HyperPod task governance
// compute quota; client.go applies it.

package awsprov

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Tag keys put on every AWS resource the portal creates for a team.
const (
	TagTeam       = "portal:team"
	TagConnection = "portal:connection-id"
)

// DefaultBorrowLimitPercent is HyperPod's default BorrowLimit. A borrowing
// contract with no limit gets it explicitly, so that what we send equals what
// Describe returns and a re-run does not see a difference.
const DefaultBorrowLimitPercent = 50

// maxNameLen is the API's limit on a compute quota name.
const maxNameLen = 63

// teamPattern is the API's pattern for ComputeQuotaTarget.TeamName (a
// DNS-1123 label).
var teamPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// ErrBorrowOnly is returned for a contract whose sharing is "borrow": HyperPod
// task governance has no borrow-only strategy (only Lend, DontLend and
// LendAndBorrow), and provisioning LendAndBorrow would lend the team's idle
// capacity, which the contract says it never does. The contract has to choose
// lend-and-borrow (or another strategy) before it can be provisioned.
var ErrBorrowOnly = errors.New(`HyperPod task governance has no borrow-only strategy: sharing "borrow" cannot be provisioned; use "lend-and-borrow" or "neither"`)

// QuotaName is the compute quota name for a team: "<team>-quota". A team name
// too long for the API's 63 characters is cut and made unique again with a
// short hash of the whole name.
func QuotaName(team string) string {
	const suffix = "-quota"
	if len(team)+len(suffix) <= maxNameLen {
		return team + suffix
	}
	sum := sha256.Sum256([]byte(team))
	h := hex.EncodeToString(sum[:])[:8]
	keep := maxNameLen - len(suffix) - len(h) - 1
	return strings.TrimRight(team[:keep], "-") + "-" + h + suffix
}

// SharingStrategy maps a contract's sharing policy to HyperPod's strategy.
// "borrow" has no HyperPod equivalent and returns ErrBorrowOnly.
func SharingStrategy(s workflow.Sharing) (types.ResourceSharingStrategy, error) {
	switch s {
	case workflow.SharingLend:
		return types.ResourceSharingStrategyLend, nil
	case workflow.SharingNeither:
		return types.ResourceSharingStrategyDontlend, nil
	case workflow.SharingLendAndBorrow:
		return types.ResourceSharingStrategyLendandborrow, nil
	case workflow.SharingBorrow:
		return "", ErrBorrowOnly
	}
	return "", fmt.Errorf("unknown sharing %q", s)
}

// PreemptTeamTasks maps a contract's preemption policy to HyperPod's.
func PreemptTeamTasks(p workflow.Preemption) (types.PreemptTeamTasks, error) {
	switch p {
	case workflow.PreemptLowerPriority:
		return types.PreemptTeamTasksLowerpriority, nil
	case workflow.PreemptNever:
		return types.PreemptTeamTasksNever, nil
	}
	return "", fmt.Errorf("unknown preemption %q", p)
}

// ComputeQuotaFor is the compute quota a contract asks for on the cluster
// clusterARN (the contract's own ClusterARN when empty), tagged with the team
// and connectionID. It is pure: it calls nothing and only checks what the API
// would reject, so that a bad contract fails before any call is made.
func ComputeQuotaFor(c workflow.Contract, clusterARN string, connectionID int64) (sagemaker.CreateComputeQuotaInput, error) {
	if clusterARN == "" {
		clusterARN = c.ClusterARN
	}
	if clusterARN == "" {
		return sagemaker.CreateComputeQuotaInput{}, errors.New("compute quota: no cluster ARN")
	}
	if len(c.Team) > maxNameLen || !teamPattern.MatchString(c.Team) {
		return sagemaker.CreateComputeQuotaInput{}, fmt.Errorf("compute quota: team %q is not a DNS-1123 label", c.Team)
	}
	s := c.Scheduling
	strategy, err := SharingStrategy(s.Sharing)
	if err != nil {
		return sagemaker.CreateComputeQuotaInput{}, fmt.Errorf("compute quota: %w", err)
	}
	preempt, err := PreemptTeamTasks(s.Preemption)
	if err != nil {
		return sagemaker.CreateComputeQuotaInput{}, fmt.Errorf("compute quota: %w", err)
	}
	if s.FairShareWeight < 0 || s.FairShareWeight > 100 {
		return sagemaker.CreateComputeQuotaInput{}, fmt.Errorf("compute quota: fair share weight %d is not in 0-100", s.FairShareWeight)
	}

	resources := make([]types.ComputeQuotaResourceConfig, 0, len(s.Guaranteed))
	seen := map[string]bool{}
	for _, g := range s.Guaranteed {
		if g.InstanceType == "" || g.Count <= 0 || g.Count > 1<<20 {
			return sagemaker.CreateComputeQuotaInput{}, fmt.Errorf("compute quota: guaranteed capacity %q is not an instance type and a positive count", g.String())
		}
		if seen[g.InstanceType] {
			return sagemaker.CreateComputeQuotaInput{}, fmt.Errorf("compute quota: instance type %s is guaranteed twice", g.InstanceType)
		}
		seen[g.InstanceType] = true
		resources = append(resources, types.ComputeQuotaResourceConfig{
			InstanceType: types.ClusterInstanceType(g.InstanceType),
			Count:        aws.Int32(int32(g.Count)),
		})
	}

	sharing := &types.ResourceSharingConfig{Strategy: strategy}
	if strategy == types.ResourceSharingStrategyLendandborrow {
		limit := s.BorrowLimitPercent
		if limit == 0 {
			limit = DefaultBorrowLimitPercent
		}
		if limit < 1 || limit > 500 {
			return sagemaker.CreateComputeQuotaInput{}, fmt.Errorf("compute quota: borrow limit %d%% is not in 1-500", limit)
		}
		sharing.BorrowLimit = aws.Int32(int32(limit))
	}

	return sagemaker.CreateComputeQuotaInput{
		Name:       aws.String(QuotaName(c.Team)),
		ClusterArn: aws.String(clusterARN),
		ComputeQuotaConfig: &types.ComputeQuotaConfig{
			ComputeQuotaResources: resources,
			ResourceSharingConfig: sharing,
			PreemptTeamTasks:      preempt,
		},
		ComputeQuotaTarget: &types.ComputeQuotaTarget{
			TeamName:        aws.String(c.Team),
			FairShareWeight: aws.Int32(int32(s.FairShareWeight)),
		},
		ActivationState: types.ActivationStateEnabled,
		Tags: []types.Tag{
			{Key: aws.String(TagTeam), Value: aws.String(c.Team)},
			{Key: aws.String(TagConnection), Value: aws.String(strconv.FormatInt(connectionID, 10))},
		},
	}, nil
}
