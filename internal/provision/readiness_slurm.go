package provision

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
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

// slurmEnforcementCheck reads AccountingStorageEnforce with scontrol show
// config and names each required flag that is not in effect.
func slurmEnforcementCheck(ctx context.Context, r SlurmRunner) Check {
	ch := Check{Name: CheckSlurmEnforcement}
	ctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	out, err := r.Run(ctx, "scontrol", "show", "config")
	if err != nil {
		ch.Status, ch.Detail = CheckUnknown, sentenceOf(err.Error())
		return ch
	}
	value, ok := ParseSlurmConfig(out)["AccountingStorageEnforce"]
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
