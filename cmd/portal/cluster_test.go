package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
)

func TestClusterCheckerSources(t *testing.T) {
	c, err := clusterChecker(nil, awsSide{}, "")
	if err != nil || c.CanRead() || c.Sources.PodIdentity {
		t.Errorf("dry run without AWS: %+v, %v", c.Sources, err)
	}
	var logs bytes.Buffer
	logReadiness(context.Background(), c, slog.New(slog.NewTextHandler(&logs, nil)))
	if !strings.Contains(logs.String(), "not checked") {
		t.Errorf("start-up log without sources: %s", logs.String())
	}
	s := awsprov.DevSettings()
	s.PodIdentity = nil // the default: on
	c, err = clusterChecker(&rest.Config{Host: "https://127.0.0.1:1"}, awsSide{Settings: s}, provision.AdmissionDeny)
	if err != nil || !c.CanRead() || c.Sources.Kube == nil || !c.Sources.PodIdentity || c.Sources.ClusterARN != s.ClusterARN || c.Sources.Addons != nil ||
		c.Sources.AdmissionMode != provision.AdmissionDeny {
		t.Errorf("with a cluster and settings (dry-run AWS): %+v, %v", c.Sources, err)
	}
}
