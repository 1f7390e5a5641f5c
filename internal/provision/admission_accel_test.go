package provision

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// The team's parameters carry rule 5's values: the instance types the
// contract guarantees (the oracle: the contract's own rows) and the
// accelerator resource names, the documented ones and any other the
// cluster's accelerator table names. An amendment adding a guaranteed type
// shows as a change of the parameters.
func TestAdmissionAcceleratorParams(t *testing.T) {
	for _, tc := range admissionCases() {
		p, err := BuildPlan(7, 1, tc.c.Hash(), tc.c, tc.s)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, g := range tc.c.Scheduling.Guaranteed {
			want = append(want, g.InstanceType)
		}
		slices.Sort(want)
		d := admissionOf(t, p).params.Data
		if d["instanceTypes"] != strings.Join(want, ",") || len(want) == 0 {
			t.Errorf("%s: instanceTypes %q, want %q", tc.c.Team, d["instanceTypes"], strings.Join(want, ","))
		}
		res := strings.Split(d["acceleratorResources"], ",")
		for _, r := range []string{"nvidia.com/gpu", "aws.amazon.com/neuron", "aws.amazon.com/neurondevice", "aws.amazon.com/neuroncore"} {
			if !slices.Contains(res, r) {
				t.Errorf("%s: acceleratorResources %v lacks %s", tc.c.Team, res, r)
			}
		}
	}

	s := DefaultClusterSettings()
	s.Accelerators = map[string]ResourcesPerInstance{}
	for k, v := range DefaultAccelerators {
		s.Accelerators[k] = v
	}
	r := s.Accelerators["ml.p5.48xlarge"]
	r.AcceleratorResource = "example.com/accelerator"
	s.Accelerators["ml.p5.48xlarge"] = r
	c := workflow.ExampleContract()
	p, err := BuildPlan(7, 1, c.Hash(), c, s)
	if err != nil {
		t.Fatal(err)
	}
	if res := strings.Split(admissionOf(t, p).params.Data["acceleratorResources"], ","); !slices.Contains(res, "example.com/accelerator") {
		t.Errorf("a resource of the cluster's accelerator table is not held: %v", res)
	}

	from, err := BuildPlan(9, 1, c.Hash(), c, DefaultClusterSettings())
	if err != nil {
		t.Fatal(err)
	}
	c.Scheduling.Guaranteed = append(c.Scheduling.Guaranteed, workflow.Capacity{InstanceType: "ml.g5.8xlarge", Count: 1})
	c = c.Normalize()
	to, err := BuildPlan(9, 2, c.Hash(), c, DefaultClusterSettings())
	if err != nil {
		t.Fatal(err)
	}
	if got := admissionOf(t, to).params.Data["instanceTypes"]; got != "ml.g5.8xlarge,ml.p5.48xlarge" {
		t.Errorf("amended instanceTypes %q", got)
	}
	for _, ch := range DiffPlans(from, to).Changes {
		if ch.Object != nil && ch.Object.Kind == "ConfigMap" && (ch.Action != DiffUpdate || !strings.Contains(ch.Detail, "ml.g5.8xlarge")) {
			t.Errorf("parameters: %s %q, want an update adding ml.g5.8xlarge", ch.Action, ch.Detail)
		}
	}
}

// celRule evaluates rule 5 as the API server does: the variables in order
// (each sees the earlier ones), then the validation and its message. The
// CEL environment is cel-go's with the extensions the Kubernetes admission
// environment has for these expressions (strings: split, join); Kubernetes'
// quantity library is stood in for by isQuantity(s), quantity(s) and
// q.isGreaterThan(q) over apimachinery's resource.ParseQuantity (a
// quantity is its sign here: all the rule asks of it is "above zero"). The
// test bed's API server runs the real library and type-checks the policy
// (TestAdmissionRulesIntegration).
type celRule struct {
	t           *testing.T
	env         *cel.Env
	vars        []admissionregistrationv1.Variable
	validations []admissionregistrationv1.Validation
}

func newCELRule(t *testing.T, vars []admissionregistrationv1.Variable, validations []admissionregistrationv1.Validation) *celRule {
	t.Helper()
	env, err := cel.NewEnv(
		cel.Variable("object", cel.DynType), cel.Variable("oldObject", cel.DynType),
		cel.Variable("request", cel.DynType), cel.Variable("params", cel.DynType),
		cel.Variable("variables", cel.MapType(cel.StringType, cel.DynType)),
		ext.Strings(),
		cel.Function("isQuantity", cel.Overload("is_quantity_string", []*cel.Type{cel.StringType}, cel.BoolType,
			cel.UnaryBinding(func(v ref.Val) ref.Val {
				_, err := resource.ParseQuantity(string(v.(types.String)))
				return types.Bool(err == nil)
			}))),
		// quantity(s) is the quantity's sign here: all the rule asks of it.
		cel.Function("quantity", cel.Overload("quantity_string", []*cel.Type{cel.StringType}, cel.IntType,
			cel.UnaryBinding(func(v ref.Val) ref.Val {
				q, err := resource.ParseQuantity(string(v.(types.String)))
				if err != nil {
					return types.NewErr("%v", err)
				}
				return types.Int(q.Sign())
			}))),
		cel.Function("isGreaterThan", cel.MemberOverload("int_is_greater_than", []*cel.Type{cel.IntType, cel.IntType}, cel.BoolType,
			cel.BinaryBinding(func(a, b ref.Val) ref.Val { return types.Bool(a.(types.Int) > b.(types.Int)) }))),
	)
	if err != nil {
		t.Fatal(err)
	}
	return &celRule{t: t, env: env, vars: vars, validations: validations}
}

func (r *celRule) eval(expr string, in map[string]any) ref.Val {
	r.t.Helper()
	ast, iss := r.env.Compile(expr)
	if iss.Err() != nil {
		r.t.Fatalf("compile %s: %v", expr, iss.Err())
	}
	prg, err := r.env.Program(ast)
	if err != nil {
		r.t.Fatal(err)
	}
	out, _, err := prg.Eval(in)
	if err != nil {
		r.t.Fatalf("eval %s: %v", expr, err)
	}
	return out
}

// admit returns "" when the rule admits the request, else its message.
func (r *celRule) admit(op string, group, res, kind string, object any, params map[string]string) string {
	r.t.Helper()
	vars := map[string]any{}
	in := map[string]any{
		"object": object, "oldObject": nil, "params": map[string]any{"data": params}, "variables": vars,
		"request": map[string]any{
			"operation": op, "namespace": "hyperpod-ns-red",
			"resource": map[string]any{"group": group, "resource": res}, "kind": map[string]any{"kind": kind},
		},
	}
	for _, v := range r.vars {
		vars[v.Name] = r.eval(v.Expression, in)
	}
	for _, v := range r.validations {
		if ok := r.eval(v.Expression, in); ok != types.True {
			return r.eval(v.MessageExpression, in).Value().(string)
		}
	}
	return ""
}

func toMap(t *testing.T, o any) map[string]any {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// accelSpec is a pod spec requesting (or limiting) res: n of the first
// container, selecting instanceType by nodeSelector when not "".
func accelSpec(res string, n string, limitsOnly bool, instanceType string) corev1.PodSpec {
	q := corev1.ResourceList{corev1.ResourceName(res): resource.MustParse(n)}
	rr := corev1.ResourceRequirements{Limits: q}
	if !limitsOnly {
		rr.Requests = q
	}
	s := corev1.PodSpec{Containers: []corev1.Container{{Name: "train", Image: "busybox", Resources: rr}}}
	if instanceType != "" {
		s.NodeSelector = map[string]string{LabelInstanceType: instanceType}
	}
	return s
}

func affinityIn(op corev1.NodeSelectorOperator, values ...string) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "sagemaker.amazonaws.com/node-health-status", Operator: corev1.NodeSelectorOpIn, Values: []string{"Schedulable"}}}},
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: LabelInstanceType, Operator: op, Values: values}}},
		},
	}}}
}

// Rule 5 on the plan's own parameters (the example contract guarantees
// ml.p5.48xlarge): a workload that requests accelerators and selects an
// instance type the contract does not guarantee is refused, naming the
// clause, the type, the approved ones and the change page; every other
// case passes. Each case breaks when its part of the rule does.
func TestAdmissionAcceleratorRule(t *testing.T) {
	c := workflow.ExampleContract()
	p, err := BuildPlan(42, 1, c.Hash(), c, DefaultClusterSettings())
	if err != nil {
		t.Fatal(err)
	}
	a := admissionOf(t, p)
	vars, validations := acceleratorRule()
	// The plan's policy holds the rule, after the other rules' entries.
	for _, v := range vars {
		if !slices.Contains(a.policy.Spec.Variables, v) {
			t.Errorf("the policy lacks variable %s", v.Name)
		}
	}
	if !slices.ContainsFunc(a.policy.Spec.Validations, func(v admissionregistrationv1.Validation) bool {
		return v.Expression == validations[0].Expression && v.MessageExpression == validations[0].MessageExpression
	}) {
		t.Error("the policy lacks rule 5's validation")
	}
	if v := validations[0]; v.Reason == nil || *v.Reason != metav1.StatusReasonForbidden || v.Message == "" {
		t.Errorf("validation %+v: want Forbidden with a static message", v)
	}
	rule := newCELRule(t, vars, validations)
	params := a.params.Data

	pod := func(s corev1.PodSpec, owners ...metav1.OwnerReference) map[string]any {
		return toMap(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", OwnerReferences: owners}, Spec: s})
	}
	job := func(s corev1.PodSpec) map[string]any {
		return toMap(t, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j"}, Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: s}}})
	}
	template := func(s corev1.PodSpec) map[string]any {
		return map[string]any{"metadata": map[string]any{}, "spec": toMap(t, &s)}
	}
	pytorch := func(master, worker corev1.PodSpec) map[string]any {
		return map[string]any{"metadata": map[string]any{"name": "pt"}, "spec": map[string]any{"pytorchReplicaSpecs": map[string]any{
			"Master": map[string]any{"replicas": int64(1), "template": template(master)},
			"Worker": map[string]any{"replicas": int64(2), "template": template(worker)},
		}}}
	}
	hyperpod := func(s corev1.PodSpec) map[string]any {
		return map[string]any{"metadata": map[string]any{"name": "hp"}, "spec": map[string]any{"replicaSpecs": []any{
			map[string]any{"name": "pod", "replicas": int64(2), "template": template(s)},
		}}}
	}
	withAffinity := func(s corev1.PodSpec, aff *corev1.Affinity) corev1.PodSpec { s.Affinity = aff; return s }
	withInit := func(s corev1.PodSpec) corev1.PodSpec {
		s.InitContainers, s.Containers = s.Containers, []corev1.Container{{Name: "main", Image: "busybox"}}
		return s
	}
	controller := true
	bad, good := "ml.g5.8xlarge", "ml.p5.48xlarge"
	noParams := map[string]string{}
	for k, v := range params {
		if k != "instanceTypes" && k != "acceleratorResources" {
			noParams[k] = v
		}
	}

	for _, tc := range []struct {
		name                string
		op, group, res, kin string
		obj                 any
		params              map[string]string
		refused             string // the unapproved type named, "" when admitted
	}{
		{"pod: GPUs on an unapproved type", "CREATE", "", "pods", "Pod", pod(accelSpec("nvidia.com/gpu", "1", false, bad)), params, bad},
		{"pod: GPUs named in limits only", "CREATE", "", "pods", "Pod", pod(accelSpec("nvidia.com/gpu", "8", true, bad)), params, bad},
		{"pod: GPUs on the approved type", "CREATE", "", "pods", "Pod", pod(accelSpec("nvidia.com/gpu", "1", false, good)), params, ""},
		{"pod: GPUs, no instance type selected", "CREATE", "", "pods", "Pod", pod(accelSpec("nvidia.com/gpu", "1", false, "")), params, ""},
		{"pod: zero GPUs (the HyperPod CLI's default)", "CREATE", "", "pods", "Pod", pod(accelSpec("nvidia.com/gpu", "0", false, bad)), params, ""},
		{"pod: no accelerator", "CREATE", "", "pods", "Pod", pod(accelSpec("cpu", "4", false, bad)), params, ""},
		{"pod: Neuron devices", "CREATE", "", "pods", "Pod", pod(accelSpec("aws.amazon.com/neurondevice", "16", false, bad)), params, bad},
		{"pod: Neuron cores", "CREATE", "", "pods", "Pod", pod(accelSpec("aws.amazon.com/neuroncore", "2", false, bad)), params, bad},
		{"pod: an init container's GPUs", "CREATE", "", "pods", "Pod", pod(withInit(accelSpec("nvidia.com/gpu", "1", false, bad))), params, bad},
		{"pod: required affinity In an unapproved type", "CREATE", "", "pods", "Pod",
			pod(withAffinity(accelSpec("nvidia.com/gpu", "1", false, ""), affinityIn(corev1.NodeSelectorOpIn, good, bad))), params, bad},
		{"pod: required affinity In the approved type", "CREATE", "", "pods", "Pod",
			pod(withAffinity(accelSpec("nvidia.com/gpu", "1", false, ""), affinityIn(corev1.NodeSelectorOpIn, good))), params, ""},
		{"pod: required affinity NotIn", "CREATE", "", "pods", "Pod",
			pod(withAffinity(accelSpec("nvidia.com/gpu", "1", false, ""), affinityIn(corev1.NodeSelectorOpNotIn, bad))), params, ""},
		{"pod: a controller's pod (Kueue placed its job)", "CREATE", "", "pods", "Pod",
			pod(accelSpec("nvidia.com/gpu", "1", false, bad), metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: "u", Controller: &controller}), params, ""},
		{"pod: an owner that is no controller", "CREATE", "", "pods", "Pod",
			pod(accelSpec("nvidia.com/gpu", "1", false, bad), metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "c", UID: "u"}), params, bad},
		{"job: GPUs on an unapproved type", "CREATE", "batch", "jobs", "Job", job(accelSpec("nvidia.com/gpu", "1", false, bad)), params, bad},
		{"job: GPUs on the approved type", "CREATE", "batch", "jobs", "Job", job(accelSpec("nvidia.com/gpu", "1", false, good)), params, ""},
		{"job: an update (Kueue's flavor assignment)", "UPDATE", "batch", "jobs", "Job", job(accelSpec("nvidia.com/gpu", "1", false, bad)), params, ""},
		{"PyTorchJob: a worker on an unapproved type", "CREATE", "kubeflow.org", "pytorchjobs", "PyTorchJob",
			pytorch(accelSpec("nvidia.com/gpu", "1", false, good), accelSpec("nvidia.com/gpu", "1", false, bad)), params, bad},
		{"PyTorchJob: both on the approved type", "CREATE", "kubeflow.org", "pytorchjobs", "PyTorchJob",
			pytorch(accelSpec("nvidia.com/gpu", "1", false, good), accelSpec("nvidia.com/gpu", "1", false, good)), params, ""},
		{"HyperPodPyTorchJob: on an unapproved type", "CREATE", HyperPodJobGroup, HyperPodJobResource, "HyperPodPyTorchJob",
			hyperpod(accelSpec("nvidia.com/gpu", "8", true, bad)), params, bad},
		{"HyperPodPyTorchJob: on the approved type", "CREATE", HyperPodJobGroup, HyperPodJobResource, "HyperPodPyTorchJob",
			hyperpod(accelSpec("nvidia.com/gpu", "8", true, good)), params, ""},
		{"parameters older than the rule", "CREATE", "", "pods", "Pod", pod(accelSpec("nvidia.com/gpu", "1", false, bad)), noParams, ""},
	} {
		msg := rule.admit(tc.op, tc.group, tc.res, tc.kin, tc.obj, tc.params)
		switch {
		case tc.refused == "" && msg != "":
			t.Errorf("%s: refused: %s", tc.name, msg)
		case tc.refused != "" && msg == "":
			t.Errorf("%s: admitted, want refused", tc.name)
		case tc.refused != "":
			for _, s := range []string{`clause "Guaranteed capacity" (scheduling.guaranteed`, "a " + tc.kin + " in namespace hyperpod-ns-red",
				"on instance type " + tc.refused + " (label node.kubernetes.io/instance-type)", "approved: ml.p5.48xlarge", "/connections/42/edit"} {
				if !strings.Contains(msg, s) {
					t.Errorf("%s: the message does not say %q: %s", tc.name, s, msg)
				}
			}
			if strings.Contains(msg, "instance type "+good) {
				t.Errorf("%s: the message names the approved type as unapproved: %s", tc.name, msg)
			}
		}
	}
}
