package collect

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
)

// fatPod is a pod as the API server sends it: labels, annotations, env,
// volumes, probes and a full status, most of which the transform drops.
func fatPod(i int, start time.Time) *corev1.Pod {
	ns := fmt.Sprintf("hyperpod-ns-team%02d", i%50)
	env := make([]corev1.EnvVar, 20)
	for j := range env {
		env[j] = corev1.EnvVar{Name: fmt.Sprintf("VAR_%d", j), Value: strings.Repeat("x", 40)}
	}
	labels, ann := map[string]string{}, map[string]string{}
	for j := range 8 {
		labels[fmt.Sprintf("example.com/label-%d", j)] = fmt.Sprintf("value-%d-%d", i, j)
		ann[fmt.Sprintf("example.com/annotation-%d", j)] = strings.Repeat("a", 80)
	}
	req := corev1.ResourceList{ResourceGPU: resource.MustParse("1"), corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("train-%d", i), Namespace: ns, UID: types.UID(fmt.Sprintf("uid-%08d", i)),
			ResourceVersion: strconv.Itoa(i), Labels: labels, Annotations: ann, CreationTimestamp: metav1.Time{Time: start},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: metav1.NewFieldsV1(strings.Repeat("{}", 200))}}},
		Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node-%d", i%500), PriorityClassName: "training",
			Containers: []corev1.Container{{Name: "main", Image: "123456789012.dkr.ecr.us-west-2.amazonaws.com/train:latest",
				Command: []string{"torchrun", "--nproc-per-node=8", "train.py"}, Env: env,
				Resources:    corev1.ResourceRequirements{Requests: req, Limits: req},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "shm", MountPath: "/dev/shm"}}}},
			Volumes: []corev1.Volume{{Name: "data"}, {Name: "shm"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: start}, PodIP: "10.0.0.1", HostIP: "10.0.1.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "main", Ready: true, Image: "train", ImageID: strings.Repeat("f", 70),
				ContainerID: strings.Repeat("c", 70), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Time{Time: start}}}}}},
	}
}

func benchCollector(start time.Time) *Collector {
	c := &Collector{Cluster: "bench", Now: func() time.Time { return start.Add(time.Hour) }}
	c.teams, c.nodes, c.pods, c.wls, c.queues = map[string]string{}, map[string]*nodeState{}, map[types.UID]*usage.Alloc{}, map[types.UID]*wlState{}, map[string]map[string]int64{}
	c.seenNodes = map[string]bool{}
	c.last, c.dirtyFrom = start, start
	for i := range 50 {
		c.teams[fmt.Sprintf("hyperpod-ns-team%02d", i)] = fmt.Sprintf("team%02d", i)
	}
	for i := range 500 {
		c.nodes[fmt.Sprintf("node-%d", i)] = &nodeState{span: usage.NodeSpan{InstanceType: "ml.p5.48xlarge", Accelerators: 8, Schedulable: true}}
	}
	return c
}

// follow feeds pods to the collector the way an informer does: through
// the transform into the informer's store, then to the handler. Without
// the transform the informer's store keeps whole pods (the handler still
// reads them the same way).
func follow(c *Collector, st cache.Store, pods []*corev1.Pod, transform bool) {
	for _, p := range pods {
		if transform {
			obj, _ := strip(p)
			_ = st.Add(obj)
			c.onPod(obj)
		} else {
			_ = st.Add(p)
			c.onPod(slimPodOf(p))
		}
	}
}

// cpuTime is the process's user + system CPU time (getrusage), which a
// busy shared machine does not inflate the way it inflates wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func heapAndRSS() (heapMiB, rssMiB float64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				rssMiB = kb / 1024
			}
		}
	}
	return float64(ms.HeapAlloc) / (1 << 20), rssMiB
}

// BenchmarkFollow50kPods: the collector following 50,000 pods. One op is
// 1,000 pod updates (a status change each, through transform, informer
// store and handler) on top of 50,000 followed pods; it reports the heap
// (live, after GC) and the process RSS with those pods, with and without
// the transform.
func BenchmarkFollow50kPods(b *testing.B) {
	start := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	for _, transform := range []bool{true, false} {
		b.Run(fmt.Sprintf("transform=%v", transform), func(b *testing.B) {
			h0, _ := heapAndRSS()
			c := benchCollector(start)
			st := cache.NewStore(cache.MetaNamespaceKeyFunc)
			for i := range 50_000 {
				follow(c, st, []*corev1.Pod{fatPod(i, start)}, transform)
			}
			c.dirty = store.UsageRecords{}
			h1, rss := heapAndRSS()
			upd := make([]*corev1.Pod, 1000)
			for i := range upd {
				upd[i] = fatPod(i*50, start)
				upd[i].Status.Phase = corev1.PodSucceeded
				upd[i].Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.Time{Time: start.Add(30 * time.Minute)}}}
			}
			b.ResetTimer()
			cpu0 := cpuTime()
			for range b.N {
				for _, p := range upd {
					p.ResourceVersion += "1"
					t := p.Status.ContainerStatuses[0].State.Terminated
					t.FinishedAt.Time = t.FinishedAt.Add(time.Second)
				}
				follow(c, st, upd, transform)
				c.dirty = store.UsageRecords{}
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Millisecond)/float64(b.N), "CPU-ms/1k-updates")
			// (ResetTimer drops metrics reported before it.)
			b.ReportMetric(h1-h0, "heap-MiB/50k-pods")
			b.ReportMetric(rss, "RSS-MiB")
			runtime.KeepAlive(st)
		})
	}
}

// BenchmarkFlush50kPods: one flush (records written and the hour
// recomputed from SQLite) with 50,000 running pods in 50 teams.
func BenchmarkFlush50kPods(b *testing.B) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(b.TempDir(), "portal.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	start := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	c := benchCollector(start)
	c.Store, c.Owner = db, "bench"
	c.Guarantees = accelOnly(func(context.Context) (usage.GuaranteeHistory, error) {
		g := usage.GuaranteeHistory{}
		for i := range 50 {
			g.Add(fmt.Sprintf("team%02d", i), "ml.p5.48xlarge", time.Time{}, 400)
		}
		return g, nil
	})
	if _, err := db.ClaimCollector(ctx, "bench", "bench", start, start); err != nil {
		b.Fatal(err)
	}
	st := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for i := range 50_000 {
		follow(c, st, []*corev1.Pod{fatPod(i, start.Add(time.Duration(i%3600)*time.Second))}, true)
	}
	if err := c.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if err := c.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
