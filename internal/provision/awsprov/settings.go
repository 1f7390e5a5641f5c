package awsprov

import (
	"errors"
	"fmt"
	"regexp"
	"sigs.k8s.io/yaml"
	"slices"
	"strings"
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
// arn:aws:eks::aws:cluster-access-policy/) each of a team's roles gets,
// always scoped to the team namespace.
type AccessSettings struct {
	// StudioPolicies: the Studio execution role (the contract's project
	// role). Default: the HyperPod training, inference and space policies.
	StudioPolicies []string `json:"studio_policies,omitempty"`
	// SubmitterPolicies: the contract's access role, used by the team's
	// people to submit work. Default: training and inference.
	SubmitterPolicies []string `json:"submitter_policies,omitempty"`
	// ViewerRoleARNFormat, when set, is a read-only role per team (%s is
	// the team) that gets ViewerPolicies (default AmazonEKSViewPolicy).
	ViewerRoleARNFormat string   `json:"viewer_role_arn_format,omitempty"`
	ViewerPolicies      []string `json:"viewer_policies,omitempty"`
}

// Default settings.
const (
	DefaultDomainNameFormat  = "%s-studio"
	DefaultConnectionFormat  = "hyperpod-%s"
	DomainKeep               = "keep"
	DomainDelete             = "delete"
	AccessPolicyARNPrefix    = "arn:aws:eks::aws:cluster-access-policy/"
	PolicyHyperPodTraining   = "AmazonSagemakerHyperpodTrainingPolicy"
	PolicyHyperPodInference  = "AmazonSagemakerHyperpodInferencePolicy"
	PolicyHyperPodSpace      = "AmazonSagemakerHyperpodSpacePolicy"
	PolicyEKSView            = "AmazonEKSViewPolicy"
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
		a.StudioPolicies = []string{PolicyHyperPodTraining, PolicyHyperPodInference, PolicyHyperPodSpace}
	}
	if a.SubmitterPolicies == nil {
		a.SubmitterPolicies = []string{PolicyHyperPodTraining, PolicyHyperPodInference}
	}
	if a.ViewerPolicies == nil {
		a.ViewerPolicies = []string{PolicyEKSView}
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
	vpcIDPattern       = regexp.MustCompile(`^vpc-([0-9a-f]{8}|[0-9a-f]{17})$`)
	subnetPattern      = regexp.MustCompile(`^subnet-([0-9a-f]{8}|[0-9a-f]{17})$`)
	sgPattern          = regexp.MustCompile(`^sg-([0-9a-f]{8}|[0-9a-f]{17})$`)
	domainIDPattern    = regexp.MustCompile(`^d-(-*[a-z0-9]){1,61}$`)
	storeIDPattern     = regexp.MustCompile(`^(d-[0-9a-f]{10}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$`)
	policyPattern      = regexp.MustCompile(`^[A-Za-z0-9]+$`)
	regionPattern      = regexp.MustCompile(`^[a-z]{2}(-gov)?-[a-z]+-[0-9]$`)
	accountPattern     = regexp.MustCompile(`^[0-9]{12}$`)
	hyperPodClusterARN = regexp.MustCompile(`^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:cluster/[a-z0-9]{12}$`)
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
	for name, ps := range map[string][]string{"studio_policies": a.StudioPolicies, "submitter_policies": a.SubmitterPolicies, "viewer_policies": a.ViewerPolicies} {
		for _, p := range ps {
			if !policyPattern.MatchString(p) {
				bad("access.%s: %q is not an EKS access policy name such as %s", name, p, PolicyEKSView)
			}
		}
	}
	if a.ViewerRoleARNFormat != "" && (strings.Count(a.ViewerRoleARNFormat, "%s") != 1 || !strings.HasPrefix(a.ViewerRoleARNFormat, "arn:aws")) {
		bad("access.viewer_role_arn_format %q must be a role ARN with %%s once (the team)", a.ViewerRoleARNFormat)
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
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
