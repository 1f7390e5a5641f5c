package main

// The two-replica harness (issue 14): two `portal serve` processes on one
// database and the test bed's kube-apiserver. Connections are approved
// while both run; every provisioning job runs exactly once; the audit chain
// verifies; kill -9 of the leader hands the singletons to the other, and
// the handover is measured (README "Replicas"; bench/replicas.sh runs it
// with 100 connections and prints the figure).
//
// The database is PORTAL_TEST_REPLICAS_DB when set, else a new database on
// the test bed's PostgreSQL (PORTAL_TEST_POSTGRES_URL: what several
// replicas run on, and what make test uses), else a fresh SQLite file: two
// processes share it on one host (WAL). PORTAL_REPLICAS_N sets how many
// connections (default 12, to keep `make test` short).

import (
	"bufio"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/testenv"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// replica is one running `portal serve` process.
type replica struct {
	id, url string
	cmd     *exec.Cmd
	out     *testenv.Buffer
	exited  chan struct{}
}

var replicaReadyRE = regexp.MustCompile(`ready: open (http://[0-9.:]+)/`)

func startReplica(t *testing.T, bin, id string, args ...string) *replica {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(bin, append([]string{"serve", "--dev", "--listen", "127.0.0.1:0", "--leader-id", id,
		"--session-key-file", filepath.Join(dir, "session.key")}, args...)...)
	cmd.Dir = dir
	out := &testenv.Buffer{}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &replica{id: id, cmd: cmd, out: out, exited: make(chan struct{})}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			out.Write([]byte(sc.Text() + "\n"))
			if m := replicaReadyRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urls <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() { _ = cmd.Wait(); close(r.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-r.exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("replica %s did not stop within 30s of SIGINT\n%s", id, out.String())
		}
	})
	select {
	case r.url = <-urls:
	case <-r.exited:
		t.Fatalf("replica %s exited:\n%s", id, out.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("replica %s did not become ready:\n%s", id, out.String())
	}
	return r
}

// body is GET path's body ("" when the replica does not answer).
func (r *replica) body(path string) string {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(r.url + path)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func (r *replica) leads() bool {
	return strings.Contains(r.body("/metrics"), `portal_is_leader{identity="`+r.id+`"} 1`)
}

func TestTwoReplicas(t *testing.T) {
	kubeconfig := testenv.Require(t, "PORTAL_TEST_KUBECONFIG")
	n := 12
	if v := os.Getenv("PORTAL_REPLICAS_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 2 {
			t.Fatalf("PORTAL_REPLICAS_N=%q: want a number of at least 2", v)
		}
	}
	ctx := t.Context()
	dir := t.TempDir()
	dbURL := os.Getenv("PORTAL_TEST_REPLICAS_DB")
	if dbURL == "" {
		dbURL = replicasPostgresDB(t)
	}
	if dbURL == "" {
		dbURL = filepath.Join(dir, "portal.db")
	}
	t.Logf("database: %s", store.RedactDSN(dbURL))
	bin := filepath.Join(dir, "portal")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "migrate", "--db", dbURL).CombinedOutput(); err != nil {
		t.Fatalf("portal migrate: %v\n%s", err, out)
	}
	db, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Room on the cluster for every connection.
	var rows []string
	for _, typ := range []string{"ml.p5.48xlarge", "ml.g5.8xlarge"} {
		rows = append(rows, "('shared-hp', '"+typ+"', 100000, 'test', '2025-03-01T09:00:00.000000000Z')")
	}
	if err := db.ExecForTest(ctx, `INSERT INTO cluster_observed (cluster_name, instance_type, capacity, basis, observed_at) VALUES `+strings.Join(rows, ", ")); err != nil {
		t.Fatal(err)
	}
	if err := db.SetInventory(ctx, "shared-hp", "ml.p5.48xlarge", 100000, workflow.Actor{Email: "replicas-test"}, time.Now()); err != nil {
		t.Fatal(err)
	}

	// The Lease in a namespace of its own: other tests' portals on the
	// test bed elect elsewhere.
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	run := hex.EncodeToString(b)
	leaseNS := "replicas-" + run
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: leaseNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	args := []string{"--db", dbURL, "--kubeconfig", kubeconfig, "--leader-election-namespace", leaseNS}
	ra := startReplica(t, bin, "replica-a", args...)
	rb := startReplica(t, bin, "replica-b", args...)
	replicas := []*replica{ra, rb}

	// Approvals while both run: the first half now, the rest after the
	// leader is killed (both workers claim; the killed one's jobs resume).
	settings := provision.ClusterSettings{OnRevoke: provision.RevokeLock}.WithDefaults()
	teams := make([]string, n)
	conns := make([]int64, n)
	dyn := dynamic.NewForConfigOrDie(cfg)
	approve := func(i int) {
		team := fmt.Sprintf("r%st%03d", run, i)
		teams[i] = team
		actAsHyperPod(t, dyn, team)
		now := time.Now()
		u, err := db.RecordLogin(ctx, "https://idp.example.test", "u-"+team, team+"@example.test", team, nil, now)
		if err != nil {
			t.Fatal(err)
		}
		by := workflow.Actor{ID: u.ID, Email: u.Email}
		c, err := db.CreateConnection(ctx, workflow.ExampleContractFor(team), by, now)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Transition(ctx, c.ID, workflow.EventSubmit, by, "", store.Expect{}, now); err != nil {
			t.Fatal(err)
		}
		ver, err := db.Version(ctx, c.ID, 1)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := provision.BuildPlan(c.ID, 1, ver.Hash, ver.Contract, settings)
		if err != nil {
			t.Fatal(err)
		}
		a, err := db.RecordLogin(ctx, "https://idp.example.test", "admin-"+team, "admin-"+team+"@example.test", "admin", nil, now)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := db.Approve(ctx, c.ID, workflow.Actor{ID: a.ID, Email: a.Email}, store.Expect{Version: 1, Hash: ver.Hash, PlanHash: plan.Hash()},
			"replicas test", workflow.ClusterFacts{}, now); err != nil {
			t.Fatal(err)
		}
		conns[i] = c.ID
	}
	half := n / 2
	for i := range half {
		approve(i)
	}

	// Exactly one leader.
	var lead, other *replica
	deadline := time.Now().Add(60 * time.Second)
	for lead == nil && time.Now().Before(deadline) {
		for i, r := range replicas {
			if r.leads() {
				lead, other = r, replicas[1-i]
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if lead == nil {
		t.Fatalf("no replica leads:\n%s\n%s", ra.out.String(), rb.out.String())
	}
	if other.leads() {
		t.Fatal("both replicas say they lead")
	}
	if got := other.body("/readyz"); !strings.Contains(got, "leader: "+lead.id+" (kubernetes lease)") || !strings.Contains(got, "this process: "+other.id+" (follower)") {
		t.Errorf("the follower's /readyz:\n%s", got)
	}

	// kill -9 of the leader, mid-run; the handover is measured from the
	// kill to the other's /metrics saying it leads.
	killed := time.Now()
	if err := lead.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var handover time.Duration
	for deadline := killed.Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if other.leads() {
			handover = time.Since(killed)
			break
		}
	}
	if handover == 0 {
		t.Fatalf("%s did not take over within 60s of kill -9:\n%s", other.id, other.out.String())
	}
	report := fmt.Sprintf("replicas: kill -9 of the leader %s: %s led after %s (%d connections, db %s)\n", lead.id, other.id, handover.Round(time.Millisecond), n, redactDB(dbURL))
	t.Log(report)
	if dir := os.Getenv("PORTAL_E2E_ARTIFACTS"); dir != "" {
		_ = os.WriteFile(filepath.Join(dir, "replicas-handover.txt"), []byte(report), 0o644)
	}
	if !strings.Contains(other.body("/readyz"), "this process: "+other.id+" (leader)") {
		t.Errorf("the new leader's /readyz does not say so:\n%s", other.body("/readyz"))
	}
	for i := half; i < n; i++ {
		approve(i)
	}

	// Every job runs, exactly once: one provisioning job per connection,
	// succeeded; one success in each connection's audit.
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		done := 0
		for _, id := range conns {
			js, err := db.JobsFor(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if len(js) == 1 && js[0].State == workflow.JobSucceeded {
				done++
			} else if len(js) == 1 && js[0].State == workflow.JobFailed {
				t.Fatalf("job of connection %d failed: %s", id, js[0].LastError)
			}
		}
		if done == n {
			break
		}
		if time.Now().After(deadline) {
			var states []string
			for _, id := range conns {
				js, _ := db.JobsFor(ctx, id)
				for _, j := range js {
					states = append(states, fmt.Sprintf("job %d of connection %d: %s attempt %d, leased to %q until %s, not before %s: %s", j.ID, id, j.State, j.Attempts, j.LeaseOwner, j.LeaseUntil, j.NotBefore, j.LastError))
				}
			}
			t.Fatalf("%d of %d jobs succeeded after 5 minutes:\n%s\n%s", done, n, strings.Join(states, "\n"), other.out.String())
		}
	}
	resumed := 0
	for i, id := range conns {
		js, _ := db.JobsFor(ctx, id)
		if len(js) != 1 {
			t.Errorf("connection %d has %d jobs", id, len(js))
			continue
		}
		if js[0].Attempts > 1 {
			resumed++ // the killed replica held it
		}
		evs, err := db.AuditEvents(ctx, store.AuditFilter{ObjectType: "connection", ObjectID: id, Action: "provisioning.succeeded"}, 0, 10)
		if err != nil || len(evs) != 1 {
			t.Errorf("connection %d (%s): %d provisioning.succeeded events, %v; want exactly one", id, teams[i], len(evs), err)
		}
		// Live: active, or under review when the leader's review
		// scheduler found a reason meanwhile (the test's owners are in
		// no owners group).
		if c, err := db.Connection(ctx, id); err != nil || c.State != workflow.StateActive && c.State != workflow.StateUnderReview {
			t.Errorf("connection %d: %s, %v; want active (or under review)", id, c.State, err)
		}
	}
	t.Logf("%d of %d jobs resumed after the kill", resumed, n)
	// On the cluster: one namespace per connection, no more.
	nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for _, ns := range nss.Items {
		if strings.HasPrefix(ns.Name, "hyperpod-ns-r"+run+"t") {
			got++
		}
	}
	if got != n {
		t.Errorf("%d team namespaces on the cluster, want %d", got, n)
	}
	// The audit chain verifies, with the binary's own check.
	if out, err := exec.Command(bin, "audit", "verify", "--db", dbURL).CombinedOutput(); err != nil {
		t.Errorf("portal audit verify: %v\n%s", err, out)
	}
}

// actAsHyperPod creates what HyperPod task governance creates from a
// team's compute quota (as internal/provision's integration tests do): the
// namespace hyperpod-ns-<team>, labelled as HyperPod labels it, and its
// LocalQueue, owned by another field manager. The plan waits for both.
func actAsHyperPod(t *testing.T, dyn dynamic.Interface, team string) {
	t.Helper()
	name := "hyperpod-ns-" + team
	ctx := t.Context()
	opts := metav1.ApplyOptions{FieldManager: "hyperpod-task-governance", Force: true}
	ns := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": name, "labels": map[string]any{
			"sagemaker.amazonaws.com/sagemaker-managed-queue": "true",
			"sagemaker.amazonaws.com/quota-allocation-id":     team,
		}},
	}}
	if _, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Apply(ctx, name, ns, opts); err != nil {
		t.Fatalf("HyperPod's namespace: %v", err)
	}
	lq := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
		"metadata": map[string]any{"name": name + "-localqueue", "namespace": name,
			"labels": map[string]any{"sagemaker.amazonaws.com/sagemaker-managed-queue": "true"}},
		"spec": map[string]any{"clusterQueue": name + "-clusterqueue"},
	}}
	if _, err := dyn.Resource(schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "localqueues"}).Namespace(name).
		Apply(ctx, name+"-localqueue", lq, opts); err != nil {
		t.Fatalf("HyperPod's LocalQueue: %v", err)
	}
}

// redactDB keeps a database URL's password out of the report.
func redactDB(s string) string {
	return regexp.MustCompile(`://([^:/@]+):[^@]*@`).ReplaceAllString(s, "://$1:***@")
}

// replicasPostgresDB creates an empty database on the test bed's
// PostgreSQL for the harness and returns its URL (dropped when the test
// ends), or "" when no PostgreSQL is configured.
func replicasPostgresDB(t *testing.T) string {
	base := os.Getenv("PORTAL_TEST_POSTGRES_URL")
	if base == "" {
		return ""
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("PORTAL_TEST_POSTGRES_URL: %v", err)
	}
	name := fmt.Sprintf("portal_replicas_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ExecContext(t.Context(), `CREATE DATABASE `+name); err != nil {
		admin.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// After the replicas' own clean-ups (registered later, run first).
		admin.ExecContext(context.Background(), `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`) //nolint:errcheck
		admin.Close()
	})
	u.Path = "/" + name
	return u.String()
}
