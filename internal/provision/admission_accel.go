package provision

import (
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Rule 5 of issue 35: accelerators only on the contract's approved
// instance types, where the workload selects one. The approved types are
// those the contract guarantees (scheduling.guaranteed): the plan makes a
// Kueue ResourceFlavor of each, selecting nodes by the instance-type label
// (resourceFlavors in plan.go). What the rule reads, each from its source:
//
// | what                               | value                            | source |
// | ---------------------------------- | -------------------------------- | ------ |
// | label: a node's instance type      | node.kubernetes.io/instance-type | Kubernetes well-known labels, https://kubernetes.io/docs/reference/labels-annotations-taints/#nodekubernetesioinstance-type (LabelInstanceType; on HyperPod nodes the ml.* type); the HyperPod CLI selects it in nodeSelector (aws/sagemaker-hyperpod-cli hyperpod-pytorch-job-template v1_1 template.py, "node.kubernetes.io/instance-type: {{ instance_type }}") |
// | selection by node affinity         | requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[].matchExpressions[] with operator In | https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#node-affinity |
// | accelerator: NVIDIA GPUs           | nvidia.com/gpu                   | ResourceNvidiaGPU (settings.go); the HyperPod CLI's job template requests it |
// | accelerator: Neuron devices, cores | aws.amazon.com/neuron, aws.amazon.com/neurondevice, aws.amazon.com/neuroncore | ResourceNeuron, ResourceNeuronDevice, ResourceNeuronCore (settings.go, with the Neuron device plugin's and the HyperPod CLI's sources) |
// | a quantity above zero              | quantity(...).isGreaterThan(quantity('0')) | Kubernetes CEL quantity library, https://kubernetes.io/docs/reference/using-api/cel/#kubernetes-quantity-library (k8s.io/apiserver@v0.37.2 pkg/cel/library/quantity.go: isQuantity, quantity, the member isGreaterThan; in the admission environment since v1.28); the HyperPod CLI writes nvidia.com/gpu: "0" for a job without GPUs |
// | a Job's pods                       | spec.template.spec               | batch/v1 JobSpec |
// | a PyTorchJob's pods                | spec.pytorchReplicaSpecs[*].template.spec | Kubeflow training operator PyTorchJobSpec (map of replica type to ReplicaSpec) |
// | a HyperPodPyTorchJob's pods        | spec.replicaSpecs[].template.spec | aws/sagemaker-hyperpod-cli hyperpod-pytorch-job-template v1_1 template.py (replicaSpecs: - name: pod, template: spec:) |
//
// A pod spec "requests an accelerator" when a container or init container
// requests or limits one of those resources above zero (an extended
// resource may be named in limits only: its request defaults to the
// limit). It "selects" instance types with its nodeSelector on the label,
// or with a required node affinity term that matches the label In a list
// of values: every value must be approved, since the scheduler may pick
// any of them. A pod spec that selects no instance type is left to Kueue
// (the flavors of the team's ClusterQueue).
//
// The rule holds what the submitter selects, on CREATE only: Kueue writes
// the node labels of the flavor it assigns into a suspended job's pod
// template when it admits the job (an UPDATE), and the pods the Job
// controller or an operator then makes carry them; that placement is
// Kueue's, under the team's quota, and a borrowed flavor must not make
// the job's own pods fail. So a pod whose ownerReferences name a
// controller is not held either; any other pod is.
//
// The rule reads two keys of the team's parameters, instanceTypes and
// acceleratorResources (acceleratorParams). A parameter object without
// them (written by a plan older than the rule, until its connection is
// re-applied) leaves the rule off for that namespace instead of failing
// every request of it on a missing key.
const (
	// clauseInstanceTypes is the clause rule 5 names (workflow fields.go:
	// "Guaranteed capacity", scheduling.guaranteed).
	clauseInstanceTypes = `"Guaranteed capacity" (scheduling.guaranteed: the approved instance types)`
	// paramInstanceTypes and paramAcceleratorResources are the
	// parameter keys of rule 5: comma-separated lists.
	paramInstanceTypes        = "instanceTypes"
	paramAcceleratorResources = "acceleratorResources"
)

// acceleratorResources are the resource names rule 5 counts as
// accelerators: the documented ones and any other the cluster settings'
// accelerator table names (ResourcesPerInstance.AcceleratorResource),
// sorted.
func acceleratorResources(s ClusterSettings) []string {
	out := []string{ResourceNvidiaGPU, ResourceNeuron, ResourceNeuronDevice, ResourceNeuronCore}
	for _, r := range s.Accelerators {
		if r.Accelerators > 0 && r.AcceleratorResource != "" && !slices.Contains(out, r.AcceleratorResource) {
			out = append(out, r.AcceleratorResource)
		}
	}
	slices.Sort(out)
	return out
}

// approvedInstanceTypes are the instance types the contract guarantees,
// sorted and unique.
func (b *builder) approvedInstanceTypes() []string {
	var out []string
	for _, g := range b.c.Scheduling.Guaranteed {
		if !slices.Contains(out, g.InstanceType) {
			out = append(out, g.InstanceType)
		}
	}
	slices.Sort(out)
	return out
}

// acceleratorParams are rule 5's keys of the team's parameter object.
func (b *builder) acceleratorParams() map[string]string {
	return map[string]string{
		paramInstanceTypes:        strings.Join(b.approvedInstanceTypes(), ","),
		paramAcceleratorResources: strings.Join(acceleratorResources(b.s), ","),
	}
}

// CEL fragments of rule 5. s is a pod spec, read as dyn: the one
// expression is type-checked against every kind the policy matches, and
// only a Pod has its spec at spec, so the templates are reached through
// dyn(object) (a static field path absent from a kind's schema would be a
// type-check warning).
const (
	celAccelContainers = "((has(s.containers) ? s.containers : []) + (has(s.initContainers) ? s.initContainers : []))"
	// celAccelRequests: s requests or limits an accelerator above zero.
	celAccelRequests = celAccelContainers + ".exists(c, has(c.resources) && " +
		"[has(c.resources.requests) ? c.resources.requests : {}, has(c.resources.limits) ? c.resources.limits : {}]" +
		".exists(m, m.exists(r, r in variables.accelResources && isQuantity(string(m[r])) && quantity(string(m[r])).isGreaterThan(quantity('0')))))"
	// celAccelBySelector: the instance type s's nodeSelector names, if not
	// approved; else ''.
	celAccelBySelector = "(has(s.nodeSelector) && '" + LabelInstanceType + "' in s.nodeSelector && " +
		"!(string(s.nodeSelector['" + LabelInstanceType + "']) in variables.accelApproved) ? string(s.nodeSelector['" + LabelInstanceType + "']) : '')"
	celAccelRequired = "s.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
	// celAccelByAffinity: the values of s's required node affinity on the
	// label (operator In) that are not approved, joined; else ''.
	celAccelByAffinity = "(has(s.affinity) && has(s.affinity.nodeAffinity) && has(" + celAccelRequired + ") && has(" + celAccelRequired + ".nodeSelectorTerms) ? " +
		celAccelRequired + ".nodeSelectorTerms.map(t, has(t.matchExpressions) ? " +
		"t.matchExpressions.filter(e, e.key == '" + LabelInstanceType + "' && e.operator == 'In' && has(e.values))" +
		".map(e, e.values.map(v, string(v)).filter(v, !(v in variables.accelApproved)).join(', ')).filter(x, x != '').join(', ') : '')" +
		".filter(x, x != '').join(', ') : '')"
)

// acceleratorRule is rule 5's variables and validation, self-contained
// (every variable it reads is its own, prefixed accel), appended to the
// shared policy's.
func acceleratorRule() ([]admissionregistrationv1.Variable, []admissionregistrationv1.Validation) {
	forbidden := metav1.StatusReasonForbidden
	podSpecs := "!variables.accelHeld ? [] : " +
		"request.resource.group == '' && request.resource.resource == 'pods' ? [dyn(object).spec] : " +
		"request.resource.group == 'batch' && request.resource.resource == 'jobs' ? " +
		"(has(dyn(object).spec.template) && has(dyn(object).spec.template.spec) ? [dyn(object).spec.template.spec] : []) : " +
		"request.resource.group == 'kubeflow.org' && request.resource.resource == 'pytorchjobs' ? " +
		"(has(dyn(object).spec.pytorchReplicaSpecs) ? dyn(object).spec.pytorchReplicaSpecs.map(k, dyn(object).spec.pytorchReplicaSpecs[k])" +
		".filter(r, has(r.template) && has(r.template.spec)).map(r, r.template.spec) : []) : " +
		"request.resource.group == '" + HyperPodJobGroup + "' && request.resource.resource == '" + HyperPodJobResource + "' ? " +
		"(has(dyn(object).spec.replicaSpecs) ? dyn(object).spec.replicaSpecs" +
		".filter(r, has(r.template) && has(r.template.spec)).map(r, r.template.spec) : []) : []"
	vars := []admissionregistrationv1.Variable{
		{Name: "accelHeld", Expression: "request.operation == 'CREATE' && " +
			"'" + paramInstanceTypes + "' in params.data && '" + paramAcceleratorResources + "' in params.data && " +
			"!(request.resource.group == '' && request.resource.resource == 'pods' && has(object.metadata.ownerReferences) && " +
			"object.metadata.ownerReferences.exists(o, has(o.controller) && o.controller))"},
		{Name: "accelApproved", Expression: "variables.accelHeld ? params.data['" + paramInstanceTypes + "'].split(',') : []"},
		{Name: "accelResources", Expression: "variables.accelHeld ? params.data['" + paramAcceleratorResources + "'].split(',') : []"},
		{Name: "accelPodSpecs", Expression: podSpecs},
		// A spec is checked for accelerator requests only when it names an
		// instance type the contract does not approve: a compliant job (no
		// instance type, or an approved one) costs the two cheap lookups,
		// never the walk of its containers' requests and the quantity
		// parsing. Every spec the filter keeps names one, so its line is
		// never empty.
		{Name: "accelUnapproved", Expression: "variables.accelPodSpecs.filter(s, (" + celAccelBySelector + " != '' || " + celAccelByAffinity + " != '') && " + celAccelRequests + ")" +
			".map(s, [" + celAccelBySelector + ", " + celAccelByAffinity + "].filter(x, x != '').join(', '))" +
			".join(', ')"},
	}
	validations := []admissionregistrationv1.Validation{{
		Expression: "variables.accelUnapproved == ''",
		MessageExpression: refusal(clauseInstanceTypes, "a ", celExpr("request.kind.kind"), " in namespace ", celExpr("request.namespace"),
			" requests accelerators on instance type ", celExpr("variables.accelUnapproved"),
			" (label "+LabelInstanceType+"), which the contract does not guarantee; approved: ", celExpr("variables.accelApproved.join(', ')")),
		Message: fmt.Sprintf("the workload requests accelerators on an instance type (%s) the contract does not guarantee", LabelInstanceType),
		Reason:  &forbidden,
	}}
	return vars, validations
}
