package prom

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/support/testenv"
	"github.com/hyperpod-governance/portal/internal/usage"
)

// fixtureGPU is one GPU the fixture exporter reports.
type fixtureGPU struct {
	gpu, uuid          string
	namespace, pod     string // empty: assigned to no pod
	container, percent string
}

// fixtureGPUs: node gpu-node-a with four GPUs, two held by a team-red pod
// pair, one by team-blue, one by nobody.
var fixtureGPUs = []fixtureGPU{
	{"0", "GPU-3f1b2c4d-0000-4000-8000-000000000000", "team-red", "red-train-0", "trainer", "40"},
	{"1", "GPU-3f1b2c4d-0000-4000-8000-000000000001", "team-red", "red-train-1", "trainer", "80"},
	{"2", "GPU-3f1b2c4d-0000-4000-8000-000000000002", "team-blue", "blue-infer-7f9c", "server", "25"},
	{"3", "GPU-3f1b2c4d-0000-4000-8000-000000000003", "", "", "", "0"},
}

// fixtureExporter serves DCGM_FI_DEV_GPU_UTIL as the DCGM exporter does
// with its Kubernetes pod mapping on: the metric line's fixed labels gpu,
// UUID, pci_bus_id, device, modelName and hostname, then the pod's
// namespace, pod and container for a GPU the kubelet assigned to a pod
// (dcgm-exporter source: internal/pkg/rendermetrics/render_metrics.go,
// gpuMetricsFormat; internal/pkg/transformation/const.go for the pod
// attribute names). It records when each scrape arrived.
func fixtureExporter(t *testing.T) (*httptest.Server, *scrapeLog) {
	scrapes := &scrapeLog{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		scrapes.add(time.Now())
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		var b strings.Builder
		b.WriteString("# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n")
		for i, g := range fixtureGPUs {
			fmt.Fprintf(&b, `DCGM_FI_DEV_GPU_UTIL{gpu="%s",UUID="%s",pci_bus_id="00000000:%02X:00.0",device="nvidia%s",modelName="NVIDIA H100 80GB HBM3",hostname="gpu-node-a"`,
				g.gpu, g.uuid, 0x10+i, g.gpu)
			if g.namespace != "" {
				fmt.Fprintf(&b, `,container="%s",namespace="%s",pod="%s"`, g.container, g.namespace, g.pod)
			}
			fmt.Fprintf(&b, "} %s\n", g.percent)
		}
		io.WriteString(w, b.String())
	}))
	t.Cleanup(srv.Close)
	return srv, scrapes
}

// scrapeLog is when the fixture was scraped.
type scrapeLog struct {
	mu sync.Mutex
	at []time.Time
}

func (l *scrapeLog) add(t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.at = append(l.at, t)
}

// first is when the first scrape arrived (the zero time before it).
func (l *scrapeLog) first() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.at) == 0 {
		return time.Time{}
	}
	return l.at[0]
}

// count is how many scrapes arrived after t.
func (l *scrapeLog) count(after time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, a := range l.at {
		if a.After(after) {
			n++
		}
	}
	return n
}

// freePort returns a loopback port nobody listens on right now.
func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startPrometheus runs the test bed's Prometheus on a free loopback port
// with a temporary TSDB, scraping target every second, until the test ends.
// It returns the server's base URL once /-/ready answers 200.
func startPrometheus(t *testing.T, target string) string {
	return startPrometheusLabelling(t, target, "")
}

// startPrometheusLabelling is startPrometheus attaching the target label
// namespace=targetNamespace when it is set, as a scraper that labels
// targets with their own namespace does.
func startPrometheusLabelling(t *testing.T, target, targetNamespace string) string {
	t.Helper()
	bin := testenv.Require(t, "PORTAL_TEST_PROMETHEUS_BIN")
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: dcgm-exporter
    static_configs:
      - targets: [%q]
`, target)
	if targetNamespace != "" {
		cfg += fmt.Sprintf("        labels: {namespace: %q}\n", targetNamespace)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	var logs testenv.Buffer
	cmd := exec.Command(bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn",
	)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("prometheus log:\n%s", logs.String())
		}
	})
	base := "http://" + addr
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("prometheus exited before it was ready (%v); log:\n%s", err, logs.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready within 60s; log:\n%s", logs.String())
		}
	}
}

// TestUtilizationFromRealPrometheus: a real Prometheus (built from the Go
// module proxy by the test bed) scrapes the fixture exporter every second;
// the client reads each namespace's utilization back through the PromQL API:
// the instant query and the range query both give the mean of the
// namespace's GPUs (team-red: (40+80)/2, team-blue: 25), the GPU held by no
// pod counts for nobody, and the series keeps the exporter's labels.
func TestUtilizationFromRealPrometheus(t *testing.T) {
	exp, scrapes := fixtureExporter(t)
	from := time.Now().UTC().Truncate(time.Second)
	base := startPrometheus(t, strings.TrimPrefix(exp.URL, "http://"))
	c, err := New(Config{URL: base})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// Wait until all four series are queryable (the first scrapes landed)
	// and three steps have passed since the first scrape.
	step := 2 * time.Second
	deadline := time.Now().Add(60 * time.Second)
	for {
		s, err := c.Query(ctx, "count("+Metric+")", time.Now())
		if err != nil {
			t.Fatalf("instant query: %v", err)
		}
		if len(s) == 1 && s[0].Value == 4 && scrapes.count(time.Time{}) >= 3 && time.Since(scrapes.first()) >= 3*step {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fixture's series never appeared (%d scrapes, last answer %+v)", scrapes.count(time.Time{}), s)
		}
		time.Sleep(200 * time.Millisecond)
	}
	now := time.Now()
	// The range ends on a step boundary in the past. Once two scrapes have
	// arrived after it, every sample stamped up to it is stored: a target's
	// scrapes run one after another, each appended before the next starts.
	to := from.Add(now.Sub(from) / step * step)
	for scrapes.count(to) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no scrapes after the range's end")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The exporter's labels arrive as it wrote them.
	series, err := c.Query(ctx, Metric+`{namespace="team-blue"}`, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(series) != 1 {
		t.Fatalf("team-blue series: %+v", series)
	}
	for k, want := range map[string]string{"gpu": "2", "UUID": fixtureGPUs[2].uuid, "modelName": "NVIDIA H100 80GB HBM3",
		"hostname": "gpu-node-a", "pod": "blue-infer-7f9c", "container": "server", "job": "dcgm-exporter"} {
		if got := series[0].Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}

	// Instant: the mean per namespace.
	inst, err := c.Query(ctx, "avg by (namespace) ("+Metric+")", now)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, s := range inst {
		got[s.Labels["namespace"]] = s.Value
	}
	want := map[string]float64{"team-red": 60, "team-blue": 25, "": 0}
	if len(got) != len(want) {
		t.Errorf("instant per namespace %v, want %v", got, want)
	}
	for ns, v := range want {
		if got[ns] != v {
			t.Errorf("instant %q = %v, want %v", ns, got[ns], v)
		}
	}

	// Range: [from, to) in 2 s steps. The steps that have points are exactly
	// those holding a sample by Prometheus's own timestamps: step k (dated
	// from+k*step) counts the samples in (from+k*step, from+(k+1)*step].
	red, err := c.NamespaceUtilization(ctx, "team-red", from, to, step)
	if err != nil {
		t.Fatal(err)
	}
	checkSeries(t, "team-red", red, from, to, step, 60)
	ts, err := c.QueryRange(ctx, "timestamp("+Metric+`{namespace="team-red",gpu="0"})`, from, to, 250*time.Millisecond)
	if err != nil || len(ts) != 1 {
		t.Fatalf("sample timestamps: %v, %v", ts, err)
	}
	wantAt := map[time.Time]bool{}
	for _, p := range ts[0].Points {
		at := time.UnixMilli(int64(math.Round(p.Percent * 1000))).UTC()
		if at.After(from) && !at.After(to) {
			wantAt[from.Add((at.Sub(from)+step-1)/step*step-step)] = true
		}
	}
	var gotAt []time.Time
	for _, p := range red {
		gotAt = append(gotAt, p.At)
	}
	var wantSorted []time.Time
	for at := range wantAt {
		wantSorted = append(wantSorted, at)
	}
	slices.SortFunc(wantSorted, time.Time.Compare)
	t.Logf("team-red over [%s, %s) in %s steps: %v", from.Format(time.TimeOnly), to.Format(time.TimeOnly), step, red)
	if !slices.Equal(gotAt, wantSorted) {
		t.Errorf("team-red's steps %v, want the steps holding samples %v", gotAt, wantSorted)
	}

	all, err := c.NamespacesUtilization(ctx, from, to, step)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all["team-red"] == nil || all["team-blue"] == nil {
		t.Fatalf("namespaces %v, want team-red and team-blue only (the unassigned GPU belongs to none)", keys(all))
	}
	checkSeries(t, "team-red", all["team-red"], from, to, step, 60)
	checkSeries(t, "team-blue", all["team-blue"], from, to, step, 25)
	if !slices.Equal(all["team-red"], red) {
		t.Errorf("team-red alone %v and among all %v differ", red, all["team-red"])
	}

	none, err := c.NamespaceUtilization(ctx, "team-green", from, to, step)
	if err != nil || len(none) != 0 {
		t.Errorf("team-green (no GPUs): %v, %v", none, err)
	}

	// A query Prometheus rejects comes back as its error type.
	_, err = c.Query(ctx, "sum(", now)
	if e, ok := err.(*Error); !ok || e.Type != "bad_data" || e.Status != http.StatusBadRequest {
		t.Errorf("bad query: %#v", err)
	}
}

func checkSeries(t *testing.T, ns string, pts []usage.Point, from, to time.Time, step time.Duration, want float64) {
	t.Helper()
	if len(pts) == 0 {
		t.Fatalf("%s: no points in [%s, %s)", ns, from, to)
	}
	for i, p := range pts {
		if p.At.Before(from) || !p.At.Before(to) || p.At.Sub(from)%step != 0 {
			t.Errorf("%s: point at %s is not a step of [%s, %s) at %s", ns, p.At, from, to, step)
		}
		if i > 0 && !pts[i-1].At.Before(p.At) {
			t.Errorf("%s: points out of order at %d", ns, i)
		}
		if p.Percent != want {
			t.Errorf("%s: %v at %s, want %v", ns, p.Percent, p.At, want)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
