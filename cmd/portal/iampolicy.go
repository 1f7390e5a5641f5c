package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/usage/prom"
)

var (
	accountRE = regexp.MustCompile(`^[0-9]{12}$`)
	regionRE  = regexp.MustCompile(`^[a-z]{2}(-gov)?-[a-z]+-[0-9]$`)
)

// iamPolicyCmd prints the least-privilege IAM policy the portal's own role
// needs for the AWS steps this version performs. The actions come from the
// one list in code that the steps are tested against (awsprov.Actions), so
// the policy cannot drift from what the portal calls; the AWS settings
// narrow it further (the team roles it may pass, the access policies it may
// associate, the domains' KMS key).
func iamPolicyCmd(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("portal iam-policy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	account := fs.String("account", "", "AWS account id of the cluster (narrows the resources; default: the settings' account_id)")
	region := fs.String("region", "", "AWS region of the cluster (narrows the resources and gives the partition; default: the settings' region)")
	settingsFile := fs.String("aws-settings", "", "the portal's --aws-settings file: team_role_prefix, the access policies and the KMS key narrow the policy")
	// The same flags and environment as `portal serve`: run in the
	// portal's environment, the policy covers the workspace it queries.
	promURL := fs.String("prometheus-url", getenv("PORTAL_PROMETHEUS_URL"), "the portal's --prometheus-url: an Amazon Managed Service for Prometheus workspace (or any URL with --prometheus-sigv4-region) adds the query permission on that workspace")
	promRegion := fs.String("prometheus-sigv4-region", getenv("PORTAL_PROMETHEUS_SIGV4_REGION"), "the portal's --prometheus-sigv4-region")
	if err := fs.Parse(args); err != nil {
		return err
	}
	prometheus, err := prometheusScope(*promURL, *promRegion)
	if err != nil {
		return err
	}
	s := awsprov.Settings{Enabled: true}
	if *settingsFile != "" {
		b, err := os.ReadFile(*settingsFile)
		if err != nil {
			return fmt.Errorf("--aws-settings: %w", err)
		}
		if s, err = awsprov.ParseSettings(b); err != nil {
			return fmt.Errorf("--aws-settings %s: %w", *settingsFile, err)
		}
		for flagValue, setting := range map[*string]string{account: s.AccountID, region: s.Region} {
			switch {
			case *flagValue == "":
				*flagValue = setting
			case setting != "" && *flagValue != setting:
				return fmt.Errorf("--account and --region must match the settings' account_id and region (%s, %s)", s.AccountID, s.Region)
			}
		}
	}
	if (*account == "") != (*region == "") {
		return errors.New("give both --account and --region (or the settings' account_id and region), or neither")
	}
	if *account != "" && !accountRE.MatchString(*account) {
		return fmt.Errorf("--account: %q is not a 12-digit account id", *account)
	}
	if *region != "" && !regionRE.MatchString(*region) {
		return fmt.Errorf("--region: %q is not a region name such as us-east-1", *region)
	}
	s.AccountID, s.Region = *account, *region
	s = s.WithDefaults()
	if *settingsFile != "" {
		// The identity store and network do not shape the policy; every
		// other problem does.
		if s.IdentityStoreID == "" {
			s.IdentityStoreID = "d-0000000000"
		}
		if err := s.Check(); err != nil {
			return fmt.Errorf("--aws-settings %s: every problem at once:\n%w", *settingsFile, err)
		}
	}
	doc, err := iamPolicy(s, prometheus)
	if err != nil {
		return err
	}
	if s.TeamRolePrefix == "" {
		fmt.Fprintln(stderr, "note: no team_role_prefix in the AWS settings: iam:PassRole is granted on every role of the account")
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, string(out))
	return nil
}

// ampWorkspace is the Amazon Managed Service for Prometheus workspace the
// portal's signed queries go to: its signing region and its id ("*" when
// the URL does not name one, e.g. a proxy in front of the workspace).
type ampWorkspace struct{ region, id string }

// prometheusScope says which workspace the portal's queries need
// permission on, nil when they are unsigned (a plain Prometheus needs
// no IAM permission). It applies `portal serve`'s rules: signed when
// --prometheus-sigv4-region is set or the URL is a workspace endpoint.
func prometheusScope(rawURL, region string) (*ampWorkspace, error) {
	if rawURL == "" {
		if region != "" {
			return nil, errors.New("--prometheus-sigv4-region: set without --prometheus-url (nothing to sign)")
		}
		return nil, nil
	}
	u, err := prom.NormalizeURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("--prometheus-url: %w", err)
	}
	if region != "" && !regionRE.MatchString(region) {
		return nil, fmt.Errorf("--prometheus-sigv4-region: %q is not a region name such as us-east-1", region)
	}
	region = firstNonEmpty(region, prom.AMPRegion(u))
	if region == "" {
		return nil, nil
	}
	w := &ampWorkspace{region: region, id: prom.AMPWorkspaceID(u)}
	if w.id == "" {
		w.id = "*"
	}
	return w, nil
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
// resources the portal touches there, as ARN patterns ({partition},
// {region} and {account} filled in; "*" when not given). Each action's
// resource types are those of the Service Authorization Reference
// (iampolicy_test.go checks every action against them).
type serviceScope struct {
	sid       string
	resources []string
}

var serviceScopes = map[string]serviceScope{
	"sagemaker": {"SageMakerComputeQuotasDomainsAndSchedulerConfig", []string{
		"arn:{partition}:sagemaker:{region}:{account}:compute-quota/*",
		"arn:{partition}:sagemaker:{region}:{account}:cluster/*",
		"arn:{partition}:sagemaker:{region}:{account}:domain/*",
		// /admin/scheduler: the cluster's task governance scheduler config.
		"arn:{partition}:sagemaker:{region}:{account}:cluster-scheduler-config/*",
	}},
	"eks": {"EKSAccessEntriesAndPodIdentity", []string{
		"arn:{partition}:eks:{region}:{account}:cluster/*",
		"arn:{partition}:eks:{region}:{account}:access-entry/*",
		"arn:{partition}:eks:{region}:{account}:podidentityassociation/*",
		// eks:DescribeAddon (readiness page) is authorized on the add-on's
		// ARN, arn:aws:eks:region:account:addon/CLUSTER/NAME/UUID (the
		// addonArn DescribeAddon returns).
		"arn:{partition}:eks:{region}:{account}:addon/*",
	}},
	"sso": {"IdentityCenterStudioAssignments", []string{
		"arn:{partition}:sso::{account}:application/*",
	}},
	"identitystore": {"IdentityStoreGroups", []string{
		"arn:{partition}:identitystore::{account}:identitystore/*",
		"arn:{partition}:identitystore:::user/*",
		"arn:{partition}:identitystore:::group/*",
		"arn:{partition}:identitystore:::membership/*",
	}},
	// The Slurm transport's Session Manager sessions: only the
	// AWS-owned document that runs one command (its ARN has no account:
	// arn:aws:ssm:REGION::document/AWS-…, as AWS names it in an
	// AccessDenied), only HyperPod nodes, and the account's sessions for
	// TerminateSession and the data channel (ssmmessages:OpenDataChannel
	// is authorized on the session,
	// https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonmessagegatewayservice.html).
	// A HyperPod node's target is sagemaker-cluster:<cluster-id>_<group>-<instance-id>
	// (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-run-jobs-slurm-access-nodes.html).
	// The SageMaker Developer Guide's policy for Slurm users grants
	// ssm:StartSession and ssm:TerminateSession on "*"
	// (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-prerequisites-iam.html,
	// "IAM users for scientists"); AWS's HyperPod workshop narrows
	// StartSession to arn:aws:ssm:*:*:managed-instance/sagemaker-cluster:*
	// (awslabs/ai-on-sagemaker-hyperpod,
	// website/docs/00-getting-started/orchestrated-by-slurm/ssh-into-hyperpod.mdx,
	// "Minimum Required Permissions"), which is the narrowing used here. The
	// readiness check "Slurm controller reachable" shows an AccessDenied
	// in words if an account authorizes the target otherwise.
	"ssm": {"SessionManagerToHyperPodSlurmControllers", []string{
		"arn:{partition}:ssm:{region}::document/AWS-StartNonInteractiveCommand",
		// {hyperpod}: the settings' cluster_arn's id and "_" when set,
		// so only that cluster's nodes.
		"arn:{partition}:ssm:{region}:{account}:managed-instance/sagemaker-cluster:{hyperpod}*",
		"arn:{partition}:ssm:{region}:{account}:session/*",
	}},
	"ssmmessages": {"SlurmSessionDataChannel", []string{
		"arn:{partition}:ssm:{region}:{account}:session/*",
	}},
	"iam": {"SimulateTeamRolesForThePlanPreview", []string{
		"arn:{partition}:iam::{account}:role{teamroles}*",
	}},
}

// noResourceTypes are the actions that support no resource type in the
// Service Authorization Reference, so a statement naming resources never
// matches them: IAM authorizes them on "*" only. (List* calls are found
// by name.) The DataZone connection actions are among them
// (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazondatazone.html),
// and so are the Identity Center calls SageMaker makes with the caller's
// permissions for an SSO domain, and EC2's DescribeVpcEndpoints
// (https://docs.aws.amazon.com/service-authorization/latest/reference/list_awsiamidentitycenter.html).
var noResourceTypes = map[string]bool{
	"sso:CreateManagedApplicationInstance": true,
	"sso:DeleteManagedApplicationInstance": true,
	"sso:DescribeRegisteredRegions":        true,
	// The readiness page's read of the cluster VPC's endpoints: a List
	// action with no resource type
	// (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2.html).
	"ec2:DescribeVpcEndpoints": true,
}

func unscoped(a string) bool {
	return strings.Contains(a, ":List") || noResourceTypes[a] || strings.HasPrefix(a, "datazone:")
}

// Actions with a statement of their own, for their conditions.
const (
	passRole        = "iam:PassRole"
	associatePolicy = "eks:AssociateAccessPolicy"
)

// iamPolicy builds the policy for s (after WithDefaults; Region and
// AccountID narrow the resources when set): one statement per service,
// limited to the resource types the portal touches; iam:PassRole only on
// the team roles (TeamRolePrefix) and only towards SageMaker (domain
// execution roles) and EKS Pod Identity (workload roles);
// eks:AssociateAccessPolicy only for the access policies the settings
// grant (condition key eks:policyArn); the domains' KMS key when one is
// set; and the actions IAM cannot narrow, in one statement on "*". The
// partition comes from the region.
func iamPolicy(s awsprov.Settings, p *ampWorkspace) (policyDoc, error) {
	partition, region, account := "*", "*", "*"
	if s.Region != "" {
		partition, region = awsprov.Partition(s.Region), s.Region
	}
	if s.AccountID != "" {
		account = s.AccountID
	}
	teamRoles := s.TeamRolePrefix
	if teamRoles == "" {
		teamRoles = "/"
	}
	hyperpod := "" // every HyperPod cluster's nodes, unless the settings name the cluster
	if s.ClusterARN != "" {
		hyperpod = s.ClusterARN[strings.LastIndex(s.ClusterARN, "/")+1:] + "_"
	}
	fill := strings.NewReplacer("{partition}", partition, "{region}", region, "{account}", account, "{teamroles}", teamRoles,
		"{hyperpod}", hyperpod)
	doc := policyDoc{Version: "2012-10-17"}
	statements, listing := scopedStatements(fill)
	doc.Statement = append(doc.Statement, statements...)
	assoc, err := associateStatement(s, partition, fill)
	if err != nil {
		return policyDoc{}, err
	}
	doc.Statement = append(doc.Statement, assoc)
	doc.Statement = append(doc.Statement, statement{
		Sid: "PassTeamRolesToSageMakerAndEKS", Effect: "Allow", Action: []string{passRole},
		Resource:  []string{fill.Replace("arn:{partition}:iam::{account}:role{teamroles}*")},
		Condition: map[string]map[string]any{"StringEquals": {"iam:PassedToService": []string{"sagemaker.amazonaws.com", "pods.eks.amazonaws.com"}}},
	})
	if k := s.Studio.KmsKeyID; k != "" {
		// A domain encrypted with a customer managed key: SageMaker
		// creates grants on the key with the caller's permissions.
		key, err := awsprov.KMSKeyARN(s.Region, s.AccountID, k)
		if err != nil {
			if s.Region != "" && s.AccountID != "" {
				return policyDoc{}, fmt.Errorf("studio.kms_key_id: %w", err)
			}
			key = fill.Replace("arn:{partition}:kms:{region}:{account}:key/" + k)
		}
		doc.Statement = append(doc.Statement, statement{Sid: "StudioDomainKMSKey", Effect: "Allow",
			Action: []string{"kms:CreateGrant", "kms:DescribeKey"}, Resource: []string{key}})
	}
	if p != nil {
		// The portal signs its PromQL queries with its own role; AMP
		// authorizes them on the workspace (prom.IAMActions cites the
		// mapping). The workspace's region is the signing region, which
		// may differ from the cluster's.
		doc.Statement = append(doc.Statement, statement{Sid: "QueryAmazonManagedPrometheusWorkspace", Effect: "Allow",
			Action:   prom.Actions(),
			Resource: []string{"arn:" + awsprov.Partition(p.region) + ":aps:" + p.region + ":" + account + ":workspace/" + p.id}})
	}
	if len(listing) > 0 {
		sort.Strings(listing)
		doc.Statement = append(doc.Statement, statement{Sid: "NoResourceTypes", Effect: "Allow", Action: listing, Resource: []string{"*"}})
	}
	return doc, nil
}

// scopedStatements are the statements of the actions the AWS steps call,
// one per service, each on the resources its scope names; listing: the
// actions that take no resource type.
func scopedStatements(fill *strings.Replacer) (out []statement, listing []string) {
	byService := map[string][]string{}
	for _, a := range awsprov.Actions {
		switch {
		case unscoped(a):
			listing = append(listing, a)
		case a == passRole || a == associatePolicy:
		default:
			svc, _, _ := strings.Cut(a, ":")
			byService[svc] = append(byService[svc], a)
		}
	}
	services := make([]string, 0, len(byService))
	for svc := range byService {
		services = append(services, svc)
	}
	sort.Strings(services)
	for _, svc := range services {
		actions := byService[svc]
		sort.Strings(actions)
		scope, ok := serviceScopes[svc]
		if !ok {
			// A new service without a scope still gets its actions, on
			// "*", and the test fails until one is written.
			scope = serviceScope{sid: "Unscoped" + svc, resources: []string{"*"}}
		}
		var resources []string
		for _, r := range scope.resources {
			resources = append(resources, fill.Replace(r))
		}
		out = append(out, statement{Sid: scope.sid, Effect: "Allow", Action: actions, Resource: resources})
	}
	return out, listing
}

// associateStatement lets the portal associate the access policies its
// settings grant, and no other.
func associateStatement(s awsprov.Settings, partition string, fill *strings.Replacer) (statement, error) {
	// eks:policyArn (type ARN) is the access policy an AssociateAccessPolicy
	// call associates (Service Authorization Reference for Amazon EKS,
	// https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonelastickubernetesservice.html):
	// the portal may associate the policies its settings grant, and so never
	// AmazonEKSClusterAdminPolicy (Settings.Check refuses it).
	var policyARNs []string
	lists := [][]awsprov.AccessGrant{s.Access.StudioPolicies, s.Access.SubmitterPolicies}
	if s.Access.ViewerRoleARNFormat != "" {
		lists = append(lists, s.Access.ViewerPolicies)
	}
	for _, l := range lists {
		for _, g := range l {
			if g.Policy == awsprov.PolicyEKSClusterAdmin {
				return statement{}, fmt.Errorf("the AWS settings grant %s: the portal never associates it", g.Policy)
			}
			policyARNs = append(policyARNs, "arn:"+partition+":eks::aws:cluster-access-policy/"+g.Policy)
		}
	}
	sort.Strings(policyARNs)
	return statement{
		Sid: "EKSAssociateTheSettingsAccessPoliciesOnly", Effect: "Allow", Action: []string{associatePolicy},
		Resource:  []string{fill.Replace("arn:{partition}:eks:{region}:{account}:access-entry/*")},
		Condition: map[string]map[string]any{"ArnLike": {"eks:policyArn": slices.Compact(policyARNs)}},
	}, nil
}
