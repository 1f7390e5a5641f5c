package provision

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"strings"

	sagemakertypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// ClusterInstanceTypes are the instance types a HyperPod cluster's
// instance groups can have, as the SDK's enum lists them
// (aws-sdk-go-v2 service/sagemaker/types/enums.go, ClusterInstanceType,
// the InstanceType of CreateCluster's ClusterInstanceGroupSpecification).
// Taking them from the SDK keeps the list current with each SDK update
// instead of a hand-written copy.
func ClusterInstanceTypes() []string {
	vals := sagemakertypes.ClusterInstanceType("").Values()
	out := make([]string, 0, len(vals))
	for _, v := range vals {
		out = append(out, string(v))
	}
	return out
}

// clusterFile is the YAML of --cluster-settings. Every key is optional; an
// absent key keeps the default. Unknown keys are errors.
type clusterFile struct {
	// ClusterName: the HyperPod cluster the kubeconfig reaches.
	ClusterName string `json:"cluster_name"`
	// NamespacePrefix: the team namespace is prefix + team.
	NamespacePrefix *string `json:"namespace_prefix"`
	ClusterQueue    struct {
		// ManagedByPortal: the portal creates the team's ClusterQueue (and
		// the shared WorkloadPriorityClasses and ResourceFlavors) itself,
		// instead of HyperPod task governance making it from the compute
		// quota.
		ManagedByPortal bool   `json:"managed_by_portal"`
		NameFormat      string `json:"name_format"`
		Cohort          string `json:"cohort"`
	} `json:"cluster_queue"`
	PriorityClasses  *[]filePriorityClass       `json:"priority_classes"`
	Accelerators     map[string]fileAccelerator `json:"accelerators"`
	InstanceTypes    *[]string                  `json:"instance_types"`
	KubernetesGroups struct {
		Studio     string `json:"studio"`
		Viewers    string `json:"viewers"`
		Submitters string `json:"submitters"`
	} `json:"kubernetes_groups"`
	MaxPodsPerInstance *int `json:"max_pods_per_instance"`
	// ContainerDefaults are the requests of a container that names none
	// (the namespace's LimitRange).
	ContainerDefaults struct {
		RequestCPU    string `json:"request_cpu"`
		RequestMemory string `json:"request_memory"`
	} `json:"container_defaults"`
	// PodIdentityAgentCIDRs: where the EKS Pod Identity agent answers;
	// an empty list drops the NetworkPolicy that lets workloads reach it.
	PodIdentityAgentCIDRs *[]string `json:"pod_identity_agent_cidrs"`
	// ObservabilityNamespaces: namespaces whose collectors may scrape the
	// team's pods (the allow-observability-scrapers NetworkPolicy); an
	// empty list drops that NetworkPolicy.
	ObservabilityNamespaces *[]string `json:"observability_namespaces"`
	// ReservedNamespaces: more namespaces no contract may name (names, or
	// prefixes ending in '*'), added to the built-in system namespaces.
	ReservedNamespaces []string `json:"reserved_namespaces"`
	// AdmissionMode: how the cluster enforces the contracts' admission
	// rules: warn (the default), audit or deny (ClusterSettings.AdmissionMode).
	AdmissionMode string `json:"admission_mode"`
	// ExceptionMaxDays: the longest exception an exception owner or an
	// admin may grant, in days (ClusterSettings.ExceptionMaxDays; 0 or
	// absent: 14).
	ExceptionMaxDays int `json:"exception_max_days"`
	// Slurm: how Slurm connections are set up (SlurmSettings).
	Slurm struct {
		Cluster        string   `json:"cluster"`
		ParentAccount  string   `json:"parent_account"`
		UserTemplate   string   `json:"user_template"`
		PreemptableQoS []string `json:"preemptable_qos"`
		// PartitionInstanceTypes: partition -> instance type, for usage.
		PartitionInstanceTypes map[string]string `json:"partition_instance_types"`
	} `json:"slurm"`
}

type filePriorityClass struct {
	Name  string `json:"name"`
	Value *int32 `json:"value"`
}

type fileAccelerator struct {
	Accelerators int    `json:"accelerators"`
	Resource     string `json:"resource"`
	VCPU         int    `json:"vcpu"`
	MemoryGiB    int    `json:"memory_gib"`
}

// namespacePrefixRe: prefix + team must stay a DNS-1123 label, so the
// prefix is lower-case letters, digits and '-', starting with a letter or
// digit.
var namespacePrefixRe = regexp.MustCompile(`^[a-z0-9][-a-z0-9]*$`)

// ParseClusterSettings reads a --cluster-settings file over the defaults
// and reports every problem at once. Accelerators entries are added to (or
// replace) the default table; the other lists replace their default.
func ParseClusterSettings(b []byte) (ClusterSettings, error) {
	var f clusterFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return ClusterSettings{}, err
	}
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	known := ClusterInstanceTypes()
	var s ClusterSettings

	if f.ClusterName != "" && !workflow.ValidClusterName(f.ClusterName) {
		bad("cluster_name: %q is not a HyperPod cluster name (letters, digits and '-', at most 63 characters)", f.ClusterName)
	}
	s.ClusterName = f.ClusterName

	if f.NamespacePrefix != nil {
		p := *f.NamespacePrefix
		switch {
		case !namespacePrefixRe.MatchString(p):
			bad("namespace_prefix: %q must be lower-case letters, digits and '-', starting with a letter or digit (prefix + team is the namespace name)", p)
		case len(p) > 22:
			// Teams are at most 40 characters; a namespace at most 63.
			bad("namespace_prefix: %q is longer than 22 characters: with a 40-character team name the namespace would pass 63", p)
		}
		s.NamespacePrefix = p
	}

	cq := f.ClusterQueue
	s.ClusterQueueManagedByPortal = cq.ManagedByPortal
	if cq.NameFormat != "" {
		if !oneTeamVerb(cq.NameFormat) {
			bad("cluster_queue.name_format: %q must contain %%s (the team) once and no other %% verb", cq.NameFormat)
		} else if errs := validation.IsDNS1123Subdomain(team(cq.NameFormat, "team")); len(errs) > 0 {
			bad("cluster_queue.name_format: %q does not make a Kubernetes name: %s", cq.NameFormat, strings.Join(errs, "; "))
		}
		s.ClusterQueueNameFormat = cq.NameFormat
	}
	if cq.Cohort != "" {
		if !cq.ManagedByPortal {
			bad("cluster_queue.cohort: only with managed_by_portal: true (HyperPod task governance sets the cohort of the ClusterQueues it makes)")
		}
		if errs := validation.IsDNS1123Subdomain(cq.Cohort); len(errs) > 0 {
			bad("cluster_queue.cohort: %q: %s", cq.Cohort, strings.Join(errs, "; "))
		}
		s.Cohort = cq.Cohort
	}

	if f.PriorityClasses != nil {
		s.PriorityClasses = []PriorityClass{}
		seen := map[string]bool{}
		for i, pc := range *f.PriorityClasses {
			where := fmt.Sprintf("priority_classes[%d]", i)
			if errs := validation.IsDNS1123Label(pc.Name); len(errs) > 0 {
				bad("%s.name: %q must be a DNS-1123 label: %s", where, pc.Name, strings.Join(errs, "; "))
			} else if seen[pc.Name] {
				bad("%s.name: %q is listed twice", where, pc.Name)
			}
			seen[pc.Name] = true
			if pc.Value == nil {
				bad("%s.value: required (the Kueue priority; higher runs first)", where)
				continue
			}
			s.PriorityClasses = append(s.PriorityClasses, PriorityClass{Name: pc.Name, Value: *pc.Value})
		}
	}

	s.Slurm = SlurmSettings{Cluster: f.Slurm.Cluster, ParentAccount: f.Slurm.ParentAccount, UserTemplate: f.Slurm.UserTemplate, PreemptableQoS: f.Slurm.PreemptableQoS,
		PartitionInstanceTypes: f.Slurm.PartitionInstanceTypes}
	for _, e := range s.Slurm.check() {
		bad("slurm.%s", e)
	}

	if f.Accelerators != nil {
		s.Accelerators = DefaultClusterSettings().Accelerators
		for _, t := range slices.Sorted(maps.Keys(f.Accelerators)) {
			a := f.Accelerators[t]
			where := "accelerators." + t
			if !slices.Contains(known, t) {
				bad("%s: %q is not a HyperPod cluster instance type (the SDK's ClusterInstanceType)", where, t)
			}
			if a.Accelerators < 0 || a.VCPU <= 0 || a.MemoryGiB <= 0 {
				bad("%s: vcpu and memory_gib must be positive and accelerators not negative", where)
			}
			switch {
			case a.Accelerators == 0 && a.Resource != "":
				bad("%s.resource: only with accelerators", where)
			case a.Resource != "" && len(validation.IsQualifiedName(a.Resource)) > 0:
				bad("%s.resource: %q is not a Kubernetes resource name such as %s or %s", where, a.Resource, ResourceNvidiaGPU, ResourceNeuron)
			}
			r := ResourcesPerInstance{Accelerators: a.Accelerators, AcceleratorResource: a.Resource, CPU: a.VCPU, MemoryGiB: a.MemoryGiB}
			if d := DefaultAccelerators[t]; IsNeuronDevices(a.Resource) && IsNeuronDevices(d.AcceleratorResource) {
				// Cores per device are the hardware's: a file that counts the
				// same devices keeps them.
				r.NeuronCoresPerDevice = d.NeuronCoresPerDevice
			}
			s.Accelerators[t] = r
		}
	}

	if f.InstanceTypes != nil {
		table := s.Accelerators
		if table == nil {
			table = DefaultAccelerators
		}
		s.InstanceTypes = []string{}
		for i, t := range *f.InstanceTypes {
			where := fmt.Sprintf("instance_types[%d]", i)
			switch _, described := table[t]; {
			case !slices.Contains(known, t):
				bad("%s: %q is not a HyperPod cluster instance type (the SDK's ClusterInstanceType)", where, t)
			case slices.Contains(s.InstanceTypes, t):
				bad("%s: %q is listed twice", where, t)
			case !described:
				bad("%s: %q has no accelerators entry (add one under accelerators: its quota cannot be computed without)", where, t)
			}
			s.InstanceTypes = append(s.InstanceTypes, t)
		}
	}
	// A partition's instance type prices its Slurm usage: it needs the
	// accelerators entry its guarantee is counted in.
	for _, part := range slices.Sorted(maps.Keys(s.Slurm.PartitionInstanceTypes)) {
		accel := s.Accelerators
		if accel == nil {
			accel = DefaultAccelerators
		}
		if t := s.Slurm.PartitionInstanceTypes[part]; accel[t].Accelerators == 0 {
			bad("slurm.partition_instance_types.%s: %q has no accelerators entry (its GPU hours cannot be split by the guarantee or priced)", part, t)
		}
	}

	g := f.KubernetesGroups
	for _, fm := range []struct {
		key string
		v   string
		to  *string
	}{
		{"studio", g.Studio, &s.StudioExecutionRoleGroupFormat},
		{"viewers", g.Viewers, &s.KubernetesGroups.ViewerGroupFormat},
		{"submitters", g.Submitters, &s.KubernetesGroups.SubmitterGroupFormat},
	} {
		if fm.v == "" {
			continue
		}
		if !oneTeamVerb(fm.v) {
			bad("kubernetes_groups.%s: %q must contain %%s (the team) once and no other %% verb", fm.key, fm.v)
		}
		*fm.to = fm.v
	}

	if f.MaxPodsPerInstance != nil {
		if *f.MaxPodsPerInstance <= 0 {
			bad("max_pods_per_instance: must be positive")
		}
		s.MaxPodsPerInstance = *f.MaxPodsPerInstance
	}
	cd := f.ContainerDefaults
	for _, q := range []struct {
		key, v string
		to     *string
	}{{"request_cpu", cd.RequestCPU, &s.DefaultLimits.RequestCPU}, {"request_memory", cd.RequestMemory, &s.DefaultLimits.RequestMemory}} {
		if q.v == "" {
			continue
		}
		if _, err := resource.ParseQuantity(q.v); err != nil {
			bad("container_defaults.%s: %q is not a Kubernetes quantity such as 500m or 1Gi", q.key, q.v)
		}
		*q.to = q.v
	}
	if (cd.RequestCPU == "") != (cd.RequestMemory == "") {
		// An empty ContainerDefaults means the defaults: a half-set one
		// would leave the other request out, and the ResourceQuota then
		// rejects containers that name none.
		bad("container_defaults: give both request_cpu and request_memory, or neither")
	}

	if f.PodIdentityAgentCIDRs != nil {
		s.PodIdentityAgentCIDRs = []string{}
		for i, c := range *f.PodIdentityAgentCIDRs {
			if _, _, err := net.ParseCIDR(c); err != nil {
				bad("pod_identity_agent_cidrs[%d]: %q is not a CIDR such as 169.254.170.23/32", i, c)
			}
			s.PodIdentityAgentCIDRs = append(s.PodIdentityAgentCIDRs, c)
		}
	}
	if f.ObservabilityNamespaces != nil {
		s.ObservabilityNamespaces = []string{}
		for i, ns := range *f.ObservabilityNamespaces {
			if len(validation.IsDNS1123Label(ns)) > 0 {
				bad("observability_namespaces[%d]: %q is not a namespace name", i, ns)
			}
			s.ObservabilityNamespaces = append(s.ObservabilityNamespaces, ns)
		}
	}
	for i, e := range f.ReservedNamespaces {
		if msg := checkReservedEntry(e); msg != "" {
			bad("reserved_namespaces[%d]: %q %s", i, e, msg)
		}
	}
	s.ReservedNamespaces = slices.Clone(f.ReservedNamespaces)
	if f.AdmissionMode != "" {
		if m := AdmissionMode(f.AdmissionMode); !m.Valid() {
			bad("admission_mode: %q must be %s, %s or %s (warn: the API server warns and refuses nothing; audit: it records a violation in the audit log; deny: it refuses the request)",
				f.AdmissionMode, AdmissionWarn, AdmissionAudit, AdmissionDeny)
		}
		s.AdmissionMode = AdmissionMode(f.AdmissionMode)
	}
	if f.ExceptionMaxDays < 0 || f.ExceptionMaxDays > MaxExceptionDays {
		bad("exception_max_days: %d must be 1 to %d (0 or absent: %d)", f.ExceptionMaxDays, MaxExceptionDays, workflow.DefaultExceptionMaxDays)
	}
	s.ExceptionMaxDays = f.ExceptionMaxDays
	if len(errs) > 0 {
		return ClusterSettings{}, errors.Join(errs...)
	}
	return s, nil
}

func oneTeamVerb(format string) bool {
	return strings.Count(format, "%s") == 1 && strings.Count(format, "%") == 1
}
