package provision

import (
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// The table names each type's kinds as their sources do (the oracle below
// is copied from the sources cited beside the table, not from the table),
// and every workload type of the contract has kinds and an access policy.
func TestWorkloadKindsTable(t *testing.T) {
	jobs := []string{"batch/v1 jobs Job", "kubeflow.org/v1 pytorchjobs PyTorchJob", "sagemaker.amazonaws.com/v1 hyperpodpytorchjobs HyperPodPyTorchJob"}
	want := map[workflow.WorkloadType][]string{
		workflow.WorkloadTraining:   jobs,
		workflow.WorkloadFineTuning: jobs,
		workflow.WorkloadInference: {
			"inference.sagemaker.aws.amazon.com/v1 inferenceendpointconfigs InferenceEndpointConfig",
			"inference.sagemaker.aws.amazon.com/v1 jumpstartmodels JumpStartModel",
		},
		workflow.WorkloadInteractive: {
			"workspace.jupyter.org/v1alpha1 workspaces Workspace",
			"connection.workspace.jupyter.org/v1alpha1 workspaceconnections WorkspaceConnection",
		},
	}
	policy := map[workflow.WorkloadType]string{
		workflow.WorkloadTraining:    "AmazonSagemakerHyperpodTrainingPolicy",
		workflow.WorkloadFineTuning:  "AmazonSagemakerHyperpodTrainingPolicy",
		workflow.WorkloadInference:   "AmazonSagemakerHyperpodInferencePolicy",
		workflow.WorkloadInteractive: "AmazonSagemakerHyperpodSpacePolicy",
	}
	for _, w := range workflow.AllWorkloadTypes {
		var got []string
		for _, k := range KindsOf(w) {
			got = append(got, k.APIVersion()+" "+k.Resource+" "+k.Kind)
			if k.Extension != (k.Kind == "WorkspaceConnection") {
				t.Errorf("%s: extension %v: only the WorkspaceConnection is served by an aggregated API server", k.Kind, k.Extension)
			}
		}
		if !slices.Equal(got, want[w]) {
			t.Errorf("%s: kinds %q, want %q", w, got, want[w])
		}
		if got := TypeAccessPolicies([]workflow.WorkloadType{w}); !slices.Equal(got, []string{policy[w]}) {
			t.Errorf("%s: access policies %v, want %s", w, got, policy[w])
		}
	}
	// Rules 1 and 2 hold exactly the job kinds.
	var rules []string
	for _, r := range admissionJobRules {
		rules = append(rules, r.group+"/"+r.resource)
	}
	var jobKeys []string
	for _, k := range jobKinds {
		jobKeys = append(jobKeys, k.key())
	}
	if !slices.Equal(rules, jobKeys) {
		t.Errorf("rules 1 and 2 hold %v, the job kinds are %v", rules, jobKeys)
	}
	if got := ApprovedKinds([]workflow.WorkloadType{workflow.WorkloadTraining, workflow.WorkloadFineTuning}); len(got) != 3 {
		t.Errorf("training and fine-tuning share their kinds, listed once: %v", got)
	}
}

// typeSets are every combination of the contract's workload types.
func typeSets() [][]workflow.WorkloadType {
	all := workflow.AllWorkloadTypes
	var out [][]workflow.WorkloadType
	for mask := 0; mask < 1<<len(all); mask++ {
		var set []workflow.WorkloadType
		for i, w := range all {
			if mask&(1<<i) != 0 {
				set = append(set, w)
			}
		}
		out = append(out, set)
	}
	return out
}

// planWithTypes is the example contract's plan with the given types.
func planWithTypes(t *testing.T, types []workflow.WorkloadType, s ClusterSettings) Plan {
	t.Helper()
	c := workflow.ExampleContract()
	c.WorkloadTypes = types
	p, err := BuildPlan(42, 1, c.Hash(), c, s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func roleOf(t *testing.T, p Plan, name string) rbacv1.Role {
	t.Helper()
	for _, o := range p.Objects {
		if o.Kind == "Role" && o.Name == name {
			var r rbacv1.Role
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Obj.Object, &r); err != nil {
				t.Fatal(err)
			}
			return r
		}
	}
	t.Fatalf("no Role %s", name)
	return rbacv1.Role{}
}

// grants reports whether role grants verb on group/resource.
func grants(r rbacv1.Role, verb, group, resource string) bool {
	for _, rule := range r.Rules {
		if slices.Contains(rule.Verbs, verb) && slices.Contains(rule.APIGroups, group) && slices.Contains(rule.Resources, resource) {
			return true
		}
	}
	return false
}

// The submitter Role creates, patches and deletes exactly the kinds of
// the approved types: for every combination of types, a kind of a type
// the contract does not approve gets no write verb, an approved kind gets
// them (create only for the extension kind), and nothing else is written
// but pods/exec. The team's parameters list the approved kinds the same
// way (less the extension, which this API server does not admit).
func TestSubmitterRoleFollowsApprovedKinds(t *testing.T) {
	for _, types := range typeSets() {
		p := planWithTypes(t, types, DefaultClusterSettings())
		submit := roleOf(t, p, NameSubmitterRole)
		var approvedKeys []string
		for _, w := range workflow.AllWorkloadTypes {
			approved := slices.Contains(types, w)
			for _, k := range KindsOf(w) {
				// A kind shared by an approved type (training and
				// fine-tuning) is approved.
				shared := slices.ContainsFunc(types, func(o workflow.WorkloadType) bool { return slices.Contains(KindsOf(o), k) })
				for _, verb := range []string{"create", "patch", "delete"} {
					want := shared && (verb == "create" || !k.Extension)
					if got := grants(submit, verb, k.Group, k.Resource); got != want {
						t.Errorf("types %v: %s %s: %v, want %v", types, verb, k.Resource, got, want)
					}
				}
				if approved && !k.Extension && !slices.Contains(approvedKeys, k.key()) {
					approvedKeys = append(approvedKeys, k.Group+"/"+k.Resource)
				}
			}
		}
		for _, rule := range submit.Rules {
			for _, res := range rule.Resources {
				if res == "pods/exec" {
					continue
				}
				if !slices.ContainsFunc(AllWorkloadKinds(), func(k WorkloadKind) bool { return k.Resource == res && k.Group == rule.APIGroups[0] }) {
					t.Errorf("types %v: the submitter Role writes %s, no workload kind", types, res)
				}
			}
		}
		d := admissionOf(t, p).params.Data
		if d["approvedKinds"] != strings.Join(approvedKeys, ",") {
			t.Errorf("types %v: approvedKinds %q, want %q", types, d["approvedKinds"], strings.Join(approvedKeys, ","))
		}
		if len(types) > 0 && d["workloadTypes"] == "none" || len(types) == 0 && d["workloadTypes"] != "none" {
			t.Errorf("types %v: workloadTypes %q", types, d["workloadTypes"])
		}
		// Viewers read the approved kinds (kubectl apply reads first).
		view := roleOf(t, p, NameViewerRole)
		for _, k := range ApprovedKinds(types) {
			if !k.Extension && !grants(view, "get", k.Group, k.Resource) {
				t.Errorf("types %v: the viewer Role does not read %s", types, k.Resource)
			}
		}
	}
	// The example contract: its types' names in order, and no space.
	p := planWithTypes(t, workflow.ExampleContract().WorkloadTypes, DefaultClusterSettings())
	if d := admissionOf(t, p).params.Data; d["workloadTypes"] != "training,fine-tuning,inference" || strings.Contains(d["approvedKinds"], "workspaces") {
		t.Errorf("example contract: %v", d)
	}
	if grants(roleOf(t, p, NameSubmitterRole), "create", SpaceGroup, "workspaces") {
		t.Error("the example contract approves no interactive spaces, but its submitters may create Workspaces")
	}
}

// Rule 3 in the shared policy: it matches every admitted kind of every
// type on CREATE (so it is the same for every team: contracts approving
// different types produce the same policy), names the clause, the
// approved types and kinds and the change page; rules 1 and 2 hold the
// job kinds only.
func TestAdmissionKindRule(t *testing.T) {
	a := admissionOf(t, planWithTypes(t, []workflow.WorkloadType{workflow.WorkloadInference}, DefaultClusterSettings()))
	spec := a.policy.Spec
	matched := map[string][]string{}
	for _, r := range spec.MatchConstraints.ResourceRules {
		for _, res := range r.Resources {
			for _, op := range r.Operations {
				matched[r.APIGroups[0]+"/"+res] = append(matched[r.APIGroups[0]+"/"+res], string(op))
			}
		}
	}
	for _, k := range AllWorkloadKinds() {
		ops := matched[k.key()]
		if k.Extension {
			if ops != nil {
				t.Errorf("%s: matched %v, but its own API server admits it", k.Kind, ops)
			}
			continue
		}
		if !slices.Contains(ops, "CREATE") {
			t.Errorf("%s (%s): operations %v, want CREATE", k.Kind, k.key(), ops)
		}
	}
	var rule3 *string
	for i, v := range spec.Validations {
		if strings.Contains(v.MessageExpression, `clause "Approved workload types" (workload_types): `) {
			rule3 = &spec.Validations[i].Expression
			for _, s := range []string{"params.data['workloadTypes']", "variables.approvedKinds.join(', ')", "params.data['changePage']", "request.kind.kind"} {
				if !strings.Contains(v.MessageExpression, s) {
					t.Errorf("rule 3's message lacks %s: %s", s, v.MessageExpression)
				}
			}
		}
		if strings.Contains(v.MessageExpression, "(namespaces") || strings.Contains(v.MessageExpression, "(scheduling.priority_classes)") {
			if !strings.HasPrefix(v.Expression, "!variables.isJob || ") {
				t.Errorf("rules 1 and 2 must hold the job kinds only: %s", v.Expression)
			}
		}
	}
	if rule3 == nil || !strings.Contains(*rule3, "variables.kindKey in variables.approvedKinds") || !strings.Contains(*rule3, "request.operation != 'CREATE'") {
		t.Fatalf("no rule 3 (CREATE of an approved kind only): %v", rule3)
	}
	other := admissionOf(t, planWithTypes(t, []workflow.WorkloadType{workflow.WorkloadTraining, workflow.WorkloadInteractive}, DefaultClusterSettings()))
	y1, _ := objectYAML(mustUnstructured(t, &a.policy))
	y2, _ := objectYAML(mustUnstructured(t, &other.policy))
	if string(y1) != string(y2) {
		t.Error("the shared policy differs between contracts of different types")
	}
}

func mustUnstructured(t *testing.T, obj any) map[string]any {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The team's access role gets the HyperPod access policies of its approved
// types only (the default lists training, inference and space); a policy
// that stands for no type is kept as configured; the plan says why.
func TestAccessPoliciesFollowApprovedTypes(t *testing.T) {
	accessPolicies := func(p Plan, c workflow.Contract) (names []string, why string) {
		for _, call := range p.AWS {
			if call.AccessEntry == nil || call.AccessEntry.PrincipalARN != c.AccessRoleARN {
				continue
			}
			for _, pol := range call.AccessEntry.Policies {
				names = append(names, pol.PolicyARN[strings.LastIndex(pol.PolicyARN, "/")+1:])
			}
			for _, f := range call.Fields {
				if f.Name == "for" {
					why = f.Value
				}
			}
		}
		return names, why
	}
	for _, tc := range []struct {
		types []workflow.WorkloadType
		want  []string
	}{
		{[]workflow.WorkloadType{workflow.WorkloadInference}, []string{awsprov.PolicyHyperPodInference}},
		{[]workflow.WorkloadType{workflow.WorkloadFineTuning}, []string{awsprov.PolicyHyperPodTraining}},
		{[]workflow.WorkloadType{workflow.WorkloadTraining, workflow.WorkloadInteractive}, []string{awsprov.PolicyHyperPodTraining, awsprov.PolicyHyperPodSpace}},
		{workflow.AllWorkloadTypes, []string{awsprov.PolicyHyperPodTraining, awsprov.PolicyHyperPodInference, awsprov.PolicyHyperPodSpace}},
	} {
		c := workflow.ExampleContract()
		c.WorkloadTypes = tc.types
		p, err := BuildPlan(1, 1, c.Hash(), c, awsSettings())
		if err != nil {
			t.Fatal(err)
		}
		got, why := accessPolicies(p, c)
		if !slices.Equal(got, tc.want) {
			t.Errorf("types %v: the access role gets %v, want %v", tc.types, got, tc.want)
		}
		if !strings.Contains(why, "approved workload types") {
			t.Errorf("types %v: the plan does not say why: %q", tc.types, why)
		}
		if len(tc.want) < 3 && !strings.Contains(why, "no approved type needs it") {
			t.Errorf("types %v: the plan does not name the policies left out: %q", tc.types, why)
		}
	}
	// A policy of no type is kept, whatever the types.
	s := awsSettings()
	s.AWS.Access.SubmitterPolicies = []awsprov.AccessGrant{
		{Policy: awsprov.PolicyEKSView, Scope: awsprov.AccessScopeNamespace, Namespaces: []string{awsprov.TeamNamespace}},
		{Policy: awsprov.PolicyHyperPodTraining, Scope: awsprov.AccessScopeNamespace, Namespaces: []string{awsprov.TeamNamespace}},
	}
	c := workflow.ExampleContract()
	c.WorkloadTypes = []workflow.WorkloadType{workflow.WorkloadInference}
	p, err := BuildPlan(1, 1, c.Hash(), c, s)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := accessPolicies(p, c); !slices.Equal(got, []string{awsprov.PolicyEKSView}) {
		t.Errorf("inference only, settings view and training: %v, want the view policy only", got)
	}
	// No bare-pod warning for a policy the plan does not grant.
	if strings.Contains(strings.Join(p.Warnings, "\n"), "the team's access role gets the EKS access") {
		t.Errorf("warnings name a policy the access role does not get: %q", p.Warnings)
	}
}
