package provision_test

import (
	"os"
	"path/filepath"
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
