package slurmssm_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/slurm"
	"github.com/hyperpod-governance/portal/internal/support/testenv"
)

// TestTransportMatchesLocalOnTestBedSlurm runs Slurm's commands on the
// test bed's real Slurm through the AWS transport (StartSession, the data
// channel, the agent's shlex split and sh on the local SSM endpoint) and
// through Local, and gets the same rows; an account written through the
// transport with shell syntax in its description is stored verbatim.
func TestTransportMatchesLocalOnTestBedSlurm(t *testing.T) {
	conf := testenv.Require(t, "PORTAL_TEST_SLURM_CONF")
	local := slurm.Local{Conf: conf}
	end, tr := newTransport(t, conf)
	ctx := t.Context()
	// Rows no other test changes: make test runs the packages in
	// parallel on the one Slurm, and they add and remove accounts, QoS
	// and associations, and drain the node, meanwhile (a run compared all
	// QoS and saw another test's new one between the two reads).
	queries := [][]string{
		{"sinfo", "--format=%R|%a|%D|%G"},
		{"sacctmgr", "-P", "show", "associations", "where", "account=root", "format=Cluster,Account,User,Partition,GrpTRES,QOS"},
		{"sacctmgr", "-P", "show", "qos", "where", "name=normal", "format=Name,Priority,GrpTRES,Preempt,PreemptMode"},
		{"scontrol", "-o", "show", "partition"},
	}
	for _, q := range queries {
		want, err := local.Run(ctx, q[0], q[1:]...)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tr.Run(ctx, q[0], q[1:]...)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%v through SSM:\n%s\nlocally:\n%s", q, got, want)
		}
		if q[0] != "scontrol" {
			rows, err := slurm.Query(ctx, tr, q[0], q[1:]...)
			lrows, lerr := slurm.Query(ctx, local, q[0], q[1:]...)
			if err != nil || lerr != nil || len(rows) == 0 || !reflect.DeepEqual(rows, lrows) {
				t.Errorf("%v rows through SSM %v (%v), locally %v (%v)", q, rows, err, lrows, lerr)
			}
		}
	}

	// The oracle for what Slurm stores is the same account written
	// locally: sacctmgr folds the text's case and turns quotes into
	// backquotes. (No "|" in it: parsable output does not escape one.)
	acct := fmt.Sprintf("ssm%d", time.Now().UnixNano()%1_000_000_000)
	descr := `Team's GPUs; $(touch /tmp/x) "quoted" & x`
	t.Cleanup(func() {
		local.Run(context.Background(), "sacctmgr", "-i", "delete", "account", acct)
		local.Run(context.Background(), "sacctmgr", "-i", "delete", "account", acct+"l")
	})
	if _, err := tr.Run(ctx, "sacctmgr", "-i", "add", "account", acct, "Description="+descr, "Organization=portal"); err != nil {
		t.Fatal(err)
	}
	if _, err := local.Run(ctx, "sacctmgr", "-i", "add", "account", acct+"l", "Description="+descr, "Organization=portal"); err != nil {
		t.Fatal(err)
	}
	rows, err := slurm.Query(ctx, local, "sacctmgr", "-P", "show", "account", "where", "name="+acct+","+acct+"l", "format=Account,Descr,Org")
	if err != nil || len(rows) != 2 || rows[0]["Descr"] != rows[1]["Descr"] || !strings.Contains(rows[0]["Descr"], "$(touch /tmp/x)") {
		t.Errorf("accounts written through SSM and locally read back as %v (%v), want description %q on both", rows, err, descr)
	}
	if _, err := tr.Run(ctx, "sacctmgr", "-i", "delete", "account", acct); err != nil {
		t.Fatal(err)
	}

	// A failing command fails the same way on both transports.
	_, lerr := local.Run(ctx, "scontrol", "show", "partition", "nosuchpartition")
	_, terr := tr.Run(ctx, "scontrol", "show", "partition", "nosuchpartition")
	if lerr == nil || terr == nil || lerr.Error() != terr.Error() {
		t.Errorf("a failing command: through SSM %v, locally %v", terr, lerr)
	}
	if n := end.Open(); n != 0 {
		t.Errorf("%d sessions left open", n)
	}
}
