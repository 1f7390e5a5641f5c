// Package slurm runs Slurm's administrative commands (sacctmgr, sacct,
// scontrol, squeue, sinfo) for the portal's Slurm connections (issue 36)
// and parses their parsable output.
//
// The portal reaches Slurm through a Runner, the transport: Local runs the
// commands on this machine, where the Slurm client commands work (the test
// bed's Slurm: hack/testbed/slurm.sh); a transport to a HyperPod cluster's
// controller node implements the same interface. The commands' parsable
// output ("-P": fields separated by "|", one header line unless "-n") is
// the interface the portal relies on, not a REST API tied to one release.
// A command that needs environment variables (sacct's SLURM_TIME_FORMAT)
// runs through RunEnv, which both transports implement (EnvRunner).
//
// nodes.go reads the cluster's nodes (sinfo: partition, GPUs, state) and
// counts, per instance type of each partition, those that can be allocated
// new work: the capacity the portal's inventory keeps for a Slurm cluster.
package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
)

// Runner runs one Slurm command (name is the command, e.g. "sacctmgr") and
// returns its standard output. A command that fails returns an error that
// carries its standard error.
type Runner interface {
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// Commands are the Slurm commands a Runner may run: nothing else.
var Commands = []string{"sacctmgr", "sacct", "scontrol", "squeue", "sinfo", "scancel"}

// Local runs the commands on this machine with SLURM_CONF=Conf (the
// environment's SLURM_CONF, or the default /etc/slurm/slurm.conf, when
// empty).
type Local struct {
	Conf string
}

// EnvRunner is a Runner that can run a command with environment variables
// added, each NAME=value (RunEnv).
type EnvRunner interface {
	RunEnv(ctx context.Context, env []string, name string, args ...string) ([]byte, error)
}

// envNameRe is an environment variable's name the transports pass on.
var envNameRe = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// CheckEnv refuses an environment entry that is not NAME=value with a
// portable name (upper-case letters, digits, '_').
func CheckEnv(env []string) error {
	for _, e := range env {
		if k, _, ok := strings.Cut(e, "="); !ok || !envNameRe.MatchString(k) {
			return fmt.Errorf("slurm: environment entry %q is not NAME=value", e)
		}
	}
	return nil
}

// RunEnv runs a command with env added through r, which must be an
// EnvRunner: a transport that cannot set the environment fails rather
// than run the command without it.
func RunEnv(ctx context.Context, r Runner, env []string, name string, args ...string) ([]byte, error) {
	er, ok := r.(EnvRunner)
	if !ok {
		return nil, fmt.Errorf("slurm: the transport (%T) cannot set %s for %s", r, strings.Join(env, " "), name)
	}
	return er.RunEnv(ctx, env, name, args...)
}

// Run implements Runner.
func (l Local) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	return l.RunEnv(ctx, nil, name, args...)
}

// RunEnv implements EnvRunner.
func (l Local) RunEnv(ctx context.Context, env []string, name string, args ...string) ([]byte, error) {
	if !slices.Contains(Commands, name) {
		return nil, fmt.Errorf("slurm: %q is not one of the Slurm commands the portal runs (%s)", name, strings.Join(Commands, ", "))
	}
	if err := CheckEnv(env); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = os.Environ()
	if l.Conf != "" {
		cmd.Env = append(cmd.Env, "SLURM_CONF="+l.Conf)
	}
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(stdout.String())
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return stdout.Bytes(), fmt.Errorf("slurm: %s %s: exit %d: %s", name, strings.Join(args, " "), ee.ExitCode(), msg)
		}
		return stdout.Bytes(), fmt.Errorf("slurm: %s: %w", name, err)
	}
	return stdout.Bytes(), nil
}

// Rows parses parsable output with a header line ("-P" without "-n"): one
// map per line, keyed by the header's field names. A line with another
// number of fields than the header is an error (a "|" inside a value would
// make one: Slurm does not escape it).
func Rows(out []byte) ([]map[string]string, error) {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) == 0 || lines[0] == "" {
		return nil, errors.New("slurm: no header line in the command's output")
	}
	header := strings.Split(lines[0], "|")
	var rows []map[string]string
	for i, line := range lines[1:] {
		if line == "" {
			continue
		}
		f := strings.Split(line, "|")
		if len(f) != len(header) {
			return nil, fmt.Errorf("slurm: line %d has %d fields, the header %d: %q", i+2, len(f), len(header), line)
		}
		row := make(map[string]string, len(header))
		for j, h := range header {
			row[h] = f[j]
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// Query runs a command whose output is parsable with a header and parses it.
func Query(ctx context.Context, r Runner, name string, args ...string) ([]map[string]string, error) {
	out, err := r.Run(ctx, name, args...)
	if err != nil {
		return nil, err
	}
	return Rows(out)
}

// TRES parses a TRES list such as "billing=1,cpu=1,gres/gpu=2,node=1"
// (sacct AllocTRES, sacctmgr GrpTRES) into its counts by TRES name.
func TRES(s string) (map[string]string, error) {
	out := map[string]string{}
	if s == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("slurm: TRES %q: %q is not name=count", s, part)
		}
		out[k] = v
	}
	return out, nil
}
