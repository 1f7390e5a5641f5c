package slurm

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// BasisNodes is the basis of a capacity read from a Slurm cluster's nodes
// (Nodes, Capacity): the nodes that can be allocated new work.
const BasisNodes = "Slurm nodes"

// Node is one node of a partition as sinfo reports it.
type Node struct {
	Name, Partition string
	// GPUs is the count of the node's "gpu" generic resources.
	GPUs int
	// State is sinfo's extended state, lower case, with its flag suffix
	// (e.g. "idle", "mixed", "drained", "down*").
	State string
	// Usable: the node can be allocated new work (UsableState).
	Usable bool
}

// nodeFormat is sinfo's output format of Nodes: node name, partition name
// (%R: without the default partition's "*"), generic resources and the
// state in its extended form, "|"-separated (sinfo(1), -o/--format,
// https://slurm.schedmd.com/sinfo.html).
const nodeFormat = "%N|%R|%G|%T"

// Nodes reads every node of every partition (hidden ones too): `sinfo
// --Node` prints "one line per node and partition" (sinfo(1), -N/--Node),
// with no header (-h).
func Nodes(ctx context.Context, r Runner) ([]Node, error) {
	out, err := r.Run(ctx, "sinfo", "--all", "--Node", "--noheader", "--format="+nodeFormat)
	if err != nil {
		return nil, err
	}
	return ParseNodes(out)
}

// ParseNodes parses Nodes's sinfo output.
func ParseNodes(out []byte) ([]Node, error) {
	var nodes []Node
	for i, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Split(line, "|")
		if len(f) != 4 {
			return nil, fmt.Errorf("slurm: sinfo line %d has %d fields, not 4: %q", i+1, len(f), line)
		}
		gpus, err := GRESGPUs(f[2])
		if err != nil {
			return nil, fmt.Errorf("slurm: sinfo line %d: %w", i+1, err)
		}
		st := strings.ToLower(strings.TrimSpace(f[3]))
		nodes = append(nodes, Node{Name: strings.TrimSpace(f[0]), Partition: strings.TrimSpace(f[1]), GPUs: gpus,
			State: st, Usable: UsableState(st)})
	}
	return nodes, nil
}

// GRESGPUs counts the GPUs of a node's generic resources as sinfo's %G
// prints them: a comma-separated list of
// "<name>[:<type>][:no_consume]:<number>[K|M|G]" (slurm.conf(5), Gres,
// https://slurm.schedmd.com/slurm.conf.html), a name alone counting one,
// and the sockets the resources are bound to, when known, in parentheses
// after the count ("gpu:4(S:0-1)", scontrol(1), update node Gres,
// https://slurm.schedmd.com/scontrol.html); "(null)" when none. Entries
// of another resource (e.g. "shard", "mps") do not count.
func GRESGPUs(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "(null)" {
		return 0, nil
	}
	n := 0
	for entry := range strings.SplitSeq(s, ",") {
		if i := strings.IndexByte(entry, '('); i >= 0 {
			entry = entry[:i] // "(S:0-1)": the sockets, not a count
		}
		parts := strings.Split(entry, ":")
		if parts[0] != "gpu" {
			continue
		}
		if len(parts) == 1 {
			n++ // "gpu" alone: a count of one
			continue
		}
		num, mult := parts[len(parts)-1], 1
		if k := strings.IndexAny(num, "KMG"); k > 0 && k == len(num)-1 {
			num, mult = num[:k], map[byte]int{'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30}[num[k]]
		}
		c, err := strconv.Atoi(num)
		c *= mult
		if err != nil || c < 0 {
			return 0, fmt.Errorf("generic resource %q of %q has no count", entry, s)
		}
		n += c
	}
	return n, nil
}

// usableStates are the base states of a node that can run work: allocated
// or not. Every other state (DOWN, DRAINED, DRAINING, FAIL, FAILING,
// FUTURE, INVAL, MAINT, REBOOT_*, RESERVED, POWER_*, UNKNOWN, ...) is a
// node that "will not be allocated additional jobs" or is "unavailable for
// use" (sinfo(1), NODE STATE CODES, https://slurm.schedmd.com/sinfo.html).
var usableStates = []string{"idle", "mixed", "allocated", "allocated+", "completing", "planned"}

// unusableFlags are the state suffixes of a node that takes no new work
// now: "*" not responding ("will not be allocated any new work"), "~"
// powered off, "#" being powered up or configured, "!" pending power
// down, "%" being powered down, "$" in a maintenance reservation, "@"
// pending reboot, "^" reboot issued (sinfo(1), NODE STATE CODES). "-"
// (planned by the backfill scheduler) is a node at work.
const unusableFlags = "*~#!%$@^"

// UsableState is whether a node in sinfo's extended state st (lower case)
// can be allocated new work. A state it does not know counts as not
// usable: capacity is never overstated.
func UsableState(st string) bool {
	base := strings.TrimRight(st, unusableFlags+"-")
	if len(base) < len(st) && strings.ContainsAny(st[len(base):], unusableFlags) {
		return false
	}
	return slices.Contains(usableStates, base)
}

// TypeCapacity is a Slurm cluster's capacity of one instance type
// (Capacity).
type TypeCapacity struct {
	InstanceType string
	// Nodes are the nodes of the type's partitions, Usable those that can
	// be allocated new work; GPUs are the usable nodes' GPUs.
	Nodes, Usable, GPUs int
}

// Capacity counts the nodes of each instance type: a node is of the
// instance type its partition maps to in partitionTypes (on HyperPod an
// instance group belongs to at most one partition), counted once however
// many partitions name it. Nodes of a partition partitionTypes does not
// name are not counted. A node counts as usable only when it is usable in
// every line sinfo gave it. Sorted by instance type.
func Capacity(nodes []Node, partitionTypes map[string]string) []TypeCapacity {
	type key struct{ typ, node string }
	seen := map[key]*Node{}
	var order []key
	for _, n := range nodes {
		typ := partitionTypes[n.Partition]
		if typ == "" {
			continue
		}
		k := key{typ, n.Name}
		if p := seen[k]; p != nil {
			p.Usable = p.Usable && n.Usable
			continue
		}
		c := n
		seen[k] = &c
		order = append(order, k)
	}
	by := map[string]*TypeCapacity{}
	for _, k := range order {
		n := seen[k]
		t := by[k.typ]
		if t == nil {
			t = &TypeCapacity{InstanceType: k.typ}
			by[k.typ] = t
		}
		t.Nodes++
		if n.Usable {
			t.Usable++
			t.GPUs += n.GPUs
		}
	}
	out := make([]TypeCapacity, 0, len(by))
	for _, t := range by {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b TypeCapacity) int { return strings.Compare(a.InstanceType, b.InstanceType) })
	return out
}
