package provision

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/mod/semver"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
)

// CheckStatus is how one readiness check came out.
type CheckStatus string

// Check statuses.
const (
	CheckOK      CheckStatus = "ok"
	CheckFailing CheckStatus = "failing" // provisioning fails, or a guarantee is void
	CheckWarning CheckStatus = "warning" // works, with a gap worth fixing
	CheckUnknown CheckStatus = "unknown" // could not be read (no cluster or AWS, or an error)
)

// Check is one readiness check: what was found, and what to do about it.
type Check struct {
	Name   string
	Status CheckStatus
	Detail string
	Todo   string // "" when there is nothing to do
}

// Readiness is what the cluster really serves and runs, against what the
// portal's plans need.
type Readiness struct {
	Checks []Check
	// KueueServed: the cluster serves KueueGroupVersion (false when unknown).
	KueueServed bool
	// NetworkPoliciesEnforced: the VPC CNI enforces NetworkPolicies (false
	// when unknown).
	NetworkPoliciesEnforced bool
	// AdmissionMode is the roll-out mode of the contracts' admission
	// rules; AdmissionCounts what the API server counted of them (nil
	// when not read).
	AdmissionMode   AdmissionMode
	AdmissionCounts *AdmissionCounts
}

// Check returns the check named name.
func (r Readiness) Check(name string) (Check, bool) {
	i := slices.IndexFunc(r.Checks, func(c Check) bool { return c.Name == name })
	if i < 0 {
		return Check{}, false
	}
	return r.Checks[i], true
}

// Names of the checks.
const (
	CheckKueueAPI         = "Kueue API version"
	CheckTaskGovernance   = "Task governance add-on"
	CheckNetworkPolicies  = "Network policies"
	CheckPodIdentityAgent = "EKS Pod Identity agent"
	CheckAuthMode         = "EKS authentication mode"
	CheckEndpointAccess   = "EKS API endpoint access"
	CheckCloudWatch       = "CloudWatch Observability add-on"
	CheckAdmissionRules   = "Contract admission rules"
	CheckKueueConfig      = "Kueue: jobs without a queue name"
	CheckAdmissionCounts  = "Contract admission warnings and denials"
)

// CloudWatchAddonMin is the oldest amazon-cloudwatch-observability add-on
// the task governance dashboard's metrics views work with: "version 2.4.0
// or later", per AWS's guide to governing HyperPod from SageMaker Unified
// Studio, as the seed article (shared/seeds/002, "Observabilidade")
// reports it. The stored AWS pages searched (the task governance setup,
// https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-operate-console-ui-governance-setup.html,
// and the add-on's own pages) do not state a minimum, so the check only
// warns: it never blocks anything.
const CloudWatchAddonMin = "2.4.0"

// ReadinessSources are where the checks read from; nil parts are skipped
// and their checks reported unknown.
type ReadinessSources struct {
	Kube *ClusterReader
	// ClusterInfo and Addons read the HyperPod cluster ClusterARN and, from
	// its orchestrator, the EKS cluster's add-ons.
	ClusterInfo awsprov.ClusterInfoAPI
	Addons      awsprov.AddonAPI
	ClusterARN  string
	// VPCEndpoints reads the VPC endpoints of the EKS cluster's VPC.
	VPCEndpoints awsprov.VPCEndpointAPI
	// PodIdentity: plans create Pod Identity associations, which need the
	// agent.
	PodIdentity bool
	// Kueue is the Kueue API version the plans need; zero means
	// KueueGroupVersion.
	Kueue schema.GroupVersion
	// AdmissionMode is the cluster settings' roll-out mode of the
	// contracts' admission rules; "" means AdmissionWarn.
	AdmissionMode AdmissionMode
	// Slurm, when set, runs Slurm's commands on a Slurm cluster's
	// controller (readiness_slurm.go); nil leaves its check out.
	Slurm SlurmRunner
	// SlurmPartitions lists the partitions the approved Slurm contracts of
	// the committed connections name, which the partitions check looks
	// for on the cluster; nil
	// skips that part.
	SlurmPartitions func(context.Context) ([]SlurmPartitionUse, error)
	// SlurmPartitionTypes maps the Slurm cluster's partitions to their
	// nodes' instance types (the cluster settings'
	// slurm.partition_instance_types): with Slurm set and no Kube, the
	// inventory is read from the Slurm nodes (ReadInventory).
	SlurmPartitionTypes map[string]string
	// Accelerators is the cluster settings' table of resources per
	// instance type (nil: DefaultAccelerators): the Slurm GPU check
	// compares each node's declared GPUs with its type's.
	Accelerators map[string]ResourcesPerInstance
}

func (s ReadinessSources) admissionMode() AdmissionMode {
	if s.AdmissionMode == "" {
		return AdmissionWarn
	}
	return s.AdmissionMode
}

func (s ReadinessSources) accelerators() map[string]ResourcesPerInstance {
	if s.Accelerators == nil {
		return DefaultAccelerators
	}
	return s.Accelerators
}

func (s ReadinessSources) kueue() schema.GroupVersion {
	if s.Kueue.Empty() {
		return KueueGroupVersion
	}
	return s.Kueue
}

// CheckReadiness runs every check. It never fails: a source that cannot be
// read makes its checks unknown, with the error as the detail.
func CheckReadiness(ctx context.Context, src ReadinessSources) Readiness {
	var r Readiness
	r.Checks = append(r.Checks, kueueCheck(ctx, src, &r))

	var addons map[string]awsprov.Addon
	var cluster *awsprov.EKSCluster
	addonErr := "no AWS settings with a cluster ARN, or AWS calls are off (dry run)"
	clusterErr := addonErr
	if src.ClusterInfo != nil && src.Addons != nil && src.ClusterARN != "" {
		cluster, clusterErr, addons, addonErr = readAddons(ctx, src)
	}
	r.Checks = append(r.Checks, taskGovernanceCheck(addons, addonErr))
	r.Checks = append(r.Checks, networkPolicyCheck(ctx, src, addons, &r))
	if src.PodIdentity {
		r.Checks = append(r.Checks, podIdentityCheck(addons, addonErr))
	}
	r.Checks = append(r.Checks, authModeCheck(cluster, clusterErr), endpointAccessCheck(cluster, clusterErr), cloudWatchCheck(addons, addonErr),
		vpcEndpointsCheck(ctx, src, cluster, clusterErr))
	r.Checks = append(r.Checks, admissionCheck(ctx, src), kueueConfigCheck(ctx, src), admissionCountsCheck(ctx, src, &r))
	if src.Slurm != nil {
		controller := slurmControllerCheck(ctx, src.Slurm)
		conf, confErr := readSlurmConfig(ctx, src.Slurm)
		r.Checks = append(r.Checks, controller, slurmEnforcementCheck(conf, confErr),
			slurmPartitionsCheck(ctx, src.Slurm, src.SlurmPartitions), slurmVisibilityCheck(ctx, src.Slurm, conf, confErr))
		if len(src.SlurmPartitionTypes) > 0 {
			r.Checks = append(r.Checks, slurmGPUsCheck(ctx, src.Slurm, src.SlurmPartitionTypes, src.accelerators()))
		}
	}
	return r
}

// admissionCheck: does the API server serve ValidatingAdmissionPolicy v1,
// which every plan applies (admission.go), and in which mode do the rules
// run.
func admissionCheck(ctx context.Context, src ReadinessSources) Check {
	c := Check{Name: CheckAdmissionRules}
	mode := src.admissionMode()
	if src.Kube == nil {
		c.Status, c.Detail = CheckUnknown, errNoCluster.Error()
		return c
	}
	gv := admissionregistrationv1.SchemeGroupVersion.String()
	ok, err := src.Kube.ServesResource(ctx, gv, "validatingadmissionpolicies")
	switch {
	case err != nil:
		c.Status, c.Detail = CheckUnknown, err.Error()
	case ok:
		c.Status = CheckOK
		c.Detail = fmt.Sprintf("The cluster serves ValidatingAdmissionPolicy (%s). The contracts' rules (queue label, priority classes, no bare pods, accelerators on the guaranteed instance types) run in %s mode: binding %s, validationActions [%s]%s.",
			gv, mode, AdmissionBindingName(mode), mode.validationAction(),
			map[AdmissionMode]string{AdmissionWarn: ", so the API server warns and refuses nothing", AdmissionAudit: ", so violations are only recorded in the audit log", AdmissionDeny: ", so violations are refused"}[mode])
	default:
		c.Status = CheckFailing
		c.Detail = fmt.Sprintf("The cluster does not serve ValidatingAdmissionPolicy (%s), which every plan applies: provisioning fails at that step.", gv)
		c.Todo = "Upgrade the EKS cluster to Kubernetes v1.30 or later, where ValidatingAdmissionPolicy is stable and on by default."
	}
	return c
}

func kueueCheck(ctx context.Context, src ReadinessSources, r *Readiness) Check {
	c := Check{Name: CheckKueueAPI}
	if src.Kube == nil {
		c.Status, c.Detail = CheckUnknown, errNoCluster.Error()
		return c
	}
	want := src.kueue()
	served, err := src.Kube.Served(ctx, want.Group)
	switch {
	case err != nil:
		c.Status, c.Detail = CheckUnknown, err.Error()
	case slices.Contains(served, want.Version):
		r.KueueServed = true
		c.Status, c.Detail = CheckOK, fmt.Sprintf("The cluster serves %s (versions %s), which the plans apply.", want, strings.Join(served, ", "))
	default:
		c.Status = CheckFailing
		c.Detail = sentenceOf((&NotServedError{Want: want, Served: served}).Error())
		c.Todo = fmt.Sprintf("Upgrade the task governance add-on (%s) to %s or later; the portal refuses to provision until the cluster serves %s.", awsprov.AddonTaskGovernance, KueueAddonVersion, want)
	}
	return c
}

// readAddons reads the HyperPod cluster's EKS cluster and the add-ons the
// checks look at. The EKS cluster and the add-ons fail apart (a role whose
// policy predates eks:DescribeCluster still reads the add-ons): each comes
// with its own reason when it could not be read.
func readAddons(ctx context.Context, src ReadinessSources) (*awsprov.EKSCluster, string, map[string]awsprov.Addon, string) {
	hp, err := awsprov.DescribeHyperPodCluster(ctx, src.ClusterInfo, src.ClusterARN)
	if err != nil {
		return nil, err.Error(), nil, err.Error()
	}
	if hp.EKSClusterName == "" {
		why := fmt.Sprintf("HyperPod cluster %s is not orchestrated by EKS", hp.Name)
		return nil, why, nil, why
	}
	var cluster *awsprov.EKSCluster
	clusterErr := ""
	if c, err := awsprov.DescribeEKSCluster(ctx, src.Addons, hp.EKSClusterName); err != nil {
		clusterErr = err.Error()
	} else {
		cluster = &c
	}
	out := map[string]awsprov.Addon{}
	for _, name := range []string{awsprov.AddonTaskGovernance, awsprov.AddonVPCCNI, awsprov.AddonPodIdentity, awsprov.AddonCloudWatch} {
		a, err := awsprov.DescribeAddon(ctx, src.Addons, hp.EKSClusterName, name)
		if err != nil {
			return cluster, clusterErr, nil, err.Error()
		}
		out[name] = a
	}
	return cluster, clusterErr, out, ""
}

// authModeCheck: the teams' access entries need an authentication mode with
// the EKS API (awsprov.EKSCluster.AuthenticationMode cites it), and
// HyperPod itself supports only those two ("The authentication mode of an
// Amazon EKS cluster supported by SageMaker HyperPod are API and
// API_AND_CONFIG_MAP",
// https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-prerequisites.html).
// The change is one way ("you can't change the authentication mode back to
// a mode that removes the EKS API and access entries",
// https://docs.aws.amazon.com/eks/latest/userguide/setting-up-access-entries.html).
func authModeCheck(c *awsprov.EKSCluster, readErr string) Check {
	ch := Check{Name: CheckAuthMode}
	switch {
	case c == nil:
		ch.Status, ch.Detail = CheckUnknown, sentenceOf(readErr)
	case c.AuthenticationMode == "API" || c.AuthenticationMode == "API_AND_CONFIG_MAP":
		ch.Status, ch.Detail = CheckOK, fmt.Sprintf("EKS cluster %s authenticates with %s: access entries work.", c.Name, c.AuthenticationMode)
	default:
		ch.Status = CheckFailing
		ch.Detail = fmt.Sprintf("EKS cluster %s authenticates with %s: the teams' access entries cannot be created.", c.Name, orNone(c.AuthenticationMode))
		ch.Todo = fmt.Sprintf("Change the authentication mode to API_AND_CONFIG_MAP (or API): aws eks update-cluster-config --name %s --access-config authenticationMode=API_AND_CONFIG_MAP. It cannot be changed back.", c.Name)
	}
	return ch
}

// endpointAccessCheck: the guide asks for the Kubernetes API endpoint to be
// reachable only from approved administrative paths (seed 002, "Trate a
// rede como controle de ponta a ponta"); EKS's default is a public endpoint
// open to 0.0.0.0/0 (awsprov.EKSCluster cites it). EKS documents the
// remedy: "enable private access for your Amazon EKS cluster's Kubernetes
// API server endpoint and limit, or completely disable, public access from
// the internet" (https://docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html);
// the to-do's CLI is config-cluster-endpoint.html's.
func endpointAccessCheck(c *awsprov.EKSCluster, readErr string) Check {
	ch := Check{Name: CheckEndpointAccess}
	if c == nil {
		ch.Status, ch.Detail = CheckUnknown, sentenceOf(readErr)
		return ch
	}
	open := c.EndpointPublic && (len(c.PublicAccessCIDRs) == 0 || slices.Contains(c.PublicAccessCIDRs, "0.0.0.0/0") || slices.Contains(c.PublicAccessCIDRs, "::/0"))
	switch {
	case !c.EndpointPublic:
		ch.Status, ch.Detail = CheckOK, "Private only: the API endpoint answers only inside the cluster's VPC."
	case open:
		ch.Status = CheckWarning
		ch.Detail = fmt.Sprintf("Public to the whole internet (public access CIDRs %s; private access %s).", strings.Join(orAll(c.PublicAccessCIDRs), ", "), onOffWord(c.EndpointPrivate))
		ch.Todo = fmt.Sprintf("Limit the public endpoint to your administrative networks (aws eks update-cluster-config --name %s --resources-vpc-config endpointPublicAccess=true,publicAccessCidrs=<your CIDRs>,endpointPrivateAccess=true), or turn public access off.", c.Name)
	default:
		ch.Status, ch.Detail = CheckOK, fmt.Sprintf("Public only to %s; private access %s.", strings.Join(c.PublicAccessCIDRs, ", "), onOffWord(c.EndpointPrivate))
	}
	return ch
}

// cloudWatchCheck: the task governance dashboard's metrics need the
// CloudWatch Observability add-on, CloudWatchAddonMin or later. Its
// install attaches CloudWatchAgentServerPolicy to the worker nodes' role
// ("set up the necessary permissions by attaching the
// CloudWatchAgentServerPolicy IAM policy to your worker nodes",
// https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Container-Insights-setup-EKS-addon.html).
func cloudWatchCheck(addons map[string]awsprov.Addon, addonErr string) Check {
	ch := Check{Name: CheckCloudWatch}
	a, ok := addons[awsprov.AddonCloudWatch]
	todo := fmt.Sprintf("Install or upgrade the %s add-on to %s or later (aws eks create-addon / update-addon --addon-name %s), with CloudWatchAgentServerPolicy on the worker nodes' role: HyperPod's task governance dashboard reads its metrics. The portal's own figures do not depend on it.", awsprov.AddonCloudWatch, CloudWatchAddonMin, awsprov.AddonCloudWatch)
	switch {
	case !ok:
		ch.Status, ch.Detail = CheckUnknown, sentenceOf(addonErr)
	case !a.Installed:
		ch.Status, ch.Detail, ch.Todo = CheckWarning, fmt.Sprintf("The add-on %s is not installed.", awsprov.AddonCloudWatch), todo
	case !versionAtLeast(a.Version, CloudWatchAddonMin):
		ch.Status, ch.Detail, ch.Todo = CheckWarning, fmt.Sprintf("%s %s is older than %s.", awsprov.AddonCloudWatch, a.Version, CloudWatchAddonMin), todo
	default:
		ch.Status, ch.Detail = CheckOK, fmt.Sprintf("%s %s (%s).", awsprov.AddonCloudWatch, a.Version, a.Status)
	}
	return ch
}

// versionAtLeast compares an EKS add-on version (v2.4.0-eksbuild.1) with a
// minimum (2.4.0) by its major, minor and patch numbers (the -eksbuild.N
// suffix is EKS's build of that version, not a pre-release); a version that
// does not parse is not at least anything.
func versionAtLeast(v, min string) bool {
	release := func(s string) string {
		s, _, _ = strings.Cut("v"+strings.TrimPrefix(s, "v"), "-")
		return s
	}
	have, want := release(v), release(min)
	return semver.IsValid(have) && semver.IsValid(want) && semver.Compare(have, want) >= 0
}

func orAll(cidrs []string) []string {
	if len(cidrs) == 0 {
		return []string{"none given: 0.0.0.0/0"}
	}
	return cidrs
}

func onOffWord(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func taskGovernanceCheck(addons map[string]awsprov.Addon, addonErr string) Check {
	c := Check{Name: CheckTaskGovernance}
	a, ok := addons[awsprov.AddonTaskGovernance]
	switch {
	case !ok:
		c.Status, c.Detail = CheckUnknown, sentenceOf(addonErr)
	case !a.Installed:
		c.Status, c.Detail = CheckFailing, fmt.Sprintf("The add-on %s is not installed.", awsprov.AddonTaskGovernance)
		c.Todo = fmt.Sprintf("Install HyperPod task governance (%s or later): compute quotas and the scheduler config need it.", KueueAddonVersion)
	default:
		c.Status, c.Detail = CheckOK, fmt.Sprintf("%s %s (%s).", awsprov.AddonTaskGovernance, a.Version, a.Status)
		if a.Status != "ACTIVE" {
			c.Status, c.Todo = CheckWarning, "The add-on is not ACTIVE: see its health in the EKS console."
		}
	}
	return c
}

func networkPolicyCheck(ctx context.Context, src ReadinessSources, addons map[string]awsprov.Addon, r *Readiness) Check {
	c := Check{Name: CheckNetworkPolicies}
	todo := `Turn on the VPC CNI's network policy support: set the vpc-cni add-on's configuration value {"enableNetworkPolicy": "true"} (self-managed: --enable-network-policy=true on the aws-network-policy-agent container of DaemonSet kube-system/aws-node). Until then the teams' NetworkPolicies (default deny, allowed egress) are accepted but not enforced.`
	var config string
	if a, ok := addons[awsprov.AddonVPCCNI]; ok && a.Installed {
		config = fmt.Sprintf(" The vpc-cni add-on %s has enableNetworkPolicy %s.", a.Version, onOff(awsprov.NetworkPolicyConfigured(a.ConfigurationValues)))
	}
	if src.Kube == nil {
		c.Status, c.Detail = CheckUnknown, "Enforcement is read from DaemonSet kube-system/aws-node: "+errNoCluster.Error()+"."+config
		return c
	}
	a, err := src.Kube.NetworkPolicyAgent(ctx)
	switch {
	case err != nil:
		c.Status, c.Detail = CheckUnknown, err.Error()+config
	case a.Enforced():
		r.NetworkPoliciesEnforced = true
		c.Status, c.Detail = CheckOK, "Enforced: the aws-network-policy-agent container of DaemonSet kube-system/aws-node runs with --enable-network-policy=true."+config
	case !a.DaemonSet:
		c.Status, c.Detail, c.Todo = CheckFailing, "NOT enforced: DaemonSet kube-system/aws-node (the VPC CNI) does not exist."+config, todo
	case !a.Agent:
		c.Status, c.Detail, c.Todo = CheckFailing, "NOT enforced: DaemonSet kube-system/aws-node has no aws-network-policy-agent container (VPC CNI before 1.14?)."+config, todo
	default:
		c.Status, c.Detail, c.Todo = CheckFailing, "NOT enforced: the aws-network-policy-agent container runs without --enable-network-policy=true."+config, todo
	}
	return c
}

func podIdentityCheck(addons map[string]awsprov.Addon, addonErr string) Check {
	c := Check{Name: CheckPodIdentityAgent}
	a, ok := addons[awsprov.AddonPodIdentity]
	switch {
	case !ok:
		c.Status, c.Detail = CheckUnknown, sentenceOf(addonErr)
	case !a.Installed:
		c.Status, c.Detail = CheckFailing, fmt.Sprintf("The add-on %s is not installed.", awsprov.AddonPodIdentity)
		c.Todo = "Install the EKS Pod Identity agent add-on: without it the teams' workload roles (Pod Identity associations) give their pods no credentials."
	default:
		c.Status, c.Detail = CheckOK, fmt.Sprintf("%s %s (%s).", awsprov.AddonPodIdentity, a.Version, a.Status)
	}
	return c
}

func onOff(b bool) string {
	if b {
		return `"true"`
	}
	return "not set to \"true\""
}

func sentenceOf(s string) string {
	if s == "" {
		return s
	}
	s = strings.ToUpper(s[:1]) + s[1:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}
