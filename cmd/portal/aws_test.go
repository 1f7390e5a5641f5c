package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/auth"
	"github.com/hyperpod-governance/portal/internal/support/awstest"
)

func TestLoadAWS(t *testing.T) {
	ctx := t.Context()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	write := func(body string) string {
		p := filepath.Join(t.TempDir(), "aws.yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	side, err := loadAWS(ctx, Config{}, auth.DevMapping(), false, logger)
	if err != nil || side.Settings.Enabled || side.Runner != nil {
		t.Errorf("no settings: %+v, %v; want AWS off", side, err)
	}
	side, err = loadAWS(ctx, Config{Dev: true}, auth.DevMapping(), true, logger)
	if err != nil || !side.Settings.Enabled || side.Runner != nil || side.scheduler() != nil {
		t.Errorf("dev dry run: %+v, %v; want the example settings and no runner", side, err)
	}
	if got := side.Settings.TeamGroups["red"]; strings.Join(got, ",") != "team-red-members,team-red-owners" {
		t.Errorf("team red's Studio groups = %v", got)
	}

	_, err = loadAWS(ctx, Config{AWSSettingsFile: write("studio:\n  vpc_id: vpc-1\n")}, auth.DevMapping(), false, logger)
	for _, want := range []string{"identity_store_id is required", "studio.vpc_id", "studio.subnet_ids"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bad settings: %v; want it to mention %s", err, want)
		}
	}

	good := write("region: us-east-1\nstudio:\n  vpc_id: vpc-0a1b2c3d4e5f60718\n  subnet_ids: [subnet-0a1b2c3d4e5f60001]\n  security_group_ids: [sg-0a1b2c3d4e5f60718]\n")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	cfg := Config{AWSSettingsFile: good, IdentityStoreID: "d-1234567890", AWSEndpoints: map[string]string{"eks": "http://127.0.0.1:1"}}
	side, err = loadAWS(ctx, cfg, auth.DevMapping(), false, logger)
	if err != nil || side.Runner == nil || side.scheduler() == nil {
		t.Fatalf("real settings: %+v, %v; want a runner", side, err)
	}
	if side.Settings.IdentityStoreID != "d-1234567890" {
		t.Errorf("identity store %q, want --identity-store-id's", side.Settings.IdentityStoreID)
	}
	cfg.AWSRegion = "eu-west-1"
	if _, err := loadAWS(ctx, cfg, auth.DevMapping(), false, logger); err == nil || !strings.Contains(err.Error(), "is not the settings' region") {
		t.Errorf("region mismatch: %v", err)
	}
}

func TestLoadCluster(t *testing.T) {
	write := func(body string) string {
		p := filepath.Join(t.TempDir(), "cluster.yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	s, err := loadCluster(Config{OnRevoke: "delete"})
	if err != nil || s.NamespacePrefix != "hyperpod-ns-" || s.ClusterQueueManagedByPortal || s.OnRevoke != "delete" || len(s.AllowedInstanceTypes()) == 0 {
		t.Errorf("no file: %+v, %v; want the defaults", s, err)
	}
	s, err = loadCluster(Config{OnRevoke: "lock", ClusterSettingsFile: write("namespace_prefix: ml-\ncluster_queue: {managed_by_portal: true}\npriority_classes: [{name: urgent, value: 10}]\ninstance_types: [ml.g5.8xlarge]\n")})
	if err != nil || s.NamespacePrefix != "ml-" || !s.ClusterQueueManagedByPortal || len(s.PriorityClasses) != 1 ||
		strings.Join(s.AllowedInstanceTypes(), ",") != "ml.g5.8xlarge" || s.OnRevoke != "lock" || s.MaxPodsPerInstance == 0 {
		t.Errorf("file: %+v, %v", s, err)
	}
	bad := write("namespace_prefix: BAD\nsurprise: true\n")
	if _, err := loadCluster(Config{OnRevoke: "lock", ClusterSettingsFile: bad}); err == nil || !strings.Contains(err.Error(), "--cluster-settings "+bad) || !strings.Contains(err.Error(), "surprise") {
		t.Errorf("unknown key: %v", err)
	}
	bad = write("namespace_prefix: BAD\nmax_pods_per_instance: -1\n")
	_, err = loadCluster(Config{OnRevoke: "lock", ClusterSettingsFile: bad})
	for _, want := range []string{"--cluster-settings " + bad + ": every problem at once", "namespace_prefix", "max_pods_per_instance"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bad file: %v; want it to mention %q", err, want)
		}
	}
	if _, err := loadCluster(Config{OnRevoke: "lock", ClusterSettingsFile: filepath.Join(t.TempDir(), "missing.yaml")}); err == nil || !strings.Contains(err.Error(), "--cluster-settings") {
		t.Errorf("missing file: %v", err)
	}
}

// TestSlurmOverSessionManager: --slurm-controller-group gives the worker,
// the drift checker and the readiness checks the Session Manager transport
// to the HyperPod cluster's controller node: found with ListClusterNodes on
// the settings' cluster_arn, reached over the (local, strict) SSM endpoint,
// the command run from --slurm-bin. It needs --aws-settings with
// cluster_arn, and is not combined with --slurm-conf. Without --kubeconfig
// (a Slurm-only portal) the transport is made all the same.
func TestSlurmOverSessionManager(t *testing.T) {
	ctx := t.Context()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if errs := (Config{SlurmConf: "/etc/slurm/slurm.conf", SlurmControllerGroup: "controller"}).validate("serve"); !strings.Contains(fmt.Sprint(errs), "choose one Slurm transport") {
		t.Errorf("both transports: %v", errs)
	}
	if errs := (Config{SlurmBin: "/opt/slurm/bin"}).validate("serve"); !strings.Contains(fmt.Sprint(errs), "--slurm-bin: only with --slurm-controller-group") {
		t.Errorf("--slurm-bin alone: %v", errs)
	}
	if _, err := loadAWS(ctx, Config{SlurmControllerGroup: "controller"}, auth.DevMapping(), false, logger); err == nil || !strings.Contains(err.Error(), "needs --aws-settings") {
		t.Errorf("no settings: %v", err)
	}
	write := func(body string) string {
		p := filepath.Join(t.TempDir(), "aws.yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Setenv("AWS_ACCESS_KEY_ID", awstest.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", awstest.SecretAccessKey)
	base := "region: us-east-1\nstudio:\n  vpc_id: vpc-0a1b2c3d4e5f60718\n  subnet_ids: [subnet-0a1b2c3d4e5f60001]\n  security_group_ids: [sg-0a1b2c3d4e5f60718]\n"
	cfg := Config{AWSSettingsFile: write(base), IdentityStoreID: "d-1234567890", SlurmControllerGroup: "controller", AWSEndpoints: map[string]string{}}
	if _, err := loadAWS(ctx, cfg, auth.DevMapping(), false, logger); err == nil || !strings.Contains(err.Error(), "need cluster_arn") {
		t.Errorf("settings without cluster_arn: %v", err)
	}

	sm := awstest.NewSageMaker(t)
	hp := awstest.HyperPodCluster{Name: "slurm-hp", ID: "a1b2c3d4e5f6", Groups: []awstest.InstanceGroup{
		{Name: "controller", Instances: []string{"i-0123456789abcdef0"}},
		{Name: "workers", Instances: []string{"i-0aaaaaaaaaaaaaaa1", "i-0aaaaaaaaaaaaaaa2"}},
	}}
	sm.AddHyperPodCluster(hp)
	ssmEnd := awstest.NewSSM(t, "/nonexistent/slurm.conf")
	ssmEnd.Connect("sagemaker-cluster:a1b2c3d4e5f6_controller-i-0123456789abcdef0")
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "sinfo"), []byte("#!/bin/sh\necho \"PARTITION|$1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg.AWSSettingsFile = write(base + "cluster_arn: " + hp.ARN() + "\n")
	cfg.AWSEndpoints = map[string]string{"sagemaker": sm.URL(), "ssm": ssmEnd.URL()}
	cfg.SlurmBin = bin
	side, err := loadAWS(ctx, cfg, auth.DevMapping(), false, logger)
	if err != nil || side.Slurm == nil {
		t.Fatalf("Session Manager settings: %+v, %v; want a Slurm transport", side, err)
	}
	out, err := side.Slurm.Run(ctx, "sinfo", "--noheader")
	if err != nil || string(out) != "PARTITION|--noheader\n" {
		t.Fatalf("sinfo over Session Manager = %q, %v", out, err)
	}
	if cmds := ssmEnd.Commands(); len(cmds) != 1 || !strings.Contains(cmds[0], filepath.Join(bin, "sinfo")) {
		t.Errorf("sessions ran %q; want one, of %s", cmds, filepath.Join(bin, "sinfo"))
	}
	checker, err := clusterChecker(nil, side, "")
	if err != nil || checker.Sources.Slurm == nil {
		t.Errorf("the readiness checks have no Slurm runner: %v", err)
	}
	// A portal for a Slurm cluster has no --kubeconfig: its Kubernetes
	// and AWS steps run dry (no AWS runner), and it still gets the Slurm
	// transport its Slurm connections are provisioned through.
	dry, err := loadAWS(ctx, cfg, auth.DevMapping(), true, logger)
	if err != nil || dry.Slurm == nil || dry.Runner != nil {
		t.Fatalf("without a cluster: Slurm %v, AWS runner %v, err %v; want the Slurm transport and no AWS runner", dry.Slurm, dry.Runner, err)
	}
	if out, err := dry.Slurm.Run(ctx, "sinfo", "--noheader"); err != nil || string(out) != "PARTITION|--noheader\n" {
		t.Errorf("sinfo over Session Manager without a cluster = %q, %v", out, err)
	}
}
