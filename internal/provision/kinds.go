package provision

import (
	"slices"
	"strings"

	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// WorkloadKind is one Kubernetes kind a team creates to run a workload
// type of its contract.
type WorkloadKind struct {
	Group, Version, Resource, Kind string
	// Extension: served by an aggregated API server, not by the API
	// server's own storage: the API server proxies the request, and the
	// extension server runs its own admission, so the contract's policy
	// (rule 3) never sees it; the submitter Role is what holds it. Such a
	// kind is created only (the extension serves no other verb).
	Extension bool
}

// APIVersion is the kind's group/version ("v1" for the core group).
func (k WorkloadKind) APIVersion() string {
	if k.Group == "" {
		return k.Version
	}
	return k.Group + "/" + k.Version
}

// key is how the team's parameter object lists an approved kind, and how
// the policy's rule 3 names the resource admitted:
// request.resource.group + '/' + request.resource.resource.
func (k WorkloadKind) key() string { return k.Group + "/" + k.Resource }

// workloadTypeKinds is a workload type of the contract, the kinds that
// run it, and the EKS access policy for it.
type workloadTypeKinds struct {
	Type  workflow.WorkloadType
	Kinds []WorkloadKind
	// AccessPolicy: the HyperPod EKS access policy of the type (names
	// under arn:aws:eks::aws:cluster-access-policy/).
	AccessPolicy string
}

// The kinds of each workload type, each named at its source:
//
// | type | kind (group/version, resource) | source |
// | ---- | ------------------------------ | ------ |
// | training, fine-tuning | Job (batch/v1, jobs) | Kubernetes batch/v1; Kueue's default framework batch/job (admission.go's table) |
// | training, fine-tuning | PyTorchJob (kubeflow.org/v1, pytorchjobs) | github:aws/sagemaker-hyperpod-cli src/sagemaker/hyperpod/cli/constants/pytorch_constants.py: PYTORCH_CUSTOM_OBJECT_GROUP "kubeflow.org", PYTORCH_CUSTOM_OBJECT_PLURAL "pytorchjobs", PYTORCH_CUSTOM_OBJECT_VERSION "v1"; the CLI's chart installs it (helm_chart/HyperPodHelmChart/charts/training-operators/crds/pytorchjobs.kubeflow.org-CustomResourceDefinition.yaml) |
// | training, fine-tuning | HyperPodPyTorchJob (sagemaker.amazonaws.com/v1, hyperpodpytorchjobs) | same repository, src/sagemaker/hyperpod/training/hyperpod_pytorch_job.py: TRAINING_GROUP, API_VERSION "v1", PLURAL, KIND |
// | inference | InferenceEndpointConfig (inference.sagemaker.aws.amazon.com/v1, inferenceendpointconfigs) | same repository, src/sagemaker/hyperpod/inference/config/constants.py: INFERENCE_GROUP, INFERENCE_API_VERSION "v1", INFERENCE_ENDPOINT_CONFIG_KIND, INFERENCE_ENDPOINT_CONFIG_PLURAL; the inference operator's CRD helm_chart/HyperPodHelmChart/charts/inference-operator/config/crd/inference.sagemaker.aws.amazon.com_inferenceendpointconfigs.yaml (v1 served and stored) |
// | inference | JumpStartModel (inference.sagemaker.aws.amazon.com/v1, jumpstartmodels) | same file: JUMPSTART_MODEL_KIND, JUMPSTART_MODEL_PLURAL; CRD ..._jumpstartmodels.yaml |
// | interactive-spaces | Workspace (workspace.jupyter.org/v1alpha1, workspaces) | same repository, src/sagemaker/hyperpod/cli/constants/space_constants.py: SPACE_GROUP, SPACE_VERSION "v1alpha1", SPACE_PLURAL; AWS, "Create and manage spaces" (https://docs.aws.amazon.com/sagemaker/latest/dg/create-manage-spaces.html): "apiVersion: workspace.jupyter.org/v1alpha1 kind: Workspace" |
// | interactive-spaces | WorkspaceConnection (connection.workspace.jupyter.org/v1alpha1, workspaceconnections), an extension | same repository, constants/space_access_constants.py: SPACE_ACCESS_GROUP, SPACE_ACCESS_VERSION, SPACE_ACCESS_PLURAL (`hyp create hyp-space-access`); github:jupyter-infra/jupyter-k8s docs: the "Extension API ... serves the Connection APIs under the connection.workspace.jupyter.org API group. It registers as an aggregated API server", verb create only |
//
// Not listed, so refused: the inference operator's
// SageMakerEndpointRegistration, which the operator creates from an
// endpoint (its CRD is in the same chart, but no CLI command or AWS guide
// has users create one); Kueue's other frameworks (MPIJob, RayJob,
// JobSet, ...), which the portal's queue rules do not cover.
//
// The access policies, from AWS's Studio setup ("Restrict task view in
// Studio for EKS clusters", table "What it allows",
// https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-studio-setup-eks.html):
// AmazonSagemakerHyperpodTrainingPolicy ("full access" to
// HyperPodPyTorchJob, Kubeflow PyTorchJob, Jobs), AmazonSagemakerHyperpodInferencePolicy
// (JumpStartModel, InferenceEndpointConfig) and AmazonSagemakerHyperpodSpacePolicy
// (Workspaces, WorkspaceConnection); see awsprov policyAllows.
var workloadKinds = []workloadTypeKinds{
	{workflow.WorkloadTraining, jobKinds, awsprov.PolicyHyperPodTraining},
	{workflow.WorkloadFineTuning, jobKinds, awsprov.PolicyHyperPodTraining},
	{workflow.WorkloadInference, []WorkloadKind{
		{Group: InferenceGroup, Version: "v1", Resource: "inferenceendpointconfigs", Kind: "InferenceEndpointConfig"},
		{Group: InferenceGroup, Version: "v1", Resource: "jumpstartmodels", Kind: "JumpStartModel"},
	}, awsprov.PolicyHyperPodInference},
	{workflow.WorkloadInteractive, []WorkloadKind{
		{Group: SpaceGroup, Version: "v1alpha1", Resource: "workspaces", Kind: "Workspace"},
		{Group: "connection." + SpaceGroup, Version: "v1alpha1", Resource: "workspaceconnections", Kind: "WorkspaceConnection", Extension: true},
	}, awsprov.PolicyHyperPodSpace},
}

// The API groups of HyperPod's inference operator and of its spaces (see
// the table above).
const (
	InferenceGroup = "inference.sagemaker.aws.amazon.com"
	SpaceGroup     = "workspace.jupyter.org"
)

// jobKinds are the job kinds of training and fine-tuning: those Kueue
// manages and the policy's rules 1 and 2 hold to the team's queue
// (admissionJobRules).
var jobKinds = []WorkloadKind{
	{Group: "batch", Version: "v1", Resource: "jobs", Kind: "Job"},
	{Group: "kubeflow.org", Version: "v1", Resource: "pytorchjobs", Kind: "PyTorchJob"},
	{Group: HyperPodJobGroup, Version: "v1", Resource: HyperPodJobResource, Kind: "HyperPodPyTorchJob"},
}

// KindsOf are the kinds of workload type w (nil for an unknown type).
func KindsOf(w workflow.WorkloadType) []WorkloadKind {
	for _, t := range workloadKinds {
		if t.Type == w {
			return t.Kinds
		}
	}
	return nil
}

// ApprovedKinds are the kinds of the approved types, each once, in the
// table's order.
func ApprovedKinds(types []workflow.WorkloadType) []WorkloadKind {
	var out []WorkloadKind
	for _, t := range workloadKinds {
		if !slices.Contains(types, t.Type) {
			continue
		}
		for _, k := range t.Kinds {
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	return out
}

// AllWorkloadKinds are the kinds of every type: what the shared policy
// matches (whatever a team's contract approves).
func AllWorkloadKinds() []WorkloadKind {
	return ApprovedKinds(workflow.AllWorkloadTypes)
}

// TypeAccessPolicies are the EKS access policies of the approved types,
// each once.
func TypeAccessPolicies(types []workflow.WorkloadType) []string {
	var out []string
	for _, t := range workloadKinds {
		if slices.Contains(types, t.Type) && !slices.Contains(out, t.AccessPolicy) {
			out = append(out, t.AccessPolicy)
		}
	}
	return out
}

// typePolicies are the access policies some workload type stands for:
// a grant of one of them follows the contract's types.
func typePolicies() []string { return TypeAccessPolicies(workflow.AllWorkloadTypes) }

// approvedTypesText lists the contract's types for a message ("none"
// when it names none).
func approvedTypesText(types []workflow.WorkloadType) string {
	var out []string
	for _, t := range workflow.AllWorkloadTypes {
		if slices.Contains(types, t) {
			out = append(out, string(t))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ",")
}
