package provision

import (
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/arn"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

func TestParseClusterSettings(t *testing.T) {
	s, err := ParseClusterSettings([]byte(`
namespace_prefix: ml-
cluster_queue:
  managed_by_portal: true
  name_format: "%s-cq"
  cohort: shared
priority_classes:
  - {name: urgent, value: 900}
  - {name: batch, value: 100}
accelerators:
  ml.g6.8xlarge: {accelerators: 1, resource: nvidia.com/gpu, vcpu: 32, memory_gib: 128}
  ml.p4d.24xlarge: {accelerators: 8, vcpu: 96, memory_gib: 1152}
  ml.trn1.32xlarge: {accelerators: 16, resource: aws.amazon.com/neurondevice, vcpu: 128, memory_gib: 512}
instance_types: [ml.p5.48xlarge, ml.g6.8xlarge]
kubernetes_groups: {studio: "sm-%s", viewers: "%s-view", submitters: "%s-submit"}
max_pods_per_instance: 250
container_defaults: {request_cpu: 250m, request_memory: 512Mi}
pod_identity_agent_cidrs: []
observability_namespaces: [prometheus]
reserved_namespaces: [team-infra, "platform-*"]
admission_mode: deny
slurm: {cluster: hp-slurm, parent_account: portal, user_template: "hp-{local}", preemptable_qos: [scavenger],
  partition_instance_types: {gpu: ml.p5.48xlarge}}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := ClusterSettings{
		NamespacePrefix: "ml-", ClusterQueueManagedByPortal: true, ClusterQueueNameFormat: "%s-cq", Cohort: "shared",
		PriorityClasses:                []PriorityClass{{"urgent", 900}, {"batch", 100}},
		InstanceTypes:                  []string{"ml.p5.48xlarge", "ml.g6.8xlarge"},
		StudioExecutionRoleGroupFormat: "sm-%s", KubernetesGroups: KubernetesGroups{"%s-view", "%s-submit"},
		MaxPodsPerInstance: 250,
	}
	if s.NamespacePrefix != want.NamespacePrefix || s.ClusterQueueManagedByPortal != want.ClusterQueueManagedByPortal ||
		s.ClusterQueueNameFormat != want.ClusterQueueNameFormat || s.Cohort != want.Cohort ||
		!slices.Equal(s.PriorityClasses, want.PriorityClasses) || !slices.Equal(s.InstanceTypes, want.InstanceTypes) ||
		s.StudioExecutionRoleGroupFormat != want.StudioExecutionRoleGroupFormat || s.KubernetesGroups != want.KubernetesGroups ||
		s.MaxPodsPerInstance != want.MaxPodsPerInstance ||
		s.DefaultLimits != (ContainerDefaults{RequestCPU: "250m", RequestMemory: "512Mi"}) || s.PodIdentityAgentCIDRs == nil || len(s.PodIdentityAgentCIDRs) != 0 ||
		!slices.Equal(s.ObservabilityNamespaces, []string{"prometheus"}) ||
		!slices.Equal(s.ReservedNamespaces, []string{"team-infra", "platform-*"}) || s.AdmissionMode != AdmissionDeny {
		t.Errorf("parsed %+v", s)
	}
	if sl := s.Slurm; sl.Cluster != "hp-slurm" || sl.ParentAccount != "portal" || sl.UserTemplate != "hp-{local}" || !slices.Equal(sl.PreemptableQoS, []string{"scavenger"}) ||
		!maps.Equal(sl.PartitionInstanceTypes, map[string]string{"gpu": "ml.p5.48xlarge"}) {
		t.Errorf("slurm = %+v", sl)
	}
	// Accelerator entries change or add to the default table.
	if got := s.Accelerators["ml.g6.8xlarge"]; got != (ResourcesPerInstance{Accelerators: 1, AcceleratorResource: ResourceNvidiaGPU, CPU: 32, MemoryGiB: 128}) {
		t.Errorf("ml.g6.8xlarge = %+v", got)
	}
	// A file counting the same Neuron devices keeps the hardware's cores
	// per device (the statement's Neuron-core hours need them).
	if got := s.Accelerators["ml.trn1.32xlarge"]; got.NeuronCoresPerDevice != 2 || got.AcceleratorResource != ResourceNeuronDevice {
		t.Errorf("ml.trn1.32xlarge = %+v", got)
	}
	if got := s.Accelerators["ml.p5.48xlarge"]; got != DefaultAccelerators["ml.p5.48xlarge"] {
		t.Errorf("the default entries were lost: ml.p5.48xlarge = %+v", got)
	}
	if err := s.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
	// The settings shape the plan.
	c := workflow.ExampleContract()
	c.Namespaces = []string{"ml-red"}
	plan, err := BuildPlan(1, 1, c.Hash(), c, s)
	if err != nil {
		t.Fatal(err)
	}
	if y := plan.YAML(); !strings.Contains(y, "name: red-cq") || !strings.Contains(y, "name: urgent") || !strings.Contains(y, "namespace: ml-red") {
		t.Errorf("the plan does not follow the settings:\n%s", y)
	}

	// An empty file is the defaults; the admission rules warn.
	if s, err := ParseClusterSettings(nil); err != nil || !slices.Equal(s.WithDefaults().InstanceTypes, DefaultClusterSettings().InstanceTypes) ||
		s.WithDefaults().AdmissionMode != AdmissionWarn {
		t.Errorf("empty file: %+v %v", s, err)
	}
}

func TestParseClusterSettingsReportsEveryProblem(t *testing.T) {
	_, err := ParseClusterSettings([]byte(`
namespace_prefix: ML_
cluster_queue:
  name_format: "%s-%d"
  cohort: shared
priority_classes:
  - {name: Urgent, value: 1}
  - {name: batch}
  - {name: batch, value: 2}
accelerators:
  ml.x9.huge: {accelerators: 1, vcpu: 4, memory_gib: 16}
  ml.g6.8xlarge: {accelerators: 0, resource: nvidia.com/gpu, vcpu: 0, memory_gib: 1}
instance_types: [ml.p5.48xlarge, ml.p5.48xlarge, ml.nope, ml.c6i.large]
kubernetes_groups: {viewers: "viewers"}
max_pods_per_instance: 0
container_defaults: {request_cpu: lots}
pod_identity_agent_cidrs: [169.254.170.23]
observability_namespaces: [Not_A_Namespace]
reserved_namespaces: [ok-name, "*", "Bad*", Bad_Name]
admission_mode: Deny
slurm: {cluster: "Hp Slurm", user_template: "{team}", preemptable_qos: ["a b"], partition_instance_types: {cpu: ml.c6i.large}}
`))
	if err == nil {
		t.Fatal("bad settings accepted")
	}
	for _, want := range []string{
		"namespace_prefix", "cluster_queue.name_format", "cluster_queue.cohort: only with managed_by_portal",
		"priority_classes[0].name", "priority_classes[1].value: required", "priority_classes[2].name: \"batch\" is listed twice",
		"accelerators.ml.x9.huge: \"ml.x9.huge\" is not a HyperPod cluster instance type", "accelerators.ml.g6.8xlarge: vcpu and memory_gib must be positive",
		"accelerators.ml.g6.8xlarge.resource: only with accelerators",
		"instance_types[1]: \"ml.p5.48xlarge\" is listed twice", "instance_types[2]: \"ml.nope\" is not a HyperPod cluster instance type",
		"instance_types[3]: \"ml.c6i.large\" has no accelerators entry",
		"kubernetes_groups.viewers", "max_pods_per_instance",
		"container_defaults.request_cpu: \"lots\"", "container_defaults: give both", "pod_identity_agent_cidrs[0]", "observability_namespaces[0]",
		"reserved_namespaces[1]", "reserved_namespaces[2]", "reserved_namespaces[3]",
		"admission_mode: \"Deny\" must be warn, audit or deny",
		"slurm.cluster: \"Hp Slurm\"", "slurm.user_template: \"{team}\" must contain {local}", "slurm.preemptable_qos: \"a b\"",
		"slurm.partition_instance_types.cpu: \"ml.c6i.large\" has no accelerators entry",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not mention %q:\n%v", want, err)
		}
	}
	for _, body := range []string{"surprise: 1\n", "cluster_queue:\n  managed: true\n", "accelerators:\n  ml.p5.48xlarge: {gpus: 8}\n"} {
		if _, err := ParseClusterSettings([]byte(body)); err == nil || !strings.Contains(err.Error(), "unknown field") {
			t.Errorf("%q: %v, want an unknown field error", body, err)
		}
	}
}

// The accelerator table describes only instance types HyperPod clusters
// have (the SDK's enum), and by default a contract may name every type it
// describes.
func TestDefaultInstanceTypesComeFromTheSDK(t *testing.T) {
	known := ClusterInstanceTypes()
	if len(known) < 50 || !slices.Contains(known, "ml.p5.48xlarge") {
		t.Fatalf("ClusterInstanceTypes = %v", known)
	}
	for it, r := range DefaultAccelerators {
		if !slices.Contains(known, it) {
			t.Errorf("DefaultAccelerators has %s, which is not a HyperPod cluster instance type", it)
		}
		if r.CPU <= 0 || r.MemoryGiB <= 0 || (r.Accelerators > 0) != (r.AcceleratorResource != "") {
			t.Errorf("%s: implausible figures %+v", it, r)
		}
	}
	got := DefaultClusterSettings().AllowedInstanceTypes()
	if len(got) != len(DefaultAccelerators) {
		t.Errorf("default instance types %v, want the %d types DefaultAccelerators describes", got, len(DefaultAccelerators))
	}
	// A type without figures cannot be allowed.
	if err := (ClusterSettings{InstanceTypes: []string{"ml.c6i.large"}}).Check(); err == nil || !strings.Contains(err.Error(), "no accelerators entry") {
		t.Errorf("Check with an undescribed type: %v", err)
	}
}

// workflow may not import the SDK (so not aws/arn): its ParseARN must split
// ARNs as the SDK does, and never accept what the SDK refuses.
func TestParseARNAgreesWithTheSDK(t *testing.T) {
	for _, s := range []string{
		"arn:aws:iam::111122223333:role/red-project",
		"arn:aws:iam::111122223333:role/path/to/red",
		"arn:aws-us-gov:sagemaker:us-gov-west-1:111122223333:cluster/a1b2c3d4e5f6",
		"arn:aws-cn:eks:cn-north-1:111122223333:cluster/name:with:colons",
		"arn:aws:s3:::bucket", "arn:aws:iam::111122223333", "arn::iam::1:role/x", "arn:aws::::x",
		"ARN:aws:iam::1:role/x", "nope", "", "arn:aws:iam:", "arn:aws:iam::111122223333:",
	} {
		want, sdkErr := arn.Parse(s)
		got, err := workflow.ParseARN(s)
		switch {
		case sdkErr != nil && err == nil:
			t.Errorf("%q: the SDK refuses it (%v), ParseARN accepts it", s, sdkErr)
		case err == nil && (got.Partition != want.Partition || got.Service != want.Service || got.Region != want.Region ||
			got.Account != want.AccountID || got.Resource != want.Resource):
			t.Errorf("%q: ParseARN %+v, the SDK %+v", s, got, want)
		}
	}
}

// docs/configuration.md's example file is a valid settings file.
func TestDocsClusterSettingsExampleParses(t *testing.T) {
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```yaml\n# --cluster-settings: unknown keys are errors\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/configuration.md has no --cluster-settings example")
	}
	s, err := ParseClusterSettings([]byte(example))
	if err != nil {
		t.Fatalf("docs/configuration.md's example: %v", err)
	}
	if err := s.Check(); err != nil {
		t.Errorf("docs/configuration.md's example: %v", err)
	}
}
