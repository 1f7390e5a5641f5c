package main

import (
	"fmt"
	"os"

	"github.com/hyperpod-governance/portal/internal/provision"
)

// loadCluster reads --cluster-settings (the shared cluster's namespace
// prefix, priority classes, ClusterQueue mode, accelerator table and
// instance types) over the defaults, and reports every problem in it at
// once, naming the file. A separate file rather than a section of
// --aws-settings: these settings shape the Kubernetes plan, which runs
// without any AWS settings too.
func loadCluster(cfg Config) (provision.ClusterSettings, error) {
	s := provision.ClusterSettings{}
	if cfg.ClusterSettingsFile != "" {
		b, err := os.ReadFile(cfg.ClusterSettingsFile)
		if err != nil {
			return s, fmt.Errorf("--cluster-settings: %w", err)
		}
		if s, err = provision.ParseClusterSettings(b); err != nil {
			return s, fmt.Errorf("--cluster-settings %s: every problem at once:\n%w", cfg.ClusterSettingsFile, err)
		}
	}
	s.OnRevoke = provision.RevokeMode(cfg.OnRevoke)
	s = s.WithDefaults()
	if err := s.Check(); err != nil {
		where := "--cluster-settings " + cfg.ClusterSettingsFile
		if cfg.ClusterSettingsFile == "" {
			where = "cluster settings"
		}
		return s, fmt.Errorf("%s: %w", where, err)
	}
	return s, nil
}
