package deploy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	applyrbacv1 "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TestClusterRoleProvisionsOnTheTestBed: with nothing but the chart's
// ClusterRole and admission policy (helm's rendering of
// templates/serviceaccount.yaml, clusterrole.yaml and
// admissionpolicy.yaml, applied by kubectl), the provisioner, acting as the
// chart's ServiceAccount, applies a plan on the test bed's real API server
// (its escalation checks included: the team Roles are written and bound
// only because the ClusterRole may escalate and bind those names),
// re-applies it, checks it for drift, holds and releases its queues,
// re-applies with pruning, reads the cluster as the readiness checks do,
// and revokes it. TestClusterRoleIsWhatThePortalUses proves no permission
// is extra; this proves none is missing where the API server decides.
//
// And what the ServiceAccount cannot do, each a 403 from the API server
// (issue 32 item 2): RBAC alone refuses exec into a kube-system pod, a Role
// of another name with permissions the portal lacks, and a binding to a
// ClusterRole it does not hold (checked before the policy exists, so that
// RBAC is what refuses); the admission policy refuses binding the portal's
// own ClusterRole to a group, deleting a namespace it did not create, and
// every other write outside what its plans make (policyRefusals).
func TestClusterRoleProvisionsOnTheTestBed(t *testing.T) {
	tl := testBedTools(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", tl.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	run := hex.EncodeToString(b)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mustCreate := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	// The release: its namespace, then the chart's ServiceAccount,
	// ClusterRole and bindings as helm renders them.
	release := "portal-rbac-" + run
	fullname := release + "-hyperpod-portal" // templates/_helpers.tpl portal.fullname
	render := func(templates ...string) []byte {
		args := []string{release, "helm", "--namespace", release}
		for _, tpl := range templates {
			args = append(args, "--show-only", "templates/"+tpl)
		}
		return tl.template(t, args...)
	}
	_, err = admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: release}}, metav1.CreateOptions{})
	mustCreate(err)
	var plans []provision.Plan
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		del := func(gvr schema.GroupVersionResource, ns, name string) {
			if err := dyn.Resource(gvr).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("cleanup: delete %s %s: %v", gvr.Resource, name, err)
			}
		}
		nsGVR := corev1.SchemeGroupVersion.WithResource("namespaces")
		for _, p := range plans {
			for _, o := range p.Objects {
				switch o.Kind {
				case "Namespace":
					del(nsGVR, "", o.Name)
				case "ClusterQueue":
					del(schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "clusterqueues"}, "", o.Name)
				case "ClusterRole", "ClusterRoleBinding":
					del(rbacv1.SchemeGroupVersion.WithResource(map[string]string{"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings"}[o.Kind]), "", o.Name)
				}
			}
		}
		admissionGVR := func(r string) schema.GroupVersionResource {
			return schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: r}
		}
		del(admissionGVR("validatingadmissionpolicybindings"), "", fullname+"-writes")
		del(admissionGVR("validatingadmissionpolicies"), "", fullname+"-writes")
		// The chart's, and what a refusal would have made had the policy
		// allowed it (a test of a loosened policy leaves nothing behind).
		reader := provision.QueueReaderName("x-" + run)
		for _, n := range []string{fullname, release + "-escalate", reader} {
			del(rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings"), "", n)
		}
		for _, n := range []string{fullname, release + "-nodes", reader} {
			del(rbacv1.SchemeGroupVersion.WithResource("clusterroles"), "", n)
		}
		del(corev1.SchemeGroupVersion.WithResource("pods"), "kube-system", release)
		if ks, err := admin.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{}); err == nil && ks.Labels[provision.LabelManagedBy] != "" {
			delete(ks.Labels, provision.LabelManagedBy) // a loosened policy let the portal label it
			if _, err := admin.CoreV1().Namespaces().Update(ctx, ks, metav1.UpdateOptions{}); err != nil {
				t.Errorf("cleanup: kube-system's labels: %v", err)
			}
		}
		for _, ns := range []string{release, "victim-" + run, "hyperpod-ns-" + run, "managed-" + run, "unlabelled-" + run} {
			del(nsGVR, "", ns)
		}
	})
	tl.run(t, render("serviceaccount.yaml", "clusterrole.yaml"), tl.kubectl, "apply", "--namespace", release, "-f", "-")

	// The portal's identity: the chart's ServiceAccount, impersonated.
	as := rest.CopyConfig(cfg)
	as.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + release + ":" + fullname}
	portal, err := kubernetes.NewForConfig(as)
	if err != nil {
		t.Fatal(err)
	}
	// The RBAC authorizer learns of the new binding through its informer:
	// wait until it answers for it (a review, not a sleep).
	for {
		r, err := portal.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Resource: "namespaces"}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Allowed {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the ServiceAccount was never allowed to create namespaces: the binding did not take effect")
		case <-time.After(100 * time.Millisecond):
		}
	}

	rbacRefusals(ctx, t, admin, portal, release)

	// The cluster checks' reads outside plans: the API server's /metrics
	// (the admission policy's counts) and Kueue's configuration.
	checks, err := provision.NewClusterReader(as)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checks.AdmissionCounts(ctx); err != nil {
		t.Errorf("the portal cannot read the admission counts: %v", err)
	}
	if _, _, err := checks.KueueConfiguration(ctx); err != nil {
		t.Errorf("the portal cannot read Kueue's configuration: %v", err)
	}

	// The admission policy, then a request only it refuses until it does:
	// the API server loads policies through an informer. The probe, a
	// dry run, breaks two of its validations (a kube- namespace, without
	// the portal's label), so that it still works with either loosened.
	tl.run(t, render("admissionpolicy.yaml"), tl.kubectl, "apply", "-f", "-")
	for {
		_, err := portal.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-probe-" + run}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
			break
		}
		if err != nil {
			t.Fatalf("probe: %v", err)
		}
		select {
		case <-ctx.Done():
			t.Fatal("the admission policy never took effect: an unlabelled namespace is still accepted from the portal")
		case <-time.After(100 * time.Millisecond):
		}
	}

	// The team's plans, one per revocation mode: the portal owns the
	// namespace and the ClusterQueue, so every kind is created by the
	// portal itself.
	modes := []provision.RevokeMode{provision.RevokeDelete, provision.RevokeLock}
	for i, mode := range modes {
		settings := provision.DefaultClusterSettings()
		settings.ClusterQueueManagedByPortal = true
		settings.Cohort = "it-" + run
		settings.ClusterQueueNameFormat = "it-" + run + "-" + string(mode) + "-%s-clusterqueue"
		settings.OnRevoke = mode
		c := workflow.ExampleContract()
		c.Team = "red"
		c.Namespaces = []string{"it-" + run + "-" + string(mode)}
		c.WorkloadRoleARN = "arn:aws:iam::111122223333:role/red-workload"
		c = c.Normalize()
		p, err := provision.BuildPlan(int64(i+1), 1, c.Hash(), c, settings)
		if err != nil {
			t.Fatal(err)
		}
		plans = append(plans, p)
	}
	a, err := provision.NewApplier(as)
	if err != nil {
		t.Fatal(err)
	}
	steps := provision.ApplierSteps{Applier: a}
	run1 := func(what string, ss []provision.Step) {
		t.Helper()
		for _, s := range ss {
			if out, detail, err := steps.RunStep(ctx, s); err != nil {
				t.Fatalf("%s: %s: %v", what, s.Name(), err)
			} else {
				t.Logf("%s: %-70s %-10s %s", what, s.Name(), out, detail)
			}
		}
	}
	// The snapshot of several plans lists each kind across the cluster
	// (nothing applied yet: every object is reported deleted, none fails).
	for _, r := range a.DriftAll(ctx, plans) {
		if r.Err != nil {
			t.Fatalf("drift check of %d plans: %v", len(plans), r.Err)
		}
	}
	for i, mode := range modes {
		p := plans[i]
		t.Logf("revocation mode %s, namespace %s", mode, p.Namespace)
		if _, err := a.Apply(ctx, p); err != nil {
			t.Fatalf("apply as the chart's ServiceAccount: %v", err)
		}
		settlePolicies(ctx, t, dyn, p)
		if res, err := a.Apply(ctx, p); err != nil {
			t.Fatalf("second apply: %v", err)
		} else {
			for _, r := range res {
				if r.Outcome != provision.Unchanged {
					t.Errorf("second apply: %s %s/%s %s, want unchanged", r.Kind, r.Namespace, r.Name, r.Outcome)
				}
			}
		}
		if items, err := a.Drift(ctx, p); err != nil {
			t.Fatalf("drift check: %v", err)
		} else if len(items) > 0 {
			t.Errorf("drift right after apply: %+v", items)
		}
		snap, err := steps.ForPlan(ctx, p)
		if err != nil {
			t.Fatalf("a re-apply job's snapshot: %v", err)
		}
		for _, s := range provision.ReapplySteps(p) {
			if _, _, err := snap.(provision.RevocationApplier).RunStep(ctx, s); err != nil {
				t.Fatalf("re-apply job from its snapshot: %s: %v", s.Name(), err)
			}
		}
		run1("hold", provision.HoldSteps(p, "Hold"))
		run1("release", provision.HoldSteps(p, "None"))
		run1("reapply", provision.ReapplySteps(p))
		run1("revoke "+string(mode), provision.RevocationPlan(p, mode))
	}

	// HyperPod's mode: HyperPod made the team namespace and its
	// LocalQueue, which the portal never labels; it labels the namespace,
	// applies its objects into it, holds and releases HyperPod's queue
	// (the one unlabelled object the policy lets it update), and revokes
	// in lock mode, leaving both to HyperPod.
	hp := hyperPodPlan(ctx, t, admin, dyn, run)
	plans = append(plans, hp)
	if _, err := a.Apply(ctx, hp); err != nil {
		t.Fatalf("apply into HyperPod's namespace as the chart's ServiceAccount: %v", err)
	}
	lqs := dyn.Resource(schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "localqueues"}).Namespace(hp.Namespace)
	for _, policy := range []string{workflow.StopHold, workflow.StopNone} {
		run1("hold "+policy+" on HyperPod's queue", provision.HoldSteps(hp, policy))
		lq, err := lqs.Get(ctx, hp.Namespace+"-localqueue", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, _, _ := unstructured.NestedString(lq.Object, "spec", "stopPolicy"); got != policy {
			t.Errorf("HyperPod's LocalQueue: stopPolicy %q after the hold job, want %q", got, policy)
		}
	}
	run1("revoke lock in HyperPod's namespace", provision.RevocationPlan(hp, provision.RevokeLock))
	if ns, err := admin.CoreV1().Namespaces().Get(ctx, hp.Namespace, metav1.GetOptions{}); err != nil || ns.Labels[provision.LabelRevoked] != "true" {
		t.Errorf("HyperPod's namespace after revocation: %v, labels %v: want it kept and labelled %s=true", err, ns.GetLabels(), provision.LabelRevoked)
	}

	reader, err := provision.NewClusterReader(as)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reader.Nodes(ctx); err != nil {
		t.Errorf("cluster check, nodes: %v", err)
	}
	if _, err := reader.NetworkPolicyAgent(ctx); err != nil {
		t.Errorf("cluster check, network policy agent: %v", err)
	}
	if _, err := reader.PendingWorkloads(ctx, []string{plans[1].Namespace}); err != nil {
		t.Errorf("a team's workloads: %v", err)
	}

	policyRefusals(ctx, t, admin, portal, release, fullname, run)
}

// forbidden checks that err is the API server's 403 and says why: by, a
// part of the message that names the check that refused (RBAC's, or one of
// the admission policy's validations).
func forbidden(t *testing.T, what string, err error, by string) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: allowed, want a 403 (%s)", what, by)
	case !apierrors.IsForbidden(err):
		t.Errorf("%s: %v, want a 403 (%s)", what, err, by)
	case !strings.Contains(err.Error(), by):
		t.Errorf("%s: refused, but not for the reason expected (%q): %v", what, by, err)
	default:
		t.Logf("%s: 403 %v", what, err)
	}
}

// rbacRefusals: what RBAC alone refuses the ServiceAccount (run before the
// admission policy exists).
func rbacRefusals(ctx context.Context, t *testing.T, admin, portal kubernetes.Interface, release string) {
	t.Helper()
	no := false
	_, err := admin.CoreV1().Pods("kube-system").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: release},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: &no,
			Containers:                   []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// kubectl exec's request (POST pods/NAME/exec), without the stream
	// upgrade: authorization comes first, and a pods/exec grant would
	// answer something else than 403.
	err = portal.CoreV1().RESTClient().Post().Namespace("kube-system").Resource("pods").Name(release).SubResource("exec").
		Param("command", "true").Param("stdout", "true").Do(ctx).Error()
	forbidden(t, "exec into a kube-system pod", err, `cannot create resource "pods/exec"`)

	// A Role of another name than the team roles', granting what the
	// portal does not hold: escalate is only on team-viewer and
	// team-submitter.
	_, err = portal.RbacV1().Roles(release).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "secrets-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{})
	forbidden(t, "write a Role granting what the portal lacks", err, "attempting to grant RBAC permissions not currently held")

	// A binding to a ClusterRole the portal does not hold (the built-in
	// admin): bind is only on the team roles.
	_, err = portal.RbacV1().RoleBindings(release).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "admins"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "attackers"}},
	}, metav1.CreateOptions{})
	forbidden(t, "bind the built-in admin ClusterRole", err, "attempting to grant RBAC permissions not currently held")
}

// policyRefusals: what the admission policy refuses the ServiceAccount,
// each case named after the validation that refuses it (its message).
// RBAC allows every one of these requests.
func policyRefusals(ctx context.Context, t *testing.T, admin, portal kubernetes.Interface, release, fullname, run string) {
	t.Helper()
	const managed = provision.LabelManagedBy
	labels := map[string]string{managed: provision.ManagedBy}
	// A namespace the portal did not create, one of HyperPod's it
	// labelled, and one it manages.
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "victim-" + run}},
		{ObjectMeta: metav1.ObjectMeta{Name: "hyperpod-ns-" + run, Labels: map[string]string{managed: provision.ManagedBy, provision.LabelHyperPodManagedQueue: "true"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "managed-" + run, Labels: labels}},
	} {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	victim, mine := "victim-"+run, "managed-"+run
	if _, err := admin.RbacV1().RoleBindings(victim).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "by-hand"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "someone"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A queue reader as a plan makes it, for the binding below (the bind
	// check reads the role before the policy runs).
	reader := provision.QueueReaderName("x-" + run)
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: reader, Labels: labels},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const (
		byReserved     = "never writes namespace"
		byLabel        = "carries its label"
		byNamespace    = "only in namespaces labelled"
		byDelete       = "deletes only cluster-wide objects labelled"
		byHyperPod     = "never deletes a namespace of HyperPod"
		byRoles        = "writes only the Roles team-viewer and team-submitter"
		byRoleBindings = "binds only the team Roles"
		byClusterRoles = "writes only the queue-reader ClusterRoles"
		byCRBs         = "binds only a queue-reader ClusterRole"
	)
	group := func(name string) []rbacv1.Subject {
		return []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}}
	}
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Labels: labels} }
	create := metav1.CreateOptions{}
	for _, c := range []struct {
		what, by string
		do       func() error
	}{
		{"delete a namespace it did not create", byDelete, func() error {
			return portal.CoreV1().Namespaces().Delete(ctx, victim, metav1.DeleteOptions{})
		}},
		{"delete a namespace of HyperPod's, although labelled", byHyperPod, func() error {
			return portal.CoreV1().Namespaces().Delete(ctx, "hyperpod-ns-"+run, metav1.DeleteOptions{})
		}},
		{"bind its own ClusterRole to a group", byCRBs, func() error {
			_, err := portal.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: meta(release + "-escalate"),
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: fullname}, Subjects: group("attackers")}, create)
			return err
		}},
		{"bind its own ClusterRole under a queue reader's name", byCRBs, func() error {
			_, err := portal.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: meta(reader),
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: fullname}, Subjects: group("attackers")}, create)
			return err
		}},
		{"bind a queue reader to every authenticated user", byCRBs, func() error {
			_, err := portal.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: meta(reader),
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader}, Subjects: group("system:authenticated")}, create)
			return err
		}},
		{"label kube-system as its own", byReserved, func() error {
			_, err := portal.CoreV1().Namespaces().Apply(ctx, applycorev1.Namespace("kube-system").WithLabels(labels),
				metav1.ApplyOptions{FieldManager: provision.ManagedBy, Force: true})
			return err
		}},
		{"label kueue-system (a reserved name) as its own", byReserved, func() error {
			_, err := portal.CoreV1().Namespaces().Apply(ctx, applycorev1.Namespace("kueue-system").WithLabels(labels),
				metav1.ApplyOptions{FieldManager: provision.ManagedBy, Force: true})
			return err
		}},
		{"label amazon-cloudwatch (a reserved prefix) as its own", byReserved, func() error {
			_, err := portal.CoreV1().Namespaces().Apply(ctx, applycorev1.Namespace("amazon-cloudwatch").WithLabels(labels),
				metav1.ApplyOptions{FieldManager: provision.ManagedBy, Force: true})
			return err
		}},
		{"create a namespace without its label", byLabel, func() error {
			_, err := portal.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "unlabelled-" + run}}, create)
			return err
		}},
		{"write in a namespace it did not label", byNamespace, func() error {
			_, err := portal.CoreV1().ServiceAccounts(victim).Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta("red-workloads")}, create)
			return err
		}},
		{"delete a RoleBinding in a namespace it did not label", byNamespace, func() error {
			return portal.RbacV1().RoleBindings(victim).Delete(ctx, "by-hand", metav1.DeleteOptions{})
		}},
		// Server-side apply, as the portal writes: its PATCH names the
		// Role in the URL, which the escalate check asks about (a POST
		// has no name there, and RBAC would refuse it first).
		{"a Role named team-viewer granting more than the plans' (it may escalate that name)", byRoles, func() error {
			_, err := portal.RbacV1().Roles(mine).Apply(ctx, applyrbacv1.Role(provision.NameViewerRole, mine).WithLabels(labels).
				WithRules(applyrbacv1.PolicyRule().WithAPIGroups("").WithResources("secrets").WithVerbs("get")),
				metav1.ApplyOptions{FieldManager: provision.ManagedBy, Force: true})
			return err
		}},
		{"a Role of another name, granting what it holds", byRoles, func() error {
			_, err := portal.RbacV1().Roles(mine).Create(ctx, &rbacv1.Role{ObjectMeta: meta("pod-lister"),
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}}}, create)
			return err
		}},
		{"bind its own ClusterRole in a team namespace", byRoleBindings, func() error {
			_, err := portal.RbacV1().RoleBindings(mine).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta(provision.NameViewerBinding),
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: fullname}, Subjects: group("attackers")}, create)
			return err
		}},
		{"bind team-viewer to every authenticated user", byRoleBindings, func() error {
			_, err := portal.RbacV1().RoleBindings(mine).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta(provision.NameViewerBinding),
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: provision.NameViewerRole}, Subjects: group("system:authenticated")}, create)
			return err
		}},
		{"a queue reader granting more than the plans'", byClusterRoles, func() error {
			_, err := portal.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: meta(reader),
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}}}, create)
			return err
		}},
		{"a ClusterRole of another name", byClusterRoles, func() error {
			_, err := portal.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: meta(release + "-nodes"),
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list"}}}}, create)
			return err
		}},
		// The API server itself refuses an aggregationRule (which would
		// gather other roles' rules) to anyone but cluster admins: the
		// policy needs no validation of its own for it.
		{"an aggregating queue reader", "must have cluster-admin privileges to use the aggregationRule", func() error {
			_, err := portal.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: meta(reader),
				AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-admin": "true"}}}}}, create)
			return err
		}},
	} {
		forbidden(t, c.what, c.do(), c.by)
	}
	// Still there: the refusals wrote nothing.
	for _, ns := range []string{victim, "hyperpod-ns-" + run} {
		if _, err := admin.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
			t.Errorf("namespace %s: %v", ns, err)
		}
	}
}

// hyperPodPlan acts as HyperPod task governance (the team namespace,
// labelled as HyperPod labels it, and its LocalQueue) and returns the plan
// of a contract in that mode (the default settings: HyperPod owns the
// ClusterQueue).
// settlePolicies waits until kube-controller-manager's
// validatingadmissionpolicy-status-controller has type-checked each
// ValidatingAdmissionPolicy of p (status.observedGeneration reached
// metadata.generation): its status write, landing between the second
// apply's read and its apply, made that apply look "configured" (CI run of
// 2026-12-04 17:43).
func settlePolicies(ctx context.Context, t *testing.T, dyn dynamic.Interface, p provision.Plan) {
	t.Helper()
	gvr := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"}
	for _, o := range p.Objects {
		if o.Kind != "ValidatingAdmissionPolicy" {
			continue
		}
		for {
			live, err := dyn.Resource(gvr).Get(ctx, o.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("policy %s: %v", o.Name, err)
			}
			seen, _, _ := unstructured.NestedInt64(live.Object, "status", "observedGeneration")
			if seen >= live.GetGeneration() {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("policy %s was never type-checked (is the status controller running?)", o.Name)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

func hyperPodPlan(ctx context.Context, t *testing.T, admin kubernetes.Interface, dyn dynamic.Interface, run string) provision.Plan {
	t.Helper()
	team := "hp" + run
	ns := provision.HyperPodNamespacePrefix + team
	hyperPod := map[string]string{provision.LabelHyperPodManagedQueue: "true"}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: hyperPod}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lq := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
		"metadata": map[string]any{"name": ns + "-localqueue", "namespace": ns, "labels": map[string]any{provision.LabelHyperPodManagedQueue: "true"}},
		"spec":     map[string]any{"clusterQueue": ns + "-clusterqueue"},
	}}
	if _, err := dyn.Resource(schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "localqueues"}).Namespace(ns).
		Create(ctx, lq, metav1.CreateOptions{FieldManager: "hyperpod-task-governance"}); err != nil {
		t.Fatal(err)
	}
	c := workflow.ExampleContract()
	c.Team = team
	c.Namespaces = []string{ns}
	c = c.Normalize()
	p, err := provision.BuildPlan(3, 1, c.Hash(), c, provision.DefaultClusterSettings())
	if err != nil {
		t.Fatal(err)
	}
	return p
}
