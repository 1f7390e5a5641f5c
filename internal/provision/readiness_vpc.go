package provision

import (
	"context"
	"fmt"
	"strings"

	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
)

// CheckVPCEndpoints is the readiness check of the VPC endpoints the seed
// lists.
const CheckVPCEndpoints = "VPC endpoints"

// neededEndpoint is a VPC endpoint the cluster's nodes need when they have
// no route to the internet.
type neededEndpoint struct {
	service string // as in com.amazonaws.<region>.<service>
	gateway bool   // the endpoint to create is a gateway endpoint
	what    string // what the nodes reach through it
}

// neededEndpoints are the endpoints the seed asks for ("configure endpoints
// de VPC para serviços como Amazon S3, Amazon ECR e Amazon CloudWatch",
// shared/seeds/002, "Trate a rede como controle de ponta a ponta"), as the
// EKS user guide names them for a cluster without outbound internet access
// (https://docs.aws.amazon.com/eks/latest/userguide/private-clusters.html,
// the table under "Pod requirements"):
//   - Amazon ECR, for pulling container images: ecr.api, ecr.dkr and s3
//     (ECR serves image layers from S3; S3 as a gateway endpoint, which the
//     same data and lifecycle scripts in S3 go through);
//   - Amazon CloudWatch Logs: logs, "required for node and pod logs sent to
//     Amazon CloudWatch Logs"; the CloudWatch Observability add-on's
//     Container Insights metrics are sent as performance log events in the
//     embedded metric format, to CloudWatch Logs too
//     (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/ContainerInsights.html);
//   - with Pod Identity (the teams' workload roles): eks-auth, "required when
//     using Pod Identity associations".
//
// The list is not exhaustive (the guide's table also names ec2, sts,
// elasticloadbalancing and others, for features the portal does not
// provision).
func neededEndpoints(podIdentity bool) []neededEndpoint {
	out := []neededEndpoint{
		{"s3", true, "image layers from Amazon ECR, and data in Amazon S3"},
		{"ecr.api", false, "Amazon ECR's API, to pull container images"},
		{"ecr.dkr", false, "Amazon ECR's registry, to pull container images"},
		{"logs", false, "CloudWatch Logs: the CloudWatch Observability add-on's metrics and logs"},
	}
	if podIdentity {
		out = append(out, neededEndpoint{"eks-auth", false, "EKS Pod Identity credentials for the teams' workload roles"})
	}
	return out
}

// serviceName is the endpoint service name of svc in region
// (com.amazonaws.us-east-1.ecr.api).
func serviceName(region, svc string) string { return "com.amazonaws." + region + "." + svc }

// endpointFinding is how one needed endpoint stands.
type endpointFinding struct {
	need    neededEndpoint
	found   *awsprov.VPCEndpoint // the best endpoint of the service, nil when none
	problem string               // "" when it is in service
	todo    string
}

// vpcEndpointsCheck reads the VPC endpoints of the EKS cluster's VPC and
// says, for each needed one, whether it exists and is in service: available,
// and an interface endpoint with private DNS on (the guide: "We recommend
// that you enable private DNS names for your VPC endpoints, that way
// workloads can continue using public AWS service endpoints"). Endpoints
// matter only when the nodes have no other way out (a NAT gateway), which
// the portal does not read: a missing one is a warning, never failing. A
// role that may not read them is a warning naming the action.
func vpcEndpointsCheck(ctx context.Context, src ReadinessSources, c *awsprov.EKSCluster, clusterErr string) Check {
	ch := Check{Name: CheckVPCEndpoints}
	switch {
	case src.VPCEndpoints == nil:
		ch.Status, ch.Detail = CheckUnknown, "No EC2 client: no AWS settings with a cluster ARN, or AWS calls are off (dry run)."
		return ch
	case c == nil:
		ch.Status, ch.Detail = CheckUnknown, sentenceOf(clusterErr)
		return ch
	case c.VPCID == "" || c.Region == "":
		ch.Status, ch.Detail = CheckUnknown, fmt.Sprintf("EKS cluster %s reports no VPC (or no region in its ARN).", c.Name)
		return ch
	}
	have, err := awsprov.DescribeVPCEndpoints(ctx, src.VPCEndpoints, c.VPCID)
	switch {
	case awsprov.AccessDenied(err):
		ch.Status = CheckWarning
		ch.Detail = fmt.Sprintf("The portal's role may not read the VPC endpoints of %s (ec2:DescribeVpcEndpoints is not allowed), so S3, ECR and CloudWatch Logs endpoints are not checked.", c.VPCID)
		ch.Todo = fmt.Sprintf("Allow ec2:DescribeVpcEndpoints on \"*\" to the portal's role (portal iam-policy prints it), or check them yourself: aws ec2 describe-vpc-endpoints --filters Name=vpc-id,Values=%s.", c.VPCID)
		return ch
	case err != nil:
		ch.Status, ch.Detail = CheckUnknown, sentenceOf(err.Error())
		return ch
	}
	findings := judgeEndpoints(c, have, src.PodIdentity)
	var ok, problems, todos []string
	for _, f := range findings {
		if f.problem == "" {
			ok = append(ok, fmt.Sprintf("%s (%s %s)", f.found.ServiceName, f.found.Type, f.found.ID))
			continue
		}
		problems = append(problems, f.problem)
		todos = append(todos, f.todo)
	}
	if len(problems) == 0 {
		ch.Status = CheckOK
		ch.Detail = fmt.Sprintf("VPC %s has every endpoint the nodes need without internet access, each available: %s.", c.VPCID, strings.Join(ok, ", "))
		return ch
	}
	ch.Status = CheckWarning
	ch.Detail = fmt.Sprintf("VPC %s: %s. These endpoints are needed only when the HyperPod nodes have no route to the internet (no NAT gateway); without them such nodes cannot pull images, send metrics and logs%s.",
		c.VPCID, strings.Join(problems, "; "), podIdentityClause(src.PodIdentity))
	if len(ok) > 0 {
		ch.Detail += " In service: " + strings.Join(ok, ", ") + "."
	}
	ch.Todo = strings.Join(todos, " ")
	return ch
}

func podIdentityClause(podIdentity bool) string {
	if podIdentity {
		return " or get the workload roles' credentials"
	}
	return ""
}

// judgeEndpoints pairs each needed endpoint with the best endpoint of its
// service in the VPC (available before pending before anything else) and
// says what is wrong with it. A service name is matched by its end
// (.<region>.<service>), so that a partition's own prefix still matches.
func judgeEndpoints(c *awsprov.EKSCluster, have []awsprov.VPCEndpoint, podIdentity bool) []endpointFinding {
	rank := func(e awsprov.VPCEndpoint) int {
		switch {
		case e.Available() && (e.PrivateDNS || strings.EqualFold(e.Type, "Gateway")):
			return 3
		case e.Available():
			return 2
		case e.Pending():
			return 1
		}
		return 0
	}
	var out []endpointFinding
	for _, need := range neededEndpoints(podIdentity) {
		f := endpointFinding{need: need}
		for i, e := range have {
			if strings.HasSuffix(e.ServiceName, "."+c.Region+"."+need.service) && (f.found == nil || rank(e) > rank(*f.found)) {
				f.found = &have[i]
			}
		}
		name := serviceName(c.Region, need.service)
		switch {
		case f.found == nil || rank(*f.found) == 0:
			f.problem = fmt.Sprintf("no %s endpoint (%s)", name, need.what)
			if f.found != nil {
				f.problem = fmt.Sprintf("%s endpoint %s is %s (%s)", name, f.found.ID, f.found.State, need.what)
			}
			f.todo = createEndpointCommand(c.VPCID, name, need.gateway)
		case rank(*f.found) == 1:
			f.problem = fmt.Sprintf("%s endpoint %s is %s, not yet available", name, f.found.ID, f.found.State)
			f.todo = fmt.Sprintf("Wait for %s to become available (a pendingAcceptance endpoint waits for the service to accept it): aws ec2 describe-vpc-endpoints --vpc-endpoint-ids %s.", f.found.ID, f.found.ID)
		case rank(*f.found) == 2:
			f.problem = fmt.Sprintf("%s endpoint %s has private DNS off, so the nodes still resolve the service's public name", name, f.found.ID)
			f.todo = fmt.Sprintf("Turn private DNS on: aws ec2 modify-vpc-endpoint --vpc-endpoint-id %s --private-dns-enabled.", f.found.ID)
		}
		out = append(out, f)
	}
	return out
}

// createEndpointCommand is the AWS CLI command that creates the endpoint
// (https://docs.aws.amazon.com/cli/latest/reference/ec2/create-vpc-endpoint.html):
// a gateway endpoint on the route tables of the nodes' subnets, an
// interface endpoint in the nodes' subnets with private DNS on.
func createEndpointCommand(vpc, service string, gateway bool) string {
	if gateway {
		return fmt.Sprintf("Create it: aws ec2 create-vpc-endpoint --vpc-id %s --vpc-endpoint-type Gateway --service-name %s --route-table-ids <the route tables of the HyperPod nodes' subnets>.", vpc, service)
	}
	return fmt.Sprintf("Create it: aws ec2 create-vpc-endpoint --vpc-id %s --vpc-endpoint-type Interface --service-name %s --subnet-ids <the HyperPod nodes' subnets> --security-group-ids <a group allowing HTTPS (443) from the nodes> --private-dns-enabled.", vpc, service)
}
