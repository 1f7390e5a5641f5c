package awsprov

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Kind is the kind of AWS resource a Call ensures.
type Kind string

// The kinds, in the order a plan ensures them.
const (
	KindComputeQuota Kind = "compute-quota"       // SageMaker (HyperPod task governance)
	KindDomain       Kind = "studio-domain"       // SageMaker
	KindAssignment   Kind = "studio-assignment"   // ssoadmin (+ identitystore for the group id)
	KindDataZone     Kind = "datazone-connection" // DataZone (Unified Studio)
	KindAccessEntry  Kind = "access-entry"        // EKS
	KindPodIdentity  Kind = "pod-identity"        // EKS
)

// Phase says where a call goes among the Kubernetes objects.
type Phase int

const (
	// Guardrail calls come before the Kubernetes objects: the compute quota
	// (HyperPod creates the team's ClusterQueue from it, which the
	// LocalQueue points at).
	Guardrail Phase = iota
	// Access calls come after the Kubernetes guardrails and RBAC: nothing
	// reaches the namespace before its limits exist.
	Access
)

// Field is one key field of a call, shown on the plan before approval.
type Field struct{ Name, Value string }

// Call is one AWS step of a plan: the resource it ensures, the operations it
// may make, the key fields an approver sees, and the desired state (one of
// the typed fields, by Kind). Calls are built by PlanFor, pure; Runner
// makes them.
type Call struct {
	Kind    Kind
	Phase   Phase
	Name    string // the resource: a quota name, a role ARN, a domain name
	Service string // for people: "SageMaker", "EKS", ...
	// Operations it may call, in order ("ListComputeQuotas,
	// CreateComputeQuota or UpdateComputeQuota, DescribeComputeQuota").
	Operations string
	Fields     []Field

	Quota       *sagemaker.CreateComputeQuotaInput
	Domain      *DomainSpec
	Assignment  *Assignment
	DataZone    *HyperPodConnection
	AccessEntry *AccessEntry
	PodIdentity *PodIdentity

	// StudioRole, on the Studio execution role's access entry, asks the
	// plan preview to check that the role holds the IAM actions Studio
	// needs (CheckStudioRole). It is a read-only check, not part of the
	// call, so it is not in Canonical.
	StudioRole *StudioRole

	// KeepOnRevoke: revocation records the resource as kept instead of
	// deleting it (a team domain with on_revoke: keep).
	KeepOnRevoke bool
}

// Assignment is an Identity Center group given a team's Studio domain: the
// domain (found by name, or the shared one by id) gives the SSO
// application, the identity store gives the group's id.
type Assignment struct {
	Domain          *DomainSpec // the team's domain; nil with SharedDomainID
	SharedDomainID  string
	IdentityStoreID string
	Group           string // display name
}

// Title is the call for people: "SageMaker compute quota red-quota".
func (c Call) Title() string {
	return c.Service + " " + strings.ReplaceAll(string(c.Kind), "-", " ") + " " + c.Name
}

// Summary is one line: the title and the key fields.
func (c Call) Summary() string {
	parts := make([]string, len(c.Fields))
	for i, f := range c.Fields {
		parts[i] = f.Name + "=" + f.Value
	}
	return c.Title() + ": " + strings.Join(parts, ", ")
}

// Canonical is the call as text for the plan's hash: everything it would
// send that an approval pins.
func (c Call) Canonical() string {
	return fmt.Sprintf("%s|%d|%s|%s|keep=%t", c.Kind, c.Phase, c.Summary(), c.Operations, c.KeepOnRevoke)
}

// Target is what the Kubernetes half of the plan decided that the AWS half
// needs: the team namespace, the workload ServiceAccount and the Kubernetes
// groups of the team's roles.
type Target struct {
	ConnectionID   int64
	Namespace      string
	ServiceAccount string
	StudioGroup    string // the Studio execution role's group (task visibility)
	SubmitterGroup string
	ViewerGroup    string
	// SubmitterNote, when set, says on the plan page why the access role
	// gets the policies it gets (the approved workload types' only).
	SubmitterNote string
}

// PlanFor is the AWS half of a contract's plan: the calls that ensure the
// team's compute quota, Studio domain and group assignments (or Unified
// Studio connection), EKS access entries scoped to the team namespace and
// Pod Identity association, in order, and warnings for what it cannot
// deliver. It is pure; errors are contracts or settings the calls would be
// refused with, found before any call.
func PlanFor(c workflow.Contract, t Target, s Settings) ([]Call, []string, error) {
	if !s.Enabled {
		return nil, nil, nil
	}
	s = s.WithDefaults()
	var warnings []string
	switch {
	case s.Region != "" && c.Region != s.Region:
		return nil, nil, fmt.Errorf("aws: the contract's region %s is not the cluster's (%s)", c.Region, s.Region)
	case s.AccountID != "" && c.AccountID != s.AccountID:
		return nil, nil, fmt.Errorf("aws: the contract's account %s is not the cluster's (%s)", c.AccountID, s.AccountID)
	case s.ClusterARN != "" && c.ClusterARN != s.ClusterARN:
		return nil, nil, fmt.Errorf("aws: the contract's cluster %s is not the portal's cluster (%s)", c.ClusterARN, s.ClusterARN)
	case c.EKSClusterName == "":
		return nil, nil, fmt.Errorf("aws: the contract names no EKS cluster: access entries and Pod Identity need it")
	}
	tags := map[string]string{TagTeam: c.Team, TagConnection: strconv.FormatInt(t.ConnectionID, 10)}
	var calls []Call

	if s.ComputeQuota {
		q, err := ComputeQuotaFor(c, "", t.ConnectionID)
		if err != nil {
			return nil, nil, fmt.Errorf("aws: %w", err)
		}
		calls = append(calls, quotaCall(&q))
	}

	switch c.StudioMode {
	case workflow.StudioUnified:
		calls = append(calls, dataZoneCall(c, s))
	default:
		dc, err := domainCalls(c, s, tags)
		if err != nil {
			return nil, nil, err
		}
		calls = append(calls, dc...)
		if len(s.TeamGroups[c.Team]) == 0 {
			warnings = append(warnings, fmt.Sprintf("no Identity Center group is mapped to team %s in the groups file: nobody is assigned to its Studio domain", c.Team))
		}
		if s.Studio.SharedDomainID != "" {
			warnings = append(warnings, fmt.Sprintf("Studio is the shared domain %s: its execution role, not the team's project role, is what Studio shows tasks with, so task visibility is only as narrow as that role's access", s.Studio.SharedDomainID))
		}
	}

	if err := checkTeamRoles(c, s.TeamRolePrefix); err != nil {
		return nil, nil, err
	}
	type role struct {
		arn, group, why string
		grants          []AccessGrant
	}
	roles := []role{
		{c.ProjectRoleARN, t.StudioGroup, "Studio execution role: sees and runs tasks in " + t.Namespace + " only", s.Access.StudioPolicies},
		{c.AccessRoleARN, t.SubmitterGroup, "the team's access role" + t.SubmitterNote, s.Access.SubmitterPolicies},
	}
	if f := s.Access.ViewerRoleARNFormat; f != "" {
		roles = append(roles, role{fmt.Sprintf(f, c.Team), t.ViewerGroup, "the team's read-only role", s.Access.ViewerPolicies})
	}
	seen := map[string]bool{}
	for _, r := range roles {
		if r.arn == "" {
			continue
		}
		if seen[r.arn] {
			warnings = append(warnings, fmt.Sprintf("role %s is named twice; it gets one access entry, as %s", r.arn, r.why))
			continue
		}
		seen[r.arn] = true
		policies := make([]AccessPolicy, len(r.grants))
		scopes := make([]string, len(r.grants))
		for i, g := range r.grants {
			policies[i] = AccessPolicy{PolicyARN: AccessPolicyARN(c.Region, g.Policy)}
			for _, ns := range g.Namespaces {
				if ns == TeamNamespace {
					ns = t.Namespace
				}
				policies[i].Namespaces = append(policies[i].Namespaces, ns)
			}
			scopes[i] = g.Policy + " (" + scopeText(policies[i].Namespaces) + ")"
		}
		e := &AccessEntry{ClusterName: c.EKSClusterName, PrincipalARN: r.arn, KubernetesGroups: []string{r.group}, Policies: policies, Tags: tags}
		fields := []Field{{"cluster", c.EKSClusterName}, {"kubernetesGroups", r.group}, {"policies", strings.Join(scopes, ", ")}, {"for", r.why}}
		call := Call{
			Kind: KindAccessEntry, Phase: Access, Name: r.arn, Service: "EKS",
			Operations:  "DescribeAccessEntry, CreateAccessEntry or UpdateAccessEntry, ListAssociatedAccessPolicies, AssociateAccessPolicy, DisassociateAccessPolicy",
			AccessEntry: e,
		}
		if r.arn == c.ProjectRoleARN {
			// Task visibility: the plan says how it is achieved.
			fields = append(fields, Field{"taskVisibility", "Studio acts as this role: its namespaced access policies are scoped to " + t.Namespace +
				" and its group " + r.group + " is bound to the namespace's viewer Role only, so Studio lists and runs this team's tasks and no other team's;" +
				" a cluster-scoped policy (such as " + PolicyHyperPodUserCluster + ") shows cluster-wide objects (namespaces, nodes, queues), not other teams' tasks"})
			// Checked for a team domain, whose execution role this is; a
			// shared domain's role is not the contract's (the plan warns
			// above), and AWS's list of actions is for SageMaker Studio
			// domains, not Unified Studio projects.
			if c.StudioMode != workflow.StudioUnified && s.Studio.SharedDomainID == "" {
				call.StudioRole = &StudioRole{
					RoleARN:            r.arn,
					HyperPodClusterARN: c.ClusterARN,
					EKSClusterARN:      arn.ARN{Partition: Partition(c.Region), Service: "eks", Region: c.Region, AccountID: c.AccountID, Resource: "cluster/" + c.EKSClusterName}.String(),
				}
			}
		}
		call.Fields = fields
		calls = append(calls, call)
	}

	if *s.PodIdentity && c.WorkloadRoleARN != "" {
		calls = append(calls, Call{
			Kind: KindPodIdentity, Phase: Access, Name: t.Namespace + "/" + t.ServiceAccount, Service: "EKS",
			Operations:  "ListPodIdentityAssociations, CreatePodIdentityAssociation or UpdatePodIdentityAssociation",
			Fields:      []Field{{"cluster", c.EKSClusterName}, {"serviceAccount", t.Namespace + "/" + t.ServiceAccount}, {"roleArn", c.WorkloadRoleARN}},
			PodIdentity: &PodIdentity{ClusterName: c.EKSClusterName, Namespace: t.Namespace, ServiceAccount: t.ServiceAccount, RoleARN: c.WorkloadRoleARN, Tags: tags},
		})
	}
	return calls, warnings, nil
}

// scopeText is an access policy's scope for people: "cluster" or
// "namespace a, b".
func scopeText(namespaces []string) string {
	if len(namespaces) == 0 {
		return AccessScopeCluster
	}
	return AccessScopeNamespace + " " + strings.Join(namespaces, ", ")
}

// checkTeamRoles refuses contract roles outside prefix (Settings.
// TeamRolePrefix): the portal's own policy may pass only those.
func checkTeamRoles(c workflow.Contract, prefix string) error {
	if prefix == "" {
		return nil
	}
	for _, r := range []string{c.ProjectRoleARN, c.AccessRoleARN, c.WorkloadRoleARN} {
		if r == "" {
			continue
		}
		a, err := arn.Parse(r)
		if err != nil || a.Service != "iam" || !strings.HasPrefix(a.Resource, "role"+prefix) {
			return fmt.Errorf("aws: role %s is not a team role: the portal passes only roles under role%s (team_role_prefix)", r, prefix)
		}
	}
	return nil
}

func quotaCall(q *sagemaker.CreateComputeQuotaInput) Call {
	var res []string
	for _, r := range q.ComputeQuotaConfig.ComputeQuotaResources {
		res = append(res, fmt.Sprintf("%s×%d", r.InstanceType, aws.ToInt32(r.Count)))
	}
	sharing := string(q.ComputeQuotaConfig.ResourceSharingConfig.Strategy)
	if l := q.ComputeQuotaConfig.ResourceSharingConfig.BorrowLimit; l != nil {
		sharing += fmt.Sprintf(" (borrow up to %d%%)", *l)
	}
	return Call{
		Kind: KindComputeQuota, Phase: Guardrail, Name: aws.ToString(q.Name), Service: "SageMaker",
		Operations: "ListComputeQuotas, CreateComputeQuota or UpdateComputeQuota (TargetVersion), DescribeComputeQuota until created",
		Fields: []Field{
			{"cluster", aws.ToString(q.ClusterArn)},
			{"team", aws.ToString(q.ComputeQuotaTarget.TeamName)},
			{"resources", strings.Join(res, " ")},
			{"sharing", sharing},
			{"preemptTeamTasks", string(q.ComputeQuotaConfig.PreemptTeamTasks)},
			{"fairShareWeight", strconv.Itoa(int(aws.ToInt32(q.ComputeQuotaTarget.FairShareWeight)))},
		},
		Quota: q,
	}
}

func domainCalls(c workflow.Contract, s Settings, tags map[string]string) ([]Call, error) {
	st := s.Studio
	var calls []Call
	var spec *DomainSpec
	if st.SharedDomainID == "" {
		if c.ProjectRoleARN == "" {
			return nil, fmt.Errorf("aws: the contract has no project role: a team domain needs it as its execution role")
		}
		spec = &DomainSpec{
			Name: fmt.Sprintf(st.DomainNameFormat, c.Team), ExecutionRoleARN: c.ProjectRoleARN,
			VpcID: st.VpcID, SubnetIDs: slices.Clone(st.SubnetIDs), SecurityGroupIDs: slices.Clone(st.SecurityGroupIDs),
			AppNetworkAccessType: st.AppNetworkAccessType, KmsKeyID: st.KmsKeyID, Tags: tags,
		}
		calls = append(calls, Call{
			Kind: KindDomain, Phase: Access, Name: spec.Name, Service: "SageMaker",
			Operations: "ListDomains, CreateDomain or UpdateDomain, DescribeDomain until InService",
			Fields: []Field{{"authMode", "SSO"}, {"executionRole", spec.ExecutionRoleARN}, {"vpc", spec.VpcID},
				{"subnets", strings.Join(spec.SubnetIDs, " ")}, {"securityGroups", strings.Join(spec.SecurityGroupIDs, " ")},
				{"appNetworkAccess", spec.AppNetworkAccessType}, {"onRevoke", st.OnRevoke}},
			Domain:       spec,
			KeepOnRevoke: st.OnRevoke == DomainKeep,
		})
	}
	domain := st.SharedDomainID
	if spec != nil {
		domain = spec.Name
	}
	for _, g := range s.TeamGroups[c.Team] {
		calls = append(calls, Call{
			Kind: KindAssignment, Phase: Access, Name: g, Service: "IAM Identity Center",
			Operations: "DescribeDomain (SSO application), identitystore GetGroupId, DescribeApplicationAssignment, CreateApplicationAssignment",
			Fields:     []Field{{"domain", domain}, {"group", g}, {"principalType", "GROUP"}},
			Assignment: &Assignment{Domain: spec, SharedDomainID: st.SharedDomainID, IdentityStoreID: s.IdentityStoreID, Group: g},
		})
	}
	return calls, nil
}

func dataZoneCall(c workflow.Contract, s Settings) Call {
	name := fmt.Sprintf(s.Studio.UnifiedConnectionNameFormat, c.ClusterName)
	return Call{
		Kind: KindDataZone, Phase: Access, Name: name, Service: "DataZone",
		Operations: "ListConnections, ListEnvironments, CreateConnection",
		Fields:     []Field{{"domain", c.UnifiedDomainID}, {"project", c.UnifiedProjectID}, {"hyperPodCluster", c.ClusterName}},
		DataZone: &HyperPodConnection{DomainID: c.UnifiedDomainID, ProjectID: c.UnifiedProjectID, Name: name, ClusterName: c.ClusterName,
			Description: "HyperPod cluster " + c.ClusterName + " for team " + c.Team + " (portal)"},
	}
}

// RevocationOrder splits a plan's calls into what revocation removes before
// the Kubernetes steps (access: Pod Identity, then access entries with
// their policies) and after them (the compute quota, then the Studio
// assignments or connection, then the domain), each in reverse plan order.
func RevocationOrder(calls []Call) (first, last []Call) {
	rank := map[Kind]int{KindPodIdentity: 0, KindAccessEntry: 1, KindComputeQuota: 2, KindDataZone: 3, KindAssignment: 3, KindDomain: 4}
	rev := slices.Clone(calls)
	slices.Reverse(rev)
	slices.SortStableFunc(rev, func(a, b Call) int { return rank[a.Kind] - rank[b.Kind] })
	for _, c := range rev {
		if rank[c.Kind] <= 1 {
			first = append(first, c)
		} else {
			last = append(last, c)
		}
	}
	return first, last
}

// Grant is one access policy of an access entry for the plan page: the
// policy, its scope, and what it lets the role see and do.
type Grant struct{ Policy, Scope, Allows string }

// Grants are c's access policies (none unless c is an access entry).
func (c Call) Grants() []Grant {
	if c.AccessEntry == nil {
		return nil
	}
	out := make([]Grant, len(c.AccessEntry.Policies))
	for i, p := range c.AccessEntry.Policies {
		name := p.PolicyARN[strings.LastIndex(p.PolicyARN, "/")+1:]
		allows, ok := policyAllows[name]
		if !ok {
			allows = "see AWS's description of this access policy (https://docs.aws.amazon.com/eks/latest/userguide/access-policies.html)"
		}
		if len(p.Namespaces) > 0 {
			allows += ", in " + strings.Join(p.Namespaces, ", ") + " only"
		} else {
			allows += ", across the whole cluster"
		}
		out[i] = Grant{Policy: name, Scope: scopeText(p.Namespaces), Allows: allows}
	}
	return out
}

// policyAllows is what each HyperPod access policy lets a role see and do,
// in short, from the table "What it allows" of AWS's Studio setup
// ("Restrict task view in Studio for EKS clusters",
// https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-studio-setup-eks.html).
// "Full access" there means get, list, watch, create, update, patch and
// delete.
var policyAllows = map[string]string{
	PolicyHyperPodTraining: "submit and manage training: full access to HyperPodPyTorchJob, Kubeflow PyTorchJob/MPIJob/TFJob, Ray clusters and jobs, " +
		"and to Kubernetes Jobs and bare pods (pods bypass the Kueue queue); read pod logs, config maps, events, services, quotas, " +
		"limit ranges, deployments and Kueue LocalQueues and Workloads",
	PolicyHyperPodInference: "deploy and manage inference: full access to RayCluster, RayService, JumpStartModel, InferenceEndpointConfig, " +
		"SageMakerEndpointRegistration and pods; read pod logs, config maps, events, services, quotas, deployments, autoscalers, " +
		"ingresses and Kueue LocalQueues and Workloads",
	PolicyHyperPodSpace: "use Studio spaces: full access to Workspaces, read workspace templates and access strategies, read pods, " +
		"services, volume claims, events and quotas; open a space (WorkspaceConnection)",
	PolicyHyperPodSpaceTemplate: "read the shared space templates",
	PolicyHyperPodUserCluster: "what the Studio UI needs to render: read namespaces and nodes, get CRDs, read Kueue ClusterQueues, " +
		"ResourceFlavors and WorkloadPriorityClasses, check its own access; no team's workloads",
}
