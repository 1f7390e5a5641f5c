package workflow

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Facts about AWS names that validation relies on. They are written down
// here rather than fetched so that the domain stays pure; the lists change
// when AWS adds regions or HyperPod instance types, and then this file does.

// Regions lists the commercial AWS regions (partition aws). GovCloud, China
// and the European Sovereign Cloud are other partitions and out of scope.
var Regions = []string{
	"af-south-1",
	"ap-east-1", "ap-east-2",
	"ap-northeast-1", "ap-northeast-2", "ap-northeast-3",
	"ap-south-1", "ap-south-2",
	"ap-southeast-1", "ap-southeast-2", "ap-southeast-3", "ap-southeast-4",
	"ap-southeast-5", "ap-southeast-6", "ap-southeast-7",
	"ca-central-1", "ca-west-1",
	"eu-central-1", "eu-central-2",
	"eu-north-1",
	"eu-south-1", "eu-south-2",
	"eu-west-1", "eu-west-2", "eu-west-3",
	"il-central-1",
	"me-central-1", "me-south-1",
	"mx-central-1",
	"sa-east-1",
	"us-east-1", "us-east-2",
	"us-west-1", "us-west-2",
}

// ARN is an Amazon Resource Name split into its parts:
// arn:partition:service:region:account:resource.
type ARN struct {
	Partition string
	Service   string
	Region    string
	Account   string
	Resource  string
}

// ParseARN splits s into its parts. It checks the shape only; what a valid
// ARN for a given use is, Validate decides. workflow imports no AWS package
// (doc.go; cmd/portal/imports_test.go forbids github.com/aws/aws-sdk-go-v2
// and everything under it), so it cannot call the SDK's aws/arn.Parse;
// provision's TestParseARNAgreesWithTheSDK checks that both split alike.
func ParseARN(s string) (ARN, error) {
	parts := strings.SplitN(s, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" {
		return ARN{}, fmt.Errorf("%q is not an ARN (arn:partition:service:region:account:resource)", s)
	}
	a := ARN{Partition: parts[1], Service: parts[2], Region: parts[3], Account: parts[4], Resource: parts[5]}
	if a.Partition == "" || a.Service == "" || a.Resource == "" {
		return ARN{}, fmt.Errorf("%q is not an ARN: partition, service and resource must not be empty", s)
	}
	return a, nil
}

// String joins the parts back into an ARN.
func (a ARN) String() string {
	return strings.Join([]string{"arn", a.Partition, a.Service, a.Region, a.Account, a.Resource}, ":")
}

var (
	accountIDRe = regexp.MustCompile(`^[0-9]{12}$`)
	// HyperPod: cluster names and ids (ClusterOrchestratorEksConfig and
	// CreateCluster patterns).
	clusterNameRe   = regexp.MustCompile(`^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$`)
	clusterIDRe     = regexp.MustCompile(`^cluster/[a-z0-9]{12}$`)
	eksClusterRe    = regexp.MustCompile(`^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$`)
	iamRoleNameRe   = regexp.MustCompile(`^[\w+=,.@-]{1,64}$`)
	iamPathPartRe   = regexp.MustCompile(`^[\x21-\x2E\x30-\x7E]+$`) // printable ASCII except '/'
	dataZoneDomain  = regexp.MustCompile(`^dzd[-_][a-zA-Z0-9_-]{1,36}$`)
	dataZoneProject = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,36}$`)
	slurmNameRe     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
)

// ValidClusterName reports whether name is a HyperPod cluster name (the
// CreateCluster pattern a contract's cluster_name is checked against).
func ValidClusterName(name string) bool { return clusterNameRe.MatchString(name) }

// validRegion reports whether r is one of Regions.
func validRegion(r string) bool { return slices.Contains(Regions, r) }

// roleName returns the role name of an IAM role resource
// ("role/path/name"), or an error that says what is wrong with it.
func roleName(resource string) (string, error) {
	rest, ok := strings.CutPrefix(resource, "role/")
	if !ok {
		return "", fmt.Errorf("must name an IAM role (resource role/<name>), not %q", resource)
	}
	parts := strings.Split(rest, "/")
	name := parts[len(parts)-1]
	for _, p := range parts[:len(parts)-1] {
		if !iamPathPartRe.MatchString(p) {
			return "", fmt.Errorf("has an invalid role path in %q", resource)
		}
	}
	if len(rest)-len(name) > 511 {
		return "", fmt.Errorf("has a role path longer than 512 characters")
	}
	if !iamRoleNameRe.MatchString(name) {
		return "", fmt.Errorf("has an invalid role name %q: 1-64 letters, digits and +=,.@_-", name)
	}
	return name, nil
}
