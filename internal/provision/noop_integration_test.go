package provision_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// No-op reconcile (issue 15, snapshot.go) on the real API server: the drift
// check and the re-apply of unchanged tenants read one list per kind and
// write nothing; an object someone else changed or deleted is found and is
// the only one written.

// noopTenants approves and provisions n tenants through the worker and
// waits for their quotas' status, so that nothing moves under the checks.
func (b *wbed) noopTenants(ctx context.Context, prefix string, n int) []wintTenant {
	b.tb.Helper()
	b.setInventory(ctx, n)
	run := wintRandom(b.tb)
	tenants := make([]wintTenant, n)
	for i := range tenants {
		tenants[i] = b.approve(ctx, fmt.Sprintf("%s%s-%03d", prefix, run, i), b.plans)
	}
	b.warm(tenants[0].plan)
	w := b.worker("noop")
	for range tenants {
		b.runOnce(ctx, w)
	}
	for _, tn := range tenants {
		if s := b.state(ctx, tn.conn.ID); s != workflow.StateActive {
			b.tb.Fatalf("%s is %s after provisioning, want active", tn.team, s)
		}
		b.settleQuota(ctx, tn)
	}
	return tenants
}

// noopStart is the tests' set-up: a worker bed, a context that ends
// within 3 minutes, three tenants provisioned through the worker (team
// names starting with prefix), their plans and how many kinds those hold.
func noopStart(t *testing.T, prefix string) (*wbed, context.Context, []wintTenant, []provision.Plan, int) {
	t.Helper()
	b := newWBed(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	t.Cleanup(cancel)
	tenants := b.noopTenants(ctx, prefix, 3)
	plans := noopPlans(tenants)
	return b, ctx, tenants, plans, noopKinds(plans)
}

func noopPlans(tenants []wintTenant) []provision.Plan {
	out := make([]provision.Plan, len(tenants))
	for i, tn := range tenants {
		out[i] = tn.plan
	}
	return out
}

// noopKinds is how many kinds the plans hold: the lists a snapshot takes.
func noopKinds(plans []provision.Plan) int {
	kinds := map[string]bool{}
	for _, p := range plans {
		for _, o := range p.Objects {
			kinds[o.Obj.GroupVersionKind().GroupKind().String()] = true
		}
	}
	return len(kinds)
}

// versions are the resourceVersions of every object of the tenants, read
// with the uncounted client: "team Kind ref" -> version ("(none)" when it
// does not exist).
func (b *wbed) versions(ctx context.Context, tenants []wintTenant) map[string]string {
	b.tb.Helper()
	out := map[string]string{}
	for _, tn := range tenants {
		for i, o := range tn.plan.Objects {
			live, err := b.live(ctx, o)
			if apierrors.IsNotFound(err) {
				out[tn.team+" "+tn.names[i]] = "(none)"
				continue
			}
			if err != nil {
				b.tb.Fatalf("%s of %s: %v", tn.names[i], tn.team, err)
			}
			out[tn.team+" "+tn.names[i]] = live.GetResourceVersion()
		}
	}
	return out
}

// changedVersions lists the objects whose resourceVersion differs between
// two readings.
func changedVersions(before, after map[string]string) []string {
	var out []string
	for k, v := range before {
		if after[k] != v {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// (a) A re-apply and a drift check of unchanged tenants issue exactly one
// list per kind (GETs, nothing else), write nothing and leave every
// resourceVersion as it was; so does the drift checker over the store's
// provisioned connections, and a re-apply job of one of them.
func TestNoopReconcileIntegration(t *testing.T) {
	b, ctx, tenants, plans, kinds := noopStart(t, "noop")
	before := b.versions(ctx, tenants)

	onlyLists := func(what string) {
		t.Helper()
		byMethod, total, _, writes := b.counter.Counts()
		if total != kinds || byMethod[http.MethodGet] != kinds || writes != 0 {
			t.Errorf("%s: %d requests %v, %d writes; want %d lists (one per kind) and no write", what, total, byMethod, writes, kinds)
		}
	}

	b.counter.Reset()
	res, err := b.applier.Reconcile(ctx, plans)
	if err != nil {
		t.Fatal(err)
	}
	onlyLists("re-apply of 3 unchanged tenants")
	for i, r := range res {
		if r.Err != nil || len(r.Pruned) != 0 {
			t.Errorf("re-apply of %s: %v, pruned %v", tenants[i].team, r.Err, r.Pruned)
		}
		for j, s := range r.Steps {
			if s.Outcome != provision.Unchanged || s.ResourceVersion != before[tenants[i].team+" "+tenants[i].names[j]] {
				t.Errorf("re-apply %s of %s = %s at %s; want unchanged at %s", tenants[i].names[j], tenants[i].team, s.Outcome, s.ResourceVersion, before[tenants[i].team+" "+tenants[i].names[j]])
			}
		}
	}

	b.counter.Reset()
	for i, r := range b.applier.DriftAll(ctx, plans) {
		if r.Err != nil || len(r.Items) != 0 {
			t.Errorf("drift of unchanged %s: %v, %v", tenants[i].team, r.Items, r.Err)
		}
	}
	onlyLists("drift check of 3 unchanged tenants")

	checker := &provision.DriftChecker{
		List:     b.provisionedOf(tenants),
		Plans:    b.plans,
		CheckAll: provision.DriftAllOf(b.applier, nil),
		Save:     b.db.SaveDrift,
		Clock:    b.clock.Now,
	}
	b.counter.Reset()
	if n, err := checker.RunOnce(ctx); err != nil || n != 0 {
		t.Errorf("drift checker over unchanged tenants: %d drifted, %v", n, err)
	}
	onlyLists("the drift checker's run")

	// A re-apply job of one tenant: its snapshot is one list per kind
	// too, and every step is unchanged at the version it had.
	tn := tenants[1]
	job, err := b.db.EnqueueReapply(ctx, tn.conn.ID, b.admin, "re-apply, nothing changed", b.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	b.counter.Reset()
	b.runOnce(ctx, b.worker("noop"))
	// The worker reads the namespace once before any job's steps (the
	// foreign-namespace check, Worker.steps); then the snapshot's lists.
	if byMethod, total, _, writes := b.counter.Counts(); total != kinds+1 || byMethod[http.MethodGet] != kinds+1 || writes != 0 {
		t.Errorf("a re-apply job: %d requests %v, %d writes; want the namespace check and %d lists (one per kind), no write", total, byMethod, writes, kinds)
	}
	if j := b.job(ctx, job.ID); j.State != workflow.JobSucceeded {
		t.Fatalf("re-apply job = %s: %s", j.State, j.LastError)
	}
	for _, s := range b.steps(ctx, job.ID) {
		want := provision.Unchanged
		if i := slices.Index(tn.names, s.Name); i >= 0 {
			if s.Outcome != string(want) || s.Detail != "resourceVersion "+before[tn.team+" "+tn.names[i]] {
				t.Errorf("re-apply job step %s = %s %q", s.Name, s.Outcome, s.Detail)
			}
		} else if s.Outcome != string(want) {
			t.Errorf("re-apply job step %s = %s %q, want unchanged", s.Name, s.Outcome, s.Detail)
		}
	}

	if ch := changedVersions(before, b.versions(ctx, tenants)); len(ch) != 0 {
		t.Errorf("resourceVersions changed by a no-op reconcile: %v", ch)
	}
}

// provisionedOf is a DriftChecker.List of the store's provisioned
// connections among tenants (other tests' objects share the cluster, not
// the store, but keep the check to these).
func (b *wbed) provisionedOf(tenants []wintTenant) func(context.Context) ([]provision.ConnVersion, error) {
	ids := map[int64]bool{}
	for _, tn := range tenants {
		ids[tn.conn.ID] = true
	}
	return func(ctx context.Context) ([]provision.ConnVersion, error) {
		ps, err := b.db.Provisioned(ctx)
		var out []provision.ConnVersion
		for _, p := range ps {
			if ids[p.ConnectionID] {
				out = append(out, provision.ConnVersion{ConnectionID: p.ConnectionID, Version: p.Version})
			}
		}
		return out, err
	}
}

// (b) Someone else edits one tenant's quota (the spec, leaving the
// contract hash annotation as it was) and deletes another's NetworkPolicy:
// the drift check finds exactly those two, and the re-apply writes exactly
// those two and nothing else, after which there is no drift.
func TestNoopReconcileFindsAndRestoresIntegration(t *testing.T) {
	b, ctx, tenants, plans, kinds := noopStart(t, "nchg")

	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("PORTAL_TEST_KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	kc := kubernetes.NewForConfigOrDie(cfg)
	edited, deleted := tenants[0], tenants[2]
	q, err := kc.CoreV1().ResourceQuotas(edited.plan.Namespace).Get(ctx, provision.NameResourceQuota, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hash := q.Annotations[provision.AnnotationContractHash]
	if hash != edited.plan.ContractHash {
		t.Fatalf("quota annotation %q, want the contract hash %q", hash, edited.plan.ContractHash)
	}
	gpu := q.Spec.Hard[corev1.ResourceName("requests.nvidia.com/gpu")]
	gpu.Add(gpu) // doubled by hand; the annotation stays
	q.Spec.Hard[corev1.ResourceName("requests.nvidia.com/gpu")] = gpu
	if _, err := kc.CoreV1().ResourceQuotas(edited.plan.Namespace).Update(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kc.NetworkingV1().NetworkPolicies(deleted.plan.Namespace).Delete(ctx, provision.NamePolicyDNS, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	b.settleQuota(ctx, edited)
	before := b.versions(ctx, tenants)
	b.counter.Reset()
	res := b.applier.DriftAll(ctx, plans)
	var found []string
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("drift of %s: %v", tenants[i].team, r.Err)
		}
		for _, it := range r.Items {
			found = append(found, fmt.Sprintf("%s: %s %s %s %v", tenants[i].team, it.Kind, it.Ref, it.What, it.Fields))
		}
	}
	want := []string{
		fmt.Sprintf("%s: ResourceQuota %s/%s changed [spec.hard.requests.nvidia.com/gpu]", edited.team, edited.plan.Namespace, provision.NameResourceQuota),
		fmt.Sprintf("%s: NetworkPolicy %s/%s deleted []", deleted.team, deleted.plan.Namespace, provision.NamePolicyDNS),
	}
	if !slices.Equal(found, want) {
		t.Errorf("drift found:\n%s\nwant:\n%s", strings.Join(found, "\n"), strings.Join(want, "\n"))
	}
	// The lists, then a dry-run apply to confirm the changed object and a
	// GET of the one the lists did not return.
	// (The counter would call the dry run a write: its answer carries the
	// version of the hand edit, which the counted client never saw; the
	// versions below show that nothing was written.)
	if byMethod, total, _, _ := b.counter.Counts(); total != kinds+2 || byMethod[http.MethodPatch] != 1 {
		t.Errorf("drift check: %d requests %v; want %d lists, one dry run, one GET", total, byMethod, kinds)
	}
	if ch := changedVersions(before, b.versions(ctx, tenants)); len(ch) != 0 {
		t.Errorf("the drift check wrote %v", ch)
	}

	b.counter.Reset()
	rec, err := b.applier.Reconcile(ctx, plans)
	if err != nil {
		t.Fatal(err)
	}
	var applied []string
	for i, r := range rec {
		if r.Err != nil || len(r.Pruned) != 0 {
			t.Errorf("re-apply of %s: %v, pruned %v", tenants[i].team, r.Err, r.Pruned)
		}
		for j, s := range r.Steps {
			if s.Outcome != provision.Unchanged {
				applied = append(applied, fmt.Sprintf("%s: %s %s", tenants[i].team, tenants[i].names[j], s.Outcome))
			}
		}
	}
	wantApplied := []string{
		fmt.Sprintf("%s: ResourceQuota %s/%s configured", edited.team, edited.plan.Namespace, provision.NameResourceQuota),
		fmt.Sprintf("%s: NetworkPolicy %s/%s created", deleted.team, deleted.plan.Namespace, provision.NamePolicyDNS),
	}
	if !slices.Equal(applied, wantApplied) {
		t.Errorf("re-apply applied:\n%s\nwant:\n%s", strings.Join(applied, "\n"), strings.Join(wantApplied, "\n"))
	}
	if _, _, nonGet, writes := b.counter.Counts(); nonGet != 2 || writes != 2 {
		t.Errorf("re-apply: %d non-GET requests, %d writes; want the two objects' applies only", nonGet, writes)
	}
	changed := changedVersions(before, b.versions(ctx, tenants))
	wantChanged := []string{
		fmt.Sprintf("%s NetworkPolicy %s/%s", deleted.team, deleted.plan.Namespace, provision.NamePolicyDNS),
		fmt.Sprintf("%s ResourceQuota %s/%s", edited.team, edited.plan.Namespace, provision.NameResourceQuota),
	}
	slices.Sort(wantChanged)
	if !slices.Equal(changed, wantChanged) {
		t.Errorf("objects written by the re-apply: %v, want %v", changed, wantChanged)
	}
	for i, r := range b.applier.DriftAll(ctx, plans) {
		if r.Err != nil || len(r.Items) != 0 {
			t.Errorf("drift of %s after the re-apply: %v, %v", tenants[i].team, r.Items, r.Err)
		}
	}
}
