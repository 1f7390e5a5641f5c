package provision_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
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

// driftFound is what a drift check of the tenants found, one line per
// item: "team: Kind ref what [fields]".
func driftFound(t *testing.T, tenants []wintTenant, res []provision.DriftResult) []string {
	t.Helper()
	var found []string
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("drift of %s: %v", tenants[i].team, r.Err)
		}
		for _, it := range r.Items {
			found = append(found, fmt.Sprintf("%s: %s %s %s %v", tenants[i].team, it.Kind, it.Ref, it.What, it.Fields))
		}
	}
	return found
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

// queueReapply queues a re-apply job of each tenant, as an admin's
// Re-apply does, and returns the jobs' IDs.
func (b *wbed) queueReapply(ctx context.Context, tenants []wintTenant) []int64 {
	b.tb.Helper()
	ids := make([]int64, len(tenants))
	for i, tn := range tenants {
		j, err := b.db.EnqueueReapply(ctx, tn.conn.ID, b.admin, "re-apply", b.clock.Now())
		if err != nil {
			b.tb.Fatal(err)
		}
		ids[i] = j.ID
	}
	return ids
}

// runJobs runs the worker until no job is due.
func (b *wbed) runJobs(ctx context.Context, w *provision.Worker) {
	b.tb.Helper()
	for {
		did, err := w.RunOnce(ctx)
		if err != nil {
			b.tb.Fatalf("RunOnce: %v", err)
		}
		if !did {
			return
		}
	}
}

// reapplied is what the re-apply jobs did: for each tenant, each object's
// step "outcome detail" by "Kind ref", and the prune step's outcome under
// "prune". A job that did not succeed fails the test.
func (b *wbed) reapplied(ctx context.Context, tenants []wintTenant, ids []int64) []map[string]string {
	b.tb.Helper()
	out := make([]map[string]string, len(tenants))
	for i, id := range ids {
		if j := b.job(ctx, id); j.State != workflow.JobSucceeded {
			b.tb.Fatalf("re-apply job of %s = %s: %s", tenants[i].team, j.State, j.LastError)
		}
		out[i] = map[string]string{}
		for _, s := range b.steps(ctx, id) {
			name := s.Name
			if !slices.Contains(tenants[i].names, name) {
				name = "prune"
			}
			out[i][name] = strings.TrimSpace(s.Outcome + " " + s.Detail)
		}
	}
	return out
}

// allUnchanged fails the test unless every re-apply job of ids succeeded
// with each object's step unchanged at the resourceVersion before held
// for it, and its prune step unchanged.
func (b *wbed) allUnchanged(ctx context.Context, tenants []wintTenant, ids []int64, before map[string]string) {
	b.tb.Helper()
	for i, steps := range b.reapplied(ctx, tenants, ids) {
		tn := tenants[i]
		for _, name := range tn.names {
			if want := "unchanged resourceVersion " + before[tn.team+" "+name]; steps[name] != want {
				b.tb.Errorf("re-apply of %s: %s = %q, want %q", tn.team, name, steps[name], want)
			}
		}
		if !strings.HasPrefix(steps["prune"], "unchanged") {
			b.tb.Errorf("re-apply of %s: prune = %q, want unchanged", tn.team, steps["prune"])
		}
	}
}

// (a) A re-apply and a drift check of unchanged tenants issue exactly one
// list per kind (GETs, nothing else), write nothing and leave every
// resourceVersion as it was; so does the drift checker over the store's
// provisioned connections, and a re-apply job of one of them.
func TestNoopReconcileIntegration(t *testing.T) {
	t.Parallel() // its own run id, database and tenants; one of the longest, run beside the others (make test, -parallel)
	b, ctx, tenants, plans, kinds := noopStart(t, "noop")
	before := b.versions(ctx, tenants)

	onlyLists := func(what string) {
		t.Helper()
		byMethod, total, _, writes := b.counter.Counts()
		if total != kinds || byMethod[http.MethodGet] != kinds || writes != 0 {
			t.Errorf("%s: %d requests %v, %d writes; want %d lists (one per kind) and no write", what, total, byMethod, writes, kinds)
		}
	}

	// A re-apply job of each tenant, as an admin's Re-apply queues them:
	// the worker runs them together from one snapshot, which also answers
	// their foreign-namespace checks (reapplybatch.go), so one list per
	// kind for the three; every step is unchanged at the version it had.
	// The store records the three together: one transaction for their
	// starts, one for their steps, one for their completions.
	ids := b.queueReapply(ctx, tenants)
	b.counter.Reset()
	w, rec := b.worker("noop"), &callsStore{DB: b.db}
	w.Store = rec
	var planned []int
	w.PlansAll = func(ctx context.Context, refs []provision.ConnVersion) ([]provision.Plan, []error, error) {
		planned = append(planned, len(refs))
		return b.plansAll(ctx, refs)
	}
	b.runJobs(ctx, w)
	onlyLists("3 re-apply jobs")
	b.allUnchanged(ctx, tenants, ids, before)
	if got, want := rec.String(), "StartJobs 3, StepsDoneAll 3, CompleteJobs 3"; got != want {
		t.Errorf("the store recorded the batch as %s; want %s", got, want)
	}
	if fmt.Sprint(planned) != "[3]" {
		t.Errorf("PlansAll planned batches of %v jobs; want one of 3", planned)
	}

	// A store that refuses to record the jobs together (as for a lost
	// lease) and plans that cannot be read at once: each job is planned
	// and recorded on its own, and every job still succeeds.
	ids = b.queueReapply(ctx, tenants)
	w, rec = b.worker("noop"), &callsStore{DB: b.db, refuse: true}
	w.Store = rec
	w.PlansAll = func(context.Context, []provision.ConnVersion) ([]provision.Plan, []error, error) {
		return nil, nil, errors.New("the database is away")
	}
	b.runJobs(ctx, w)
	b.allUnchanged(ctx, tenants, ids, before)
	if got, want := rec.String(), "StartJob 3, StepsDone 3, CompleteJob 3"; got != want {
		t.Errorf("after refused batches the store recorded %s; want %s", got, want)
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

	if ch := changedVersions(before, b.versions(ctx, tenants)); len(ch) != 0 {
		t.Errorf("resourceVersions changed by a no-op reconcile: %v", ch)
	}
}

// appliedBy lists the steps of re-apply jobs that were not unchanged, as
// "team: Kind ref outcome", in the plans' order.
func appliedBy(tenants []wintTenant, steps []map[string]string) []string {
	var out []string
	for i, tn := range tenants {
		for _, name := range append(slices.Clone(tn.names), "prune") {
			if outcome, _, _ := strings.Cut(steps[i][name], " "); outcome != string(provision.Unchanged) {
				out = append(out, fmt.Sprintf("%s: %s %s", tn.team, name, outcome))
			}
		}
	}
	return out
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
	found := driftFound(t, tenants, b.applier.DriftAll(ctx, plans))
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

	ids := b.queueReapply(ctx, tenants)
	b.counter.Reset()
	b.runJobs(ctx, b.worker("nchg"))
	applied := appliedBy(tenants, b.reapplied(ctx, tenants, ids))
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

// (c) Edits inside atomic fields (issue 15 review): NetworkPolicy's
// ingress and its peers are +listType=atomic and a LabelSelector is
// +structType=atomic, so a server-side apply replaces them whole. Someone
// (kubectl edit, an Update under the field manager "kubectl-edit") gives
// the same-namespace peer a namespaceSelector: {} (it then admits every
// namespace) and gives the default-deny policy's podSelector a matchLabels
// (it then selects no pod). Every value the plan sets is still there, so
// comparing values alone calls both unchanged; the drift check must report
// both and the re-apply must restore both.
func TestNoopReconcileAtomicEditIntegration(t *testing.T) {
	b := newWBed(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	tenants := b.noopTenants(ctx, "natm", 2)
	plans := noopPlans(tenants)
	tn := tenants[0]

	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("PORTAL_TEST_KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	kc := kubernetes.NewForConfigOrDie(cfg)
	nps := kc.NetworkingV1().NetworkPolicies(tn.plan.Namespace)
	edit := metav1.UpdateOptions{FieldManager: "kubectl-edit"}
	same, err := nps.Get(ctx, provision.NamePolicySameNamespace, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(same.Spec.Ingress) != 1 || len(same.Spec.Ingress[0].From) != 1 || same.Spec.Ingress[0].From[0].NamespaceSelector != nil {
		t.Fatalf("the same-namespace policy's ingress is %+v, not one same-namespace peer", same.Spec.Ingress)
	}
	same.Spec.Ingress[0].From[0].NamespaceSelector = &metav1.LabelSelector{} // every namespace
	if _, err := nps.Update(ctx, same, edit); err != nil {
		t.Fatal(err)
	}
	deny, err := nps.Get(ctx, provision.NamePolicyDefaultDeny, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deny.Spec.PodSelector.MatchLabels = map[string]string{"nobody": "matches"} // selects no pod
	if _, err := nps.Update(ctx, deny, edit); err != nil {
		t.Fatal(err)
	}

	found := driftFound(t, tenants, b.applier.DriftAll(ctx, plans))
	want := []string{
		fmt.Sprintf("%s: NetworkPolicy %s/%s changed [spec.podSelector.matchLabels]", tn.team, tn.plan.Namespace, provision.NamePolicyDefaultDeny),
		fmt.Sprintf("%s: NetworkPolicy %s/%s changed [spec.ingress]", tn.team, tn.plan.Namespace, provision.NamePolicySameNamespace),
	}
	if !slices.Equal(found, want) {
		t.Errorf("drift found:\n%s\nwant:\n%s", strings.Join(found, "\n"), strings.Join(want, "\n"))
	}

	ids := b.queueReapply(ctx, tenants)
	b.runJobs(ctx, b.worker("natm"))
	applied := appliedBy(tenants, b.reapplied(ctx, tenants, ids))
	wantApplied := []string{
		fmt.Sprintf("%s: NetworkPolicy %s/%s configured", tn.team, tn.plan.Namespace, provision.NamePolicyDefaultDeny),
		fmt.Sprintf("%s: NetworkPolicy %s/%s configured", tn.team, tn.plan.Namespace, provision.NamePolicySameNamespace),
	}
	if !slices.Equal(applied, wantApplied) {
		t.Errorf("re-apply applied:\n%s\nwant:\n%s", strings.Join(applied, "\n"), strings.Join(wantApplied, "\n"))
	}
	if same, err = nps.Get(ctx, provision.NamePolicySameNamespace, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if same.Spec.Ingress[0].From[0].NamespaceSelector != nil {
		t.Errorf("after the re-apply the same-namespace peer still admits %v", same.Spec.Ingress[0].From[0].NamespaceSelector)
	}
	if deny, err = nps.Get(ctx, provision.NamePolicyDefaultDeny, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if len(deny.Spec.PodSelector.MatchLabels) != 0 {
		t.Errorf("after the re-apply default-deny selects %v", deny.Spec.PodSelector.MatchLabels)
	}
	for i, r := range b.applier.DriftAll(ctx, plans) {
		if r.Err != nil || len(r.Items) != 0 {
			t.Errorf("drift of %s after the re-apply: %v, %v", tenants[i].team, r.Items, r.Err)
		}
	}
}

// pathRecorder is an Applier on the test bed's API server that records
// each request as "METHOD path?query".
type pathRecorder struct {
	mu   sync.Mutex
	reqs []string
}

func (b *wbed) recordingApplier() (*provision.Applier, *pathRecorder) {
	b.tb.Helper()
	rec := &pathRecorder{}
	cfg := rest.CopyConfig(b.cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTrip(func(r *http.Request) (*http.Response, error) {
			rec.mu.Lock()
			rec.reqs = append(rec.reqs, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
			rec.mu.Unlock()
			return rt.RoundTrip(r)
		})
	}
	a, err := provision.NewApplier(cfg)
	if err != nil {
		b.tb.Fatal(err)
	}
	return a, rec
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// take returns the requests recorded since the last take, but the API
// discovery's (/api, /apis and their groups, read once per Applier).
func (r *pathRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, q := range r.reqs {
		path := strings.SplitN(q, "?", 2)[0]
		if n := strings.Count(path, "/"); path == "GET /api" || path == "GET /apis" ||
			(strings.HasPrefix(path, "GET /api/") && n <= 2) || (strings.HasPrefix(path, "GET /apis/") && n <= 3) {
			continue
		}
		out = append(out, q)
	}
	r.reqs = nil
	return out
}

// (d) The snapshot of one plan lists each namespaced kind in the plan's
// namespace alone, label selector or not; and the drift check of a plan
// whose namespace does not exist yet (a draft's, on its detail page) lists
// nothing but namespaces, reads no object of that namespace, and reports
// every object deleted.
func TestSnapshotOfOnePlanIntegration(t *testing.T) {
	b := newWBed(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	tn := b.noopTenants(ctx, "nnar", 1)[0]
	a, rec := b.recordingApplier()
	if items, err := a.Drift(ctx, tn.plan); err != nil || len(items) != 0 {
		t.Fatalf("drift of an unchanged tenant: %v, %v", items, err)
	}
	reqs := rec.take()
	if len(reqs) != noopKinds([]provision.Plan{tn.plan}) {
		t.Errorf("drift of one plan sent %d requests, want one list per kind:\n%s", len(reqs), strings.Join(reqs, "\n"))
	}
	namespaced := 0
	for _, r := range reqs {
		if strings.Contains(r, "/namespaces/") {
			namespaced++
			if !strings.Contains(r, "/namespaces/"+tn.plan.Namespace+"/") {
				t.Errorf("a list outside the plan's namespace: %s", r)
			}
		}
	}
	if namespaced < 5 {
		t.Errorf("only %d lists in the plan's namespace:\n%s", namespaced, strings.Join(reqs, "\n"))
	}

	// A draft: its plan, never applied; its namespace does not exist.
	c := wintContract("nnardraft" + wintRandom(t))
	draft, err := provision.BuildPlan(999999, 1, c.Normalize().Hash(), c, b.settings)
	if err != nil {
		t.Fatal(err)
	}
	items, err := a.Drift(ctx, draft)
	if err != nil {
		t.Fatal(err)
	}
	// Every object of its namespace, and the namespace, is deleted (the
	// cluster-scoped objects shared by every team's plan exist).
	got := map[string]string{}
	for _, it := range items {
		got[it.Kind+" "+it.Ref] = it.What
	}
	for _, o := range draft.Objects {
		if (o.Namespace == draft.Namespace || o.Kind == "Namespace") && got[o.Kind+" "+o.Ref()] != "deleted" {
			t.Errorf("drift of a draft: %s %s is %q, want deleted", o.Kind, o.Ref(), got[o.Kind+" "+o.Ref()])
		}
	}
	for _, r := range rec.take() {
		switch {
		case strings.Contains(r, "/namespaces/"+draft.Namespace+"/"):
			t.Errorf("drift of a draft read inside its absent namespace: %s", r)
		case strings.Contains(r, "limit=") && !strings.HasPrefix(r, "GET /api/v1/namespaces?"):
			t.Errorf("drift of a draft listed more than namespaces: %s", r)
		}
	}
}

// (e) The drift checker's batches share the lists it takes without a label
// selector across namespaces (every RoleBinding): one such list per pass,
// not one per batch.
func TestDriftCheckerListsRoleBindingsOncePerPassIntegration(t *testing.T) {
	b := newWBed(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	tenants := b.noopTenants(ctx, "nrbp", 4)
	a, rec := b.recordingApplier()
	checker := &provision.DriftChecker{
		List:     b.provisionedOf(tenants),
		Plans:    b.plans,
		CheckAll: provision.DriftAllOf(a, nil),
		Batch:    2,
		Save:     b.db.SaveDrift,
		Clock:    b.clock.Now,
	}
	if n, err := checker.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("drift checker over unchanged tenants: %d drifted, %v", n, err)
	}
	reqs := rec.take()
	all := 0
	for _, r := range reqs {
		if strings.HasPrefix(r, "GET /apis/rbac.authorization.k8s.io/v1/rolebindings?") {
			all++
		}
	}
	if all != 1 {
		t.Errorf("two batches listed every RoleBinding %d times, want once:\n%s", all, strings.Join(reqs, "\n"))
	}
}

// callsStore is the store, counting the jobs each of the job-recording
// methods the re-apply batch uses was given; with refuse, StartJobs,
// StepsDoneAll and CompleteJobs refuse as the store does when a job must
// be recorded on its own, writing nothing.
type callsStore struct {
	*store.DB
	refuse bool
	mu     sync.Mutex
	calls  map[string]int
	order  []string
}

func (c *callsStore) count(method string, jobs int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	if _, ok := c.calls[method]; !ok {
		c.order = append(c.order, method)
	}
	c.calls[method] += jobs
}

// String is "method jobs, ..." in the order the methods were first called.
func (c *callsStore) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, m := range c.order {
		out = append(out, fmt.Sprintf("%s %d", m, c.calls[m]))
	}
	return strings.Join(out, ", ")
}

func (c *callsStore) StartJob(ctx context.Context, jobID int64, owner, hash string, steps []string, dryRun bool, now time.Time) error {
	c.count("StartJob", 1)
	return c.DB.StartJob(ctx, jobID, owner, hash, steps, dryRun, now)
}

func (c *callsStore) StartJobs(ctx context.Context, owner string, starts []workflow.JobStart, dryRun bool, now time.Time) error {
	if c.refuse {
		return store.ErrBatchRefused
	}
	c.count("StartJobs", len(starts))
	return c.DB.StartJobs(ctx, owner, starts, dryRun, now)
}

func (c *callsStore) StepsDone(ctx context.Context, jobID int64, owner string, steps []workflow.JobStep, now time.Time, lease time.Duration) error {
	c.count("StepsDone", 1)
	return c.DB.StepsDone(ctx, jobID, owner, steps, now, lease)
}

func (c *callsStore) StepsDoneAll(ctx context.Context, owner string, steps []workflow.JobStep, now time.Time, lease time.Duration) error {
	if c.refuse {
		return store.ErrBatchRefused
	}
	jobs := map[int64]bool{}
	for _, s := range steps {
		jobs[s.JobID] = true
	}
	c.count("StepsDoneAll", len(jobs))
	return c.DB.StepsDoneAll(ctx, owner, steps, now, lease)
}

func (c *callsStore) CompleteJob(ctx context.Context, jobID int64, owner string, now time.Time) error {
	c.count("CompleteJob", 1)
	return c.DB.CompleteJob(ctx, jobID, owner, now)
}

func (c *callsStore) CompleteJobs(ctx context.Context, owner string, ids []int64, now time.Time) error {
	if c.refuse {
		return store.ErrBatchRefused
	}
	c.count("CompleteJobs", len(ids))
	return c.DB.CompleteJobs(ctx, owner, ids, now)
}
