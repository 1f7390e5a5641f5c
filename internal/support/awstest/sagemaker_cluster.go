package awstest

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// HyperPodCluster is a HyperPod cluster as DescribeCluster reports it. A test
// registers one with AddHyperPodCluster.
type HyperPodCluster struct {
	Name string
	// ID is the 12-character id at the end of the ARN.
	ID string
	// EKSClusterARN is the orchestrating EKS cluster; empty for Slurm.
	EKSClusterARN string
	Status        types.ClusterStatus // default InService
	Groups        []InstanceGroup
}

// InstanceGroup is one instance group of a HyperPod cluster.
type InstanceGroup struct {
	Name                      string
	InstanceType              types.ClusterInstanceType
	CurrentCount, TargetCount int32
	// Instances are the group's running nodes' EC2 instance ids, as
	// ListClusterNodes reports them.
	Instances []string
}

// ARN is the cluster's ARN in the test account and region.
func (c HyperPodCluster) ARN() string {
	return fmt.Sprintf("arn:aws:sagemaker:%s:%s:cluster/%s", Region, Account, c.ID)
}

// clusterNameOrARN is DescribeCluster's ClusterName: a cluster name or ARN
// (the SDK models it as ClusterNameOrArn; its length 0-256 and pattern are
// the SageMaker API Reference's, API_DescribeCluster.html).
var clusterNameOrARN = regexp.MustCompile(`^(?:(arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:cluster/[a-z0-9]{12})|([a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}))$`)

// AddHyperPodCluster registers a HyperPod cluster (replacing one with the
// same name).
func (f *SageMaker) AddHyperPodCluster(c HyperPodCluster) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.Status == "" {
		c.Status = types.ClusterStatusInservice
	}
	if f.hpClusters == nil {
		f.hpClusters = map[string]*HyperPodCluster{}
	}
	f.hpClusters[c.Name] = &c
}

type smClusterDescribeIn struct {
	ClusterName *string
}

func (f *SageMaker) clusterOps() map[string]handler {
	return map[string]handler{
		"DescribeCluster": func(_ *http.Request, decode func(any) *Error) (any, *Error) {
			var in smClusterDescribeIn
			if e := decode(&in); e != nil {
				return nil, e
			}
			return f.describeCluster(in)
		},
		"ListClusterNodes": func(_ *http.Request, decode func(any) *Error) (any, *Error) {
			var in smListClusterNodesIn
			if e := decode(&in); e != nil {
				return nil, e
			}
			return f.listClusterNodes(in)
		},
	}
}

// smListClusterNodesIn is ListClusterNodes' request (SageMaker API
// Reference, API_ListClusterNodes.html).
type smListClusterNodesIn struct {
	ClusterName                           *string
	InstanceGroupNameContains             *string
	MaxResults                            *int32
	NextToken                             *string
	SortBy, SortOrder                     *string
	CreationTimeAfter, CreationTimeBefore *float64
	IncludeNodeLogicalIds                 *bool
}

// groupNameContains is InstanceGroupNameContains' pattern.
var groupNameContains = regexp.MustCompile(`^[a-zA-Z0-9](-*[a-zA-Z0-9])*$`)

func (f *SageMaker) listClusterNodes(in smListClusterNodesIn) (any, *Error) {
	switch {
	case in.ClusterName == nil:
		return nil, Validation("1 validation error detected: Value null at 'clusterName' failed to satisfy constraint: Member must not be null")
	case len(*in.ClusterName) > 256 || !clusterNameOrARN.MatchString(*in.ClusterName):
		return nil, Validation("Value %q at 'clusterName' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", *in.ClusterName, clusterNameOrARN)
	case in.InstanceGroupNameContains != nil && (len(*in.InstanceGroupNameContains) > 63 || !groupNameContains.MatchString(*in.InstanceGroupNameContains)):
		return nil, Validation("Value %q at 'instanceGroupNameContains' failed to satisfy constraint", *in.InstanceGroupNameContains)
	case !Enum(in.SortBy, types.ClusterSortBy("").Values()) || !Enum(in.SortOrder, types.SortOrder("").Values()):
		return nil, Validation("SortBy or SortOrder is not one of the enum's values")
	}
	max, e := maxResults(in.MaxResults, 100, 100)
	if e != nil {
		return nil, e
	}
	var c *HyperPodCluster
	for _, x := range f.hpClusters {
		if x.Name == *in.ClusterName || x.ARN() == *in.ClusterName {
			c = x
		}
	}
	if c == nil {
		return nil, BadRequest("ResourceNotFound", "Cluster %s not found", *in.ClusterName)
	}
	nodes := []map[string]any{}
	for _, g := range c.Groups {
		if in.InstanceGroupNameContains != nil && !strings.Contains(g.Name, *in.InstanceGroupNameContains) {
			continue
		}
		for _, id := range g.Instances {
			nodes = append(nodes, map[string]any{
				"InstanceGroupName": g.Name, "InstanceId": id, "InstanceType": string(g.InstanceType),
				"LaunchTime":     float64(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix()),
				"InstanceStatus": map[string]any{"Status": string(types.ClusterInstanceStatusRunning)},
			})
		}
	}
	return listing("ClusterNodeSummaries", nodes, max, in.NextToken)
}

func (f *SageMaker) describeCluster(in smClusterDescribeIn) (any, *Error) {
	switch {
	case in.ClusterName == nil:
		return nil, Validation("1 validation error detected: Value null at 'clusterName' failed to satisfy constraint: Member must not be null")
	case len(*in.ClusterName) > 256 || !clusterNameOrARN.MatchString(*in.ClusterName):
		return nil, Validation("Value %q at 'clusterName' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", *in.ClusterName, clusterNameOrARN)
	}
	var c *HyperPodCluster
	for _, x := range f.hpClusters {
		if x.Name == *in.ClusterName || x.ARN() == *in.ClusterName {
			c = x
		}
	}
	if c == nil {
		return nil, BadRequest("ResourceNotFound", "Cluster %s not found", *in.ClusterName)
	}
	groups := make([]map[string]any, 0, len(c.Groups))
	for _, g := range c.Groups {
		groups = append(groups, map[string]any{
			"InstanceGroupName": g.Name, "InstanceType": string(g.InstanceType),
			"CurrentCount": g.CurrentCount, "TargetCount": g.TargetCount, "Status": "InService",
		})
	}
	out := map[string]any{
		"ClusterArn": c.ARN(), "ClusterName": c.Name, "ClusterStatus": string(c.Status),
		"CreationTime":   float64(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix()),
		"InstanceGroups": groups,
	}
	if c.EKSClusterARN != "" {
		out["Orchestrator"] = map[string]any{"Eks": map[string]any{"ClusterArn": c.EKSClusterARN}}
	}
	return out, nil
}
