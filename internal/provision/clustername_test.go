package provision

import (
	"strings"
	"testing"
)

// cluster_name names the HyperPod cluster whose inventory the usage
// collector keeps; a name HyperPod would refuse is a start-up error, and
// the docs' example sets it.
func TestClusterSettingsClusterName(t *testing.T) {
	s, err := ParseClusterSettings([]byte("cluster_name: shared-hp\n"))
	if err != nil || s.ClusterName != "shared-hp" {
		t.Fatalf("ClusterName = %q, %v", s.ClusterName, err)
	}
	for _, bad := range []string{"-shared", "shared_hp", strings.Repeat("a", 64)} {
		if _, err := ParseClusterSettings([]byte("cluster_name: " + bad + "\n")); err == nil || !strings.Contains(err.Error(), "cluster_name") {
			t.Errorf("cluster_name %q: %v; want an error naming cluster_name", bad, err)
		}
	}
}
