package provision_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/support/awstest"
)

// The cluster prerequisites the seed names (issue 31 item 8), read through
// the real SDK clients from strict local SageMaker and EKS endpoints: the
// EKS authentication mode, the API endpoint's access, and the CloudWatch
// Observability add-on's version. Each state the page can show, and the
// reading's failure, is checked.
func TestReadinessClusterPrerequisites(t *testing.T) {
	const eksName = "hp-eks"
	sm := awstest.NewSageMaker(t)
	hp := awstest.HyperPodCluster{Name: "shared-hp", ID: "a1b2c3d4e5f6",
		EKSClusterARN: "arn:aws:eks:" + awstest.Region + ":" + awstest.Account + ":cluster/" + eksName}
	sm.AddHyperPodCluster(hp)
	ek := awstest.NewEKS(t)
	ek.AddCluster(eksName)
	src := provision.ReadinessSources{
		ClusterInfo: sagemaker.NewFromConfig(awstest.Config(1), func(o *sagemaker.Options) { o.BaseEndpoint = aws.String(sm.URL()) }),
		Addons:      eks.NewFromConfig(awstest.Config(1), func(o *eks.Options) { o.BaseEndpoint = aws.String(ek.URL()) }),
		ClusterARN:  hp.ARN(),
	}
	ctx := context.Background()
	check := func(name string) provision.Check {
		t.Helper()
		c, ok := provision.CheckReadiness(ctx, src).Check(name)
		if !ok {
			t.Fatalf("no check %q", name)
		}
		return c
	}
	expect := func(step, name string, status provision.CheckStatus, detail string, todo bool) {
		t.Helper()
		c := check(name)
		if c.Status != status || !strings.Contains(c.Detail, detail) || (c.Todo != "") != todo {
			t.Errorf("%s: %s = %s %q (todo %q); want %s with %q, todo %v", step, name, c.Status, c.Detail, c.Todo, status, detail, todo)
		}
	}

	// EKS's defaults: API_AND_CONFIG_MAP (the fake's AddCluster), a public
	// endpoint open to everyone, no CloudWatch add-on.
	expect("defaults", provision.CheckAuthMode, provision.CheckOK, "API_AND_CONFIG_MAP", false)
	expect("defaults", provision.CheckEndpointAccess, provision.CheckWarning, "0.0.0.0/0", true)
	expect("defaults", provision.CheckCloudWatch, provision.CheckWarning, "not installed", true)

	ek.SetAuthenticationMode(eksName, "CONFIG_MAP")
	expect("config map", provision.CheckAuthMode, provision.CheckFailing, "CONFIG_MAP", true)
	ek.SetAuthenticationMode(eksName, "API")
	expect("api", provision.CheckAuthMode, provision.CheckOK, "API", false)

	ek.SetEndpointAccess(eksName, true, true, "203.0.113.0/24")
	expect("restricted", provision.CheckEndpointAccess, provision.CheckOK, "203.0.113.0/24", false)
	ek.SetEndpointAccess(eksName, false, true)
	expect("private", provision.CheckEndpointAccess, provision.CheckOK, "Private only", false)

	ek.SetAddon(eksName, awstest.Addon{Name: awsprov.AddonCloudWatch, Version: "v2.3.9-eksbuild.1"})
	expect("old add-on", provision.CheckCloudWatch, provision.CheckWarning, "older than 2.4.0", true)
	ek.SetAddon(eksName, awstest.Addon{Name: awsprov.AddonCloudWatch, Version: "v2.4.0-eksbuild.1"})
	expect("minimum", provision.CheckCloudWatch, provision.CheckOK, "v2.4.0-eksbuild.1", false)
	ek.SetAddon(eksName, awstest.Addon{Name: awsprov.AddonCloudWatch, Version: "v10.0.0-eksbuild.1"})
	expect("newer", provision.CheckCloudWatch, provision.CheckOK, "v10.0.0", false)

	// A role that may not describe the EKS cluster (a policy older than
	// eks:DescribeCluster): those two checks say why, the add-on checks
	// still read their add-ons.
	ek.Deny("DescribeCluster", 1)
	rd := provision.CheckReadiness(ctx, src)
	if c, _ := rd.Check(provision.CheckAuthMode); c.Status != provision.CheckUnknown || !strings.Contains(c.Detail, "DescribeCluster") && !strings.Contains(c.Detail, "describe") {
		t.Errorf("auth mode with DescribeCluster denied = %+v", c)
	}
	if c, _ := rd.Check(provision.CheckCloudWatch); c.Status != provision.CheckOK {
		t.Errorf("CloudWatch add-on with DescribeCluster denied = %+v, want ok (the add-on was read)", c)
	}

	// The EKS cluster cannot be read: every check that needs it says why,
	// none passes.
	src.ClusterARN = "arn:aws:sagemaker:" + awstest.Region + ":" + awstest.Account + ":cluster/zzzzzzzzzzzz"
	for _, name := range []string{provision.CheckAuthMode, provision.CheckEndpointAccess, provision.CheckCloudWatch} {
		expect("unreadable", name, provision.CheckUnknown, "", false)
	}
}

// The plan preview's readiness (the approval page, viewed often) reads the
// cluster only: none of Readiness's AWS calls.
func TestPlanReadinessMakesNoAWSCall(t *testing.T) {
	sm := awstest.NewSageMaker(t)
	hp := awstest.HyperPodCluster{Name: "shared-hp", ID: "a1b2c3d4e5f6",
		EKSClusterARN: "arn:aws:eks:" + awstest.Region + ":" + awstest.Account + ":cluster/hp-eks"}
	sm.AddHyperPodCluster(hp)
	ek := awstest.NewEKS(t)
	ek.AddCluster("hp-eks")
	c := &provision.ClusterChecker{Sources: provision.ReadinessSources{
		ClusterInfo: sagemaker.NewFromConfig(awstest.Config(1), func(o *sagemaker.Options) { o.BaseEndpoint = aws.String(sm.URL()) }),
		Addons:      eks.NewFromConfig(awstest.Config(1), func(o *eks.Options) { o.BaseEndpoint = aws.String(ek.URL()) }),
		ClusterARN:  hp.ARN(),
	}}
	r := c.PlanReadiness(context.Background())
	if _, ok := r.Check(provision.CheckKueueAPI); !ok {
		t.Errorf("plan readiness lacks the Kueue check: %+v", r.Checks)
	}
	if n := len(sm.Counts()) + len(ek.Counts()); n != 0 {
		t.Errorf("plan readiness called AWS: %v %v", sm.Counts(), ek.Counts())
	}
	c.Readiness(context.Background())
	if len(ek.Counts()) == 0 {
		t.Error("the counts see no call even from the full readiness: the test proves nothing")
	}
}
