package provision

import (
	"context"
	"fmt"
	"slices"
	"strings"

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
)

// ReadinessSources are where the checks read from; nil parts are skipped
// and their checks reported unknown.
type ReadinessSources struct {
	Kube *ClusterReader
	// ClusterInfo and Addons read the HyperPod cluster ClusterARN and, from
	// its orchestrator, the EKS cluster's add-ons.
	ClusterInfo awsprov.ClusterInfoAPI
	Addons      awsprov.AddonAPI
	ClusterARN  string
	// PodIdentity: plans create Pod Identity associations, which need the
	// agent.
	PodIdentity bool
	// Kueue is the Kueue API version the plans need; zero means
	// KueueGroupVersion.
	Kueue schema.GroupVersion
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
	addonErr := "no AWS settings with a cluster ARN, or AWS calls are off (dry run)"
	if src.ClusterInfo != nil && src.Addons != nil && src.ClusterARN != "" {
		addons, addonErr = readAddons(ctx, src)
	}
	r.Checks = append(r.Checks, taskGovernanceCheck(addons, addonErr))
	r.Checks = append(r.Checks, networkPolicyCheck(ctx, src, addons, &r))
	if src.PodIdentity {
		r.Checks = append(r.Checks, podIdentityCheck(addons, addonErr))
	}
	return r
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
// checks look at.
func readAddons(ctx context.Context, src ReadinessSources) (map[string]awsprov.Addon, string) {
	hp, err := awsprov.DescribeHyperPodCluster(ctx, src.ClusterInfo, src.ClusterARN)
	if err != nil {
		return nil, err.Error()
	}
	if hp.EKSClusterName == "" {
		return nil, fmt.Sprintf("HyperPod cluster %s is not orchestrated by EKS", hp.Name)
	}
	out := map[string]awsprov.Addon{}
	for _, name := range []string{awsprov.AddonTaskGovernance, awsprov.AddonVPCCNI, awsprov.AddonPodIdentity} {
		a, err := awsprov.DescribeAddon(ctx, src.Addons, hp.EKSClusterName, name)
		if err != nil {
			return nil, err.Error()
		}
		out[name] = a
	}
	return out, ""
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
