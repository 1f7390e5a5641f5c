package provision

import (
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// admissionCases are the settings and contracts the admission tests build
// plans of: both queue modes, one and two namespaces (HyperPod's mode
// allows only its own namespace).
func admissionCases() []struct {
	s ClusterSettings
	c workflow.Contract
} {
	return []struct {
		s ClusterSettings
		c workflow.Contract
	}{
		{DefaultClusterSettings(), workflow.ExampleContract()},
		{managedSettings(), workflow.ExampleContract()},
		{managedSettings(), borrowingContract()},
	}
}

// admissionObjects are a plan's admission policy, its binding and the
// team's parameter ConfigMap, decoded, and their places in the plan.
type admissionObjects struct {
	policy                    admissionregistrationv1.ValidatingAdmissionPolicy
	binding                   admissionregistrationv1.ValidatingAdmissionPolicyBinding
	params                    corev1.ConfigMap
	policyAt, bindingAt, cmAt int
}

func admissionOf(t *testing.T, p Plan) admissionObjects {
	t.Helper()
	var a admissionObjects
	a.policyAt, a.bindingAt, a.cmAt = -1, -1, -1
	for i, o := range p.Objects {
		var into any
		switch o.Kind {
		case "ValidatingAdmissionPolicy":
			into, a.policyAt = &a.policy, i
		case "ValidatingAdmissionPolicyBinding":
			into, a.bindingAt = &a.binding, i
		case "ConfigMap":
			into, a.cmAt = &a.params, i
		default:
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Obj.Object, into); err != nil {
			t.Fatalf("%s: %v", o.Kind, err)
		}
	}
	if a.policyAt < 0 || a.bindingAt < 0 || a.cmAt < 0 {
		t.Fatalf("plan lacks the admission objects: %v", p.Summary())
	}
	return a
}

// The plan holds the contract's admission rules: the shared policy, the
// team's values in its namespace, and the binding of the cluster's mode,
// which selects the team namespace. The values come from the contract and
// the plan's own LocalQueue (the oracle), in both queue modes.
func TestAdmissionObjectsFollowTheContract(t *testing.T) {
	for _, tc := range admissionCases() {
		s, c := tc.s, tc.c
		p, err := BuildPlan(42, 5, c.Hash(), c, s)
		if err != nil {
			t.Fatal(err)
		}
		a := admissionOf(t, p)
		kinds := make([]string, len(p.Objects))
		for i, o := range p.Objects {
			kinds[i] = o.Kind
		}
		// Guardrails before access: policy, then its parameters, then
		// the binding that names both, all before the ServiceAccount.
		if !(a.policyAt < a.cmAt && a.cmAt < a.bindingAt && a.bindingAt < slices.Index(kinds, "ServiceAccount")) {
			t.Errorf("order %v: want policy, ConfigMap, binding, before any access", kinds)
		}
		if !p.Objects[a.policyAt].Shared || !p.Objects[a.bindingAt].Shared || p.Objects[a.cmAt].Shared {
			t.Error("the policy and binding are shared, the parameters the team's")
		}

		var lq string
		for _, o := range p.Objects {
			if o.Kind == "LocalQueue" {
				lq = o.Name
			}
		}
		var want []string
		for _, pc := range c.Scheduling.PriorityClasses {
			want = append(want, pc+workflow.PriorityClassSuffix)
		}
		d := a.params.Data
		if a.params.Namespace != p.Namespace || a.params.Name != NameAdmissionParams || d["queue"] != lq || lq == "" ||
			d["priorityClasses"] != strings.Join(want, ",") || d["team"] != c.Team || d["connection"] != "42" ||
			d["changePage"] != "/connections/42/edit" || d["barePods"] != "refused" {
			t.Errorf("parameters %s/%s %v: want queue %s, classes %v", a.params.Namespace, a.params.Name, d, lq, want)
		}

		// The binding: the policy, the team's ConfigMap from the
		// admitted object's namespace, the settings' mode.
		b := a.binding.Spec
		if a.binding.Name != "hyperpod-portal-contract-warn" || b.PolicyName != a.policy.Name || b.ParamRef == nil ||
			b.ParamRef.Name != a.params.Name || b.ParamRef.Namespace != "" ||
			b.ParamRef.ParameterNotFoundAction == nil || *b.ParamRef.ParameterNotFoundAction != admissionregistrationv1.DenyAction ||
			!slices.Equal(b.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn}) {
			t.Errorf("binding %s %+v", a.binding.Name, b)
		}
		sel, err := metav1.LabelSelectorAsSelector(b.MatchResources.NamespaceSelector)
		if err != nil {
			t.Fatal(err)
		}
		ns := p.Objects[0].Obj
		if !sel.Matches(labels.Set(ns.GetLabels())) {
			t.Errorf("the binding's selector %s does not select the team namespace %v", sel, ns.GetLabels())
		}
		for _, st := range RevocationPlan(p, RevokeLock) {
			if st.Object.Kind == "Namespace" && sel.Matches(labels.Set(st.Object.Obj.GetLabels())) {
				t.Errorf("the binding still selects the locked namespace %v", st.Object.Obj.GetLabels())
			}
		}
		if sel.Matches(labels.Set{LabelManagedBy: ManagedBy, LabelAdmissionMode: string(AdmissionDeny)}) {
			t.Error("the warn binding selects a namespace of another mode")
		}
	}
}

// A contract that names no priority class allows the class the member
// page's snippets label jobs with (TrainingClass), so they are not refused.
func TestAdmissionParamsWithoutPriorityClasses(t *testing.T) {
	c := workflow.ExampleContract()
	c.Scheduling.PriorityClasses = nil
	s := DefaultClusterSettings()
	p, err := BuildPlan(1, 1, c.Hash(), c, s)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := admissionOf(t, p).params.Data["priorityClasses"], s.KueuePriorityClass(s.TrainingClass(nil)); got != want {
		t.Errorf("priority classes %q, want %q", got, want)
	}
}

// The roll-out mode picks the binding (its name and validationActions) and
// the namespace's label; the policy is the same object whatever the team,
// mode or queue mode, since every team's plan applies it.
func TestAdmissionModes(t *testing.T) {
	want := map[AdmissionMode]admissionregistrationv1.ValidationAction{
		AdmissionWarn: admissionregistrationv1.Warn, AdmissionAudit: admissionregistrationv1.Audit, AdmissionDeny: admissionregistrationv1.Deny,
	}
	var policy string
	for _, tc := range admissionCases() {
		for mode, action := range want {
			s, c := tc.s, tc.c
			s.AdmissionMode = mode
			p, err := BuildPlan(3, 1, c.Hash(), c, s)
			if err != nil {
				t.Fatal(err)
			}
			a := admissionOf(t, p)
			if a.binding.Name != NameAdmissionPolicy+"-"+string(mode) ||
				!slices.Equal(a.binding.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{action}) ||
				a.binding.Spec.MatchResources.NamespaceSelector.MatchLabels[LabelAdmissionMode] != string(mode) ||
				p.Objects[0].Obj.GetLabels()[LabelAdmissionMode] != string(mode) {
				t.Errorf("mode %s: binding %s %+v, namespace labels %v", mode, a.binding.Name, a.binding.Spec, p.Objects[0].Obj.GetLabels())
			}
			y, err := objectYAML(p.Objects[a.policyAt].Obj.Object)
			if err != nil {
				t.Fatal(err)
			}
			if policy == "" {
				policy = string(y)
			} else if string(y) != policy {
				t.Errorf("mode %s, team %s: the shared policy differs:\n%s\nwant\n%s", mode, c.Team, y, policy)
			}
		}
	}
	s := DefaultClusterSettings()
	s.AdmissionMode = "enforce"
	c := workflow.ExampleContract()
	if _, err := BuildPlan(1, 1, c.Hash(), c, s); err == nil || !strings.Contains(err.Error(), "AdmissionMode") {
		t.Errorf("mode %q: %v, want a settings error", s.AdmissionMode, err)
	}
}

// The policy holds rules 1, 2, 3, 4 and 5 for the kinds the team may submit
// (its submitter Role's) and bare pods, with a message naming the clause,
// the allowed values and the change page; each rule is Forbidden.
func TestAdmissionPolicyRules(t *testing.T) {
	c := workflow.ExampleContract()
	p, err := BuildPlan(1, 1, c.Hash(), c, DefaultClusterSettings())
	if err != nil {
		t.Fatal(err)
	}
	a := admissionOf(t, p)
	spec := a.policy.Spec
	if spec.ParamKind == nil || spec.ParamKind.APIVersion != "v1" || spec.ParamKind.Kind != "ConfigMap" ||
		spec.FailurePolicy == nil || *spec.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("paramKind %+v, failurePolicy %v", spec.ParamKind, spec.FailurePolicy)
	}
	// The policy holds every kind the submitter Role may create (but the
	// extension kinds, which their own API server admits), and the
	// example contract's submitters create the job kinds.
	var submits, matched []string
	for _, o := range p.Objects {
		if o.Kind != "Role" || o.Name != NameSubmitterRole {
			continue
		}
		var role rbacv1.Role
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Obj.Object, &role); err != nil {
			t.Fatal(err)
		}
		for _, r := range role.Rules {
			if slices.Contains(r.Verbs, "create") && !slices.Contains(r.Resources, "pods/exec") {
				for _, res := range r.Resources {
					submits = append(submits, r.APIGroups[0]+"/"+res)
				}
			}
		}
	}
	for _, r := range spec.MatchConstraints.ResourceRules {
		ops := slices.Clone(r.Operations)
		for _, res := range r.Resources {
			if res == "pods" {
				if !slices.Equal(ops, []admissionregistrationv1.OperationType{admissionregistrationv1.Create}) {
					t.Errorf("pods: operations %v, want CREATE", ops)
				}
				continue
			}
			matched = append(matched, r.APIGroups[0]+"/"+res)
			isJob := slices.ContainsFunc(jobKinds, func(k WorkloadKind) bool { return k.Resource == res })
			if isJob && !slices.Equal(ops, []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}) {
				t.Errorf("%s: operations %v, want CREATE and UPDATE", res, ops)
			}
		}
	}
	for _, k := range jobKinds {
		if !slices.Contains(submits, k.key()) {
			t.Errorf("the example contract's submitters may not create %s", k.key())
		}
	}
	for _, sub := range submits {
		if !slices.Contains(matched, sub) && !slices.ContainsFunc(AllWorkloadKinds(), func(k WorkloadKind) bool { return k.Extension && k.key() == sub }) {
			t.Errorf("the submitters may create %s, which the policy does not hold (it holds %v)", sub, matched)
		}
	}
	if len(spec.Validations) != 5 {
		t.Fatalf("%d validations, want 5", len(spec.Validations))
	}
	for i, clause := range []string{"(namespaces", "(scheduling.priority_classes)", "(workload_types", "(workload_types)", "(scheduling.guaranteed"} {
		v := spec.Validations[i]
		if !strings.Contains(v.MessageExpression, clause) || !strings.Contains(v.MessageExpression, "params.data['changePage']") ||
			v.Reason == nil || *v.Reason != metav1.StatusReasonForbidden || v.Message == "" {
			t.Errorf("validation %d: message %q, reason %v: want clause %s, the change page, Forbidden", i, v.MessageExpression, v.Reason, clause)
		}
	}
	if !strings.Contains(spec.Validations[0].MessageExpression, "params.data['queue']") ||
		!strings.Contains(spec.Validations[1].MessageExpression, "variables.allowedPriorities.join(', ')") {
		t.Error("the messages do not name the allowed values")
	}
}

// celMessage quotes literals as CEL strings: an apostrophe or a backslash
// in a message cannot end the literal early.
func TestCELMessageQuotes(t *testing.T) {
	got := celMessage("it's a \\ ", celExpr("x"), "")
	if want := `'it\'s a \\ ' + x + ''`; got != want {
		t.Errorf("celMessage = %s, want %s", got, want)
	}
}

// An amendment that adds a priority class changes the team's parameters
// (the plan diff shows it), and nothing of the shared policy or binding.
func TestAdmissionAmendmentDiff(t *testing.T) {
	c := workflow.ExampleContract()
	from, err := BuildPlan(9, 1, c.Hash(), c, DefaultClusterSettings())
	if err != nil {
		t.Fatal(err)
	}
	c.Scheduling.PriorityClasses = append(c.Scheduling.PriorityClasses, "experiment")
	c = c.Normalize()
	to, err := BuildPlan(9, 2, c.Hash(), c, DefaultClusterSettings())
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range DiffPlans(from, to).Changes {
		if ch.Object == nil {
			continue
		}
		switch ch.Object.Kind {
		case "ConfigMap":
			if ch.Action != DiffUpdate || !strings.Contains(ch.Detail, "experiment-priority") {
				t.Errorf("parameters: %s %q, want an update adding experiment-priority", ch.Action, ch.Detail)
			}
		case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			if ch.Action != DiffUnchanged {
				t.Errorf("%s: %s %q, want unchanged", ch.What, ch.Action, ch.Detail)
			}
		}
	}
}

// The readiness page says whether the cluster serves what the plans apply
// (ValidatingAdmissionPolicy v1: not on a cluster older than v1.30, whose
// admissionregistration.k8s.io/v1 holds only the webhooks) and the mode.
func TestAdmissionReadinessCheck(t *testing.T) {
	reader := func(resources ...string) *ClusterReader {
		list := &metav1.APIResourceList{GroupVersion: "admissionregistration.k8s.io/v1"}
		for _, r := range resources {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: r})
		}
		return &ClusterReader{Discovery: &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{Resources: []*metav1.APIResourceList{list}}}}
	}
	ctx := t.Context()
	c := admissionCheck(ctx, ReadinessSources{Kube: reader("validatingwebhookconfigurations", "validatingadmissionpolicies"), AdmissionMode: AdmissionDeny})
	if c.Status != CheckOK || !strings.Contains(c.Detail, "deny mode") || !strings.Contains(c.Detail, "[Deny]") {
		t.Errorf("served, deny: %+v", c)
	}
	c = admissionCheck(ctx, ReadinessSources{Kube: reader("validatingadmissionpolicies")})
	if c.Status != CheckOK || !strings.Contains(c.Detail, "warn mode") || !strings.Contains(c.Detail, "refuses nothing") {
		t.Errorf("served, default mode: %+v", c)
	}
	c = admissionCheck(ctx, ReadinessSources{Kube: reader("validatingwebhookconfigurations")})
	if c.Status != CheckFailing || !strings.Contains(c.Todo, "v1.30") {
		t.Errorf("not served: %+v", c)
	}
	if c := admissionCheck(ctx, ReadinessSources{}); c.Status != CheckUnknown {
		t.Errorf("no cluster: %+v", c)
	}
}
