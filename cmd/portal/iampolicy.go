package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"

	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
)

var (
	accountRE = regexp.MustCompile(`^[0-9]{12}$`)
	regionRE  = regexp.MustCompile(`^[a-z]{2}(-gov)?-[a-z]+-[0-9]$`)
)

// iamPolicyCmd prints the least-privilege IAM policy the portal's own role
// needs for the AWS steps this version performs. The actions come from the
// one list in code that the steps are tested against (awsprov.Actions), so
// the policy cannot drift from what the portal calls.
func iamPolicyCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("portal iam-policy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	account := fs.String("account", "", "AWS account id of the cluster (narrows the resources)")
	region := fs.String("region", "", "AWS region of the cluster (narrows the resources)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*account == "") != (*region == "") {
		return errors.New("give both --account and --region, or neither")
	}
	if *account != "" && !accountRE.MatchString(*account) {
		return fmt.Errorf("--account: %q is not a 12-digit account id", *account)
	}
	if *region != "" && !regionRE.MatchString(*region) {
		return fmt.Errorf("--region: %q is not a region name such as us-east-1", *region)
	}
	out, err := json.MarshalIndent(iamPolicy(*account, *region), "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, string(out))
	return nil
}

type policyDoc struct {
	Version   string      `json:"Version"`
	Statement []statement `json:"Statement"`
}

type statement struct {
	Sid       string                    `json:"Sid"`
	Effect    string                    `json:"Effect"`
	Action    []string                  `json:"Action"`
	Resource  []string                  `json:"Resource"`
	Condition map[string]map[string]any `json:"Condition,omitempty"`
}

// serviceScope is how far one service's actions can be narrowed: the
// resources the portal touches there, as ARN patterns ({region} the region,
// {account} the account).
type serviceScope struct {
	sid       string
	resources []string
}

var serviceScopes = map[string]serviceScope{
	"sagemaker": {"SageMakerComputeQuotasAndDomains", []string{
		"arn:aws:sagemaker:{region}:{account}:compute-quota/*",
		"arn:aws:sagemaker:{region}:{account}:cluster/*",
		"arn:aws:sagemaker:{region}:{account}:domain/*",
	}},
	"eks": {"EKSAccessEntriesAndPodIdentity", []string{
		"arn:aws:eks:{region}:{account}:cluster/*",
		"arn:aws:eks:{region}:{account}:access-entry/*",
		"arn:aws:eks:{region}:{account}:podidentityassociation/*",
		// eks:DescribeAddon (readiness page) is authorized on the add-on's
		// ARN, arn:aws:eks:region:account:addon/CLUSTER/NAME/UUID (the
		// addonArn DescribeAddon returns).
		"arn:aws:eks:{region}:{account}:addon/*",
		"arn:aws:eks::aws:cluster-access-policy/*",
	}},
	"sso": {"IdentityCenterStudioAssignments", []string{
		"arn:aws:sso::{account}:application/*",
		"arn:aws:sso:::instance/*",
	}},
	"identitystore": {"IdentityStoreGroups", []string{
		"arn:aws:identitystore::{account}:identitystore/*",
		"arn:aws:identitystore:::user/*",
		"arn:aws:identitystore:::group/*",
		"arn:aws:identitystore:::membership/*",
	}},
	"datazone": {"UnifiedStudioConnections", []string{
		"arn:aws:datazone:{region}:{account}:domain/*",
	}},
	"iam": {"PassTeamRolesToSageMakerAndEKS", []string{
		"arn:aws:iam::{account}:role/*",
	}},
}

// unscoped are actions IAM authorizes on "*" only (List* calls, and a
// region lookup SageMaker makes for SSO domains).
func unscoped(a string) bool {
	return strings.Contains(a, ":List") || a == "sso:DescribeRegisteredRegions"
}

// iamPolicy builds the policy: one statement per service, limited to the
// resource types the portal touches in the account and region when they
// are given; the actions IAM cannot narrow in one statement on "*"; and
// iam:PassRole only towards SageMaker (domain execution roles) and EKS Pod
// Identity (workload roles).
func iamPolicy(account, region string) policyDoc {
	byService := map[string][]string{}
	var listing []string
	for _, a := range awsprov.Actions {
		if unscoped(a) {
			listing = append(listing, a)
			continue
		}
		svc, _, _ := strings.Cut(a, ":")
		byService[svc] = append(byService[svc], a)
	}
	services := make([]string, 0, len(byService))
	for svc := range byService {
		services = append(services, svc)
	}
	sort.Strings(services)
	doc := policyDoc{Version: "2012-10-17"}
	for _, svc := range services {
		actions := byService[svc]
		sort.Strings(actions)
		scope, ok := serviceScopes[svc]
		if !ok {
			// A new service without a scope still gets its actions, on
			// "*", and the test below fails until one is written.
			scope = serviceScope{sid: "Unscoped" + svc}
		}
		resources := []string{"*"}
		if account != "" && len(scope.resources) > 0 {
			resources = nil
			fill := strings.NewReplacer("{region}", region, "{account}", account)
			for _, r := range scope.resources {
				resources = append(resources, fill.Replace(r))
			}
		}
		st := statement{Sid: scope.sid, Effect: "Allow", Action: actions, Resource: resources}
		if svc == "iam" {
			st.Condition = map[string]map[string]any{"StringEquals": {"iam:PassedToService": []string{"sagemaker.amazonaws.com", "pods.eks.amazonaws.com"}}}
		}
		doc.Statement = append(doc.Statement, st)
	}
	if len(listing) > 0 {
		sort.Strings(listing)
		doc.Statement = append(doc.Statement, statement{Sid: "ListAndLookup", Effect: "Allow", Action: listing, Resource: []string{"*"}})
	}
	return doc
}
