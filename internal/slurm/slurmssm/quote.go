package slurmssm

import (
	"encoding/base64"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hyperpod-governance/portal/internal/slurm"
)

// MaxArgLength bounds one argument; MaxCommandLength the whole command
// string sent as the document's parameter.
const (
	MaxArgLength     = 4096
	MaxCommandLength = 64 * 1024
)

// resultMarker starts the line the remote script prints last: the
// command's exit status and its standard output and error, each base64.
const resultMarker = "PORTAL-SLURM-RESULT"

var slurmBinPattern = regexp.MustCompile(`^/[A-Za-z0-9._/-]*$`)

// ValidateArg refuses an argument the transport will not send: empty is
// allowed (sacctmgr takes "Description="), but no control characters
// (a newline or NUL has no place in a Slurm argument and could only confuse
// the terminal the agent runs the command on), no invalid UTF-8, and at most
// MaxArgLength bytes.
func ValidateArg(a string) error {
	if len(a) > MaxArgLength {
		return fmt.Errorf("slurmssm: argument of %d bytes is longer than %d", len(a), MaxArgLength)
	}
	if !utf8.ValidString(a) {
		return fmt.Errorf("slurmssm: argument %q is not valid UTF-8", a)
	}
	for _, r := range a {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("slurmssm: argument %q holds control character %U", a, r)
		}
	}
	return nil
}

// Quote is s as one POSIX shell word: inside single quotes nothing is
// special, and a single quote itself is closed, escaped and reopened
// ('\”). The agent's shlex split (see Command) reads the same rules.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Script is the POSIX sh script that runs one Slurm command on the node and
// prints, as its last line, the command's exit status and its standard
// output and standard error, each base64 on one line. The agent runs
// non-interactive commands on a terminal, which turns "\n" into "\r\n" and
// mixes the two streams; the encoded line survives both.
func Script(slurmBin, name string, args ...string) (string, error) {
	return ScriptEnv(slurmBin, nil, name, args...)
}

// ScriptEnv is Script with environment variables (NAME=value each) set for
// the command alone: sh's assignments before a command's name ("the
// assignments are exported to the command's environment", POSIX Shell
// Command Language 2.9.1 Simple Commands,
// https://pubs.opengroup.org/onlinepubs/9699919799/utilities/V3_chap02.html).
func ScriptEnv(slurmBin string, env []string, name string, args ...string) (string, error) {
	if err := slurm.CheckEnv(env); err != nil {
		return "", err
	}
	if !slices.Contains(slurm.Commands, name) {
		return "", fmt.Errorf("slurmssm: %q is not one of the Slurm commands the portal runs (%s)", name, strings.Join(slurm.Commands, ", "))
	}
	if slurmBin != "" {
		if !slurmBinPattern.MatchString(slurmBin) || strings.Contains(slurmBin, "..") {
			return "", fmt.Errorf("slurmssm: Slurm directory %q is not an absolute path of letters, digits, '.', '_', '-' and '/'", slurmBin)
		}
		name = strings.TrimRight(slurmBin, "/") + "/" + name
	}
	var words []string
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		if err := ValidateArg(v); err != nil {
			return "", err
		}
		words = append(words, k+"="+Quote(v))
	}
	words = append(words, Quote(name))
	for _, a := range args {
		if err := ValidateArg(a); err != nil {
			return "", err
		}
		words = append(words, Quote(a))
	}
	return `t=$(mktemp -d) || exit 97; ` + strings.Join(words, " ") + ` >"$t/o" 2>"$t/e"; r=$?; ` +
		`printf '\n%s %s o%s e%s\n' ` + resultMarker + ` "$r" "$(base64 -w0 "$t/o")" "$(base64 -w0 "$t/e")"; rm -rf "$t"`, nil
}

// Command is the AWS-StartNonInteractiveCommand parameter that runs script.
// The SSM agent does not hand that parameter to a shell: it splits it with
// shlex and executes the first word (amazon-ssm-agent,
// agent/session/shell/shell_unix.go, StartCommandExecutor: for
// NonInteractiveCommands, shlex.Split then exec.Command(commands[0],
// commands[1:]...)). So the command is "sh -c" and the script as one quoted
// word.
func Command(script string) (string, error) {
	c := "sh -c " + Quote(script)
	if len(c) > MaxCommandLength {
		return "", fmt.Errorf("slurmssm: command of %d bytes is longer than %d", len(c), MaxCommandLength)
	}
	return c, nil
}

// Result is what the remote script reported.
type Result struct {
	Exit           int
	Stdout, Stderr []byte
}

// ParseResult finds the script's result line in the session's output (the
// last line that starts with the marker; terminal carriage returns are
// ignored).
func ParseResult(out []byte) (Result, error) {
	lines := strings.Split(strings.ReplaceAll(string(out), "\r", ""), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		f := strings.Fields(lines[i])
		if len(f) == 0 || f[0] != resultMarker {
			continue
		}
		if len(f) != 4 || !strings.HasPrefix(f[2], "o") || !strings.HasPrefix(f[3], "e") {
			return Result{}, fmt.Errorf("slurmssm: result line %q is not marker, status, o<stdout>, e<stderr>", lines[i])
		}
		rc, err := strconv.Atoi(f[1])
		if err != nil {
			return Result{}, fmt.Errorf("slurmssm: result line %q: exit status %q", lines[i], f[1])
		}
		stdout, err1 := base64.StdEncoding.DecodeString(f[2][1:])
		stderr, err2 := base64.StdEncoding.DecodeString(f[3][1:])
		if err1 != nil || err2 != nil {
			return Result{}, fmt.Errorf("slurmssm: result line is not base64: %v %v", err1, err2)
		}
		return Result{Exit: rc, Stdout: stdout, Stderr: stderr}, nil
	}
	return Result{}, fmt.Errorf("slurmssm: the session ended without the command's result line; its output: %q", tail(out, 2000))
}

func tail(b []byte, n int) string {
	if len(b) > n {
		return "…" + string(b[len(b)-n:])
	}
	return string(b)
}
