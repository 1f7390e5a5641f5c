package slurmssm

import (
	"context"
	"fmt"
	"regexp"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// NodesAPI is the part of the SageMaker API that finds the controller
// node; *sagemaker.Client satisfies it.
type NodesAPI interface {
	ListClusterNodes(context.Context, *sagemaker.ListClusterNodesInput, ...func(*sagemaker.Options)) (*sagemaker.ListClusterNodesOutput, error)
}

var _ NodesAPI = (*sagemaker.Client)(nil)

var (
	clusterIDPattern  = regexp.MustCompile(`^[a-z0-9]{12}$`)
	groupPattern      = regexp.MustCompile(`^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$`)
	instanceIDPattern = regexp.MustCompile(`^i-[a-f0-9]{8}([a-f0-9]{9})?$`)
)

// Target is a HyperPod node's Session Manager target,
// "sagemaker-cluster:<cluster-id>_<instance-group-name>-<instance-id>"
// (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-run-jobs-slurm-access-nodes.html;
// the cluster id is the last part of the cluster's ARN, the group name's
// pattern is CreateCluster's InstanceGroupName).
func Target(clusterID, group, instanceID string) (string, error) {
	switch {
	case !clusterIDPattern.MatchString(clusterID):
		return "", fmt.Errorf("slurmssm: cluster id %q is not the 12 characters that end a HyperPod cluster ARN", clusterID)
	case !groupPattern.MatchString(group):
		return "", fmt.Errorf("slurmssm: instance group %q is not a HyperPod instance group name", group)
	case !instanceIDPattern.MatchString(instanceID):
		return "", fmt.Errorf("slurmssm: instance id %q is not an EC2 instance id", instanceID)
	}
	return "sagemaker-cluster:" + clusterID + "_" + group + "-" + instanceID, nil
}

// ControllerTarget finds the running node of the controller instance group
// group in the cluster clusterARN with ListClusterNodes (the way AWS's
// easy-ssh.sh and the access page above find it) and returns its target.
// A Slurm cluster has one controller; a group with none running, or with
// more than one, is an error.
func ControllerTarget(ctx context.Context, api NodesAPI, clusterARN, group string) (string, error) {
	a, err := arn.Parse(clusterARN)
	if err != nil || a.Service != "sagemaker" || len(a.Resource) != len("cluster/")+12 || a.Resource[:8] != "cluster/" {
		return "", fmt.Errorf("slurmssm: %q is not a HyperPod cluster ARN", clusterARN)
	}
	clusterID := a.Resource[8:]
	var running []string
	in := &sagemaker.ListClusterNodesInput{ClusterName: aws.String(clusterARN), InstanceGroupNameContains: aws.String(group)}
	p := sagemaker.NewListClusterNodesPaginator(api, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return "", fmt.Errorf("slurmssm: list nodes of %s: %w", clusterARN, err)
		}
		for _, n := range page.ClusterNodeSummaries {
			if aws.ToString(n.InstanceGroupName) != group || n.InstanceStatus == nil ||
				n.InstanceStatus.Status != types.ClusterInstanceStatusRunning {
				continue
			}
			running = append(running, aws.ToString(n.InstanceId))
		}
	}
	slices.Sort(running)
	switch len(running) {
	case 0:
		return "", fmt.Errorf("slurmssm: cluster %s has no running node in instance group %q", clusterARN, group)
	case 1:
		return Target(clusterID, group, running[0])
	default:
		return "", fmt.Errorf("slurmssm: instance group %q of %s has %d running nodes %v; the controller group has one", group, clusterARN, len(running), running)
	}
}
