package provision

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// DiffAction is what an amendment does with one object or AWS resource:
// the difference between the plan of the approved version and the plan of
// the amended one.
type DiffAction string

// The diff actions.
const (
	// DiffCreate: only the new plan has it; applying the new plan
	// creates it.
	DiffCreate DiffAction = "create"
	// DiffUpdate: both plans have it and what is applied differs;
	// applying the new plan updates it in place.
	DiffUpdate DiffAction = "update"
	// DiffDelete: only the old plan has it, and the portal may delete it
	// (by the rules revocation follows, see DiffPlans).
	DiffDelete DiffAction = "delete"
	// DiffUnchanged: both plans have it, the same but for the contract
	// version and hash stamped on it.
	DiffUnchanged DiffAction = "unchanged"
	// DiffKeep: the portal leaves it as it is although the plans differ
	// on it: HyperPod owns it, other teams share it, or it is a namespace
	// or a resource kept on revocation. Detail says which.
	DiffKeep DiffAction = "keep"
)

// PlanChange is one row of a PlanDiff: one Kubernetes object (Object) or
// one AWS resource (Call).
type PlanChange struct {
	Action DiffAction
	// What names it: "ResourceQuota hyperpod-ns-red/team-quota" or the
	// call's title, "SageMaker compute quota red-quota".
	What string
	// Detail says what changes, in a few words: for an update, the
	// changed fields ("spec.hard.requests.nvidia.com/gpu: 24 → 36"); for
	// a create or delete, the object's substance; for a keep, why.
	Detail string
	// Object is the new plan's object, or the old plan's when only the
	// old plan has it; nil for an AWS resource.
	Object *Object
	// Call is the new plan's call, or the old plan's when only the old
	// plan has it; nil for a Kubernetes object.
	Call *awsprov.Call
}

// PlanDiff is what amending a connection does to the cluster and AWS: every
// object and AWS resource of either plan, once. Changes come in the order
// an amendment job runs them: the new plan in apply order (ApplySteps: the
// AWS guardrail calls, the objects, the AWS access calls), then what only
// the old plan has, in revocation's safe order (access before guardrails;
// see DeleteSteps).
type PlanDiff struct {
	Changes []PlanChange
}

// Empty reports whether the amendment changes nothing: no create, update
// or delete (keeps and unchanged rows do nothing).
func (d PlanDiff) Empty() bool {
	return !slices.ContainsFunc(d.Changes, func(c PlanChange) bool {
		return c.Action == DiffCreate || c.Action == DiffUpdate || c.Action == DiffDelete
	})
}

// Count is the number of changes with action a.
func (d PlanDiff) Count(a DiffAction) int {
	n := 0
	for _, c := range d.Changes {
		if c.Action == a {
			n++
		}
	}
	return n
}

// Deletes are the Kubernetes objects to delete, in the order RevocationPlan
// deletes kinds (revocationOrder: access first, then the queues, the quota,
// the defaults, the network policies), reverse apply order within a kind.
func (d PlanDiff) Deletes() []Object {
	var out []Object
	for _, c := range d.Changes {
		if c.Action == DiffDelete && c.Object != nil {
			out = append(out, *c.Object)
		}
	}
	return out
}

// DeleteSteps are the steps that remove what the new plan no longer
// contains, in revocation's safe order and in the form RevocationPlan
// gives them (ActionAWSRemove, ActionDelete): the AWS access first (Pod
// Identity, then access entries), then the Kubernetes objects (Deletes),
// then the other AWS resources (compute quota, Studio assignments or
// connection, domain) as awsprov.RevocationOrder orders them. Kept rows
// are not in it.
func (d PlanDiff) DeleteSteps() []Step {
	var out []Step
	for _, c := range d.Changes {
		switch {
		case c.Action != DiffDelete:
		case c.Call != nil:
			out = append(out, awsStep(ActionAWSRemove, c.Call))
		case c.Object != nil:
			out = append(out, Step{Action: ActionDelete, Object: *c.Object, Detail: "amendment: not in the new plan: " + c.Object.Detail})
		}
	}
	return out
}

// DiffRow is a change as text, for a page. Its fields are those of
// views.PlanDiffRow, so that a handler converts one into the other with
// views.PlanDiffRow(row).
type DiffRow struct {
	Action, What, Detail string
}

// Rows are the changes as text, in order.
func (d PlanDiff) Rows() []DiffRow {
	out := make([]DiffRow, len(d.Changes))
	for i, c := range d.Changes {
		out[i] = DiffRow{Action: string(c.Action), What: c.What, Detail: c.Detail}
	}
	return out
}

// maxDiffPaths is how many changed fields an update's Detail names.
const maxDiffPaths = 4

// DiffPlans compares the plan of a connection's approved version (from)
// with the plan of its amended version (to). It is pure.
//
// A Kubernetes object is identified by its API group, kind, namespace and
// name (not the API version: a new version of the same object is an
// update). Its content is compared without what every version changes and
// that means nothing to apply: the contract version label and the contract
// hash annotation that BuildPlan stamps on each team object (builder.add).
// The connection label is compared: an amendment keeps its connection, and
// a different one would change whose the object is (Applier.Delete reads it).
//
// An AWS resource is identified as its API identifies it (awsKey): a
// compute quota, Studio domain, assignment or DataZone connection by name,
// an access entry by its principal ARN, a Pod Identity association by its
// namespace and service account. Its content is the call's canonical text
// (what the approval pins) and its request.
//
// What only the old plan has is deleted, by the rules revocation follows
// (RevocationPlan); what those rules spare is kept instead:
//   - a shared object (WorkloadPriorityClass, ResourceFlavor) is never
//     deleted: other teams use it (RevocationPlan leaves them out;
//     Applier.Delete refuses them);
//   - an object HyperPod owns (Owner: the team namespace and LocalQueue in
//     HyperPod-managed mode) is left to HyperPod (RevocationPlan's
//     ActionLeave);
//   - a namespace is never deleted by an amendment: it holds the team's
//     work, and even revocation deletes one only in RevokeDelete mode;
//   - an AWS resource kept on revocation (KeepOnRevoke: a team domain with
//     studio.on_revoke keep) is kept.
//
// An object HyperPod owns and the portal only checks (OwnerHyperPodChecked)
// is never written, so when the plans differ on it, it is kept, not
// updated.
//
// A Slurm plan's rows are the sacctmgr commands the amendment runs
// (slurmDiff), in its order.
//
// The changes' Object and Call point into the two plans' slices.
func DiffPlans(from, to Plan) PlanDiff { return diffPlans(from, to, false) }

// DiffPlansHeld is DiffPlans for a connection whose hold is hold: on hold
// (hold.Applied), a Slurm amendment that renames the team's account shows
// the new account added with GrpJobs=0, as the amendment job adds it
// (slurmprov.ApplyKeepingHold), so the admin sees that the hold moves.
func DiffPlansHeld(from, to Plan, hold workflow.Hold) PlanDiff {
	return diffPlans(from, to, hold.Applied())
}

func diffPlans(from, to Plan, held bool) PlanDiff {
	var d PlanDiff

	oldObjects := map[objectKey]*Object{}
	for i := range from.Objects {
		oldObjects[keyOf(from.Objects[i])] = &from.Objects[i]
	}
	oldCalls := map[string]*awsprov.Call{}
	for i := range from.AWS {
		oldCalls[awsKey(from.AWS[i])] = &from.AWS[i]
	}

	seenObjects := map[objectKey]bool{}
	seenCalls := map[string]bool{}
	addCalls := func(phase awsprov.Phase) {
		for i := range to.AWS {
			c := &to.AWS[i]
			if c.Phase != phase {
				continue
			}
			k := awsKey(*c)
			seenCalls[k] = true
			d.Changes = append(d.Changes, diffCall(oldCalls[k], c))
		}
	}

	addCalls(awsprov.Guardrail)
	for i := range to.Objects {
		o := &to.Objects[i]
		k := keyOf(*o)
		seenObjects[k] = true
		d.Changes = append(d.Changes, diffObject(oldObjects[k], o))
	}
	addCalls(awsprov.Access)

	// What only the old plan has, in revocation's order.
	var goneCalls []awsprov.Call
	for _, c := range from.AWS {
		if !seenCalls[awsKey(c)] {
			goneCalls = append(goneCalls, c)
		}
	}
	awsFirst, awsLast := awsprov.RevocationOrder(goneCalls)
	removeCall := func(c awsprov.Call) {
		ch := PlanChange{Action: DiffDelete, What: c.Title(), Call: &c, Detail: "not in the new plan: " + fieldsText(c)}
		if c.Kind == awsprov.KindAccessEntry {
			// EKS identifies an access entry by its principal:
			// UpdateAccessEntry takes principalArn in its path and only
			// kubernetesGroups and username in its body
			// (https://docs.aws.amazon.com/eks/latest/APIReference/API_UpdateAccessEntry.html),
			// so a role the new plan no longer names loses its entry.
			ch.Detail = "the new plan gives this role no access entry (EKS cannot move an entry to another principal): " + fieldsText(c)
		}
		if c.KeepOnRevoke {
			ch.Action = DiffKeep
			ch.Detail = "kept (settings: studio.on_revoke keep), as revocation keeps it: " + fieldsText(c)
		}
		d.Changes = append(d.Changes, ch)
	}
	for _, c := range awsFirst {
		removeCall(c)
	}
	var gone []Object
	for i := len(from.Objects) - 1; i >= 0; i-- { // reverse apply order within a kind
		if !seenObjects[keyOf(from.Objects[i])] {
			gone = append(gone, from.Objects[i])
		}
	}
	slices.SortStableFunc(gone, func(a, b Object) int { return revocationRank(a.Kind) - revocationRank(b.Kind) })
	for i := range gone {
		o := &gone[i]
		ch := PlanChange{Action: DiffDelete, What: o.Kind + " " + o.Ref(), Object: o, Detail: o.Detail}
		switch {
		case o.Shared:
			ch.Action, ch.Detail = DiffKeep, "shared by all teams: an amendment never deletes it"
		case o.Owner != OwnerPortal:
			ch.Action, ch.Detail = DiffKeep, "left to HyperPod task governance, which owns it"
		case o.Kind == "Namespace":
			ch.Action, ch.Detail = DiffKeep, "a namespace is never deleted by an amendment (it holds the team's work): revoke the connection to remove it"
		}
		d.Changes = append(d.Changes, ch)
	}
	for _, c := range awsLast {
		removeCall(c)
	}
	d.Changes = append(d.Changes, slurmDiff(from.Slurm, to.Slurm, held)...)
	return d
}

// revocationRank orders kinds as RevocationPlan removes them: the kinds of
// revocationOrder in its order, then any other kind, then the namespace.
func revocationRank(kind string) int {
	if i := slices.Index(revocationOrder, kind); i >= 0 {
		return i
	}
	if kind == "Namespace" {
		return len(revocationOrder) + 1
	}
	return len(revocationOrder)
}

// objectKey identifies a Kubernetes object across plans.
type objectKey struct{ group, kind, namespace, name string }

func keyOf(o Object) objectKey {
	k := objectKey{kind: o.Kind, namespace: o.Namespace, name: o.Name}
	if o.Obj != nil {
		if gv, err := schema.ParseGroupVersion(o.Obj.GetAPIVersion()); err == nil {
			k.group = gv.Group
		}
	}
	return k
}

// awsKey identifies an AWS resource across plans as its API does:
//   - a compute quota by name (QuotaName: ListComputeQuotas by name, then
//     UpdateComputeQuota with its id and TargetVersion, in place);
//   - a Studio domain by name (EnsureDomain: ListDomains by exact name,
//     UpdateDomain in place);
//   - a Studio assignment by its domain and group;
//   - a DataZone connection by domain, project and name: it lives in its
//     project (EnsureHyperPodConnection finds it there by name);
//   - an access entry by cluster and principal ARN: "POST
//     /clusters/name/access-entries/principalArn", whose body has no
//     principal (https://docs.aws.amazon.com/eks/latest/APIReference/API_UpdateAccessEntry.html),
//     so another role is another entry: delete and create;
//   - a Pod Identity association by cluster, namespace and service
//     account: "Only the IAM role can be changed; an association can't be
//     moved between clusters, namespaces, or service accounts"
//     (https://docs.aws.amazon.com/eks/latest/APIReference/API_UpdatePodIdentityAssociation.html),
//     so a new workload role is an update in place.
func awsKey(c awsprov.Call) string {
	parts := []string{string(c.Kind)}
	switch {
	case c.Assignment != nil:
		parts = append(parts, c.Assignment.SharedDomainID, domainName(c.Assignment.Domain), c.Assignment.Group)
	case c.DataZone != nil:
		parts = append(parts, c.DataZone.DomainID, c.DataZone.ProjectID, c.DataZone.Name)
	case c.AccessEntry != nil:
		parts = append(parts, c.AccessEntry.ClusterName, c.AccessEntry.PrincipalARN)
	case c.PodIdentity != nil:
		parts = append(parts, c.PodIdentity.ClusterName, c.PodIdentity.Namespace, c.PodIdentity.ServiceAccount)
	default:
		parts = append(parts, c.Name)
	}
	return strings.Join(parts, "\x00")
}

func domainName(d *awsprov.DomainSpec) string {
	if d == nil {
		return ""
	}
	return d.Name
}

func diffObject(old, o *Object) PlanChange {
	ch := PlanChange{What: o.Kind + " " + o.Ref(), Object: o}
	if old == nil {
		ch.Action, ch.Detail = DiffCreate, o.Detail
		if o.Owner == OwnerHyperPodChecked {
			ch.Action = DiffKeep // the portal checks it exists; HyperPod creates it
		}
		return ch
	}
	changes := objectChanges(old.Obj, o.Obj)
	switch {
	case len(changes) == 0:
		ch.Action = DiffUnchanged
	case o.Owner == OwnerHyperPodChecked:
		ch.Action, ch.Detail = DiffKeep, "HyperPod's: the portal only checks that it exists and never writes it ("+summarize(changes)+")"
	default:
		ch.Action, ch.Detail = DiffUpdate, summarize(changes)
		if o.Shared {
			ch.Detail += " (shared by all teams)"
		}
	}
	return ch
}

// objectChanges are the changed leaves of two objects, without the
// contract version and hash each version stamps on them.
func objectChanges(a, b *unstructured.Unstructured) []string {
	var am, bm map[string]any
	if a != nil {
		am = unstamped(a)
	}
	if b != nil {
		bm = unstamped(b)
	}
	var out []string
	walkDiff("", am, bm, &out)
	return out
}

// unstamped is a copy of u's content without the contract version label
// and contract hash annotation (builder.add), which change with every
// version and mean nothing to apply.
func unstamped(u *unstructured.Unstructured) map[string]any {
	c := u.DeepCopy()
	if l := c.GetLabels(); l != nil {
		delete(l, LabelContractVersion)
		c.SetLabels(l) // an empty map removes the field
	}
	if an := c.GetAnnotations(); an != nil {
		delete(an, AnnotationContractHash)
		c.SetAnnotations(an)
	}
	return c.Object
}

// walkDiff appends "path: old → new" for each leaf that differs between a
// and b. Maps compare key by key, lists index by index.
func walkDiff(path string, a, b any, out *[]string) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := slices.Collect(maps.Keys(am))
		for k := range bm {
			if _, ok := am[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := k
			if path != "" && !strings.HasPrefix(k, "[") {
				p = path + "." + k
			} else if path != "" {
				p = path + k
			}
			walkDiff(p, am[k], bm[k], out)
		}
		return
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok {
		if an, bn := byName(al), byName(bl); an != nil && bn != nil {
			// Lists of named items (flavors, resources, containers)
			// compare by name: "flavors[ml.p5.48xlarge]".
			walkDiff(path, an, bn, out)
			return
		}
		for i := range max(len(al), len(bl)) {
			var x, y any
			if i < len(al) {
				x = al[i]
			}
			if i < len(bl) {
				y = bl[i]
			}
			walkDiff(fmt.Sprintf("%s[%d]", path, i), x, y, out)
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, path+": "+leafText(a)+" → "+leafText(b))
	}
}

// byName is a list of maps that each have a distinct string "name" as a
// map keyed "[name]", or nil.
func byName(l []any) map[string]any {
	m := make(map[string]any, len(l))
	for _, v := range l {
		item, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		name, ok := item["name"].(string)
		if !ok || name == "" || m["["+name+"]"] != nil {
			return nil
		}
		m["["+name+"]"] = item
	}
	return m
}

// leafText is a value for people: a scalar as is, a map or list as compact
// JSON cut to a line, nothing as "(none)".
func leafText(v any) string {
	switch v := v.(type) {
	case nil:
		return "(none)"
	case string:
		return v
	case map[string]any, []any:
		j, err := json.Marshal(v)
		if err != nil {
			return fmt.Sprint(v)
		}
		const maxLen = 80
		if s := string(j); len(s) > maxLen {
			return s[:maxLen] + "…"
		}
		return string(j)
	}
	return fmt.Sprint(v)
}

// summarize joins the first maxDiffPaths changes and counts the rest.
func summarize(changes []string) string {
	if len(changes) <= maxDiffPaths {
		return strings.Join(changes, "; ")
	}
	return strings.Join(changes[:maxDiffPaths], "; ") + fmt.Sprintf("; and %d more", len(changes)-maxDiffPaths)
}

func diffCall(old, c *awsprov.Call) PlanChange {
	ch := PlanChange{What: c.Title(), Call: c}
	if old == nil {
		ch.Action, ch.Detail = DiffCreate, fieldsText(*c)
		return ch
	}
	if old.Canonical() == c.Canonical() && callRequest(*old) == callRequest(*c) {
		ch.Action = DiffUnchanged
		return ch
	}
	ch.Action = DiffUpdate
	var changes []string
	have := map[string]string{}
	for _, f := range old.Fields {
		have[f.Name] = f.Value
	}
	for _, f := range c.Fields {
		if v, ok := have[f.Name]; !ok || v != f.Value {
			changes = append(changes, f.Name+": "+noneIfEmpty(v)+" → "+noneIfEmpty(f.Value))
		}
		delete(have, f.Name)
	}
	for _, f := range old.Fields {
		if _, ok := have[f.Name]; ok {
			changes = append(changes, f.Name+": "+noneIfEmpty(f.Value)+" → (none)")
		}
	}
	if len(changes) == 0 {
		changes = append(changes, "the request changes (operations or settings not shown on the plan)")
	}
	ch.Detail = summarize(changes)
	if c.Kind == awsprov.KindDomain && fieldOf(*old, "vpc") != fieldOf(*c, "vpc") {
		// EnsureDomain: UpdateDomain cannot change the VPC (ErrDomainRecreate).
		ch.Detail += " (SageMaker cannot change a domain's VPC: the update will stop with an error)"
	}
	return ch
}

// fieldsText is a call's key fields, "name=value, ...".
func fieldsText(c awsprov.Call) string {
	return strings.TrimPrefix(c.Summary(), c.Title()+": ")
}

func noneIfEmpty(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func fieldOf(c awsprov.Call, name string) string {
	for _, f := range c.Fields {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

// callRequest is a call's desired state as JSON (maps sort their keys),
// beyond the fields its canonical text shows. The Studio role check is not
// part of it: it is a read-only check, as in Canonical.
func callRequest(c awsprov.Call) string {
	if a := c.Assignment; a != nil && a.Domain != nil {
		// An assignment finds its domain by name (the domain's own call
		// carries the rest): a change of the domain's execution role is
		// not a change of the assignment.
		cp := *a
		cp.Domain = &awsprov.DomainSpec{Name: a.Domain.Name}
		c.Assignment = &cp
	}
	j, err := json.Marshal([]any{c.Quota, c.Domain, c.Assignment, c.DataZone, c.AccessEntry, c.PodIdentity})
	if err != nil {
		return "unencodable: " + err.Error() // differs from any encoding: an update, never a silent "unchanged"
	}
	return string(j)
}
