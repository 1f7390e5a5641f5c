package provision

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hyperpod-governance/portal/internal/slurm"
)

// SlurmRunner runs one Slurm command: internal/slurm's Runner (Local, or
// slurmssm's Session Manager transport), restated here because provision
// imports workflow and awsprov only (imports_test.go).
type SlurmRunner interface {
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// CheckSlurmController is the readiness check of a Slurm cluster's
// transport: can the portal run Slurm's commands on the controller.
const CheckSlurmController = "Slurm controller reachable"

// slurmControllerCheck runs `scontrol ping` through r (for a HyperPod
// cluster, slurmssm's Session Manager transport): it fails when the
// command cannot be run (IAM, the node's Systems Manager connection,
// Session Manager preferences) or when slurmctld is not UP.
func slurmControllerCheck(ctx context.Context, r SlurmRunner) Check {
	ch := Check{Name: CheckSlurmController}
	ctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	out, err := r.Run(ctx, "scontrol", "ping")
	text := strings.TrimSpace(string(out))
	switch {
	case err != nil:
		ch.Status, ch.Detail = CheckFailing, sentenceOf(err.Error())
		ch.Todo = "Let the portal's role start Session Manager sessions on the controller node (portal iam-policy: ssm:StartSession, ssm:TerminateSession, ssmmessages:OpenDataChannel), check that the node is InService and connected to Systems Manager, and that Session Manager neither requires KMS encryption nor runs sessions as a user who is not a Slurm administrator."
	case !strings.Contains(text, " is UP"):
		ch.Status, ch.Detail = CheckFailing, sentenceOf("scontrol ping: "+text)
		ch.Todo = "Start slurmctld on the controller node: accounting changes and holds need it."
	default:
		ch.Status, ch.Detail = CheckOK, sentenceOf(text)
	}
	return ch
}

// The readiness checks of a Slurm cluster's accounting and partitions.
const (
	CheckSlurmEnforcement = "Slurm accounting enforcement"
	CheckSlurmPartitions  = "Slurm partitions"
)

// SlurmPartitionUse is a partition an approved Slurm contract names: its
// team's associations are made in it (SlurmPlan).
type SlurmPartitionUse struct {
	Partition string
	Team      string
}

// slurmRequiredEnforcement are the AccountingStorageEnforce flags a Slurm
// connection relies on (https://slurm.schedmd.com/slurm.conf.html,
// AccountingStorageEnforce), each with what is lost without it.
var slurmRequiredEnforcement = []struct{ flag, without string }{
	// "By setting associations, no new job is allowed to run unless a
	// corresponding association exists in the system."
	{"associations", "a job runs without an association, so a team's account, and its revocation, bind nothing"},
	// "If limits are enforced, users can be limited by association to
	// whatever job size or run time limits are defined."
	{"limits", "the account's GrpTRES GPU limit is not enforced"},
	// "With qos ... enforced jobs will not be scheduled unless a valid
	// qos ... is specified."
	{"qos", "a job may run under a QoS its association does not allow, outside the team's QoS limit and priority"},
}

// SlurmEnforcement is the set of AccountingStorageEnforce flags in effect
// for the value scontrol show config prints, with Slurm's implications:
// "all" is every flag but nojobs and nosteps; "If limits, qos, or wckeys
// are set, associations will automatically be set"; "If safe is set,
// limits and associations will automatically be set"
// (https://slurm.schedmd.com/slurm.conf.html, AccountingStorageEnforce).
// "none" (or empty) is no flag.
func SlurmEnforcement(value string) map[string]bool {
	on := map[string]bool{}
	for _, f := range strings.Split(strings.ToLower(value), ",") {
		switch f = strings.TrimSpace(f); f {
		case "", "none", "(null)":
		case "all":
			for _, g := range []string{"associations", "limits", "qos", "safe", "wckeys"} {
				on[g] = true
			}
		default:
			on[f] = true
		}
	}
	if on["safe"] {
		on["limits"] = true
	}
	if on["limits"] || on["qos"] || on["wckeys"] || on["safe"] {
		on["associations"] = true
	}
	return on
}

// ParseSlurmConfig reads scontrol show config's "Name = value" lines.
func ParseSlurmConfig(out []byte) map[string]string {
	conf := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.ContainsAny(strings.TrimSpace(k), " \t") {
			conf[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return conf
}

// readSlurmConfig runs scontrol show config through r once, for the
// checks that read slurmctld's configuration (enforcement, visibility).
func readSlurmConfig(ctx context.Context, r SlurmRunner) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	out, err := r.Run(ctx, "scontrol", "show", "config")
	if err != nil {
		return nil, err
	}
	return ParseSlurmConfig(out), nil
}

// slurmEnforcementCheck reads AccountingStorageEnforce in scontrol show
// config (conf, or the error reading it) and names each required flag that
// is not in effect.
func slurmEnforcementCheck(conf map[string]string, err error) Check {
	ch := Check{Name: CheckSlurmEnforcement}
	if err != nil {
		ch.Status, ch.Detail = CheckUnknown, sentenceOf(err.Error())
		return ch
	}
	value, ok := conf["AccountingStorageEnforce"]
	if !ok {
		ch.Status, ch.Detail = CheckUnknown, "scontrol show config prints no AccountingStorageEnforce."
		return ch
	}
	on := SlurmEnforcement(value)
	var missing []string
	for _, f := range slurmRequiredEnforcement {
		if !on[f.flag] {
			missing = append(missing, f.flag+" (without it "+f.without+")")
		}
	}
	if len(missing) == 0 {
		ch.Status, ch.Detail = CheckOK, "AccountingStorageEnforce = "+value+": a job needs an association, and the accounts' and QoS limits hold."
		return ch
	}
	ch.Status = CheckFailing
	ch.Detail = "AccountingStorageEnforce = " + orNone(value) + " lacks " + strings.Join(missing, "; ") + "."
	ch.Todo = "Set AccountingStorageEnforce=associations,limits,qos (safe may be added) in slurm.conf on the controller node and restart slurmctld: a restart is required for it to take effect."
	return ch
}

// ParseSinfoPartitions reads `sinfo --noheader --format=%R|%a`: each
// partition's name and availability (up, down, drain, inact), once.
func ParseSinfoPartitions(out []byte) (map[string]string, error) {
	parts := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		name, avail, ok := strings.Cut(line, "|")
		if !ok || name == "" {
			return nil, fmt.Errorf("sinfo: %q is not partition|availability", line)
		}
		parts[name] = avail
	}
	return parts, nil
}

// slurmPartitionsCheck lists the cluster's partitions (sinfo %R, the name
// without the default's "*", and %a, its availability;
// https://slurm.schedmd.com/sinfo.html) and checks that every partition an
// approved contract names exists and is up: a partition's State UP "Designates
// that new jobs may be queued on the partition, and that jobs may be
// allocated nodes and run from the partition"; DOWN queues but runs
// nothing, DRAIN and INACTIVE queue nothing
// (https://slurm.schedmd.com/slurm.conf.html, PartitionName State).
func slurmPartitionsCheck(ctx context.Context, r SlurmRunner, uses func(context.Context) ([]SlurmPartitionUse, error)) Check {
	ch := Check{Name: CheckSlurmPartitions}
	ctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	out, err := r.Run(ctx, "sinfo", "--noheader", "--format=%R|%a")
	if err != nil {
		ch.Status, ch.Detail = CheckUnknown, sentenceOf(err.Error())
		return ch
	}
	parts, err := ParseSinfoPartitions(out)
	if err != nil {
		ch.Status, ch.Detail = CheckUnknown, sentenceOf(err.Error())
		return ch
	}
	var have []string
	for _, p := range slices.Sorted(maps.Keys(parts)) {
		have = append(have, p+" ("+parts[p]+")")
	}
	ch.Status, ch.Detail = CheckOK, "Partitions: "+orNone(strings.Join(have, ", "))+"."
	if uses == nil {
		ch.Detail += " The approved contracts' partitions are not checked (no store)."
		return ch
	}
	used, err := uses(ctx)
	if err != nil {
		ch.Status, ch.Detail = CheckUnknown, ch.Detail+" The approved contracts' partitions could not be read: "+sentenceOf(err.Error())
		return ch
	}
	teams := map[string][]string{}
	for _, u := range used {
		p := strings.ToLower(u.Partition)
		if !slices.Contains(teams[p], u.Team) {
			teams[p] = append(teams[p], u.Team)
		}
	}
	var missing, down, fine []string
	for _, p := range slices.Sorted(maps.Keys(teams)) {
		who := p + " (" + strings.Join(teams[p], ", ") + ")"
		switch avail, ok := parts[p]; {
		case !ok:
			missing = append(missing, who)
		case avail != "up":
			down = append(down, who+" is "+avail)
		default:
			fine = append(fine, who)
		}
	}
	if len(fine) > 0 {
		ch.Detail += " Named by approved contracts and up: " + strings.Join(fine, ", ") + "."
	}
	switch {
	case len(missing) > 0:
		ch.Status = CheckFailing
		ch.Detail += " Named by approved contracts but not on the cluster: " + strings.Join(missing, ", ") + "."
		ch.Todo = "Create the missing partitions (on HyperPod, an instance group's Slurm configuration names its partitions) or amend the contracts to a partition the cluster has: their members cannot submit there."
	case len(down) > 0:
		ch.Status = CheckWarning
		ch.Detail += " Named by approved contracts but not up: " + strings.Join(down, ", ") + "."
		ch.Todo = "Set the partitions up (scontrol update PartitionName=... State=UP) once their nodes are ready: jobs there do not start."
	case len(used) == 0:
		ch.Detail += " No approved contract names a partition."
	}
	return ch
}

// CheckSlurmTaskVisibility is the readiness check of who sees a Slurm
// team's jobs: Studio task visibility for Slurm (issue 36).
const CheckSlurmTaskVisibility = "Slurm task visibility (Studio)"

// SlurmPrivate reports whether a PrivateData value (as scontrol show config
// or sacctmgr show configuration print it: a comma list such as
// "accounts,jobs,usage", or "none") hides flag.
func SlurmPrivate(value, flag string) bool {
	for _, f := range strings.Split(strings.ToLower(value), ",") {
		if strings.TrimSpace(f) == flag {
			return true
		}
	}
	return false
}

// privateValue is a PrivateData value as the page shows it: Slurm prints
// "none" when nothing is private; an empty value reads the same.
func privateValue(v string) string {
	if v == "" {
		return "none"
	}
	return v
}

// ParseSlurmDBDConfig reads the "SlurmDBD configuration:" part of sacctmgr
// show configuration (the slurmdbd.conf values slurmdbd reports; the lines
// before it are slurm.conf's) as ParseSlurmConfig reads scontrol's. found
// is false when the output has no such part.
func ParseSlurmDBDConfig(out []byte) (conf map[string]string, found bool) {
	_, rest, found := strings.Cut(string(out), "SlurmDBD configuration:")
	if !found {
		return nil, false
	}
	return ParseSlurmConfig([]byte(rest)), true
}

// slurmVisibilityCheck checks that a member sees only their own jobs.
//
// AWS's Studio integration with a HyperPod Slurm cluster runs a member's
// session on the cluster as the OS user the SSMSessionRunAs tag of their
// role names (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-studio-setup-slurm.html),
// so what the member's Studio session, or any Slurm command they run, shows
// of other users' jobs is what Slurm shows that user. No AWS page that
// describes restricting Slurm task visibility in Studio was found (the
// queries are in docs/platform-reference.md); the check rests on Slurm's
// own documentation of PrivateData:
//   - slurm.conf (slurmctld: squeue, scontrol show job): "PrivateData ...
//     controls what type of information is hidden from regular users. By
//     default, all information is visible to all users. User SlurmUser and
//     root can always view all information ... jobs: Prevents users from
//     viewing jobs or job steps belonging to other users"
//     (https://slurm.schedmd.com/slurm.conf.html, PrivateData), read with
//     scontrol show config (conf, or confErr);
//   - slurmdbd.conf (the accounting records sacct reads, with slurmdbd, as
//     HyperPod keeps them): "jobs: prevents users from viewing job records
//     belonging to other users unless they are coordinators of the account
//     running the job when using sacct"
//     (https://slurm.schedmd.com/slurmdbd.conf.html, PrivateData), read
//     with sacctmgr show configuration ("report current system
//     configuration", https://slurm.schedmd.com/sacctmgr.html), whose
//     "SlurmDBD configuration:" part is slurmdbd's.
//
// The team's owners are its account's coordinators (SlurmCoordinators), so
// with jobs private they still see the team's job records in sacct.
// Missing on either side is a warning: jobs run and are governed, but every
// member sees everyone's jobs.
func slurmVisibilityCheck(ctx context.Context, r SlurmRunner, conf map[string]string, confErr error) Check {
	ch := Check{Name: CheckSlurmTaskVisibility}
	if confErr != nil {
		ch.Status, ch.Detail = CheckUnknown, sentenceOf(confErr.Error())
		return ch
	}
	ctld, ok := conf["PrivateData"]
	if !ok {
		ch.Status, ch.Detail = CheckUnknown, "scontrol show config prints no PrivateData."
		return ch
	}
	ctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	out, err := r.Run(ctx, "sacctmgr", "show", "configuration")
	dbd, found := ParseSlurmDBDConfig(out)
	dbdValue, dbdOK := dbd["PrivateData"]
	var missing, todo []string
	if !SlurmPrivate(ctld, "jobs") {
		missing = append(missing, "slurm.conf's PrivateData = "+privateValue(ctld)+" lacks jobs: squeue and scontrol show every user's jobs to every member, in Studio as in a shell")
		todo = append(todo, "add jobs to PrivateData in slurm.conf on the controller node (scontrol reconfigure)")
	}
	switch {
	case err != nil:
		ch.Detail = "slurmdbd's PrivateData could not be read: " + sentenceOf(err.Error()) + " "
	case !found || !dbdOK:
		ch.Detail = "sacctmgr show configuration prints no slurmdbd PrivateData. "
	case !SlurmPrivate(dbdValue, "jobs"):
		missing = append(missing, "slurmdbd.conf's PrivateData = "+privateValue(dbdValue)+" lacks jobs: sacct shows every user's job records to every member")
		todo = append(todo, "add jobs to PrivateData in slurmdbd.conf and restart slurmdbd")
	}
	switch {
	case len(missing) > 0:
		ch.Status = CheckWarning
		ch.Detail += strings.Join(missing, "; ") + "."
		ch.Todo = "Set PrivateData=jobs (other flags may be added) so that a member sees only their own jobs and the team's owners, as its account's coordinators, its job records: " +
			strings.Join(todo, ", and ") + "."
	case ch.Detail != "":
		ch.Status = CheckUnknown
		ch.Detail += "slurm.conf's PrivateData = " + ctld + " hides other users' jobs from squeue."
	default:
		ch.Status = CheckOK
		ch.Detail = "PrivateData hides other users' jobs in slurm.conf (" + ctld + ") and slurmdbd.conf (" + dbdValue + "): a member sees only their own jobs; the team's owners, its account's coordinators, see its job records in sacct."
	}
	return ch
}

// CheckSlurmGPUs is the readiness check of the Slurm nodes' declared GPUs
// against their instance types'.
const CheckSlurmGPUs = "Slurm nodes' GPUs"

// slurmGPUsCheck reads the nodes (sinfo, slurm.Nodes) and compares each
// node's GPUs, as its generic resources declare them (gres/gpu, which
// Slurm schedules and the team QoS's GrpTRES limits), with the
// accelerators of the instance type its partition maps to
// (partitionTypes; accel, the settings' table of AWS's figures). The
// inventory counts capacity in instances of a type, so approvals count each
// usable node as the type's full GPUs: a node that declares fewer (a GPU
// failed and was left out of gres.conf, a node of another type in the
// partition, a wrong partition map) holds less than the portal counts,
// and one that declares more is not the type the map says. Nodes of a
// partition the map does not name, and types without accelerators, are
// not compared.
func slurmGPUsCheck(ctx context.Context, r SlurmRunner, partitionTypes map[string]string, accel map[string]ResourcesPerInstance) Check {
	ch := Check{Name: CheckSlurmGPUs}
	ctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	nodes, err := slurm.Nodes(ctx, r)
	if err != nil {
		ch.Status, ch.Detail = CheckUnknown, sentenceOf(err.Error())
		return ch
	}
	seen := map[string]bool{}
	var off []string
	compared := 0
	for _, n := range nodes {
		typ := partitionTypes[n.Partition]
		want := accel[typ].Accelerators
		if typ == "" || want == 0 || seen[n.Name] {
			continue
		}
		seen[n.Name] = true
		compared++
		if n.GPUs != want {
			off = append(off, fmt.Sprintf("%s (partition %s, %s) declares %d GPUs, the type has %d", n.Name, n.Partition, typ, n.GPUs, want))
		}
	}
	switch {
	case len(off) > 0:
		ch.Status = CheckWarning
		ch.Detail = "Nodes whose GPUs differ from their instance type's: " + strings.Join(off, "; ") +
			". Approvals count each usable node as its type's full GPUs, so the capacity they count is not what Slurm can allocate."
		ch.Todo = "Check the nodes' gres.conf and Gres= in slurm.conf (scontrol show node NAME), and the settings' slurm.partition_instance_types; replace a node whose GPU failed (on HyperPod, a node replacement)."
	case compared == 0:
		ch.Status = CheckUnknown
		ch.Detail = "No node of a partition in slurm.partition_instance_types with an accelerated instance type: nothing to compare."
	default:
		ch.Status = CheckOK
		ch.Detail = fmt.Sprintf("The %d nodes of the mapped partitions declare their instance types' GPUs.", compared)
	}
	return ch
}
