package awstest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	smithy "github.com/aws/smithy-go"
)

func ec2Client(e *EC2, cfg aws.Config) *ec2.Client {
	return ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(e.URL()) })
}

// apiCode is the service's error code of err and its HTTP status.
func apiCode(t *testing.T, err error) (string, int) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("not a service error: %v", err)
	}
	status := 0
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	return ae.ErrorCode(), status
}

func vpcFilter(vpc string) []types.Filter {
	return []types.Filter{{Name: aws.String("vpc-id"), Values: []string{vpc}}}
}

// The real SDK client reads what the endpoint stores: filters, pages,
// DryRun, the errors it answers in EC2's XML error document.
func TestEC2DescribeVpcEndpointsThroughTheSDK(t *testing.T) {
	e := NewEC2(t)
	var ids []string
	for _, svc := range []string{"s3", "ecr.api", "ecr.dkr", "logs", "eks-auth", "sts", "ec2"} {
		typ := "Interface"
		if svc == "s3" {
			typ = "Gateway"
		}
		ids = append(ids, e.AddVPCEndpoint(VPCEndpoint{Service: ServiceName(svc), Type: typ, PrivateDNS: typ == "Interface"}))
	}
	e.AddVPCEndpoint(VPCEndpoint{VPC: "vpc-0fedcba9876543210", Service: ServiceName("s3"), Type: "Gateway", State: "pending"})
	c := ec2Client(e, Config(1))
	ctx := context.Background()

	out, err := c.DescribeVpcEndpoints(ctx, &ec2.DescribeVpcEndpointsInput{Filters: append(vpcFilter(ClusterVPC),
		types.Filter{Name: aws.String("service-name"), Values: []string{ServiceName("s3"), ServiceName("logs")}})})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.VpcEndpoints) != 2 || aws.ToString(out.NextToken) != "" {
		t.Fatalf("vpc and service filters: %+v", out.VpcEndpoints)
	}
	s3 := out.VpcEndpoints[0]
	if aws.ToString(s3.VpcEndpointId) != ids[0] || s3.VpcEndpointType != types.VpcEndpointTypeGateway || string(s3.State) != "available" ||
		aws.ToString(s3.VpcId) != ClusterVPC || aws.ToString(s3.ServiceName) != ServiceName("s3") || aws.ToBool(s3.PrivateDnsEnabled) {
		t.Errorf("s3 endpoint as the SDK reads it: %+v", s3)
	}

	// Pages of MaxResults with NextToken: every endpoint once.
	var got []string
	in := &ec2.DescribeVpcEndpointsInput{Filters: vpcFilter(ClusterVPC), MaxResults: aws.Int32(5)}
	for pages := 1; ; pages++ {
		out, err := c.DescribeVpcEndpoints(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		for _, ep := range out.VpcEndpoints {
			got = append(got, aws.ToString(ep.VpcEndpointId))
		}
		if out.NextToken == nil {
			if pages != 2 {
				t.Errorf("%d pages of 5 for 7 endpoints", pages)
			}
			break
		}
		in.NextToken = out.NextToken
	}
	if !slices.Equal(got, ids) {
		t.Errorf("paged ids %v, want %v", got, ids)
	}

	for name, tc := range map[string]struct {
		in     ec2.DescribeVpcEndpointsInput
		code   string
		status int
	}{
		"MaxResults under 5":  {ec2.DescribeVpcEndpointsInput{MaxResults: aws.Int32(4)}, "InvalidParameterValue", 400},
		"bad NextToken":       {ec2.DescribeVpcEndpointsInput{NextToken: aws.String("x")}, "InvalidPaginationToken", 400},
		"unserved filter":     {ec2.DescribeVpcEndpointsInput{Filters: []types.Filter{{Name: aws.String("tag:Owner"), Values: []string{"a"}}}}, "InvalidParameterValue", 400},
		"filter of no values": {ec2.DescribeVpcEndpointsInput{Filters: []types.Filter{{Name: aws.String("vpc-id")}}}, "InvalidParameterValue", 400},
		"unknown id":          {ec2.DescribeVpcEndpointsInput{VpcEndpointIds: []string{"vpce-0000000000000dead"}}, "InvalidVpcEndpointId.NotFound", 400},
		"dry run":             {ec2.DescribeVpcEndpointsInput{DryRun: aws.Bool(true)}, "DryRunOperation", 412},
	} {
		_, err := c.DescribeVpcEndpoints(ctx, &tc.in)
		if code, status := apiCode(t, err); code != tc.code || status != tc.status {
			t.Errorf("%s: %s %d, want %s %d", name, code, status, tc.code, tc.status)
		}
	}
	// A larger page than 1000 is cut to 1000, not refused.
	if _, err := c.DescribeVpcEndpoints(ctx, &ec2.DescribeVpcEndpointsInput{MaxResults: aws.Int32(5000)}); err != nil {
		t.Errorf("MaxResults 5000: %v", err)
	}

	e.Deny("DescribeVpcEndpoints", 1)
	_, err = c.DescribeVpcEndpoints(ctx, &ec2.DescribeVpcEndpointsInput{})
	if code, status := apiCode(t, err); code != "UnauthorizedOperation" || status != 403 || !strings.Contains(err.Error(), "ec2:DescribeVpcEndpoints") {
		t.Errorf("denied: %s %d %v", code, status, err)
	}

	// Unsigned (anonymous credentials): refused before anything is read.
	anon := Config(1)
	anon.Credentials = aws.AnonymousCredentials{}
	_, err = ec2Client(e, anon).DescribeVpcEndpoints(ctx, &ec2.DescribeVpcEndpointsInput{})
	if code, status := apiCode(t, err); code != "AuthFailure" || status != 401 {
		t.Errorf("unsigned: %s %d", code, status)
	}
	// Other credentials: refused too.
	other := Config(1)
	other.Credentials = credentials.NewStaticCredentialsProvider("AKIDSOMEONEELSE", "secret", "")
	_, err = ec2Client(e, other).DescribeVpcEndpoints(ctx, &ec2.DescribeVpcEndpointsInput{})
	if code, _ := apiCode(t, err); code != "AuthFailure" {
		t.Errorf("other credentials: %s", code)
	}
}

// signedPost sends form as a SigV4-signed EC2 query request and returns the
// status and the parsed error document.
func signedPost(t *testing.T, e *EC2, method string, form url.Values) (int, ec2ErrorResponse) {
	t.Helper()
	body := form.Encode()
	req, err := http.NewRequest(method, e.URL()+"/", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	sum := sha256.Sum256([]byte(body))
	creds := aws.Credentials{AccessKeyID: AccessKeyID, SecretAccessKey: SecretAccessKey}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), "ec2", Region, time.Now()); err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	b, _ := io.ReadAll(res.Body)
	var er ec2ErrorResponse
	if res.StatusCode != http.StatusOK {
		if err := xml.Unmarshal(b, &er); err != nil || len(er.Errors) != 1 || er.RequestID == "" {
			t.Fatalf("error answer is not EC2's error document: %v %s", err, b)
		}
	}
	return res.StatusCode, er
}

// What the SDK never sends, the endpoint refuses as EC2 does: another API
// version, an unknown action or member, filters with gaps.
func TestEC2RefusesMalformedQueries(t *testing.T) {
	e := NewEC2(t)
	e.AddVPCEndpoint(VPCEndpoint{Service: ServiceName("s3"), Type: "Gateway"})
	base := func(extra ...string) url.Values {
		v := url.Values{"Action": {"DescribeVpcEndpoints"}, "Version": {"2016-11-15"}}
		for i := 0; i+1 < len(extra); i += 2 {
			v.Set(extra[i], extra[i+1])
		}
		return v
	}
	if status, _ := signedPost(t, e, http.MethodPost, base("Filter.1.Name", "vpc-id", "Filter.1.Value.1", ClusterVPC)); status != 200 {
		t.Fatalf("a well-formed query: %d", status)
	}
	for name, tc := range map[string]struct {
		method string
		form   url.Values
		code   string
	}{
		"old version":        {http.MethodPost, func() url.Values { v := base(); v.Set("Version", "2014-10-01"); return v }(), "InvalidParameterValue"},
		"no version":         {http.MethodPost, func() url.Values { v := base(); v.Del("Version"); return v }(), "InvalidParameterValue"},
		"unknown action":     {http.MethodPost, func() url.Values { v := base(); v.Set("Action", "DescribeVpcs"); return v }(), "InvalidAction"},
		"unknown member":     {http.MethodPost, base("VpcId", ClusterVPC), "UnknownParameter"},
		"filter gap":         {http.MethodPost, base("Filter.2.Name", "vpc-id", "Filter.2.Value.1", ClusterVPC), "InvalidParameterValue"},
		"value gap":          {http.MethodPost, base("Filter.1.Name", "vpc-id", "Filter.1.Value.2", ClusterVPC), "InvalidParameterValue"},
		"value without name": {http.MethodPost, base("Filter.1.Value.1", ClusterVPC), "MissingParameter"},
		"GET":                {http.MethodGet, base(), "InvalidAction"},
	} {
		status, er := signedPost(t, e, tc.method, tc.form)
		if status != 400 || er.Errors[0].Code != tc.code {
			t.Errorf("%s: %d %+v, want 400 %s", name, status, er.Errors, tc.code)
		}
	}
}
