package deploy

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// perm is one (API group, resource, verb) the portal's Kubernetes identity
// uses, with why (the first reason found; for messages), on objects of any
// name, or on the one named name (a rule's resourceNames).
type perm struct{ group, resource, verb, name string }

func (p perm) String() string {
	g := p.group
	if g == "" {
		g = "core"
	}
	if strings.HasPrefix(p.resource, "/") {
		return "nonResourceURL " + p.resource + ":" + p.verb
	}
	s := g + "/" + p.resource + ":" + p.verb
	if p.name != "" {
		s += "[" + p.name + "]"
	}
	return s
}

// kinds maps each kind a plan holds to its API group and resource. A kind
// missing here fails the test: add it, and its rule to the chart.
var kinds = map[string][2]string{
	"Namespace":                        {"", "namespaces"},
	"ResourceQuota":                    {"", "resourcequotas"},
	"LimitRange":                       {"", "limitranges"},
	"ServiceAccount":                   {"", "serviceaccounts"},
	"NetworkPolicy":                    {"networking.k8s.io", "networkpolicies"},
	"Role":                             {"rbac.authorization.k8s.io", "roles"},
	"RoleBinding":                      {"rbac.authorization.k8s.io", "rolebindings"},
	"ClusterRole":                      {"rbac.authorization.k8s.io", "clusterroles"},
	"ClusterRoleBinding":               {"rbac.authorization.k8s.io", "clusterrolebindings"},
	"ClusterQueue":                     {"kueue.x-k8s.io", "clusterqueues"},
	"LocalQueue":                       {"kueue.x-k8s.io", "localqueues"},
	"ResourceFlavor":                   {"kueue.x-k8s.io", "resourceflavors"},
	"WorkloadPriorityClass":            {"kueue.x-k8s.io", "workloadpriorityclasses"},
	"Cohort":                           {"kueue.x-k8s.io", "cohorts"},
	"ConfigMap":                        {"", "configmaps"},
	"ValidatingAdmissionPolicy":        {"admissionregistration.k8s.io", "validatingadmissionpolicies"},
	"ValidatingAdmissionPolicyBinding": {"admissionregistration.k8s.io", "validatingadmissionpolicybindings"},
}

// namedKinds are written only by name (the ClusterRole's resourceNames):
// the API server runs no admission policy on them (k8s.io/apiserver
// pkg/admission/plugin/policy/generic/plugin.go, Dispatch), so the chart's
// admission policy cannot limit what the portal writes there.
var namedKinds = map[string]bool{"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true}

// samplePlans are plans of contracts that between them hold every kind the
// provisioner makes: HyperPod-owned and portal-owned ClusterQueues, one and
// several namespaces, egress allowances, priority classes.
func samplePlans(t *testing.T) []provision.Plan {
	t.Helper()
	example := workflow.ExampleContract()
	borrow := workflow.ExampleContract()
	borrow.Team = "blue"
	borrow.BusinessOwner, borrow.OperationsOwner, borrow.CostOwner, borrow.ExceptionOwner = "owner.blue@example.test", "member.blue@example.test", "owner.blue@example.test", "owner.blue@example.test"
	borrow.ProjectRoleARN = "arn:aws:iam::111122223333:role/blue-project"
	borrow.AccessRoleARN = "arn:aws:iam::111122223333:role/blue-access"
	borrow.WorkloadRoleARN = "arn:aws:iam::111122223333:role/blue-workload"
	borrow.Namespaces = []string{"hyperpod-ns-blue", "blue-batch"}
	borrow.Scheduling = workflow.Scheduling{
		Guaranteed:         []workflow.Capacity{{InstanceType: "ml.g5.8xlarge", Count: 4}, {InstanceType: "ml.p4d.24xlarge", Count: 1}},
		Sharing:            workflow.SharingBorrow,
		BorrowLimitPercent: 100,
		Preemption:         workflow.PreemptNever,
		FairShareWeight:    20,
		PriorityClasses:    []string{"experiment", "research"},
	}
	borrow.EgressAllowances = []workflow.Egress{{Destination: "10.20.0.0/16", Ports: []int{443}, Reason: "The team's data VPC."}}
	// Every workload type, so that the plans grant every kind a team may be
	// approved for (the example contract approves no interactive spaces).
	borrow.WorkloadTypes = workflow.AllWorkloadTypes
	borrow = borrow.Normalize()
	managed := provision.DefaultClusterSettings()
	managed.ClusterQueueManagedByPortal = true
	managed.Cohort = "shared-gpus"

	// Each roll-out mode of the admission rules has its binding.
	audit, deny := provision.DefaultClusterSettings(), provision.DefaultClusterSettings()
	audit.AdmissionMode, deny.AdmissionMode = provision.AdmissionAudit, provision.AdmissionDeny

	env := workflow.ValidationEnv{Now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	var plans []provision.Plan
	for i, tc := range []struct {
		c workflow.Contract
		s provision.ClusterSettings
	}{
		{example, provision.DefaultClusterSettings()},
		{example, managed},
		{borrow, managed},
		{example, audit},
		{example, deny},
	} {
		if errs := tc.c.Validate(env); len(errs) > 0 {
			t.Fatalf("sample contract %d is not valid: %v", i, errs)
		}
		p, err := provision.BuildPlan(int64(i+1), 1, tc.c.Hash(), tc.c, tc.s)
		if err != nil {
			t.Fatalf("sample plan %d: %v", i, err)
		}
		plans = append(plans, p)
	}
	return plans
}

// needed is every (group, resource, verb) the portal's identity needs
// cluster-wide, with the first reason found. It follows the code, not a list
// kept by hand: the steps the provisioner's jobs run on the sample plans and
// what each step action calls (internal/provision: apply.go, revoke.go,
// drift.go, hold.go), the reads outside plans, and the rules of the Roles
// and ClusterRoles the plans create (see escalation below).
func needed(t *testing.T) map[perm]string {
	t.Helper()
	out := map[perm]string{}
	add := func(group, resource, why string, verbs ...string) {
		for _, v := range verbs {
			p := perm{group, resource, v, ""}
			if _, ok := out[p]; !ok {
				out[p] = why
			}
		}
	}
	gr := func(kind string) (string, string) {
		k, ok := kinds[kind]
		if !ok {
			t.Fatalf("a plan holds kind %s, which this test does not know: add it to kinds and its rule to the chart's ClusterRole", kind)
		}
		return k[0], k[1]
	}
	// applyVerbs: Applier.apply reads the object, then server-side applies
	// it (PATCH). An apply that creates the object is also authorized as
	// create (k8s.io/apiserver pkg/endpoints/handlers/patch.go: the patch
	// handler's createValidation runs withAuthorization(...,
	// createAuthorizerAttributes) with Verb "create"). HyperPod's objects are
	// never created (waited for), and OwnerHyperPodChecked ones only read.
	// addObj adds verbs on o's kind: on o's name for namedKinds.
	addObj := func(o provision.Object, why string, verbs ...string) {
		g, r := gr(o.Kind)
		if !namedKinds[o.Kind] {
			add(g, r, why, verbs...)
			return
		}
		for _, v := range verbs {
			if _, ok := out[perm{g, r, v, o.Name}]; !ok {
				out[perm{g, r, v, o.Name}] = why
			}
		}
	}
	applyVerbs := func(o provision.Object, why string) {
		addObj(o, why, "get")
		switch o.Owner {
		case provision.OwnerPortal:
			addObj(o, why, "create", "patch")
		case provision.OwnerHyperPod:
			addObj(o, why, "patch")
		}
	}
	plans := samplePlans(t)
	var steps []provision.Step
	for _, p := range plans {
		steps = append(steps, provision.ApplySteps(p)...)
		steps = append(steps, provision.ReapplySteps(p)...)
		steps = append(steps, provision.RevocationPlan(p, provision.RevokeLock)...)
		steps = append(steps, provision.RevocationPlan(p, provision.RevokeDelete)...)
		steps = append(steps, provision.HoldSteps(p, "Hold")...)
		steps = append(steps, provision.HoldSteps(p, "None")...)
		for _, q := range plans {
			steps = append(steps, provision.AmendSteps(p, q)...)
		}
		// Drift (drift.go DriftAll) and re-apply (reconcile.go Reconcile,
		// ForPlan): a list of every kind of the plan (snapshot.go
		// Snapshot), RoleBindings included (extra ones are reported and
		// pruned); then a get of each object the lists did not return and
		// a dry-run apply (PATCH with dryRun=All) of each that differs,
		// except those only checked.
		for _, o := range p.Objects {
			g, r := gr(o.Kind)
			add(g, r, "snapshot: list every "+o.Kind, "list")
			addObj(o, "drift check: read "+o.Kind, "get")
			if o.Owner != provision.OwnerHyperPodChecked {
				addObj(o, "drift check: dry-run apply of "+o.Kind, "patch")
			}
		}
		if p.Namespace != "" {
			add("rbac.authorization.k8s.io", "rolebindings", "snapshot: list the RoleBindings", "list")
		}
	}
	for _, s := range steps {
		o := s.Object
		why := string(s.Action) + " " + o.Kind
		switch s.Action {
		case provision.ActionApply:
			applyVerbs(o, why)
		case provision.ActionLock: // revoke.go Lock: the namespace is read, then Apply
			add("", "namespaces", why, "get")
			applyVerbs(o, why)
		case provision.ActionDelete: // revoke.go Delete: read, then delete by UID
			g, r := gr(o.Kind)
			add(g, r, why, "get", "delete")
		case provision.ActionDeleteAll: // revoke.go DeleteAll: namespace read, list, delete each
			g, r := gr(o.Kind)
			add("", "namespaces", why, "get")
			add(g, r, why, "list", "delete")
		case provision.ActionPrune: // drift.go PruneExtraBindings
			add("rbac.authorization.k8s.io", "rolebindings", why, "list", "delete")
		case provision.ActionStopPolicy: // hold.go StopPolicy: read, then apply spec.stopPolicy
			g, r := gr(o.Kind)
			add(g, r, why, "get", "patch")
		case provision.ActionNone, provision.ActionLeave, provision.ActionAWSEnsure, provision.ActionAWSRemove:
		default:
			t.Fatalf("step action %q is new to this test: say which verbs it uses", s.Action)
		}
	}
	// Reads outside plans.
	add("", "namespaces", "adopt.go: read a namespace offered for adoption", "get")
	out[perm{"apps", "daemonsets", "get", "aws-node"}] = "clusterread.go NetworkPolicyAgent: read kube-system/aws-node"
	add("", "nodes", "clusterread.go Nodes: count nodes by instance type", "list")
	add("", "configmaps", "readiness_admission.go KueueConfiguration: read kueue-system/kueue-manager-config", "get")
	add("", "/metrics", "readiness_admission.go AdmissionCounts: the API server's admission policy metrics (non-resource URL)", "get")
	add("kueue.x-k8s.io", "workloads", "workloads.go: a team's Kueue workloads", "list")
	add("kueue.x-k8s.io", "localqueues", "workloads.go: Kueue's count of a LocalQueue's pending workloads", "list")
	add("visibility.kueue.x-k8s.io", "localqueues/pendingworkloads", "workloads.go: a pending workload's place (Kueue's visibility API)", "get")
	// The usage collector's informers (internal/collect/collect.go).
	for _, r := range []string{"namespaces", "nodes", "pods"} {
		add("", r, "usage collector informer", "list", "watch")
	}
	for _, r := range []string{"workloads", "clusterqueues"} {
		add("kueue.x-k8s.io", r, "usage collector informer", "list", "watch")
	}
	// Escalation: the API server lets the portal create or update a Role or
	// ClusterRole only if it already holds every permission in it, or may
	// escalate it; and bind a role only if it holds the role's permissions,
	// or may bind it (https://kubernetes.io/docs/reference/access-authn-authz/rbac/#restrictions-on-role-creation-or-update).
	// A role whose rules the portal holds anyway (for its own reads) needs
	// neither; any other needs escalate and bind on its name (both checks
	// pass the object's name to the authorizer: kubernetes/kubernetes
	// pkg/registry/rbac/escalation_check.go), never on every role: holding
	// a team's permissions cluster-wide (pods/exec, jobs) only to grant
	// them is what issue 32 item 2 took away.
	held := func(g, r, v string) bool { _, ok := out[perm{g, r, v, ""}]; return ok }
	for _, p := range plans {
		for _, o := range p.Objects {
			if o.Kind != "Role" && o.Kind != "ClusterRole" {
				continue
			}
			var role rbacv1.ClusterRole // Role and ClusterRole share rules
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Obj.Object, &role); err != nil {
				t.Fatal(err)
			}
			covered := true
			for _, rule := range role.Rules {
				if len(rule.NonResourceURLs) > 0 {
					t.Fatalf("%s %s has non-resource URLs: this test does not handle them", o.Kind, o.Name)
				}
				for _, g := range rule.APIGroups {
					for _, r := range rule.Resources {
						for _, v := range rule.Verbs {
							covered = covered && held(g, r, v)
						}
					}
				}
			}
			if covered {
				continue
			}
			if o.Kind == "ClusterRole" {
				t.Fatalf("ClusterRole %s grants what the portal does not hold, and its name varies with the team: no resourceNames can let the portal escalate or bind it", o.Name)
			}
			why := "the portal does not hold what " + o.Kind + " " + o.Name + " grants (escalation check)"
			for _, v := range []string{"escalate", "bind"} {
				out[perm{"rbac.authorization.k8s.io", "roles", v, o.Name}] = why
			}
		}
	}
	return out
}

// granted expands rules to (group, resource, verb, name): one per name of
// a rule's resourceNames, or name "" (any) without them.
func granted(t *testing.T, rules []rbacv1.PolicyRule) map[perm]bool {
	t.Helper()
	out := map[perm]bool{}
	for _, r := range rules {
		// A non-resource URL is a perm with the URL as its resource.
		for _, u := range r.NonResourceURLs {
			for _, v := range r.Verbs {
				if !strings.HasPrefix(u, "/") || strings.Contains(u, "*") || v == "*" {
					t.Errorf("the chart's ClusterRole has a wildcard or a bad non-resource URL (%q %q): name each", u, v)
				}
				out[perm{"", u, v, ""}] = true
			}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if g == "*" || res == "*" || v == "*" {
						t.Errorf("the chart's ClusterRole has a wildcard (%q %q %q): name each group, resource and verb", g, res, v)
					}
					if len(r.ResourceNames) == 0 {
						out[perm{g, res, v, ""}] = true
					}
					for _, n := range r.ResourceNames {
						out[perm{g, res, v, n}] = true
					}
				}
			}
		}
	}
	return out
}

// compareRules fails on every permission the code needs that rules lack,
// and every permission rules grant that the code does not use.
func compareRules(t *testing.T, source string, rules []rbacv1.PolicyRule) {
	t.Helper()
	need := needed(t)
	have := granted(t, rules)
	var missing, extra []string
	for p, why := range need {
		if !have[p] {
			missing = append(missing, fmt.Sprintf("%s (%s)", p, why))
		}
	}
	for p := range have {
		if _, ok := need[p]; !ok {
			extra = append(extra, p.String())
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	if len(missing) > 0 {
		t.Errorf("%s: the ClusterRole lacks permissions the portal uses:\n  %s", source, strings.Join(missing, "\n  "))
	}
	if len(extra) > 0 {
		t.Errorf("%s: the ClusterRole grants permissions the portal does not use (remove them, or teach deploy/rbac_test.go where the code uses them):\n  %s", source, strings.Join(extra, "\n  "))
	}
}

// templateExpr is a Go template action in a chart file.
var templateExpr = regexp.MustCompile(`\{\{.*?\}\}`)

// fromTemplate reads the first document of templates/<file> into into,
// without helm: lines that are only a template action are dropped, others
// have theirs replaced by a placeholder (the rules and resource lists hold
// none).
func fromTemplate(t *testing.T, file string, into any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("helm", "templates", file))
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.SplitN(string(b), "\n---\n", 2)[0]
	var lines []string
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "{{") && strings.HasSuffix(strings.TrimSpace(l), "}}") {
			continue
		}
		lines = append(lines, templateExpr.ReplaceAllString(l, "placeholder"))
	}
	if err := yaml.UnmarshalStrict([]byte(strings.Join(lines, "\n")), into); err != nil {
		t.Fatalf("templates/%s: %v", file, err)
	}
}

// clusterRoleFromTemplate reads the ClusterRole (the first document) of
// templates/clusterrole.yaml.
func clusterRoleFromTemplate(t *testing.T) rbacv1.ClusterRole {
	t.Helper()
	var role rbacv1.ClusterRole
	fromTemplate(t, "clusterrole.yaml", &role)
	if role.Kind != "ClusterRole" {
		t.Fatalf("templates/clusterrole.yaml: the first document is a %q, want the ClusterRole", role.Kind)
	}
	return role
}

// TestClusterRoleIsWhatThePortalUses: the chart's ClusterRole grants exactly
// the (group, resource, verb) set the code uses (needed): a permission
// missing fails provisioning on a real cluster, an extra one is more power
// than the portal needs. The same comparison runs on helm's rendering in
// TestChartOnTheTestBed.
func TestClusterRoleIsWhatThePortalUses(t *testing.T) {
	role := clusterRoleFromTemplate(t)
	compareRules(t, "templates/clusterrole.yaml", role.Rules)
	for _, r := range role.Rules {
		for _, v := range r.Verbs {
			switch {
			case v == "impersonate":
				t.Errorf("the ClusterRole grants %q", v)
			case (v == "bind" || v == "escalate") && len(r.ResourceNames) == 0:
				t.Errorf("the ClusterRole grants %q on every %v: name the team roles (resourceNames), or the portal may write and bind any role, cluster-admin's included", v, r.Resources)
			}
		}
	}
}

// policyList is the list literal of the admission policy's variable name
// (templates/admissionpolicy.yaml): its quoted strings, sorted.
func policyList(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("helm", "templates", "admissionpolicy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*- name: ` + name + `\n\s*expression: "\[(.*)\]"$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("templates/admissionpolicy.yaml: no variable %s holding a list literal", name)
	}
	var out []string
	for _, q := range regexp.MustCompile(`'([^']*)'`).FindAllSubmatch(m[1], -1) {
		out = append(out, string(q[1]))
	}
	slices.Sort(out)
	return out
}

// The admission policy refuses the portal the namespaces no contract may
// name: the same built-in names and prefixes as workflow.ReservedNamespace.
func TestAdmissionPolicyReservesWhatContractsMayNotName(t *testing.T) {
	names, prefixes := workflow.ReservedNamespaceRules()
	for variable, want := range map[string][]string{"reservedNames": names, "reservedPrefixes": prefixes} {
		if got := policyList(t, variable); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
			t.Errorf("admission policy variable %s = %q, workflow reserves %q", variable, got, slices.Sorted(slices.Values(want)))
		}
	}
}

// TestAdmissionPolicyAllowsWhatThePlansMake: the admission policy's lists
// of team Roles, their bindings, and what the team Roles and the queue
// readers may grant are exactly what the sample plans make: a rule added
// to a plan's role is refused on the cluster until the policy knows it, and
// the policy lets the portal grant nothing the plans do not.
func TestAdmissionPolicyAllowsWhatThePlansMake(t *testing.T) {
	sets := map[string]map[string]bool{"teamRoles": {}, "teamRoleBindings": {}, "teamRolePermissions": {}, "queueReaderPermissions": {}}
	for _, p := range samplePlans(t) {
		for _, o := range p.Objects {
			var perms map[string]bool
			switch o.Kind {
			case "Role":
				sets["teamRoles"][o.Name] = true
				perms = sets["teamRolePermissions"]
			case "RoleBinding":
				sets["teamRoleBindings"][o.Name] = true
				continue
			case "ClusterRole":
				if o.Name != provision.QueueReaderName(p.Namespace) {
					t.Fatalf("ClusterRole %s is not a queue reader: the admission policy refuses it", o.Name)
				}
				perms = sets["queueReaderPermissions"]
			default:
				continue
			}
			var role rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Obj.Object, &role); err != nil {
				t.Fatal(err)
			}
			for _, r := range role.Rules {
				for _, g := range r.APIGroups {
					for _, res := range r.Resources {
						for _, v := range r.Verbs {
							perms[g+"/"+res+":"+v] = true
						}
					}
				}
			}
		}
	}
	for name, set := range sets {
		want := slices.Sorted(maps.Keys(set))
		if got := policyList(t, name); !slices.Equal(got, want) {
			t.Errorf("admission policy variable %s = %q, the plans make %q", name, got, want)
		}
	}
}

// TestAdmissionPolicyCoversEveryWrite: every (group, resource) the
// ClusterRole lets the portal create, patch, update or delete is matched by
// the admission policy for CREATE, UPDATE and DELETE, so that a kind added
// to the ClusterRole is never written outside the policy's limits.
func TestAdmissionPolicyCoversEveryWrite(t *testing.T) {
	var policy admissionregistrationv1.ValidatingAdmissionPolicy
	fromTemplate(t, "admissionpolicy.yaml", &policy)
	if policy.Kind != "ValidatingAdmissionPolicy" || policy.Spec.MatchConstraints == nil {
		t.Fatalf("templates/admissionpolicy.yaml: the first document is a %q without matchConstraints", policy.Kind)
	}
	matched := map[[2]string]bool{}
	for _, r := range policy.Spec.MatchConstraints.ResourceRules {
		ops := fmt.Sprint(r.Operations)
		if ops != "[CREATE UPDATE DELETE]" {
			t.Errorf("resource rule %v: operations %s, want CREATE, UPDATE and DELETE", r.Resources, ops)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				matched[[2]string{g, res}] = true
			}
		}
	}
	for _, r := range clusterRoleFromTemplate(t).Rules {
		if !slices.ContainsFunc(r.Verbs, func(v string) bool { return slices.Contains([]string{"create", "patch", "update", "delete"}, v) }) {
			continue
		}
		if slices.Equal(r.APIGroups, []string{"admissionregistration.k8s.io"}) {
			// No admission policy runs on policies and bindings (see
			// namedKinds): the ClusterRole must name each one instead.
			if len(r.ResourceNames) == 0 {
				t.Errorf("the ClusterRole lets the portal write every %v: name them (resourceNames), no admission policy can limit them", r.Resources)
			}
			continue
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				if !matched[[2]string{g, res}] {
					t.Errorf("the ClusterRole lets the portal write %s %q (%v), which the admission policy does not match", g, res, r.Verbs)
				}
			}
		}
	}
}
