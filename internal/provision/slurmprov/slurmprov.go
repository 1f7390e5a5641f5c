// Package slurmprov sets up a team's side of a Slurm cluster's accounting
// (issue 36): a QoS, an account under the portal's parent account, a user
// association per member and the account's coordinators, through Slurm's
// own sacctmgr (run by an internal/slurm Runner, locally or on the
// controller node). It plans, applies, reads back, compares (drift),
// lists an amendment's commands (AmendCommands), retires what an
// amendment renamed (Retire) and removes, like the Kubernetes plan does
// for an EKS connection, and holds the team's jobs (hold.go: a job limit
// on the account, scancel for a drain).
//
// Slurm's accounting model, from its documentation:
//   - an association is (cluster, account, user, partition) and carries
//     limits such as GrpTRES, a fair-share value and the QOS it may use
//     (https://slurm.schedmd.com/accounting.html, "Database Configuration";
//     https://slurm.schedmd.com/resource_limits.html);
//   - sacctmgr adds, modifies, shows and deletes accounts, users and QOS;
//     "-i" commits without asking, "-P" prints parsable output with "|"
//     between fields (https://slurm.schedmd.com/sacctmgr.html); setting a
//     limit to -1 clears it (same page, "GrpTRES ... To clear a previously
//     set value use the modify command with a new value of -1");
//   - with AccountingStorageEnforce=associations,limits,qos a job needs an
//     association, and a group limit keeps a job over it pending with a
//     reason such as AssocGrpGRES (https://slurm.schedmd.com/slurm.conf.html,
//     https://slurm.schedmd.com/resource_limits.html), which the test bed
//     shows (internal/slurm TestTestBedSlurmEnforcesAssociationLimits).
//
// The partitions are HyperPod's (its cluster API's instance-group Slurm
// configuration names them: ClusterSlurmConfigDetails.PartitionNames,
// https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ClusterSlurmConfigDetails.html):
// the portal never edits slurm.conf; it only names partitions in
// associations.
package slurmprov

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/hyperpod-governance/portal/internal/slurm"
)

// QoS is a team's quality of service: its group TRES limits, its priority
// and which QoS its jobs may preempt.
type QoS struct {
	Name        string
	Priority    int
	GrpTRES     map[string]int // e.g. "gres/gpu": 8; absent: no limit
	Preempt     []string       // QoS names this one may preempt
	PreemptMode string         // "requeue", "cancel", ... ("" = the cluster's)
}

// Account is a team's account: under Parent, with its fair share, group
// limits and the QoS its associations may use.
type Account struct {
	Name         string
	Parent       string
	Description  string
	Organization string
	Fairshare    int
	GrpTRES      map[string]int
	QoS          []string
	DefaultQoS   string
}

// User is one member's association: a POSIX user in the team's account, in
// one partition.
type User struct {
	Name      string
	Account   string
	Partition string
}

// Plan is what a team's Slurm connection has on the cluster.
type Plan struct {
	Cluster string
	Parent  Account // the portal's parent account: created if absent, never removed
	QoS     QoS
	Account Account
	Users   []User
	// Coordinators are the POSIX users made coordinators of the team's
	// account (sorted): "a special privileged user, usually an account
	// manager, that can add users or sub-accounts to the account they are
	// coordinator over", who can also change limits on the account's
	// associations and cancel or requeue its jobs
	// (https://slurm.schedmd.com/user_permissions.html, Coordinator); set
	// with "sacctmgr add coordinator account=... names=..."
	// (https://slurm.schedmd.com/sacctmgr.html, SPECIFICATIONS FOR
	// COORDINATOR). A coordinator is per account, on every cluster of the
	// accounting database.
	Coordinators []string
}

// tres renders a TRES map as sacctmgr writes it: "gres/gpu=8,node=2",
// sorted by name.
func tres(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+strconv.Itoa(m[k]))
	}
	return strings.Join(parts, ",")
}

// parseTRES reads sacctmgr's TRES text.
func parseTRES(s string) (map[string]int, error) {
	raw, err := slurm.TRES(s)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int, len(raw))
	for k, v := range raw {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("slurmprov: TRES %q: %s is not a count", s, k)
		}
		out[k] = n
	}
	return out, nil
}

// list is a sorted comma list, as sacctmgr prints QOS and Preempt.
func list(names []string) string {
	s := slices.Clone(names)
	slices.Sort(s)
	return strings.Join(slices.Compact(s), ",")
}

// Command is one sacctmgr call: its arguments after "sacctmgr -i", and
// what it is for.
type Command struct {
	Args []string
	Why  string
}

// String is the command as an operator would type it (the plan preview).
func (c Command) String() string {
	q := make([]string, len(c.Args))
	for i, a := range c.Args {
		if strings.ContainsAny(a, " \t'\"") {
			a = strconv.Quote(a)
		}
		q[i] = a
	}
	return "sacctmgr -i " + strings.Join(q, " ")
}

func qosSettings(q QoS) []string {
	out := []string{"Priority=" + strconv.Itoa(q.Priority)}
	if limit := tres(q.GrpTRES); limit != "" {
		out = append(out, "GrpTRES="+limit)
	}
	if len(q.Preempt) > 0 {
		out = append(out, "Preempt="+list(q.Preempt))
	}
	if q.PreemptMode != "" {
		out = append(out, "PreemptMode="+q.PreemptMode)
	}
	return out
}

func accountSettings(a Account) []string {
	out := []string{"Fairshare=" + strconv.Itoa(a.Fairshare)}
	if limit := tres(a.GrpTRES); limit != "" {
		out = append(out, "GrpTRES="+limit)
	}
	if len(a.QoS) > 0 {
		out = append(out, "QOS="+list(a.QoS))
	}
	if a.DefaultQoS != "" {
		out = append(out, "DefaultQOS="+a.DefaultQoS)
	}
	return out
}

// Commands are the commands that create the plan on an empty cluster, in
// order: the QoS, the parent account, the team's account, each member.
func (p Plan) Commands() []Command {
	cmds := []Command{
		{append([]string{"add", "qos", p.QoS.Name}, qosSettings(p.QoS)...), "the team's QoS: its GPU limit, priority and preemption"},
		{[]string{"add", "account", p.Parent.Name, "Cluster=" + p.Cluster, "Description=" + p.Parent.Description, "Organization=" + p.Parent.Organization},
			"the portal's parent account (created once, shared by every team, never removed)"},
		{append([]string{"add", "account", p.Account.Name, "Cluster=" + p.Cluster, "Parent=" + p.Account.Parent, "Description=" + p.Account.Description, "Organization=" + p.Account.Organization},
			accountSettings(p.Account)...), "the team's account under the portal's, with its share and limits"},
	}
	for _, u := range p.Users {
		cmds = append(cmds, Command{[]string{"add", "user", u.Name, "Cluster=" + p.Cluster, "Account=" + u.Account, "Partition=" + u.Partition},
			"member " + u.Name + " may submit to partition " + u.Partition + " under the team's account"})
	}
	if len(p.Coordinators) > 0 {
		cmds = append(cmds, addCoordinators(p.Account.Name, p.Coordinators))
	}
	return cmds
}

// addCoordinators and removeCoordinators name the users in one command
// ("names=a,b"). The users must exist: the plan adds its members first.
func addCoordinators(account string, names []string) Command {
	return Command{[]string{"add", "coordinator", "account=" + account, "names=" + list(names)},
		"the contract's owners " + list(names) + " coordinate the team's account (may manage its users, limits and jobs)"}
}

func removeCoordinators(account string, names []string) Command {
	return Command{[]string{"delete", "coordinator", "account=" + account, "names=" + list(names)},
		list(names) + " no longer coordinate account " + account}
}

// State is what the accounting database holds of a plan's objects.
type State struct {
	QoS     *QoS     // nil: absent
	Parent  bool     // the parent account exists
	Account *Account // nil: absent (its association on the plan's cluster)
	Users   []User   // the account's user associations
	// AccountRecord: the account itself exists (sacctmgr show account),
	// with or without an association; AccountElsewhere: it has
	// associations on another cluster of the same accounting database.
	// An account outlives the deletion of its cluster's association
	// ("delete account where name=X cluster=C" leaves the account), so
	// revocation deletes it whole when no other cluster uses it.
	AccountRecord, AccountElsewhere bool
	// Coordinators are the account's coordinators (sorted), read with
	// the account record.
	Coordinators []string
}

// Read reads the plan's objects back with sacctmgr show -P.
func Read(ctx context.Context, r slurm.Runner, p Plan) (State, error) {
	var s State
	qos, err := slurm.Query(ctx, r, "sacctmgr", "-P", "show", "qos", "where", "name="+p.QoS.Name, "format=Name,Priority,GrpTRES,Preempt,PreemptMode")
	if err != nil {
		return s, err
	}
	for _, q := range qos {
		if q["Name"] != p.QoS.Name {
			continue
		}
		got := QoS{Name: q["Name"], PreemptMode: q["PreemptMode"]}
		if got.Priority, err = strconv.Atoi(q["Priority"]); err != nil {
			return s, fmt.Errorf("slurmprov: QoS %s priority %q", got.Name, q["Priority"])
		}
		if got.GrpTRES, err = parseTRES(q["GrpTRES"]); err != nil {
			return s, err
		}
		if q["Preempt"] != "" {
			got.Preempt = strings.Split(q["Preempt"], ",")
		}
		s.QoS = &got
	}
	assocs, err := slurm.Query(ctx, r, "sacctmgr", "-P", "show", "associations", "where", "cluster="+p.Cluster, "account="+p.Account.Name+","+p.Parent.Name,
		"format=Account,User,Partition,ParentName,Fairshare,GrpTRES,QOS,DefaultQOS")
	if err != nil {
		return s, err
	}
	for _, a := range assocs {
		switch {
		case a["Account"] == p.Parent.Name && a["User"] == "":
			s.Parent = true
		case a["Account"] == p.Account.Name && a["User"] == "":
			got := Account{Name: a["Account"], Parent: a["ParentName"], DefaultQoS: a["Def QOS"]}
			if got.Fairshare, err = strconv.Atoi(a["Share"]); err != nil {
				return s, fmt.Errorf("slurmprov: account %s share %q", got.Name, a["Share"])
			}
			if got.GrpTRES, err = parseTRES(a["GrpTRES"]); err != nil {
				return s, err
			}
			if a["QOS"] != "" {
				got.QoS = strings.Split(a["QOS"], ",")
			}
			s.Account = &got
		case a["Account"] == p.Account.Name:
			s.Users = append(s.Users, User{Name: a["User"], Account: a["Account"], Partition: a["Partition"]})
		}
	}
	// Description and organization are the account's, not an association's;
	// so are its coordinators ("withcoord", printed under the header
	// "Coord Accounts" by sacctmgr 22.05, a comma list of users).
	accts, err := slurm.Query(ctx, r, "sacctmgr", "-P", "show", "account", "where", "name="+p.Account.Name, "withcoord", "format=Account,Descr,Org,Coordinators")
	if err != nil {
		return s, err
	}
	for _, a := range accts {
		if a["Account"] == p.Account.Name {
			s.AccountRecord = true
			if c := a["Coord Accounts"]; c != "" {
				// Once each: sacctmgr 22.05 printed each coordinator twice
				// on the test bed while other tests changed other
				// accounts of the same users.
				s.Coordinators = strings.Split(c, ",")
				slices.Sort(s.Coordinators)
				s.Coordinators = slices.Compact(s.Coordinators)
			}
			if s.Account != nil {
				s.Account.Description, s.Account.Organization = a["Descr"], a["Org"]
			}
		}
	}
	if s.AccountRecord {
		all, err := slurm.Query(ctx, r, "sacctmgr", "-P", "show", "associations", "where", "account="+p.Account.Name, "format=Cluster,Account")
		if err != nil {
			return s, err
		}
		for _, a := range all {
			if a["Cluster"] != p.Cluster {
				s.AccountElsewhere = true
			}
		}
	}
	return s, nil
}

// Difference is one way the cluster differs from the plan.
type Difference struct {
	Object string // "qos red-qos", "account red", "user hp-red-1 (gpu)"
	Field  string // "" for a missing or unexpected object
	Want   string
	Have   string
}

func (d Difference) String() string {
	switch {
	case d.Field == "" && d.Have == "":
		return d.Object + " is missing"
	case d.Field == "":
		return d.Object + " is not in the plan"
	}
	return fmt.Sprintf("%s: %s is %q, the plan says %q", d.Object, d.Field, d.Have, d.Want)
}

// Drift compares what Read found with the plan.
func Drift(p Plan, s State) []Difference {
	var out []Difference
	diff := func(obj, field, want, have string) {
		if want != have {
			out = append(out, Difference{obj, field, want, have})
		}
	}
	qname := "qos " + p.QoS.Name
	if s.QoS == nil {
		out = append(out, Difference{Object: qname, Want: "present"})
	} else {
		diff(qname, "Priority", strconv.Itoa(p.QoS.Priority), strconv.Itoa(s.QoS.Priority))
		diff(qname, "GrpTRES", tres(p.QoS.GrpTRES), tres(s.QoS.GrpTRES))
		diff(qname, "Preempt", list(p.QoS.Preempt), list(s.QoS.Preempt))
		if p.QoS.PreemptMode != "" {
			diff(qname, "PreemptMode", strings.ToLower(p.QoS.PreemptMode), strings.ToLower(s.QoS.PreemptMode))
		}
	}
	if !s.Parent {
		out = append(out, Difference{Object: "account " + p.Parent.Name, Want: "present"})
	}
	aname := "account " + p.Account.Name
	if s.Account == nil {
		out = append(out, Difference{Object: aname, Want: "present"})
	} else {
		a := s.Account
		diff(aname, "Parent", p.Account.Parent, a.Parent)
		diff(aname, "Fairshare", strconv.Itoa(p.Account.Fairshare), strconv.Itoa(a.Fairshare))
		diff(aname, "GrpTRES", tres(p.Account.GrpTRES), tres(a.GrpTRES))
		diff(aname, "QOS", list(p.Account.QoS), list(a.QoS))
		diff(aname, "DefaultQOS", p.Account.DefaultQoS, a.DefaultQoS)
		// sacctmgr stores these two lower-cased: compared without case,
		// restored with the plan's text.
		if !strings.EqualFold(p.Account.Description, a.Description) {
			out = append(out, Difference{aname, "Description", p.Account.Description, a.Description})
		}
		if !strings.EqualFold(p.Account.Organization, a.Organization) {
			out = append(out, Difference{aname, "Organization", p.Account.Organization, a.Organization})
		}
	}
	want := map[User]bool{}
	for _, u := range p.Users {
		want[u] = true
	}
	have := map[User]bool{}
	for _, u := range s.Users {
		have[u] = true
	}
	for _, u := range p.Users {
		if !have[u] {
			out = append(out, Difference{Object: userName(u), Want: "present"})
		}
	}
	for _, u := range s.Users {
		if !want[u] {
			out = append(out, Difference{Object: userName(u), Have: "present"})
		}
	}
	missing, extra := coordinatorChanges(p, s)
	for _, c := range missing {
		out = append(out, Difference{Object: coordinatorName(p.Account.Name, c), Want: "present"})
	}
	for _, c := range extra {
		out = append(out, Difference{Object: coordinatorName(p.Account.Name, c), Have: "present"})
	}
	return out
}

// coordinatorChanges are the plan's coordinators the account lacks and
// the account's coordinators the plan does not name.
func coordinatorChanges(p Plan, s State) (missing, extra []string) {
	for _, c := range p.Coordinators {
		if !slices.Contains(s.Coordinators, c) {
			missing = append(missing, c)
		}
	}
	for _, c := range s.Coordinators {
		if !slices.Contains(p.Coordinators, c) {
			extra = append(extra, c)
		}
	}
	return missing, extra
}

func coordinatorName(account, user string) string {
	return fmt.Sprintf("coordinator %s of account %s", user, account)
}

func userName(u User) string {
	return fmt.Sprintf("user %s (account %s, partition %s)", u.Name, u.Account, u.Partition)
}

// Apply makes the cluster match the plan: it reads the state, runs
// ApplyCommands and then reads again and reports any difference left. It
// returns the commands it ran (none when nothing differed).
func Apply(ctx context.Context, r slurm.Runner, p Plan) ([]Command, error) {
	s, err := Read(ctx, r, p)
	if err != nil {
		return nil, err
	}
	ran, err := run(ctx, r, ApplyCommands(p, s))
	if err != nil || len(ran) == 0 {
		return ran, err
	}
	after, err := Read(ctx, r, p)
	if err != nil {
		return ran, err
	}
	if left := Drift(p, after); len(left) > 0 {
		return ran, fmt.Errorf("slurmprov: after applying, the cluster still differs from the plan: %s", left[0])
	}
	return ran, nil
}

// run runs cmds in order with "sacctmgr -i" and returns those that ran;
// it stops at the first that fails.
func run(ctx context.Context, r slurm.Runner, cmds []Command) ([]Command, error) {
	var ran []Command
	for _, c := range cmds {
		if _, err := r.Run(ctx, "sacctmgr", append([]string{"-i"}, c.Args...)...); err != nil && !alreadyGone(c, err) {
			return ran, err
		}
		ran = append(ran, c)
	}
	return ran, nil
}

// alreadyGone: a delete that failed only because what it removes is not
// there any more (sacctmgr prints "Nothing deleted" and exits 1, Slurm
// 22.05 on the test bed), as when someone removed it between the read the
// commands were planned from and the delete. What the delete is for holds,
// so revocation and retirement go on instead of failing on a gap they did
// not make; any other failure of a delete still fails.
func alreadyGone(c Command, err error) bool {
	return len(c.Args) > 0 && c.Args[0] == "delete" && strings.Contains(err.Error(), "Nothing deleted")
}

// ApplyCommands are the commands that take the accounting database from
// s (what Read found) to the plan: it adds what is missing, modifies the
// fields that differ (only those: sacctmgr fails a modify that changes
// nothing), adds the missing coordinators, and removes the coordinators
// and member associations the plan no longer has. It is pure.
func ApplyCommands(p Plan, s State) []Command {
	create := p.Commands()
	diffs := Drift(p, s)
	var cmds []Command
	switch {
	case s.QoS == nil:
		cmds = append(cmds, create[0])
	default:
		if set := settings(diffs, "qos "+p.QoS.Name, nil, s.QoS.GrpTRES); len(set) > 0 {
			cmds = append(cmds, Command{append([]string{"modify", "qos", "where", "name=" + p.QoS.Name, "set"}, set...), "restore the team's QoS"})
		}
	}
	if !s.Parent {
		cmds = append(cmds, create[1])
	}
	switch aname := "account " + p.Account.Name; {
	case s.Account == nil:
		cmds = append(cmds, create[2])
	default:
		if set := settings(diffs, aname, []string{"Parent", "Fairshare", "GrpTRES", "QOS", "DefaultQOS"}, s.Account.GrpTRES); len(set) > 0 {
			cmds = append(cmds, Command{append([]string{"modify", "account", "where", "name=" + p.Account.Name, "cluster=" + p.Cluster, "set"}, set...),
				"restore the team's account association"})
		}
		if set := settings(diffs, aname, []string{"Description", "Organization"}, nil); len(set) > 0 {
			cmds = append(cmds, Command{append([]string{"modify", "account", "where", "name=" + p.Account.Name, "set"}, set...), "restore the team's account"})
		}
	}
	have := map[User]bool{}
	for _, u := range s.Users {
		have[u] = true
	}
	for i, u := range p.Users {
		if !have[u] {
			cmds = append(cmds, create[3+i])
		}
	}
	missing, extra := coordinatorChanges(p, s)
	if len(missing) > 0 {
		cmds = append(cmds, addCoordinators(p.Account.Name, missing))
	}
	if len(extra) > 0 {
		cmds = append(cmds, removeCoordinators(p.Account.Name, extra))
	}
	for _, u := range s.Users {
		if !slices.Contains(p.Users, u) {
			cmds = append(cmds, removeUser(p.Cluster, u))
		}
	}
	return cmds
}

// settings are the "Field=value" settings that restore obj's differing
// fields (only those named in fields, when fields is not nil). A TRES the
// cluster has and the plan does not is cleared with -1.
func settings(diffs []Difference, obj string, fields []string, haveTRES map[string]int) []string {
	var out []string
	for _, d := range diffs {
		if d.Object != obj || d.Field == "" || (fields != nil && !slices.Contains(fields, d.Field)) {
			continue
		}
		v := d.Want
		if d.Field == "GrpTRES" {
			want, _ := parseTRES(d.Want)
			for k := range haveTRES {
				if _, ok := want[k]; !ok {
					want[k] = -1
				}
			}
			v = tres(want)
		}
		out = append(out, d.Field+"="+v)
	}
	return out
}

func removeUser(cluster string, u User) Command {
	return Command{[]string{"delete", "user", "where", "name=" + u.Name, "cluster=" + cluster, "account=" + u.Account, "partition=" + u.Partition},
		"member " + u.Name + " no longer submits to partition " + u.Partition + " under the team's account"}
}

// RevokeCommands are the commands that remove the plan, in order: the
// account's coordinators (so no owner manages it any more; kept while
// another cluster still uses the account, as coordinators are per
// account), the members' associations (so no new job is accepted), the
// team's account (whole, unless another cluster still has an association
// of it), then its QoS (which no association names any more). The parent
// account stays.
func (p Plan) RevokeCommands(s State) []Command {
	var cmds []Command
	if len(s.Coordinators) > 0 && s.AccountRecord && !s.AccountElsewhere {
		cmds = append(cmds, removeCoordinators(p.Account.Name, s.Coordinators))
	}
	for _, u := range s.Users {
		cmds = append(cmds, removeUser(p.Cluster, u))
	}
	switch {
	case s.AccountRecord && !s.AccountElsewhere:
		// No other cluster uses it: the account goes whole, its
		// association on this cluster with it.
		cmds = append(cmds, Command{[]string{"delete", "account", "where", "name=" + p.Account.Name}, "the team's account"})
	case s.Account != nil:
		cmds = append(cmds, Command{[]string{"delete", "account", "where", "name=" + p.Account.Name, "cluster=" + p.Cluster}, "the team's account on this cluster (another cluster still uses it)"})
	}
	if s.QoS != nil {
		cmds = append(cmds, Command{[]string{"delete", "qos", "where", "name=" + p.QoS.Name}, "the team's QoS"})
	}
	return cmds
}

// Revoke removes the plan's objects that are there (idempotent: a second
// run finds nothing and runs nothing) and returns the commands it ran.
func Revoke(ctx context.Context, r slurm.Runner, p Plan) ([]Command, error) {
	s, err := Read(ctx, r, p)
	if err != nil {
		return nil, err
	}
	return run(ctx, r, p.RevokeCommands(s))
}

// Renamed reports whether an amendment from old to new renames the team's
// account or its QoS: what Retire removes.
func Renamed(old, new Plan) bool {
	return old.Account.Name != new.Account.Name || old.QoS.Name != new.QoS.Name
}

// RetireCommands are the commands that remove, once new is applied, the
// account and QoS of old that new renamed (s is what Read(old) found;
// defaults maps users to their default account). They are revocation's
// (RevokeCommands), restricted to the renamed objects and in its safe
// order: the old account's coordinators, its member associations, the old
// account, then the old QoS. Before a member's old association goes, a
// member of new whose default account is the old one gets new's account
// as its default: sacctmgr refuses to delete an account that is still a
// user's default ("You can not remove the default account of a user",
// sacctmgr 22.05 on the test bed), and deleting the association alone
// would leave the user with no default account. The new account and QoS
// exist by then (the amendment applies new first), and the members'
// associations in it too, so the members keep submitting throughout. It is
// pure; empty when nothing was renamed.
func RetireCommands(old, new Plan, s State, defaults map[string]string) []Command {
	if old.Account.Name == new.Account.Name {
		s.Users, s.Account, s.AccountRecord, s.Coordinators = nil, nil, false, nil
	}
	if old.QoS.Name == new.QoS.Name {
		s.QoS = nil
	}
	var cmds []Command
	moved := map[string]bool{}
	for _, u := range s.Users {
		if moved[u.Name] || defaults[u.Name] != old.Account.Name || !slices.ContainsFunc(new.Users, func(n User) bool { return n.Name == u.Name }) {
			continue
		}
		moved[u.Name] = true
		cmds = append(cmds, Command{[]string{"modify", "user", "where", "name=" + u.Name, "cluster=" + old.Cluster, "set", "DefaultAccount=" + new.Account.Name},
			"member " + u.Name + "'s default account becomes " + new.Account.Name + " before " + old.Account.Name + " goes"})
	}
	return append(cmds, old.RevokeCommands(s)...)
}

// Retire removes the account and QoS of old that new renamed
// (RetireCommands, on what Read(old) and the members' default accounts
// are now) and returns the commands it ran: an amendment's last step,
// after new is applied. Idempotent: once they are gone it runs nothing.
func Retire(ctx context.Context, r slurm.Runner, old, new Plan) ([]Command, error) {
	if !Renamed(old, new) {
		return nil, nil
	}
	s, err := Read(ctx, r, old)
	if err != nil {
		return nil, err
	}
	defaults := map[string]string{}
	if old.Account.Name != new.Account.Name && len(s.Users) > 0 {
		var names []string
		for _, u := range s.Users {
			names = append(names, u.Name)
		}
		rows, err := slurm.Query(ctx, r, "sacctmgr", "-P", "show", "user", "where", "name="+list(names), "format=User,DefaultAccount")
		if err != nil {
			return nil, err
		}
		for _, u := range rows {
			defaults[u["User"]] = u["Def Acct"]
		}
	}
	return run(ctx, r, RetireCommands(old, new, s, defaults))
}

// AmendCommands are the commands an amendment from old to new runs on an
// accounting database that matches old: ApplyCommands(new) from old's
// objects (those new keeps by name), then RetireCommands (the renamed
// account and QoS, whose members all had the old account as default, as
// the plan made them). The plan diff shows them. It is pure.
func AmendCommands(old, new Plan) []Command {
	return append(ApplyCommands(new, StateOf(old, new)), RetireCommands(old, new, StateOf(old, old), defaultsOf(old))...)
}

// HeldAmendCommands are AmendCommands for a team on hold (old's account
// has GrpJobs=0): when the amendment moves the account association
// (MovesAccount), the command that adds new's account carries the hold
// (HeldApplyCommands), as ApplyKeepingHold runs it.
func HeldAmendCommands(old, new Plan) []Command {
	if !MovesAccount(old, new) {
		return AmendCommands(old, new)
	}
	return append(HeldApplyCommands(new, StateOf(old, new), ""), RetireCommands(old, new, StateOf(old, old), defaultsOf(old))...)
}

// StateOf is what Read(p) finds on a database that holds exactly the
// objects of plan have (and nothing else).
func StateOf(have, p Plan) State {
	var s State
	if have.QoS.Name == p.QoS.Name {
		q := have.QoS
		s.QoS = &q
	}
	s.Parent = have.Parent.Name == p.Parent.Name && have.Cluster == p.Cluster
	if have.Account.Name == p.Account.Name {
		s.AccountRecord = true
		s.Coordinators = slices.Clone(have.Coordinators)
		if have.Cluster == p.Cluster {
			a := have.Account
			s.Account = &a
			s.Users = slices.Clone(have.Users)
		} else {
			s.AccountElsewhere = true
		}
	}
	return s
}

func defaultsOf(p Plan) map[string]string {
	out := map[string]string{}
	for _, u := range p.Users {
		out[u.Name] = p.Account.Name
	}
	return out
}
