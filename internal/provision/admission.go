package provision

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// The cluster holds each team to its contract with Kubernetes' built-in
// ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, stable and
// on by default since v1.30: https://kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy/,
// "Kubernetes v1.30 [stable]"): no webhook server to run. Three kinds of
// object (issue 35):
//
//   - one ValidatingAdmissionPolicy, NameAdmissionPolicy, shared by every
//     team: the rules, written once in CEL, reading the team's values from
//     a parameter object (spec.paramKind ConfigMap);
//   - one ValidatingAdmissionPolicyBinding per roll-out mode,
//     AdmissionBindingName(mode), shared too: it applies the policy in
//     the namespaces labelled LabelAdmissionMode=<mode> (and not revoked)
//     with validationActions [Warn], [Audit] or [Deny], and looks the
//     parameter object up in the namespace of the object admitted
//     (paramRef.namespace unset: "the namespace of the resource being
//     evaluated for admission is used",
//     https://kubernetes.io/docs/reference/kubernetes-api/policy-resources/validating-admission-policy-binding-v1/,
//     ParamRef);
//   - per team namespace the parameter object, a ConfigMap named
//     NameAdmissionParams carrying the contract's values, and the
//     namespace's LabelAdmissionMode label (the cluster's mode).
//
// Why the bindings are shared and not one per team: the API server never
// runs API-defined admission policies on ValidatingAdmissionPolicies and
// their bindings (k8s.io/apiserver pkg/admission/plugin/policy/generic/
// plugin.go, Dispatch: "Admission config resources (VAP/MAP/VAPB/MAPB) are
// excluded from API-based policies"), so the chart's own policy on the
// portal's writes (deploy/helm/templates/admissionpolicy.yaml) cannot hold
// them in. Fixed names let the chart's ClusterRole name every policy and
// binding the portal may write (resourceNames); a binding per team would
// need write access to every binding on the cluster, the chart's own
// included. The parameter object is a ConfigMap, the simplest paramKind:
// a built-in kind (no CRD to install), namespaced (one per team namespace,
// revoked with the team), and the team's Roles grant no access to
// ConfigMaps (roles in plan.go); the drift check sees an edit of it like
// one of any other plan object.
const (
	// NameAdmissionPolicy names the shared ValidatingAdmissionPolicy.
	NameAdmissionPolicy = "hyperpod-portal-contract"
	// NameAdmissionParams names the parameter ConfigMap in each team
	// namespace.
	NameAdmissionParams = "hyperpod-portal-contract"
	// LabelAdmissionMode on a team namespace is the roll-out mode its
	// binding applies (the cluster settings' AdmissionMode).
	LabelAdmissionMode = "portal.hyperpod.io/admission-mode"
)

// AdmissionBindingName names the shared binding of roll-out mode m.
func AdmissionBindingName(m AdmissionMode) string { return NameAdmissionPolicy + "-" + string(m) }

// AdmissionMode is how the cluster enforces the contract's admission
// rules: the binding's validationActions.
type AdmissionMode string

// The roll-out modes (ValidationAction: "Deny specifies that a validation
// failure results in a denied request. Warn specifies that a validation
// failure is reported to the request client in HTTP Warning headers ...
// Audit specifies that a validation failure is included in the published
// audit event of the request",
// https://kubernetes.io/docs/reference/kubernetes-api/policy-resources/validating-admission-policy-binding-v1/).
const (
	AdmissionWarn  AdmissionMode = "warn"
	AdmissionAudit AdmissionMode = "audit"
	AdmissionDeny  AdmissionMode = "deny"
)

// AllAdmissionModes lists the modes.
var AllAdmissionModes = []AdmissionMode{AdmissionWarn, AdmissionAudit, AdmissionDeny}

// validationAction is the binding's action for mode m.
func (m AdmissionMode) validationAction() admissionregistrationv1.ValidationAction {
	switch m {
	case AdmissionDeny:
		return admissionregistrationv1.Deny
	case AdmissionAudit:
		return admissionregistrationv1.Audit
	}
	return admissionregistrationv1.Warn
}

// Valid reports whether m is one of AllAdmissionModes.
func (m AdmissionMode) Valid() bool { return slices.Contains(AllAdmissionModes, m) }

// Labels and kinds the admission rules read, each from its source:
//
// | what                               | value                         | source |
// | ---------------------------------- | ----------------------------- | ------ |
// | label: a job's LocalQueue          | kueue.x-k8s.io/queue-name     | sigs.k8s.io/kueue v0.17.0 pkg/controller/constants/constants.go QueueLabel |
// | label: a job's priority class      | kueue.x-k8s.io/priority-class | same file, WorkloadPriorityClassLabel |
// | batch/v1 Job (jobs)                | Kueue framework batch/job     | kueue config/components/manager/controller_manager_config.yaml integrations.frameworks; apis/config/v1beta2/defaults.go: batch/job is the default framework |
// | kubeflow.org PyTorchJob            | Kueue framework kubeflow.org/pytorchjob | same file; labelled in metadata.labels (kueue site docs/tasks/run/kubeflow/pytorchjobs.md, "Queue selection") |
// | sagemaker.amazonaws.com HyperPodPyTorchJob (hyperpodpytorchjobs) | HyperPod's job | HyperPodJobGroup, HyperPodJobResource (plan.go); the HyperPod CLI labels it with both labels above in metadata.labels (aws/sagemaker-hyperpod-cli hyperpod-pytorch-job-template v1_1 model.py, metadata_labels) |
// | v1 Pod (pods)                      | a bare pod: no ownerReferences | rule 4 |
//
// The job kinds are the ones the team's submitter Role lets it create
// (roles in plan.go); Kueue's other frameworks (MPIJob, RayJob, JobSet,
// TrainJob, ...) are not granted to the team, so it cannot create them.
const (
	KueueQueueLabel         = "kueue.x-k8s.io/queue-name"
	KueuePriorityClassLabel = "kueue.x-k8s.io/priority-class"
)

// admissionJobRules are the job kinds rules 1 and 2 hold (see the table
// above), as the policy's matchConstraints name them.
var admissionJobRules = []struct{ group, resource string }{
	{"batch", "jobs"},
	{"kubeflow.org", "pytorchjobs"},
	{HyperPodJobGroup, HyperPodJobResource},
}

// The contract clauses the refusal messages name (workflow fields.go keys
// and labels). The team's LocalQueue follows from its namespace
// ("namespaces") and the cluster; bare pods have no clause: the contract
// has no field that allows them, so they are always refused.
const (
	clauseQueue    = `"Namespaces" (namespaces: the LocalQueue of the team)`
	clausePriority = `"Priority classes" (scheduling.priority_classes)`
	clauseBarePods = `"Approved workload types" (workload_types: no type approves bare pods)`
)

// celExpr is a CEL expression among the parts of celMessage.
type celExpr string

// celMessage is the CEL string concatenation of parts: a string is a
// literal (quoted), a celExpr is spliced in as it is.
func celMessage(parts ...any) string {
	var out []string
	for _, p := range parts {
		switch p := p.(type) {
		case celExpr:
			out = append(out, string(p))
		case string:
			out = append(out, "'"+strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(p)+"'")
		default:
			panic(fmt.Sprintf("provision: celMessage part %T", p))
		}
	}
	return strings.Join(out, " + ")
}

// refusal is a rule's message: the contract and clause, what is wrong
// (parts), and where the owner requests a change.
func refusal(clause string, parts ...any) string {
	all := []any{"contract of connection ", celExpr("params.data['connection']"), " (team ", celExpr("params.data['team']"), "), clause " + clause + ": "}
	all = append(all, parts...)
	all = append(all, "; to change it, the owner of the team requests an amendment at ", celExpr("params.data['changePage']"))
	return celMessage(all...)
}

// admissionPolicy is the shared policy: the same object for every team and
// every cluster setting, so that no team's plan rewrites it for another.
// Rules (issue 35): (1) a job must carry the team's LocalQueue; (2) its
// priority class, when it names one, must be one the contract allows; (4)
// a pod without ownerReferences (a bare pod, which bypasses the queue) is
// refused; (3) only the kinds of the contract's approved workload types
// are created (kindRules, kindVariables, kindValidations: rules 1 and 2
// hold the job kinds only, variables.isJob); (5) accelerators only on the
// guaranteed instance types (acceleratorRule, admission_accel.go). An
// UPDATE that leaves the label as it was passes, so that a job created
// before the policy (or Kueue's own updates of it) is never stuck.
func (b *builder) admissionPolicy() {
	var rules []admissionregistrationv1.NamedRuleWithOperations
	for _, r := range admissionJobRules {
		rules = append(rules, namedRule(r.group, r.resource, admissionregistrationv1.Create, admissionregistrationv1.Update))
	}
	rules = append(rules, namedRule("", "pods", admissionregistrationv1.Create))
	rules = append(rules, kindRules()...)
	fail := admissionregistrationv1.Fail
	forbidden := metav1.StatusReasonForbidden
	label := func(obj, key string) string {
		return fmt.Sprintf("%[1]s != null && has(%[1]s.metadata.labels) && '%[2]s' in %[1]s.metadata.labels ? %[1]s.metadata.labels['%[2]s'] : ''", obj, key)
	}
	queue := celExpr("params.data['queue']")
	accelVars, accelValidations := acceleratorRule()
	b.add(&admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: NameAdmissionPolicy},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			ParamKind:        &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: rules},
			FailurePolicy:    &fail,
			Variables: append([]admissionregistrationv1.Variable{
				{Name: "isPod", Expression: "request.resource.group == '' && request.resource.resource == 'pods'"},
				{Name: "queue", Expression: label("object", KueueQueueLabel)},
				{Name: "oldQueue", Expression: label("oldObject", KueueQueueLabel)},
				{Name: "priority", Expression: label("object", KueuePriorityClassLabel)},
				{Name: "oldPriority", Expression: label("oldObject", KueuePriorityClassLabel)},
				{Name: "allowedPriorities", Expression: "params.data['priorityClasses'].split(',')"},
			}, append(kindVariables(), accelVars...)...),
			Validations: append([]admissionregistrationv1.Validation{
				{
					Expression: "!variables.isJob || variables.queue == params.data['queue'] || " +
						"(request.operation == 'UPDATE' && variables.queue == variables.oldQueue)",
					MessageExpression: refusal(clauseQueue, "a ", celExpr("request.kind.kind"), " in namespace ", celExpr("request.namespace"),
						" must carry the label "+KueueQueueLabel+": ", queue, " (it has ", celExpr("(variables.queue == '' ? 'none' : variables.queue)"), ")"),
					Message: "the job must carry the LocalQueue of the team in label " + KueueQueueLabel,
					Reason:  &forbidden,
				},
				{
					Expression: "!variables.isJob || variables.priority == '' || variables.priority in variables.allowedPriorities || " +
						"(request.operation == 'UPDATE' && variables.priority == variables.oldPriority)",
					MessageExpression: refusal(clausePriority, "label "+KueuePriorityClassLabel+" ", celExpr("variables.priority"),
						" is not one the contract allows; allowed: ", celExpr("variables.allowedPriorities.join(', ')")),
					Message: "the " + KueuePriorityClassLabel + " of the job is not one of the priority classes of the contract",
					Reason:  &forbidden,
				},
				{
					Expression: "!variables.isPod || (has(object.metadata.ownerReferences) && size(object.metadata.ownerReferences) > 0) || " +
						"params.data['barePods'] == 'allowed'",
					MessageExpression: refusal(clauseBarePods, "a pod with no owner (a bare pod) bypasses the Kueue queue ", queue,
						" of the team; submit a Job, PyTorchJob or HyperPodPyTorchJob labelled "+KueueQueueLabel+": ", queue, " instead"),
					Message: "bare pods (no ownerReferences) are refused: they bypass the Kueue queue of the team",
					Reason:  &forbidden,
				},
			}, append(kindValidations(), accelValidations...)...),
		},
	}, true, fmt.Sprintf("the contract's admission rules, with each team's values from its ConfigMap %s (shared by all teams): "+
		"jobs, PyTorchJobs and HyperPodPyTorchJobs carry the team's LocalQueue (%s) and an allowed priority class (%s); no bare pods; "+
		"only the kinds of the contract's approved workload types are created (%s); accelerators only on the guaranteed instance types (%s)",
		NameAdmissionPolicy, KueueQueueLabel, KueuePriorityClassLabel, kindsText(admittedKinds()), LabelInstanceType))
}

func namedRule(group, resource string, ops ...admissionregistrationv1.OperationType) admissionregistrationv1.NamedRuleWithOperations {
	return admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
		Operations: ops,
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{resource}},
	}}
}

// admissionParams is the team's parameter object: the contract's values
// the shared policy reads. priorityClasses are the Kueue class names the
// label must say (KueuePriorityClass); a contract naming none gets the
// class the member page's snippets label jobs with (TrainingClass), so
// that the snippets are never refused.
func (b *builder) admissionParams(localQueue string) {
	var classes []string
	for _, pc := range b.c.Scheduling.PriorityClasses {
		classes = append(classes, b.s.KueuePriorityClass(pc))
	}
	if len(classes) == 0 {
		classes = []string{b.s.KueuePriorityClass(b.s.TrainingClass(nil))}
	}
	id := strconv.FormatInt(b.plan.ConnectionID, 10)
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: b.meta(NameAdmissionParams),
		Data: map[string]string{
			"team":            b.c.Team,
			"connection":      id,
			"queue":           localQueue,
			"priorityClasses": strings.Join(classes, ","),
			"barePods":        "refused",
			"changePage":      ChangePage(b.plan.ConnectionID),
		},
	}
	maps.Copy(cm.Data, kindParams(b.c.WorkloadTypes))
	maps.Copy(cm.Data, b.acceleratorParams())
	b.add(cm, false, fmt.Sprintf("the contract's values for the admission policy %s: queue %s, priority classes %s, bare pods refused, workload types %s, "+
		"accelerators on %s; mode %s (binding %s)",
		NameAdmissionPolicy, localQueue, strings.Join(classes, ", "), approvedTypesText(b.c.WorkloadTypes), strings.Join(b.approvedInstanceTypes(), ", "),
		b.s.AdmissionMode, AdmissionBindingName(b.s.AdmissionMode)))
}

// ChangePage is the portal page where a connection's owner requests a
// change of its contract (an amendment: internal/web routes.go
// /connections/:id/edit, "Request a change" on an active connection).
func ChangePage(connID int64) string { return fmt.Sprintf("/connections/%d/edit", connID) }

// admissionBinding is the shared binding of the cluster's roll-out mode:
// the namespaces labelled with that mode, unless revoked.
func (b *builder) admissionBinding() {
	mode := b.s.AdmissionMode
	deny := admissionregistrationv1.DenyAction
	b.add(&admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: AdmissionBindingName(mode)},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: NameAdmissionPolicy,
			// No namespace: the ConfigMap of the admitted object's
			// namespace. Missing (deleted by hand, or not applied yet),
			// the binding's action applies to every request it matches:
			// fail closed in deny mode.
			ParamRef: &admissionregistrationv1.ParamRef{Name: NameAdmissionParams, ParameterNotFoundAction: &deny},
			MatchResources: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{LabelAdmissionMode: string(mode)},
					MatchExpressions: []metav1.LabelSelectorRequirement{
						{Key: LabelRevoked, Operator: metav1.LabelSelectorOpDoesNotExist},
					},
				},
			},
			ValidationActions: []admissionregistrationv1.ValidationAction{mode.validationAction()},
		},
	}, true, fmt.Sprintf("policy %s in the namespaces labelled %s=%s, not revoked: validationActions [%s] (shared by all teams)",
		NameAdmissionPolicy, LabelAdmissionMode, mode, mode.validationAction()))
}

// Rule 3 (issue 35): only the approved workload kinds may be created in
// the team namespace. The policy matches the kinds of every workload type
// (AllWorkloadKinds, kinds.go), so that it is the same for every team;
// the team's parameters list the kinds its contract approves
// (kindParams). The rule holds whoever creates the object: the team's
// Roles grant create only on the approved kinds (roles in plan.go), but
// an EKS access policy or a ClusterRole granted elsewhere (the Studio
// execution role's Space policy, say) is held here. Only CREATE: an object
// made before an amendment took its type away can still be changed and
// deleted. Extension kinds (WorkspaceConnection) are admitted by their
// own API server, not this one, and are left out.

// clauseKinds is the contract clause rule 3 names.
const clauseKinds = `"Approved workload types" (workload_types)`

// kindRules are what rule 3 adds to the policy's matchConstraints: the
// kinds not already matched by rules 1 and 2 (admissionJobRules), on
// CREATE.
func kindRules() []admissionregistrationv1.NamedRuleWithOperations {
	var out []admissionregistrationv1.NamedRuleWithOperations
	for _, k := range AllWorkloadKinds() {
		jobRule := slices.ContainsFunc(admissionJobRules, func(r struct{ group, resource string }) bool {
			return r.group == k.Group && r.resource == k.Resource
		})
		if k.Extension || jobRule {
			continue
		}
		out = append(out, namedRule(k.Group, k.Resource, admissionregistrationv1.Create))
	}
	return out
}

// kindVariables: the admitted resource as the parameters list it
// (group/resource), the approved kinds, and whether the resource is one of
// the job kinds rules 1 and 2 hold.
func kindVariables() []admissionregistrationv1.Variable {
	var jobs []string
	for _, r := range admissionJobRules {
		jobs = append(jobs, "'"+r.group+"/"+r.resource+"'")
	}
	return []admissionregistrationv1.Variable{
		{Name: "kindKey", Expression: "request.resource.group + '/' + request.resource.resource"},
		{Name: "isJob", Expression: "variables.kindKey in [" + strings.Join(jobs, ", ") + "]"},
		// Parameters written before rule 3 (no approvedKinds) hold nothing
		// until the team's plan is re-applied (the drift check finds the
		// ConfigMap changed): a missing key would otherwise be an
		// evaluation error, which failurePolicy Fail turns into a refusal
		// of every kind in deny mode.
		{Name: "approvedKinds", Expression: "'approvedKinds' in params.data ? params.data['approvedKinds'].split(',') : [variables.kindKey]"},
	}
}

// kindValidations is rule 3. Pods are rule 4's (a job's pods are no
// workload kind of their own).
func kindValidations() []admissionregistrationv1.Validation {
	forbidden := metav1.StatusReasonForbidden
	return []admissionregistrationv1.Validation{{
		Expression: "variables.isPod || request.operation != 'CREATE' || variables.kindKey in variables.approvedKinds",
		MessageExpression: refusal(clauseKinds, "a ", celExpr("request.kind.kind"), " (", celExpr("variables.kindKey"),
			") is not a kind of the approved workload types (", celExpr("params.data['workloadTypes']"),
			"); the kinds they allow: ", celExpr("variables.approvedKinds.join(', ')")),
		Message: "the kind is not one of the contract's approved workload types",
		Reason:  &forbidden,
	}}
}

// kindParams are rule 3's values in the team's parameter object: the
// approved types (for the message) and their kinds (group/resource,
// comma-separated, as variables.kindKey names them).
func kindParams(types []workflow.WorkloadType) map[string]string {
	var keys []string
	for _, k := range ApprovedKinds(types) {
		if !k.Extension {
			keys = append(keys, k.key())
		}
	}
	return map[string]string{
		"workloadTypes": approvedTypesText(types),
		"approvedKinds": strings.Join(keys, ","),
	}
}

// admittedKinds are the kinds rule 3 holds: every type's, less the
// extension kinds.
func admittedKinds() []WorkloadKind {
	return slices.DeleteFunc(AllWorkloadKinds(), func(k WorkloadKind) bool { return k.Extension })
}

// kindsText names kinds for a plan's text: "Job, PyTorchJob, ...".
func kindsText(kinds []WorkloadKind) string {
	var out []string
	for _, k := range kinds {
		out = append(out, k.Kind)
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}
