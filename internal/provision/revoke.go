package provision

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/provision/slurmprov"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// RevokeMode is what revocation does with the team namespace once the
// team's access, queues, quotas and network allowances are gone.
type RevokeMode string

const (
	// RevokeLock keeps the namespace and what the team left in it
	// (volumes, config, evidence for an investigation) but locks it: every
	// RoleBinding is gone, a ResourceQuota named NameRevokedQuota allows
	// zero pods and zero accelerators, only the default-deny NetworkPolicy
	// stays, and the namespace is labelled LabelRevoked=true. It is the
	// default because it destroys nothing that cannot be recreated; a
	// locked namespace can still be deleted by hand.
	RevokeLock RevokeMode = "lock"
	// RevokeDelete deletes the namespace and everything in it.
	RevokeDelete RevokeMode = "delete"
)

// LabelRevoked marks a namespace locked by revocation.
const LabelRevoked = "portal.hyperpod.io/revoked"

// NameRevokedQuota is the zero ResourceQuota of a locked namespace.
const NameRevokedQuota = "revoked"

// StepAction is what a step does with its object.
type StepAction string

// The step actions. Provisioning steps apply; revocation steps delete,
// sweep and lock.
const (
	// ActionApply server-side applies the object (creates or updates it).
	ActionApply StepAction = "apply"
	// ActionDelete deletes the object if it exists and carries this
	// connection's label (see Applier.Delete).
	ActionDelete StepAction = "delete"
	// ActionDeleteAll deletes every object of the kind in the namespace,
	// whoever made it, when the namespace is this connection's: it removes
	// access granted by hand as well as the portal's own.
	ActionDeleteAll StepAction = "delete-all"
	// ActionLock applies the object, but only into this connection's
	// namespace while it exists: locking never creates a namespace.
	ActionLock StepAction = "lock"
	// ActionPrune deletes the RoleBindings of the namespace that are not
	// in Keep: re-applying a plan takes back access granted by hand.
	ActionPrune StepAction = "prune"
	// ActionNone records that there is nothing to do (a Slurm connection
	// has nothing on EKS to remove).
	ActionNone StepAction = "none"
	// ActionLeave records that revocation leaves the object to its owner,
	// HyperPod task governance (Owner): the team namespace and LocalQueue
	// go with the compute quota, which revocation deletes after them.
	ActionLeave StepAction = "leave"
	// ActionSlurmApply makes the cluster's accounting match a Slurm plan
	// (slurmprov.Apply: adds what is missing, restores what differs,
	// removes member associations the plan dropped).
	ActionSlurmApply StepAction = "slurm-apply"
	// ActionSlurmRevoke removes a Slurm plan's associations, account and
	// QoS (slurmprov.Revoke); the portal's parent account stays.
	ActionSlurmRevoke StepAction = "slurm-revoke"
)

// More outcomes of a step, for revocation.
const (
	Deleted Outcome = "deleted" // the object was deleted (a namespace: it is terminating)
	Absent  Outcome = "absent"  // nothing to do: the object (or its namespace) does not exist
	Kept    Outcome = "kept"    // left alone: it is not this connection's
)

// Step is one recorded step of a job: an action on one object.
type Step struct {
	Action StepAction
	Object Object
	// Detail says what the step is for, in a few words; a dry run records
	// it.
	Detail string
	// Keep, for ActionPrune, are the RoleBinding names the plan contains.
	Keep []string
	// AWS is the call of an ActionAWSEnsure or ActionAWSRemove step.
	AWS *awsprov.Call
	// Slurm is the plan of an ActionSlurmApply, ActionSlurmRevoke,
	// ActionSlurmHold or ActionSlurmDrain step, the approved (old) plan of
	// an ActionSlurmRetire step.
	Slurm *slurmprov.Plan
	// SlurmNew is the amended plan of an ActionSlurmRetire step.
	SlurmNew *slurmprov.Plan
	// SlurmFrom, on an amendment's ActionSlurmApply step that moves the
	// team's account (slurmprov.MovesAccount), is the approved plan it
	// changes from: a hold on that plan's account moves to the new one
	// (slurmprov.ApplyKeepingHold).
	SlurmFrom *slurmprov.Plan
	// SlurmHeld, on such a step, says the connection was on hold when its
	// job started (workflow.Hold.Applied): the new account is added held
	// even when the hold job has not yet set the old one's limit.
	SlurmHeld bool
	// SlurmMayBeAbsent, on a hold job's ActionSlurmHold or ActionSlurmDrain
	// step, passes over an account that is not on the cluster
	// (SlurmHoldSteps).
	SlurmMayBeAbsent bool
	// Hold is the stopPolicy an ActionSlurmHold step puts in effect
	// (workflow.StopHold, StopHoldAndDrain or StopNone: slurmhold.go).
	Hold string
}

// keep is Keep as plan objects, for PruneExtraBindings.
func (s Step) keep() []Object {
	out := make([]Object, len(s.Keep))
	for i, n := range s.Keep {
		out[i] = Object{Kind: "RoleBinding", Namespace: s.Object.Namespace, Name: n}
	}
	return out
}

// Name is the step's name as recorded: "Kind ref" for an apply (as
// provisioning has always named its steps), the action first otherwise.
func (s Step) Name() string {
	o := s.Object
	switch s.Action {
	case ActionApply:
		return o.Kind + " " + o.Ref()
	case ActionDeleteAll:
		return "delete every " + o.Kind + " left in " + o.Namespace
	case ActionNone:
		return "nothing to remove"
	case ActionLeave:
		return "leave " + o.Kind + " " + o.Ref() + " to HyperPod"
	case ActionPrune:
		return "remove role bindings beyond the plan in " + o.Namespace
	case ActionStopPolicy:
		p, _, _ := unstructured.NestedString(o.Obj.Object, "spec", "stopPolicy")
		return "stopPolicy " + p + " on " + o.Kind + " " + o.Ref()
	case ActionSlurmApply:
		return "sacctmgr: account " + s.Slurm.Account.Name + ", QoS " + s.Slurm.QoS.Name + " and members on " + s.Slurm.Cluster
	case ActionSlurmRevoke:
		return "sacctmgr: remove the members, account " + s.Slurm.Account.Name + " and QoS " + s.Slurm.QoS.Name + " from " + s.Slurm.Cluster
	case ActionSlurmHold, ActionSlurmDrain:
		return slurmHoldStepName(s)
	case ActionSlurmRetire:
		return slurmRetireName(s)
	case ActionAWSEnsure:
		return s.AWS.Title()
	case ActionAWSRemove:
		if s.AWS.KeepOnRevoke {
			return "keep " + s.AWS.Title()
		}
		return "remove " + s.AWS.Title()
	}
	return string(s.Action) + " " + o.Kind + " " + o.Ref()
}

// ReapplySteps re-apply p and then remove RoleBindings p does not contain:
// the fix for drift.
func ReapplySteps(p Plan) []Step {
	if p.Slurm != nil {
		// slurmprov.Apply removes the associations the plan does not have.
		return ApplySteps(p)
	}
	steps := ApplySteps(p)
	var keep []string
	for _, o := range p.Objects {
		if o.Kind == "RoleBinding" {
			keep = append(keep, o.Name)
		}
	}
	return append(steps, Step{Action: ActionPrune, Object: Object{Kind: "RoleBinding", Namespace: p.Namespace},
		Keep: keep, Detail: "remove RoleBindings in " + p.Namespace + " other than " + strings.Join(keep, ", ")})
}

// ApplySteps are the steps that provision p: the AWS guardrail calls (the
// compute quota), each object applied in order, then the AWS access calls
// (Studio, access entries, Pod Identity).
//
// A Slurm plan is one step, slurmprov.Apply.
func ApplySteps(p Plan) []Step {
	if p.Slurm != nil {
		return []Step{{Action: ActionSlurmApply, Slurm: p.Slurm, Detail: slurmSummary(p.Slurm)}}
	}
	summary := p.Summary()
	steps := awsSteps(p.AWS, awsprov.Guardrail)
	for i, o := range p.Objects {
		steps = append(steps, Step{Action: ActionApply, Object: o, Detail: summary[i]})
	}
	return append(steps, awsSteps(p.AWS, awsprov.Access)...)
}

// StepsHash identifies a list of steps as the plan's Hash identifies a
// plan: what a revocation job records as the plan it ran.
func StepsHash(steps []Step) string {
	h := sha256.New()
	for _, s := range steps {
		fmt.Fprintf(h, "%s\n", s.Name())
		if s.Action == ActionApply || s.Action == ActionLock {
			fmt.Fprintf(h, "%v\n", s.Object.Obj.Object)
		}
		if s.AWS != nil {
			fmt.Fprintf(h, "%s\n", s.AWS.Canonical())
		}
		if s.Slurm != nil {
			fmt.Fprint(h, slurmHashedText(s.Slurm))
		}
		if s.SlurmNew != nil {
			fmt.Fprint(h, slurmHashedText(s.SlurmNew))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// revocationOrder is the order revocation removes kinds in: access first
// (a revoked team must lose it before anything else changes under it),
// then the queues, then the quota and the defaults, then the network
// policies. The namespace comes last; kinds not listed here come just
// before it.
// The team's cluster-scoped access (its queue reader, see queueReader) goes
// with the rest of its access, first.
// The admission rules' parameter object (admission.go) goes last, with the
// guardrails: while the team may still submit, its rules hold. Just before
// it, in both modes, the namespace is labelled revoked, which the shared
// bindings leave out (the policy and bindings stay: other teams'
// namespaces use them); see RevocationPlan.
var revocationOrder = []string{"ClusterRoleBinding", "RoleBinding", "ClusterRole", "Role", "ServiceAccount", "LocalQueue", "ClusterQueue", "ResourceQuota", "LimitRange", "NetworkPolicy", "ConfigMap"}

// RevocationPlan is the reverse of p: the steps that take a team's
// connection off the cluster, in a safe order (see revocationOrder): access
// first (Pod Identity, access entries, RoleBindings), the compute quota
// after the Kubernetes steps. Objects HyperPod owns (Owner: the team
// namespace and LocalQueue in HyperPod-managed mode) are left to HyperPod,
// recorded as ActionLeave steps; in RevokeLock mode the portal still puts
// its zero quota and its revoked label into HyperPod's namespace. Both
// modes delete the RoleBindings, then every other RoleBinding in the
// namespace, the Roles, the ServiceAccount, the LocalQueue and the
// ClusterQueue when p has one (the portal manages it) and no other
// connection of the team counts any more (a team object whose TeamMembers
// name another connection is applied instead, summing the others: see
// teamqueue.go), the quota, the LimitRange and the NetworkPolicies; then:
//
//   - RevokeDelete deletes the namespace;
//   - RevokeLock first puts a zero ResourceQuota in place (before the team
//     quota goes, so there is never a moment without a quota), and keeps
//     the default-deny NetworkPolicy (whatever still runs there stays cut
//     off).
//
// In both modes the namespace is labelled LabelRevoked=true before the
// team's admission parameters are deleted: a namespace the bindings still
// matched without its parameters would have every matched request refused.
//
// Shared objects (WorkloadPriorityClasses, ResourceFlavors) are never in
// it: other teams use them. An empty mode is RevokeLock. RevocationPlan is
// pure, like BuildPlan.
func RevocationPlan(p Plan, mode RevokeMode) []Step {
	if p.Slurm != nil {
		// Members' associations first, then the account, then the QoS
		// (slurmprov.Plan.RevokeCommands), whatever the mode: there is no
		// namespace to lock.
		return []Step{{Action: ActionSlurmRevoke, Slurm: p.Slurm, Detail: "remove " + slurmSummary(p.Slurm)}}
	}
	if mode == "" {
		mode = RevokeLock
	}
	var ns *Object
	groups := map[string][]Object{}
	var others []Object
	for i := len(p.Objects) - 1; i >= 0; i-- { // reverse apply order within a kind
		o := p.Objects[i]
		switch {
		case o.Shared:
		case o.Kind == "Namespace":
			ns = &p.Objects[i]
		case slices.Contains(revocationOrder, o.Kind):
			groups[o.Kind] = append(groups[o.Kind], o)
		default:
			others = append(others, o)
		}
	}
	awsFirst, awsLast := awsprov.RevocationOrder(p.AWS)
	var steps []Step
	for i := range awsFirst {
		steps = append(steps, awsStep(ActionAWSRemove, &awsFirst[i]))
	}
	del := func(o Object, why string) {
		steps = append(steps, Step{Action: ActionDelete, Object: o, Detail: why + ": " + o.Detail})
	}
	leave := func(o Object) {
		steps = append(steps, Step{Action: ActionLeave, Object: o,
			Detail: "left to HyperPod task governance, which owns it: it goes with the team's compute quota"})
	}
	// The namespace is labelled revoked before the team's admission
	// parameters go, in both modes: the shared bindings leave a revoked
	// namespace out, while a namespace they still match without its
	// parameters has every matched request refused (parameterNotFoundAction
	// Deny is a configuration failure, which failurePolicy Fail refuses even
	// in warn mode), which would also refuse the updates that a terminating
	// namespace's controllers make to its jobs.
	lock := func() {
		if ns == nil {
			return
		}
		locked := *ns
		locked.Obj = ns.Obj.DeepCopy()
		labels := locked.Obj.GetLabels()
		labels[LabelRevoked] = "true"
		locked.Obj.SetLabels(labels)
		detail := "namespace kept, labelled " + LabelRevoked + "=true"
		if mode == RevokeDelete {
			detail = "labelled " + LabelRevoked + "=true (out of the admission bindings) before its parameters and the namespace go"
		}
		steps = append(steps, Step{Action: ActionLock, Object: locked, Detail: detail})
	}
	for _, kind := range revocationOrder {
		if kind == "ConfigMap" {
			lock()
		}
		for _, o := range groups[kind] {
			switch {
			case o.Owner != OwnerPortal:
				leave(o)
			case o.Team && slices.ContainsFunc(o.TeamMembers, func(id int64) bool { return id != p.ConnectionID }):
				// The team's queue, still summing its other connections
				// (the worker rebuilt it without this one: Worker.TeamQueue).
				steps = append(steps, Step{Action: ActionApply, Object: o,
					Detail: "queue: the team's, without this connection's share: " + o.Detail})
			case kind == "ResourceQuota" && mode == RevokeLock:
				steps = append(steps, Step{Action: ActionLock, Object: revokedQuota(o),
					Detail: "lock: zero pods, zero accelerators, before the team quota goes"})
				del(o, "quota")
			case kind == "NetworkPolicy" && mode == RevokeLock && o.Name == NamePolicyDefaultDeny:
				// Kept: it isolates whatever is left in the locked namespace.
			default:
				del(o, map[string]string{"ClusterRoleBinding": "access", "ClusterRole": "access", "RoleBinding": "access", "Role": "access", "ServiceAccount": "access",
					"LocalQueue": "queue", "ClusterQueue": "queue", "ResourceQuota": "quota", "LimitRange": "defaults",
					"NetworkPolicy": "network", "ConfigMap": "admission rules"}[kind])
			}
		}
		if kind == "RoleBinding" && p.Namespace != "" {
			steps = append(steps, Step{Action: ActionDeleteAll, Object: sweepObject(p, ns, "rbac.authorization.k8s.io/v1", "RoleBinding"),
				Detail: "access: RoleBindings made by hand in the team namespace"})
		}
	}
	for _, o := range others {
		del(o, "other")
	}
	if ns != nil {
		switch {
		case mode == RevokeDelete && ns.Owner != OwnerPortal:
			leave(*ns)
		case mode == RevokeDelete:
			del(*ns, "namespace, with everything left in it")
		}
	}
	for i := range awsLast {
		steps = append(steps, awsStep(ActionAWSRemove, &awsLast[i]))
	}
	return steps
}

// sweepObject is the object of an ActionDeleteAll step: the kind, the
// namespace, and the namespace's labels, which say whose it must be.
func sweepObject(p Plan, ns *Object, apiVersion, kind string) Object {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(p.Namespace)
	if ns != nil {
		u.SetLabels(ns.Obj.GetLabels())
	}
	return Object{Kind: kind, Namespace: p.Namespace, Obj: u}
}

// revokedQuota is the zero quota of a locked namespace: every resource of
// the team quota, and pods, at zero.
func revokedQuota(team Object) Object {
	hard := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}
	m, _, _ := unstructured.NestedMap(team.Obj.Object, "spec", "hard")
	for r := range m {
		hard[corev1.ResourceName(r)] = resource.MustParse("0")
	}
	labels := team.Obj.GetLabels()
	labels[LabelRevoked] = "true"
	q := &corev1.ResourceQuota{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ResourceQuota"},
		ObjectMeta: metav1.ObjectMeta{Name: NameRevokedQuota, Namespace: team.Namespace, Labels: labels, Annotations: team.Obj.GetAnnotations()},
		Spec:       corev1.ResourceQuotaSpec{Hard: hard},
	}
	u, err := toUnstructured(q)
	if err != nil {
		panic("provision: revoked quota: " + err.Error()) // a typed object with its TypeMeta always converts
	}
	keys := make([]string, 0, len(hard))
	for r := range hard {
		keys = append(keys, string(r)+"=0")
	}
	slices.Sort(keys)
	return Object{Kind: "ResourceQuota", Namespace: team.Namespace, Name: NameRevokedQuota, Obj: u, Detail: strings.Join(keys, ", ")}
}

// RevocationApplier runs the steps of a revocation; ApplierSteps is one.
// The worker uses its Apply for revocations when it implements this.
type RevocationApplier interface {
	RunStep(ctx context.Context, s Step) (Outcome, string, error)
}

// RunStep runs one step with the Applier.
func (a ApplierSteps) RunStep(ctx context.Context, s Step) (Outcome, string, error) {
	switch s.Action {
	case ActionApply:
		return a.ApplyObject(ctx, s.Object)
	case ActionDelete:
		return a.Applier.Delete(ctx, s.Object)
	case ActionDeleteAll:
		return a.Applier.DeleteAll(ctx, s.Object)
	case ActionLock:
		return a.Applier.Lock(ctx, s.Object)
	case ActionPrune:
		return a.Applier.pruneStep(ctx, s, nil)
	case ActionNone:
		return Absent, s.Detail, nil
	case ActionLeave:
		return Kept, s.Detail, nil
	case ActionStopPolicy:
		return a.Applier.StopPolicy(ctx, s.Object)
	}
	return Failed, "", permanent(fmt.Errorf("provision: unknown step action %q", s.Action))
}

var namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// resourceOf is the client of o's kind, in o's namespace when namespaced.
func (a *Applier) resourceOf(o Object) (dynamic.ResourceInterface, error) {
	if o.Obj == nil {
		return nil, permanent(errors.New("no object"))
	}
	gvk := o.Obj.GroupVersionKind()
	m, err := a.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if o.Namespace == "" {
			return nil, permanent(fmt.Errorf("%s is namespaced but the object names no namespace", gvk.Kind))
		}
		return a.Client.Resource(m.Resource).Namespace(o.Namespace), nil
	}
	return a.Client.Resource(m.Resource), nil
}

// whose says why live is not the object o describes, "" when it is: a
// revocation deletes only what the portal made for this connection, never
// an object that happens to have the same name.
func whose(live *unstructured.Unstructured, o Object) string {
	l := live.GetLabels()
	if o.Team {
		// The team's object (its ClusterQueue) carries the team's labels,
		// never a connection's.
		want := o.Obj.GetLabels()[LabelTeam]
		if l[LabelManagedBy] != ManagedBy || l[LabelTeam] != want {
			return fmt.Sprintf("left alone: not this team's (managed-by %q, team %q; want %q, %q)",
				l[LabelManagedBy], l[LabelTeam], ManagedBy, want)
		}
		return ""
	}
	want := o.Obj.GetLabels()[LabelConnection]
	if l[LabelManagedBy] != ManagedBy || l[LabelConnection] != want {
		return fmt.Sprintf("left alone: not this connection's (managed-by %q, connection %q; want %q, %q)",
			l[LabelManagedBy], l[LabelConnection], ManagedBy, want)
	}
	return ""
}

// deleteLive deletes live, only if it is still the object that was read
// (its UID): something recreated under the same name in between is not
// deleted unseen. NotFound counts as deleted.
func deleteLive(ctx context.Context, ri dynamic.ResourceInterface, live *unstructured.Unstructured) error {
	uid := live.GetUID()
	bg := metav1.DeletePropagationBackground
	err := ri.Delete(ctx, live.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: &bg})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// Delete deletes o if it exists and carries o's connection label (a team
// object: o's team label) and the portal's managed-by label. It is
// idempotent: an object already gone is Absent, which is success. An
// object of that name that is not this connection's (team's) is Kept, with
// the reason as detail. Shared objects are refused: other teams use them.
func (a *Applier) Delete(ctx context.Context, o Object) (Outcome, string, error) {
	if err := ctx.Err(); err != nil {
		return Failed, "", err
	}
	if o.Shared || o.Obj == nil || o.Obj.GetLabels()[LabelConnection] == "" && (!o.Team || o.Obj.GetLabels()[LabelTeam] == "") {
		return Failed, "", permanent(fmt.Errorf("provision: delete %s %s: refused: a shared object, or one without a connection (team) label", o.Kind, o.Ref()))
	}
	ri, err := a.resourceOf(o)
	if err != nil {
		return Failed, "", fmt.Errorf("provision: delete %s %s: %w", o.Kind, o.Ref(), err)
	}
	live, err := ri.Get(ctx, o.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return Absent, "already gone", nil
	case err != nil:
		return Failed, "", fmt.Errorf("provision: delete %s %s: %w", o.Kind, o.Ref(), err)
	}
	if why := whose(live, o); why != "" {
		return Kept, why, nil
	}
	if err := deleteLive(ctx, ri, live); err != nil {
		return Failed, "", fmt.Errorf("provision: delete %s %s: %w", o.Kind, o.Ref(), err)
	}
	if o.Kind == "Namespace" {
		return Deleted, "terminating: the namespace controller removes what is left in it", nil
	}
	return Deleted, "uid " + string(live.GetUID()), nil
}

// ownNamespace checks that ns exists and is this connection's (o's
// labels say which): ok, or the outcome that ends the step.
func (a *Applier) ownNamespace(ctx context.Context, ns string, o Object) (Outcome, string, bool, error) {
	live, err := a.Client.Resource(namespacesGVR).Get(ctx, ns, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return Absent, "namespace " + ns + " is gone", false, nil
	case err != nil:
		return Failed, "", false, err
	}
	if why := whose(live, o); why != "" {
		return Kept, "namespace " + ns + " " + why, false, nil
	}
	return "", "", true, nil
}

// DeleteAll deletes every object of o's kind in o's namespace, whoever
// made it, when the namespace is this connection's: Deleted with their
// names, Absent when there were none (or no namespace), Kept when the
// namespace is not the portal's for this connection.
func (a *Applier) DeleteAll(ctx context.Context, o Object) (Outcome, string, error) {
	fail := func(err error) (Outcome, string, error) {
		return Failed, "", fmt.Errorf("provision: delete every %s in %s: %w", o.Kind, o.Namespace, err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if out, detail, ok, err := a.ownNamespace(ctx, o.Namespace, o); !ok {
		if err != nil {
			return fail(err)
		}
		return out, detail, nil
	}
	ri, err := a.resourceOf(o)
	if err != nil {
		return fail(err)
	}
	list, err := ri.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fail(err)
	}
	var names []string
	var errs []error
	for i := range list.Items {
		if err := deleteLive(ctx, ri, &list.Items[i]); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", list.Items[i].GetName(), err))
			continue
		}
		names = append(names, list.Items[i].GetName())
	}
	if err := errors.Join(errs...); err != nil {
		return fail(err)
	}
	if len(names) == 0 {
		return Absent, "none left", nil
	}
	slices.Sort(names)
	return Deleted, strings.Join(names, ", "), nil
}

// Lock applies o into its namespace (or, for a Namespace, to itself) only
// while that namespace exists and is this connection's: Absent when it is
// gone, Kept when it is not the portal's; else Apply's outcome.
func (a *Applier) Lock(ctx context.Context, o Object) (Outcome, string, error) {
	ns := o.Namespace
	if o.Kind == "Namespace" {
		ns = o.Name
	}
	if out, detail, ok, err := a.ownNamespace(ctx, ns, o); !ok {
		if err != nil {
			return Failed, "", fmt.Errorf("provision: lock %s %s: %w", o.Kind, o.Ref(), err)
		}
		return out, detail, nil
	}
	return ApplierSteps{Applier: a}.ApplyObject(ctx, o)
}
