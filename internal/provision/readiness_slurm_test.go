package provision_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/slurm"
	"github.com/hyperpod-governance/portal/internal/slurm/slurmssm"
	"github.com/hyperpod-governance/portal/internal/support/awstest"
	"github.com/hyperpod-governance/portal/internal/support/testenv"
)

var _ provision.SlurmRunner = slurm.Runner(nil)

// TestReadinessSlurmController: through the AWS transport, the check is
// OK when scontrol ping says the controller is UP, failing with the
// service's words when the role may not start a session, and failing when
// slurmctld is down; without a Slurm runner there is no such check.
func TestReadinessSlurmController(t *testing.T) {
	const target = "sagemaker-cluster:abcdef123456_controller-group-i-0123456789abcdef0"
	end := awstest.NewSSM(t, "")
	end.Connect(target)
	api := ssm.NewFromConfig(awstest.Config(1), func(o *ssm.Options) { o.BaseEndpoint = aws.String(end.URL()) })
	bin := t.TempDir()
	ping := filepath.Join(bin, "scontrol")
	write := func(body string) {
		if err := os.WriteFile(ping, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tr := slurmssm.Transport{API: api, Target: target, SlurmBin: bin, Timeout: 30 * time.Second}
	check := func() provision.Check {
		t.Helper()
		c, ok := provision.CheckReadiness(t.Context(), provision.ReadinessSources{Slurm: tr}).Check(provision.CheckSlurmController)
		if !ok {
			t.Fatal("no Slurm controller check with a Slurm runner")
		}
		return c
	}
	write(`[ "$1" = ping ] && echo "Slurmctld(primary) at ip-10-1-2-3 is UP"`)
	if c := check(); c.Status != provision.CheckOK || !strings.Contains(c.Detail, "is UP") {
		t.Errorf("controller up: %+v", c)
	}
	end.Deny("StartSession", 1)
	if c := check(); c.Status != provision.CheckFailing || !strings.Contains(c.Detail, "AccessDeniedException") || !strings.Contains(c.Todo, "ssm:StartSession") {
		t.Errorf("session denied: %+v", c)
	}
	write(`echo "Slurmctld(primary) at ip-10-1-2-3 is DOWN"; exit 1`)
	if c := check(); c.Status != provision.CheckFailing || !strings.Contains(c.Detail, "DOWN") {
		t.Errorf("controller down: %+v", c)
	}
	if _, ok := provision.CheckReadiness(t.Context(), provision.ReadinessSources{}).Check(provision.CheckSlurmController); ok {
		t.Error("a Slurm controller check without a Slurm runner")
	}
}

// TestReadinessSlurmControllerOnTestBed: the test bed's real slurmctld
// answers scontrol ping as UP.
func TestReadinessSlurmControllerOnTestBed(t *testing.T) {
	conf := testenv.Require(t, "PORTAL_TEST_SLURM_CONF")
	c, _ := provision.CheckReadiness(t.Context(), provision.ReadinessSources{Slurm: slurm.Local{Conf: conf}}).Check(provision.CheckSlurmController)
	if c.Status != provision.CheckOK {
		t.Errorf("test bed's controller: %+v", c)
	}
}

// scriptedSlurm answers each command ("scontrol show config", "sinfo ...")
// with its text, or fails.
type scriptedSlurm map[string]string

func (s scriptedSlurm) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	cmd := strings.Join(append([]string{name}, args...), " ")
	if out, ok := s[cmd]; ok {
		return []byte(out), nil
	}
	return nil, fmt.Errorf("slurm: %s: exit 1: not scripted", cmd)
}

const sinfoCmd = "sinfo --noheader --format=%R|%a"

// TestSlurmEnforcement: Slurm's implications (safe → limits, limits/qos →
// associations, all), and the check naming exactly the flags missing.
func TestSlurmEnforcement(t *testing.T) {
	set := func(m map[string]bool) string { return strings.Join(slices.Sorted(maps.Keys(m)), ",") }
	for in, want := range map[string]string{
		"associations,limits,qos,safe": "associations,limits,qos,safe",
		"qos":                          "associations,qos",
		"safe":                         "associations,limits,safe",
		"all":                          "associations,limits,qos,safe,wckeys",
		"none":                         "",
		"":                             "",
		"Associations, QOS":            "associations,qos",
	} {
		if got := set(provision.SlurmEnforcement(in)); got != want {
			t.Errorf("SlurmEnforcement(%q) = %q, want %q", in, got, want)
		}
	}
	conf := func(v string) scriptedSlurm {
		return scriptedSlurm{"scontrol show config": "Configuration data as of 2026-12-05T00:43:26\nAccountingStorageBackupHost = (null)\nAccountingStorageEnforce = " + v + "\nClusterName             = testbed\n"}
	}
	check := func(r provision.SlurmRunner) provision.Check {
		t.Helper()
		c, ok := provision.CheckReadiness(t.Context(), provision.ReadinessSources{Slurm: r}).Check(provision.CheckSlurmEnforcement)
		if !ok {
			t.Fatal("no enforcement check with a Slurm runner")
		}
		return c
	}
	if c := check(conf("associations,limits,qos,safe")); c.Status != provision.CheckOK {
		t.Errorf("all required: %+v", c)
	}
	if c := check(conf("safe")); c.Status != provision.CheckFailing || !strings.Contains(c.Detail, "lacks qos (") || strings.Contains(c.Detail, "limits (") ||
		!strings.Contains(c.Todo, "AccountingStorageEnforce=associations,limits,qos") {
		t.Errorf("safe only: %+v; want qos named missing, limits not", c)
	}
	if c := check(conf("none")); c.Status != provision.CheckFailing || strings.Count(c.Detail, " (without it") != 3 {
		t.Errorf("none: %+v; want the three flags named", c)
	}
	if c := check(scriptedSlurm{}); c.Status != provision.CheckUnknown || !strings.Contains(c.Detail, "not scripted") {
		t.Errorf("scontrol failing: %+v", c)
	}
	if got := provision.ParseSlurmConfig([]byte("A = b = c\nNo equals here\nKey With Space = x\n")); len(got) != 1 || got["A"] != "b = c" {
		t.Errorf("ParseSlurmConfig = %v", got)
	}
}

// TestSlurmPartitionsCheck: the partitions sinfo lists; an approved
// contract's partition that is missing fails, one that is not up warns,
// naming the teams.
func TestSlurmPartitionsCheck(t *testing.T) {
	got, err := provision.ParseSinfoPartitions([]byte("gpu|up\ncpu|drain\n\n"))
	if err != nil || len(got) != 2 || got["gpu"] != "up" || got["cpu"] != "drain" {
		t.Errorf("ParseSinfoPartitions = %v, %v", got, err)
	}
	if _, err := provision.ParseSinfoPartitions([]byte("gpu up\n")); err == nil {
		t.Error("a line without | parsed")
	}
	r := scriptedSlurm{sinfoCmd: "gpu|up\ncpu|drain\n"}
	check := func(uses ...provision.SlurmPartitionUse) provision.Check {
		t.Helper()
		src := provision.ReadinessSources{Slurm: r, SlurmPartitions: func(context.Context) ([]provision.SlurmPartitionUse, error) { return uses, nil }}
		c, _ := provision.CheckReadiness(t.Context(), src).Check(provision.CheckSlurmPartitions)
		return c
	}
	if c := check(provision.SlurmPartitionUse{Partition: "gpu", Team: "red"}, provision.SlurmPartitionUse{Partition: "GPU", Team: "blue"}); c.Status != provision.CheckOK ||
		!strings.Contains(c.Detail, "Partitions: cpu (drain), gpu (up).") || !strings.Contains(c.Detail, "gpu (red, blue)") {
		t.Errorf("gpu used: %+v", c)
	}
	if c := check(provision.SlurmPartitionUse{Partition: "cpu", Team: "red"}); c.Status != provision.CheckWarning || !strings.Contains(c.Detail, "cpu (red) is drain") {
		t.Errorf("cpu draining: %+v", c)
	}
	if c := check(provision.SlurmPartitionUse{Partition: "gpu", Team: "red"}, provision.SlurmPartitionUse{Partition: "big", Team: "blue"}); c.Status != provision.CheckFailing ||
		!strings.Contains(c.Detail, "not on the cluster: big (blue)") || c.Todo == "" {
		t.Errorf("big missing: %+v", c)
	}
	src := provision.ReadinessSources{Slurm: r, SlurmPartitions: func(context.Context) ([]provision.SlurmPartitionUse, error) { return nil, errors.New("store down") }}
	if c, _ := provision.CheckReadiness(t.Context(), src).Check(provision.CheckSlurmPartitions); c.Status != provision.CheckUnknown || !strings.Contains(c.Detail, "Store down") {
		t.Errorf("store failing: %+v", c)
	}
}

// TestReadinessSlurmOnTestBed: the test bed's Slurm enforces associations,
// limits and QoS, hides other users' jobs, and its partition exists and is
// up, as an approved
// contract naming it needs; a contract naming a partition the test bed
// lacks fails the check.
func TestReadinessSlurmOnTestBed(t *testing.T) {
	conf := testenv.Require(t, "PORTAL_TEST_SLURM_CONF")
	partition := testenv.Require(t, "PORTAL_TEST_SLURM_PARTITION")
	uses := []provision.SlurmPartitionUse{{Partition: partition, Team: "red"}}
	src := provision.ReadinessSources{Slurm: slurm.Local{Conf: conf}, SlurmPartitions: func(context.Context) ([]provision.SlurmPartitionUse, error) { return uses, nil }}
	r := provision.CheckReadiness(t.Context(), src)
	if c, _ := r.Check(provision.CheckSlurmEnforcement); c.Status != provision.CheckOK {
		t.Errorf("test bed's enforcement: %+v", c)
	}
	if c, _ := r.Check(provision.CheckSlurmPartitions); c.Status != provision.CheckOK || !strings.Contains(c.Detail, partition+" (up)") {
		t.Errorf("test bed's partitions: %+v", c)
	}
	// The test bed hides other users' jobs in slurm.conf and slurmdbd.conf
	// (hack/testbed/slurm.sh; internal/slurm TestTestBedSlurmHidesOtherUsersJobs
	// shows the effect).
	if c, _ := r.Check(provision.CheckSlurmTaskVisibility); c.Status != provision.CheckOK {
		t.Errorf("test bed's task visibility: %+v", c)
	}
	uses = append(uses, provision.SlurmPartitionUse{Partition: "no-such-partition", Team: "blue"})
	if c, _ := provision.CheckReadiness(t.Context(), src).Check(provision.CheckSlurmPartitions); c.Status != provision.CheckFailing || !strings.Contains(c.Detail, "no-such-partition (blue)") {
		t.Errorf("a missing partition on the test bed: %+v", c)
	}
}

// TestSlurmVisibilityCheck: the check is OK when PrivateData hides jobs on
// both sides (slurm.conf through scontrol show config, slurmdbd.conf
// through sacctmgr show configuration), warns naming exactly the side that
// lacks it and what to change there, and is unknown when either cannot
// be read.
func TestSlurmVisibilityCheck(t *testing.T) {
	for in, want := range map[string]bool{"jobs": true, "accounts,Jobs,usage": true, "none": false, "": false, "jobsx,users": false} {
		if got := provision.SlurmPrivate(in, "jobs"); got != want {
			t.Errorf("SlurmPrivate(%q, jobs) = %v", in, got)
		}
	}
	script := func(ctld, dbd string) scriptedSlurm {
		s := scriptedSlurm{}
		if ctld != "-" {
			s["scontrol show config"] = "Configuration data as of 2026-12-05T00:43:26\nAccountingStorageEnforce = associations,limits,qos\nPrivateData             = " + ctld + "\n"
		}
		if dbd != "-" {
			// sacctmgr prints slurm.conf's accounting values first: a
			// PrivateData there is not slurmdbd's.
			s["sacctmgr show configuration"] = "Configuration data as of 2026-12-05T00:43:26\nAccountingStorageType  = accounting_storage/slurmdbd\nPrivateData            = " + ctld +
				"\n\nSlurmDBD configuration:\nDbdPort                 = 6819\nPrivateData             = " + dbd + "\nStorageType             = accounting_storage/mysql\n"
		}
		return s
	}
	check := func(r provision.SlurmRunner) provision.Check {
		t.Helper()
		c, ok := provision.CheckReadiness(t.Context(), provision.ReadinessSources{Slurm: r}).Check(provision.CheckSlurmTaskVisibility)
		if !ok {
			t.Fatal("no task visibility check with a Slurm runner")
		}
		return c
	}
	if c := check(script("jobs", "accounts,jobs")); c.Status != provision.CheckOK || !strings.Contains(c.Detail, "slurmdbd.conf (accounts,jobs)") {
		t.Errorf("both private: %+v", c)
	}
	if c := check(script("none", "jobs")); c.Status != provision.CheckWarning || !strings.Contains(c.Detail, "slurm.conf's PrivateData = none lacks jobs") ||
		strings.Contains(c.Detail, "slurmdbd.conf's") || !strings.Contains(c.Todo, "PrivateData in slurm.conf") || strings.Contains(c.Todo, "slurmdbd.conf") {
		t.Errorf("slurm.conf open: %+v; want slurm.conf named, slurmdbd.conf not", c)
	}
	if c := check(script("jobs", "none")); c.Status != provision.CheckWarning || !strings.Contains(c.Detail, "slurmdbd.conf's PrivateData = none lacks jobs") ||
		strings.Contains(c.Detail, "slurm.conf's") || !strings.Contains(c.Todo, "slurmdbd.conf and restart slurmdbd") || strings.Contains(c.Todo, "slurm.conf on") {
		t.Errorf("slurmdbd.conf open: %+v; want slurmdbd.conf named, slurm.conf not", c)
	}
	if c := check(script("usage", "")); c.Status != provision.CheckWarning || !strings.Contains(c.Detail, "slurm.conf's PrivateData = usage lacks jobs") ||
		!strings.Contains(c.Detail, "slurmdbd.conf's PrivateData = none lacks jobs") {
		t.Errorf("both open: %+v", c)
	}
	if c := check(script("jobs", "-")); c.Status != provision.CheckUnknown || !strings.Contains(c.Detail, "not scripted") {
		t.Errorf("sacctmgr failing: %+v", c)
	}
	if c := check(script("none", "-")); c.Status != provision.CheckWarning || !strings.Contains(c.Detail, "could not be read") {
		t.Errorf("sacctmgr failing, slurm.conf open: %+v; want the warning, and the unread side said", c)
	}
	if c := check(script("-", "jobs")); c.Status != provision.CheckUnknown {
		t.Errorf("scontrol failing: %+v", c)
	}
	noSection := scriptedSlurm{"scontrol show config": "PrivateData = jobs\n", "sacctmgr show configuration": "PrivateData = jobs\n"}
	if c := check(noSection); c.Status != provision.CheckUnknown || !strings.Contains(c.Detail, "no slurmdbd PrivateData") {
		t.Errorf("no SlurmDBD part: %+v; want unknown (slurm.conf's value is not slurmdbd's)", c)
	}
}

// TestSlurmGPUsCheck: a node declaring fewer GPUs than its partition's
// instance type is named (the capacity approvals count is then not what
// Slurm can allocate); nodes of unmapped partitions, or listed in two
// partitions, are compared once or not at all.
func TestSlurmGPUsCheck(t *testing.T) {
	const nodes = "sinfo --all --Node --noheader --format=%N|%R|%G|%T"
	check := func(sinfo string, types map[string]string) provision.Check {
		t.Helper()
		c, ok := provision.CheckReadiness(t.Context(), provision.ReadinessSources{Slurm: scriptedSlurm{nodes: sinfo}, SlurmPartitionTypes: types}).Check(provision.CheckSlurmGPUs)
		if !ok {
			t.Fatal("no GPU check with a Slurm runner and partition types")
		}
		return c
	}
	p5 := map[string]string{"gpu": "ml.p5.48xlarge"}
	if want := provision.DefaultAccelerators["ml.p5.48xlarge"].Accelerators; want != 8 {
		t.Fatalf("ml.p5.48xlarge has %d accelerators in the table; the test assumes 8", want)
	}
	if c := check("n1|gpu|gpu:h100:8(S:0-1)|idle\nn2|gpu|gpu:8|mixed\nn2|all|gpu:8|mixed\nc1|cpu|(null)|idle\n", p5); c.Status != provision.CheckOK || !strings.Contains(c.Detail, "The 2 nodes") {
		t.Errorf("every node with its type's GPUs: %+v", c)
	}
	c := check("n1|gpu|gpu:h100:8|idle\nn2|gpu|gpu:h100:7|idle\nn3|gpu|(null)|drained\n", p5)
	if c.Status != provision.CheckWarning || !strings.Contains(c.Detail, "n2 (partition gpu, ml.p5.48xlarge) declares 7 GPUs, the type has 8") ||
		!strings.Contains(c.Detail, "n3 (partition gpu, ml.p5.48xlarge) declares 0 GPUs") || strings.Contains(c.Detail, "n1 ") || c.Todo == "" {
		t.Errorf("a node short of GPUs: %+v", c)
	}
	if c := check("c1|cpu|(null)|idle\n", p5); c.Status != provision.CheckUnknown {
		t.Errorf("no node of a mapped partition: %+v", c)
	}
	c, _ = provision.CheckReadiness(t.Context(), provision.ReadinessSources{Slurm: scriptedSlurm{}, SlurmPartitionTypes: p5}).Check(provision.CheckSlurmGPUs)
	if c.Status != provision.CheckUnknown || !strings.Contains(c.Detail, "not scripted") {
		t.Errorf("sinfo failing: %+v", c)
	}
	if _, ok := provision.CheckReadiness(t.Context(), provision.ReadinessSources{Slurm: scriptedSlurm{}}).Check(provision.CheckSlurmGPUs); ok {
		t.Error("a GPU check without partition types")
	}
}

// TestSlurmGPUsCheckOnTestBed: the test bed's node declares its GPUs in
// gres.conf (PORTAL_TEST_SLURM_GPUS); mapped to an instance type with
// that many the check passes, mapped to one with fewer it names the node
// with both counts, as sinfo reports them.
func TestSlurmGPUsCheckOnTestBed(t *testing.T) {
	conf := testenv.Require(t, "PORTAL_TEST_SLURM_CONF")
	partition := testenv.Require(t, "PORTAL_TEST_SLURM_PARTITION")
	node := testenv.Require(t, "PORTAL_TEST_SLURM_NODE")
	gpus, err := strconv.Atoi(testenv.Require(t, "PORTAL_TEST_SLURM_GPUS"))
	if err != nil {
		t.Fatal(err)
	}
	var same, fewer string
	for _, typ := range slices.Sorted(maps.Keys(provision.DefaultAccelerators)) {
		switch a := provision.DefaultAccelerators[typ].Accelerators; {
		case a == gpus && same == "":
			same = typ
		case a > 0 && a < gpus && fewer == "":
			fewer = typ
		}
	}
	if same == "" || fewer == "" {
		t.Fatalf("no instance types with %d GPUs and with fewer in DefaultAccelerators", gpus)
	}
	check := func(typ string) provision.Check {
		c, _ := provision.CheckReadiness(t.Context(), provision.ReadinessSources{Slurm: slurm.Local{Conf: conf},
			SlurmPartitionTypes: map[string]string{partition: typ}}).Check(provision.CheckSlurmGPUs)
		return c
	}
	if c := check(same); c.Status != provision.CheckOK {
		t.Errorf("mapped to %s (%d GPUs): %+v", same, gpus, c)
	}
	want := fmt.Sprintf("%s (partition %s, %s) declares %d GPUs, the type has %d", node, partition, fewer, gpus, provision.DefaultAccelerators[fewer].Accelerators)
	if c := check(fewer); c.Status != provision.CheckWarning || !strings.Contains(c.Detail, want) {
		t.Errorf("mapped to %s: %+v; want %q", fewer, c, want)
	}
}
