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
	Sid      string   `json:"Sid"`
	Effect   string   `json:"Effect"`
	Action   []string `json:"Action"`
	Resource []string `json:"Resource"`
}

// iamPolicy builds the policy: List* calls cannot be narrowed to a
// resource in IAM, everything else is limited to the account and region's
// compute quotas and HyperPod clusters when they are given.
func iamPolicy(account, region string) policyDoc {
	resources := []string{"*"}
	if account != "" {
		resources = []string{
			fmt.Sprintf("arn:aws:sagemaker:%s:%s:compute-quota/*", region, account),
			fmt.Sprintf("arn:aws:sagemaker:%s:%s:cluster/*", region, account),
		}
	}
	var listing, scoped []string
	for _, a := range awsprov.Actions {
		if strings.Contains(a, ":List") {
			listing = append(listing, a)
		} else {
			scoped = append(scoped, a)
		}
	}
	sort.Strings(listing)
	sort.Strings(scoped)
	doc := policyDoc{Version: "2012-10-17"}
	doc.Statement = append(doc.Statement, statement{Sid: "HyperPodTaskGovernance", Effect: "Allow", Action: scoped, Resource: resources})
	if len(listing) > 0 {
		doc.Statement = append(doc.Statement, statement{Sid: "HyperPodTaskGovernanceList", Effect: "Allow", Action: listing, Resource: []string{"*"}})
	}
	return doc
}
