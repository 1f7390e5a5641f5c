package provision

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/slurm"
)

// Bases of an observed capacity: what the count approvals use was taken
// from.
const (
	BasisNodes  = "nodes"           // healthy, schedulable nodes (Kubernetes)
	BasisGroups = "instance groups" // the instance groups' CurrentCount (SageMaker)
	// BasisSlurmNodes: the Slurm nodes that can be allocated new work
	// (sinfo; not drained, down, failing or not responding).
	BasisSlurmNodes = slurm.BasisNodes
)

// ObservedType is one instance type of the cluster as read from it. Counts
// not read are -1.
type ObservedType struct {
	InstanceType              string
	Capacity                  int
	Basis                     string
	GroupCurrent, GroupTarget int
	Nodes, NodesSchedulable   int
	ByHealth                  map[string]int
}

// ObservedInventory is the cluster's capacity as read from it.
type ObservedInventory struct {
	// Cluster is the HyperPod cluster's name (from DescribeCluster, or as
	// the caller named it when SageMaker is not read).
	Cluster string
	Types   []ObservedType
}

// ErrNothingToRead: neither a cluster (kubeconfig) nor the HyperPod
// cluster's AWS side (settings with a cluster ARN, real AWS calls) is
// configured, so the inventory can only be typed in.
var ErrNothingToRead = errors.New("the portal reads neither a cluster (no --kubeconfig), nor a Slurm cluster's nodes (no Slurm transport or no slurm.partition_instance_types), nor SageMaker (no AWS settings with cluster_arn, or AWS calls are off)")

// ErrClusterName: the cluster's name is needed and SageMaker, which would
// tell it, is not read.
var ErrClusterName = errors.New("name the HyperPod cluster: the portal does not read SageMaker, so it cannot tell the cluster's name")

// ClusterChecker runs the readiness checks and reads the inventory from its
// sources. It is what the web layer calls (through a narrow interface).
type ClusterChecker struct {
	Sources ReadinessSources
}

// CanRead reports whether ReadInventory has a source to read.
func (c *ClusterChecker) CanRead() bool {
	s := c.Sources
	return s.Kube != nil || s.readsSlurm() || (s.ClusterInfo != nil && s.ClusterARN != "")
}

// readsSlurm: the inventory comes from the Slurm nodes (no Kubernetes
// cluster is read, a Slurm transport and the partitions' instance types
// are configured).
func (s ReadinessSources) readsSlurm() bool {
	return s.Kube == nil && s.Slurm != nil && len(s.SlurmPartitionTypes) > 0
}

// Readiness runs the checks.
func (c *ClusterChecker) Readiness(ctx context.Context) Readiness {
	return CheckReadiness(ctx, c.Sources)
}

// PlanReadiness is the part of Readiness a plan's preview warns of, read
// from the cluster only: the Kueue API versions served and whether
// NetworkPolicies are enforced. It makes none of Readiness's AWS calls (the
// approval page is viewed far more often than the readiness page).
func (c *ClusterChecker) PlanReadiness(ctx context.Context) Readiness {
	var r Readiness
	r.Checks = append(r.Checks, kueueCheck(ctx, c.Sources, &r), networkPolicyCheck(ctx, c.Sources, nil, &r))
	return r
}

// HyperPodInstanceType is whether an instance type is a HyperPod
// (SageMaker ml.*) one; the inventory counts only those, not e.g. the EKS
// cluster's own node group.
func HyperPodInstanceType(t string) bool { return strings.HasPrefix(t, "ml.") }

// ReadInventory reads the cluster's capacity per ml.* instance type. The
// instance groups (SageMaker DescribeCluster: CurrentCount and TargetCount)
// and the nodes (label node.kubernetes.io/instance-type, HyperPod's health
// label) are read where configured. The capacity approvals count is:
//   - with the nodes read: the nodes labelled Schedulable and not cordoned,
//     because only they can run work now (a node being replaced or
//     rebooted is in CurrentCount but not usable);
//   - with a Slurm cluster's nodes read instead (sinfo through the Slurm
//     transport, each partition's nodes of the instance type
//     SlurmPartitionTypes names): the nodes that can be allocated new
//     work (slurm.UsableState), for the same reason;
//   - else the instance groups' CurrentCount.
//
// cluster names the HyperPod cluster; with SageMaker read it must be the
// configured cluster's name (or empty, for that name).
func (c *ClusterChecker) ReadInventory(ctx context.Context, cluster string) (ObservedInventory, error) {
	src := c.Sources
	readAWS := src.ClusterInfo != nil && src.ClusterARN != ""
	if !c.CanRead() {
		return ObservedInventory{}, ErrNothingToRead
	}
	inv := ObservedInventory{Cluster: cluster}
	by := map[string]*ObservedType{}
	get := func(typ string) *ObservedType {
		if by[typ] == nil {
			by[typ] = &ObservedType{InstanceType: typ, GroupCurrent: -1, GroupTarget: -1, Nodes: -1, NodesSchedulable: -1}
		}
		return by[typ]
	}
	if readAWS {
		hp, err := awsprov.DescribeHyperPodCluster(ctx, src.ClusterInfo, src.ClusterARN)
		if err != nil {
			return ObservedInventory{}, err
		}
		if cluster != "" && hp.Name != cluster {
			return ObservedInventory{}, fmt.Errorf("the portal's cluster (cluster_arn %s) is %s, not %s", src.ClusterARN, hp.Name, cluster)
		}
		inv.Cluster = hp.Name
		for _, g := range hp.Groups {
			t := get(g.InstanceType)
			t.GroupCurrent = max(t.GroupCurrent, 0) + g.CurrentCount
			t.GroupTarget = max(t.GroupTarget, 0) + g.TargetCount
		}
	}
	if inv.Cluster == "" {
		return ObservedInventory{}, ErrClusterName
	}
	if src.Kube != nil {
		nodes, err := src.Kube.Nodes(ctx)
		if err != nil {
			return ObservedInventory{}, err
		}
		for _, n := range nodes {
			t := get(n.InstanceType)
			t.Nodes, t.NodesSchedulable, t.ByHealth = n.Total, n.Schedulable, n.ByHealth
		}
	}
	if src.readsSlurm() {
		nodes, err := slurm.Nodes(ctx, src.Slurm)
		if err != nil {
			return ObservedInventory{}, err
		}
		for _, c := range slurm.Capacity(nodes, src.SlurmPartitionTypes) {
			t := get(c.InstanceType)
			t.Nodes, t.NodesSchedulable = c.Nodes, c.Usable
		}
	}
	for _, t := range by {
		if !HyperPodInstanceType(t.InstanceType) {
			continue // not a HyperPod instance (e.g. the EKS cluster's own node group)
		}
		if src.Kube != nil || src.readsSlurm() {
			t.Basis, t.Capacity = BasisNodes, max(t.NodesSchedulable, 0)
			if src.Kube == nil {
				t.Basis = BasisSlurmNodes
			}
			if t.Nodes < 0 {
				t.Nodes, t.NodesSchedulable = 0, 0
			}
		} else {
			t.Basis, t.Capacity = BasisGroups, max(t.GroupCurrent, 0)
		}
		inv.Types = append(inv.Types, *t)
	}
	sort.Slice(inv.Types, func(i, j int) bool { return inv.Types[i].InstanceType < inv.Types[j].InstanceType })
	return inv, nil
}
