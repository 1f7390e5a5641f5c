package provision

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/hyperpod-governance/portal/internal/provision/slurmprov"
	"github.com/hyperpod-governance/portal/internal/slurm"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// SlurmSettings are how the portal sets up Slurm connections on the
// cluster (the "slurm" key of --cluster-settings; docs/provisioning.md).
type SlurmSettings struct {
	// Cluster is the Slurm cluster's name in the accounting database,
	// slurm.conf's ClusterName: an association is (cluster, account, user,
	// partition) and "cluster is the name of a Slurm managed cluster as
	// specified by the ClusterName parameter in the slurm.conf
	// configuration file" (https://slurm.schedmd.com/sacctmgr.html,
	// DESCRIPTION). Empty: the contract's cluster_name.
	Cluster string
	// ParentAccount is the portal's account, under which every team's
	// account is made (default DefaultSlurmParentAccount).
	ParentAccount string
	// UserTemplate maps a portal identity (the email the identity provider
	// gives, Identity Center's or any OIDC one) to the POSIX user its jobs
	// run as: "{local}" is the email's part before '@', "{team}" the
	// contract's team; the result is lower-cased (default
	// DefaultSlurmUserTemplate). It must give the same user that the
	// person's Studio or Session Manager sessions run as: HyperPod's
	// Studio integration with Slurm runs a session as the OS user named by
	// the SSMSessionRunAs tag of the IAM role (or user) that starts it,
	// with Session Manager's Run As support turned on
	// (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-studio-setup-slurm.html,
	// https://docs.aws.amazon.com/systems-manager/latest/userguide/session-preferences-run-as.html).
	UserTemplate string
	// PreemptableQoS are the QoS whose jobs a team's jobs may preempt
	// when its contract says "preempt lower-priority tasks" (for example a
	// scavenger QoS): a QoS's Preempt list names the QoS it may preempt,
	// with PreemptType=preempt/qos in slurm.conf
	// (https://slurm.schedmd.com/preempt.html, https://slurm.schedmd.com/qos.html
	// "Job Preemption"). Empty: no preemption.
	PreemptableQoS []string
	// PartitionInstanceTypes names the instance type of each partition's
	// nodes, for usage (internal/collect/slurmusage): a job's GPU hours
	// count on its partition's instance type, whose guarantee splits them
	// and whose rate prices them; another partition's count as not
	// assigned. On HyperPod each instance group belongs to at most one
	// partition, beside its instance type
	// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ClusterSlurmConfigDetails.html).
	PartitionInstanceTypes map[string]string
}

// Defaults of SlurmSettings.
const (
	DefaultSlurmParentAccount = "hyperpod-portal"
	DefaultSlurmUserTemplate  = "{local}"
)

func (s SlurmSettings) withDefaults() SlurmSettings {
	if s.ParentAccount == "" {
		s.ParentAccount = DefaultSlurmParentAccount
	}
	if s.UserTemplate == "" {
		s.UserTemplate = DefaultSlurmUserTemplate
	}
	s.PreemptableQoS = slices.Clone(s.PreemptableQoS)
	return s
}

// posixUserRe is a portable user name: POSIX.1 user names are made of the
// portable filename character set (letters, digits, '.', '_', '-') and do
// not begin with '-' (https://pubs.opengroup.org/onlinepubs/9699919799/basedefs/V1_chap03.html,
// 3.437 User Name, 3.282 Portable Filename Character Set); lower case, as
// Slurm keeps its database (SlurmPlan), and at most 32 characters, the
// Linux utmp limit on a login name.
var posixUserRe = regexp.MustCompile(`^[a-z0-9_][a-z0-9_.-]{0,31}$`)

// slurmNameRe: an account or QoS name the plan writes unquoted into a
// sacctmgr command.
var slurmNameRe = regexp.MustCompile(`^[a-z0-9_][a-z0-9_.-]{0,63}$`)

// SlurmUser maps a portal identity (an email) to its POSIX user with the
// template of SlurmSettings.UserTemplate.
func SlurmUser(template, email, team string) (string, error) {
	local, _, ok := strings.Cut(email, "@")
	if !ok || local == "" {
		return "", fmt.Errorf("provision: %q is not an email address: no POSIX user can be made from it", email)
	}
	u := strings.ToLower(strings.NewReplacer("{local}", local, "{team}", team).Replace(template))
	if !posixUserRe.MatchString(u) {
		return "", fmt.Errorf("provision: %s maps to %q with the template %q, which is not a portable POSIX user name (letters, digits, '.', '_' and '-', not starting with '-', at most 32)", email, u, template)
	}
	return u, nil
}

// SlurmMembers are the people a Slurm contract names, whose POSIX users get
// an association: its four owners and its signals' owners. The portal
// keeps no roster of a team's identity-provider group (memberships come
// with each login), so the contract's people are the members it can name
// and an approval can pin.
func SlurmMembers(c workflow.Contract) []string {
	people := []string{c.BusinessOwner, c.OperationsOwner, c.CostOwner, c.ExceptionOwner}
	for _, s := range c.Signals {
		people = append(people, s.Owner)
	}
	var out []string
	for _, p := range people {
		if p = strings.ToLower(strings.TrimSpace(p)); p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// SlurmPlan maps an approved Slurm contract and the cluster settings to the
// team's accounting on the Slurm cluster. It is pure.
//
//   - The account is the contract's slurm_scope.account, under the portal's
//     parent account; the QoS is its slurm_scope.qos, the only QoS the
//     account may use and its default. Slurm keeps its database in lower
//     case ("The contents of Slurm's database are maintained in lower
//     case", https://slurm.schedmd.com/sacctmgr.html), so names are
//     lower-cased. The cluster's default QoS "normal" is refused: every
//     association may use it, and revoking the team would delete it.
//   - The GPU limit is the guarantee in GPUs (instances × the accelerator
//     table's GPUs per instance), times (1 + borrow_limit_percent/100)
//     when the team borrows: a group TRES limit on gres/gpu, on the QoS
//     and on the account ("GrpTRES= Maximum number of TRES running jobs
//     are able to be allocated in aggregate for this association and all
//     associations which are children of this association",
//     https://slurm.schedmd.com/sacctmgr.html; for a QOS, "the limits
//     apply to all jobs running in the QOS",
//     https://slurm.schedmd.com/resource_limits.html). Slurm has no
//     guaranteed share of GPUs: a guarantee is a cap plus the fair share.
//   - The account's Fairshare is the contract's fair-share weight ("Number
//     used in conjunction with other accounts to determine job priority",
//     sacctmgr.html, Fairshare); a weight of 0 becomes 1, the smallest
//     share.
//   - The QoS's Priority is the largest value, in the cluster settings'
//     priority classes, of the classes the contract names (0 when it names
//     none): "Each QOS ... includes an associated priority", which counts
//     when PriorityWeightQOS is above zero (https://slurm.schedmd.com/qos.html).
//   - Preemption "lower-priority" lets the QoS preempt the settings'
//     PreemptableQoS (Preempt=, https://slurm.schedmd.com/qos.html); "never"
//     preempts nothing.
//   - One association per member (SlurmMembers, mapped by SlurmUser), in
//     the contract's partition only: an association names its partition
//     (sacctmgr.html, DESCRIPTION), and a user without one in a partition
//     cannot submit there under AccountingStorageEnforce=associations
//     (https://slurm.schedmd.com/slurm.conf.html).
func SlurmPlan(c workflow.Contract, s ClusterSettings) (slurmprov.Plan, []string, error) {
	c = c.Normalize()
	if c.Orchestrator != workflow.OrchestratorSlurm {
		return slurmprov.Plan{}, nil, fmt.Errorf("provision: orchestrator %q is not %s", c.Orchestrator, workflow.OrchestratorSlurm)
	}
	s = s.withDefaults()
	ss := s.Slurm.withDefaults()
	var warnings []string
	scope := c.SlurmScope
	account, qos, partition := strings.ToLower(scope.Account), strings.ToLower(scope.QoS), strings.ToLower(scope.Partition)
	for _, n := range []struct{ what, v string }{{"account", account}, {"QoS", qos}, {"partition", partition}, {"parent account", ss.ParentAccount}} {
		if !slurmNameRe.MatchString(n.v) {
			return slurmprov.Plan{}, nil, fmt.Errorf("provision: Slurm %s %q: lower-case letters, digits, '_', '.' and '-', at most 64", n.what, n.v)
		}
	}
	switch {
	case qos == "normal":
		return slurmprov.Plan{}, nil, fmt.Errorf("provision: Slurm QoS %q is the cluster's default QoS, which every association may use: name a QoS for the team", qos)
	case account == ss.ParentAccount || account == "root":
		return slurmprov.Plan{}, nil, fmt.Errorf("provision: Slurm account %q is the portal's parent account or Slurm's root: name an account for the team", account)
	}
	gpus, err := slurmGPUs(c.Scheduling.Guaranteed, s.Accelerators)
	if err != nil {
		return slurmprov.Plan{}, nil, err
	}
	limit := gpus
	if c.Scheduling.Sharing.Borrows() && c.Scheduling.BorrowLimitPercent > 0 {
		limit = gpus + gpus*c.Scheduling.BorrowLimitPercent/100
	}
	cluster := ss.Cluster
	if cluster == "" {
		cluster = strings.ToLower(c.ClusterName)
	}
	priority := 0
	for _, pc := range s.PriorityClasses {
		if slices.Contains(c.Scheduling.PriorityClasses, pc.Name) {
			priority = max(priority, int(pc.Value))
		}
	}
	var preempt []string
	if c.Scheduling.Preemption == workflow.PreemptLowerPriority {
		preempt = ss.PreemptableQoS
		if len(preempt) == 0 {
			warnings = append(warnings, "the contract lets the team preempt lower-priority tasks, but the cluster settings name no QoS whose jobs may be preempted (slurm.preemptable_qos): the team's QoS preempts nothing")
		}
	}
	p := slurmprov.Plan{
		Cluster: cluster,
		Parent:  slurmprov.Account{Name: ss.ParentAccount, Description: "teams of the HyperPod portal", Organization: "hyperpod-portal"},
		QoS:     slurmprov.QoS{Name: qos, Priority: priority, GrpTRES: map[string]int{"gres/gpu": limit}, Preempt: preempt},
		Account: slurmprov.Account{Name: account, Parent: ss.ParentAccount, Description: "team " + c.Team, Organization: c.Team,
			Fairshare: max(c.Scheduling.FairShareWeight, 1), GrpTRES: map[string]int{"gres/gpu": limit}, QoS: []string{qos}, DefaultQoS: qos},
	}
	seen := map[string]string{}
	for _, email := range SlurmMembers(c) {
		u, err := SlurmUser(ss.UserTemplate, email, c.Team)
		if err != nil {
			return slurmprov.Plan{}, nil, err
		}
		if other, ok := seen[u]; ok {
			return slurmprov.Plan{}, nil, fmt.Errorf("provision: %s and %s both map to POSIX user %s with the template %q", other, email, u, ss.UserTemplate)
		}
		seen[u] = email
		p.Users = append(p.Users, slurmprov.User{Name: u, Account: account, Partition: partition})
	}
	slices.SortFunc(p.Users, func(a, b slurmprov.User) int { return strings.Compare(a.Name, b.Name) })
	if p.Coordinators, err = SlurmCoordinators(c, ss.UserTemplate); err != nil {
		return slurmprov.Plan{}, nil, err
	}
	return p, warnings, nil
}

// SlurmCoordinators are the POSIX users of the contract's four owners
// (business, operations, cost, exception), sorted and once each: the
// coordinators of the team's account (slurmprov.Plan.Coordinators), who
// may manage its users, limits and jobs
// (https://slurm.schedmd.com/user_permissions.html, Coordinator). An
// owner's identity (the email Identity Center or the OIDC provider gives)
// maps to a POSIX user as every member's does (SlurmUser with the
// settings' user_template), the user HyperPod's Studio and Session Manager
// sessions run as (SSMSessionRunAs,
// https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-studio-setup-slurm.html).
// Every owner is a member (SlurmMembers), so the user exists when the
// coordinator is added; a signal owner is a member but not a coordinator.
func SlurmCoordinators(c workflow.Contract, template string) ([]string, error) {
	if template == "" {
		template = DefaultSlurmUserTemplate
	}
	var out []string
	for _, email := range []string{c.BusinessOwner, c.OperationsOwner, c.CostOwner, c.ExceptionOwner} {
		if email = strings.ToLower(strings.TrimSpace(email)); email == "" {
			continue
		}
		u, err := SlurmUser(template, email, c.Team)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	slices.Sort(out)
	return out, nil
}

// slurmGPUs is the guarantee in GPUs. Slurm counts them as the generic
// resource gpu (gres/gpu, https://slurm.schedmd.com/gres.html); a Neuron
// instance type has no gres/gpu to limit.
func slurmGPUs(rows []workflow.Capacity, table map[string]ResourcesPerInstance) (int, error) {
	if len(rows) == 0 {
		return 0, fmt.Errorf("provision: the contract guarantees no capacity: nothing to base the GPU limit on")
	}
	n := 0
	for _, r := range rows {
		per, ok := table[r.InstanceType]
		switch {
		case !ok:
			return 0, fmt.Errorf("provision: instance type %s is not in the cluster settings' accelerator table: its GPUs cannot be counted", r.InstanceType)
		case r.Count < 1:
			return 0, fmt.Errorf("provision: instance type %s: count %d must be at least 1", r.InstanceType, r.Count)
		case per.Accelerators > 0 && per.AcceleratorResource != "" && per.AcceleratorResource != string(ResourceNvidiaGPU):
			return 0, fmt.Errorf("provision: instance type %s counts %s, not GPUs: a Slurm connection limits gres/gpu only", r.InstanceType, per.AcceleratorResource)
		}
		n += r.Count * per.Accelerators
	}
	return n, nil
}

// slurmHashedText is the Slurm half of a plan's hashed text: its exact
// commands, one per line.
func slurmHashedText(p *slurmprov.Plan) string {
	var b strings.Builder
	for _, c := range p.Commands() {
		fmt.Fprintf(&b, "# slurm: %s\n", c)
	}
	return b.String()
}

// buildSlurmPlan is BuildPlan for a Slurm contract (whose connection,
// version and hash BuildPlan checked): no Kubernetes object, the team's
// accounting (Plan.Slurm).
func buildSlurmPlan(connID int64, version int, hash string, c workflow.Contract, s ClusterSettings) (Plan, error) {
	sp, warnings, err := SlurmPlan(c, s)
	if err != nil {
		return Plan{}, err
	}
	return Plan{ConnectionID: connID, ContractVersion: version, ContractHash: hash, Team: c.Team, Cluster: c.ClusterName,
		Slurm: &sp, Warnings: warnings, OnRevoke: s.withDefaults().OnRevoke}, nil
}

// slurmSummary is a Slurm plan's one line, for a step's detail.
func slurmSummary(p *slurmprov.Plan) string {
	return "account " + p.Account.Name + " under " + p.Parent.Name + ", QoS " + p.QoS.Name + " (GrpTRES " + "gres/gpu=" + strconv.Itoa(p.QoS.GrpTRES["gres/gpu"]) +
		"), " + strconv.Itoa(len(p.Users)) + " member associations on cluster " + p.Cluster
}

// runSlurm runs a Slurm step through the worker's Slurm transport. Its
// detail lists the commands it ran. A failed command is retried by the
// job (Apply and Revoke read the state first, so a retry resumes).
func (w *Worker) runSlurm(ctx context.Context, st Step) (Outcome, string, error) {
	if w.Slurm == nil {
		return Failed, "", permanent(errors.New("provision: the portal has no Slurm transport configured (PORTAL_SLURM_CONF, docs/configuration.md): a Slurm connection cannot be set up"))
	}
	run := slurmprov.Apply
	switch {
	case st.Action == ActionSlurmApply && st.SlurmFrom != nil:
		run = func(ctx context.Context, r slurm.Runner, p slurmprov.Plan) ([]slurmprov.Command, error) {
			return slurmprov.ApplyKeepingHold(ctx, r, p, *st.SlurmFrom, st.SlurmHeld)
		}
	case st.Action == ActionSlurmRevoke:
		run = slurmprov.Revoke
	case st.Action == ActionSlurmRetire:
		run = func(ctx context.Context, r slurm.Runner, old slurmprov.Plan) ([]slurmprov.Command, error) {
			return slurmprov.Retire(ctx, r, old, *st.SlurmNew)
		}
	}
	ran, err := run(ctx, w.Slurm, *st.Slurm)
	var cmds []string
	for _, c := range ran {
		cmds = append(cmds, c.String())
	}
	if err != nil {
		return Failed, "", fmt.Errorf("%w (ran: %s)", err, orNone(strings.Join(cmds, "; ")))
	}
	switch {
	case len(ran) == 0 && st.Action == ActionSlurmRevoke:
		return Absent, "nothing of the team left in the accounting database", nil
	case len(ran) == 0 && st.Action == ActionSlurmRetire:
		return Absent, "the old account and QoS are no longer in the accounting database", nil
	case len(ran) == 0:
		return Unchanged, "the accounting database matches the plan", nil
	case st.Action == ActionSlurmRevoke || st.Action == ActionSlurmRetire:
		return Deleted, strings.Join(cmds, "; "), nil
	}
	return Configured, strings.Join(cmds, "; "), nil
}

// runAlone runs a batched job's steps on its own, as a single job runs
// them: started, each step, completed.
func (w *Worker) runAlone(sctx context.Context, r *jobRun) error {
	if ended, err := w.start(sctx, r); ended {
		return err
	}
	if ended, err := w.runSteps(sctx, r, nil); ended {
		return err
	}
	return w.complete(sctx, r)
}

// SlurmDrift compares a Slurm plan with the cluster's accounting
// (slurmprov.Read, then slurmprov.Drift), as drift items: one per missing,
// differing or extra QoS, account or member association.
func SlurmDrift(ctx context.Context, r slurm.Runner, p *slurmprov.Plan) ([]workflow.DriftItem, error) {
	if r == nil {
		return nil, errors.New("provision: drift: the portal has no Slurm transport configured (PORTAL_SLURM_CONF): the Slurm accounting cannot be read")
	}
	s, err := slurmprov.Read(ctx, r, *p)
	if err != nil {
		return nil, fmt.Errorf("provision: drift: %w", err)
	}
	var items []workflow.DriftItem
	for _, d := range slurmprov.Drift(*p, s) {
		kind, ref, _ := strings.Cut(d.Object, " ")
		it := workflow.DriftItem{Kind: "Slurm " + kind, Ref: ref, What: "changed", Detail: d.String()}
		switch {
		case d.Field != "":
			it.Fields = []string{d.Field}
		case d.Have == "":
			it.What = "deleted"
		default:
			it.What = "extra"
		}
		items = append(items, it)
	}
	return items, nil
}

// check reports what is wrong with the settings, each as "key: problem".
func (s SlurmSettings) check() []string {
	var out []string
	for _, n := range []struct{ key, v string }{{"cluster", s.Cluster}, {"parent_account", s.ParentAccount}} {
		if n.v != "" && !slurmNameRe.MatchString(n.v) {
			out = append(out, fmt.Sprintf("%s: %q must be lower-case letters, digits, '_', '.' and '-', at most 64", n.key, n.v))
		}
	}
	for _, q := range s.PreemptableQoS {
		if !slurmNameRe.MatchString(q) {
			out = append(out, fmt.Sprintf("preemptable_qos: %q must be lower-case letters, digits, '_', '.' and '-', at most 64", q))
		}
	}
	if t := s.UserTemplate; t != "" {
		if !strings.Contains(t, "{local}") {
			out = append(out, fmt.Sprintf("user_template: %q must contain {local} (the email's part before '@'): without it every member maps to one user", t))
		} else if _, err := SlurmUser(t, "member@example.com", "team"); err != nil {
			out = append(out, fmt.Sprintf("user_template: %q does not make a POSIX user name (letters, digits, '.', '_', '-'; {local} and {team} only)", t))
		}
	}
	return out
}

// ActionSlurmRetire, an amendment's last step when it renames the team's
// account or QoS, removes the old ones (slurmprov.Retire: the old
// account's coordinators and member associations, the old account, the
// old QoS), once the amended plan is applied.
const ActionSlurmRetire StepAction = "slurm-retire"

func slurmRetireName(s Step) string {
	var what []string
	if s.Slurm.Account.Name != s.SlurmNew.Account.Name {
		what = append(what, "account "+s.Slurm.Account.Name+" (renamed "+s.SlurmNew.Account.Name+") with its members and coordinators")
	}
	if s.Slurm.QoS.Name != s.SlurmNew.QoS.Name {
		what = append(what, "QoS "+s.Slurm.QoS.Name+" (renamed "+s.SlurmNew.QoS.Name+")")
	}
	return "sacctmgr: remove the old " + strings.Join(what, " and ") + " from " + s.Slurm.Cluster
}

// SlurmAmendSteps are a Slurm amendment's steps: the amended plan applied
// (ApplySteps: slurmprov.Apply adds the new account or QoS, moves the
// members into it, changes what differs), then, when the amendment
// renames the account or the QoS, one ActionSlurmRetire step that removes
// the old ones in revocation's safe order. When the amendment moves the
// account association (a renamed account, another cluster), the apply
// step names the approved plan (Step.SlurmFrom) and keeps a hold: a held
// team's new account is added with GrpJobs=0 (slurmprov.ApplyKeepingHold),
// so that the hold does not stay behind on the account the retire step
// removes. It is pure.
func SlurmAmendSteps(old, new Plan) []Step {
	steps := ApplySteps(new)
	if old.Slurm != nil && new.Slurm != nil && slurmprov.MovesAccount(*old.Slurm, *new.Slurm) {
		steps[0].SlurmFrom = old.Slurm
		steps[0].Detail += "; a hold (GrpJobs=0) on account " + old.Slurm.Account.Name + " moves to account " + new.Slurm.Account.Name
	}
	if old.Slurm != nil && new.Slurm != nil && slurmprov.Renamed(*old.Slurm, *new.Slurm) {
		steps = append(steps, Step{Action: ActionSlurmRetire, Slurm: old.Slurm, SlurmNew: new.Slurm,
			Detail: "amendment: remove what the renamed account or QoS leaves behind"})
	}
	return steps
}

// slurmDiff are the rows of a Slurm amendment's plan diff: one per
// sacctmgr command the amendment job runs on an accounting database that
// matches the approved plan (slurmprov.AmendCommands: the amended plan
// applied, then a renamed account or QoS retired), each with the exact
// command; a modification names each field's old and new value. A row
// adds (create), modifies (update) or deletes (delete). Nil when neither
// plan is a Slurm one; a single unchanged row when the amendment runs no
// command.
//
// With held (the team is on hold: workflow.Hold.Applied), the rows are
// slurmprov.HeldAmendCommands: a renamed account is added with GrpJobs=0.
func slurmDiff(old, new *slurmprov.Plan, held bool) []PlanChange {
	switch {
	case new == nil:
		return nil
	case old == nil:
		old = &slurmprov.Plan{}
	}
	changed := slurmprov.Drift(*new, slurmprov.StateOf(*old, *new))
	var out []PlanChange
	cmds := slurmprov.AmendCommands(*old, *new)
	if held {
		cmds = slurmprov.HeldAmendCommands(*old, *new)
	}
	for _, c := range cmds {
		ch := PlanChange{What: slurmCommandObject(c), Detail: c.String() + " (" + c.Why + ")"}
		switch c.Args[0] {
		case "add":
			ch.Action = DiffCreate
		case "delete":
			ch.Action = DiffDelete
		default:
			ch.Action = DiffUpdate
			switch c.Args[1] {
			case "qos":
				ch.Detail = c.String() + " (" + slurmFieldChanges(changed, "qos "+new.QoS.Name, c) + ")"
			case "account":
				ch.Detail = c.String() + " (" + slurmFieldChanges(changed, "account "+new.Account.Name, c) + ")"
			}
		}
		out = append(out, ch)
	}
	if len(out) == 0 {
		out = append(out, PlanChange{Action: DiffUnchanged, What: "Slurm account " + new.Account.Name + ", QoS " + new.QoS.Name + " and members",
			Detail: "the amended plan changes no sacctmgr object"})
	}
	return out
}

// slurmFieldChanges is "Field: old → new" for each field of the object
// (its Drift name) that the modify command c sets.
func slurmFieldChanges(diffs []slurmprov.Difference, object string, c slurmprov.Command) string {
	var out []string
	for _, d := range diffs {
		if d.Field != "" && d.Object == object && slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, d.Field+"=") }) {
			out = append(out, d.Field+": "+orNone(d.Have)+" → "+orNone(d.Want))
		}
	}
	return strings.Join(out, "; ")
}

// slurmCommandObject names what a sacctmgr command of the plan acts on:
// "Slurm QoS red-gpu", "Slurm account red", "Slurm user hp-red-1 in
// account red, partition gpu", "Slurm coordinators of account red".
func slurmCommandObject(c slurmprov.Command) string {
	arg := func(key string) string {
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, key+"="); ok {
				return v
			}
			if v, ok := strings.CutPrefix(a, strings.ToUpper(key[:1])+key[1:]+"="); ok {
				return v
			}
		}
		return ""
	}
	name := arg("name")
	if c.Args[0] == "add" && len(c.Args) > 2 {
		name = c.Args[2]
	}
	switch kind := c.Args[1]; kind {
	case "qos":
		return "Slurm QoS " + name
	case "coordinator":
		return "Slurm coordinators of account " + arg("account")
	case "user":
		if p := arg("partition"); p != "" {
			return "Slurm user " + name + " in account " + arg("account") + ", partition " + p
		}
		return "Slurm user " + name
	default:
		return "Slurm " + kind + " " + name
	}
}
