package provision

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installTestCRDs applies the minimal CRDs of testdata/crds (HyperPod's
// inference and space kinds, each modelled on the real one: see the file)
// on the test bed, which installs none of HyperPod's operators, and waits
// until each is established. Server-side apply: a second run (or another
// test) changes nothing. They stay: CRDs are cluster-scoped and shared by
// the test bed's runs.
func installTestCRDs(ctx context.Context, t *testing.T, dyn dynamic.Interface) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("testdata/crds: %v (%d files)", err, len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(b, &obj); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		u := &unstructured.Unstructured{Object: obj}
		if _, err := dyn.Resource(crdResource).Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "provision-tests", Force: true}); err != nil {
			t.Fatalf("apply %s: %v", u.GetName(), err)
		}
		for {
			got, err := dyn.Resource(crdResource).Get(ctx, u.GetName(), metav1.GetOptions{})
			if err == nil && crdEstablished(got) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("CRD %s never established: %v", u.GetName(), err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func crdEstablished(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// warnedDynamic is a dynamic client of cfg (a copy) whose warnings w
// collects.
func warnedDynamic(t *testing.T, cfg *rest.Config, w *warnings) dynamic.Interface {
	t.Helper()
	c := rest.CopyConfig(cfg)
	c.WarningHandler = w
	d, err := dynamic.NewForConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// kindObject is a minimal object of kind k in namespace ns.
func kindObject(k WorkloadKind, ns string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"displayName": "test"}}}
	u.SetAPIVersion(k.APIVersion())
	u.SetKind(k.Kind)
	u.SetNamespace(ns)
	u.SetGenerateName("adm-")
	return u
}

func createKind(ctx context.Context, c dynamic.Interface, k WorkloadKind, ns string) error {
	gvr := schema.GroupVersionResource{Group: k.Group, Version: k.Version, Resource: k.Resource}
	_, err := c.Resource(gvr).Namespace(ns).Create(ctx, kindObject(k, ns), metav1.CreateOptions{})
	return err
}

// workspaceKind and jumpStartKind are the kinds the test creates: an
// interactive-spaces kind (not approved by itContract's contract) and an
// inference one (approved).
func workspaceKind(t *testing.T) WorkloadKind {
	return kindOf(t, workflow.WorkloadInteractive, "Workspace")
}
func jumpStartKind(t *testing.T) WorkloadKind {
	return kindOf(t, workflow.WorkloadInference, "JumpStartModel")
}

func kindOf(t *testing.T, w workflow.WorkloadType, kind string) WorkloadKind {
	t.Helper()
	for _, k := range KindsOf(w) {
		if k.Kind == kind {
			return k
		}
	}
	t.Fatalf("no kind %s in type %s", kind, w)
	return WorkloadKind{}
}

// checkKindRule holds the plans' namespaces to rule 3: a kind of a type the
// contract does not approve (a Workspace: the contract approves training,
// fine-tuning and inference) is refused in deny mode with the clause, the
// approved types and kinds and the change page, created with the same
// words as a warning in warn mode, even for an identity whose RBAC allows
// it (the test bed's admin, as an EKS access policy would); the team's
// submitters may not create it at all (their Role); an approved kind (a
// JumpStartModel) is accepted from a submitter, without a warning.
func checkKindRule(ctx context.Context, t *testing.T, cfg *rest.Config, deny Plan, plans ...Plan) {
	t.Helper()
	aw, sw := &warnings{}, &warnings{}
	admin := warnedDynamic(t, cfg, aw)
	submitter := warnedDynamic(t, userConfig(t, cfg, "submitter-red"), sw)
	space, jumpStart := workspaceKind(t), jumpStartKind(t)
	for _, p := range plans {
		page := "/connections/" + strconv.FormatInt(p.ConnectionID, 10) + "/edit"
		want := []string{`clause "Approved workload types" (workload_types)`, "a Workspace (workspace.jupyter.org/workspaces)",
			"approved workload types (training,fine-tuning,inference)", "batch/jobs", "inference.sagemaker.aws.amazon.com/jumpstartmodels", page}
		aw.take()
		err := createKind(ctx, admin, space, p.Namespace)
		got := strings.Join(aw.take(), "\n")
		if p.Namespace == deny.Namespace {
			if !apierrors.IsForbidden(err) {
				t.Errorf("deny, rule 3: a Workspace: %v, want Forbidden", err)
			}
			for _, s := range want {
				if err != nil && !strings.Contains(err.Error(), s) {
					t.Errorf("deny, rule 3: the refusal does not say %q: %v", s, err)
				}
			}
		} else {
			if err != nil {
				t.Errorf("warn, rule 3: a Workspace refused: %v", err)
			}
			for _, s := range want {
				if !strings.Contains(got, s) {
					t.Errorf("warn, rule 3: the warnings %q do not say %q", got, s)
				}
			}
		}
		// The submitter's Role grants no unapproved kind.
		if err := createKind(ctx, submitter, space, p.Namespace); !apierrors.IsForbidden(err) || strings.Contains(err.Error(), "contract of connection") {
			t.Errorf("%s: a submitter creating a Workspace: %v, want Forbidden by RBAC", p.Namespace, err)
		}
		sw.take()
		if err := createKind(ctx, submitter, jumpStart, p.Namespace); err != nil {
			t.Errorf("%s: a submitter creating a JumpStartModel (inference is approved): %v", p.Namespace, err)
		}
		if w := sw.take(); len(w) > 0 {
			t.Errorf("%s: an approved kind drew warnings %q", p.Namespace, w)
		}
	}
}

// checkKindAmendment: an amendment of deny's contract that adds
// interactive spaces lets a submitter create a Workspace (its Role now
// grants it, and rule 3 lets it in once the API server sees the new
// parameters).
func checkKindAmendment(ctx context.Context, t *testing.T, cfg *rest.Config, a *Applier, c workflow.Contract, s ClusterSettings, deny Plan) Plan {
	t.Helper()
	c.WorkloadTypes = append(c.WorkloadTypes, workflow.WorkloadInteractive)
	c = c.Normalize()
	amended, err := BuildPlan(deny.ConnectionID, 2, c.Hash(), c, s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Apply(ctx, amended); err != nil {
		t.Fatalf("apply the amendment: %v", err)
	}
	sw := &warnings{}
	submitter := warnedDynamic(t, userConfig(t, cfg, "submitter-red"), sw)
	for {
		err := createKind(ctx, submitter, workspaceKind(t), deny.Namespace)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("after the amendment adding interactive spaces, a Workspace is still refused: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if w := sw.take(); len(w) > 0 {
		t.Errorf("amended: a Workspace drew warnings %q", w)
	}
	return amended
}
