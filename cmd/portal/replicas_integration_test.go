package main

// The two-replica harness (issue 14): two `portal serve` processes on one
// database, the test bed's kube-apiserver and the local AWS endpoints
// (awstest, in this process, behind both replicas' --aws-endpoint-*
// flags). Users sign in through each replica's built-in identity provider;
// the owner files and submits on one replica and the admin approves on the
// other, alternating. The leader is kill -9ed while it holds a job and the
// handover is measured; the survivor resumes the job. Every provisioning
// job runs exactly once (one success each, one namespace and one of each
// AWS resource per connection) and the audit chain verifies (docs/replicas.md; bench/replicas.sh runs it with 100 connections and prints
// the figures).
//
// The database is PORTAL_TEST_REPLICAS_DB when set, else a new database on
// the test bed's PostgreSQL (PORTAL_TEST_POSTGRES_URL: what several
// replicas run on, and what make test uses), else a fresh SQLite file: two
// processes share it on one host (WAL). PORTAL_REPLICAS_N sets how many
// connections (default 12, to keep `make test` short).

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/support/awstest"
	"github.com/hyperpod-governance/portal/internal/support/testenv"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// replica is one running `portal serve` process.
type replica struct {
	id, url string
	cmd     *exec.Cmd
	out     *testenv.Buffer
	exited  chan struct{}
}

func startReplica(t *testing.T, bin, id string, args ...string) *replica {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--dev", "--listen", "127.0.0.1:0", "--leader-id", id}, args...)...)
	cmd.Dir = t.TempDir()
	s := testenv.StartServe(t, cmd)
	return &replica{id: id, url: s.URL, cmd: cmd, out: s.Out, exited: s.Exited}
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
	bin := testenv.BinPath("portal-replicas", dir)
	testenv.MustGoBuild(t, bin, "./cmd/portal", "-s -w")
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
	// The local AWS endpoints (support/awstest, in this process), shared
	// by both replicas through the --aws-endpoint-* flags, signed with the
	// endpoints' test credentials; HyperPod task governance is stood in
	// for by making the team's namespace and LocalQueue when its compute
	// quota is created (as in e2e).
	stack := awstest.NewStack(t, "shared-hp-eks", "team-red-owners", "team-red-members")
	dyn := dynamic.NewForConfigOrDie(cfg)
	stack.SageMaker.Set(func(f *awstest.SageMaker) {
		f.OnQuotaCreated = func(team, _ string) { actAsHyperPod(t, dyn, team) }
	})
	awsSettings := stack.PortalSettings(t, dir)
	// The demo owner owns every team of the run (a groups file; the demo
	// users' groups are those of --dev).
	groups := "roles:\n  admin: [platform-admins]\nteams:\n"
	for i := range n {
		groups += fmt.Sprintf("  r%st%03d: {owners: [team-red-owners], members: [team-red-members]}\n", run, i)
	}
	groupsFile := filepath.Join(dir, "groups.yaml")
	if err := os.WriteFile(groupsFile, []byte(groups), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--db", dbURL, "--kubeconfig", kubeconfig, "--leader-election-namespace", leaseNS,
		"--groups-file", groupsFile, "--session-key-file", filepath.Join(dir, "session.key"),
		"--aws-settings", awsSettings, "--aws-region", "us-east-1", "--aws-poll-interval", "200ms"}, stack.Flags()...)
	ra := startReplica(t, bin, "replica-a", args...)
	rb := startReplica(t, bin, "replica-b", args...)
	replicas := []*replica{ra, rb}

	// One signing key for the installation (issue 31 item 11): the second
	// replica signs with the key the first made, both publish it, and the
	// trail records its making once.
	var published []string
	for _, r := range replicas {
		resp, err := http.Get(r.url + "/.well-known/hyperpod-portal/evidence-key")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"algorithm": "ed25519"`) {
			t.Fatalf("%s: the published key = %d %v\n%s", r.id, resp.StatusCode, err, body)
		}
		published = append(published, string(body))
	}
	if published[0] != published[1] {
		t.Errorf("the replicas publish two keys:\n%s\n%s", published[0], published[1])
	}
	if ev, err := db.AuditEvents(ctx, store.AuditFilter{Action: "signing.key_created"}, 0, 10); err != nil || len(ev) != 1 {
		t.Errorf("key_created events = %d, %v; want 1", len(ev), err)
	}

	// Users sign in through each replica's built-in identity provider
	// (--dev). Sessions and their CSRF tokens live in the database and
	// both replicas share the session key, so a session made on one
	// replica is read on the other (a cookie jar does not tell ports
	// apart, as browsers do not). A state-changing request re-checks the
	// user's groups with the provider that signed them in, and the dev
	// provider's tokens are per process: a session from A is signed out by
	// B's first check, so for changes each user signs in on each replica
	// (with a real OIDC provider the session would change things on both).
	ownerAt := map[*replica]*browserSession{ra: signInAt(t, ra, "owner.red"), rb: signInAt(t, rb, "owner.red")}
	adminAt := map[*replica]*browserSession{ra: signInAt(t, ra, "admin"), rb: signInAt(t, rb, "admin")}
	for _, tc := range []struct {
		who      *browserSession
		from, at *replica
		name     string
	}{{signInAt(t, ra, "owner.red"), ra, rb, "owner.red"}, {signInAt(t, rb, "admin"), rb, ra, "admin"}} {
		resp, body := tc.who.get(t, tc.at, "/connections")
		if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/connections" || !strings.Contains(body, `name="_csrf" value="`+tc.who.csrf+`"`) {
			t.Fatalf("%s signed in on %s: GET /connections on %s = %d at %s; want the page with the same session and CSRF token", tc.name, tc.from.id, tc.at.id, resp.StatusCode, resp.Request.URL)
		}
	}

	// Connections are filed and submitted by the owner on one replica and
	// approved by the admin on the other, alternating, so both processes
	// record requests and decisions.
	teams := make([]string, n)
	conns := make([]int64, n)
	file := func(i int, filer, decider *replica) {
		team := fmt.Sprintf("r%st%03d", run, i)
		teams[i] = team
		// The example contract's roles exist in IAM, allowed no cluster
		// lifecycle action (an approval waits for a role IAM lacks).
		example := workflow.ExampleContractFor(team)
		stack.IAM.AddRole(example.ProjectRoleARN)
		stack.IAM.AddRole(example.AccessRoleARN)
		conns[i] = fileAndApprove(t, ownerAt[filer], adminAt[decider], filer, decider, team)
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

	// The first half is approved while both run (both workers claim).
	half := n / 2
	for i := range half {
		file(i, replicas[i%2], replicas[(i+1)%2])
	}
	// kill -9 of the leader while it holds a job: its worker's lease owner
	// carries its pid (provision.DefaultOwner).
	leadOwner := "-" + strconv.Itoa(lead.cmd.Process.Pid) + "-"
	var held []int64 // jobs the leader held when it was killed
	holds := func() bool {
		held = held[:0]
		for _, id := range conns[:half] {
			js, err := db.JobsFor(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range js {
				if j.State == workflow.JobRunning && strings.Contains(j.LeaseOwner, leadOwner) {
					held = append(held, j.ID)
				}
			}
		}
		return len(held) > 0
	}
	for deadline := time.Now().Add(2 * time.Minute); !holds(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the leader %s held none of the first %d jobs:\n%s", lead.id, half, lead.out.String())
		}
	}
	killed := time.Now()
	if err := lead.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The handover is measured from the kill to the other's /metrics
	// saying it leads.
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
	// The rest through the survivor, with the same sessions.
	for i := half; i < n; i++ {
		file(i, other, other)
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
		if slices.Contains(held, js[0].ID) {
			if js[0].Attempts < 2 {
				t.Errorf("job %d, held by the killed leader, finished in %d attempt: not resumed", js[0].ID, js[0].Attempts)
			}
			resumed++ // succeeded above: the survivor finished it
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
	t.Logf("replicas: %d of %d jobs resumed after the kill (held by the killed leader, finished by the survivor)", resumed, n)
	if resumed != len(held) {
		t.Errorf("%d of the %d jobs the killed leader held were resumed", resumed, len(held))
	}
	// On AWS: each resource made once per connection (the endpoints'
	// create counts, which count a resource only when it is new: a
	// repeated call on an existing one counts as updated). Per connection,
	// as e2e's single approval: a compute quota, a Studio domain, its two
	// group assignments, two EKS access entries, one Pod Identity
	// association; and the seven EKS access policy associations of the
	// example contract's two access entries (counted on a clean run of
	// one connection per team).
	perConn := map[string]int{"compute-quota": 1, "domain": 1, "assignment": 2, "access-entry": 2, "pod-identity": 1, "access-policy": 7}
	got := stack.Creates()
	got["group"] -= len(stack.GroupIDs) // seeded by the test, not the portal
	if got["group"] == 0 {
		delete(got, "group")
	}
	for kind, per := range perConn {
		if got[kind] != per*n {
			t.Errorf("AWS endpoints created %d %s, want %d (%d per connection): %v", got[kind], kind, per*n, per, got)
		}
	}
	for kind := range got {
		if _, ok := perConn[kind]; !ok {
			t.Errorf("AWS endpoints created %d %s, which no connection's plan makes once: %v", got[kind], kind, got)
		}
	}
	// On the cluster: one namespace per connection, no more.
	nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nsCount := 0
	for _, ns := range nss.Items {
		if strings.HasPrefix(ns.Name, "hyperpod-ns-r"+run+"t") {
			nsCount++
		}
	}
	if nsCount != n {
		t.Errorf("%d team namespaces on the cluster, want %d", nsCount, n)
	}
	// The audit chain verifies, with the binary's own check.
	if out, err := exec.Command(bin, "audit", "verify", "--db", dbURL).CombinedOutput(); err != nil {
		t.Errorf("portal audit verify: %v\n%s", err, out)
	}
}

// browserSession is a signed-in user: a client with a cookie jar, and the
// session's CSRF token as the pages carry it.
type browserSession struct {
	c    *http.Client
	csrf string
}

var (
	reAuthRequest = regexp.MustCompile(`name="authRequestID" value="([^"]+)"`)
	reCSRF        = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)
	reDecideField = regexp.MustCompile(`<input type="hidden" name="(version|hash|plan_hash)" value="([^"]*)"`)
)

// signInAt signs user in on replica r the way a browser does: /login
// sends it to the replica's built-in identity provider (--dev), whose
// login page posts the chosen user; the callback lands on a portal page
// that carries the new session's CSRF token.
func signInAt(t *testing.T, r *replica, user string) *browserSession {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	s := &browserSession{c: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
	resp, body := s.get(t, r, "/login")
	m := reAuthRequest.FindStringSubmatch(body)
	if resp.StatusCode != http.StatusOK || !strings.HasSuffix(resp.Request.URL.Path, "/dev-idp/login") || m == nil {
		t.Fatalf("%s: /login on %s ended at %s with %d:\n%s", user, r.id, resp.Request.URL, resp.StatusCode, body)
	}
	resp, err := s.c.PostForm(r.url+"/dev-idp/login", url.Values{"authRequestID": {m[1]}, "username": {user}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	c := reCSRF.FindStringSubmatch(string(b))
	if resp.StatusCode != http.StatusOK || c == nil {
		t.Fatalf("%s: sign-in on %s ended at %s with %d and no CSRF token:\n%s", user, r.id, resp.Request.URL, resp.StatusCode, b)
	}
	s.csrf = c[1]
	return s
}

func (s *browserSession) get(t *testing.T, r *replica, path string) (*http.Response, string) {
	t.Helper()
	resp, err := s.c.Get(r.url + path)
	if err != nil {
		t.Fatalf("GET %s on %s: %v", path, r.id, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// post sends a form with the session's CSRF token, not following the
// redirect: it returns the status, the Location and the body.
func (s *browserSession) post(t *testing.T, r *replica, path string, form url.Values) (int, string, string) {
	t.Helper()
	form.Set("_csrf", s.csrf)
	c := *s.c
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.PostForm(r.url+path, form)
	if err != nil {
		t.Fatalf("POST %s on %s: %v", path, r.id, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(b)
}

var reConnectionPath = regexp.MustCompile(`^/connections/([0-9]+)$`)

// fileAndApprove files team's example contract as the owner on filer (the
// request form's fields: the contract field table's inputs, which the page
// renders; the team comes from the URL), submits it there, and approves it
// as the admin on decider with the version, contract hash and plan hash
// read from the decide form of the connection's page there. It returns
// the connection's id.
func fileAndApprove(t *testing.T, owner, admin *browserSession, filer, decider *replica, team string) int64 {
	t.Helper()
	c := workflow.ExampleContractFor(team)
	form := url.Values{}
	for _, f := range workflow.Fields() {
		if f.Input != workflow.InputNone {
			form[f.Key] = f.FormValue(c)
		}
	}
	code, loc, body := owner.post(t, filer, "/teams/"+team+"/connections", form)
	m := reConnectionPath.FindStringSubmatch(loc)
	if code != http.StatusSeeOther || m == nil {
		t.Fatalf("owner files for %s on %s: %d to %q:\n%s", team, filer.id, code, loc, body)
	}
	id, _ := strconv.ParseInt(m[1], 10, 64)
	if code, loc, body := owner.post(t, filer, "/connections/"+m[1]+"/submit", url.Values{}); code != http.StatusSeeOther {
		t.Fatalf("owner submits connection %d on %s: %d to %q:\n%s", id, filer.id, code, loc, body)
	}
	resp, page := admin.get(t, decider, "/connections/"+m[1])
	decide := url.Values{"decision": {"approve"}, "reason": {"replicas test: approved on " + decider.id}}
	for _, f := range reDecideField.FindAllStringSubmatch(page, -1) {
		decide.Set(f[1], html.UnescapeString(f[2]))
	}
	if resp.StatusCode != http.StatusOK || decide.Get("version") == "" || decide.Get("hash") == "" || decide.Get("plan_hash") == "" {
		t.Fatalf("admin opens connection %d on %s: %d, decide form fields %v:\n%s", id, decider.id, resp.StatusCode, decide, page)
	}
	if code, loc, body := admin.post(t, decider, "/connections/"+m[1]+"/decide", decide); code != http.StatusSeeOther {
		t.Fatalf("admin approves connection %d on %s: %d to %q:\n%s", id, decider.id, code, loc, body)
	}
	return id
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
		t.Errorf("HyperPod's namespace: %v", err)
		return
	}
	lq := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
		"metadata": map[string]any{"name": name + "-localqueue", "namespace": name,
			"labels": map[string]any{"sagemaker.amazonaws.com/sagemaker-managed-queue": "true"}},
		"spec": map[string]any{"clusterQueue": name + "-clusterqueue"},
	}}
	if _, err := dyn.Resource(schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "localqueues"}).Namespace(name).
		Apply(ctx, name+"-localqueue", lq, opts); err != nil {
		t.Errorf("HyperPod's LocalQueue: %v", err)
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
	if os.Getenv("PORTAL_TEST_POSTGRES_URL") == "" {
		return ""
	}
	return testenv.PostgresDB(t, "portal_replicas", true)
}
