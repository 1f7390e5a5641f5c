package awsprov

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/hyperpod-governance/portal/internal/support/awstest"
)

func TestDescribeHyperPodClusterByNameOrARN(t *testing.T) {
	f := awstest.NewSageMaker(t)
	hp := awstest.HyperPodCluster{
		Name: "shared-hp", ID: "a1b2c3d4e5f6",
		EKSClusterARN: "arn:aws:eks:" + awstest.Region + ":" + awstest.Account + ":cluster/" + testEKSCluster,
		Groups: []awstest.InstanceGroup{
			{Name: "gpu", InstanceType: smtypes.ClusterInstanceTypeMlP548xlarge, CurrentCount: 6, TargetCount: 8},
			{Name: "small", InstanceType: smtypes.ClusterInstanceTypeMlG58xlarge, CurrentCount: 4, TargetCount: 4},
		},
	}
	f.AddHyperPodCluster(hp)
	api := smClient(f, 1)
	ctx := context.Background()
	for _, id := range []string{"shared-hp", hp.ARN()} {
		c, err := DescribeHyperPodCluster(ctx, api, id)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if c.Name != "shared-hp" || c.ARN != hp.ARN() || c.Status != "InService" || c.EKSClusterName != testEKSCluster {
			t.Errorf("%s: %+v", id, c)
		}
		if len(c.Groups) != 2 || c.Groups[0] != (InstanceGroup{Name: "gpu", InstanceType: "ml.p5.48xlarge", CurrentCount: 6, TargetCount: 8}) {
			t.Errorf("%s: groups %+v", id, c.Groups)
		}
	}
	// Strict as the service: an unknown cluster, a malformed name.
	if _, err := DescribeHyperPodCluster(ctx, api, "other"); !hasCode(err, "ResourceNotFound") {
		t.Errorf("unknown cluster: %v", err)
	}
	if _, err := DescribeHyperPodCluster(ctx, api, "bad_name!"); !hasCode(err, "ValidationException") || !IsPermanent(err) {
		t.Errorf("malformed name: %v", err)
	}
	if _, err := api.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{}); err == nil {
		t.Error("DescribeCluster without ClusterName succeeded")
	}
}

func TestDescribeAddonAndNetworkPolicyConfig(t *testing.T) {
	e := newEKS(t)
	e.SetAddon(testEKSCluster, awstest.Addon{Name: AddonTaskGovernance, Version: "v1.6.0-eksbuild.1"})
	e.SetAddon(testEKSCluster, awstest.Addon{Name: AddonVPCCNI, Version: "v1.19.0-eksbuild.1", ConfigurationValues: `{"enableNetworkPolicy": "true"}`})
	api := eksClient(e, 1)
	ctx := context.Background()
	tg, err := DescribeAddon(ctx, api, testEKSCluster, AddonTaskGovernance)
	if err != nil || !tg.Installed || tg.Version != "v1.6.0-eksbuild.1" || tg.Status != "ACTIVE" {
		t.Errorf("task governance = %+v, %v", tg, err)
	}
	cni, err := DescribeAddon(ctx, api, testEKSCluster, AddonVPCCNI)
	if err != nil || !NetworkPolicyConfigured(cni.ConfigurationValues) {
		t.Errorf("vpc-cni = %+v, %v", cni, err)
	}
	// An add-on that is not installed is not an error: Installed is false.
	pia, err := DescribeAddon(ctx, api, testEKSCluster, AddonPodIdentity)
	if err != nil || pia.Installed {
		t.Errorf("pod identity agent = %+v, %v", pia, err)
	}
	// A malformed cluster name is refused, as by the service.
	if _, err := DescribeAddon(ctx, api, "-bad", AddonVPCCNI); err == nil || !strings.Contains(err.Error(), "InvalidParameterException") {
		t.Errorf("malformed cluster name: %v", err)
	}
	// The SDK refuses a missing add-on name before sending.
	if _, err := api.DescribeAddon(ctx, nil); err == nil {
		t.Error("DescribeAddon without input succeeded")
	}
}

func TestNetworkPolicyConfigured(t *testing.T) {
	for in, want := range map[string]bool{
		``:                                 false,
		`{}`:                               false,
		`{"enableNetworkPolicy": "true"}`:  true,
		`{"enableNetworkPolicy": "false"}`: false,
		"enableNetworkPolicy: \"true\"\n":  true, // YAML, as the console also takes
		`{"enableNetworkPolicy": true}`:    true,
		`{"nodeAgent": {"enableNetworkPolicy": "true"}}`: false,
		`not json: [`: false,
	} {
		if got := NetworkPolicyConfigured(in); got != want {
			t.Errorf("NetworkPolicyConfigured(%q) = %t, want %t", in, got, want)
		}
	}
}
