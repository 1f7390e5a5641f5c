package provision

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// amendedPlans are the plans of version 3 (from) and version 4 (to, the
// contract changed by amend) of connection 7: what an amendment compares.
func amendedPlans(t *testing.T, from workflow.Contract, amend func(*workflow.Contract), s ClusterSettings) (Plan, Plan) {
	t.Helper()
	from = from.Normalize()
	to := from
	to.EgressAllowances = slices.Clone(from.EgressAllowances)
	to.Scheduling.Guaranteed = slices.Clone(from.Scheduling.Guaranteed)
	amend(&to)
	to = to.Normalize()
	if to.Hash() == from.Hash() {
		t.Fatal("the amended contract has the same hash: the test would not exercise a new version")
	}
	a, err := BuildPlan(7, 3, from.Hash(), from, s)
	if err != nil {
		t.Fatal(err)
	}
	b, err := BuildPlan(7, 4, to.Hash(), to, s)
	if err != nil {
		t.Fatal(err)
	}
	return a, b
}

// changed is every row that is not unchanged: What -> action.
func changed(d PlanDiff) map[string]DiffAction {
	out := map[string]DiffAction{}
	for _, c := range d.Changes {
		if c.Action != DiffUnchanged {
			out[c.What] = c.Action
		}
	}
	return out
}

func detailOf(d PlanDiff, what string) string {
	for _, c := range d.Changes {
		if c.What == what {
			return c.Detail
		}
	}
	return ""
}

// twoCIDRs is the example contract with two CIDR egress allowances (the
// example's S3 one is a DNS name, which gets no NetworkPolicy).
func twoCIDRs() workflow.Contract {
	c := workflow.ExampleContract()
	c.EgressAllowances = append(c.EgressAllowances,
		workflow.Egress{Destination: "10.20.0.0/16", Ports: []int{443, 5432}, Reason: "Feature store."},
		workflow.Egress{Destination: "10.30.0.0/16", Ports: []int{443}, Reason: "Model registry."})
	return c
}

func TestDiffPlans(t *testing.T) {
	const (
		quota      = "ResourceQuota hyperpod-ns-red/team-quota"
		cq         = "ClusterQueue hyperpod-ns-red-clusterqueue"
		awsQuota   = "SageMaker compute quota red-quota"
		sa         = "ServiceAccount hyperpod-ns-red/red-workloads"
		podID      = "EKS pod identity hyperpod-ns-red/red-workloads"
		domain     = "SageMaker studio domain red-studio"
		entry      = "EKS access entry arn:aws:iam::111122223333:role/"
		egress1020 = "NetworkPolicy hyperpod-ns-red/allow-egress-10-20-0-0-16"
	)
	for _, tc := range []struct {
		name     string
		contract workflow.Contract
		amend    func(*workflow.Contract)
		settings ClusterSettings
		want     map[string]DiffAction // every row not unchanged
		details  map[string]string     // What -> a substring of its Detail
	}{
		// (a) Nothing but the version stamp changes: the purpose is not
		// part of any object, yet the contract hash and version are
		// stamped on every team object.
		{name: "version stamp only, HyperPod and AWS", contract: workflow.ExampleContract(), settings: awsSettings(),
			amend: func(c *workflow.Contract) { c.BusinessPurpose += " Amended." }, want: map[string]DiffAction{}},
		{name: "version stamp only, portal queues", contract: workflow.ExampleContract(), settings: managedSettings(),
			amend: func(c *workflow.Contract) { c.ReviewCadenceDays = 30 }, want: map[string]DiffAction{}},
		// (b) A bigger guarantee: the quota (and the queue the portal
		// manages, or HyperPod's compute quota) is updated in place.
		{name: "guarantee 2 to 3 instances, HyperPod and AWS", contract: workflow.ExampleContract(), settings: awsSettings(),
			amend: func(c *workflow.Contract) { c.Scheduling.Guaranteed[0].Count = 3 },
			want:  map[string]DiffAction{quota: DiffUpdate, awsQuota: DiffUpdate},
			details: map[string]string{
				quota:    "spec.hard.requests.nvidia.com/gpu: 24 → 36",
				awsQuota: "resources: ml.p5.48xlarge×2 → ml.p5.48xlarge×3",
			}},
		{name: "guarantee 2 to 3 instances, portal queues", contract: workflow.ExampleContract(), settings: managedSettings(),
			amend: func(c *workflow.Contract) { c.Scheduling.Guaranteed[0].Count = 3 },
			want:  map[string]DiffAction{quota: DiffUpdate, cq: DiffUpdate},
			details: map[string]string{
				quota: "spec.hard.requests.nvidia.com/gpu: 24 → 36",
				cq:    "flavors[ml.p5.48xlarge].resources[cpu].nominalQuota: 384 → 576",
			}},
		// (c) An egress allowance removed: its NetworkPolicy goes, the
		// other allowance's stays.
		{name: "egress allowance removed", contract: twoCIDRs(), settings: awsSettings(),
			amend: func(c *workflow.Contract) {
				c.EgressAllowances = slices.DeleteFunc(c.EgressAllowances, func(e workflow.Egress) bool { return e.Destination == "10.20.0.0/16" })
			},
			want:    map[string]DiffAction{egress1020: DiffDelete},
			details: map[string]string{egress1020: "egress to 10.20.0.0/16 on TCP 443, 5432"}},
		// (d) Another access role: EKS identifies an access entry by its
		// principal, so the old role's entry is deleted and the new one's
		// created. The RoleBindings name groups, not roles: unchanged.
		{name: "access role changed", contract: workflow.ExampleContract(), settings: awsSettings(),
			amend: func(c *workflow.Contract) { c.AccessRoleARN = "arn:aws:iam::111122223333:role/red-access-v2" },
			want:  map[string]DiffAction{entry + "red-access": DiffDelete, entry + "red-access-v2": DiffCreate},
			details: map[string]string{
				entry + "red-access":    "EKS cannot move an entry to another principal",
				entry + "red-access-v2": "kubernetesGroups=team-red-submitters",
			}},
		// Another project role: the domain's execution role is updated in
		// place (UpdateDomain), its access entry replaced.
		{name: "project role changed", contract: workflow.ExampleContract(), settings: awsSettings(),
			amend: func(c *workflow.Contract) { c.ProjectRoleARN = "arn:aws:iam::111122223333:role/red-project-v2" },
			want:  map[string]DiffAction{domain: DiffUpdate, entry + "red-project": DiffDelete, entry + "red-project-v2": DiffCreate},
			details: map[string]string{
				domain: "executionRole: arn:aws:iam::111122223333:role/red-project → arn:aws:iam::111122223333:role/red-project-v2",
			}},
		// Another workload role: a Pod Identity association's role can be
		// changed in place, and the ServiceAccount's annotation with it.
		{name: "workload role changed", contract: workflow.ExampleContract(), settings: awsSettings(),
			amend: func(c *workflow.Contract) { c.WorkloadRoleARN = "arn:aws:iam::111122223333:role/red-workload-v2" },
			want:  map[string]DiffAction{sa: DiffUpdate, podID: DiffUpdate},
			details: map[string]string{
				sa:    "metadata.annotations.portal.hyperpod.io/pod-identity-role-arn: arn:aws:iam::111122223333:role/red-workload → arn:aws:iam::111122223333:role/red-workload-v2",
				podID: "roleArn: arn:aws:iam::111122223333:role/red-workload → arn:aws:iam::111122223333:role/red-workload-v2",
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from, to := amendedPlans(t, tc.contract, tc.amend, tc.settings)
			d := DiffPlans(from, to)
			if got := changed(d); !maps.Equal(got, tc.want) {
				t.Errorf("changes:\n got %v\nwant %v", got, tc.want)
			}
			for what, want := range tc.details {
				if got := detailOf(d, what); !strings.Contains(got, want) {
					t.Errorf("%s: detail %q lacks %q", what, got, want)
				}
			}
			if got, want := d.Empty(), len(tc.want) == 0; got != want {
				t.Errorf("Empty() = %v, want %v", got, want)
			}
			// Every object and call of either plan is one row.
			if n := len(d.Changes); n < len(to.Objects)+len(to.AWS) {
				t.Errorf("%d rows for %d objects and %d calls", n, len(to.Objects), len(to.AWS))
			}
			var deletes []string
			for _, o := range d.Deletes() {
				deletes = append(deletes, o.Kind+" "+o.Ref())
			}
			var wantDeletes []string
			for what, a := range tc.want {
				if a == DiffDelete && !strings.HasPrefix(what, "EKS ") {
					wantDeletes = append(wantDeletes, what)
				}
			}
			if !slices.Equal(deletes, wantDeletes) {
				t.Errorf("Deletes() = %v, want %v", deletes, wantDeletes)
			}
		})
	}
}

// TestDiffPlansIgnoresOnlyTheVersionStamp: the stamp differs between the
// two plans (so case (a) above means something), and the connection label
// is not part of the stamp: another connection's objects are updates.
func TestDiffPlansIgnoresOnlyTheVersionStamp(t *testing.T) {
	from, to := amendedPlans(t, workflow.ExampleContract(), func(c *workflow.Contract) { c.BusinessPurpose += " Amended." }, awsSettings())
	q := slices.IndexFunc(from.Objects, func(o Object) bool { return o.Name == NameResourceQuota })
	if from.Objects[q].Obj.GetLabels()[LabelContractVersion] == to.Objects[q].Obj.GetLabels()[LabelContractVersion] ||
		from.Objects[q].Obj.GetAnnotations()[AnnotationContractHash] == to.Objects[q].Obj.GetAnnotations()[AnnotationContractHash] {
		t.Fatal("the two versions' objects carry the same stamp: the version-stamp case proves nothing")
	}
	c := workflow.ExampleContract()
	other, err := BuildPlan(8, 3, c.Hash(), c, awsSettings())
	if err != nil {
		t.Fatal(err)
	}
	d := DiffPlans(from, other)
	if got := detailOf(d, "ResourceQuota hyperpod-ns-red/team-quota"); !strings.Contains(got, "metadata.labels.portal.hyperpod.io/connection: 7 → 8") {
		t.Errorf("another connection's quota: detail %q", got)
	}
}

// TestDiffPlansDeletesOnlyWhatRevocationWould (e): against an empty new plan,
// the diff deletes exactly what revocation in delete mode deletes, in the
// same order, except the namespace; HyperPod's objects, shared objects and
// the namespace are kept, never deleted.
func TestDiffPlansDeletesOnlyWhatRevocationWould(t *testing.T) {
	deleteDomain := awsSettings()
	deleteDomain.AWS.Studio.OnRevoke = awsprov.DomainDelete
	for _, tc := range []struct {
		name     string
		settings ClusterSettings
		kept     []string // the rows kept, in order
	}{
		{"HyperPod and AWS, domain kept on revoke", awsSettings(), []string{
			"LocalQueue hyperpod-ns-red/hyperpod-ns-red-localqueue", "Namespace hyperpod-ns-red", "SageMaker studio domain red-studio",
			"ValidatingAdmissionPolicy hyperpod-portal-contract", "ValidatingAdmissionPolicyBinding hyperpod-portal-contract-warn"}},
		{"HyperPod and AWS, domain deleted on revoke", deleteDomain, []string{
			"LocalQueue hyperpod-ns-red/hyperpod-ns-red-localqueue", "Namespace hyperpod-ns-red",
			"ValidatingAdmissionPolicy hyperpod-portal-contract", "ValidatingAdmissionPolicyBinding hyperpod-portal-contract-warn"}},
		{"portal queues", managedSettings(), []string{
			"Namespace hyperpod-ns-red",
			"ValidatingAdmissionPolicy hyperpod-portal-contract", "ValidatingAdmissionPolicyBinding hyperpod-portal-contract-warn",
			"ResourceFlavor ml.p5.48xlarge", "WorkloadPriorityClass experiment-priority", "WorkloadPriorityClass fine-tuning-priority",
			"WorkloadPriorityClass training-priority", "WorkloadPriorityClass interactive-priority", "WorkloadPriorityClass inference-priority"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := workflow.ExampleContract()
			p, err := BuildPlan(7, 3, c.Hash(), c, tc.settings)
			if err != nil {
				t.Fatal(err)
			}
			d := DiffPlans(p, Plan{})
			var kept []string
			for _, ch := range d.Changes {
				switch ch.Action {
				case DiffKeep:
					kept = append(kept, ch.What)
				case DiffDelete:
					if o := ch.Object; o != nil && (o.Shared || o.Owner != OwnerPortal || o.Kind == "Namespace") {
						t.Errorf("%s is deleted: it is shared, HyperPod's or a namespace", ch.What)
					}
				default:
					t.Errorf("%s: %s against an empty plan", ch.What, ch.Action)
				}
			}
			slices.Sort(kept)
			want := slices.Sorted(slices.Values(tc.kept))
			if !slices.Equal(kept, want) {
				t.Errorf("kept:\n got %q\nwant %q", kept, want)
			}
			if d.Empty() {
				t.Error("removing everything is Empty")
			}

			// The same deletions as revocation in delete mode, in its
			// order: access first, guardrails last.
			var rev []string
			for _, s := range RevocationPlan(p, RevokeDelete) {
				switch {
				case s.Action == ActionDelete && s.Object.Kind != "Namespace",
					s.Action == ActionAWSRemove && !s.AWS.KeepOnRevoke:
					rev = append(rev, s.Name())
				}
			}
			if got := stepNames(d.DeleteSteps()); !slices.Equal(got, rev) {
				t.Errorf("DeleteSteps:\n got %q\nwant %q (RevocationPlan's)", got, rev)
			}
			objs := d.Deletes()
			first := func(kinds ...string) int {
				return slices.IndexFunc(objs, func(o Object) bool { return slices.Contains(kinds, o.Kind) })
			}
			if first("RoleBinding") > first("ResourceQuota", "NetworkPolicy", "LimitRange") {
				t.Errorf("Deletes() removes a guardrail before access: %v", stepNames(d.DeleteSteps()))
			}
		})
	}
}

func TestPlanDiffRowsAndCap(t *testing.T) {
	from, to := amendedPlans(t, workflow.ExampleContract(), func(c *workflow.Contract) { c.Scheduling.Guaranteed[0].Count = 3 }, managedSettings())
	d := DiffPlans(from, to)
	rows := d.Rows()
	if len(rows) != len(d.Changes) {
		t.Fatalf("%d rows for %d changes", len(rows), len(d.Changes))
	}
	i := slices.IndexFunc(rows, func(r DiffRow) bool { return strings.HasPrefix(r.What, "ClusterQueue ") })
	if i < 0 || rows[i].Action != "update" {
		t.Fatalf("no ClusterQueue update row: %v", rows)
	}
	// Six quantities change (cpu, memory, gpu: nominal and borrowing):
	// the detail names four and counts the rest.
	if got := rows[i].Detail; strings.Count(got, " → ") != maxDiffPaths || !strings.HasSuffix(got, "; and 2 more") {
		t.Errorf("ClusterQueue detail: %q", got)
	}
	if d.Count(DiffUpdate) != 2 || d.Count(DiffCreate) != 0 || d.Count(DiffDelete) != 0 {
		t.Errorf("counts: %d updates, %d creates, %d deletes", d.Count(DiffUpdate), d.Count(DiffCreate), d.Count(DiffDelete))
	}
}

// TestDiffPlansNeverWritesCheckedObjects: HyperPod's LocalQueue, which the
// portal only checks (OwnerHyperPodChecked), is kept when the plans differ
// on it, never updated, and never created by the portal.
func TestDiffPlansNeverWritesCheckedObjects(t *testing.T) {
	c := workflow.ExampleContract()
	p, err := BuildPlan(7, 3, c.Hash(), c, DefaultClusterSettings())
	if err != nil {
		t.Fatal(err)
	}
	q := p
	q.Objects = slices.Clone(p.Objects)
	i := slices.IndexFunc(q.Objects, func(o Object) bool { return o.Owner == OwnerHyperPodChecked })
	if i < 0 {
		t.Fatal("no checked object in the HyperPod-mode plan")
	}
	q.Objects[i].Obj = q.Objects[i].Obj.DeepCopy()
	q.Objects[i].Obj.Object["spec"] = map[string]any{"clusterQueue": "someone-elses"}
	d := DiffPlans(p, q)
	what := q.Objects[i].Kind + " " + q.Objects[i].Ref()
	if got := changed(d); !maps.Equal(got, map[string]DiffAction{what: DiffKeep}) || !d.Empty() {
		t.Errorf("a checked object that differs: %v (Empty %v), want only %s kept", got, d.Empty(), what)
	}
	if got := changed(DiffPlans(Plan{}, p))[what]; got != DiffKeep {
		t.Errorf("a checked object only in the new plan is %q, want keep: HyperPod creates it", got)
	}
}
