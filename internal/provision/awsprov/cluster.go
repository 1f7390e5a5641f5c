package awsprov

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"sigs.k8s.io/yaml"
)

// ClusterInfoAPI is the part of the SageMaker API the readiness checks and
// the inventory refresh read: the HyperPod cluster's instance groups and its
// EKS cluster. *sagemaker.Client satisfies it. Every method here must appear
// in Actions (actions_test.go checks).
type ClusterInfoAPI interface {
	DescribeCluster(context.Context, *sagemaker.DescribeClusterInput, ...func(*sagemaker.Options)) (*sagemaker.DescribeClusterOutput, error)
}

// AddonAPI is the part of the EKS API the readiness checks read: the
// installed add-ons' versions and configuration, and the cluster's
// authentication mode and API endpoint access. *eks.Client satisfies it.
// Every method here must appear in Actions (actions_test.go checks).
type AddonAPI interface {
	DescribeAddon(context.Context, *eks.DescribeAddonInput, ...func(*eks.Options)) (*eks.DescribeAddonOutput, error)
	DescribeCluster(context.Context, *eks.DescribeClusterInput, ...func(*eks.Options)) (*eks.DescribeClusterOutput, error)
}

var (
	_ ClusterInfoAPI = (*sagemaker.Client)(nil)
	_ AddonAPI       = (*eks.Client)(nil)
)

// Add-on names, as `aws eks describe-addon --addon-name` takes them.
const (
	// AddonTaskGovernance is HyperPod task governance (Kueue inside):
	// https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-operate-console-ui-governance-upgrade.html
	AddonTaskGovernance = "amazon-sagemaker-hyperpod-taskgovernance"
	// AddonVPCCNI is the Amazon VPC CNI, which enforces NetworkPolicies
	// when its network policy support is on:
	// https://docs.aws.amazon.com/eks/latest/userguide/cni-network-policy-configure.html
	AddonVPCCNI = "vpc-cni"
	// AddonPodIdentity is the EKS Pod Identity agent, which Pod Identity
	// associations need.
	AddonPodIdentity = "eks-pod-identity-agent"
	// AddonCloudWatch is the Amazon CloudWatch Observability add-on
	// ("The Amazon EKS add-on name is amazon-cloudwatch-observability",
	// https://docs.aws.amazon.com/eks/latest/userguide/amazon-cloudwatch-observability.html),
	// which HyperPod's task governance dashboard needs for its metrics.
	AddonCloudWatch = "amazon-cloudwatch-observability"
)

// HyperPodCluster is what DescribeCluster says about the shared cluster.
type HyperPodCluster struct {
	Name, ARN, Status string
	// EKSClusterARN and EKSClusterName are the orchestrating EKS cluster's
	// (empty for a Slurm cluster).
	EKSClusterARN, EKSClusterName string
	Groups                        []InstanceGroup
}

// InstanceGroup is one of the cluster's instance groups: CurrentCount
// instances run now, TargetCount are asked for.
type InstanceGroup struct {
	Name, InstanceType        string
	CurrentCount, TargetCount int
}

// DescribeHyperPodCluster reads the HyperPod cluster nameOrARN.
func DescribeHyperPodCluster(ctx context.Context, api ClusterInfoAPI, nameOrARN string) (HyperPodCluster, error) {
	out, err := api.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: aws.String(nameOrARN)})
	if err != nil {
		return HyperPodCluster{}, fmt.Errorf("hyperpod cluster %s: describe: %w", nameOrARN, err)
	}
	c := HyperPodCluster{Name: aws.ToString(out.ClusterName), ARN: aws.ToString(out.ClusterArn), Status: string(out.ClusterStatus)}
	if o := out.Orchestrator; o != nil && o.Eks != nil {
		c.EKSClusterARN = aws.ToString(o.Eks.ClusterArn)
		// arn:aws:eks:region:account:cluster/NAME
		if a, err := arn.Parse(c.EKSClusterARN); err == nil {
			c.EKSClusterName = strings.TrimPrefix(a.Resource, "cluster/")
		}
	}
	for _, g := range out.InstanceGroups {
		c.Groups = append(c.Groups, InstanceGroup{
			Name: aws.ToString(g.InstanceGroupName), InstanceType: string(g.InstanceType),
			CurrentCount: int(aws.ToInt32(g.CurrentCount)), TargetCount: int(aws.ToInt32(g.TargetCount)),
		})
	}
	return c, nil
}

// Addon is an installed EKS add-on. Installed is false when the cluster has
// no add-on of that name (EKS answers ResourceNotFoundException).
type Addon struct {
	Name, Version, Status string
	Installed             bool
	// ConfigurationValues are the add-on's configuration as given (JSON or
	// YAML), "" when none.
	ConfigurationValues string
}

// DescribeAddon reads add-on name on the EKS cluster. EKS answers
// ResourceNotFoundException both for a missing add-on and a missing
// cluster; callers take the cluster's name from the HyperPod cluster's
// orchestrator (DescribeHyperPodCluster), so it means the add-on.
func DescribeAddon(ctx context.Context, api AddonAPI, cluster, name string) (Addon, error) {
	out, err := api.DescribeAddon(ctx, &eks.DescribeAddonInput{ClusterName: aws.String(cluster), AddonName: aws.String(name)})
	if hasCode(err, notFoundCode) {
		return Addon{Name: name}, nil
	}
	if err != nil {
		return Addon{}, fmt.Errorf("eks add-on %s on %s: describe: %w", name, cluster, err)
	}
	a := Addon{Name: name, Installed: true}
	if out.Addon != nil {
		a.Version, a.Status = aws.ToString(out.Addon.AddonVersion), string(out.Addon.Status)
		a.ConfigurationValues = aws.ToString(out.Addon.ConfigurationValues)
	}
	return a, nil
}

// NetworkPolicyConfigured reports whether a vpc-cni add-on's configuration
// values turn network policy support on: `"enableNetworkPolicy": "true"`,
// the key and value AWS's EKS user guide gives (cni-network-policy-configure,
// "Enable the network policy parameter for the add-on"). The values are JSON
// or YAML; a value that does not parse counts as off.
func NetworkPolicyConfigured(configurationValues string) bool {
	var v map[string]any
	if strings.TrimSpace(configurationValues) == "" || yaml.Unmarshal([]byte(configurationValues), &v) != nil {
		return false
	}
	switch x := v["enableNetworkPolicy"].(type) {
	case string:
		return strings.EqualFold(x, "true")
	case bool:
		return x
	}
	return false
}

// EKSCluster is what the readiness checks need of the EKS cluster
// (DescribeCluster, API_DescribeCluster.html: Cluster.accessConfig and
// Cluster.resourcesVpcConfig).
type EKSCluster struct {
	Name string
	// AuthenticationMode: API, API_AND_CONFIG_MAP or CONFIG_MAP. Access
	// entries need one with the EKS API ("To begin using access entries, you
	// must change the authentication mode of the cluster to either the
	// API_AND_CONFIG_MAP or API modes",
	// https://docs.aws.amazon.com/eks/latest/userguide/setting-up-access-entries.html).
	AuthenticationMode string
	// The API server endpoint's access (VpcConfigResponse): public (default
	// true), private (default false), and the CIDR blocks allowed to reach
	// the public endpoint (default 0.0.0.0/0: everyone),
	// https://docs.aws.amazon.com/eks/latest/APIReference/API_VpcConfigRequest.html.
	EndpointPublic, EndpointPrivate bool
	PublicAccessCIDRs               []string
	// VPCID is the cluster's VPC (resourcesVpcConfig.vpcId), whose VPC
	// endpoints the readiness page reads; Region is the one in the
	// cluster's ARN, which the endpoints' service names carry.
	VPCID, Region string
}

// DescribeEKSCluster reads the EKS cluster name.
func DescribeEKSCluster(ctx context.Context, api AddonAPI, name string) (EKSCluster, error) {
	out, err := api.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(name)})
	if err != nil {
		return EKSCluster{}, fmt.Errorf("eks cluster %s: describe: %w", name, err)
	}
	c := EKSCluster{Name: name}
	if out.Cluster == nil {
		return c, nil
	}
	if a, err := arn.Parse(aws.ToString(out.Cluster.Arn)); err == nil {
		c.Region = a.Region
	}
	if a := out.Cluster.AccessConfig; a != nil {
		c.AuthenticationMode = string(a.AuthenticationMode)
	}
	if v := out.Cluster.ResourcesVpcConfig; v != nil {
		c.EndpointPublic, c.EndpointPrivate = v.EndpointPublicAccess, v.EndpointPrivateAccess
		c.PublicAccessCIDRs, c.VPCID = v.PublicAccessCidrs, aws.ToString(v.VpcId)
	}
	return c, nil
}
