package awsprov

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"sigs.k8s.io/yaml"
)

// Settings are the facts about the AWS side of the one shared cluster that a
// contract does not carry: where Studio domains go, which Identity Center
// groups get Studio, which EKS access policies each role gets. cmd/portal
// reads them from the --aws-settings file (YAML); the zero value plus
// Enabled gives the defaults below.
//
// Like the Kubernetes settings they are part of the plan an approver sees:
// a change shows as a changed plan, and a pinned approval refuses it.
type Settings struct {
	// Enabled puts the AWS steps in every EKS plan. Off, plans are
	// Kubernetes only (a cluster whose AWS side is managed elsewhere).
	Enabled bool `json:"-"`

	// Region and AccountID are the shared cluster's. A contract naming
	// another region or account is refused before any call: the portal
	// talks to one cluster. Empty: not checked.
	Region    string `json:"region,omitempty"`
	AccountID string `json:"account_id,omitempty"`

	// ClusterARN is the shared HyperPod cluster: contracts naming another
	// are refused, and admins reconcile its scheduler config (priority
	// classes with weights, fair share) from the portal's settings.
	ClusterARN string `json:"cluster_arn,omitempty"`
	// FairShare: idle compute is lent by fair-share weight (default true)
	// rather than first come, first served.
	FairShare *bool `json:"fair_share,omitempty"`

	// ComputeQuota: create the team's HyperPod task governance compute
	// quota. provision.BuildPlan turns it off when the portal manages the
	// Kueue ClusterQueues itself (the two would fight over them).
	ComputeQuota bool `json:"-"`

	Studio StudioSettings `json:"studio"`

	// IdentityStoreID is the IAM Identity Center identity store whose groups
	// are assigned to Studio (d-xxxxxxxxxx). Required for Studio domains.
	IdentityStoreID string `json:"identity_store_id,omitempty"`

	// TeamGroups are the Identity Center group display names of each team,
	// given Studio access. cmd/portal fills it from the groups file (owners
	// and members of each team), so there is one list of who is on a team.
	TeamGroups map[string][]string `json:"-"`

	Access AccessSettings `json:"access"`

	// TeamRolePrefix narrows the IAM roles a contract may name (project,
	// access and workload roles) to those whose path and name start with
	// it, the part of the role ARN after ":role": "/hyperpod-teams/" (a
	// role path) or "/hyperpod-team-" (a name prefix on the default path).
	// The contract form refuses other roles, and `portal iam-policy` grants
	// iam:PassRole on role<prefix>* only. Empty: any role of the account.
	TeamRolePrefix string `json:"team_role_prefix,omitempty"`

	// PodIdentity associates the team's workload ServiceAccount with the
	// contract's workload role (EKS Pod Identity). Default true.
	PodIdentity *bool `json:"pod_identity,omitempty"`
}

// StudioSettings say where team Studio domains go.
type StudioSettings struct {
	// DomainNameFormat names a team's SageMaker Domain; %s is the team.
	// Default "%s-studio".
	DomainNameFormat string `json:"domain_name_format,omitempty"`
	// SharedDomainID reuses one existing domain for every team instead of
	// a domain per team: only the team's groups are assigned to it. Task
	// visibility then rests on the shared domain's execution role, which
	// the plan warns about.
	SharedDomainID string `json:"shared_domain_id,omitempty"`
	// Network of the domains: VPC, subnets (at least one), security groups
	// of the apps. AppNetworkAccessType VpcOnly (default) or
	// PublicInternetOnly; KmsKeyID optional.
	VpcID                string   `json:"vpc_id,omitempty"`
	SubnetIDs            []string `json:"subnet_ids,omitempty"`
	SecurityGroupIDs     []string `json:"security_group_ids,omitempty"`
	AppNetworkAccessType string   `json:"app_network_access_type,omitempty"`
	KmsKeyID             string   `json:"kms_key_id,omitempty"`
	// OnRevoke is what revocation does with a team's own domain once its
	// groups are unassigned: "keep" (default: the team's home directories
	// survive for an investigation or a return) or "delete".
	OnRevoke string `json:"on_revoke,omitempty"`
	// UnifiedConnectionNameFormat names the DataZone connection in a
	// Unified Studio project; %s is the HyperPod cluster name. Default
	// "hyperpod-%s".
	UnifiedConnectionNameFormat string `json:"unified_connection_name_format,omitempty"`
}

// AccessSettings are the EKS access policies (names under
// arn:<partition>:eks::aws:cluster-access-policy/) each of a team's roles
// gets, each with its scope.
type AccessSettings struct {
	// StudioPolicies: the Studio execution role (the contract's project
	// role). Default: the five policies of AWS's Studio setup, each scoped
	// as it says (DefaultStudioPolicies).
	StudioPolicies []AccessGrant `json:"studio_policies,omitempty"`
	// SubmitterPolicies: the contract's access role, used by the team's
	// people to submit work. Default: training, inference and space, in
	// the team namespace. The plan keeps of the three only those of the
	// contract's approved workload types (provision kinds.go), and any
	// other policy listed here as it is.
	SubmitterPolicies []AccessGrant `json:"submitter_policies,omitempty"`
	// ViewerRoleARNFormat, when set, is a read-only role per team (%s is
	// the team) that gets ViewerPolicies (default AmazonEKSViewPolicy in the
	// team namespace).
	ViewerRoleARNFormat string        `json:"viewer_role_arn_format,omitempty"`
	ViewerPolicies      []AccessGrant `json:"viewer_policies,omitempty"`
}

// AccessGrant is one EKS access policy and the scope it is associated
// with: the whole cluster, or named namespaces, where TeamNamespace stands
// for the team's own namespace. In YAML a bare policy name is the policy
// scoped to the team namespace.
type AccessGrant struct {
	Policy string `json:"policy"`
	// Scope is AccessScopeCluster or AccessScopeNamespace (the EKS
	// AccessScope types).
	Scope string `json:"scope"`
	// Namespaces of a namespace scope (one at least; none for cluster).
	Namespaces []string `json:"namespaces,omitempty"`
}

// Scopes of an AccessGrant (EKS AccessScopeType values) and the word for
// the team's namespace among a grant's namespaces.
const (
	AccessScopeCluster   = "cluster"
	AccessScopeNamespace = "namespace"
	TeamNamespace        = "$team"
)

// UnmarshalJSON reads a grant strictly (unknown keys are errors), or a bare
// policy name as the policy scoped to the team namespace.
func (g *AccessGrant) UnmarshalJSON(b []byte) error {
	var name string
	if err := json.Unmarshal(b, &name); err == nil {
		*g = AccessGrant{Policy: name, Scope: AccessScopeNamespace, Namespaces: []string{TeamNamespace}}
		return nil
	}
	type plain AccessGrant
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p plain
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("an access policy is a name or {policy, scope, namespaces}: %w", err)
	}
	*g = AccessGrant(p)
	return nil
}

// teamScoped is policies scoped to the team namespace.
func teamScoped(policies ...string) []AccessGrant {
	out := make([]AccessGrant, len(policies))
	for i, p := range policies {
		out[i] = AccessGrant{Policy: p, Scope: AccessScopeNamespace, Namespaces: []string{TeamNamespace}}
	}
	return out
}

// DefaultStudioPolicies follow AWS's Studio setup for EKS clusters
// ("Setting up an Amazon EKS cluster in Studio", section "Restrict task
// view in Studio for EKS clusters",
// https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-studio-setup-eks.html):
// the user-cluster policy scoped to the cluster (what the Studio UI needs to
// render), training, inference and space in the namespace the users work
// in, and the space-template policy scoped to jupyter-k8s-shared, where the
// shared templates live.
func DefaultStudioPolicies() []AccessGrant {
	return append(append([]AccessGrant{{Policy: PolicyHyperPodUserCluster, Scope: AccessScopeCluster}},
		teamScoped(PolicyHyperPodTraining, PolicyHyperPodInference, PolicyHyperPodSpace)...),
		AccessGrant{Policy: PolicyHyperPodSpaceTemplate, Scope: AccessScopeNamespace, Namespaces: []string{SpaceTemplateNamespace}})
}

// AccessPolicyARN is the ARN of the EKS access policy name in region's
// partition: arn:<partition>:eks::aws:cluster-access-policy/<name> (the
// access-policy resource of the Service Authorization Reference for
// Amazon EKS,
// https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonelastickubernetesservice.html).
func AccessPolicyARN(region, name string) string {
	return arn.ARN{Partition: Partition(region), Service: "eks", AccountID: "aws", Resource: "cluster-access-policy/" + name}.String()
}

// Partition is the ARN partition of region: aws-us-gov for the GovCloud
// (US) regions, aws-cn for the China regions, aws for the others (the
// region patterns of the partitions in the SDK's endpoint rules,
// github.com/aws/aws-sdk-go-v2 internal/endpoints/awsrulesfn/partitions.json:
// ^us\-gov\-\w+\-\d+$ and ^cn\-\w+\-\d+$). regionPattern admits no
// region of another partition.
func Partition(region string) string {
	switch {
	case strings.HasPrefix(region, "us-gov-"):
		return "aws-us-gov"
	case strings.HasPrefix(region, "cn-"):
		return "aws-cn"
	}
	return "aws"
}

// Default settings.
const (
	DefaultDomainNameFormat = "%s-studio"
	DefaultConnectionFormat = "hyperpod-%s"
	DomainKeep              = "keep"
	DomainDelete            = "delete"
	PolicyHyperPodTraining  = "AmazonSagemakerHyperpodTrainingPolicy"
	PolicyHyperPodInference = "AmazonSagemakerHyperpodInferencePolicy"
	PolicyHyperPodSpace     = "AmazonSagemakerHyperpodSpacePolicy"
	// The user-cluster and space-template policies, and the namespace the
	// space templates live in: see DefaultStudioPolicies.
	PolicyHyperPodUserCluster   = "AmazonSagemakerHyperpodUserClusterPolicy"
	PolicyHyperPodSpaceTemplate = "AmazonSagemakerHyperpodSpaceTemplatePolicy"
	SpaceTemplateNamespace      = "jupyter-k8s-shared"
	PolicyEKSView               = "AmazonEKSViewPolicy"
	// PolicyEKSClusterAdmin is cluster-admin: never a team's.
	PolicyEKSClusterAdmin    = "AmazonEKSClusterAdminPolicy"
	appNetworkVpcOnly        = "VpcOnly"
	appNetworkPublicInternet = "PublicInternetOnly"
)

// WithDefaults fills empty fields.
func (s Settings) WithDefaults() Settings {
	st := &s.Studio
	if st.DomainNameFormat == "" {
		st.DomainNameFormat = DefaultDomainNameFormat
	}
	if st.UnifiedConnectionNameFormat == "" {
		st.UnifiedConnectionNameFormat = DefaultConnectionFormat
	}
	if st.AppNetworkAccessType == "" {
		st.AppNetworkAccessType = appNetworkVpcOnly // the default
	}
	if st.OnRevoke == "" {
		st.OnRevoke = DomainKeep
	}
	a := &s.Access
	if a.StudioPolicies == nil {
		a.StudioPolicies = DefaultStudioPolicies()
	}
	if a.SubmitterPolicies == nil {
		a.SubmitterPolicies = teamScoped(PolicyHyperPodTraining, PolicyHyperPodInference, PolicyHyperPodSpace)
	}
	if a.ViewerPolicies == nil {
		a.ViewerPolicies = teamScoped(PolicyEKSView)
	}
	if s.PodIdentity == nil {
		t := true
		s.PodIdentity = &t
	}
	if s.FairShare == nil {
		t := true
		s.FairShare = &t
	}
	return s
}

var (
	// EC2 ids: 8 or 17 hex digits after the prefix.
	vpcIDPattern     = regexp.MustCompile(`^vpc-([0-9a-f]{8}|[0-9a-f]{17})$`)
	subnetPattern    = regexp.MustCompile(`^subnet-([0-9a-f]{8}|[0-9a-f]{17})$`)
	sgPattern        = regexp.MustCompile(`^sg-([0-9a-f]{8}|[0-9a-f]{17})$`)
	domainIDPattern  = regexp.MustCompile(`^d-(-*[a-z0-9]){1,61}$`)
	storeIDPattern   = regexp.MustCompile(`^(d-[0-9a-f]{10}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$`)
	policyPattern    = regexp.MustCompile(`^[A-Za-z0-9]+$`)
	regionPattern    = regexp.MustCompile(`^[a-z]{2}(-gov)?-[a-z]+-[0-9]$`)
	accountPattern   = regexp.MustCompile(`^[0-9]{12}$`)
	namespacePattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	// The role path and the start of the name: IAM's path characters.
	teamRolePrefixPattern = regexp.MustCompile(`^/[\w+=,.@/-]*$`)
	kmsKeyIDPattern       = regexp.MustCompile(`^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|mrk-[0-9a-f]{32})$`)
	hyperPodClusterARN    = regexp.MustCompile(`^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:cluster/[a-z0-9]{12}$`)
)

// Check reports every problem with enabled settings at once (after
// WithDefaults), so that a bad settings file stops the portal at start, not
// the first provisioning job.
func (s Settings) Check() error {
	if !s.Enabled {
		return nil
	}
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if s.Region != "" && !regionPattern.MatchString(s.Region) {
		bad("region %q is not an AWS region such as us-east-1", s.Region)
	}
	if s.AccountID != "" && !accountPattern.MatchString(s.AccountID) {
		bad("account_id %q is not 12 digits", s.AccountID)
	}
	if s.ClusterARN != "" && !hyperPodClusterARN.MatchString(s.ClusterARN) {
		bad("cluster_arn %q is not a HyperPod cluster ARN such as arn:aws:sagemaker:us-east-1:111122223333:cluster/a1b2c3d4e5f6", s.ClusterARN)
	}
	st := s.Studio
	if strings.Count(st.DomainNameFormat, "%s") != 1 {
		bad("studio.domain_name_format %q must contain %%s once (the team)", st.DomainNameFormat)
	}
	if strings.Count(st.UnifiedConnectionNameFormat, "%s") != 1 {
		bad("studio.unified_connection_name_format %q must contain %%s once (the cluster name)", st.UnifiedConnectionNameFormat)
	}
	if st.SharedDomainID != "" && !domainIDPattern.MatchString(st.SharedDomainID) {
		bad("studio.shared_domain_id %q is not a domain id such as d-abc123def456", st.SharedDomainID)
	}
	if st.SharedDomainID == "" {
		if !vpcIDPattern.MatchString(st.VpcID) {
			bad("studio.vpc_id %q: a VPC id such as vpc-0a1b2c3d4e5f60718 is required for team domains", st.VpcID)
		}
		if len(st.SubnetIDs) == 0 {
			bad("studio.subnet_ids: at least one subnet is required for team domains")
		}
	}
	for _, id := range st.SubnetIDs {
		if !subnetPattern.MatchString(id) {
			bad("studio.subnet_ids: %q is not a subnet id such as subnet-0a1b2c3d4e5f60718", id)
		}
	}
	for _, id := range st.SecurityGroupIDs {
		if !sgPattern.MatchString(id) {
			bad("studio.security_group_ids: %q is not a security group id such as sg-0a1b2c3d4e5f60718", id)
		}
	}
	if st.AppNetworkAccessType != appNetworkVpcOnly && st.AppNetworkAccessType != appNetworkPublicInternet {
		bad("studio.app_network_access_type %q is not %s or %s", st.AppNetworkAccessType, appNetworkVpcOnly, appNetworkPublicInternet)
	}
	if st.OnRevoke != DomainKeep && st.OnRevoke != DomainDelete {
		bad("studio.on_revoke %q is not %s or %s", st.OnRevoke, DomainKeep, DomainDelete)
	}
	if s.IdentityStoreID == "" {
		bad("identity_store_id is required (the IAM Identity Center identity store whose groups get Studio; ssoadmin ListInstances gives it)")
	} else if !storeIDPattern.MatchString(s.IdentityStoreID) {
		bad("identity_store_id %q is not an identity store id such as d-1234567890", s.IdentityStoreID)
	}
	a := s.Access
	for _, l := range []struct {
		name   string
		grants []AccessGrant
	}{{"studio_policies", a.StudioPolicies}, {"submitter_policies", a.SubmitterPolicies}, {"viewer_policies", a.ViewerPolicies}} {
		seen := map[string]bool{}
		for i, g := range l.grants {
			at := fmt.Sprintf("access.%s[%d]", l.name, i)
			if !policyPattern.MatchString(g.Policy) {
				bad("%s: policy %q is not an EKS access policy name such as %s", at, g.Policy, PolicyEKSView)
			}
			if g.Policy == PolicyEKSClusterAdmin {
				bad("%s: %s makes a role cluster admin; the portal never grants it to a team", at, g.Policy)
			}
			if seen[g.Policy] {
				// EKS keeps one scope per policy and principal: a second
				// association replaces the first.
				bad("%s: %s is listed twice; give it once, with every namespace in its scope", at, g.Policy)
			}
			seen[g.Policy] = true
			// The AccessScope rules of EKS AssociateAccessPolicy: type
			// cluster takes no namespaces, type namespace one at least.
			switch g.Scope {
			case AccessScopeCluster:
				if len(g.Namespaces) > 0 {
					bad("%s: scope cluster takes no namespaces (%s)", at, strings.Join(g.Namespaces, ", "))
				}
			case AccessScopeNamespace:
				if len(g.Namespaces) == 0 {
					bad("%s: scope namespace needs namespaces (%s for the team's own)", at, TeamNamespace)
				}
				nsSeen := map[string]bool{}
				for _, ns := range g.Namespaces {
					if ns != TeamNamespace && !namespacePattern.MatchString(ns) {
						bad("%s: %q is not a Kubernetes namespace name, nor %s (the team's namespace)", at, ns, TeamNamespace)
					}
					if nsSeen[ns] {
						bad("%s: namespace %s is listed twice", at, ns)
					}
					nsSeen[ns] = true
				}
			default:
				bad("%s: scope %q is not %s or %s", at, g.Scope, AccessScopeCluster, AccessScopeNamespace)
			}
		}
	}
	if f := a.ViewerRoleARNFormat; f != "" {
		if r, err := arn.Parse(strings.Replace(f, "%s", "team", 1)); strings.Count(f, "%s") != 1 || err != nil || r.Service != "iam" || !strings.HasPrefix(r.Resource, "role/") {
			bad("access.viewer_role_arn_format %q must be a role ARN with %%s once (the team)", f)
		} else if s.Region != "" && r.Partition != Partition(s.Region) {
			bad("access.viewer_role_arn_format %q is in partition %s, but region %s is in %s", f, r.Partition, s.Region, Partition(s.Region))
		}
	}
	if p := s.TeamRolePrefix; p != "" && (!teamRolePrefixPattern.MatchString(p) || len(p) > 512+64) {
		bad("team_role_prefix %q must start with / and hold a role path and name start (letters, digits, +=,.@_-/), such as /hyperpod-teams/", p)
	}
	if k := st.KmsKeyID; k != "" {
		if _, err := KMSKeyARN(s.Region, s.AccountID, k); err != nil {
			bad("studio.kms_key_id: %v", err)
		}
	}
	if s.ClusterARN != "" && s.Region != "" {
		if r, err := arn.Parse(s.ClusterARN); err == nil && (r.Partition != Partition(s.Region) || r.Region != s.Region) {
			bad("cluster_arn %q is not in region %s (partition %s)", s.ClusterARN, s.Region, Partition(s.Region))
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// KMSKeyARN is the ARN of the domain's KMS key, which `portal iam-policy`
// grants kms:CreateGrant and kms:DescribeKey on: the key ARN as given, or
// built from a key id in region and account (the key resource of the
// Service Authorization Reference for AWS KMS,
// https://docs.aws.amazon.com/service-authorization/latest/reference/list_awskeymanagementservice.html:
// arn:<partition>:kms:<region>:<account>:key/<key id>). An alias names no
// key an IAM policy can be scoped to, so it is refused.
func KMSKeyARN(region, account, key string) (string, error) {
	if r, err := arn.Parse(key); err == nil {
		id, ok := strings.CutPrefix(r.Resource, "key/")
		switch {
		case r.Service != "kms" || !ok || !kmsKeyIDPattern.MatchString(id):
			return "", fmt.Errorf("%q is not a KMS key ARN such as arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab (an alias names no key an IAM policy can grant on)", key)
		case region != "" && (r.Region != region || r.Partition != Partition(region)):
			return "", fmt.Errorf("%q is not in the cluster's region %s", key, region)
		case account != "" && r.AccountID != account:
			return "", fmt.Errorf("%q is not in the cluster's account %s", key, account)
		}
		return key, nil
	}
	if !kmsKeyIDPattern.MatchString(key) {
		return "", fmt.Errorf("%q is not a KMS key id (1234abcd-12ab-34cd-56ef-1234567890ab or mrk-...) or key ARN; an alias names no key an IAM policy can grant on", key)
	}
	if region == "" || account == "" {
		return "", fmt.Errorf("a key id (%s) needs region and account_id to name the key; or give its ARN", key)
	}
	return arn.ARN{Partition: Partition(region), Service: "kms", Region: region, AccountID: account, Resource: "key/" + key}.String(), nil
}

// ParseSettings reads settings from YAML (or JSON), strictly: an unknown key
// is an error, so that a typo never silently falls back to a default.
// Settings read from a file are enabled. Check them once complete.
func ParseSettings(b []byte) (Settings, error) {
	var s Settings
	if err := yaml.UnmarshalStrict(b, &s); err != nil {
		return Settings{}, err
	}
	s.Enabled = true
	return s, nil
}

// DevSettings are example settings matching workflow.ExampleContract's
// account and region: `portal serve --dev` plans (and dry-runs) the AWS
// calls with them, and they are a template for a real settings file.
func DevSettings() Settings {
	return Settings{
		Enabled: true, Region: "us-east-1", AccountID: "111122223333",
		ClusterARN: "arn:aws:sagemaker:us-east-1:111122223333:cluster/a1b2c3d4e5f6",
		Studio: StudioSettings{
			VpcID: "vpc-0a1b2c3d4e5f60718", SubnetIDs: []string{"subnet-0a1b2c3d4e5f60001", "subnet-0a1b2c3d4e5f60002"},
			SecurityGroupIDs: []string{"sg-0a1b2c3d4e5f60718"},
		},
		IdentityStoreID: "d-1234567890",
	}
}
