package slurmssm_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/hyperpod-governance/portal/internal/slurm"
	"github.com/hyperpod-governance/portal/internal/slurm/slurmssm"
	"github.com/hyperpod-governance/portal/internal/support/awstest"
)

const target = "sagemaker-cluster:abcdef123456_controller-group-i-0123456789abcdef0"

// fakeBin is a directory holding a stand-in "sinfo": a shell script, so
// that the unit tests run the transport's quoting through a real sh.
func fakeBin(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sinfo"), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func newTransport(t *testing.T, conf string) (*awstest.SSM, slurmssm.Transport) {
	t.Helper()
	end := awstest.NewSSM(t, conf)
	end.Connect(target)
	api := ssm.NewFromConfig(awstest.Config(1), func(o *ssm.Options) { o.BaseEndpoint = aws.String(end.URL()) })
	t.Cleanup(func() {
		if errs := end.ChannelErrors(); len(errs) > 0 {
			t.Errorf("the data channel saw protocol errors: %q", errs)
		}
	})
	return end, slurmssm.Transport{API: api, Target: target, Timeout: 30 * time.Second}
}

// TestArgumentsReachTheCommandVerbatim: arguments full of shell syntax go
// through the transport's quoting, the agent's shlex split and sh, and
// arrive at the command exactly as given; none of them runs anything.
func TestArgumentsReachTheCommandVerbatim(t *testing.T) {
	canary := filepath.Join(t.TempDir(), "canary")
	end, tr := newTransport(t, "/nonexistent/slurm.conf")
	tr.SlurmBin = fakeBin(t, `for a in "$@"; do printf '%s\0' "$a"; done`)
	args := []string{
		"plain", "", "with space", "it's", `"double"`, `back\slash`, "$(touch " + canary + ")",
		"`touch " + canary + "`", "; touch " + canary, "&& touch " + canary, "| touch " + canary,
		"$HOME", "*", "~", "#comment", "'\\''", "Description=Team's GPUs (A100 × 8)", "--format=Name%30,GrpTRES",
		">" + canary, "<" + canary, "\\", "'", `\'`, "-P",
	}
	out, err := tr.Run(t.Context(), "sinfo", args...)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if !slices.Equal(got, args) {
		t.Errorf("arguments arrived as\n%q\nwant\n%q", got, args)
	}
	if _, err := os.Stat(canary); !os.IsNotExist(err) {
		t.Errorf("an argument ran a command: %s exists (%v)", canary, err)
	}
	if n := end.Count("StartSession"); n != 1 {
		t.Errorf("%d sessions, want 1", n)
	}
	if n := end.Open(); n != 0 {
		t.Errorf("%d sessions left open", n)
	}
}

// TestRefusedBeforeAnySession: a command that is not Slurm's, or an
// argument with a control character, invalid UTF-8 or too many bytes, is
// refused before a session starts.
func TestRefusedBeforeAnySession(t *testing.T) {
	end, tr := newTransport(t, "")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"bash", []string{"-c", "id"}, "not one of the Slurm commands"},
		{"sinfo", []string{"a\nb"}, "control character"},
		{"sinfo", []string{"a\x00b"}, "control character"},
		{"sinfo", []string{"a\rb"}, "control character"},
		{"sinfo", []string{"\xff"}, "not valid UTF-8"},
		{"sinfo", []string{strings.Repeat("x", slurmssm.MaxArgLength+1)}, "longer than"},
	}
	for _, c := range cases {
		_, err := tr.Run(t.Context(), c.name, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q: %v, want an error with %q", c.name, c.args, err, c.want)
		}
	}
	bad := tr
	bad.SlurmBin = "/opt/slurm/bin; rm -rf /"
	if _, err := bad.Run(t.Context(), "sinfo"); err == nil || !strings.Contains(err.Error(), "not an absolute path") {
		t.Errorf("SlurmBin with shell syntax: %v", err)
	}
	if n := end.Count("StartSession"); n != 0 {
		t.Errorf("%d sessions started for refused commands", n)
	}
}

// TestFailingCommandReportsExitAndStderr: the command's exit status and
// standard error come back apart from its standard output, like Local's.
func TestFailingCommandReportsExitAndStderr(t *testing.T) {
	_, tr := newTransport(t, "")
	tr.SlurmBin = fakeBin(t, `echo partial; echo "sinfo: error: no such partition $1" >&2; exit 3`)
	out, err := tr.Run(t.Context(), "sinfo", "gpu")
	if err == nil || !strings.Contains(err.Error(), "exit 3: sinfo: error: no such partition gpu") {
		t.Fatalf("error %v, want exit 3 with the standard error", err)
	}
	if string(out) != "partial\n" {
		t.Errorf("standard output %q, want %q (no terminal \\r, no standard error)", out, "partial\n")
	}
	// A node whose PATH (or SlurmBin) lacks the command says so.
	tr.SlurmBin = t.TempDir()
	if _, err := tr.Run(t.Context(), "sinfo"); err == nil || !strings.Contains(err.Error(), "exit 127") || !strings.Contains(err.Error(), "not found") {
		t.Errorf("missing command: %v", err)
	}
}

// TestOutputInManyMessagesOutOfOrder: a long output in small messages,
// delivered pairwise reversed, comes back whole and in order, each
// message acknowledged (the endpoint's awaitAcks fails the channel
// otherwise, and newTransport fails the test on any channel error).
func TestOutputInManyMessagesOutOfOrder(t *testing.T) {
	end, tr := newTransport(t, "")
	end.Set(func(s *awstest.SSM) { s.Chunk, s.Reorder = 7, true })
	tr.SlurmBin = fakeBin(t, `i=0; while [ $i -lt 300 ]; do echo "acct$i|gres/gpu=$i|"; i=$((i+1)); done`)
	out, err := tr.Run(t.Context(), "sinfo")
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	for i := range 300 {
		want.WriteString("acct" + strconv.Itoa(i) + "|gres/gpu=" + strconv.Itoa(i) + "|\n")
	}
	if !bytes.Equal(out, want.Bytes()) {
		t.Errorf("output of %d bytes differs from the %d written", len(out), want.Len())
	}
}

// TestTimeoutEndsTheSession: an agent that never answers ends the Run at
// the transport's bound, with an error that says so, and the session is
// terminated.
func TestTimeoutEndsTheSession(t *testing.T) {
	end, tr := newTransport(t, "")
	end.Set(func(s *awstest.SSM) { s.Hang = true })
	tr.Timeout = 1500 * time.Millisecond
	start := time.Now()
	_, err := tr.Run(t.Context(), "sinfo")
	if err == nil || !strings.Contains(err.Error(), "no result within 1.5s") {
		t.Fatalf("error %v, want the timeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Run took %s past its 1.5 s bound", d)
	}
	if n := end.Count("TerminateSession"); n != 1 {
		t.Errorf("TerminateSession called %d times, want 1", n)
	}
	if n := end.Open(); n != 0 {
		t.Errorf("%d sessions left open", n)
	}
}

// TestServiceErrors: a target that is not connected, an access denial and
// KMS-encrypted sessions (which the transport refuses) fail with the
// service's or the agent's words.
func TestServiceErrors(t *testing.T) {
	end, tr := newTransport(t, "")
	tr.SlurmBin = fakeBin(t, "true")
	other := tr
	other.Target = "sagemaker-cluster:abcdef123456_controller-group-i-0fedcba9876543210"
	if _, err := other.Run(t.Context(), "sinfo"); err == nil || !strings.Contains(err.Error(), "TargetNotConnected") {
		t.Errorf("unconnected target: %v", err)
	}
	end.Deny("StartSession", 1)
	if _, err := tr.Run(t.Context(), "sinfo"); err == nil || !strings.Contains(err.Error(), "AccessDeniedException") {
		t.Errorf("denied: %v", err)
	}
	end.Set(func(s *awstest.SSM) { s.RequireKMS = true })
	if _, err := tr.Run(t.Context(), "sinfo"); err == nil || !strings.Contains(err.Error(), "KMSEncryption") {
		t.Errorf("KMS: %v", err)
	}
}

// TestMessageLayout checks Encode against the Session Manager plugin's
// layout byte by byte (see message.go), and Decode's checks.
func TestMessageLayout(t *testing.T) {
	m := slurmssm.Message{Type: "acknowledge", SchemaVersion: 1, CreatedDate: 0x0102030405060708, SequenceNumber: 9, Flags: 3,
		ID: slurmssm.UUID{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, PayloadType: 12, Payload: []byte(`{"a":1}`)}
	b := m.Encode()
	want := make([]byte, 0, 127)
	want = binary.BigEndian.AppendUint32(want, 116)
	want = append(want, []byte("acknowledge"+strings.Repeat(" ", 21))...)
	want = binary.BigEndian.AppendUint32(want, 1)
	want = binary.BigEndian.AppendUint64(want, 0x0102030405060708)
	want = binary.BigEndian.AppendUint64(want, 9)
	want = binary.BigEndian.AppendUint64(want, 3)
	want = append(want, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7) // low half first
	d := sha256.Sum256(m.Payload)
	want = append(want, d[:]...)
	want = binary.BigEndian.AppendUint32(want, 12)
	want = binary.BigEndian.AppendUint32(want, 7)
	want = append(want, m.Payload...)
	if !bytes.Equal(b, want) {
		t.Fatalf("encoded\n%x\nwant\n%x", b, want)
	}
	back, err := slurmssm.Decode(b)
	if err != nil || back.Type != m.Type || back.ID != m.ID || back.SequenceNumber != 9 || string(back.Payload) != `{"a":1}` {
		t.Errorf("decoded %+v, %v", back, err)
	}
	if m.ID.String() != "00010203-0405-0607-0809-0a0b0c0d0e0f" {
		t.Errorf("UUID string %s", m.ID)
	}
	bad := slices.Clone(b)
	bad[len(bad)-1] ^= 1
	if _, err := slurmssm.Decode(bad); err == nil || !strings.Contains(err.Error(), "digest") {
		t.Errorf("corrupted payload decoded: %v", err)
	}
	if _, err := slurmssm.Decode(b[:len(b)-1]); err == nil {
		t.Error("truncated message decoded")
	}
}

// TestParseResult: the result line is found among terminal noise, with
// carriage returns, and empty streams decode as empty.
func TestParseResult(t *testing.T) {
	r, err := slurmssm.ParseResult([]byte("motd\r\n\r\nPORTAL-SLURM-RESULT 0 oYQo= e\r\n"))
	if err != nil || r.Exit != 0 || string(r.Stdout) != "a\n" || len(r.Stderr) != 0 {
		t.Errorf("%+v %v", r, err)
	}
	if _, err := slurmssm.ParseResult([]byte("killed\r\n")); err == nil || !strings.Contains(err.Error(), "without the command's result") {
		t.Errorf("no result line: %v", err)
	}
	if _, err := slurmssm.ParseResult([]byte("PORTAL-SLURM-RESULT 0 e oYQo=\n")); err == nil {
		t.Error("swapped streams accepted")
	}
}

// TestControllerTarget: the controller group's one running node, found
// with ListClusterNodes, makes the documented target; a group with no node
// or with two is an error, as is a malformed part.
func TestControllerTarget(t *testing.T) {
	sm := awstest.NewSageMaker(t)
	c := awstest.HyperPodCluster{Name: "slurm-one", ID: "abcdef123456", Groups: []awstest.InstanceGroup{
		{Name: "controller-group", InstanceType: smtypes.ClusterInstanceTypeMlM5Xlarge, CurrentCount: 1, TargetCount: 1, Instances: []string{"i-0123456789abcdef0"}},
		{Name: "controller-group-b", InstanceType: smtypes.ClusterInstanceTypeMlM5Xlarge, CurrentCount: 1, TargetCount: 1, Instances: []string{"i-0aaaaaaaaaaaaaaaa"}},
		{Name: "workers", InstanceType: smtypes.ClusterInstanceTypeMlM5Xlarge, CurrentCount: 2, TargetCount: 2, Instances: []string{"i-0bbbbbbbbbbbbbbbb", "i-0cccccccccccccccc"}},
		{Name: "login", InstanceType: smtypes.ClusterInstanceTypeMlM5Xlarge},
	}}
	sm.AddHyperPodCluster(c)
	api := sagemaker.NewFromConfig(awstest.Config(1), func(o *sagemaker.Options) { o.BaseEndpoint = aws.String(sm.URL()) })
	got, err := slurmssm.ControllerTarget(t.Context(), api, c.ARN(), "controller-group")
	if err != nil || got != target {
		t.Errorf("target %q, %v; want %q", got, err, target)
	}
	if _, err := slurmssm.ControllerTarget(t.Context(), api, c.ARN(), "workers"); err == nil || !strings.Contains(err.Error(), "2 running nodes") {
		t.Errorf("two nodes: %v", err)
	}
	if _, err := slurmssm.ControllerTarget(t.Context(), api, c.ARN(), "login"); err == nil || !strings.Contains(err.Error(), "no running node") {
		t.Errorf("no node: %v", err)
	}
	if _, err := slurmssm.ControllerTarget(t.Context(), api, "arn:aws:eks:us-east-1:111122223333:cluster/x", "controller-group"); err == nil {
		t.Error("an EKS ARN was taken")
	}
	if _, err := slurmssm.Target("abcdef123456", "g;rm", "i-0123456789abcdef0"); err == nil {
		t.Error("a group name with shell syntax made a target")
	}
}

var _ slurm.Runner = slurmssm.Transport{}

// TestEnvironmentReachesTheCommandAlone: RunEnv's variables (the usage
// reader's SLURM_TIME_FORMAT=%s and TZ=UTC) reach the command verbatim
// through the quoting, the agent's split and sh; Run sets none; an entry
// that is not NAME=value is refused before any session.
func TestEnvironmentReachesTheCommandAlone(t *testing.T) {
	end, tr := newTransport(t, "")
	tr.SlurmBin = fakeBin(t, `printf '%s|%s|%s' "$SLURM_TIME_FORMAT" "$TZ" "$1"`)
	out, err := tr.RunEnv(t.Context(), []string{"SLURM_TIME_FORMAT=%s", "TZ=UTC"}, "sinfo", "-a")
	if err != nil || string(out) != "%s|UTC|-a" {
		t.Errorf("RunEnv = %q, %v; want %q", out, err, "%s|UTC|-a")
	}
	t.Setenv("SLURM_TIME_FORMAT", "")
	t.Setenv("TZ", "")
	if out, err := tr.Run(t.Context(), "sinfo", "-a"); err != nil || string(out) != "||-a" {
		t.Errorf("Run = %q, %v; want no variable set", out, err)
	}
	n := end.Count("StartSession")
	for _, bad := range [][]string{{"TZ"}, {"tz=UTC"}, {"A B=1"}, {"TZ=a\nb"}} {
		if _, err := tr.RunEnv(t.Context(), bad, "sinfo"); err == nil {
			t.Errorf("RunEnv with %q: no error", bad)
		}
	}
	if got := end.Count("StartSession"); got != n {
		t.Errorf("%d sessions started for refused environments", got-n)
	}
	script, err := slurmssm.ScriptEnv("", []string{"SLURM_TIME_FORMAT=%s", "TZ=UTC"}, "sacct", "-P")
	if err != nil || !strings.Contains(script, ` SLURM_TIME_FORMAT='%s' TZ='UTC' 'sacct' '-P' >`) {
		t.Errorf("ScriptEnv = %q, %v", script, err)
	}
}
