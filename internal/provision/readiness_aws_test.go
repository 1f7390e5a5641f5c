package provision_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
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
	vpce := awstest.NewEC2(t)
	c := &provision.ClusterChecker{Sources: provision.ReadinessSources{
		ClusterInfo:  sagemaker.NewFromConfig(awstest.Config(1), func(o *sagemaker.Options) { o.BaseEndpoint = aws.String(sm.URL()) }),
		Addons:       eks.NewFromConfig(awstest.Config(1), func(o *eks.Options) { o.BaseEndpoint = aws.String(ek.URL()) }),
		VPCEndpoints: ec2.NewFromConfig(awstest.Config(1), func(o *ec2.Options) { o.BaseEndpoint = aws.String(vpce.URL()) }),
		ClusterARN:   hp.ARN(),
	}}
	r := c.PlanReadiness(context.Background())
	if _, ok := r.Check(provision.CheckKueueAPI); !ok {
		t.Errorf("plan readiness lacks the Kueue check: %+v", r.Checks)
	}
	if n := len(sm.Counts()) + len(ek.Counts()) + len(vpce.Counts()); n != 0 {
		t.Errorf("plan readiness called AWS: %v %v %v", sm.Counts(), ek.Counts(), vpce.Counts())
	}
	c.Readiness(context.Background())
	if len(ek.Counts()) == 0 || len(vpce.Counts()) == 0 {
		t.Error("the counts see no call even from the full readiness: the test proves nothing")
	}
}

// The VPC endpoints the seed lists (S3, ECR, CloudWatch), read through the
// real EC2 client from a strict local EC2 endpoint in the VPC the EKS
// cluster reports. The endpoints wanted are the EKS user guide's for a
// cluster without outbound internet access
// (https://docs.aws.amazon.com/eks/latest/userguide/private-clusters.html):
// ecr.api, ecr.dkr and s3 for images, logs for CloudWatch Logs, eks-auth
// with Pod Identity.
func TestReadinessVPCEndpoints(t *testing.T) {
	const eksName = "hp-eks"
	sm := awstest.NewSageMaker(t)
	hp := awstest.HyperPodCluster{Name: "shared-hp", ID: "a1b2c3d4e5f6",
		EKSClusterARN: "arn:aws:eks:" + awstest.Region + ":" + awstest.Account + ":cluster/" + eksName}
	sm.AddHyperPodCluster(hp)
	ek := awstest.NewEKS(t)
	ek.AddCluster(eksName)
	vpce := awstest.NewEC2(t)
	src := provision.ReadinessSources{
		ClusterInfo:  sagemaker.NewFromConfig(awstest.Config(1), func(o *sagemaker.Options) { o.BaseEndpoint = aws.String(sm.URL()) }),
		Addons:       eks.NewFromConfig(awstest.Config(1), func(o *eks.Options) { o.BaseEndpoint = aws.String(ek.URL()) }),
		VPCEndpoints: ec2.NewFromConfig(awstest.Config(1), func(o *ec2.Options) { o.BaseEndpoint = aws.String(vpce.URL()) }),
		ClusterARN:   hp.ARN(),
		PodIdentity:  true,
	}
	ctx := context.Background()
	check := func(step string, status provision.CheckStatus) provision.Check {
		t.Helper()
		c, ok := provision.CheckReadiness(ctx, src).Check(provision.CheckVPCEndpoints)
		if !ok {
			t.Fatalf("%s: no check %q", step, provision.CheckVPCEndpoints)
		}
		if c.Status != status {
			t.Errorf("%s: status %s (%q, todo %q), want %s", step, c.Status, c.Detail, c.Todo, status)
		}
		return c
	}
	all := []string{"s3", "ecr.api", "ecr.dkr", "logs", "eks-auth"}

	// None at all: a warning (the nodes may have a NAT gateway), naming
	// each endpoint with the command that creates it.
	c := check("none", provision.CheckWarning)
	for _, svc := range all {
		name := awstest.ServiceName(svc)
		if !strings.Contains(c.Detail, "no "+name+" endpoint") || !strings.Contains(c.Todo, "--service-name "+name+" ") {
			t.Errorf("none: %s not named with its command: %q / %q", name, c.Detail, c.Todo)
		}
	}
	if !strings.Contains(c.Detail, "no route to the internet") || !strings.Contains(c.Todo, "--vpc-endpoint-type Gateway --service-name "+awstest.ServiceName("s3")) {
		t.Errorf("none: the detail does not say when they matter, or S3 is not a gateway: %q / %q", c.Detail, c.Todo)
	}

	// Endpoints of another VPC do not count.
	for _, svc := range all {
		vpce.AddVPCEndpoint(awstest.VPCEndpoint{VPC: "vpc-0fedcba9876543210", Service: awstest.ServiceName(svc), PrivateDNS: true})
	}
	check("other VPC", provision.CheckWarning)

	// Every one, available; ecr.api's only endpoint has private DNS off.
	ids := map[string]string{"s3": vpce.AddVPCEndpoint(awstest.VPCEndpoint{Service: awstest.ServiceName("s3"), Type: "Gateway"})}
	for _, svc := range all[1:] {
		ids[svc] = vpce.AddVPCEndpoint(awstest.VPCEndpoint{Service: awstest.ServiceName(svc), PrivateDNS: svc != "ecr.api"})
	}
	c = check("private DNS off", provision.CheckWarning)
	if !strings.Contains(c.Detail, ids["ecr.api"]+" has private DNS off") || c.Todo != "Turn private DNS on: aws ec2 modify-vpc-endpoint --vpc-endpoint-id "+ids["ecr.api"]+" --private-dns-enabled." {
		t.Errorf("private DNS off: %q / %q", c.Detail, c.Todo)
	}
	ids["ecr.api"] = vpce.AddVPCEndpoint(awstest.VPCEndpoint{Service: awstest.ServiceName("ecr.api"), PrivateDNS: true})
	c = check("all available", provision.CheckOK)
	for svc, id := range ids {
		if !strings.Contains(c.Detail, awstest.ServiceName(svc)) || !strings.Contains(c.Detail, id) {
			t.Errorf("all available: %s (%s) not listed: %q", svc, id, c.Detail)
		}
	}

	// The answer in pages (the service's cut, with NextToken): the same.
	vpce.SetPageSize(2)
	before := vpce.Count("DescribeVpcEndpoints")
	check("paged", provision.CheckOK)
	if n := vpce.Count("DescribeVpcEndpoints") - before; n != 3 {
		t.Errorf("paged: %d calls for 6 endpoints in pages of 2, want 3", n)
	}

	// One deleted: a warning naming it alone.
	vpce.SetVPCEndpointState(ids["logs"], "deleted")
	c = check("logs deleted", provision.CheckWarning)
	if !strings.Contains(c.Detail, ids["logs"]+" is deleted") || !strings.Contains(c.Todo, "--service-name "+awstest.ServiceName("logs")+" ") ||
		strings.Contains(c.Todo, awstest.ServiceName("ecr.dkr")) || strings.Count(c.Todo, "create-vpc-endpoint") != 1 {
		t.Errorf("logs deleted: %q / %q", c.Detail, c.Todo)
	}
	vpce.SetVPCEndpointState(ids["logs"], "available")

	// One waiting for acceptance: not yet available.
	vpce.SetVPCEndpointState(ids["ecr.dkr"], "pendingAcceptance")
	c = check("pending", provision.CheckWarning)
	if !strings.Contains(c.Detail, ids["ecr.dkr"]+" is pendingAcceptance, not yet available") || strings.Contains(c.Todo, "create-vpc-endpoint") {
		t.Errorf("pending: %q / %q", c.Detail, c.Todo)
	}
	vpce.SetVPCEndpointState(ids["ecr.dkr"], "available")

	// Without Pod Identity, eks-auth is not asked for.
	vpce.SetVPCEndpointState(ids["eks-auth"], "deleted")
	check("eks-auth gone, with Pod Identity", provision.CheckWarning)
	src.PodIdentity = false
	check("eks-auth gone, without Pod Identity", provision.CheckOK)
	src.PodIdentity = true

	// A role that may not read them: a warning naming the action, never a
	// failure.
	vpce.Deny("DescribeVpcEndpoints", 1)
	c = check("denied", provision.CheckWarning)
	if !strings.Contains(c.Detail, "ec2:DescribeVpcEndpoints") || !strings.Contains(c.Todo, "ec2:DescribeVpcEndpoints") {
		t.Errorf("denied: %q / %q", c.Detail, c.Todo)
	}

	// Any other error, or no EKS cluster, or no EC2 client: unknown.
	vpce.Fail(1)
	check("500", provision.CheckUnknown)
	ek.Deny("DescribeCluster", 1)
	check("EKS cluster unreadable", provision.CheckUnknown)
	src.VPCEndpoints = nil
	check("no EC2 client", provision.CheckUnknown)
}
