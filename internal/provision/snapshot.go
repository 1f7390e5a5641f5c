package provision

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// No-op reconcile (issue 15): the drift check and a re-apply of many
// unchanged tenants read the cluster with one list per kind, not a GET (and
// a dry-run or real apply) per object, and compare each planned object with
// its live copy locally. Only an object that is missing from the lists or
// differs from its plan costs requests of its own (Drift confirms it with a
// dry-run apply; a re-apply job applies it, ForPlans).
//
// What "unchanged" means (Covers): the comparison must never call an object
// unchanged when a server-side apply of its plan (with force) would change
// it, since the drift check then reports nothing and the re-apply leaves a
// hand edit in place. Covers holds only when all three hold:
//
//   - every field the plan sets has the same value on the live object (a
//     map may have more keys, defaulted by the API server or set by another
//     manager; a list must have as many elements, each covered in turn);
//   - the portal's own Apply entry in metadata.managedFields still owns
//     every field the plan sets (ownedPlanned). This is what makes the
//     first rule safe. Extra keys are harmless only in granular maps and
//     structs, which server-side apply merges key by key; an atomic field
//     (NetworkPolicy ingress/egress and their from/to peers are
//     +listType=atomic, a LabelSelector is +structType=atomic, as are the
//     lists without a marker such as a Role's rules or a LimitRange's
//     limits) is replaced whole by an apply, so a peer given a
//     namespaceSelector by hand, or a podSelector given matchLabels, is
//     undone by an apply although every value the plan sets is still
//     there. "Whenever a field's value does change, ownership moves from
//     its current manager to the manager making the change", and an atomic
//     field is owned by one manager as a whole
//     (https://kubernetes.io/docs/reference/using-api/server-side-apply/#field-management
//     and #merge-strategy: "atomic: ... the entire list is replaced"), so
//     any edit by another manager inside an atomic field the portal set
//     takes that field out of the portal's entry. A field the portal does
//     not own (or an object without the entry) is never trusted: the
//     object goes the old way, a dry-run apply (Drift) or an apply
//     (a re-apply job);
//   - every field the portal's field manager owns on the live object is one
//     the plan still sets (ownedNotPlanned): SSA removes the fields the
//     manager owned and no longer applies ("If you remove a field from a
//     manifest and apply that manifest, Server-Side Apply checks if there
//     are any other field managers that also own the field. If the field is
//     not owned by any other field managers, it is either deleted from the
//     live object or reset to its default value", same page).
//
// One case the three cannot see: while the portal still owns an atomic
// field, its live value is the one the portal last applied (plus the API
// server's defaults); if the plan itself changed since by dropping a key
// inside that atomic field (a cluster settings change, not an edit on the
// cluster), the extra key looks like a default. A new approved version is
// applied by its job with a real apply, not through Covers. The contract
// hash annotation is one of the fields compared, but it is not trusted on
// its own: a hand edit of the spec that leaves the annotation alone is a
// difference in the spec.
//
// The lists select the portal's objects by label (LabelManagedBy, and
// LabelConnection for the plans' connections unless a kind has shared
// objects); cluster-scoped kinds are listed the same way. A namespaced
// kind is listed in the plans' namespace alone when every planned object
// of it is there (one plan, as a detail page's or a re-apply batch of one
// job), else
// across namespaces. Two kinds are listed without a selector: RoleBindings,
// because the drift check reports and a re-apply removes bindings the
// portal did not make (they carry no portal label), and a kind with an
// object HyperPod owns and the portal only checks (its LocalQueue carries
// no portal label). An object a list did not return (deleted, or its
// labels removed by hand) is read on its own with a GET, so a removed label
// is reported as the change it is.
//
// When the plans have one namespace, the Namespace kind is listed first,
// and a namespace that does not exist (a draft's, shown on its detail page)
// ends the snapshot there: nothing else of the plans can exist in it, so
// the other kinds are not listed; the drift check reports its objects
// deleted without reading them, and reads the cluster-scoped ones with a
// GET each.
//
// A snapshot lives for one drift check or one batch of re-apply jobs (one
// stretch of their Kubernetes steps, reapplybatch.go) and is never shared
// between calls, so it holds nothing another replica could have changed
// since: it is as fresh as the GET it replaces, give or take the time the
// batch's own steps take (a re-apply batch's Kubernetes steps run straight
// after their snapshot, with no AWS step between them). The one exception
// is the drift checker's pass (DriftChecker.RunOnce): its batches share the
// lists taken without a label selector across namespaces (ListCache), so
// those are as old as the pass.

// SnapshotPageSize is the page size of a snapshot's lists (ListOptions.Limit):
// a list of more objects than this costs one request per page. It bounds
// one answer to a few megabytes; the kind with the most objects per tenant
// (NetworkPolicy, six) fits 100 tenants in one page.
const SnapshotPageSize = 1000

// Snapshot is the live copy of many plans' objects, read with one list per
// kind. Build it with Applier.Snapshot.
type Snapshot struct {
	objs map[snapKey]*unstructured.Unstructured
	// bindings are the RoleBindings of the plans' namespaces, by namespace.
	bindings map[string][]unstructured.Unstructured
	// absent is the plans' namespace when it does not exist: nothing was
	// listed after it.
	absent string
	// Lists is the number of list requests (pages) the snapshot took.
	Lists int

	// mappings are the Applier's RESTMappings of the kinds asked for, a
	// failure included, for the snapshot's life: each planned object is
	// mapped when the snapshot is taken and again when it is read (live),
	// and the discovery mapper's lookup, a few microseconds each, was a
	// tenth of a no-op re-apply's own CPU at 100 tenants.
	mu       sync.Mutex
	mappings map[schema.GroupVersionKind]mapped
}

type mapped struct {
	m   *meta.RESTMapping
	err error
}

// mapping is a.Mapper's RESTMapping of gvk, looked up once per snapshot.
func (s *Snapshot) mapping(a *Applier, gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.mappings[gvk]; ok {
		return r.m, r.err
	}
	m, err := a.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if s.mappings == nil {
		s.mappings = map[schema.GroupVersionKind]mapped{}
	}
	s.mappings[gvk] = mapped{m, err}
	return m, err
}

type snapKey struct {
	gvr       schema.GroupVersionResource
	namespace string
	name      string
}

// kindList is what a snapshot lists of one resource.
type kindList struct {
	gvr        schema.GroupVersionResource
	namespaced bool
	shared     bool            // a planned object is shared (carries no connection label)
	checked    bool            // a planned object is HyperPod's, unlabelled
	conns      map[string]bool // the planned objects' LabelConnection
	want       map[snapKey]bool
}

// Snapshot lists every kind the plans hold, once (a page per
// SnapshotPageSize objects), and keeps the planned objects and the
// RoleBindings of the plans' namespaces.
func (a *Applier) Snapshot(ctx context.Context, plans []Plan) (*Snapshot, error) {
	return a.snapshot(ctx, plans, nil)
}

// snapshot is Snapshot, taking the unselected lists across namespaces from
// lists (nil: listed here).
func (a *Applier) snapshot(ctx context.Context, plans []Plan, lists *ListCache) (*Snapshot, error) {
	kinds := map[schema.GroupVersionResource]*kindList{}
	var order []schema.GroupVersionResource
	namespaces := map[string]bool{}
	get := func(m *meta.RESTMapping) *kindList {
		k := kinds[m.Resource]
		if k == nil {
			k = &kindList{gvr: m.Resource, namespaced: m.Scope.Name() == meta.RESTScopeNameNamespace, conns: map[string]bool{}, want: map[snapKey]bool{}}
			kinds[m.Resource] = k
			order = append(order, m.Resource)
		}
		return k
	}
	s := &Snapshot{objs: map[snapKey]*unstructured.Unstructured{}, bindings: map[string][]unstructured.Unstructured{}}
	for _, p := range plans {
		if p.Namespace != "" {
			namespaces[p.Namespace] = true
			m, err := s.mapping(a, roleBindings.GroupVersion().WithKind("RoleBinding"))
			if err != nil {
				return nil, fmt.Errorf("provision: snapshot: %w", err)
			}
			get(m)
		}
		for _, o := range p.Objects {
			if o.Obj == nil {
				continue // read on its own, where it fails
			}
			m, err := s.mapping(a, o.Obj.GroupVersionKind())
			if err != nil {
				// A kind the API server does not serve (a CRD not
				// installed): not listed, so the object is read on
				// its own and its plan alone fails with the error.
				continue
			}
			k := get(m)
			k.want[snapKey{m.Resource, o.Namespace, o.Name}] = true
			k.checked = k.checked || o.Owner == OwnerHyperPodChecked
			if c := o.Obj.GetLabels()[LabelConnection]; c != "" && !o.Shared {
				k.conns[c] = true
			} else {
				k.shared = true // no connection label to select it by
			}
		}
	}
	only := ""
	if len(namespaces) == 1 {
		for ns := range namespaces {
			only = ns
		}
		if i := slices.Index(order, namespacesGVR); i > 0 {
			order = append([]schema.GroupVersionResource{namespacesGVR}, slices.Delete(order, i, i+1)...)
		}
	}
	for _, gvr := range order {
		k := kinds[gvr]
		if only != "" && gvr != namespacesGVR && kinds[namespacesGVR] != nil {
			// The Namespace kind was listed first: does the plans'
			// namespace exist?
			key := snapKey{namespacesGVR, "", only}
			if s.objs[key] == nil {
				ns, err := a.Client.Resource(namespacesGVR).Get(ctx, only, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					s.absent = only
					return s, nil
				}
				if err != nil {
					return nil, fmt.Errorf("provision: snapshot: get namespace %s: %w", only, err)
				}
				if kinds[namespacesGVR].want[key] {
					s.objs[key] = ns
				}
			}
			only = ""
		}
		keep := func(obj *unstructured.Unstructured) {
			key := snapKey{gvr, obj.GetNamespace(), obj.GetName()}
			if !k.namespaced {
				key.namespace = ""
			}
			if gvr == roleBindings && namespaces[key.namespace] {
				s.bindings[key.namespace] = append(s.bindings[key.namespace], *obj)
			}
			if k.want[key] {
				s.objs[key] = obj
			}
		}
		opts := metav1.ListOptions{Limit: SnapshotPageSize, LabelSelector: k.selector()}
		ns, one := k.oneNamespace(namespaces)
		if lists != nil && opts.LabelSelector == "" && !one {
			// Unselected, across namespaces: the same for every batch
			// of a drift check pass, so listed once per pass.
			items, n, err := lists.list(ctx, a, gvr)
			s.Lists += n
			if err != nil {
				return nil, err
			}
			for i := range items {
				keep(&items[i])
			}
			continue
		}
		var ri dynamic.ResourceInterface = a.Client.Resource(gvr)
		if one {
			// Every planned object of the kind is in one namespace
			// (one plan, as a batch of one re-apply job's): that
			// namespace alone.
			ri = a.Client.Resource(gvr).Namespace(ns)
		}
		n, err := listAll(ctx, ri, gvr, opts, func(list *unstructured.UnstructuredList) {
			for i := range list.Items {
				keep(&list.Items[i])
			}
		})
		s.Lists += n
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

// listAll lists ri a page at a time, handing each page to page, and
// returns the number of requests.
func listAll(ctx context.Context, ri dynamic.ResourceInterface, gvr schema.GroupVersionResource, opts metav1.ListOptions, page func(*unstructured.UnstructuredList)) (int, error) {
	n := 0
	for {
		list, err := ri.List(ctx, opts)
		if err != nil {
			return n, fmt.Errorf("provision: snapshot: list %s: %w", gvr.Resource, err)
		}
		n++
		page(list)
		if list.GetContinue() == "" {
			return n, nil
		}
		opts.Continue = list.GetContinue()
	}
}

// ListCache keeps the lists snapshots take without a label selector across
// namespaces (RoleBindings, and a kind HyperPod owns an object of), for the
// snapshots of one drift check pass (DriftChecker.RunOnce): each such kind
// is listed once per pass, not once per batch of DriftBatch connections.
// A pass's later batches so see those kinds as they were at its first: a
// RoleBinding made after that is reported by the next pass. Nil caches
// nothing. Safe for concurrent use.
type ListCache struct {
	mu    sync.Mutex
	lists map[schema.GroupVersionResource][]unstructured.Unstructured
}

// NewListCache is an empty ListCache, for one pass.
func NewListCache() *ListCache {
	return &ListCache{lists: map[schema.GroupVersionResource][]unstructured.Unstructured{}}
}

// list is every object of gvr, listed on the first call; n is the
// requests this call took.
func (c *ListCache) list(ctx context.Context, a *Applier, gvr schema.GroupVersionResource) ([]unstructured.Unstructured, int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if items, ok := c.lists[gvr]; ok {
		return items, 0, nil
	}
	var items []unstructured.Unstructured
	n, err := listAll(ctx, a.Client.Resource(gvr), gvr, metav1.ListOptions{Limit: SnapshotPageSize}, func(l *unstructured.UnstructuredList) {
		items = append(items, l.Items...)
	})
	if err != nil {
		return nil, n, err
	}
	c.lists[gvr] = items
	return items, n, nil
}

// oneNamespace is the namespace every planned object of a namespaced kind
// is in, and every plan's namespace, when there is one.
func (k *kindList) oneNamespace(planNamespaces map[string]bool) (string, bool) {
	if !k.namespaced {
		return "", false
	}
	all := maps.Clone(planNamespaces)
	for key := range k.want {
		all[key.namespace] = true
	}
	if len(all) != 1 {
		return "", false
	}
	for ns := range all {
		return ns, ns != ""
	}
	return "", false
}

// selector is the label selector of a kind's list: none for RoleBindings
// and for a kind with an object HyperPod owns; else the portal's objects,
// of the plans' connections unless one is shared.
func (k *kindList) selector() string {
	if k.gvr == roleBindings || k.checked {
		return ""
	}
	sel := LabelManagedBy + "=" + ManagedBy
	if k.shared || len(k.conns) == 0 {
		return sel
	}
	ids := slices.Sorted(maps.Keys(k.conns))
	return sel + "," + LabelConnection + " in (" + strings.Join(ids, ",") + ")"
}

// absentFrom reports whether o is in a namespace the snapshot found does
// not exist: o cannot exist either.
func (s *Snapshot) absentFrom(o Object) bool {
	return s.absent != "" && o.Namespace == s.absent
}

// live is the listed copy of o, or nil when the lists did not return it.
func (s *Snapshot) live(a *Applier, o Object) *unstructured.Unstructured {
	if o.Obj == nil {
		return nil
	}
	m, err := s.mapping(a, o.Obj.GroupVersionKind())
	if err != nil {
		return nil
	}
	return s.objs[snapKey{m.Resource, o.Namespace, o.Name}]
}

// Covers lists where live may not be what applying want with the portal's
// field manager would leave (see the comment at the top of this file): the
// dotted paths, at most three levels deep, of the fields want sets that
// live lacks or holds another value in, then those want sets that the
// portal's Apply entry in live's managedFields does not own (another
// manager changed them, or live has no such entry: "metadata.managedFields"),
// then those the portal's manager owns on live and want no longer sets.
// None means the apply would write nothing.
func Covers(live, want *unstructured.Unstructured, fieldManager string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	var walk func(path []string, w, l any)
	walk = func(path []string, w, l any) {
		report := reportOf(path)
		switch wv := w.(type) {
		case map[string]any:
			lv, ok := l.(map[string]any)
			if !ok {
				add(report)
				return
			}
			keys := make([]string, 0, len(wv))
			for k := range wv {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				p := append(slices.Clip(path), k)
				lk, ok := lv[k]
				if !ok {
					if wv[k] != nil { // an explicit null sets nothing
						add(reportOf(p))
					}
					continue
				}
				walk(p, wv[k], lk)
			}
		case []any:
			lv, ok := l.([]any)
			if !ok || len(lv) != len(wv) {
				add(report)
				return
			}
			for i := range wv {
				walk(path, wv[i], lv[i])
			}
		default:
			if !sameScalar(w, l) {
				add(report)
			}
		}
	}
	walk(nil, want.Object, live.Object)
	for _, p := range ownedPlanned(live, want, fieldManager) {
		add(p)
	}
	for _, p := range ownedNotPlanned(live, want.Object, fieldManager) {
		add(p)
	}
	return out
}

// reportOf is path as a drift report names it: at most three levels deep,
// as differences does.
func reportOf(path []string) string {
	return strings.Join(path[:min(len(path), 3)], ".")
}

// sameScalar compares JSON scalars, numbers by value (a decoded integer may
// be an int64 on one side and a float64 on the other).
func sameScalar(a, b any) bool {
	if fa, ok := number(a); ok {
		fb, ok := number(b)
		return ok && fa == fb
	}
	switch a.(type) {
	case map[string]any, []any:
		return false // not a scalar (and not comparable with ==)
	}
	return a == b
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case float64:
		return n, true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// strippedPaths are the fields the API server never records in
// managedFields (k8s.io/apimachinery pkg/util/managedfields/internal/stripmeta.go,
// NewStripMetaManager's stripSet): they are not owned by anyone.
var strippedPaths = map[string]bool{"apiVersion": true, "kind": true, "metadata.name": true, "metadata.namespace": true,
	"metadata.creationTimestamp": true, "metadata.selfLink": true, "metadata.uid": true, "metadata.clusterName": true,
	"metadata.generation": true, "metadata.managedFields": true, "metadata.resourceVersion": true}

// applySet is a field manager's Apply entry of an object's managedFields:
// its apiVersion, subresource and field set (fieldsV1).
type applySet struct {
	apiVersion, subresource string
	fields                  map[string]any
}

// applySets are fieldManager's Apply entries with a field set on obj, read
// from obj's unstructured managedFields as they are. (Unstructured's
// GetManagedFields converts each entry to its type, which turns the field
// set into JSON to be parsed again: for every object a snapshot compares,
// twice, that was a third of a no-op re-apply's comparing; issue 15.) ok
// is false when the managedFields are not what the API server writes.
func applySets(obj *unstructured.Unstructured, fieldManager string) (sets []applySet, ok bool) {
	md, _ := obj.Object["metadata"].(map[string]any)
	raw, found := md["managedFields"]
	if !found || raw == nil {
		return nil, true
	}
	entries, ok := raw.([]any)
	if !ok {
		return nil, false
	}
	for _, e := range entries {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, false
		}
		str := func(k string) (string, bool) {
			v, found := m[k]
			if !found || v == nil {
				return "", true
			}
			s, ok := v.(string)
			return s, ok
		}
		manager, ok1 := str("manager")
		operation, ok2 := str("operation")
		apiVersion, ok3 := str("apiVersion")
		subresource, ok4 := str("subresource")
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return nil, false
		}
		if manager != fieldManager || operation != string(metav1.ManagedFieldsOperationApply) || m["fieldsV1"] == nil {
			continue
		}
		fields, ok := m["fieldsV1"].(map[string]any)
		if !ok {
			return nil, false
		}
		sets = append(sets, applySet{apiVersion: apiVersion, subresource: subresource, fields: fields})
	}
	return sets, true
}

// ownedPlanned lists the fields want sets that fieldManager's Apply entry
// on live (of want's apiVersion, not of a subresource) does not own. The
// entry's field set has the shape of the type: a granular map or struct
// lists its keys ("f:name"), a granular list its elements ("k:{...}" by
// key, "v:..." by value, "i:n" by index), and an atomic field or a scalar
// is a leaf ("f:ingress": {}), owned whole. So a leaf in the entry is owned
// with all it holds, and a node with children is checked part by part;
// nothing needs to know which fields are atomic.
func ownedPlanned(live, want *unstructured.Unstructured, fieldManager string) []string {
	var set map[string]any
	sets, ok := applySets(live, fieldManager)
	if !ok {
		return []string{"metadata.managedFields"}
	}
	for _, mf := range sets {
		if mf.subresource == "" && mf.apiVersion == want.GetAPIVersion() {
			set = mf.fields
			break
		}
	}
	if set == nil {
		return []string{"metadata.managedFields"}
	}
	var out []string
	var walk func(path []string, w any, fs map[string]any)
	walk = func(path []string, w any, fs map[string]any) {
		switch wv := w.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(wv)) {
				if wv[k] == nil {
					continue // an explicit null sets nothing
				}
				p := append(slices.Clip(path), k)
				if strippedPaths[strings.Join(p, ".")] {
					continue
				}
				sub, ok := fs["f:"+k]
				if !ok && !(len(p) == 1 && k == "metadata") {
					out = append(out, reportOf(p))
					continue
				}
				subSet, _ := sub.(map[string]any)
				if hasChildren(subSet) || !ok {
					walk(p, wv[k], subSet)
				}
			}
		case []any:
			for i, e := range wv {
				key, ok := elementOf(fs, e, i)
				if !ok {
					out = append(out, reportOf(path))
					return
				}
				if subSet, _ := fs[key].(map[string]any); hasChildren(subSet) {
					walk(path, e, subSet)
				}
			}
		default:
			// A scalar under a node with children: the node is not
			// this type's shape; trust nothing.
			if fs != nil {
				out = append(out, reportOf(path))
			}
		}
	}
	walk(nil, want.Object, set)
	sort.Strings(out)
	return slices.Compact(out)
}

// hasChildren reports whether a managedFields node lists parts of its field
// (anything but ".", which only marks the node itself as owned).
func hasChildren(fs map[string]any) bool {
	for k := range fs {
		if k != "." {
			return true
		}
	}
	return false
}

// elementOf is the key of list element e (at index i) in a granular list's
// managedFields node: "v:<json>" for a set's scalar, "k:{...}" whose key
// fields e has with the same values for a map-list, or "i:<i>".
func elementOf(fs map[string]any, e any, i int) (string, bool) {
	for key := range fs {
		switch {
		case strings.HasPrefix(key, "v:"):
			var v any
			if json.Unmarshal([]byte(key[2:]), &v) == nil && (sameScalar(v, e) || reflect.DeepEqual(v, e)) {
				return key, true
			}
		case strings.HasPrefix(key, "k:"):
			em, ok := e.(map[string]any)
			var kv map[string]any
			if !ok || json.Unmarshal([]byte(key[2:]), &kv) != nil || len(kv) == 0 {
				continue
			}
			match := true
			for f, v := range kv {
				if !sameScalar(v, em[f]) && !reflect.DeepEqual(v, em[f]) {
					match = false
					break
				}
			}
			if match {
				return key, true
			}
		case key == "i:"+strconv.Itoa(i):
			return key, true
		}
	}
	return "", false
}

// ownedNotPlanned are the fields (map keys, down to the first list or
// scalar) that fieldManager owns on live with an apply and want does not
// set: a re-apply would remove them.
func ownedNotPlanned(live *unstructured.Unstructured, want map[string]any, fieldManager string) []string {
	var out []string
	sets, ok := applySets(live, fieldManager)
	if !ok {
		return []string{"metadata.managedFields"}
	}
	for _, mf := range sets {
		set := mf.fields
		var walk func(path []string, fs map[string]any, w map[string]any)
		walk = func(path []string, fs map[string]any, w map[string]any) {
			for k, sub := range fs {
				name, ok := strings.CutPrefix(k, "f:")
				if !ok {
					continue // ".", or a list element (k:, v:, i:): lists are compared whole
				}
				p := append(slices.Clip(path), name)
				wv, ok := w[name]
				if !ok || wv == nil {
					out = append(out, reportOf(p))
					continue
				}
				subSet, _ := sub.(map[string]any)
				if wm, ok := wv.(map[string]any); ok && len(subSet) > 0 {
					walk(p, subSet, wm)
				}
			}
		}
		walk(nil, set, want)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// unchanged reports whether o's live copy in s is what applying o would
// leave, and its resourceVersion. An object HyperPod owns and the portal
// only checks is unchanged when it exists.
func (s *Snapshot) unchanged(a *Applier, o Object) (string, bool) {
	live := s.live(a, o)
	if live == nil {
		return "", false
	}
	if o.Owner == OwnerHyperPodChecked {
		return live.GetResourceVersion(), true
	}
	if len(Covers(live, o.Obj, a.fieldManager())) > 0 {
		return "", false
	}
	return live.GetResourceVersion(), true
}

func (a *Applier) fieldManager() string {
	if a.FieldManager == "" {
		return ManagedBy
	}
	return a.FieldManager
}
