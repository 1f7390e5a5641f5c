package awsprov

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// VPCEndpointAPI is the part of the EC2 API the readiness page reads: the
// VPC endpoints of the EKS cluster's VPC. *ec2.Client satisfies it. Every
// method here must appear in Actions (actions_test.go checks).
type VPCEndpointAPI interface {
	DescribeVpcEndpoints(context.Context, *ec2.DescribeVpcEndpointsInput, ...func(*ec2.Options)) (*ec2.DescribeVpcEndpointsOutput, error)
}

var _ VPCEndpointAPI = (*ec2.Client)(nil)

// VPCEndpoint is one VPC endpoint as DescribeVpcEndpoints reports it
// (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_VpcEndpoint.html).
type VPCEndpoint struct {
	ID, ServiceName string
	// Type is Gateway, Interface, GatewayLoadBalancer, ...
	Type string
	// State as the service writes it on the wire: available, pending,
	// pendingAcceptance, deleting, deleted, rejected, failed, expired (the
	// API reference capitalizes the values, the service and the CLI's
	// examples do not: awscli/examples/ec2/describe-vpc-endpoints.rst shows
	// "State": "available"), so compare with Available.
	State string
	// PrivateDNS: (interface endpoints) the VPC resolves the service's
	// public name to the endpoint.
	PrivateDNS bool
}

// Available reports whether the endpoint is in service.
func (e VPCEndpoint) Available() bool { return strings.EqualFold(e.State, "available") }

// Pending reports whether the endpoint is being made, or waits for the
// service to accept it.
func (e VPCEndpoint) Pending() bool {
	return strings.EqualFold(e.State, "pending") || strings.EqualFold(e.State, "pendingAcceptance")
}

// maxEndpointPages bounds the pages DescribeVPCEndpoints follows, so that a
// service answering the same token forever cannot hold a page view.
const maxEndpointPages = 50

// DescribeVPCEndpoints reads every VPC endpoint of vpcID (filter vpc-id,
// following NextToken).
func DescribeVPCEndpoints(ctx context.Context, api VPCEndpointAPI, vpcID string) ([]VPCEndpoint, error) {
	in := &ec2.DescribeVpcEndpointsInput{Filters: []types.Filter{{Name: aws.String("vpc-id"), Values: []string{vpcID}}}}
	var out []VPCEndpoint
	for page := 0; ; page++ {
		if page == maxEndpointPages {
			return nil, fmt.Errorf("vpc %s: describe vpc endpoints: more than %d pages", vpcID, maxEndpointPages)
		}
		res, err := api.DescribeVpcEndpoints(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("vpc %s: describe vpc endpoints: %w", vpcID, err)
		}
		for _, e := range res.VpcEndpoints {
			out = append(out, VPCEndpoint{
				ID: aws.ToString(e.VpcEndpointId), ServiceName: aws.ToString(e.ServiceName),
				Type: string(e.VpcEndpointType), State: string(e.State), PrivateDNS: aws.ToBool(e.PrivateDnsEnabled),
			})
		}
		next := aws.ToString(res.NextToken)
		if next == "" {
			return out, nil
		}
		in.NextToken = aws.String(next)
	}
}

// AccessDenied reports whether err is a service refusing the caller's
// permission: EC2 answers UnauthorizedOperation
// (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html),
// awsQuery services AccessDenied, the JSON ones AccessDeniedException.
func AccessDenied(err error) bool {
	return hasCode(err, "UnauthorizedOperation", "AccessDenied", "AccessDeniedException")
}
