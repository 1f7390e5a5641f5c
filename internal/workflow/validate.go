package workflow

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// ValidationEnv is what Validate needs from outside the contract. The caller
// (a handler, the import command) fills it from configuration and the store.
type ValidationEnv struct {
	// Now is the current time; end dates must fall after its date.
	Now time.Time
	// InstanceTypes are the ml.* types a contract may name on the cluster
	// (the deployment's list, from the SDK's ClusterInstanceType enum and
	// the cluster settings: workflow imports no AWS package, so it comes in
	// as data). Nil skips the check: pass it wherever a contract is saved
	// or approved.
	InstanceTypes []string
	// OwnerExists reports whether an email (lower-case) is a portal user or
	// group. Nil skips the check: pass one wherever a contract is saved.
	OwnerExists func(email string) bool
	// NamespaceTaken reports whether a namespace is held by another
	// connection, one whose State is Committed. Nil skips the check: pass
	// one wherever a contract is saved and when it is approved.
	NamespaceTaken func(ns string) bool
	// RoleTaken reports whether an IAM role is named by another live
	// connection (as its project, access or workload role). A team's roles
	// are its own: its EKS access entries and Pod Identity association
	// belong to one connection. Nil skips the check.
	RoleTaken func(arn string) bool
	// SlurmTaken reports whether a Slurm account or QoS (what: "account" or
	// "qos") on HyperPod cluster cluster is named by another connection
	// that holds claims: the portal creates, changes and, at revocation,
	// deletes a Slurm connection's account and QoS, so two connections
	// naming one would change and delete each other's. Nil skips the check.
	SlurmTaken func(cluster, what, name string) bool
	// TeamNamespaceOnly: the cluster runs HyperPod task governance, which
	// creates and owns each team's namespace (hyperpod-ns-<team>) from its
	// compute quota, so an EKS contract may name that namespace only. The
	// caller sets it from the cluster settings (the portal does not manage
	// the ClusterQueues).
	TeamNamespaceOnly bool
	// TeamRolePrefix, when set, is where the team roles live: a role's
	// path and name (the ARN after ":role") must start with it, such as
	// "/hyperpod-teams/". The portal's own IAM policy may pass only those
	// roles (the AWS settings' team_role_prefix).
	TeamRolePrefix string
	// ReservedNamespaces are more namespaces no contract may name, on top
	// of the built-in ones (ReservedNamespace): the cluster settings'
	// reserved_namespaces. An entry ending in '*' is a prefix.
	ReservedNamespaces []string
	// Unavailable, when set, reports why a lookup above could not be
	// answered (a database outage). The lookups then answer "exists" or
	// "taken", so nothing passes on an outage; the caller checks Unavailable
	// after Validate and reports a system failure (503) instead of the field
	// errors, which would blame the user's input for it.
	Unavailable func() error
}

// FieldError is a problem with one field of a contract, in words the person
// filling in the form can act on.
type FieldError struct {
	// Field is the JSON path of the field: "cluster_arn",
	// "scheduling.guaranteed[0].count", "namespaces[1]".
	Field   string
	Message string
}

// FieldErrors are the problems of a contract, at most one per field, in form
// order. They are user input errors, never system failures: a handler
// re-renders the form with them, and never logs them as errors.
type FieldErrors []FieldError

// Error lists every problem, for logs and the import command.
func (e FieldErrors) Error() string {
	parts := make([]string, len(e))
	for i, fe := range e {
		parts[i] = fe.Field + ": " + fe.Message
	}
	noun := "problems"
	if len(e) == 1 {
		noun = "problem"
	}
	return fmt.Sprintf("contract has %d %s: %s", len(e), noun, strings.Join(parts, "; "))
}

// Err returns e as an error, or nil when there are no problems. (A nil
// FieldErrors stored in an error interface would not be nil.)
func (e FieldErrors) Err() error {
	if len(e) == 0 {
		return nil
	}
	return e
}

// Get returns the message for field, or "".
func (e FieldErrors) Get(field string) string {
	for _, fe := range e {
		if fe.Field == field {
			return fe.Message
		}
	}
	return ""
}

// Add records a problem with field unless it already has one: the first
// problem found is the most basic one, and a form shows one per field.
// Handlers use it for input they cannot even parse (a count that is not a
// number) so that those messages sit beside their fields too.
func (e *FieldErrors) Add(field, message string) {
	if e.Get(field) == "" {
		*e = append(*e, FieldError{Field: field, Message: message})
	}
}

// Limits of the contract's values. HyperPod's own limits are cited where
// they are the reason.
const (
	MinPurposeLen      = 20
	MaxTextLen         = 2000 // free text: purpose, criteria
	MaxLineLen         = 200  // one-line text: signal names
	MaxTeamLen         = 40   // HyperPod task governance team names
	MaxInstanceCount   = 10000
	MinBorrowLimit     = 1 // HyperPod ResourceSharingConfig.BorrowLimit
	MaxBorrowLimit     = 500
	MaxFairShareWeight = 100 // HyperPod ComputeQuotaTarget.FairShareWeight
	MinReviewCadence   = 7
	MaxReviewCadence   = 365

	// MaxPriorityClassLen caps a priority class name. The class is a
	// SageMaker ClusterSchedulerConfig PriorityClass, whose Name follows
	// ^[a-z0-9]([-a-z0-9]*[a-z0-9]){0,39}?$ (a DNS label of at most 40
	// characters: AWS::SageMaker::ClusterSchedulerConfig PriorityClass,
	// https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-sagemaker-clusterschedulerconfig-priorityclass.html).
	// Task governance names its Kueue WorkloadPriorityClass name+"-priority"
	// (PriorityClassSuffix), which jobs carry as the label value
	// kueue.x-k8s.io/priority-class; a label value is at most 63
	// characters, so 40 + 9 fits.
	MaxPriorityClassLen = 40
	// PriorityClassSuffix is what HyperPod task governance appends to a
	// scheduler-config class to name its Kueue WorkloadPriorityClass: the
	// class "training" is the Kueue class "training-priority"
	// (github:aws/sagemaker-hyperpod-cli,
	// examples/end_to_end_walkthrough/03-task-governance/00-task-governance.md:
	// JOB_PRIO=training-priority for the cluster policy's class training).
	PriorityClassSuffix = "-priority"
)

// reservedNamespaces belong to the cluster's own components; a contract
// never names one, because approving it would force a default-deny
// NetworkPolicy, a quota and RoleBindings onto that component (issue 10
// item 14). Each is where its component installs itself:
//   - kueue-system: Kueue's controller ("The controller runs in the
//     kueue-system namespace", kubernetes-sigs/kueue README; Kueue
//     Configuration API: namespace defaults to kueue-system);
//   - cert-manager: cert-manager, a dependency of HyperPod's inference
//     operator (aws/sagemaker-hyperpod-cli: helm_chart/HyperPodHelmChart/
//     charts/inference-operator/values.yaml, cert-manager namespace);
//   - aws-hyperpod: HyperPod's health monitoring agent, deep health check
//     and job auto-restart (same chart: charts/*/values.yaml namespace
//     "aws-hyperpod"); covered by the aws- prefix;
//   - jupyter-k8s-shared: the shared templates and access strategies of
//     HyperPod spaces' workspace operator (jupyter-infra/jupyter-k8s,
//     SharedNamespace = "jupyter-k8s-shared"; its operator runs in
//     jupyter-k8s-system, router in jupyter-k8s-router);
//   - default, kubeflow and Kubernetes' own namespaces.
var reservedNamespaces = []string{
	"default", "kubeflow", "kube-system", "kube-public", "kube-node-lease",
	"kueue-system", "cert-manager", "aws-hyperpod",
	"jupyter-k8s-shared", "jupyter-k8s-system", "jupyter-k8s-router",
}

// reservedPrefixes: every namespace starting with one belongs to
// Kubernetes (kube-) or to an AWS component (aws-, amazon-: e.g.
// amazon-cloudwatch, the CloudWatch observability add-on's).
var reservedPrefixes = []string{"kube-", "aws-", "amazon-"}

// ReservedNamespaceRules are the built-in reserved names and prefixes
// (copies), for the Helm chart's admission policy, which must refuse the
// same namespaces to the portal (deploy's test compares them).
func ReservedNamespaceRules() (names, prefixes []string) {
	return slices.Clone(reservedNamespaces), slices.Clone(reservedPrefixes)
}

// ReservedNamespace reports whether ns belongs to the cluster's own
// components: the built-in names and prefixes, which are always on, or an
// entry of extra (the settings' reserved_namespaces; an entry ending in
// '*' is a prefix). Validation refuses such a namespace, and so does the
// provisioning plan, so a contract approved before a name was reserved is
// not applied either.
func ReservedNamespace(ns string, extra []string) bool {
	if slices.Contains(reservedNamespaces, ns) {
		return true
	}
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(ns, p) {
			return true
		}
	}
	for _, e := range extra {
		if p, ok := strings.CutSuffix(e, "*"); ok {
			if p != "" && strings.HasPrefix(ns, p) {
				return true
			}
		} else if e == ns {
			return true
		}
	}
	return false
}

// taskGovernancePrefix is the namespace prefix HyperPod task governance uses
// for each team ("hyperpod-ns-<team>").
const taskGovernancePrefix = "hyperpod-ns-"

var (
	dnsLabelRe = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	emailLocal = regexp.MustCompile(`^[a-z0-9!#$%&'*+/=?^_{|}~-]+(\.[a-z0-9!#$%&'*+/=?^_{|}~-]+)*$`)
)

// Validate checks c against every rule of the contract and returns the
// problems found, nil when there are none. It checks the tidied values
// (trimmed, lower-cased where case does not matter) but keeps the order of
// every list, so that a path like "namespaces[1]" points at the row the user
// wrote. It reports duplicates that Normalize would silently drop, because
// the user wrote them and may have meant something else.
func (c Contract) Validate(env ValidationEnv) FieldErrors {
	v := &validator{c: c.tidy(), env: env, owners: map[string]bool{}, over: map[string]string{}}
	// A value over its cap (limits.go) gets that message in place of any
	// other rule's: the cap is why a draft holding it is not saved.
	overs := limitErrors(v.c)
	for _, fe := range overs {
		v.over[fe.Field] = fe.Message
	}
	v.c = capRows(v.c)
	v.purposeAndOwners()
	v.studio()
	v.cluster()
	v.identities()
	v.workloads()
	v.scope()
	v.scheduling()
	v.monitoring()
	v.egress()
	for _, fe := range overs {
		if v.errs.Get(fe.Field) == "" {
			v.errs.insertInFormOrder(fe)
		}
	}
	return v.errs
}

type validator struct {
	c      Contract
	env    ValidationEnv
	errs   FieldErrors
	owners map[string]bool   // OwnerExists answers, asked once per email
	over   map[string]string // LimitErrors by field
}

func (v *validator) add(field, format string, a ...any) {
	if msg, ok := v.over[field]; ok {
		v.errs.Add(field, msg)
		return
	}
	v.errs.Add(field, fmt.Sprintf(format, a...))
}

// teamValid: rules that compare with the team name wait until it is valid,
// so that one mistake gets one message.
func (v *validator) teamValid() bool {
	return dnsLabelRe.MatchString(v.c.Team) && len(v.c.Team) <= MaxTeamLen
}

func (v *validator) purposeAndOwners() {
	c := v.c
	switch {
	case c.Team == "":
		v.add("team", "required: the team's short name, e.g. red")
	case !dnsLabelRe.MatchString(c.Team):
		v.add("team", "must be lower-case letters, digits and '-', starting and ending with a letter or digit, e.g. red or search-ranking")
	case len(c.Team) > MaxTeamLen:
		v.add("team", "must be at most %d characters (HyperPod task governance team names are limited to %d)", MaxTeamLen, MaxTeamLen)
	}

	switch n := runeLen(c.BusinessPurpose); {
	case n == 0:
		v.add("business_purpose", "required: what the team will use the cluster for; a connection without a business purpose must be revoked")
	case n < MinPurposeLen:
		v.add("business_purpose", "is too short (%d characters): say in at least %d characters what the team will use the cluster for", n, MinPurposeLen)
	case n > MaxTextLen:
		v.add("business_purpose", "is too long (%d characters): at most %d", n, MaxTextLen)
	case hasControl(c.BusinessPurpose, true):
		v.add("business_purpose", "contains control characters")
	}

	v.owner("business_owner", c.BusinessOwner, "the person who answers for why the team uses the cluster")
	v.owner("operations_owner", c.OperationsOwner, "the person who answers for the team's workloads day to day")
	v.owner("cost_owner", c.CostOwner, "the person who answers for the team's spend")
	v.owner("exception_owner", c.ExceptionOwner, "the person who decides on exceptions to the scheduling policy")
}

// owner checks a responsible person's email: required, well-formed and known
// to the portal.
func (v *validator) owner(field, email, who string) {
	switch {
	case email == "":
		v.add(field, "required: the email of %s", who)
	case !validEmail(email):
		v.add(field, "%q is not an email address, e.g. owner.red@example.com", email)
	case !v.ownerExists(email):
		v.add(field, "%s is not a portal user or group; ask them to sign in to the portal once, or name someone who has", email)
	}
}

func (v *validator) ownerExists(email string) bool {
	if v.env.OwnerExists == nil {
		return true
	}
	ok, asked := v.owners[email]
	if !asked {
		ok = v.env.OwnerExists(email)
		v.owners[email] = ok
	}
	return ok
}

func (v *validator) studio() {
	c := v.c
	switch c.StudioMode {
	case "":
		v.add("studio_mode", "required: choose %s or %s", StudioTeamDomain, StudioUnified)
	case StudioUnified:
		switch {
		case c.UnifiedDomainID == "":
			v.add("unified_domain_id", "required for Unified Studio: the domain id, e.g. dzd_abc123example")
		case !dataZoneDomain.MatchString(c.UnifiedDomainID):
			v.add("unified_domain_id", "must be a Unified Studio domain id: dzd_ or dzd- followed by up to 36 letters, digits, '_' or '-'")
		}
		switch {
		case c.UnifiedProjectID == "":
			v.add("unified_project_id", "required for Unified Studio: the project id, e.g. 5rqxbh2u1zmx9j")
		case !dataZoneProject.MatchString(c.UnifiedProjectID):
			v.add("unified_project_id", "must be a Unified Studio project id: 1-36 letters, digits, '_' or '-'")
		}
	case StudioTeamDomain:
		if c.UnifiedDomainID != "" {
			v.add("unified_domain_id", "only for Unified Studio: clear it, or choose %s", StudioUnified)
		}
		if c.UnifiedProjectID != "" {
			v.add("unified_project_id", "only for Unified Studio: clear it, or choose %s", StudioUnified)
		}
	default:
		v.add("studio_mode", "unknown studio mode %q: choose %s or %s", c.StudioMode, StudioTeamDomain, StudioUnified)
	}
}

func (v *validator) cluster() {
	c := v.c
	switch {
	case c.AccountID == "":
		v.add("account_id", "required: the 12-digit AWS account id of the cluster, e.g. 111122223333")
	case !accountIDRe.MatchString(c.AccountID):
		v.add("account_id", "must be exactly 12 digits, e.g. 111122223333")
	}
	switch {
	case c.Region == "":
		v.add("region", "required: the AWS region of the cluster, e.g. us-east-1")
	case !validRegion(c.Region):
		v.add("region", "%q is not an AWS commercial region; use a region code such as us-east-1 or eu-west-1", c.Region)
	}
	switch c.Orchestrator {
	case "":
		v.add("orchestrator", "required: choose %s or %s", OrchestratorEKS, OrchestratorSlurm)
	case OrchestratorEKS, OrchestratorSlurm:
	default:
		v.add("orchestrator", "unknown orchestrator %q: choose %s or %s", c.Orchestrator, OrchestratorEKS, OrchestratorSlurm)
	}
	switch {
	case c.ClusterName == "":
		v.add("cluster_name", "required: the HyperPod cluster name, e.g. shared-hp")
	case !clusterNameRe.MatchString(c.ClusterName):
		v.add("cluster_name", "must be 1-63 letters, digits and '-', starting with a letter or digit (the HyperPod cluster name)")
	}
	v.clusterARN()
	switch {
	case c.Orchestrator == OrchestratorSlurm && c.EKSClusterName != "":
		v.add("eks_cluster_name", "only for EKS clusters: clear it, or choose %s", OrchestratorEKS)
	case c.Orchestrator == OrchestratorEKS && c.EKSClusterName == "":
		v.add("eks_cluster_name", "required for EKS: the name of the EKS cluster that orchestrates the HyperPod cluster")
	case c.EKSClusterName != "" && !eksClusterRe.MatchString(c.EKSClusterName):
		v.add("eks_cluster_name", "must be 1-100 letters, digits, '-' and '_', starting with a letter or digit")
	}
}

func (v *validator) clusterARN() {
	const f = "cluster_arn"
	s := v.c.ClusterARN
	if s == "" {
		v.add(f, "required: the HyperPod cluster ARN, e.g. arn:aws:sagemaker:us-east-1:111122223333:cluster/a1b2c3d4e5f6")
		return
	}
	a, err := ParseARN(s)
	switch {
	case err != nil:
		v.add(f, "must be an ARN like arn:aws:sagemaker:us-east-1:111122223333:cluster/a1b2c3d4e5f6")
	case a.Partition != "aws":
		v.add(f, "must be in the aws partition (arn:aws:...), not %s", a.Partition)
	case a.Service != "sagemaker":
		v.add(f, "must be a SageMaker HyperPod cluster ARN (service sagemaker), not a %s ARN", a.Service)
	case !clusterIDRe.MatchString(a.Resource):
		v.add(f, "must end in cluster/<12-character id>, as aws sagemaker describe-cluster shows it")
	default:
		v.sameAccountAndRegion(f, a, true)
	}
}

// sameAccountAndRegion checks that an ARN is in the contract's account and,
// for regional services, region. When the contract's own account or region
// is invalid, that field already has a message and the ARN is not blamed.
func (v *validator) sameAccountAndRegion(field string, a ARN, regional bool) {
	c := v.c
	switch {
	case regional && a.Region == "":
		v.add(field, "has no region; it must be in the contract's region %s", orPlaceholder(c.Region, "<region>"))
	case regional && validRegion(c.Region) && a.Region != c.Region:
		v.add(field, "is in region %s, but the contract's region is %s", a.Region, c.Region)
	case regional && !validRegion(a.Region):
		v.add(field, "has an unknown region %q", a.Region)
	case !regional && a.Region != "":
		v.add(field, "must have no region: IAM is global (arn:aws:iam::%s:role/name)", orPlaceholder(c.AccountID, "<account>"))
	case !accountIDRe.MatchString(a.Account):
		v.add(field, "must contain a 12-digit account id, not %q", a.Account)
	case accountIDRe.MatchString(c.AccountID) && a.Account != c.AccountID:
		v.add(field, "belongs to account %s, but the contract's account is %s", a.Account, c.AccountID)
	}
}

func orPlaceholder(s, placeholder string) string {
	if s == "" {
		return placeholder
	}
	return s
}

func (v *validator) identities() {
	c := v.c
	v.roleARN("project_role_arn", c.ProjectRoleARN, "the Studio project's execution role")
	v.roleARN("access_role_arn", c.AccessRoleARN, "the role the team's people use to reach the cluster")
	v.roleARN("workload_role_arn", c.WorkloadRoleARN, "the role the team's pods run as (EKS Pod Identity)")
	if c.WorkloadRoleARN != "" && (c.WorkloadRoleARN == c.AccessRoleARN || c.WorkloadRoleARN == c.ProjectRoleARN) {
		v.add("workload_role_arn", "must be a role of its own, not the project or access role: workloads never hold a person's permissions")
	}
}

func (v *validator) roleARN(field, s, what string) {
	if s == "" {
		v.add(field, "required: %s, e.g. arn:aws:iam::111122223333:role/red-team", what)
		return
	}
	a, err := ParseARN(s)
	switch {
	case err != nil:
		v.add(field, "must be an IAM role ARN like arn:aws:iam::111122223333:role/red-team")
		return
	case a.Partition != "aws":
		v.add(field, "must be in the aws partition (arn:aws:...), not %s", a.Partition)
		return
	case a.Service != "iam":
		v.add(field, "must be an IAM role ARN (service iam), not a %s ARN", a.Service)
		return
	}
	if _, err := roleName(a.Resource); err != nil {
		v.add(field, "%s", err)
		return
	}
	v.sameAccountAndRegion(field, a, false)
	if p := v.env.TeamRolePrefix; p != "" && !strings.HasPrefix(a.Resource, "role"+p) {
		v.add(field, "must be a team role under role%s (the portal may pass only those roles), e.g. arn:aws:iam::%s:role%sred-team", p, orPlaceholder(v.c.AccountID, "<account>"), p)
	}
	if v.env.RoleTaken != nil && v.env.RoleTaken(s) {
		// Says nothing of who holds it (issue 10 item 3).
		v.add(field, "is not available: each team's roles must be its own (the cluster's access entry and Pod Identity association for a role belong to one team); name another role")
	}
}

func (v *validator) workloads() {
	c := v.c
	if len(c.WorkloadTypes) == 0 {
		v.add("workload_types", "choose at least one workload type")
	}
	seen := map[WorkloadType]bool{}
	for i, w := range c.WorkloadTypes {
		f := fmt.Sprintf("workload_types[%d]", i)
		switch {
		case !w.Valid():
			v.add(f, "unknown workload type %q: choose from %s", w, joinValues(AllWorkloadTypes))
		case seen[w]:
			v.add(f, "%s is listed twice", w)
		}
		seen[w] = true
	}
	switch {
	case c.DataClassification == "":
		v.add("data_classification", "required: the most sensitive data the team's workloads touch")
	case !c.DataClassification.Valid():
		v.add("data_classification", "unknown classification %q: choose from %s", c.DataClassification, joinValues(AllDataClassifications))
	}
}

func (v *validator) scope() {
	c := v.c
	switch c.Orchestrator {
	case OrchestratorEKS:
		if c.SlurmScope != (SlurmScope{}) {
			v.add("slurm_scope", "only for Slurm clusters: clear it, or choose %s", OrchestratorSlurm)
		}
		if len(c.Namespaces) == 0 {
			v.add("namespaces", "an EKS connection needs at least one namespace, e.g. %s%s", taskGovernancePrefix, orPlaceholder(c.Team, "<team>"))
		}
		v.namespaces()
	case OrchestratorSlurm:
		if len(c.Namespaces) > 0 {
			v.add("namespaces", "a Slurm connection has no namespaces: clear them and fill in the Slurm scope")
		}
		for _, p := range []struct{ field, value, what string }{
			{"slurm_scope.account", c.SlurmScope.Account, "the Slurm account jobs are accounted to"},
			{"slurm_scope.partition", c.SlurmScope.Partition, "the Slurm partition jobs run in"},
			{"slurm_scope.qos", c.SlurmScope.QoS, "the Slurm QoS jobs run with"},
		} {
			switch {
			case p.value == "":
				v.add(p.field, "required for Slurm: %s", p.what)
			case !slurmNameRe.MatchString(p.value):
				v.add(p.field, "must be 1-64 letters, digits, '_', '.' and '-', starting with a letter or digit")
			}
		}
		for _, t := range c.slurmTaken(v.env) {
			v.add("slurm_scope."+t.what, "%s", t.msg)
		}
	}
}

// slurmClaim is one of a Slurm contract's account and QoS that another
// connection holds.
type slurmClaim struct{ what, msg string }

// slurmTaken are c's Slurm account and QoS that env says another
// connection holds on the same cluster (ValidationEnv.SlurmTaken).
func (c Contract) slurmTaken(env ValidationEnv) []slurmClaim {
	if env.SlurmTaken == nil || c.Orchestrator != OrchestratorSlurm {
		return nil
	}
	var out []slurmClaim
	for _, p := range []struct{ what, name, label string }{{"account", c.SlurmScope.Account, "Slurm account"}, {"qos", c.SlurmScope.QoS, "Slurm QoS"}} {
		if p.name != "" && env.SlurmTaken(c.ClusterName, p.what, p.name) {
			out = append(out, slurmClaim{p.what, fmt.Sprintf("%s %s on cluster %s is already held by another connection: the portal would change and, at revocation, delete it under them", p.label, p.name, c.ClusterName)})
		}
	}
	return out
}

func (v *validator) namespaces() {
	c := v.c
	seen := map[string]bool{}
	for i, ns := range c.Namespaces {
		f := fmt.Sprintf("namespaces[%d]", i)
		switch {
		case ns == "":
			v.add(f, "is empty: remove the row or name a namespace")
		case len(ns) > 63 || !dnsLabelRe.MatchString(ns):
			v.add(f, "%q must be at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit", ns)
		case ReservedNamespace(ns, v.env.ReservedNamespaces):
			v.add(f, "%s is reserved for the cluster's own components: name a namespace of the team's own", ns)
		case strings.HasPrefix(ns, taskGovernancePrefix) && v.teamValid() && ns != taskGovernancePrefix+c.Team:
			v.add(f, "%s is the task governance namespace of team %s; this team's is %s%s",
				ns, strings.TrimPrefix(ns, taskGovernancePrefix), taskGovernancePrefix, orPlaceholder(c.Team, "<team>"))
		case v.env.TeamNamespaceOnly && v.teamValid() && ns != taskGovernancePrefix+c.Team:
			v.add(f, "%s cannot be provisioned on this cluster: HyperPod task governance creates and owns the team namespace %s%s from the team's compute quota, and it is the only namespace the portal provisions; name %s%s alone",
				ns, taskGovernancePrefix, c.Team, taskGovernancePrefix, c.Team)
		case seen[ns]:
			v.add(f, "%s is listed twice", ns)
		case v.env.NamespaceTaken != nil && v.env.NamespaceTaken(ns):
			// Says nothing of who holds it (issue 10 item 3).
			v.add(f, "%s is not available: choose another name", ns)
		}
		seen[ns] = true
	}
}

func (v *validator) scheduling() {
	s := v.c.Scheduling
	if len(s.Guaranteed) == 0 {
		v.add("scheduling.guaranteed", "add at least one row: the instance type and count the team is guaranteed (borrowing is a percentage of it)")
	}
	seen := map[string]bool{}
	for i, g := range s.Guaranteed {
		f := fmt.Sprintf("scheduling.guaranteed[%d]", i)
		switch {
		case g.InstanceType == "":
			v.add(f+".instance_type", "required: an instance type, e.g. ml.p5.48xlarge")
		case v.env.InstanceTypes != nil && !slices.ContainsFunc(v.env.InstanceTypes, func(t string) bool { return strings.EqualFold(strings.TrimSpace(t), g.InstanceType) }):
			v.add(f+".instance_type", "%q is not an instance type of this cluster's inventory, e.g. ml.p5.48xlarge", g.InstanceType)
		case seen[g.InstanceType]:
			v.add(f+".instance_type", "%s is listed twice: put the total in one row", g.InstanceType)
		}
		seen[g.InstanceType] = true
		switch {
		case g.Count < 1:
			v.add(f+".count", "must be at least 1")
		case g.Count > MaxInstanceCount:
			v.add(f+".count", "must be at most %d", MaxInstanceCount)
		}
	}
	switch {
	case s.Sharing == "":
		v.add("scheduling.sharing", "required: whether the team lends and borrows idle capacity")
	case !s.Sharing.Valid():
		v.add("scheduling.sharing", "unknown sharing %q: choose from %s", s.Sharing, joinValues(AllSharings))
	}
	switch {
	case s.Sharing.Borrows() && s.BorrowLimitPercent == 0:
		v.add("scheduling.borrow_limit_percent", "required when borrowing: how much idle capacity the team may borrow, as a percentage of its guaranteed capacity (%d-%d)", MinBorrowLimit, MaxBorrowLimit)
	case s.Sharing.Borrows() && (s.BorrowLimitPercent < MinBorrowLimit || s.BorrowLimitPercent > MaxBorrowLimit):
		v.add("scheduling.borrow_limit_percent", "must be between %d and %d (percent of the guaranteed capacity)", MinBorrowLimit, MaxBorrowLimit)
	case !s.Sharing.Borrows() && s.BorrowLimitPercent != 0:
		v.add("scheduling.borrow_limit_percent", "only when the team borrows: clear it, or choose %s or %s", SharingBorrow, SharingLendAndBorrow)
	}
	switch {
	case s.Preemption == "":
		v.add("scheduling.preemption", "required: whether the team's tasks may preempt lower-priority tasks")
	case !s.Preemption.Valid():
		v.add("scheduling.preemption", "unknown preemption %q: choose from %s", s.Preemption, joinValues(AllPreemptions))
	}
	if s.FairShareWeight < 0 || s.FairShareWeight > MaxFairShareWeight {
		v.add("scheduling.fair_share_weight", "must be between 0 and %d (0 is the lowest share of idle capacity)", MaxFairShareWeight)
	}
	seenPC := map[string]bool{}
	for i, pc := range s.PriorityClasses {
		f := fmt.Sprintf("scheduling.priority_classes[%d]", i)
		switch {
		case len(pc) > MaxPriorityClassLen || !dnsLabelRe.MatchString(pc):
			v.add(f, "%q must be a priority class name of at most %d lower-case letters, digits and '-', e.g. training", pc, MaxPriorityClassLen)
		case seenPC[pc]:
			v.add(f, "%s is listed twice", pc)
		}
		seenPC[pc] = true
	}
}

func (v *validator) monitoring() {
	c := v.c
	if len(c.Signals) == 0 {
		v.add("signals", "name at least one watched signal, who responds to it and how, e.g. accelerator utilization")
	}
	seen := map[string]bool{}
	for i, s := range c.Signals {
		f := fmt.Sprintf("signals[%d]", i)
		key := strings.ToLower(s.Name)
		switch n := runeLen(s.Name); {
		case n == 0:
			v.add(f+".name", "required: what is watched, e.g. accelerator utilization")
		case n > MaxLineLen:
			v.add(f+".name", "is too long (%d characters): at most %d", n, MaxLineLen)
		case hasControl(s.Name, false):
			v.add(f+".name", "must be one line of text")
		case seen[key]:
			v.add(f+".name", "%q is listed twice", s.Name)
		}
		seen[key] = true
		v.owner(f+".owner", s.Owner, "the person who responds to this signal")
		switch n := runeLen(s.Response); {
		case n == 0:
			v.add(f+".response", "required: what the owner does when the signal fires")
		case n > MaxRowTextLen:
			v.add(f+".response", "is too long (%d characters): at most %d", n, MaxRowTextLen)
		case hasControl(s.Response, true):
			v.add(f+".response", "contains control characters")
		}
	}

	switch d := c.ReviewCadenceDays; {
	case d == 0:
		v.add("review_cadence_days", "required: how often, in days, the connection is reviewed (%d-%d), e.g. 90", MinReviewCadence, MaxReviewCadence)
	case d < MinReviewCadence || d > MaxReviewCadence:
		v.add("review_cadence_days", "must be between %d and %d days", MinReviewCadence, MaxReviewCadence)
	}

	today := v.env.Now.Format(time.DateOnly)
	switch {
	case c.EndDate != "":
		if t, err := time.Parse(time.DateOnly, c.EndDate); err != nil || t.Format(time.DateOnly) != c.EndDate {
			v.add("end_date", "must be a date written YYYY-MM-DD, e.g. 2027-06-30")
		} else if c.EndDate <= today {
			v.add("end_date", "must be in the future (after %s)", today)
		}
	case c.DataClassification == DataRestricted:
		v.add("end_date", "required for restricted data: a restricted connection ends on a known date")
	case c.DecommissionCriteria == "":
		v.add("end_date", "give an end date or decommission criteria: every connection says when it ends")
	}
	switch n := runeLen(c.DecommissionCriteria); {
	case n > MaxTextLen:
		v.add("decommission_criteria", "is too long (%d characters): at most %d", n, MaxTextLen)
	case hasControl(c.DecommissionCriteria, true):
		v.add("decommission_criteria", "contains control characters")
	}
}

func (v *validator) egress() {
	seen := map[string]bool{}
	for i, e := range v.c.EgressAllowances {
		f := fmt.Sprintf("egress_allowances[%d]", i)
		if msg := checkDestination(e.Destination); msg != "" {
			v.add(f+".destination", "%s", msg)
		} else if seen[e.Destination] {
			v.add(f+".destination", "%s is listed twice: put all its ports in one row", e.Destination)
		}
		seen[e.Destination] = true
		if len(e.Ports) == 0 {
			v.add(f+".ports", "name at least one port, e.g. 443")
		}
		seenPort := map[int]bool{}
		for j, p := range e.Ports {
			pf := fmt.Sprintf("%s.ports[%d]", f, j)
			switch {
			case p < 1 || p > 65535:
				v.add(pf, "%d is not a port: use 1-65535", p)
			case seenPort[p]:
				v.add(pf, "%d is listed twice", p)
			}
			seenPort[p] = true
		}
		switch n := runeLen(e.Reason); {
		case n == 0:
			v.add(f+".reason", "required: why the team's workloads need to reach it")
		case n > MaxRowTextLen:
			v.add(f+".reason", "is too long (%d characters): at most %d", n, MaxRowTextLen)
		case hasControl(e.Reason, true):
			v.add(f+".reason", "contains control characters")
		}
	}
}

// checkDestination returns what is wrong with an egress destination, or "".
// CIDR blocks must be written canonically so that one network has one
// spelling (and one contract hash).
func checkDestination(d string) string {
	if d == "" {
		return "required: a CIDR block (10.20.0.0/16) or a DNS name (s3.us-east-1.amazonaws.com)"
	}
	if strings.Contains(d, "/") {
		p, err := netip.ParsePrefix(d)
		switch {
		case err != nil:
			return fmt.Sprintf("%q is not a CIDR block, e.g. 10.20.0.0/16", d)
		case p.Bits() == 0:
			return "allows every address, which defeats the default-deny policy: name the networks or hosts"
		case p != p.Masked():
			return fmt.Sprintf("has host bits set: did you mean %s?", p.Masked())
		case p.String() != d:
			return fmt.Sprintf("write it as %s", p)
		}
		return ""
	}
	if a, err := netip.ParseAddr(d); err == nil {
		return fmt.Sprintf("write a single address as a CIDR block: %s", netip.PrefixFrom(a, a.BitLen()))
	}
	if !validDNSName(d) {
		return fmt.Sprintf("%q must be a CIDR block (10.20.0.0/16) or a DNS name (s3.us-east-1.amazonaws.com)", d)
	}
	return ""
}

// validEmail is deliberately simpler than RFC 5322: owners are people and
// groups of the organisation's directory, whose addresses look like this.
func validEmail(s string) bool {
	if len(s) > 254 {
		return false
	}
	local, domain, ok := strings.Cut(s, "@")
	return ok && len(local) <= 64 && emailLocal.MatchString(local) && validDNSName(domain)
}

// validDNSName accepts a fully qualified host name: at least two labels, and
// a last label that is not all digits (so that a mistyped IP address is not
// taken for a name).
func validDNSName(s string) bool {
	if len(s) > 253 {
		return false
	}
	labels := strings.Split(s, ".")
	if len(labels) < 2 {
		return false
	}
	for _, l := range labels {
		if len(l) > 63 || !dnsLabelRe.MatchString(l) {
			return false
		}
	}
	_, err := strconv.Atoi(labels[len(labels)-1])
	return err != nil
}

// hasControl reports control characters; multi-line text may hold newlines
// and tabs.
func hasControl(s string, multiline bool) bool {
	for _, r := range s {
		if multiline && (r == '\n' || r == '\t') {
			continue
		}
		if unicode.IsControl(r) {
			return true
		}
	}
	return false
}

func joinValues[T ~string](all []T) string {
	s := make([]string, len(all))
	for i, v := range all {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}

// ClaimConflicts are what c claims that another connection already holds
// (one submitted or later: a draft holds nothing): its namespaces, its
// roles (a team's own, see ValidationEnv.RoleTaken) and its Slurm account
// and QoS (ValidationEnv.SlurmTaken), as sentences for the
// admin who approves, naming no other team or connection. Validate reports
// the same per field; approval checks it again inside its transaction,
// where a request submitted meanwhile may have taken them.
func (c Contract) ClaimConflicts(env ValidationEnv) []string {
	var out []string
	if env.NamespaceTaken != nil {
		for _, ns := range c.Namespaces {
			if ns != "" && env.NamespaceTaken(ns) {
				out = append(out, "namespace "+ns+" is already held by another connection")
			}
		}
	}
	if env.RoleTaken != nil {
		for _, r := range []string{c.ProjectRoleARN, c.AccessRoleARN, c.WorkloadRoleARN} {
			if r != "" && env.RoleTaken(r) {
				out = append(out, "role "+r+" is already named by another connection")
			}
		}
	}
	for _, t := range c.slurmTaken(env) {
		out = append(out, t.msg)
	}
	return out
}
