package provision

import (
	"fmt"
	"strings"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// AdmissionRule is one of the contract's admission rules in words, for the
// pages that tell the team what the cluster holds it to: the clause a
// refusal names (the same constants as the policy's messages) and what it
// asks, with the contract's values.
type AdmissionRule struct {
	Clause string
	Says   string
}

// ExplainAdmission is what the cluster holds a team to under contract c
// (its approved version) in namespace and LocalQueue queue, on a cluster
// with settings s: the effect of the roll-out mode, and the five rules of
// admissionPolicy with their values. It says what the policy enforces and
// nothing else: the values are the ones admissionParams puts in the team's
// ConfigMap.
func ExplainAdmission(c workflow.Contract, s ClusterSettings, queue string) (mode string, rules []AdmissionRule) {
	switch s.AdmissionMode {
	case AdmissionDeny:
		mode = "The cluster is in deny mode: the API server refuses an object that breaks one of these rules, with a message naming the clause."
	case AdmissionAudit:
		mode = "The cluster is in audit mode: an object that breaks one of these rules is created, and the break is recorded in the API server's audit log for the admins; nothing is refused yet."
	default:
		mode = "The cluster is in warn mode: an object that breaks one of these rules is still created, and kubectl prints a warning naming the clause; the admins may switch to deny mode."
	}
	var classes []string
	for _, pc := range c.Scheduling.PriorityClasses {
		classes = append(classes, s.KueuePriorityClass(pc))
	}
	priorities := "none (leave the label off)"
	if len(classes) > 0 {
		priorities = strings.Join(classes, ", ")
	}
	var types []string
	for _, g := range c.Scheduling.Guaranteed {
		types = append(types, g.InstanceType)
	}
	instances := "none: the contract guarantees no instance type"
	if len(types) > 0 {
		instances = strings.Join(types, ", ")
	}
	rules = []AdmissionRule{
		{clauseQueue, fmt.Sprintf("Every Job, PyTorchJob and HyperPodPyTorchJob carries the label %s: %s, so that Kueue queues it.", KueueQueueLabel, queue)},
		{clausePriority, fmt.Sprintf("Its label %s, if set, is one of: %s. An exception may add a class for a few days.", KueuePriorityClassLabel, priorities)},
		{clauseKinds, "Only these kinds are created in the namespace: " + kindsText(ApprovedKinds(c.WorkloadTypes)) + "."},
		{clauseBarePods, "No pod without an owner (a bare pod): it would bypass the queue. Submit one of the kinds above instead."},
		{clauseInstanceTypes, fmt.Sprintf("A pod or job that requests accelerators and selects an instance type (%s) selects one of: %s.", LabelInstanceType, instances)},
	}
	return mode, rules
}
