package awstest

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// ClusterVPC is the VPC every EKS cluster of the EKS endpoint reports
// (DescribeCluster's resourcesVpcConfig.vpcId).
const ClusterVPC = "vpc-0123456789abcdef0"

// EC2 is an EC2 endpoint speaking the EC2 query protocol (POST / with a
// form-encoded body: Action, Version=2016-11-15 and the members, lists
// flattened as Name.N and Filter.N.Value.M; answers in XML with a
// requestId, errors as Response/Errors/Error/Code and Message with a
// RequestID: https://docs.aws.amazon.com/AWSEC2/latest/APIReference/Query-Requests.html,
// https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html).
// It serves DescribeVpcEndpoints only, over the endpoints a test adds.
type EC2 struct {
	*Core
	endpoints []VPCEndpoint
	pageSize  int
}

// VPCEndpoint is a stored VPC endpoint.
type VPCEndpoint struct {
	ID, VPC string
	// Service is the endpoint service name (com.amazonaws.us-east-1.s3;
	// ServiceName builds it).
	Service string
	// Type: Gateway or Interface (default Interface).
	Type string
	// State as the service writes it: available (default), pending,
	// pendingAcceptance, deleting, deleted, rejected, failed, expired.
	State      string
	PrivateDNS bool
}

// vpcEndpointStates are the states as the service writes them on the wire
// (lower camel case: "State": "available" in the CLI's examples,
// awscli/examples/ec2/describe-vpc-endpoints.rst; the API reference's
// VpcEndpoint lists the same values capitalized).
var vpcEndpointStates = []string{"pendingAcceptance", "pending", "available", "deleting", "deleted", "rejected", "failed", "expired", "partial"}

// ServiceName is the endpoint service name of an AWS service in Region.
func ServiceName(svc string) string { return "com.amazonaws." + Region + "." + svc }

// NewEC2 starts an EC2 endpoint with no VPC endpoints, closed when tb ends.
func NewEC2(tb testing.TB) *EC2 {
	e := &EC2{Core: newCore(tb, "ec2", false), pageSize: 1000}
	e.srv = httptest.NewServer(http.HandlerFunc(e.serve))
	tb.Cleanup(e.srv.Close)
	return e
}

// SetPageSize sets how many endpoints one answer holds when the request
// gives no MaxResults (default 1000, the most the service returns): the
// service's own cut, followed with NextToken.
func (e *EC2) SetPageSize(n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pageSize = n
}

// AddVPCEndpoint stores ep (ID, VPC, Type and State defaulted) and returns
// its id.
func (e *EC2) AddVPCEndpoint(ep VPCEndpoint) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ep.ID == "" {
		ep.ID = fmt.Sprintf("vpce-%017x", len(e.endpoints)+1)
	}
	if ep.VPC == "" {
		ep.VPC = ClusterVPC
	}
	if ep.Type == "" {
		ep.Type = "Interface"
	}
	if ep.State == "" {
		ep.State = "available"
	}
	if !slices.Contains(vpcEndpointStates, ep.State) || (ep.Type != "Interface" && ep.Type != "Gateway") {
		e.tb.Fatalf("awstest ec2: endpoint %+v: state or type is not one the service reports", ep)
	}
	e.endpoints = append(e.endpoints, ep)
	return ep.ID
}

// SetVPCEndpointState changes a stored endpoint's state.
func (e *EC2) SetVPCEndpointState(id, state string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !slices.Contains(vpcEndpointStates, state) {
		e.tb.Fatalf("awstest ec2: %q is not a VPC endpoint state", state)
	}
	for i := range e.endpoints {
		if e.endpoints[i].ID == id {
			e.endpoints[i].State = state
		}
	}
}

// ec2Xmlns is the namespace of the API version the endpoint serves.
const ec2Xmlns = "http://ec2.amazonaws.com/doc/2016-11-15/"

type ec2VPCEndpointItem struct {
	VpcEndpointID     string `xml:"vpcEndpointId"`
	VpcEndpointType   string `xml:"vpcEndpointType"`
	VpcID             string `xml:"vpcId"`
	ServiceName       string `xml:"serviceName"`
	State             string `xml:"state"`
	PrivateDNSEnabled bool   `xml:"privateDnsEnabled"`
	OwnerID           string `xml:"ownerId"`
}

type ec2DescribeVPCEndpointsResponse struct {
	XMLName   xml.Name             `xml:"DescribeVpcEndpointsResponse"`
	Xmlns     string               `xml:"xmlns,attr"`
	RequestID string               `xml:"requestId"`
	Endpoints []ec2VPCEndpointItem `xml:"vpcEndpointSet>item"`
	NextToken string               `xml:"nextToken,omitempty"`
}

type ec2Error struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

type ec2ErrorResponse struct {
	XMLName   xml.Name   `xml:"Response"`
	Errors    []ec2Error `xml:"Errors>Error"`
	RequestID string     `xml:"RequestID"`
}

// ec2Codes are EC2's codes (and HTTP statuses) for the faults Core
// injects: an unsigned request is AuthFailure, throttling
// RequestLimitExceeded, a denial UnauthorizedOperation, a 5xx InternalError.
var ec2Codes = map[string]struct {
	code   string
	status int
}{
	"MissingAuthenticationTokenException": {"AuthFailure", http.StatusUnauthorized},
	"ThrottlingException":                 {"RequestLimitExceeded", http.StatusServiceUnavailable},
	"AccessDeniedException":               {"UnauthorizedOperation", http.StatusForbidden},
	"InternalFailure":                     {"InternalError", http.StatusInternalServerError},
}

func (e *EC2) serve(w http.ResponseWriter, r *http.Request) {
	op := "?"
	res, aerr := func() (any, *Error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		if r.Method != http.MethodPost || r.URL.Path != "/" {
			return nil, BadRequest("InvalidAction", "%s %s", r.Method, r.URL.Path)
		}
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
			return nil, BadRequest("InvalidParameterValue", "Content-Type %q", ct)
		}
		body, aerr := readBody(r)
		if aerr != nil {
			return nil, aerr
		}
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, BadRequest("InvalidParameterValue", "%v", err)
		}
		op = form.Get("Action")
		if aerr := e.admit(op, r); aerr != nil {
			if c, ok := ec2Codes[aerr.Code]; ok {
				aerr.Code, aerr.Status = c.code, c.status
			}
			if aerr.Code == "UnauthorizedOperation" {
				aerr.Message = "You are not authorized to perform this operation. " + aerr.Message
			}
			return nil, aerr
		}
		switch {
		case form.Get("Version") != "2016-11-15":
			return nil, BadRequest("InvalidParameterValue", "Version %q is not 2016-11-15, the version this test endpoint serves", form.Get("Version"))
		case op != "DescribeVpcEndpoints":
			return nil, BadRequest("InvalidAction", "The action %s is not valid for this web service.", op)
		}
		return e.describeVPCEndpoints(form)
	}()
	e.finish(op, aerr)
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	if aerr != nil {
		replyXML(w, aerr.Status, ec2ErrorResponse{Errors: []ec2Error{{aerr.Code, aerr.Message}}, RequestID: "portal-test"})
		return
	}
	replyXML(w, http.StatusOK, res)
}

// ec2Filter is one Filter.N: a name and its values (any value matches).
type ec2Filter struct {
	name   string
	values []string
}

var (
	ec2FilterKey = regexp.MustCompile(`^Filter\.([1-9][0-9]*)\.(Name|Value\.([1-9][0-9]*))$`)
	ec2IDKey     = regexp.MustCompile(`^VpcEndpointId\.([1-9][0-9]*)$`)
)

// ec2Filters reads Filter.N.Name and Filter.N.Value.M, refusing gaps in
// either numbering, a filter without a name or without a value.
func ec2Filters(form url.Values) ([]ec2Filter, *Error) {
	names := map[int]string{}
	values := map[int]map[int]string{}
	for k, v := range form {
		m := ec2FilterKey.FindStringSubmatch(k)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		if m[2] == "Name" {
			names[n] = v[0]
			continue
		}
		i, _ := strconv.Atoi(m[3])
		if values[n] == nil {
			values[n] = map[int]string{}
		}
		values[n][i] = v[0]
	}
	out := make([]ec2Filter, len(names))
	for n, name := range names {
		if n > len(names) {
			return nil, BadRequest("InvalidParameterValue", "Filter.%d follows a gap", n)
		}
		vs := values[n]
		if len(vs) == 0 {
			return nil, BadRequest("InvalidParameterValue", "The filter '%s' has no values", name)
		}
		f := ec2Filter{name: name, values: make([]string, len(vs))}
		for i, v := range vs {
			if i > len(vs) {
				return nil, BadRequest("InvalidParameterValue", "Filter.%d.Value.%d follows a gap", n, i)
			}
			f.values[i-1] = v
		}
		out[n-1] = f
	}
	for n := range values {
		if _, ok := names[n]; !ok {
			return nil, BadRequest("MissingParameter", "The request must contain the parameter Filter.%d.Name", n)
		}
	}
	return out, nil
}

// endpointField is the value of ep a DescribeVpcEndpoints filter compares.
func endpointField(ep VPCEndpoint, filter string) (string, bool) {
	switch filter {
	case "vpc-id":
		return ep.VPC, true
	case "service-name":
		return ep.Service, true
	case "vpc-endpoint-id":
		return ep.ID, true
	case "vpc-endpoint-state":
		return ep.State, true
	case "vpc-endpoint-type":
		return ep.Type, true
	}
	return "", false
}

// describeVPCEndpoints is DescribeVpcEndpoints
// (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeVpcEndpoints.html):
// the endpoints matching every filter (one of each filter's values) and,
// when given, one of VpcEndpointId.N; NextToken from the previous page;
// MaxResults of more than 1000 returns 1000, as the reference says. The
// reference gives no minimum for this action; under 5 is refused here, as
// EC2 documents for its other paged Describe actions ("between 5 and
// 1,000"): the portal never sends MaxResults.
// DryRun answers DryRunOperation. The documented filters this endpoint does
// not serve (tags, ip-address-type, service-region) are refused, as is any
// other member.
func (e *EC2) describeVPCEndpoints(form url.Values) (any, *Error) {
	var ids []string
	for k, v := range form {
		switch {
		case k == "Action", k == "Version", k == "MaxResults", k == "NextToken", k == "DryRun", ec2FilterKey.MatchString(k):
		case ec2IDKey.MatchString(k):
			ids = append(ids, v[0])
		default:
			return nil, BadRequest("UnknownParameter", "The parameter %s is not recognized", k)
		}
	}
	if form.Get("DryRun") == "true" {
		return nil, Errorf(http.StatusPreconditionFailed, "DryRunOperation", "Request would have succeeded, but DryRun flag is set.")
	}
	filters, aerr := ec2Filters(form)
	if aerr != nil {
		return nil, aerr
	}
	for _, f := range filters {
		if _, ok := endpointField(VPCEndpoint{}, f.name); !ok {
			return nil, BadRequest("InvalidParameterValue", "The filter '%s' is invalid (or not served by this test endpoint)", f.name)
		}
	}
	max := e.pageSize
	if v := form.Get("MaxResults"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 5 {
			return nil, BadRequest("InvalidParameterValue", "Value ( %s ) for parameter maxResults is invalid. Expecting a value greater than 5.", v)
		}
		max = min(n, 1000)
	}
	for _, id := range ids {
		if !slices.ContainsFunc(e.endpoints, func(ep VPCEndpoint) bool { return ep.ID == id }) {
			return nil, BadRequest("InvalidVpcEndpointId.NotFound", "The Vpc Endpoint Id '%s' does not exist", id)
		}
	}
	var match []ec2VPCEndpointItem
	for _, ep := range e.endpoints {
		if len(ids) > 0 && !slices.Contains(ids, ep.ID) {
			continue
		}
		if !slices.ContainsFunc(filters, func(f ec2Filter) bool {
			v, _ := endpointField(ep, f.name)
			return !slices.Contains(f.values, v)
		}) {
			match = append(match, ec2VPCEndpointItem{VpcEndpointID: ep.ID, VpcEndpointType: ep.Type, VpcID: ep.VPC,
				ServiceName: ep.Service, State: ep.State, PrivateDNSEnabled: ep.PrivateDNS, OwnerID: Account})
		}
	}
	start, end, next, aerr := window(len(match), max, form.Get("NextToken"), func(format string, args ...any) *Error {
		return BadRequest("InvalidPaginationToken", "The specified pagination token is not valid or is expired. "+format, args...)
	})
	if aerr != nil {
		return nil, aerr
	}
	return ec2DescribeVPCEndpointsResponse{Xmlns: ec2Xmlns, RequestID: "portal-test", Endpoints: match[start:end], NextToken: next}, nil
}
