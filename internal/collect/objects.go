package collect

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/usage"
)

// strip is the informers' transform (cache.TransformFunc): it runs before
// an object enters the informer's cache and keeps only the fields the
// collector reads, so that following 50,000 pods costs little memory.
func strip(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return slimPodOf(o), nil
	case *corev1.Node:
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: o.Name, ResourceVersion: o.ResourceVersion, UID: o.UID, Labels: map[string]string{}}}
		n.Spec.Unschedulable = o.Spec.Unschedulable
		for _, k := range []string{corev1.LabelInstanceTypeStable, LabelNodeHealth} {
			if v, ok := o.Labels[k]; ok {
				n.Labels[k] = v
			}
		}
		n.Status.Allocatable = corev1.ResourceList{}
		for _, r := range []corev1.ResourceName{ResourceGPU, ResourceNeuron, ResourceNeuronDevice, ResourceNeuronCore} {
			if q, ok := o.Status.Allocatable[r]; ok {
				n.Status.Allocatable[r] = q
			}
		}
		return n, nil
	case *corev1.Namespace:
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.Name, ResourceVersion: o.ResourceVersion, UID: o.UID}}
		if t, ok := o.Labels[provision.LabelTeam]; ok {
			ns.Labels = map[string]string{provision.LabelTeam: t}
		}
		return ns, nil
	case *kueue.Workload:
		w := &kueue.Workload{ObjectMeta: slimMeta(o.ObjectMeta)}
		if uid := controllerUID(&o.ObjectMeta); uid != "" {
			// Its key (workloadKey) is its controller's UID; the rest of
			// the reference is not read.
			w.OwnerReferences = []metav1.OwnerReference{{UID: uid, Controller: ptrTrue}}
		}
		if r := o.Spec.PriorityClassRef; r != nil {
			w.Spec.PriorityClassRef = sharedPriorityClassRef(*r)
		}
		// Only the conditions workloadLocked reads (Admitted, Evicted,
		// Finished; not QuotaReserved, PodsReady or any other), without
		// their messages, in a slice of their length. Type, status and
		// reason come from small sets (intern).
		read := func(cond metav1.Condition) bool {
			return cond.Type == kueue.WorkloadAdmitted || cond.Type == kueue.WorkloadEvicted || cond.Type == kueue.WorkloadFinished
		}
		if n := countOf(o.Status.Conditions, read); n > 0 {
			w.Status.Conditions = make([]metav1.Condition, 0, n)
			for _, cond := range o.Status.Conditions {
				if read(cond) {
					w.Status.Conditions = append(w.Status.Conditions, metav1.Condition{Type: intern(cond.Type), Status: intern(cond.Status),
						ObservedGeneration: cond.ObservedGeneration, LastTransitionTime: cond.LastTransitionTime, Reason: intern(cond.Reason)})
				}
			}
		}
		if a := o.Status.Admission; a != nil {
			w.Status.Admission = sharedAdmission(a)
		}
		// The pods' node selector names the instance type only while no
		// admission names a flavor (instanceType reads the flavor first):
		// a pod set is a whole pod template, over a kilobyte even empty.
		if a := w.Status.Admission; a == nil || len(a.PodSetAssignments) == 0 || len(a.PodSetAssignments[0].Flavors) == 0 {
			for _, ps := range o.Spec.PodSets[:min(1, len(o.Spec.PodSets))] {
				if it, ok := ps.Template.Spec.NodeSelector[corev1.LabelInstanceTypeStable]; ok {
					w.Spec.PodSets = []kueue.PodSet{{Name: intern(ps.Name), Count: ps.Count, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
						NodeSelector: sharedSelector(it)}}}}
				}
			}
		}
		return w, nil
	case *kueue.ClusterQueue:
		q := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: o.Name, ResourceVersion: o.ResourceVersion, UID: o.UID}}
		q.Status.FlavorsUsage = o.Status.FlavorsUsage
		return q, nil
	}
	return obj, nil
}

// slimMeta keeps an object's names, UID, version and timestamps; of its
// owners only the controller's UID is read (controllerUID), and each
// object keeps that its own way (slimPod.Task, a Workload's one owner
// reference).
func slimMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: intern(m.Namespace), UID: m.UID, ResourceVersion: m.ResourceVersion,
		CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp}
}

// controllerUID is the UID of the object's controller (the job that owns
// a pod or a Workload), "" without one.
func controllerUID(m *metav1.ObjectMeta) types.UID {
	if c := metav1.GetControllerOfNoCopy(m); c != nil {
		return c.UID
	}
	return ""
}

// ptrTrue is the Controller of the owner reference a stripped Workload
// keeps (shared: nothing writes through it).
var ptrTrue = func() *bool { t := true; return &t }()

// Values many stripped Workloads share (intern.go): the priority class
// reference, the admission (its ClusterQueue and its first pod set's
// flavors: a map of a few hundred bytes in each Workload, while the
// Workloads of a team's queue are admitted to one or two flavors) and a
// node selector naming an instance type. Nothing changes an object the
// informer cached.
var (
	priorityClassRefs internTable[kueue.PriorityClassRef, *kueue.PriorityClassRef]
	admissions        internTable[string, *kueue.Admission]
	selectors         internTable[string, map[string]string]
)

func sharedPriorityClassRef(r kueue.PriorityClassRef) *kueue.PriorityClassRef {
	return priorityClassRefs.of(r, func() (kueue.PriorityClassRef, *kueue.PriorityClassRef) {
		r = kueue.PriorityClassRef{Group: intern(r.Group), Kind: intern(r.Kind), Name: intern(r.Name)}
		return r, &r
	})
}

// sharedAdmission keeps of a Workload's admission its ClusterQueue and its
// first pod set's name and flavors (instanceType).
func sharedAdmission(a *kueue.Admission) *kueue.Admission {
	var k strings.Builder
	k.WriteString(string(a.ClusterQueue))
	psa := a.PodSetAssignments[:min(1, len(a.PodSetAssignments))]
	for _, p := range psa {
		// Each part ends in a 0 byte, which no name holds; nil and
		// empty flavors differ (a "-" or not).
		k.WriteString("\x00" + string(p.Name) + "\x00")
		if p.Flavors != nil {
			k.WriteByte('-')
		}
		for _, r := range slices.Sorted(maps.Keys(p.Flavors)) {
			k.WriteString("\x00" + string(r) + "\x00" + string(p.Flavors[r]))
		}
	}
	return admissions.of(k.String(), func() (string, *kueue.Admission) {
		out := &kueue.Admission{ClusterQueue: intern(a.ClusterQueue)}
		for _, p := range psa {
			var f map[corev1.ResourceName]kueue.ResourceFlavorReference
			if p.Flavors != nil {
				f = make(map[corev1.ResourceName]kueue.ResourceFlavorReference, len(p.Flavors))
				for r, fl := range p.Flavors {
					f[intern(r)] = intern(fl)
				}
			}
			out.PodSetAssignments = []kueue.PodSetAssignment{{Name: intern(p.Name), Flavors: f}}
		}
		return k.String(), out
	})
}

func sharedSelector(instanceType string) map[string]string {
	return selectors.of(instanceType, func() (string, map[string]string) {
		it := intern(instanceType)
		return it, map[string]string{corev1.LabelInstanceTypeStable: it}
	})
}

func (c *Collector) onNamespace(obj any) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// Team namespaces are those the provisioner labels with the team
	// (provision.LabelTeam on the Namespace it applies).
	if t := ns.Labels[provision.LabelTeam]; t != "" {
		c.teams[ns.Name] = t
	} else {
		delete(c.teams, ns.Name)
	}
}

// accel is a count of accelerators in each resource the collector reads:
// GPUs, whole Neuron devices (aws.amazon.com/neuron and
// aws.amazon.com/neurondevice both count devices) and NeuronCores.
type accel struct{ GPU, NeuronDevices, NeuronCores int64 }

func accelOf(r corev1.ResourceList, devices func(a, b int64) int64) accel {
	return accel{GPU: qty(r, ResourceGPU), NeuronDevices: devices(qty(r, ResourceNeuron), qty(r, ResourceNeuronDevice)),
		NeuronCores: qty(r, ResourceNeuronCore)}
}

func sum(a, b int64) int64 { return a + b }

// nodeAccel is what a node offers. A node's two device resources are the
// same devices (the plugin shows each device under both names), so they
// are not added up.
func nodeAccel(n *corev1.Node) accel { return accelOf(n.Status.Allocatable, larger) }

func larger(a, b int64) int64 { return max(a, b) }

// coresPerDevice is the node's own ratio of NeuronCores to devices, as its
// device plugin advertises them (both resources for the same hardware); 0
// when the node does not show both.
func (a accel) coresPerDevice() int64 {
	if a.NeuronDevices > 0 && a.NeuronCores > 0 && a.NeuronCores%a.NeuronDevices == 0 {
		return a.NeuronCores / a.NeuronDevices
	}
	return 0
}

// unit is the resource instance type itype is counted in: the settings'
// table's (provision.ResourcesPerInstance), so that usage, guarantees,
// capacity and the price per accelerator agree. "" for an instance type
// the table does not know, or one without accelerators.
func (c *Collector) unit(itype string) string {
	return c.Accelerators[itype].AcceleratorResource
}

// inUnit counts a pod's requests a in the unit of the instance type it
// runs on, given the node's cores per device (0: unknown).
//
// A request in NeuronCores on an instance type counted in devices takes
// whole devices, rounded up (a device's cores serve one pod's request at
// most as far as the count goes); the ratio is the node's own, because on
// Trainium2 the device plugin's core count follows the logical NeuronCore
// configuration, which the documentation leaves to each cluster. Without
// that ratio the cores cannot be converted: they are left out and logged.
func (c *Collector) inUnit(itype string, a accel, coresPerDevice int64) int64 {
	switch u := c.unit(itype); {
	case u == provision.ResourceNvidiaGPU:
		return a.GPU
	case provision.IsNeuronDevices(u):
		n := a.NeuronDevices
		if a.NeuronCores > 0 {
			if coresPerDevice > 0 {
				n += (a.NeuronCores + coresPerDevice - 1) / coresPerDevice
			} else {
				c.warnUnconverted(itype)
			}
		}
		return n
	case u == provision.ResourceNeuronCore:
		n := a.NeuronCores
		if a.NeuronDevices > 0 {
			if coresPerDevice > 0 {
				n += a.NeuronDevices * coresPerDevice
			} else {
				c.warnUnconverted(itype)
			}
		}
		return n
	case u == "":
		// Not in the table (or no accelerators there): whatever the pod
		// asks for, each in its own resource.
		return a.GPU + a.NeuronDevices + a.NeuronCores
	default:
		return 0 // a resource the collector does not read
	}
}

// warnUnconverted logs, once per instance type, requests that could not be
// converted to the instance type's unit. The caller holds mu.
func (c *Collector) warnUnconverted(itype string) {
	if c.warned[itype] {
		return
	}
	if c.warned == nil {
		c.warned = map[string]bool{}
	}
	c.warned[itype] = true
	c.logger().Warn("usage collector: Neuron requests on nodes that do not show both aws.amazon.com/neuron and aws.amazon.com/neuroncore cannot be converted and are not counted",
		"instance_type", itype, "unit", c.unit(itype))
}

// capacity is what a node offers, in its instance type's unit; the
// table's count per instance when the node shows none.
func (c *Collector) capacity(a accel, itype string) int64 {
	var n int64
	switch u := c.unit(itype); {
	case u == provision.ResourceNvidiaGPU:
		n = a.GPU
	case provision.IsNeuronDevices(u):
		n = a.NeuronDevices
	case u == provision.ResourceNeuronCore:
		n = a.NeuronCores
	case u == "":
		n = a.GPU + a.NeuronDevices
		if n == 0 {
			n = a.NeuronCores
		}
	}
	if n == 0 {
		n = int64(c.Accelerators[itype].Accelerators)
	}
	return n
}

func (c *Collector) onNode(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	now := c.now()
	itype := n.Labels[corev1.LabelInstanceTypeStable]
	if itype == "" {
		// Not an instance of any type (as the provisioner's node count
		// skips it): no capacity.
		c.onNodeGone(obj)
		return
	}
	// Capacity as the provisioner's node count has it
	// (provision.ClusterReader.Nodes): HyperPod says Schedulable and the
	// node is not cordoned.
	na := nodeAccel(n)
	span := usage.NodeSpan{Node: n.Name, InstanceType: itype, Accelerators: c.capacity(na, itype),
		Schedulable: provision.NodeSchedulable(n.Labels[LabelNodeHealth], n.Spec.Unschedulable)}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seenNodes[n.Name] = true
	if st := c.nodes[n.Name]; st != nil {
		cur := st.span
		if cur.InstanceType == span.InstanceType && cur.Accelerators == span.Accelerators && cur.Schedulable == span.Schedulable {
			st.coresPerDevice = na.coresPerDevice()
			return
		}
		c.closeNodeSpan(st, now)
	}
	span.From = now
	c.nodes[n.Name] = &nodeState{span: span, coresPerDevice: na.coresPerDevice()}
	c.nodesChanged(now)
	c.dirty.Nodes = append(c.dirty.Nodes, span)
	c.dirtyFrom = usage.Earlier(c.dirtyFrom, now)
}

func (c *Collector) onNodeGone(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.nodes[n.Name]; st != nil {
		c.closeNodeSpan(st, now)
		delete(c.nodes, n.Name)
		c.nodesChanged(now)
	}
}

// closeNodeSpan ends a node's current span at now (never before it began)
// and marks it to be written. c.mu is held.
func (c *Collector) closeNodeSpan(st *nodeState, now time.Time) {
	cur := st.span
	cur.To = usage.Later(now, cur.From)
	c.dirty.Nodes = append(c.dirty.Nodes, cur)
	c.dirtyFrom = usage.Earlier(c.dirtyFrom, now)
}

// slimPod is all the collector keeps of a pod, in the informer's cache
// too (the transform returns it in place of the *corev1.Pod): its names
// (podMeta), its controller's UID, node, priority class, the summed
// requests and the times from its status. Not a metav1.ObjectMeta (232
// bytes before its strings): the informer reads an object's names through
// meta.Accessor, which takes a metav1.ObjectMetaAccessor
// (k8s.io/apimachinery pkg/api/meta/meta.go, Accessor), so GetObjectMeta
// makes one for that read. At 50,000 pods the struct's size class went from
// 384 to 224 bytes.
type slimPod struct {
	podMeta
	Task                    types.UID // the controller's UID (the job): the pod's task
	NodeName, PriorityClass string
	Phase                   corev1.PodPhase
	Accel                   accel // requested, in each resource
	CPUMilli, MemoryMiB     int64
	Start, End              time.Time // End: when its last container finished
}

// podMeta is what the collector and the informer read of a pod's
// metadata.
type podMeta struct {
	Name, Namespace string
	UID             types.UID
	ResourceVersion string
}

// GetObjectMeta is the pod's metadata for meta.Accessor (the informer's
// keys: namespace/name), without labels, annotations, owners or managed
// fields: the collector keeps none.
func (p *slimPod) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion}
}

func (p *slimPod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func (p *slimPod) DeepCopyObject() runtime.Object {
	c := *p
	return &c
}

// slimPodOf reads what a pod holds from its spec and its status as the
// kubelet reports it: status.startTime is when the kubelet acknowledged
// the pod (k8s.io/api core/v1 PodStatus.StartTime: "RFC 3339 date and time
// at which the object was acknowledged by the Kubelet"), and a finished
// pod (phase Succeeded or Failed: all containers terminated) ended when its
// last container did (ContainerStateTerminated.FinishedAt).
func slimPodOf(o *corev1.Pod) *slimPod {
	p := &slimPod{podMeta: podMeta{Name: o.Name, Namespace: intern(o.Namespace), UID: o.UID, ResourceVersion: o.ResourceVersion}, Task: controllerUID(&o.ObjectMeta), NodeName: intern(o.Spec.NodeName),
		PriorityClass: intern(o.Spec.PriorityClassName), Phase: intern(o.Status.Phase)}
	for _, ctr := range o.Spec.Containers {
		r := ctr.Resources.Requests
		a := accelOf(r, sum)
		p.Accel.GPU, p.Accel.NeuronDevices, p.Accel.NeuronCores = p.Accel.GPU+a.GPU, p.Accel.NeuronDevices+a.NeuronDevices, p.Accel.NeuronCores+a.NeuronCores
		if q, ok := r[corev1.ResourceCPU]; ok {
			p.CPUMilli += q.MilliValue()
		}
		if q, ok := r[corev1.ResourceMemory]; ok {
			p.MemoryMiB += (q.Value() + 1<<20 - 1) >> 20 // MiB, rounded up
		}
	}
	if o.Status.StartTime != nil {
		p.Start = o.Status.StartTime.UTC().Truncate(time.Second)
	}
	for _, cs := range o.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.FinishedAt.After(p.End) {
			p.End = t.FinishedAt.UTC().Truncate(time.Second)
		}
	}
	return p
}

// podAlloc is what a pod in a team namespace holds; ok is false for a pod
// that has not started or is not in a team namespace. The caller holds mu.
func (c *Collector) podAlloc(p *slimPod, now time.Time) (usage.Alloc, bool) {
	team := c.teams[p.Namespace]
	if team == "" || p.Start.IsZero() || p.NodeName == "" {
		return usage.Alloc{}, false
	}
	a := usage.Alloc{Key: string(p.UID), Pod: p.Name, Team: team, Namespace: p.Namespace,
		PriorityClass: p.PriorityClass, Status: string(p.Phase), Start: p.Start,
		CPUMilli: p.CPUMilli, MemoryMiB: p.MemoryMiB}
	a.Task = string(p.Task)
	var coresPerDevice int64
	if st := c.nodes[p.NodeName]; st != nil {
		a.InstanceType, coresPerDevice = st.span.InstanceType, st.coresPerDevice
	}
	// Counted in the unit of the instance type it runs on.
	a.Accelerators = c.inUnit(a.InstanceType, p.Accel, coresPerDevice)
	prev := c.pods[p.UID]
	if prev != nil && !prev.pod.Start.Equal(a.Start) {
		prev = nil
	}
	if prev != nil && c.nodes[p.NodeName] == nil {
		// Its node is gone (or not seen yet): what was recorded while
		// the node was there stands.
		a.InstanceType, a.Accelerators = prev.InstanceType, prev.Accelerators
	}
	if p.Phase == corev1.PodSucceeded || p.Phase == corev1.PodFailed {
		// A status without the finish time is dated when the collector
		// first saw it finished: a later look must not move that.
		end := p.End
		if end.IsZero() && prev != nil {
			end = prev.End
		}
		a.End = usage.Later(cmp.Or(end, now), a.Start)
	}
	return a, true
}

func qty(r corev1.ResourceList, name corev1.ResourceName) int64 {
	if q, ok := r[name]; ok {
		return q.Value()
	}
	return 0
}

func (c *Collector) onPod(obj any) {
	p, ok := obj.(*slimPod)
	if !ok {
		return
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loading && c.pods[p.UID] == nil {
		c.deferredPods[p.UID] = p
		return
	}
	c.podLocked(p, now)
}

// podLocked folds a pod's state into its allocation. The caller holds mu.
func (c *Collector) podLocked(p *slimPod, now time.Time) {
	a, ok := c.podAlloc(p, now)
	if !ok {
		return
	}
	// A change to a pod already counted touches the hours from its end
	// (or from the last flush, up to which it was counted as running); a
	// new pod, those from its start.
	from := a.Start
	if prev := c.pods[p.UID]; prev != nil {
		if prev.alloc() == a {
			// The same record: kept, but over the informer's latest
			// object, so that the one it replaced can go (a record over
			// an earlier object would hold that object's 224 bytes
			// beside the informer's).
			if prev.pod != p {
				c.pods[p.UID] = recOver(p, a)
			}
			return
		}
		if prev.pod.Start.Equal(a.Start) {
			from = usage.Earlier(cmp.Or(a.End, now), c.last)
		}
	}
	r := recOver(p, a)
	c.pods[p.UID] = r
	c.markAlloc(r, from)
}

func (c *Collector) onPodGone(obj any) {
	p, ok := obj.(*slimPod)
	if !ok {
		return
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.deferredPods, p.UID)
	prev := c.pods[p.UID]
	delete(c.pods, p.UID)
	if prev == nil || !prev.End.IsZero() {
		return
	}
	// Deleted while running: it held its resources until now.
	a := prev.alloc()
	a.End, a.Status = usage.Later(now, a.Start), "Deleted"
	c.markAlloc(recOf(a), usage.Earlier(a.End, c.last))
}

// podRec is what the collector keeps of a followed pod (Collector.pods)
// and what it queues for the flush (changes.Allocs): the usage.Alloc of
// alloc, which it does not hold. Its pod is the informer's own object (the
// transform's slimPod, which nothing writes to once made), and of the
// record only what the pod does not hold: the team and instance type at the
// time (shared strings), the accelerators in the instance type's unit and
// the end. Each pod's usage.Alloc beside its slimPod repeated the pod's
// names, task, priority class, phase, requests and start: 208 bytes a pod,
// against 80 now (the live heap at 50,000 pods went from 28.6 to 22.5 MiB
// in BenchmarkFollow50kPods, 2026-12-07). Like the records it replaces, a podRec is never
// changed once made: a change makes a new one.
type podRec struct {
	pod          *slimPod
	Team         string
	InstanceType string
	Accelerators int64
	End          time.Time
}

// alloc is the pod's record.
func (r *podRec) alloc() usage.Alloc {
	p := r.pod
	return usage.Alloc{Key: string(p.UID), Task: string(p.Task), Team: r.Team, Namespace: p.Namespace, InstanceType: r.InstanceType,
		Accelerators: r.Accelerators, CPUMilli: p.CPUMilli, MemoryMiB: p.MemoryMiB, Start: p.Start, End: r.End,
		Pod: p.Name, PriorityClass: p.PriorityClass, Status: string(p.Phase)}
}

// recOf is a as a podRec over a slimPod of its own, for a record whose pod
// the informer does not hold (one read from the store, one of a pod that
// is gone): its alloc is a.
func recOf(a usage.Alloc) *podRec {
	p := &slimPod{podMeta: podMeta{Name: a.Pod, Namespace: a.Namespace, UID: types.UID(a.Key)}, Task: types.UID(a.Task),
		PriorityClass: a.PriorityClass, Phase: corev1.PodPhase(a.Status), CPUMilli: a.CPUMilli, MemoryMiB: a.MemoryMiB, Start: a.Start, End: a.End}
	return recOver(p, a)
}

// recOver is a, the record podAlloc made of p, as a podRec over p: what
// alloc does not take from p.
func recOver(p *slimPod, a usage.Alloc) *podRec {
	return &podRec{pod: p, Team: a.Team, InstanceType: a.InstanceType, Accelerators: a.Accelerators, End: a.End}
}

func (c *Collector) onQueue(obj any) {
	q, ok := obj.(*kueue.ClusterQueue)
	if !ok {
		return
	}
	b := map[string]int64{}
	for _, f := range q.Status.FlavorsUsage {
		for _, r := range f.Resources {
			v := r.Borrowed.Value()
			if r.Name == corev1.ResourceCPU {
				v = r.Borrowed.MilliValue()
			}
			b[string(f.Name)+"/"+string(r.Name)] = v
		}
	}
	c.mu.Lock()
	c.queues[q.Name] = b
	c.mu.Unlock()
}

// onWorkload folds a Workload's conditions into its history. Kueue
// (sigs.k8s.io/kueue@v0.17.0 apis/kueue/v1beta2/workload_types.go) sets
// Admitted when the Workload reserved quota and its admission checks
// passed; Evicted with reason "Preempted" when it was preempted (other
// reasons: PodsReadyTimeout, AdmissionCheck, ClusterQueueStopped,
// Deactivated), after which it waits again; Finished when its job ended.
// Each condition's lastTransitionTime dates the event.
func (c *Collector) onWorkload(obj any) {
	w, ok := obj.(*kueue.Workload)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if key := workloadKey(w); c.loading && c.wls[types.UID(key)] == nil {
		c.deferredWLs[key] = w
		return
	}
	c.workloadLocked(w)
}

// workloadLocked folds a Workload's conditions into its history, and marks
// the hours from the earliest instant that changed. The caller holds mu.
func (c *Collector) workloadLocked(w *kueue.Workload) {
	team := c.teams[w.Namespace]
	if team == "" {
		return
	}
	key := workloadKey(w)
	st := c.wls[types.UID(key)]
	var changed time.Time // the earliest instant whose hours change
	if st == nil {
		created := w.CreationTimestamp.UTC().Truncate(time.Second)
		st = &wlState{w: usage.Workload{Key: key, Created: created, Pending: []usage.Span{{From: created}}}}
		c.wls[types.UID(key)] = st
		changed = created
	}
	mark := func(t time.Time) {
		if changed.IsZero() || t.Before(changed) {
			changed = t
		}
	}
	before := fingerprint(st)
	x := &st.w
	if x.Name != w.Name || x.Team != team || x.Namespace != w.Namespace {
		mark(x.Created)
	}
	x.Name, x.Team, x.Namespace = w.Name, team, w.Namespace
	if r := w.Spec.PriorityClassRef; r != nil && x.PriorityClass != r.Name {
		x.PriorityClass = r.Name
		mark(x.Created)
	}
	if it := instanceType(w); it != "" && x.InstanceType != it {
		x.InstanceType = it
		mark(x.Created)
	}
	cond := func(t string) *metav1.Condition { return meta.FindStatusCondition(w.Status.Conditions, t) }
	ltt := func(cd *metav1.Condition) time.Time {
		return usage.Later(cd.LastTransitionTime.UTC().Truncate(time.Second), x.Created)
	}
	ad := cond(kueue.WorkloadAdmitted)
	admitted := ad != nil && ad.Status == metav1.ConditionTrue
	// Kueue clears Admitted when it evicts; an Evicted condition still True
	// beside Admitted True is an old one.
	if ev := cond(kueue.WorkloadEvicted); ev != nil && ev.Status == metav1.ConditionTrue && !admitted && !st.admittedAt.IsZero() {
		at := usage.Later(ltt(ev), st.admittedAt)
		if ev.Reason == kueue.WorkloadEvictedByPreemption {
			x.Preemptions = append(x.Preemptions, at)
		}
		st.admittedAt = time.Time{}
		x.Pending = append(x.Pending, usage.Span{From: at})
		mark(at)
	}
	if admitted && st.admittedAt.IsZero() {
		at := ltt(ad)
		if n := len(x.Pending); n > 0 && x.Pending[n-1].To.IsZero() {
			from := x.Pending[n-1].From
			at = usage.Later(at, from)
			endWait(x, at)
			x.Admissions = append(x.Admissions, usage.Admission{At: at, WaitSeconds: int64(at.Sub(from) / time.Second)})
			mark(at)
		}
		st.admittedAt = at
	}
	if fin := cond(kueue.WorkloadFinished); fin != nil && fin.Status == metav1.ConditionTrue && x.Finished.IsZero() {
		x.Finished = ltt(fin)
		if n := len(x.Pending); n > 0 && x.Pending[n-1].To.IsZero() {
			endWait(x, usage.Later(x.Finished, x.Pending[n-1].From))
		}
		mark(x.Finished)
	}
	if fingerprint(st) != before {
		// A copy that shares the history's slices: the flush encodes the
		// dirty records after releasing mu, so later events of the same
		// Workload only append to them (past the copy's length) or replace
		// them (endWait), never write an element in place. Copying the
		// slices here was 0.8 MiB of live heap at 10,000 Workloads.
		c.dirty.Workloads = append(c.dirty.Workloads, *x)
		c.dirtyFrom = usage.Earlier(c.dirtyFrom, cmp.Or(changed, x.Created))
	}
}

// countOf counts the elements of s for which f holds.
func countOf[T any](s []T, f func(T) bool) int {
	n := 0
	for _, v := range s {
		if f(v) {
			n++
		}
	}
	return n
}

// endWait ends the Workload's last wait at to, in a new slice: the old one
// may be shared with a record queued for the flush (workloadLocked).
func endWait(x *usage.Workload, to time.Time) {
	x.Pending = slices.Clone(x.Pending)
	x.Pending[len(x.Pending)-1].To = to
}

// workloadKey links a Workload to its pods: both are owned by the same job
// (Kueue creates a job's Workload with the job as its controller owner),
// so the owner's UID is the task; a Workload without one is its own.
func workloadKey(w *kueue.Workload) string {
	if o := w.OwnerReferences; len(o) == 1 {
		return string(o[0].UID)
	}
	return string(w.UID)
}

// instanceType is the flavor the Workload was admitted to (the portal
// names ResourceFlavors after instance types), or the instance type its
// pods ask for by node selector.
func instanceType(w *kueue.Workload) string {
	if a := w.Status.Admission; a != nil {
		for _, psa := range a.PodSetAssignments {
			for _, f := range psa.Flavors {
				return string(f)
			}
		}
	}
	for _, ps := range w.Spec.PodSets {
		return ps.Template.Spec.NodeSelector[corev1.LabelInstanceTypeStable]
	}
	return ""
}

type wlPrint struct {
	name, team, it, pc string
	fin                time.Time
	pend, adm, pre     int
	lastPendTo         time.Time
}

func fingerprint(st *wlState) wlPrint {
	x := st.w
	p := wlPrint{x.Name, x.Team, x.InstanceType, x.PriorityClass, x.Finished, len(x.Pending), len(x.Admissions), len(x.Preemptions), time.Time{}}
	if n := len(x.Pending); n > 0 {
		p.lastPendTo = x.Pending[n-1].To
	}
	return p
}
