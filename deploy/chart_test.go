package deploy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/hyperpod-governance/portal/internal/support/testenv"
)

// tools are the test bed's helm and kubectl (hack/testbed/tools.sh) and its
// kube-apiserver.
type tools struct{ helm, kubectl, kubeconfig, home string }

func testBedTools(t *testing.T) tools {
	t.Helper()
	return tools{
		helm:       testenv.Require(t, "PORTAL_TEST_HELM_BIN"),
		kubectl:    testenv.Require(t, "PORTAL_TEST_KUBECTL_BIN"),
		kubeconfig: testenv.Require(t, "PORTAL_TEST_KUBECONFIG"),
		home:       t.TempDir(),
	}
}

// template renders the chart with `helm template` for the test bed's
// Kubernetes version (read from its API server, as `helm install` would:
// helm template alone assumes v1.20, below the chart's kubeVersion).
func (tl tools) template(t *testing.T, args ...string) []byte {
	t.Helper()
	var v struct {
		ServerVersion struct{ GitVersion string } `json:"serverVersion"`
	}
	if err := json.Unmarshal(tl.run(t, nil, tl.kubectl, "version", "-o", "json"), &v); err != nil || v.ServerVersion.GitVersion == "" {
		t.Fatalf("kubectl version: %v (%+v)", err, v)
	}
	return tl.run(t, nil, tl.helm, append([]string{"template", "--kube-version", v.ServerVersion.GitVersion}, args...)...)
}

// run runs a tool with its caches and configuration in the test's
// directory, stdin from in, and returns stdout; a failure shows stderr.
func (tl tools) run(t *testing.T, in []byte, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(),
		"HOME="+tl.home,
		"HELM_CACHE_HOME="+filepath.Join(tl.home, "helm-cache"),
		"HELM_CONFIG_HOME="+filepath.Join(tl.home, "helm-config"),
		"HELM_DATA_HOME="+filepath.Join(tl.home, "helm-data"),
		"KUBECONFIG="+tl.kubeconfig,
	)
	if in != nil {
		cmd.Stdin = bytes.NewReader(in)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(bin), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.Bytes()
}

// valueSets are the chart's defaults and every option on.
var valueSets = []struct{ name, file string }{
	{"defaults", ""},
	{"all-options", filepath.Join("testdata", "values-all.yaml")},
}

// TestChartOnTheTestBed: `helm lint --strict` passes, and what `helm
// template` renders is accepted by the test bed's kube-apiserver in a
// server-side dry run (schema, defaulting, admission), for the default
// values and with every option on. The rendering also keeps the
// ClusterRole equal to what the code uses, and the Deployment's
// guarantees (see checkDeployment).
func TestChartOnTheTestBed(t *testing.T) {
	tl := testBedTools(t)
	for i, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			var vals []string
			if vs.file != "" {
				vals = []string{"--values", vs.file}
			}
			tl.run(t, nil, tl.helm, append([]string{"lint", "--strict", "helm"}, vals...)...)

			ns := fmt.Sprintf("portal-chart-%d-%d", i, time.Now().UnixNano()%1e6)
			rendered := tl.template(t, append([]string{"portal", "helm", "--namespace", ns}, vals...)...)
			docs := splitDocs(t, rendered)
			checkRendered(t, docs, vs.file != "")

			// The dry run needs the release namespace to exist.
			tl.run(t, nil, tl.kubectl, "create", "namespace", ns)
			t.Cleanup(func() {
				// Best effort: the test bed is torn down after make test anyway.
				_ = exec.Command(tl.kubectl, "--kubeconfig", tl.kubeconfig, "delete", "namespace", ns, "--wait=false").Run()
			})
			out := tl.run(t, rendered, tl.kubectl, "apply", "--dry-run=server", "--namespace", ns, "-f", "-")
			// Every document was accepted, each named in kubectl's output.
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) != len(docs) {
				t.Errorf("kubectl applied %d objects, helm rendered %d:\n%s", len(lines), len(docs), out)
			}
			for _, l := range lines {
				if !strings.HasSuffix(l, "(server dry run)") {
					t.Errorf("kubectl: %q is not a server dry run", l)
				}
			}
		})
	}
}

type doc struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	raw []byte
}

func splitDocs(t *testing.T, b []byte) []doc {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var docs []doc
	for {
		chunk, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var d doc
		if err := yaml.Unmarshal(chunk, &d); err != nil {
			t.Fatalf("rendered document: %v\n%s", err, chunk)
		}
		if d.Kind == "" {
			continue // a comment-only document
		}
		d.raw = chunk
		docs = append(docs, d)
	}
	return docs
}

// portalEnvVars are the PORTAL_* variables cmd/portal reads (its specs
// table, plus the notification settings in notify.go).
func portalEnvVars(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	re := regexp.MustCompile(`"(PORTAL_[A-Z0-9_]+)"`)
	files, _ := filepath.Glob(filepath.Join("..", "cmd", "portal", "*.go"))
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllSubmatch(b, -1) {
			out[string(m[1])] = true
		}
	}
	if !out["PORTAL_DB"] || !out["PORTAL_OIDC_CLIENT_SECRET_FILE"] {
		t.Fatalf("found no PORTAL_* settings in cmd/portal (%d): the pattern is stale", len(out))
	}
	return out
}

// checkRendered checks what the chart promises, on helm's rendering.
func checkRendered(t *testing.T, docs []doc, allOn bool) {
	t.Helper()
	byKind := map[string][]doc{}
	for _, d := range docs {
		byKind[d.Kind] = append(byKind[d.Kind], d)
	}
	want := []string{"ConfigMap", "Deployment", "Service", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "PodDisruptionBudget", "NetworkPolicy", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
	if allOn {
		want = append(want, "Ingress")
	}
	for _, k := range want {
		if len(byKind[k]) == 0 {
			t.Errorf("helm template rendered no %s", k)
		}
	}
	if !allOn && len(byKind["Ingress"]) > 0 {
		t.Error("the Ingress is rendered with the default values; it is optional (off by default)")
	}
	if len(byKind["ClusterRole"]) != 1 {
		t.Fatalf("want one ClusterRole, got %d", len(byKind["ClusterRole"]))
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(byKind["ClusterRole"][0].raw, &role); err != nil {
		t.Fatal(err)
	}
	compareRules(t, "helm template", role.Rules)
	for _, d := range byKind["Role"] {
		var r rbacv1.Role
		if err := yaml.UnmarshalStrict(d.raw, &r); err != nil {
			t.Fatal(err)
		}
		// Leader election only: a Lease, read, created, renewed.
		leases := []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}}}
		if fmt.Sprint(r.Rules) != fmt.Sprint(leases) {
			t.Errorf("Role %s: rules %v, want only %v", r.Name, r.Rules, leases)
		}
	}
	if len(byKind["Deployment"]) == 1 {
		var dep appsv1.Deployment
		if err := yaml.UnmarshalStrict(byKind["Deployment"][0].raw, &dep); err != nil {
			t.Fatal(err)
		}
		checkDeployment(t, dep, portalEnvVars(t))
	}
	checkOpsPort(t, byKind)
}

// checkOpsPort: /metrics and /readyz are on the "metrics" port
// (PORTAL_OPS_LISTEN), which the Ingress does not route and only the
// monitoring namespace may reach; the egress allows the EKS Pod Identity
// agent (issue 32 item 6, issue 31 item 2).
func checkOpsPort(t *testing.T, byKind map[string][]doc) {
	t.Helper()
	var dep appsv1.Deployment
	var svc corev1.Service
	var np networkingv1.NetworkPolicy
	for _, u := range []struct {
		kind string
		into any
	}{{"Deployment", &dep}, {"Service", &svc}, {"NetworkPolicy", &np}} {
		if len(byKind[u.kind]) != 1 {
			t.Fatalf("want one %s, got %d", u.kind, len(byKind[u.kind]))
		}
		if err := yaml.UnmarshalStrict(byKind[u.kind][0].raw, u.into); err != nil {
			t.Fatal(err)
		}
	}
	c := dep.Spec.Template.Spec.Containers[0]
	var metricsPort int32
	for _, p := range c.Ports {
		if p.Name == "metrics" {
			metricsPort = p.ContainerPort
		}
	}
	var opsListen string
	for _, e := range c.Env {
		if e.Name == "PORTAL_OPS_LISTEN" {
			opsListen = e.Value
		}
	}
	if metricsPort == 0 || metricsPort == 8080 || opsListen != fmt.Sprintf("0.0.0.0:%d", metricsPort) {
		t.Errorf("metrics container port %d, PORTAL_OPS_LISTEN %q: want a port of its own, listened on", metricsPort, opsListen)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Port.String() != "metrics" {
		t.Error("the readiness probe does not use the metrics port (/readyz is served only there)")
	}
	svcMetrics := false
	for _, p := range svc.Spec.Ports {
		svcMetrics = svcMetrics || p.Name == "metrics" && p.TargetPort.String() == "metrics"
	}
	if !svcMetrics {
		t.Errorf("the Service has no metrics port: %+v", svc.Spec.Ports)
	}
	for _, d := range byKind["Ingress"] {
		var ing networkingv1.Ingress
		if err := yaml.UnmarshalStrict(d.raw, &ing); err != nil {
			t.Fatal(err)
		}
		for _, r := range ing.Spec.Rules {
			for _, p := range r.HTTP.Paths {
				if p.Backend.Service == nil || p.Backend.Service.Port.Name != "http" {
					t.Errorf("the Ingress routes %s to %+v, want the http port only", p.Path, p.Backend)
				}
			}
		}
	}
	// Ingress: the pages' port from ingressFrom, the metrics port from the
	// monitoring namespace only.
	var pages, metrics []networkingv1.NetworkPolicyIngressRule
	for _, r := range np.Spec.Ingress {
		for _, p := range r.Ports {
			switch p.Port.IntValue() {
			case 8080:
				pages = append(pages, r)
			case int(metricsPort):
				metrics = append(metrics, r)
			}
		}
	}
	monitoring := `[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]`
	if len(metrics) != 1 || len(metrics[0].Ports) != 1 || jsonOf(t, metrics[0].From) != monitoring {
		t.Errorf("ingress to the metrics port: %s, want one rule from %s", jsonOf(t, metrics), monitoring)
	}
	for _, r := range pages {
		for _, p := range r.Ports {
			if p.Port.IntValue() != 8080 {
				t.Errorf("the pages' ingress rule also opens port %s", p.Port.String())
			}
		}
	}
	// Egress to the Pod Identity agent: "169.254.170.23 for IPv4 and ...
	// [fd00:ec2::23] for IPv6" (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-agent-setup.html),
	// plain HTTP (AWS_CONTAINER_CREDENTIALS_FULL_URI=http://169.254.170.23/v1/credentials,
	// https://docs.aws.amazon.com/eks/latest/userguide/pod-id-how-it-works.html): port 80.
	agent := `[{"ipBlock":{"cidr":"169.254.170.23/32"}},{"ipBlock":{"cidr":"fd00:ec2::23/128"}}]`
	found := false
	for _, r := range np.Spec.Egress {
		if jsonOf(t, r.To) == agent {
			found = len(r.Ports) == 1 && r.Ports[0].Port.IntValue() == 80 && r.Ports[0].Protocol != nil && *r.Ports[0].Protocol == corev1.ProtocolTCP
		}
	}
	if !found {
		t.Errorf("no egress to the EKS Pod Identity agent (%s, TCP 80): %s", agent, jsonOf(t, np.Spec.Egress))
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkDeployment: replicas, probes, a hardened pod, the migrate init
// container, secrets only by reference, and only settings the portal reads.
func checkDeployment(t *testing.T, dep appsv1.Deployment, known map[string]bool) {
	t.Helper()
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas < 2 {
		t.Errorf("replicas = %v, want at least 2", dep.Spec.Replicas)
	}
	pod := dep.Spec.Template.Spec
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Error("the pod does not set runAsNonRoot")
	}
	if pod.SecurityContext == nil || pod.SecurityContext.SeccompProfile == nil || pod.SecurityContext.SeccompProfile.Type != "RuntimeDefault" {
		t.Error("the pod's seccomp profile is not RuntimeDefault")
	}
	if pod.Affinity == nil || pod.Affinity.PodAntiAffinity == nil {
		t.Error("the pod has no anti-affinity")
	}
	if len(pod.InitContainers) != 1 || !slices.Equal(pod.InitContainers[0].Args, []string{"migrate"}) {
		t.Errorf("want one init container running `portal migrate`, got %+v", pod.InitContainers)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(pod.Containers))
	}
	c := pod.Containers[0]
	if !slices.Equal(c.Args, []string{"serve"}) {
		t.Errorf("container args %v, want [serve]", c.Args)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Error("no liveness probe on /healthz")
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Error("no readiness probe on /readyz")
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Error("no CPU and memory requests")
	}
	for _, ct := range append(pod.InitContainers, c) {
		sc := ct.SecurityContext
		switch {
		case sc == nil:
			t.Errorf("container %s: no securityContext", ct.Name)
		case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
			t.Errorf("container %s: root filesystem not read-only", ct.Name)
		case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
			t.Errorf("container %s: privilege escalation allowed", ct.Name)
		case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}):
			t.Errorf("container %s: capabilities not dropped (ALL)", ct.Name)
		}
		for _, e := range ct.Env {
			if !known[e.Name] {
				t.Errorf("container %s: %s is not a setting cmd/portal reads", ct.Name, e.Name)
			}
			if e.Name == "PORTAL_DB" && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
				t.Errorf("container %s: PORTAL_DB is not read from a Secret", ct.Name)
			}
		}
	}
}
