package collect

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/usage"
)

func rl(kv ...any) corev1.ResourceList {
	r := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		r[kv[i].(corev1.ResourceName)] = resource.MustParse(fmt.Sprint(kv[i+1]))
	}
	return r
}

// One unit per instance type, the settings' table's, from the pod's request
// to the price: a team guaranteed one instance that fills one instance for
// one hour uses exactly its guarantee, borrows nothing, fills the node's
// capacity and pays one instance-hour; the statement's GPU or Neuron-core
// hours are those of one instance. On Trainium the pods ask in NeuronCores
// or in devices, the node shows both, and the table counts devices.
func TestUnitsAgreeFromPodToPrice(t *testing.T) {
	t0 := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	table := provision.DefaultAccelerators
	for _, c := range []struct {
		name, itype string
		node        corev1.ResourceList
		pods        []corev1.ResourceList // requests of the pods filling the instance
		capacity    int64                 // the node, in the table's unit
		gpuHours    string
		coreHours   string
	}{
		{"p5 GPUs", "ml.p5.48xlarge", rl(ResourceGPU, 8), []corev1.ResourceList{rl(ResourceGPU, 8)}, 8, "8.000", "0.000"},
		{"p5 two pods", "ml.p5.48xlarge", rl(ResourceGPU, 8), []corev1.ResourceList{rl(ResourceGPU, 3), rl(ResourceGPU, 5)}, 8, "8.000", "0.000"},
		{"trn1 in cores", "ml.trn1.32xlarge", rl(ResourceNeuron, 16, ResourceNeuronCore, 32),
			[]corev1.ResourceList{rl(ResourceNeuronCore, 32)}, 16, "0.000", "32.000"},
		{"trn1 in devices", "ml.trn1.32xlarge", rl(ResourceNeuron, 16, ResourceNeuronCore, 32),
			[]corev1.ResourceList{rl(ResourceNeuron, 10), rl(ResourceNeuronDevice, 6)}, 16, "0.000", "32.000"},
		{"trn1 odd cores round up to a device", "ml.trn1.32xlarge", rl(ResourceNeuron, 16, ResourceNeuronDevice, 16, ResourceNeuronCore, 32),
			[]corev1.ResourceList{rl(ResourceNeuronCore, 3), rl(ResourceNeuronCore, 28)}, 16, "0.000", "32.000"},
		{"trn1n", "ml.trn1n.32xlarge", rl(ResourceNeuron, 16, ResourceNeuronCore, 32),
			[]corev1.ResourceList{rl(ResourceNeuronCore, 16), rl(ResourceNeuron, 8)}, 16, "0.000", "32.000"},
		// The node's own ratio: 4 cores per device (logical NeuronCores).
		{"trn2 logical cores", "ml.trn2.48xlarge", rl(ResourceNeuron, 16, ResourceNeuronCore, 64),
			[]corev1.ResourceList{rl(ResourceNeuronCore, 64)}, 16, "0.000", "128.000"},
		{"trn2 devices", "ml.trn2.48xlarge", rl(ResourceNeuronDevice, 16),
			[]corev1.ResourceList{rl(ResourceNeuronDevice, 16)}, 16, "0.000", "128.000"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c0 := benchCollector(t0)
			c0.nodes = map[string]*nodeState{}
			c0.Accelerators = table
			c0.Now = func() time.Time { return t0 }
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{corev1.LabelInstanceTypeStable: c.itype,
				LabelNodeHealth: HealthSchedulable}}, Status: corev1.NodeStatus{Allocatable: c.node}}
			obj, _ := strip(node)
			c0.onNode(obj)
			if got := c0.nodes["n1"].span.Accelerators; got != c.capacity {
				t.Fatalf("node capacity = %d, want %d", got, c.capacity)
			}
			for i, req := range c.pods {
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("p", i), Namespace: "hyperpod-ns-team01", UID: types.UID(fmt.Sprint("u", i))},
					Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: req}}}},
					Status: corev1.PodStatus{Phase: corev1.PodSucceeded, StartTime: &metav1.Time{Time: t0},
						ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.Time{Time: t0.Add(time.Hour)}}}}}}}
				obj, _ := strip(p)
				c0.onPod(obj)
			}
			var allocs []usage.Alloc
			for _, a := range c0.pods {
				allocs = append(allocs, a.alloc())
			}
			span := c0.nodes["n1"].span
			span.To = t0.Add(time.Hour)

			// The integrator: the guarantee of one instance, from the same table.
			g := usage.Guarantees{"team01": {c.itype: int64(table[c.itype].Accelerators)}}
			hours := usage.Integrate(t0, t0.Add(time.Hour), allocs, nil, g.History())
			if len(hours) != 1 || hours[0].GuaranteedAccelSeconds != c.capacity*3600 || hours[0].BorrowedAccelSeconds != 0 {
				t.Fatalf("hours = %+v; want %d guaranteed accelerator-seconds, none borrowed", hours, c.capacity*3600)
			}
			cluster := usage.IntegrateCluster("c", t0, t0.Add(time.Hour), []usage.NodeSpan{span}, allocs)
			if len(cluster) != 1 || cluster[0].CapacityAccelSeconds != cluster[0].AllocatedAccelSeconds {
				t.Fatalf("cluster = %+v; want the node exactly full", cluster)
			}

			// The chargeback: 160.00 an instance-hour, divided by the
			// table's accelerators per instance.
			card, err := usage.ParseRateCard([]byte(`{"currency": "USD", "rates": [{"instance_type": "` + c.itype + `", "effective_from": "2026-01-01", "hourly": "160"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			cb, err := usage.Charge(usage.ChargeInput{Hours: hours, Cluster: cluster, Rates: card,
				Accelerators: usage.AcceleratorsOf(provision.DefaultClusterSettings().AcceleratorTable()),
				Guarantees:   usage.Guarantees{"team01": {c.itype: 1}}.History(), Period: usage.MonthOf(t0),
				Policy: usage.Policy{Method: usage.SplitUnallocated}})
			if err != nil {
				t.Fatal(err)
			}
			tc := cb.Team("team01")
			if got := tc.Guaranteed.Amount(); got != "160.00" || tc.Borrowed.Minor != 0 || cb.IdleCost.Minor != 0 {
				t.Errorf("charged %s guaranteed, %v borrowed, idle %v; want one instance-hour, 160.00", got, tc.Borrowed, cb.IdleCost)
			}
			st := usage.StatementOf(cb, "team01", nil, false, t0)
			if len(st.Lines) != 1 || st.Lines[0].GuaranteedGPUHours != c.gpuHours || st.Lines[0].GuaranteedNeuronCoreHours != c.coreHours {
				t.Errorf("statement lines = %+v; want %s GPU hours, %s Neuron-core hours", st.Lines, c.gpuHours, c.coreHours)
			}
		})
	}
}

// Neuron requests on a node that does not show both of its Neuron counts
// cannot be converted: they are not counted as devices one for one.
func TestUnitsUnconvertibleCores(t *testing.T) {
	t0 := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	c0 := benchCollector(t0)
	c0.nodes = map[string]*nodeState{}
	c0.Accelerators = provision.DefaultAccelerators
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{corev1.LabelInstanceTypeStable: "ml.trn2.48xlarge"}}}
	obj, _ := strip(node)
	c0.onNode(obj)
	if got := c0.nodes["n1"].span.Accelerators; got != 16 {
		t.Errorf("capacity without allocatable = %d, want the table's 16", got)
	}
	a, ok := c0.podAlloc(&slimPod{podMeta: podMeta{Namespace: "hyperpod-ns-team01", UID: "u"}, NodeName: "n1", Start: t0,
		Accel: accel{NeuronCores: 8, NeuronDevices: 1}}, t0)
	if !ok || a.Accelerators != 1 || !c0.warned["ml.trn2.48xlarge"] {
		t.Errorf("alloc = %+v (warned %v); want the 1 device only, and a warning", a, c0.warned)
	}
}
