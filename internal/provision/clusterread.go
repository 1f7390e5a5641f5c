package provision

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// KueueGroupVersion is the Kueue API version the plans apply. Only HyperPod
// task governance add-ons from KueueAddonVersion on are documented to serve
// it; older ones serve older Kueue versions, and applying the plan there
// would fail with "no matches for kind".
var KueueGroupVersion = schema.GroupVersion{Group: "kueue.x-k8s.io", Version: "v1beta2"}

// KueueAddonVersion is the task governance add-on version AWS documents as
// shipping a Kueue that serves kueue.x-k8s.io/v1beta2: "Version
// v1.6.0-eksbuild.1 packages Kueue v0.19.2"
// (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-operate-console-ui-governance-upgrade.html).
// Kueue's own CRDs serve v1beta2 next to v1beta1 in v0.17.0
// (sigs.k8s.io/kueue@v0.17.0 config/components/crd/bases, as the test bed
// installs them); AWS does not say which Kueue the add-ons before v1.6
// ship, so the portal names the version AWS documents. The decisive check
// is discovery (ClusterReader.Served), not this number.
const KueueAddonVersion = "v1.6.0-eksbuild.1"

// Labels HyperPod and Kubernetes put on nodes.
const (
	// LabelInstanceType is Kubernetes' well-known instance type label;
	// on HyperPod nodes it holds the ml.* type.
	LabelInstanceType = "node.kubernetes.io/instance-type"
	// LabelNodeHealth is HyperPod's node health label, with the values
	// below (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-resiliency-node-labels.html).
	LabelNodeHealth = "sagemaker.amazonaws.com/node-health-status"

	HealthSchedulable                     = "Schedulable"                     // passed basic health checks; runs workloads
	HealthUnschedulable                   = "Unschedulable"                   // running deep health checks
	HealthUnschedulablePendingReplacement = "UnschedulablePendingReplacement" // failed; to be replaced
	HealthUnschedulablePendingReboot      = "UnschedulablePendingReboot"      // failed; to be rebooted
)

// The VPC CNI's DaemonSet and its network policy agent, as AWS's EKS user
// guide names them (cni-network-policy-configure.html, "Self-managed
// add-on"): network policy support is on when the aws-network-policy-agent
// container of the aws-node DaemonSet in kube-system runs with
// --enable-network-policy=true. The managed add-on's configuration value
// enableNetworkPolicy "true" sets that argument, so the DaemonSet is what
// decides, however the CNI was installed.
const (
	cniNamespace          = "kube-system"
	cniDaemonSet          = "aws-node"
	networkPolicyAgent    = "aws-network-policy-agent"
	networkPolicyAgentArg = "--enable-network-policy=true"
)

// ClusterReader reads what the cluster serves and runs: API versions
// (discovery), the VPC CNI's DaemonSet and the nodes. It only reads.
type ClusterReader struct {
	Discovery discovery.DiscoveryInterface
	Client    dynamic.Interface
}

// NewClusterReader builds a ClusterReader on cfg.
func NewClusterReader(cfg *rest.Config) (*ClusterReader, error) {
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("provision: discovery client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("provision: dynamic client: %w", err)
	}
	return &ClusterReader{Discovery: disc, Client: dyn}, nil
}

// Served returns the versions of group the API server serves (none when
// the group is not served at all), read fresh from discovery.
func (r *ClusterReader) Served(ctx context.Context, group string) ([]string, error) {
	all, err := r.servedGroups(ctx)
	return all[group], err
}

// ServesResource reports whether the API server serves resource in group
// version gv ("admissionregistration.k8s.io/v1"), read fresh from
// discovery.
func (r *ClusterReader) ServesResource(ctx context.Context, gv, resource string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	list, err := r.Discovery.ServerResourcesForGroupVersion(gv)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("provision: discovery of %s: %w", gv, err)
	}
	return slices.ContainsFunc(list.APIResources, func(x metav1.APIResource) bool { return x.Name == resource }), nil
}

// servedGroups reads every served group's versions, sorted.
func (r *ClusterReader) servedGroups(ctx context.Context) (map[string][]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	groups, err := r.Discovery.ServerGroups()
	if err != nil {
		return nil, fmt.Errorf("provision: discovery: %w", err)
	}
	out := map[string][]string{}
	for _, g := range groups.Groups {
		for _, v := range g.Versions {
			out[g.Name] = append(out[g.Name], v.Version)
		}
		sort.Strings(out[g.Name])
	}
	return out, nil
}

// NotServedError is a plan needing an API version the cluster does not
// serve.
type NotServedError struct {
	Want   schema.GroupVersion
	Served []string // the group's versions the cluster serves
}

func (e *NotServedError) Error() string {
	msg := fmt.Sprintf("the cluster does not serve %s (%s)", e.Want, e.ServedText())
	if e.Want.Group == KueueGroupVersion.Group {
		msg += fmt.Sprintf(": the plan's Kueue objects need the HyperPod task governance add-on (amazon-sagemaker-hyperpod-taskgovernance) at %s or later; upgrade it, check /admin/cluster, then retry the job", KueueAddonVersion)
	}
	return msg
}

// ServedText says which versions of the group the cluster serves: "it
// serves only v1beta1" or "it serves no version of it".
func (e *NotServedError) ServedText() string {
	if len(e.Served) == 0 {
		return "it serves no version of it"
	}
	return "it serves only " + strings.Join(e.Served, ", ")
}

// RequireServed checks that the cluster serves every group/version of the
// plan's objects outside the core group, before anything is applied. The
// first missing one is a *NotServedError, marked permanent (IsPermanent):
// the cluster has to change before a retry can help.
func (r *ClusterReader) RequireServed(ctx context.Context, p Plan) error {
	all, err := r.servedGroups(ctx)
	if err != nil {
		return err
	}
	for _, o := range p.Objects {
		gv := o.Obj.GroupVersionKind().GroupVersion()
		if gv.Group == "" {
			continue
		}
		if served := all[gv.Group]; !slices.Contains(served, gv.Version) {
			return permanent(&NotServedError{Want: gv, Served: served})
		}
	}
	return nil
}

// NetworkPolicyAgent is what the aws-node DaemonSet says about network
// policy enforcement.
type NetworkPolicyAgent struct {
	DaemonSet bool // kube-system/aws-node exists (the VPC CNI runs)
	Agent     bool // it has the aws-network-policy-agent container
	Enabled   bool // ... running with --enable-network-policy=true
}

// Enforced reports whether NetworkPolicies are enforced.
func (a NetworkPolicyAgent) Enforced() bool { return a.DaemonSet && a.Agent && a.Enabled }

var daemonSets = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}

// NetworkPolicyAgent reads the VPC CNI's DaemonSet.
func (r *ClusterReader) NetworkPolicyAgent(ctx context.Context) (NetworkPolicyAgent, error) {
	ds, err := r.Client.Resource(daemonSets).Namespace(cniNamespace).Get(ctx, cniDaemonSet, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return NetworkPolicyAgent{}, nil
	}
	if err != nil {
		return NetworkPolicyAgent{}, fmt.Errorf("provision: read DaemonSet %s/%s: %w", cniNamespace, cniDaemonSet, err)
	}
	a := NetworkPolicyAgent{DaemonSet: true}
	containers, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "containers")
	for _, c := range containers {
		m, _ := c.(map[string]any)
		if name, _ := m["name"].(string); name != networkPolicyAgent {
			continue
		}
		a.Agent = true
		args, _, _ := unstructured.NestedStringSlice(m, "args")
		a.Enabled = slices.Contains(args, networkPolicyAgentArg)
	}
	return a, nil
}

// NodeCount is the cluster's nodes of one instance type.
type NodeCount struct {
	InstanceType string
	Total        int
	// Schedulable nodes carry HyperPod's health label Schedulable and are
	// not cordoned: the ones that can run a team's work now.
	Schedulable int
	// ByHealth counts the nodes by health label value ("" for none).
	ByHealth map[string]int
}

var nodes = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// NodeSchedulable is whether a node counts as capacity: HyperPod labels
// it Schedulable (it passed its health checks and runs workloads; the
// Unschedulable* values mean deep health checks, a pending replacement or
// a pending reboot, LabelNodeHealth cites AWS's page) and it is not
// cordoned (spec.unschedulable), so it can run a team's work now. The
// inventory (ReadInventory and the usage collector's) and the usage
// collector's node-seconds use this one rule.
func NodeSchedulable(health string, cordoned bool) bool {
	return health == HealthSchedulable && !cordoned
}

// Nodes counts the cluster's nodes by instance type (label
// node.kubernetes.io/instance-type; nodes without it are left out) and
// HyperPod health, sorted by instance type.
func (r *ClusterReader) Nodes(ctx context.Context) ([]NodeCount, error) {
	by := map[string]*NodeCount{}
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := r.Client.Resource(nodes).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("provision: list nodes: %w", err)
		}
		for _, n := range list.Items {
			labels := n.GetLabels()
			typ := labels[LabelInstanceType]
			if typ == "" {
				continue
			}
			c := by[typ]
			if c == nil {
				c = &NodeCount{InstanceType: typ, ByHealth: map[string]int{}}
				by[typ] = c
			}
			health := labels[LabelNodeHealth]
			c.Total++
			c.ByHealth[health]++
			cordoned, _, _ := unstructured.NestedBool(n.Object, "spec", "unschedulable")
			if NodeSchedulable(health, cordoned) {
				c.Schedulable++
			}
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			break
		}
	}
	out := make([]NodeCount, 0, len(by))
	for _, c := range by {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].InstanceType < out[j].InstanceType })
	return out, nil
}

// errNoCluster is a check that needs a cluster in dry-run mode.
var errNoCluster = errors.New("no cluster configured (dry-run mode)")
