package provision

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/provision/slurmprov"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/yaml"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Labels and annotations the portal puts on what it provisions. The contract
// hash is an annotation because a SHA-256 in hex (64 characters) is longer
// than a label value may be.
const (
	LabelTeam              = "portal.hyperpod.io/team"
	LabelConnection        = "portal.hyperpod.io/connection"
	LabelContractVersion   = "portal.hyperpod.io/contract-version"
	LabelManagedBy         = "app.kubernetes.io/managed-by"
	AnnotationContractHash = "portal.hyperpod.io/contract-hash"
	// AnnotationPodIdentityRole records the IAM role the workloads'
	// ServiceAccount is meant to get. It is informational: EKS Pod Identity
	// is bound on the AWS side (CreatePodIdentityAssociation), not by any
	// annotation. The IRSA annotation (eks.amazonaws.com/role-arn) is
	// deliberately not used: it would give pods a second credential path.
	AnnotationPodIdentityRole = "portal.hyperpod.io/pod-identity-role-arn"

	// ManagedBy is the value of LabelManagedBy and the server-side apply
	// field manager.
	ManagedBy = "hyperpod-portal"
)

// Names of the namespaced objects of a team namespace. Stable names make
// re-applying a plan an update, never a second object.
const (
	NameViewerRole          = "team-viewer"
	NameSubmitterRole       = "team-submitter"
	NameViewerBinding       = "team-viewers"
	NameSubmitterBinding    = "team-submitters"
	NameResourceQuota       = "team-quota"
	NameLimitRange          = "team-container-defaults"
	NamePolicyDefaultDeny   = "default-deny"
	NamePolicySameNamespace = "allow-same-namespace"
	NamePolicyDNS           = "allow-dns"
	NamePolicyPodIdentity   = "allow-eks-pod-identity-agent"
	// NamePolicyTrainingOperator lets HyperPod's training operator reach
	// the pods it manages and them reach it (NetworkPolicy).
	NamePolicyTrainingOperator = "allow-hyperpod-training-operator"
	// NamePolicyObservability lets the observability collectors of
	// ClusterSettings.ObservabilityNamespaces scrape the team's pods.
	NamePolicyObservability = "allow-observability-scrapers"
	// NamePolicyEgressPrefix + the CIDR with '.', ':' and '/' as '-'.
	NamePolicyEgressPrefix = "allow-egress-"
)

// Plan is the desired state of one approved contract version on the
// cluster: the objects to apply, in the order to apply them, and what the
// plan cannot do (Warnings). Build it with BuildPlan.
type Plan struct {
	ConnectionID    int64
	ContractVersion int
	ContractHash    string
	Team            string
	Namespace       string
	// Cluster is the contract's cluster (workflow.Contract.ClusterName):
	// with Team, whose connections share the team's ClusterQueue.
	Cluster string
	// Share is what this connection brings to its team's ClusterQueue
	// (teamqueue.go): its version's scheduling. Not part of Hash.
	Share QueueShare

	// Objects in dependency order. Guardrails come before access: the
	// namespace, then its quota, defaults and network policies, then the
	// Kueue queues, and only then the ServiceAccount, Roles and
	// RoleBindings. A partly applied plan never grants access to a
	// namespace without its limits.
	Objects []Object

	// Warnings are what the contract asks for that this plan does not
	// deliver, in words an approver can act on.
	Warnings []string

	// AWS are the plan's AWS calls (awsprov.PlanFor): Guardrail ones are
	// made before Objects, Access ones after.
	AWS []awsprov.Call

	// OnRevoke is what revoking this plan does with the namespace (the
	// settings'); see RevocationPlan. It is not part of Hash: it changes
	// nothing that is applied.
	OnRevoke RevokeMode

	// StopPolicy is what the connection's hold says its queues' Kueue
	// spec.stopPolicy is (workflow.Hold.StopPolicy), set by the drift
	// check (DriftChecker.StopPolicies), never by BuildPlan: the plan does
	// not set the field (hold.go). "" does not compare it. Not part of
	// Hash.
	StopPolicy string

	// Exceptions are the connection's exceptions in effect whose priority
	// classes the admission parameters carry (WithExceptions, never
	// BuildPlan): for the plan page. Not part of Hash.
	Exceptions []workflow.Exception

	// Slurm is a Slurm connection's plan: the team's QoS, account and
	// member associations in the cluster's accounting (SlurmPlan); nil for
	// an EKS one. A Slurm plan has no Objects and no AWS calls; its exact
	// sacctmgr commands are part of Hash.
	Slurm *slurmprov.Plan
}

// Owner says who owns an object of a plan, and so what the portal may do
// with it.
type Owner string

// The owners. With a compute quota, HyperPod task governance creates and
// owns the team's namespace hyperpod-ns-<team> (labelled
// sagemaker.amazonaws.com/sagemaker-managed-queue and
// sagemaker.amazonaws.com/quota-allocation-id) and its LocalQueue
// hyperpod-ns-<team>-localqueue (aws/sagemaker-hyperpod-cli:
// src/sagemaker/hyperpod/cli/constants/command_constants.py,
// SAGEMAKER_MANAGED_QUEUE_LABEL, SAGEMAKER_QUOTA_ALLOCATION_LABEL,
// SAGEMAKER_MANAGED_LOCAL_QUEUE_SUFFIX; examples/end_to_end_walkthrough/
// 00-getting-started/00-setup.md: the compute quotas "as well as the
// corresponding Kubernetes namespaces ... with the HyperPod naming scheme").
// The portal's rule for them: it adds only its own labels and objects to
// HyperPod's namespace, never takes over HyperPod's queue, and revocation
// leaves both to HyperPod.
const (
	// OwnerPortal: the portal creates the object and owns the fields it
	// sets (server-side apply with force: its word wins over a hand edit).
	OwnerPortal Owner = ""
	// OwnerHyperPod: HyperPod creates and owns the object (the team
	// namespace). The portal waits for it to exist, then server-side
	// applies only its own labels and annotations without force, so it
	// never takes a field HyperPod manages (a conflict stops the step
	// instead). Revocation never deletes it.
	OwnerHyperPod Owner = "hyperpod"
	// OwnerHyperPodChecked: HyperPod creates and owns the object (the
	// team LocalQueue). The portal only checks that it exists and never
	// writes it; the plan's YAML leaves it out.
	OwnerHyperPodChecked Owner = "hyperpod-checked"
)

// HyperPodNamespacePrefix is the prefix of the namespaces HyperPod task
// governance creates, one per team ("hyperpod-ns-<team>"; see Owner).
const HyperPodNamespacePrefix = "hyperpod-ns-"

// Object is one desired Kubernetes object.
type Object struct {
	Kind      string
	Namespace string // empty for cluster-scoped objects
	Name      string
	// Owner is who owns it; the zero value is the portal.
	Owner Owner
	// Shared objects (WorkloadPriorityClasses, ResourceFlavors) are
	// cluster-wide and the same for every team, so they carry no team,
	// connection, version or hash: otherwise applying one team's plan
	// would rewrite them for every other team.
	Shared bool
	// Detail is the object's substance in a few words, for Summary.
	Detail string
	Obj    *unstructured.Unstructured
	// Adopt (the team namespace only): an admin adopted this namespace
	// at approval, so Apply may take it over although it exists and is
	// foreign (ForeignNamespace). Set by the worker from the job
	// (Plan.Adopting), never by BuildPlan; not part of the plan's Hash.
	Adopt bool
	// Team objects (the team's ClusterQueue when the portal manages it)
	// belong to the team, not to one connection: every connection of the
	// team on the cluster applies the same object, built from the team's
	// queue shares (teamqueue.go). They carry the team's labels, never a
	// connection's; Hash names them but leaves their body out. The
	// ResourceFlavors WithTeamQueue adds for the other connections'
	// instance types are Team and Shared, and Hash leaves them out.
	Team bool
	// TeamMembers are the connections a team object sums, ascending:
	// BuildPlan's is the plan's own; WithTeamQueue's the team's. None: the
	// team has no counted connection left, and a revocation deletes it.
	TeamMembers []int64
	// Approved is the object as the approved contract alone makes it, when
	// Obj differs from it by the connection's exceptions in effect
	// (WithExceptions; nil otherwise): Hash is taken over it, so that an
	// exception never changes the plan an approval pinned.
	Approved *unstructured.Unstructured
}

// Ref is "namespace/name" or "name".
func (o Object) Ref() string {
	if o.Namespace == "" {
		return o.Name
	}
	return o.Namespace + "/" + o.Name
}

// Summary is one line per object, in apply order:
// "ResourceQuota hyperpod-ns-red/team-quota: requests.nvidia.com/gpu=24, ...".
func (p Plan) Summary() []string {
	out := make([]string, len(p.Objects))
	for i, o := range p.Objects {
		out[i] = o.Kind + " " + o.Ref()
		if o.Detail != "" {
			out[i] += ": " + o.Detail
		}
	}
	return out
}

// YAML renders the objects as a multi-document YAML stream, in apply order,
// keys sorted, that kubectl apply --server-side would accept.
func (p Plan) YAML() string { return p.yaml(true) }

// yaml is YAML, with the team objects or without them; without them (the
// hashed text) an object an exception changed is rendered as approved.
func (p Plan) yaml(team bool) string {
	var b strings.Builder
	for _, o := range p.Objects {
		if o.Owner == OwnerHyperPodChecked || o.Team && !team {
			continue // not applied (HyperPod's), or left out
		}
		obj := o.Obj
		if !team && o.Approved != nil {
			obj = o.Approved // the hashed text: the approved values (exception.go)
		}
		y, err := objectYAML(obj.Object)
		if err != nil {
			// The objects are JSON values built by BuildPlan.
			panic("provision: rendering " + o.Kind + " " + o.Ref() + ": " + err.Error())
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.String()
}

// objectYAML is yaml.Marshal(obj), remembered by obj's JSON. The YAML is a
// function of the JSON alone: sigs.k8s.io/yaml's Marshal is the standard
// library's json.Marshal, then JSONToYAML (sigs.k8s.io/yaml yaml.go,
// Marshal), which is done here the same way. The conversion is most of a
// plan's Hash (issue 15: a batch of re-apply jobs hashes every job's plan,
// the same objects every time), so it is done once per distinct object.
// At most yamlMemoSize objects are remembered (a few megabytes); the memo
// starts over when it is full.
func objectYAML(obj map[string]any) ([]byte, error) {
	j, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("error marshaling into JSON: %w", err)
	}
	key := sha256.Sum256(j)
	yamlMemo.Lock()
	y, ok := yamlMemo.m[key]
	yamlMemo.Unlock()
	if ok {
		return y, nil
	}
	if y, err = yaml.JSONToYAML(j); err != nil {
		return nil, err
	}
	yamlMemo.Lock()
	if len(yamlMemo.m) >= yamlMemoSize {
		clear(yamlMemo.m)
	}
	yamlMemo.m[key] = y
	yamlMemo.Unlock()
	return y, nil
}

// yamlMemoSize bounds objectYAML's memo: 200 connections (a re-apply
// batch, ReapplyBatch) of about 25 objects, with room to spare.
const yamlMemoSize = 8192

var yamlMemo = struct {
	sync.Mutex
	m map[[sha256.Size]byte][]byte
}{m: map[[sha256.Size]byte][]byte{}}

// Hash is the hex SHA-256 of YAML: what an approval records as "the plan I
// saw". Warnings are not part of it; they follow from the contract, whose
// own hash the approval records too.
//
// The AWS calls are part of it (their canonical text after the YAML); a
// plan without AWS calls hashes as it always has.
func (p Plan) Hash() string {
	sum := sha256.Sum256([]byte(p.HashedText()))
	return hex.EncodeToString(sum[:])
}

// HashedText is the exact text Hash is taken over: the YAML of every
// object but the team objects, then one line per object HyperPod owns and
// the plan only checks, then one line per team object (named, its body
// left out: it sums the team's other connections too, which change
// without this connection's approval; see teamqueue.go), then one line
// per AWS call. An evidence bundle carries it so that its verifier can
// recompute the plan hash an approval pinned without the cluster settings.
func (p Plan) HashedText() string {
	var b strings.Builder
	b.WriteString(p.yaml(false))
	for _, o := range p.Objects {
		if o.Owner == OwnerHyperPodChecked {
			fmt.Fprintf(&b, "# checked: %s %s\n", o.Kind, o.Ref())
		}
	}
	p.teamObjectsText(&b)
	for _, c := range p.AWS {
		fmt.Fprintf(&b, "# aws: %s\n", c.Canonical())
	}
	if p.Slurm != nil {
		b.WriteString(slurmHashedText(p.Slurm))
	}
	return b.String()
}

// BuildPlan turns an approved contract version into the desired objects on
// an EKS cluster. It is pure: the same arguments give the same plan, byte
// for byte. hash must be the contract's hash (workflow.Contract.Hash), so
// that a plan can never be built from one version and labelled as another.
//
// A Slurm contract gives a plan of the team's Slurm accounting (Slurm,
// slurm.go) and no object. An instance type missing from the
// settings' Accelerators is an error, since its quota cannot be computed.
func BuildPlan(connID int64, version int, hash string, c workflow.Contract, s ClusterSettings) (Plan, error) {
	c = c.Normalize()
	switch {
	case connID <= 0:
		return Plan{}, fmt.Errorf("provision: connection id %d: must be positive", connID)
	case version <= 0:
		return Plan{}, fmt.Errorf("provision: contract version %d: must be positive", version)
	case hash != c.Hash():
		return Plan{}, fmt.Errorf("provision: hash %q is not the hash of this contract (%s): wrong version?", hash, c.Hash())
	case c.Orchestrator == workflow.OrchestratorSlurm:
		return buildSlurmPlan(connID, version, hash, c, s)
	case c.Orchestrator != workflow.OrchestratorEKS:
		return Plan{}, fmt.Errorf("provision: orchestrator %q is not %s", c.Orchestrator, workflow.OrchestratorEKS)
	}
	if errs := validation.IsDNS1123Label(c.Team); len(errs) > 0 {
		return Plan{}, fmt.Errorf("provision: team %q: %s", c.Team, strings.Join(errs, "; "))
	}
	s = s.withDefaults()
	if err := s.check(); err != nil {
		return Plan{}, fmt.Errorf("provision: %w", err)
	}

	b := &builder{c: c, s: s, plan: Plan{
		ConnectionID:    connID,
		ContractVersion: version,
		ContractHash:    hash,
		Team:            c.Team,
		Namespace:       s.NamespacePrefix + c.Team,
		Cluster:         c.ClusterName,
		Share:           QueueShare{ConnectionID: connID, Scheduling: c.Scheduling},
		OnRevoke:        s.OnRevoke,
	}}
	// The contract's namespaces are a sorted set (Normalize), so "the
	// first" is alphabetical, not the one the team wrote first: prefer
	// prefix+team (the task governance namespace) when the contract lists
	// it.
	hyperPod := !s.ClusterQueueManagedByPortal
	if hyperPod {
		// HyperPod task governance makes and owns the team's namespace:
		// the portal cannot provision any other one here.
		for _, ns := range c.Namespaces {
			if ns != b.plan.Namespace {
				return Plan{}, fmt.Errorf("provision: namespace %s: %w", ns, ErrHyperPodNamespace(b.plan.Namespace))
			}
		}
	}
	if len(c.Namespaces) > 0 && !slices.Contains(c.Namespaces, b.plan.Namespace) {
		b.plan.Namespace = c.Namespaces[0]
	}
	if len(c.Namespaces) > 1 {
		others := slices.DeleteFunc(slices.Clone(c.Namespaces), func(ns string) bool { return ns == b.plan.Namespace })
		b.warn("the contract's other namespaces (%s) are not provisioned: this plan provisions the team namespace %s only",
			strings.Join(others, ", "), b.plan.Namespace)
	}
	if errs := validation.IsDNS1123Label(b.plan.Namespace); len(errs) > 0 {
		return Plan{}, fmt.Errorf("provision: namespace %q: %s", b.plan.Namespace, strings.Join(errs, "; "))
	}
	// A system component's namespace is never provisioned, even for a
	// contract approved before the name was reserved (issue 10 item 14).
	if workflow.ReservedNamespace(b.plan.Namespace, s.ReservedNamespaces) {
		return Plan{}, fmt.Errorf("provision: namespace %s is reserved for the cluster's own components", b.plan.Namespace)
	}
	cq := team(s.ClusterQueueNameFormat, c.Team)
	if errs := validation.IsDNS1123Subdomain(cq); len(errs) > 0 {
		return Plan{}, fmt.Errorf("provision: ClusterQueue name %q: %s", cq, strings.Join(errs, "; "))
	}
	g, err := guarantee(c.Scheduling.Guaranteed, s.Accelerators)
	if err != nil {
		return Plan{}, err
	}
	if slices.Contains(g.resources, ResourceNeuronDevice) {
		b.warn("Neuron devices are covered under both of their names, %s and %s, each with the whole guarantee, so that jobs asking for either are admitted (HyperPod's CLI asks for %s): jobs mixing both names can hold up to twice the guarantee in devices",
			ResourceNeuron, ResourceNeuronDevice, ResourceNeuronDevice)
	}

	b.namespace(hyperPod)
	b.resourceQuota(g)
	b.limitRange()
	b.networkPolicies()
	// The admission rules are guardrails too: the policy, the team's
	// values, then the binding (whose paramRef names them), before any
	// access (admission.go).
	b.admissionPolicy()
	b.admissionParams(LocalQueueName(b.plan.Namespace))
	b.admissionBinding()
	if s.ClusterQueueManagedByPortal {
		b.priorityClasses()
		b.resourceFlavors(g)
		b.clusterQueue(cq)
	}
	b.localQueue(cq)
	b.serviceAccount()
	b.roles()
	b.queueReader(cq)
	b.roleBindings()
	b.checkPriorityClasses()
	b.warnBarePodPolicies()
	if b.err != nil {
		return Plan{}, b.err
	}
	aws := s.AWS
	aws.ComputeQuota = !s.ClusterQueueManagedByPortal
	aws.Access.SubmitterPolicies, _ = b.submitterGrants()
	calls, warnings, err := awsprov.PlanFor(c, awsprov.Target{
		ConnectionID: connID, Namespace: b.plan.Namespace, ServiceAccount: ServiceAccountName(c.Team),
		StudioGroup:    team(s.StudioExecutionRoleGroupFormat, c.Team),
		SubmitterGroup: team(s.KubernetesGroups.SubmitterGroupFormat, c.Team),
		ViewerGroup:    team(s.KubernetesGroups.ViewerGroupFormat, c.Team),
		SubmitterNote:  b.submitterNote(),
	}, aws)
	if err != nil {
		return Plan{}, fmt.Errorf("provision: %w", err)
	}
	b.plan.AWS = calls
	b.plan.Warnings = append(b.plan.Warnings, warnings...)
	return b.plan, nil
}

// builder accumulates a plan. Conversion errors (which would be bugs in the
// builder) are kept in err, so that each step reads as a list of objects.
type builder struct {
	c    workflow.Contract
	s    ClusterSettings
	plan Plan
	err  error
}

func (b *builder) warn(format string, a ...any) {
	b.plan.Warnings = append(b.plan.Warnings, fmt.Sprintf(format, a...))
}

// add labels obj and appends it to the plan.
func (b *builder) add(obj runtime.Object, shared bool, detail string) {
	m, ok := obj.(metav1.Object)
	if !ok {
		b.err = errors.Join(b.err, fmt.Errorf("provision: %T has no metadata", obj))
		return
	}
	labels := map[string]string{LabelManagedBy: ManagedBy}
	if !shared {
		labels[LabelTeam] = b.c.Team
		labels[LabelConnection] = strconv.FormatInt(b.plan.ConnectionID, 10)
		labels[LabelContractVersion] = strconv.Itoa(b.plan.ContractVersion)
		ann := m.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[AnnotationContractHash] = b.plan.ContractHash
		m.SetAnnotations(ann)
	}
	m.SetLabels(labels)
	u, err := toUnstructured(obj)
	if err != nil {
		b.err = errors.Join(b.err, err)
		return
	}
	b.plan.Objects = append(b.plan.Objects, Object{
		Kind:      u.GetKind(),
		Namespace: m.GetNamespace(),
		Name:      m.GetName(),
		Shared:    shared,
		Detail:    detail,
		Obj:       u,
	})
}

// toUnstructured converts a typed object (with its TypeMeta set) into the
// form server-side apply sends, leaving out what the portal does not own:
// status, an empty spec and the zero creationTimestamp.
func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("provision: converting %T: %w", obj, err)
	}
	delete(m, "status")
	if spec, ok := m["spec"].(map[string]any); ok && len(spec) == 0 {
		delete(m, "spec") // a Namespace's
	}
	if md, ok := m["metadata"].(map[string]any); ok && md["creationTimestamp"] == nil {
		delete(md, "creationTimestamp")
	}
	u := &unstructured.Unstructured{Object: m}
	if u.GetAPIVersion() == "" || u.GetKind() == "" {
		return nil, fmt.Errorf("provision: %T has no apiVersion or kind", obj)
	}
	return u, nil
}

func (b *builder) meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: b.plan.Namespace}
}

// namespace is the team namespace: the portal's, or HyperPod's, to which
// the portal adds only its labels and annotation (see OwnerHyperPod).
func (b *builder) namespace(hyperPod bool) {
	detail := ""
	if hyperPod {
		detail = "created and owned by HyperPod task governance from the compute quota: the portal waits for it and adds only its own labels"
	}
	b.add(&corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: b.plan.Namespace},
	}, false, detail)
	if b.err != nil {
		return
	}
	ns := &b.plan.Objects[len(b.plan.Objects)-1]
	if hyperPod {
		ns.Owner = OwnerHyperPod
	}
	// The roll-out mode of the contract's admission rules: the shared
	// binding of that mode selects the namespace (admission.go).
	labels := ns.Obj.GetLabels()
	labels[LabelAdmissionMode] = string(b.s.AdmissionMode)
	ns.Obj.SetLabels(labels)
}

// ErrHyperPodNamespace is the reason a contract naming another namespace
// than the team's is refused in HyperPod-managed mode.
type ErrHyperPodNamespace string

func (e ErrHyperPodNamespace) Error() string {
	return "in this cluster HyperPod task governance creates and owns the team namespace " + string(e) +
		" from the team's compute quota, so it is the only namespace the portal provisions: name " + string(e) + " alone"
}

// guaranteed is the team's guarantee: per instance type, and summed per
// resource.
type guaranteed struct {
	rows      []guaranteeRow
	resources []corev1.ResourceName // cpu, memory, then accelerators sorted
	total     map[corev1.ResourceName]int64
	instances int64
}

type guaranteeRow struct {
	instanceType string
	count        int64
	per          ResourcesPerInstance
}

// amount is what count instances bring of r: cores, GiB or devices.
func (g guaranteeRow) amount(r corev1.ResourceName) int64 {
	switch r {
	case corev1.ResourceCPU:
		return g.count * int64(g.per.CPU)
	case corev1.ResourceMemory:
		return g.count * int64(g.per.MemoryGiB)
	}
	if g.per.Accelerators > 0 && slices.Contains(acceleratorNames(g.per.AcceleratorResource), r) {
		return g.count * int64(g.per.Accelerators)
	}
	return 0
}

// acceleratorNames are the resource names jobs request an instance type's
// accelerators under, which the queue and the quota cover, each with the
// whole guarantee: the type's AcceleratorResource, and for Neuron devices
// both of their names (see ResourceNeuronDevice).
func acceleratorNames(resource string) []corev1.ResourceName {
	if IsNeuronDevices(resource) {
		return []corev1.ResourceName{ResourceNeuron, ResourceNeuronDevice}
	}
	return []corev1.ResourceName{corev1.ResourceName(resource)}
}

func guarantee(rows []workflow.Capacity, table map[string]ResourcesPerInstance) (guaranteed, error) {
	g := guaranteed{total: map[corev1.ResourceName]int64{}}
	if len(rows) == 0 {
		return g, errors.New("provision: the contract guarantees no capacity: nothing to base the quota on")
	}
	var accel []corev1.ResourceName
	for _, r := range rows {
		per, ok := table[r.InstanceType]
		switch {
		case !ok:
			return g, fmt.Errorf("provision: instance type %s is not in the cluster settings' accelerator table: its quota cannot be computed", r.InstanceType)
		case r.Count < 1:
			return g, fmt.Errorf("provision: instance type %s: count %d must be at least 1", r.InstanceType, r.Count)
		}
		g.rows = append(g.rows, guaranteeRow{instanceType: r.InstanceType, count: int64(r.Count), per: per})
		g.instances += int64(r.Count)
		if per.Accelerators > 0 {
			for _, name := range acceleratorNames(per.AcceleratorResource) {
				if !slices.Contains(accel, name) {
					accel = append(accel, name)
				}
			}
		}
	}
	slices.Sort(accel)
	g.resources = append([]corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}, accel...)
	for _, row := range g.rows {
		for _, r := range g.resources {
			g.total[r] += row.amount(r)
		}
	}
	return g, nil
}

// quantity renders an amount of r: memory in GiB, the rest as plain counts.
func quantity(r corev1.ResourceName, n int64) resource.Quantity {
	if r == corev1.ResourceMemory {
		return *resource.NewQuantity(n<<30, resource.BinarySI)
	}
	return *resource.NewQuantity(n, resource.DecimalSI)
}

// borrowPercent is the borrow limit when the team borrows, else 0.
func (b *builder) borrowPercent() int64 {
	if b.c.Scheduling.Sharing.Borrows() {
		return int64(b.c.Scheduling.BorrowLimitPercent)
	}
	return 0
}

// resourceQuota caps what the namespace may request at the guarantee plus
// what the team may borrow: the hard backstop behind Kueue's admission.
// Rounded down, since accelerators come in whole devices. Extended
// resources can only be quota'd on requests (their limits equal them).
func (b *builder) resourceQuota(g guaranteed) {
	pct := b.borrowPercent()
	scale := func(n int64) int64 { return n * (100 + pct) / 100 }
	hard := corev1.ResourceList{}
	var parts []string
	for _, r := range append(slices.Clone(g.resources[2:]), corev1.ResourceCPU, corev1.ResourceMemory) {
		q := quantity(r, scale(g.total[r]))
		name := corev1.ResourceName("requests." + string(r))
		hard[name] = q
		parts = append(parts, fmt.Sprintf("%s=%s", name, q.String()))
	}
	pods := scale(g.instances * int64(b.s.MaxPodsPerInstance))
	hard[corev1.ResourcePods] = *resource.NewQuantity(pods, resource.DecimalSI)
	parts = append(parts, fmt.Sprintf("pods=%d", pods))
	detail := strings.Join(parts, ", ")
	if pct > 0 {
		detail += fmt.Sprintf(" (guarantee + %d%% borrowing)", pct)
	} else {
		detail += " (the guarantee)"
	}
	b.add(&corev1.ResourceQuota{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ResourceQuota"},
		ObjectMeta: b.meta(NameResourceQuota),
		Spec:       corev1.ResourceQuotaSpec{Hard: hard},
	}, false, detail)
}

func (b *builder) limitRange() {
	d := b.s.DefaultLimits
	item := corev1.LimitRangeItem{Type: corev1.LimitTypeContainer}
	var parts []string
	set := func(list *corev1.ResourceList, what string, r corev1.ResourceName, v string) {
		if v == "" {
			return
		}
		if *list == nil {
			*list = corev1.ResourceList{}
		}
		(*list)[r] = resource.MustParse(v) // checked by ClusterSettings.check
		parts = append(parts, fmt.Sprintf("%s %s=%s", what, r, v))
	}
	set(&item.DefaultRequest, "default request", corev1.ResourceCPU, d.RequestCPU)
	set(&item.DefaultRequest, "default request", corev1.ResourceMemory, d.RequestMemory)
	// No default limits (ClusterSettings.check refuses them): a default
	// limit below a container's request makes the pod invalid.
	b.add(&corev1.LimitRange{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "LimitRange"},
		ObjectMeta: b.meta(NameLimitRange),
		Spec:       corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{item}},
	}, false, "per container: "+strings.Join(parts, ", ")+"; no default limits, so a container requesting more is never rejected")
}

func (b *builder) networkPolicy(name string, spec networkingv1.NetworkPolicySpec, detail string) {
	b.add(&networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: b.meta(name),
		Spec:       spec,
	}, false, detail)
}

func ports(proto corev1.Protocol, ps ...int) []networkingv1.NetworkPolicyPort {
	out := make([]networkingv1.NetworkPolicyPort, len(ps))
	for i, p := range ps {
		port := intstr.FromInt32(int32(p))
		out[i] = networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &port}
	}
	return out
}

func joinInts(ps []int) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ", ")
}

// networkPolicies: deny everything, then allow the namespace itself, DNS,
// the Pod Identity agent (without which the workloads' ServiceAccount gets
// no AWS credentials), HyperPod's training operator, the observability
// collectors, and each CIDR the contract names. Contract ports are TCP.
func (b *builder) networkPolicies() {
	all := metav1.LabelSelector{}
	both := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
	egress := []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}

	b.networkPolicy(NamePolicyDefaultDeny, networkingv1.NetworkPolicySpec{
		PodSelector: all, PolicyTypes: both,
	}, "deny all ingress and egress of every pod")

	same := []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}
	b.networkPolicy(NamePolicySameNamespace, networkingv1.NetworkPolicySpec{
		PodSelector: all,
		Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: same}},
		Egress:      []networkingv1.NetworkPolicyEgressRule{{To: same}},
		PolicyTypes: both,
	}, "ingress and egress between pods of this namespace")

	b.networkPolicy(NamePolicyDNS, networkingv1.NetworkPolicySpec{
		PodSelector: all,
		Egress: []networkingv1.NetworkPolicyEgressRule{{
			To: []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "kube-system"}},
				PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
			}},
			Ports: append(ports(corev1.ProtocolUDP, 53), ports(corev1.ProtocolTCP, 53)...),
		}},
		PolicyTypes: egress,
	}, "egress to kube-system/kube-dns on UDP and TCP 53")

	if len(b.s.PodIdentityAgentCIDRs) > 0 {
		var to []networkingv1.NetworkPolicyPeer
		for _, cidr := range b.s.PodIdentityAgentCIDRs {
			to = append(to, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr}})
		}
		b.networkPolicy(NamePolicyPodIdentity, networkingv1.NetworkPolicySpec{
			PodSelector: all,
			Egress:      []networkingv1.NetworkPolicyEgressRule{{To: to, Ports: ports(corev1.ProtocolTCP, PodIdentityAgentPort)}},
			PolicyTypes: egress,
		}, fmt.Sprintf("egress to the EKS Pod Identity agent %s on TCP %d", strings.Join(b.s.PodIdentityAgentCIDRs, ", "), PodIdentityAgentPort))
	}

	operator := networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: TrainingOperatorNamespace}},
		PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: TrainingOperatorLabel, Operator: metav1.LabelSelectorOpExists},
		}},
	}
	b.networkPolicy(NamePolicyTrainingOperator, networkingv1.NetworkPolicySpec{
		PodSelector: all,
		Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{operator}}},
		Egress:      []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{operator}}},
		PolicyTypes: both,
	}, fmt.Sprintf("ingress from and egress to HyperPod's training operator (pods labelled %s in %s), which manages HyperPodPyTorchJobs through the elastic agent in each pod; default deny would cut it off",
		TrainingOperatorLabel, TrainingOperatorNamespace))

	if len(b.s.ObservabilityNamespaces) > 0 {
		var from []networkingv1.NetworkPolicyPeer
		for _, ns := range b.s.ObservabilityNamespaces {
			from = append(from, networkingv1.NetworkPolicyPeer{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			})
		}
		b.networkPolicy(NamePolicyObservability, networkingv1.NetworkPolicySpec{
			PodSelector: all,
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: from}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		}, fmt.Sprintf("ingress from the metrics collectors in %s (HyperPod observability, CloudWatch Container Insights); collectors in other namespaces are blocked by the default deny",
			strings.Join(b.s.ObservabilityNamespaces, ", ")))
	}

	for _, e := range b.c.EgressAllowances {
		if !strings.Contains(e.Destination, "/") {
			b.warn("egress to %s on TCP %s is NOT allowed by this plan: a NetworkPolicy cannot name a DNS destination, "+
				"so it needs an egress proxy or an FQDN policy (e.g. Cilium toFQDNs); until one exists the namespace's default deny blocks it",
				e.Destination, joinInts(e.Ports))
			continue
		}
		name := NamePolicyEgressPrefix + strings.NewReplacer(".", "-", ":", "-", "/", "-").Replace(e.Destination)
		b.networkPolicy(name, networkingv1.NetworkPolicySpec{
			PodSelector: all,
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: e.Destination}}},
				Ports: ports(corev1.ProtocolTCP, e.Ports...),
			}},
			PolicyTypes: egress,
		}, fmt.Sprintf("egress to %s on TCP %s", e.Destination, joinInts(e.Ports)))
	}
}

func kueueTypeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: kueue.GroupVersion.String(), Kind: kind}
}

// priorityClasses are the cluster's, not the team's: shared objects. They
// carry the names HyperPod task governance would give them
// (KueuePriorityClass), so that jobs label them the same in both modes.
func (b *builder) priorityClasses() {
	for _, pc := range b.s.PriorityClasses {
		b.add(&kueue.WorkloadPriorityClass{
			TypeMeta:   kueueTypeMeta("WorkloadPriorityClass"),
			ObjectMeta: metav1.ObjectMeta{Name: b.s.KueuePriorityClass(pc.Name)},
			Value:      pc.Value,
		}, true, fmt.Sprintf("priority class %s, value %d (shared by all teams)", pc.Name, pc.Value))
	}
}

// resourceFlavors: one per guaranteed instance type, named after it and
// selecting its nodes by the instance-type label HyperPod nodes carry.
func (b *builder) resourceFlavors(g guaranteed) {
	for _, row := range g.rows {
		b.add(&kueue.ResourceFlavor{
			TypeMeta:   kueueTypeMeta("ResourceFlavor"),
			ObjectMeta: metav1.ObjectMeta{Name: row.instanceType},
			Spec: kueue.ResourceFlavorSpec{
				NodeLabels: map[string]string{corev1.LabelInstanceTypeStable: row.instanceType},
			},
		}, true, fmt.Sprintf("nodes labelled %s=%s (shared by all teams)", corev1.LabelInstanceTypeStable, row.instanceType))
	}
}

// clusterQueue maps the contract's scheduling onto Kueue, as this
// connection's share of its team's ClusterQueue (teamqueue.go, which
// sums the team's shares when a job applies it):
//   - nominal quota per instance type (flavor) and resource: the guarantee;
//   - borrowingLimit: the borrow percentage of the nominal quota when the
//     team borrows, else 0; lendingLimit: unset (all of it) when the team
//     lends, else 0. Both need a cohort; without one they are left out;
//   - preemption: withinClusterQueue LowerPriority or Never, from the
//     contract; reclaimWithinCohort Any when the team lends, so that what it
//     lent comes back when it needs its guarantee (a guarantee that cannot
//     be reclaimed is not one); borrowWithinCohort is left at Never;
//   - fair-sharing weight: the contract's (used when Kueue runs fair
//     sharing);
//   - namespaceSelector: the team's namespaces (TeamNamespaceSelector).
func (b *builder) clusterQueue(name string) {
	sch := b.c.Scheduling
	if b.s.Cohort == "" && sch.Sharing != workflow.SharingNeither {
		b.warn("the cluster settings name no Kueue cohort, so the sharing strategy %q cannot take effect: the team neither lends nor borrows", sch.Sharing)
	}
	sum, err := sumShares([]QueueShare{b.plan.Share}, b.s.Accelerators)
	if err != nil {
		b.err = errors.Join(b.err, err)
		return
	}
	b.teamQueue(name, sum)
}

// LocalQueueName is the team's LocalQueue in namespace ns: the name
// HyperPod task governance gives it (hyperpod-ns-<team>-localqueue, see
// Owner), which the portal uses too when it manages the queues.
func LocalQueueName(ns string) string { return ns + "-localqueue" }

// localQueue is where the team's jobs queue (label kueue.x-k8s.io/queue-name).
// When HyperPod task governance manages the ClusterQueue, it also creates
// and owns this LocalQueue: the plan only checks that it exists (see
// OwnerHyperPodChecked) and never applies it.
func (b *builder) localQueue(cq string) {
	lq := &kueue.LocalQueue{
		TypeMeta:   kueueTypeMeta("LocalQueue"),
		ObjectMeta: b.meta(LocalQueueName(b.plan.Namespace)),
		Spec:       kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(cq)},
	}
	if b.s.ClusterQueueManagedByPortal {
		b.add(lq, false, fmt.Sprintf("queues to ClusterQueue %s (managed by the portal)", cq))
		return
	}
	u, err := toUnstructured(lq)
	if err != nil {
		b.err = errors.Join(b.err, err)
		return
	}
	b.plan.Objects = append(b.plan.Objects, Object{
		Kind: "LocalQueue", Namespace: lq.Namespace, Name: lq.Name, Owner: OwnerHyperPodChecked, Obj: u,
		Detail: fmt.Sprintf("created and owned by HyperPod task governance, queueing to ClusterQueue %s: the portal checks that it exists and never writes it", cq),
	})
}

// serviceAccount is the identity of the team's workloads. It mounts no
// Kubernetes API token by default: training jobs do not call the API
// server, and Pod Identity brings its own projected token.
// ServiceAccountName is the team's workload ServiceAccount, which EKS Pod
// Identity associates with the contract's workload role.
func ServiceAccountName(team string) string { return team + "-workloads" }

func (b *builder) serviceAccount() {
	no := false
	b.add(&corev1.ServiceAccount{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        ServiceAccountName(b.c.Team),
			Namespace:   b.plan.Namespace,
			Annotations: map[string]string{AnnotationPodIdentityRole: b.c.WorkloadRoleARN},
		},
		AutomountServiceAccountToken: &no,
	}, false, "for workloads; EKS Pod Identity role "+b.c.WorkloadRoleARN+" (associated on the AWS side)")
}

var (
	readVerbs   = []string{"get", "list", "watch"}
	submitVerbs = []string{"create", "delete", "patch"}
	// execVerbs: kubectl exec POSTs (create) over SPDY and GETs over
	// WebSockets, which API servers authorize as get on pods/exec unless
	// their AuthorizePodWebsocketUpgradeCreatePermission gate asks for
	// create; both verbs grant the same thing, exec into the team's pods.
	execVerbs = []string{"create", "get"}
)

// HyperPod's own job type, HyperPodPyTorchJob: group sagemaker.amazonaws.com,
// resource hyperpodpytorchjobs (github:aws/sagemaker-hyperpod-cli,
// src/sagemaker/hyperpod/training/hyperpod_pytorch_job.py: TRAINING_GROUP,
// PLURAL; and constants/pytorch_constants.py: HYPERPOD_PYTORCH_CRD_NAME
// "hyperpodpytorchjobs.sagemaker.amazonaws.com").
const (
	HyperPodJobGroup    = "sagemaker.amazonaws.com"
	HyperPodJobResource = "hyperpodpytorchjobs"
)

// roles: a viewer Role to see the team's work (Studio's task view needs
// exactly this) and a submitter Role to start and stop it. Submitters get
// the kinds of the contract's approved workload types only (submitRules:
// Jobs, PyTorchJobs and HyperPodPyTorchJobs for training and fine-tuning,
// HyperPod's inference and space kinds for the others), and exec into the team's pods
// (the HyperPod CLI's `hyp exec` uses connect_get_namespaced_pod_exec), but
// not Pods: a bare Pod would bypass the Kueue queue and its quota
// accounting, and the job controllers create the pods under their own
// identity. Pod logs are read access (viewers and submitters, who are
// bound to the viewer Role too): they are the team's own output, and the
// CLI's `hyp get-logs` reads them (read_namespaced_pod_log).
func (b *builder) roles() {
	view := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "pods/log", "events"}, Verbs: readVerbs},
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: readVerbs},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: readVerbs},
		{APIGroups: []string{"kubeflow.org"}, Resources: []string{"pytorchjobs"}, Verbs: readVerbs},
		{APIGroups: []string{HyperPodJobGroup}, Resources: []string{HyperPodJobResource}, Verbs: readVerbs},
		{APIGroups: []string{kueue.GroupVersion.Group}, Resources: []string{"workloads", "localqueues"}, Verbs: readVerbs},
	}
	view = append(view, b.approvedReads()...)
	submit, submitDetail := b.submitRules()
	submit = append(submit, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: execVerbs})
	for _, r := range []struct {
		name   string
		rules  []rbacv1.PolicyRule
		detail string
	}{
		{NameViewerRole, view, "get, list, watch on pods, pods/log, events, jobs, pytorchjobs, hyperpodpytorchjobs, kueue workloads and localqueues" + b.approvedReadsText()},
		{NameSubmitterRole, submit, submitDetail + "; exec into pods (no bare pods: they would bypass the queue)"},
	} {
		b.add(&rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: b.meta(r.name),
			Rules:      r.rules,
		}, false, r.detail)
	}
}

// roleBindings: viewers, submitters (who also need to see what they
// submitted) and the Studio execution role see; submitters submit.
func (b *builder) roleBindings() {
	k := b.s.KubernetesGroups
	viewer := team(k.ViewerGroupFormat, b.c.Team)
	submitter := team(k.SubmitterGroupFormat, b.c.Team)
	studio := team(b.s.StudioExecutionRoleGroupFormat, b.c.Team)
	for _, rb := range []struct {
		name, role string
		groups     []string
	}{
		{NameViewerBinding, NameViewerRole, []string{viewer, submitter, studio}},
		{NameSubmitterBinding, NameSubmitterRole, []string{submitter}},
	} {
		var subjects []rbacv1.Subject
		for _, g := range rb.groups {
			subjects = append(subjects, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: g})
		}
		b.add(&rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: b.meta(rb.name),
			Subjects:   subjects,
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: rb.role},
		}, false, fmt.Sprintf("Role %s to groups %s", rb.role, strings.Join(rb.groups, ", ")))
	}
}

// QueueReaderName names the ClusterRole and ClusterRoleBinding that let the
// team's access role read its own queue's cluster-scoped half. It is named
// after the team namespace, which one live connection holds at a time on a
// cluster, so two connections never share (or revoke) one.
func QueueReaderName(namespace string) string {
	return "hyperpod-portal-" + namespace + "-queue-reader"
}

// queueReader lets the team's submitters (the access role's group) read
// what the HyperPod CLI reads to show their queue: `hyp list-cluster
// --namespace` lists the HyperPod nodes (list nodes, label selector
// sagemaker.amazonaws.com/cluster-name), reads the namespace's labels
// (read_namespace) and then gets the ClusterQueue named after them
// (get_cluster_custom_object clusterqueues) (github:aws/sagemaker-hyperpod-cli,
// src/sagemaker/hyperpod/cli/commands/cluster.py rate_limited_operation,
// cli/clients/kubernetes_client.py get_sagemaker_managed_namespace,
// get_cluster_queue, list_node_with_temp_config). The namespace and the
// ClusterQueue are named (resourceNames): the team reads its own, never
// another team's. Nodes are listed, which resourceNames cannot narrow:
// the node list is the cluster's inventory, which
// AmazonSagemakerHyperpodUserClusterPolicy grants Studio users anyway.
// Revocation deletes both objects first (revocationOrder).
func (b *builder) queueReader(cq string) {
	name := QueueReaderName(b.plan.Namespace)
	b.add(&rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, ResourceNames: []string{b.plan.Namespace}, Verbs: []string{"get"}},
			{APIGroups: []string{kueue.GroupVersion.Group}, Resources: []string{"clusterqueues"}, ResourceNames: []string{cq}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list"}},
		},
	}, false, fmt.Sprintf("get namespace %s and ClusterQueue %s, list nodes: what the HyperPod CLI reads to show the team's queue (hyp list-cluster)", b.plan.Namespace, cq))
	submitter := team(b.s.KubernetesGroups.SubmitterGroupFormat, b.c.Team)
	b.add(&rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: submitter}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
	}, false, fmt.Sprintf("ClusterRole %s to group %s", name, submitter))
}

// BarePodPolicies are the EKS access policies that allow creating bare
// pods, which bypass the Kueue queue and its quota accounting (only the
// namespace's ResourceQuota still caps them). "Full access (get, list,
// watch, create, update, patch, delete) ... to Kubernetes jobs and pods"
// (Training) and "... and to pods" (Inference); the Space policy only
// reads pods (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-studio-setup-eks.html,
// "Restrict with a cluster-access policy").
var BarePodPolicies = []string{awsprov.PolicyHyperPodTraining, awsprov.PolicyHyperPodInference}

// warnBarePodPolicies says, for each of the team's roles, which of the
// EKS access policies the plan associates with it let it create bare
// pods: the portal's own RBAC never does, but an access policy does,
// whatever the Roles say.
func (b *builder) warnBarePodPolicies() {
	a := b.s.AWS.WithDefaults()
	if !a.Enabled {
		return
	}
	submitterGrants, _ := b.submitterGrants()
	type role struct {
		who      string
		policies []awsprov.AccessGrant
	}
	roles := []role{
		{"the Studio execution role (project role)", a.Access.StudioPolicies},
		{"the team's access role", submitterGrants},
	}
	if a.Access.ViewerRoleARNFormat != "" {
		roles = append(roles, role{"the team's read-only role", a.Access.ViewerPolicies})
	}
	for _, r := range roles {
		var bare []string
		for _, p := range r.policies {
			if !slices.Contains(BarePodPolicies, p.Policy) {
				continue
			}
			where := "in " + strings.Join(p.Namespaces, ", ")
			if p.Scope == awsprov.AccessScopeCluster {
				where = "on the whole cluster"
			}
			where = strings.ReplaceAll(where, awsprov.TeamNamespace, b.plan.Namespace)
			bare = append(bare, p.Policy+" ("+where+")")
		}
		if len(bare) > 0 {
			b.warn("%s gets the EKS access %s %s, which %s it create bare pods: they bypass the Kueue queue and its fair sharing, and only the namespace's ResourceQuota still caps them",
				r.who, plural(len(bare), "policy", "policies"), strings.Join(bare, " and "), plural(len(bare), "lets", "let"))
		}
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// checkPriorityClasses warns about classes the contract names that the
// cluster does not define: jobs labelled with them would not be admitted.
func (b *builder) checkPriorityClasses() {
	for _, want := range b.c.Scheduling.PriorityClasses {
		if !slices.ContainsFunc(b.s.PriorityClasses, func(pc PriorityClass) bool { return pc.Name == want }) {
			b.warn("priority class %s is not one of the cluster's priority classes: jobs labelled kueue.x-k8s.io/priority-class: %s will not be admitted until it exists", want, b.s.KueuePriorityClass(want))
		}
	}
}

// submitRules are the submitter Role's rules for the kinds of the
// contract's approved workload types (kinds.go): create, delete and patch
// on each (kubectl apply patches, `hyp delete` deletes), create only on an
// extension kind (the only verb it serves); a kind no approved type runs
// gets nothing, so a member cannot create it (and rule 3 of the admission
// policy refuses it to anyone else). The detail says so on the plan page.
func (b *builder) submitRules() ([]rbacv1.PolicyRule, string) {
	var rules []rbacv1.PolicyRule
	var granted, created []string
	for _, k := range ApprovedKinds(b.c.WorkloadTypes) {
		verbs := submitVerbs
		if k.Extension {
			verbs = []string{"create"}
			created = append(created, k.Resource)
		} else {
			granted = append(granted, k.Resource)
		}
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{k.Group}, Resources: []string{k.Resource}, Verbs: verbs})
	}
	detail := "create, delete, patch on " + kindNames(granted)
	if len(created) > 0 {
		detail += "; create " + strings.Join(created, ", ")
	}
	detail += fmt.Sprintf(" only: the kinds of the contract's approved workload types (%s); no other kind", approvedTypesText(b.c.WorkloadTypes))
	return rules, detail
}

// approvedReads let the team see the approved kinds beyond the job kinds
// every team reads (kubectl apply reads before it creates or patches).
func (b *builder) approvedReads() []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	for _, k := range b.extraReadKinds() {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{k.Group}, Resources: []string{k.Resource}, Verbs: readVerbs})
	}
	return rules
}

func (b *builder) approvedReadsText() string {
	var names []string
	for _, k := range b.extraReadKinds() {
		names = append(names, k.Resource)
	}
	if len(names) == 0 {
		return ""
	}
	return "; " + strings.Join(names, ", ") + " (approved workload types)"
}

// extraReadKinds are the approved kinds, other than the job kinds and
// extensions (which serve create only), that the viewer Role reads.
func (b *builder) extraReadKinds() []WorkloadKind {
	var out []WorkloadKind
	for _, k := range ApprovedKinds(b.c.WorkloadTypes) {
		if !k.Extension && !slices.Contains(jobKinds, k) {
			out = append(out, k)
		}
	}
	return out
}

func kindNames(s []string) string {
	if len(s) == 0 {
		return "no kind"
	}
	return strings.Join(s, ", ")
}

// submitterGrants are the EKS access policies of the team's access role:
// the settings' (default training, inference and space), less the HyperPod
// policies of the workload types the contract does not approve
// (TypeAccessPolicies: AmazonSagemakerHyperpodTrainingPolicy for training
// and fine-tuning, ...InferencePolicy for inference, ...SpacePolicy for
// interactive spaces; kinds.go), which dropped names. A policy that stands
// for no type (say AmazonEKSViewPolicy) is kept. Never nil, so that the
// AWS settings' defaults do not fill an emptied list again.
func (b *builder) submitterGrants() (kept []awsprov.AccessGrant, dropped []string) {
	approved := TypeAccessPolicies(b.c.WorkloadTypes)
	kept = []awsprov.AccessGrant{}
	for _, g := range b.s.AWS.WithDefaults().Access.SubmitterPolicies {
		if slices.Contains(typePolicies(), g.Policy) && !slices.Contains(approved, g.Policy) {
			dropped = append(dropped, g.Policy)
			continue
		}
		kept = append(kept, g)
	}
	return kept, dropped
}

// submitterNote says on the plan page why the access role gets what it
// gets: the policies of the approved types only, and which were left out.
func (b *builder) submitterNote() string {
	_, dropped := b.submitterGrants()
	note := fmt.Sprintf(": the HyperPod access policies of the contract's approved workload types (%s) only", approvedTypesText(b.c.WorkloadTypes))
	if len(dropped) > 0 {
		note += ", not " + strings.Join(dropped, ", ") + " (no approved type needs it)"
	}
	return note
}
