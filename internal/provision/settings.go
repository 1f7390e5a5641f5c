package provision

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/workflow"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ClusterSettings are the facts about one shared cluster that a contract does
// not carry: how the cluster names namespaces, queues and groups, whether the
// portal or the HyperPod console owns the Kueue ClusterQueues, and what each
// instance type brings. cmd/portal fills it from configuration; start from
// DefaultClusterSettings.
//
// BuildPlan fills empty fields with the defaults, so a zero value is usable.
// For the two lists, nil means the default and an empty non-nil slice means
// none.
type ClusterSettings struct {
	// ClusterName is the name of the HyperPod cluster the kubeconfig
	// reaches (the contracts' cluster_name). With it, the usage collector
	// keeps that cluster's observed inventory from its node informer;
	// without it the inventory is read only on the admin's "Refresh".
	ClusterName string

	// NamespacePrefix names the team namespace: prefix + team when the
	// contract names none or lists that one among its namespaces, else the
	// contract's first namespace. HyperPod task governance uses
	// "hyperpod-ns-".
	NamespacePrefix string

	// ClusterQueueNameFormat names the team's Kueue ClusterQueue; %s is the
	// team. HyperPod task governance creates "hyperpod-ns-<team>-clusterqueue".
	ClusterQueueNameFormat string

	// ClusterQueueManagedByPortal: the portal creates the team's ClusterQueue
	// (and the cluster's WorkloadPriorityClasses and ResourceFlavors) itself.
	// False (the default) when HyperPod task governance creates them from the
	// compute quota; then the plan only points a LocalQueue at it.
	ClusterQueueManagedByPortal bool

	// Cohort is the Kueue cohort of the portal's ClusterQueues. Without one a
	// team can neither lend nor borrow.
	Cohort string

	// PriorityClasses are the cluster's workload priority classes. Nil means
	// DefaultPriorityClasses.
	PriorityClasses []PriorityClass

	// DefaultLimits fill in the requests of containers that name none, so
	// that the namespace's ResourceQuota (which requires cpu and memory
	// requests) does not reject them. Only default requests: see
	// ContainerDefaults.
	DefaultLimits ContainerDefaults

	// StudioExecutionRoleGroupFormat is the Kubernetes group of the team's
	// SageMaker Studio execution role (its EKS access entry lists it); %s is
	// the team. Studio shows the team's tasks through it.
	StudioExecutionRoleGroupFormat string

	// KubernetesGroups are the groups of the team's people, as the EKS access
	// entries (or the identity provider) give them.
	KubernetesGroups KubernetesGroups

	// Accelerators is what one instance of each type brings. Nil means
	// DefaultAccelerators. A guaranteed instance type missing here is an
	// error: its quota cannot be computed.
	Accelerators map[string]ResourcesPerInstance

	// InstanceTypes are the ml.* types a contract may name. Nil means every
	// HyperPod cluster instance type the SDK knows (ClusterInstanceTypes)
	// that Accelerators describes. Each must be in Accelerators.
	InstanceTypes []string

	// MaxPodsPerInstance bounds the pods quota: pods per guaranteed instance.
	MaxPodsPerInstance int

	// PodIdentityAgentCIDRs are the addresses of the EKS Pod Identity agent,
	// which the workloads' ServiceAccount needs for AWS credentials once
	// egress is denied by default. Nil means DefaultPodIdentityAgentCIDRs;
	// empty means no such NetworkPolicy.
	PodIdentityAgentCIDRs []string

	// ObservabilityNamespaces are the namespaces whose pods may scrape the
	// team's pods (NetworkPolicy NamePolicyObservability): once ingress is
	// denied by default, metrics collectors elsewhere see nothing. Nil
	// means DefaultObservabilityNamespaces; empty means no such policy.
	ObservabilityNamespaces []string

	// ReservedNamespaces are namespaces no contract may name, on top of the
	// built-in system namespaces (workflow.ReservedNamespace: kube-*,
	// kueue-system, aws-hyperpod, amazon-*, cert-manager,
	// jupyter-k8s-shared, ...), which always apply. An entry ending in '*'
	// is a prefix. Validation refuses them on the form, and BuildPlan
	// refuses a plan for one, so approval and the worker do too.
	ReservedNamespaces []string

	// OnRevoke is what revocation does with the team namespace once the
	// team's access, queues, quotas and network allowances are gone:
	// RevokeLock (the default) keeps it locked, RevokeDelete deletes it
	// with everything in it.
	OnRevoke RevokeMode

	// AdmissionMode is how the cluster enforces the contracts' admission
	// rules (admission.go): AdmissionWarn (the default), AdmissionAudit or
	// AdmissionDeny, the validationActions [Warn], [Audit] or [Deny] of
	// the binding every team namespace of the cluster is labelled for.
	// Warn is the default because turning the rules on for a cluster that
	// already runs teams must not stop their work: jobs submitted without
	// the queue label, with a class the contract does not list, or as bare
	// pods keep running while their submitters see a warning on every
	// kubectl call (and namespaces provisioned before the rules existed get
	// their parameter object at their next re-apply); an admin turns on
	// deny once the warnings stop.
	AdmissionMode AdmissionMode

	// ExceptionMaxDays is the longest exception (workflow/exception.go)
	// the contract's exception owner or an admin may grant a connection
	// on this cluster, in days. 0 means workflow.DefaultExceptionMaxDays.
	ExceptionMaxDays int

	// AWS are the settings of the plan's AWS half (compute quota, Studio,
	// EKS access entries, Pod Identity). Off unless AWS.Enabled.
	AWS awsprov.Settings

	// Slurm is how Slurm connections are set up (slurm.go).
	Slurm SlurmSettings
}

// PriorityClass is one of the cluster's priority classes: a class of the
// SageMaker cluster scheduler config, which is the Kueue
// WorkloadPriorityClass KueuePriorityClass(Name) on the cluster.
type PriorityClass struct {
	Name  string
	Value int32
}

// ContainerDefaults become the namespace's LimitRange: the requests of a
// container that sets none. Empty fields are left out.
//
// LimitCPU and LimitMemory must stay empty (Check refuses them): the
// LimitRange admission gives a container without a limit the default limit
// even when it requests more, and the API server then rejects the pod
// (request above limit). GPU training containers request hundreds of GiB
// without a limit, so any fixed default limit rejects some of them. The
// ResourceQuota constrains requests only, so no limit is needed for it.
type ContainerDefaults struct {
	RequestCPU    string
	RequestMemory string
	LimitCPU      string
	LimitMemory   string
}

// KubernetesGroups are format strings; %s is the team.
type KubernetesGroups struct {
	ViewerGroupFormat    string
	SubmitterGroupFormat string
}

// ResourcesPerInstance is what one instance of a type brings to a quota.
//
// Accelerators in AcceleratorResource is the one unit of the instance type
// everywhere: the plan's quotas, the usage collector's pod requests and node
// capacity, the teams' guarantees and the chargeback's per-instance divisor
// all count in it (GPUs for nvidia.com/gpu, whole Neuron devices for
// aws.amazon.com/neuron).
type ResourcesPerInstance struct {
	// Accelerators is the number of accelerator devices, counted in
	// AcceleratorResource (default nvidia.com/gpu).
	Accelerators        int
	AcceleratorResource string
	// NeuronCoresPerDevice is, for a Neuron instance type, the physical
	// NeuronCores of one device as the Neuron documentation gives them;
	// 0 when not established. The statement's Neuron-core hours are the
	// device-hours times it. (The collector converts a pod's
	// aws.amazon.com/neuroncore request to devices with the node's own
	// ratio instead: on Trainium2 the device plugin's core count may follow
	// the logical NeuronCore configuration, which the documentation leaves
	// to each cluster.)
	NeuronCoresPerDevice int
	CPU                  int // vCPUs
	MemoryGiB            int
}

// AccelUnit is what one instance carries in the unit its usage is counted
// in: Accelerators, whether they are whole Neuron devices
// (IsNeuronDevices), and NeuronCoresPerDevice (usage.InstanceSpec: money
// reads the table through it).
func (r ResourcesPerInstance) AccelUnit() (count int, neuronDevices bool, neuronCoresPerDevice int) {
	return r.Accelerators, IsNeuronDevices(r.AcceleratorResource), r.NeuronCoresPerDevice
}

// AcceleratorTable is the settings' table of what one instance of each
// type carries, DefaultAccelerators when they name none.
func (s ClusterSettings) AcceleratorTable() map[string]ResourcesPerInstance {
	if s.Accelerators == nil {
		return DefaultAccelerators
	}
	return s.Accelerators
}

// Defaults.
const (
	DefaultNamespacePrefix        = "hyperpod-ns-"
	DefaultClusterQueueNameFormat = "hyperpod-ns-%s-clusterqueue"
	DefaultStudioGroupFormat      = "studio-%s"
	DefaultViewerGroupFormat      = "team-%s-viewers"
	DefaultSubmitterGroupFormat   = "team-%s-submitters"
	// DefaultMaxPodsPerInstance is the EKS default maximum of pods per node.
	DefaultMaxPodsPerInstance = 110

	ResourceNvidiaGPU = "nvidia.com/gpu"
	// The Neuron device plugin registers aws.amazon.com/neuroncore ("used
	// for allocating individual Neuron cores") and aws.amazon.com/neuron
	// ("used for allocating entire Neuron devices ... all cores belonging
	// to the device"): https://awsdocs-neuron.readthedocs-hosted.com/en/latest/containers/tutorials/k8s-neuron-device-plugin.html.
	// Up to Neuron release 2.19 the plugin also registered
	// aws.amazon.com/neurondevice, a device count too ("Neuron release 2.19
	// will be the last release to include resource name 'neurondevice'",
	// https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/announcements/neuron2.x/announce-eos-neurondevice.html;
	// "Starting with Neuron release 2.20, Neuron no longer supports
	// resource name 'neurondevice'", .../announce-no-support-device-version.html):
	// such a node's capacity lists neuron 1, neuroncore 2, neurondevice 1
	// (github:aws-samples/eks-workshop-v2 website/docs/aiml/inferentia/index.md).
	// HyperPod stays on that name: its Helm chart installs
	// public.ecr.aws/neuron/neuron-device-plugin:2.19.16.0
	// (github:aws/sagemaker-hyperpod-cli@011ca927123e02b35a399935bbb3ab1905fe33c7
	// helm_chart/HyperPodHelmChart/charts/neuron-device-plugin/templates/k8s-neuron-device-plugin.yaml),
	// its CLI asks for Trainium in aws.amazon.com/neurondevice, 16 per
	// ml.trn1.32xlarge, ml.trn1n.32xlarge and ml.trn2.48xlarge
	// (src/sagemaker/hyperpod/cli/constants/command_constants.py
	// NEURON_RESOURCE_LIMIT_KEY; src/sagemaker/hyperpod/training/quota_allocation_util.py),
	// reads a node's Neuron devices from its allocatable
	// aws.amazon.com/neurondevice (src/sagemaker/hyperpod/cli/commands/cluster.py),
	// and a task governance ClusterQueue shows aws.amazon.com/neurondevice
	// among its covered resources (flavorsUsage in
	// examples/end_to_end_walkthrough/03-task-governance/00-task-governance.md).
	//
	// | resource                     | a node advertises it          | jobs request it               |
	// | ---------------------------- | ----------------------------- | ----------------------------- |
	// | aws.amazon.com/neuron        | every device plugin           | Neuron documentation's jobs   |
	// | aws.amazon.com/neurondevice  | plugins up to 2.19 (HyperPod) | the HyperPod CLI's jobs       |
	// | aws.amazon.com/neuroncore    | every device plugin           | jobs placing single cores     |
	//
	// So the portal's ClusterQueue and ResourceQuota cover both device
	// names, each with the whole guarantee (acceleratorNames in plan.go): a
	// job asking for either is admitted. (Kueue counts the two separately,
	// as the kubelet of a 2.19 node does: a team that mixes both names can
	// hold up to twice its guarantee in devices; the plan warns.)
	// aws.amazon.com/neuroncore is not covered: its count per device
	// depends on the instance type and the logical core setting; a job
	// asking for cores is not admitted by the portal's queue. The usage
	// collector counts all three (converting cores with the node's ratio).
	//
	// ResourceNeuron counts Trainium/Inferentia devices; it is the unit of
	// the Neuron instance types (ResourcesPerInstance).
	ResourceNeuron       = "aws.amazon.com/neuron"
	ResourceNeuronDevice = "aws.amazon.com/neurondevice"
	ResourceNeuronCore   = "aws.amazon.com/neuroncore"
)

// IsNeuronDevices reports whether resource counts whole Neuron devices
// (aws.amazon.com/neuron or aws.amazon.com/neurondevice).
func IsNeuronDevices(resource string) bool {
	return resource == ResourceNeuron || resource == ResourceNeuronDevice
}

// DefaultContainerDefaults: requests enough for a sidecar or a small tool,
// and no default limits (see ContainerDefaults): a container that names
// none is not throttled, and one that requests 200Gi without a limit is
// admitted.
var DefaultContainerDefaults = ContainerDefaults{
	RequestCPU:    "500m",
	RequestMemory: "1Gi",
}

// DefaultPriorityClasses are the classes a cluster starts with: serving
// first, then interactive work, then batch work.
var DefaultPriorityClasses = []PriorityClass{
	{Name: "inference", Value: 1000},
	{Name: "interactive", Value: 800},
	{Name: "training", Value: 500},
	{Name: "fine-tuning", Value: 400},
	{Name: "experiment", Value: 100},
}

// DefaultPodIdentityAgentCIDRs are the EKS Pod Identity agent's link-local
// addresses (IPv4 and IPv6); it serves credentials on port 80.
var DefaultPodIdentityAgentCIDRs = []string{"169.254.170.23/32", "fd00:ec2::23/128"}

// DefaultObservabilityNamespaces are where AWS's collectors run:
//   - hyperpod-observability: "All the pods that the SageMaker HyperPod
//     observability add-on creates are in the hyperpod-observability
//     namespace" (https://docs.aws.amazon.com/sagemaker/latest/dg/hyperpod-observability-addon-troubleshooting.html,
//     "Review all observability pods"); its collectors scrape task and
//     inference metrics from the pods for Amazon Managed Prometheus;
//   - amazon-cloudwatch: the CloudWatch agent of the Amazon CloudWatch
//     Observability EKS add-on (Container Insights) runs there ("Verify
//     that the CloudWatch agent pods are running in the amazon-cloudwatch
//     namespace", https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/container-insights-eks-classic-setup.html,
//     step 5).
//
// A self-managed Prometheus runs wherever it was installed: add its
// namespace in the settings.
var DefaultObservabilityNamespaces = []string{"hyperpod-observability", "amazon-cloudwatch"}

// HyperPod's training operator runs in namespace aws-hyperpod, its pods
// labelled hp-training-control-plane (github:aws/sagemaker-hyperpod-cli,
// src/sagemaker/hyperpod/training/hyperpod_pytorch_job.py:
// TRAINING_OPERATOR_NAMESPACE, TRAINING_OPERATOR_LABEL, used as a label
// selector to find the operator pod). The operator talks to the HyperPod
// elastic agent inside each training pod ("communicates with the HyperPod
// training operator", https://pypi.org/project/hyperpod-elastic-agent/),
// so a default-deny namespace must let the two reach each other.
const (
	TrainingOperatorNamespace = "aws-hyperpod"
	TrainingOperatorLabel     = "hp-training-control-plane"
)

// PodIdentityAgentPort is the port the EKS Pod Identity agent serves on.
const PodIdentityAgentPort = 80

// DefaultAccelerators covers the accelerated and CPU HyperPod instance
// types teams share a cluster for, with the figures AWS publishes for each
// instance type (vCPUs, memory, accelerator devices). Every key is a
// ClusterInstanceTypes value (checked by a test).
var DefaultAccelerators = map[string]ResourcesPerInstance{
	"ml.p4d.24xlarge":       gpu(8, 96, 1152),  // 8 A100 40 GB
	"ml.p4de.24xlarge":      gpu(8, 96, 1152),  // 8 A100 80 GB
	"ml.p5.4xlarge":         gpu(1, 16, 256),   // 1 H100
	"ml.p5.48xlarge":        gpu(8, 192, 2048), // 8 H100
	"ml.p5e.48xlarge":       gpu(8, 192, 2048), // 8 H200
	"ml.p5en.48xlarge":      gpu(8, 192, 2048), // 8 H200
	"ml.p6-b200.48xlarge":   gpu(8, 192, 2048), // 8 B200
	"ml.p6e-gb200.36xlarge": gpu(4, 144, 960),  // 4 B200 (GB200 superchips)
	// Trainium: 16 devices per instance. Trn1/Trn1n: 16 Trainium chips,
	// each "2 x NeuronCore-v2"
	// (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/arch/neuron-hardware/trainium.html).
	// Trn2: "A trn2.48xlarge has 16 Trainium2 chips with eight physical
	// NeuronCores" each, combined by default into four logical cores per
	// chip (LNC=2) (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/training/best-practices.html).
	"ml.trn1.32xlarge":  neuron(16, 2, 128, 512),
	"ml.trn1n.32xlarge": neuron(16, 2, 128, 512),
	"ml.trn2.48xlarge":  neuron(16, 8, 192, 2048),
	// A10G
	"ml.g5.xlarge": gpu(1, 4, 16), "ml.g5.2xlarge": gpu(1, 8, 32), "ml.g5.4xlarge": gpu(1, 16, 64),
	"ml.g5.8xlarge": gpu(1, 32, 128), "ml.g5.12xlarge": gpu(4, 48, 192), "ml.g5.16xlarge": gpu(1, 64, 256),
	"ml.g5.24xlarge": gpu(4, 96, 384), "ml.g5.48xlarge": gpu(8, 192, 768),
	// L4
	"ml.g6.xlarge": gpu(1, 4, 16), "ml.g6.2xlarge": gpu(1, 8, 32), "ml.g6.4xlarge": gpu(1, 16, 64),
	"ml.g6.8xlarge": gpu(1, 32, 128), "ml.g6.12xlarge": gpu(4, 48, 192), "ml.g6.16xlarge": gpu(1, 64, 256),
	"ml.g6.24xlarge": gpu(4, 96, 384), "ml.g6.48xlarge": gpu(8, 192, 768),
	// L40S
	"ml.g6e.xlarge": gpu(1, 4, 32), "ml.g6e.2xlarge": gpu(1, 8, 64), "ml.g6e.4xlarge": gpu(1, 16, 128),
	"ml.g6e.8xlarge": gpu(1, 32, 256), "ml.g6e.12xlarge": gpu(4, 48, 384), "ml.g6e.16xlarge": gpu(1, 64, 512),
	"ml.g6e.24xlarge": gpu(4, 96, 768), "ml.g6e.48xlarge": gpu(8, 192, 1536),
	// CPU only
	"ml.c5.large": cpu(2, 4), "ml.c5.xlarge": cpu(4, 8), "ml.c5.2xlarge": cpu(8, 16), "ml.c5.4xlarge": cpu(16, 32),
	"ml.c5.9xlarge": cpu(36, 72), "ml.c5.12xlarge": cpu(48, 96), "ml.c5.18xlarge": cpu(72, 144), "ml.c5.24xlarge": cpu(96, 192),
	"ml.m5.large": cpu(2, 8), "ml.m5.xlarge": cpu(4, 16), "ml.m5.2xlarge": cpu(8, 32), "ml.m5.4xlarge": cpu(16, 64),
	"ml.m5.8xlarge": cpu(32, 128), "ml.m5.12xlarge": cpu(48, 192), "ml.m5.16xlarge": cpu(64, 256), "ml.m5.24xlarge": cpu(96, 384),
	"ml.t3.medium": cpu(2, 4), "ml.t3.large": cpu(2, 8), "ml.t3.xlarge": cpu(4, 16), "ml.t3.2xlarge": cpu(8, 32),
}

func gpu(n, vcpu, gib int) ResourcesPerInstance {
	return ResourcesPerInstance{Accelerators: n, AcceleratorResource: ResourceNvidiaGPU, CPU: vcpu, MemoryGiB: gib}
}

func neuron(n, coresPerDevice, vcpu, gib int) ResourcesPerInstance {
	return ResourcesPerInstance{Accelerators: n, AcceleratorResource: ResourceNeuron, NeuronCoresPerDevice: coresPerDevice, CPU: vcpu, MemoryGiB: gib}
}

func cpu(vcpu, gib int) ResourcesPerInstance { return ResourcesPerInstance{CPU: vcpu, MemoryGiB: gib} }

// DefaultClusterSettings are the settings of a cluster run by HyperPod task
// governance: its namespace and queue names, ClusterQueues managed by the
// HyperPod console.
func DefaultClusterSettings() ClusterSettings {
	return ClusterSettings{}.withDefaults()
}

// WithDefaults returns s with every empty field set to its default, as
// BuildPlan sees it.
func (s ClusterSettings) WithDefaults() ClusterSettings { return s.withDefaults() }

// withDefaults returns s with every empty field set to its default. The
// maps and slices it returns are copies: a plan never aliases settings.
func (s ClusterSettings) withDefaults() ClusterSettings {
	if s.NamespacePrefix == "" {
		s.NamespacePrefix = DefaultNamespacePrefix
	}
	if s.ClusterQueueNameFormat == "" {
		s.ClusterQueueNameFormat = DefaultClusterQueueNameFormat
	}
	if s.PriorityClasses == nil {
		s.PriorityClasses = DefaultPriorityClasses
	}
	s.PriorityClasses = slices.Clone(s.PriorityClasses)
	if s.DefaultLimits == (ContainerDefaults{}) {
		s.DefaultLimits = DefaultContainerDefaults
	}
	if s.StudioExecutionRoleGroupFormat == "" {
		s.StudioExecutionRoleGroupFormat = DefaultStudioGroupFormat
	}
	if s.KubernetesGroups.ViewerGroupFormat == "" {
		s.KubernetesGroups.ViewerGroupFormat = DefaultViewerGroupFormat
	}
	if s.KubernetesGroups.SubmitterGroupFormat == "" {
		s.KubernetesGroups.SubmitterGroupFormat = DefaultSubmitterGroupFormat
	}
	if s.Accelerators == nil {
		s.Accelerators = DefaultAccelerators
	}
	s.Accelerators = maps.Clone(s.Accelerators)
	for t, r := range s.Accelerators {
		if r.Accelerators > 0 && r.AcceleratorResource == "" {
			r.AcceleratorResource = ResourceNvidiaGPU
			s.Accelerators[t] = r
		}
	}
	if s.InstanceTypes == nil {
		for _, t := range ClusterInstanceTypes() {
			if _, ok := s.Accelerators[t]; ok {
				s.InstanceTypes = append(s.InstanceTypes, t)
			}
		}
	}
	s.InstanceTypes = slices.Clone(s.InstanceTypes)
	if s.MaxPodsPerInstance == 0 {
		s.MaxPodsPerInstance = DefaultMaxPodsPerInstance
	}
	if s.PodIdentityAgentCIDRs == nil {
		s.PodIdentityAgentCIDRs = DefaultPodIdentityAgentCIDRs
	}
	s.PodIdentityAgentCIDRs = slices.Clone(s.PodIdentityAgentCIDRs)
	if s.ObservabilityNamespaces == nil {
		s.ObservabilityNamespaces = DefaultObservabilityNamespaces
	}
	s.ObservabilityNamespaces = slices.Clone(s.ObservabilityNamespaces)
	if s.OnRevoke == "" {
		s.OnRevoke = RevokeLock
	}
	if s.AdmissionMode == "" {
		s.AdmissionMode = AdmissionWarn
	}
	return s
}

// check reports settings that cannot produce a valid plan. Settings come
// from configuration, so these are configuration errors, not contract ones.
// Check reports whether BuildPlan would refuse these settings, so that the
// portal stops at start on a bad settings file rather than at the first job.
func (s ClusterSettings) Check() error { return s.withDefaults().check() }

func (s ClusterSettings) check() error {
	if err := s.AWS.WithDefaults().Check(); err != nil {
		return fmt.Errorf("settings: aws: %w", err)
	}
	for _, f := range []struct{ name, format string }{
		{"ClusterQueueNameFormat", s.ClusterQueueNameFormat},
		{"StudioExecutionRoleGroupFormat", s.StudioExecutionRoleGroupFormat},
		{"KubernetesGroups.ViewerGroupFormat", s.KubernetesGroups.ViewerGroupFormat},
		{"KubernetesGroups.SubmitterGroupFormat", s.KubernetesGroups.SubmitterGroupFormat},
	} {
		if strings.Count(f.format, "%s") != 1 || strings.Count(f.format, "%") != 1 {
			return fmt.Errorf("settings: %s %q must contain %%s (the team) once and no other %% verb", f.name, f.format)
		}
	}
	seen := map[string]bool{}
	for _, pc := range s.PriorityClasses {
		// A scheduler-config class name (workflow.MaxPriorityClassLen) whose
		// Kueue name is a valid label value.
		if errs := validation.IsDNS1123Label(pc.Name); len(errs) > 0 || len(pc.Name) > workflow.MaxPriorityClassLen || seen[pc.Name] {
			return fmt.Errorf("settings: priority class %q must be a name of at most %d lower-case letters, digits and '-', listed once", pc.Name, workflow.MaxPriorityClassLen)
		}
		if errs := validation.IsValidLabelValue(s.KueuePriorityClass(pc.Name)); len(errs) > 0 {
			return fmt.Errorf("settings: priority class %q: its Kueue class %s is not a label value: %s", pc.Name, s.KueuePriorityClass(pc.Name), strings.Join(errs, "; "))
		}
		seen[pc.Name] = true
	}
	for _, ns := range s.ObservabilityNamespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("settings: ObservabilityNamespaces: %q is not a namespace name: %s", ns, strings.Join(errs, "; "))
		}
	}
	if s.Cohort != "" {
		if errs := validation.IsDNS1123Subdomain(s.Cohort); len(errs) > 0 {
			return fmt.Errorf("settings: cohort %q: %s", s.Cohort, strings.Join(errs, "; "))
		}
	}
	for _, q := range []struct{ name, v string }{
		{"DefaultLimits.RequestCPU", s.DefaultLimits.RequestCPU},
		{"DefaultLimits.RequestMemory", s.DefaultLimits.RequestMemory},
		{"DefaultLimits.LimitCPU", s.DefaultLimits.LimitCPU},
		{"DefaultLimits.LimitMemory", s.DefaultLimits.LimitMemory},
	} {
		if q.v == "" {
			continue
		}
		if _, err := resource.ParseQuantity(q.v); err != nil {
			return fmt.Errorf("settings: %s %q: %w", q.name, q.v, err)
		}
	}
	if d := s.DefaultLimits; d.LimitCPU != "" || d.LimitMemory != "" {
		return fmt.Errorf("settings: DefaultLimits.LimitCPU and DefaultLimits.LimitMemory must be empty: a default limit makes the API server reject " +
			"every container that requests more without a limit (GPU training pods request hundreds of GiB); set default requests only")
	}
	for t, r := range s.Accelerators {
		if r.Accelerators < 0 || r.CPU < 0 || r.MemoryGiB < 0 {
			return fmt.Errorf("settings: accelerators of %s must not be negative: %+v", t, r)
		}
	}
	for _, t := range s.InstanceTypes {
		if _, ok := s.Accelerators[t]; !ok {
			return fmt.Errorf("settings: instance type %s has no accelerators entry: its quota cannot be computed", t)
		}
	}
	if !s.ClusterQueueManagedByPortal && (s.NamespacePrefix != HyperPodNamespacePrefix || s.ClusterQueueNameFormat != DefaultClusterQueueNameFormat) {
		return fmt.Errorf("settings: HyperPod task governance names the team namespace %s<team> and ClusterQueue %s itself; "+
			"NamespacePrefix %q and ClusterQueueNameFormat %q can differ only when the portal manages the ClusterQueues",
			HyperPodNamespacePrefix, DefaultClusterQueueNameFormat, s.NamespacePrefix, s.ClusterQueueNameFormat)
	}
	for _, e := range s.ReservedNamespaces {
		if msg := checkReservedEntry(e); msg != "" {
			return fmt.Errorf("settings: ReservedNamespaces: %q %s", e, msg)
		}
	}
	if s.OnRevoke != RevokeLock && s.OnRevoke != RevokeDelete {
		return fmt.Errorf("settings: OnRevoke %q must be %q or %q", s.OnRevoke, RevokeLock, RevokeDelete)
	}
	if !s.AdmissionMode.Valid() {
		return fmt.Errorf("settings: AdmissionMode %q must be %q, %q or %q", s.AdmissionMode, AdmissionWarn, AdmissionAudit, AdmissionDeny)
	}
	if s.ExceptionMaxDays < 0 || s.ExceptionMaxDays > MaxExceptionDays {
		return fmt.Errorf("settings: ExceptionMaxDays %d must be 0 (the default, %d) to %d", s.ExceptionMaxDays, workflow.DefaultExceptionMaxDays, MaxExceptionDays)
	}
	if s.MaxPodsPerInstance < 0 {
		return fmt.Errorf("settings: MaxPodsPerInstance must not be negative")
	}
	return nil
}

// AllowedInstanceTypes are the instance types a contract may name on this
// cluster: InstanceTypes, or its default.
func (s ClusterSettings) AllowedInstanceTypes() []string { return s.withDefaults().InstanceTypes }

// KueuePriorityClass is the name of the Kueue WorkloadPriorityClass that
// the configured priority class name has on the cluster: what a job's
// kueue.x-k8s.io/priority-class label must say. HyperPod task governance
// names it name+"-priority" (workflow.PriorityClassSuffix); when the portal
// manages the ClusterQueues it creates the WorkloadPriorityClasses under the
// same names, so a snippet and a check are right in both modes.
func (s ClusterSettings) KueuePriorityClass(name string) string {
	return name + workflow.PriorityClassSuffix
}

// TrainingClass is the priority class a training job of a contract that
// allows classes allowed is labelled with (the members' submit snippets):
// the class named training when the contract allows it (or allows none:
// the cluster's default); else the allowed class of the highest value not
// above the cluster's training class (below its top, serving, class when
// it defines no training class), so that the job preempts neither the
// team's serving nor its interactive work; else the allowed class of the
// lowest value. Values are the cluster's (PriorityClasses); a class it
// does not define counts as 0.
func (s ClusterSettings) TrainingClass(allowed []string) string {
	training := string(workflow.WorkloadTraining)
	if len(allowed) == 0 || slices.Contains(allowed, training) {
		return training
	}
	classes := s.withDefaults().PriorityClasses
	value := func(name string) (int32, bool) {
		i := slices.IndexFunc(classes, func(pc PriorityClass) bool { return pc.Name == name })
		if i < 0 {
			return 0, false
		}
		return classes[i].Value, true
	}
	ceiling, ok := value(training)
	if !ok && len(classes) > 0 {
		ceiling = slices.MaxFunc(classes, func(a, b PriorityClass) int { return cmp.Compare(a.Value, b.Value) }).Value - 1
	}
	byValue := func(a, b string) int {
		va, _ := value(a)
		vb, _ := value(b)
		return cmp.Compare(va, vb)
	}
	below := slices.DeleteFunc(slices.Clone(allowed), func(pc string) bool { v, _ := value(pc); return v > ceiling })
	if len(below) > 0 {
		return slices.MaxFunc(below, byValue)
	}
	return slices.MinFunc(allowed, byValue)
}

// team substitutes the team into a checked format.
func team(format, t string) string { return strings.Replace(format, "%s", t, 1) }

// ClusterQueueName is the Kueue ClusterQueue of team t on this cluster
// (ClusterQueueNameFormat, the default's when unset), as plans name it.
func (s ClusterSettings) ClusterQueueName(t string) string {
	return team(s.withDefaults().ClusterQueueNameFormat, t)
}

// checkReservedEntry says what is wrong with a reserved_namespaces entry:
// a namespace name, or a prefix of one followed by '*'.
func checkReservedEntry(e string) string {
	if p, ok := strings.CutSuffix(e, "*"); ok {
		if p == "" || !namespacePrefixRe.MatchString(p) {
			return "is not a namespace prefix: lower-case letters, digits and '-' before the '*', e.g. platform-*"
		}
		return ""
	}
	if errs := validation.IsDNS1123Label(e); len(errs) > 0 {
		return "is not a namespace name: " + strings.Join(errs, "; ")
	}
	return ""
}
