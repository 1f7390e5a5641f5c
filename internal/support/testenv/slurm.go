package testenv

import (
	"os"
	"strings"
	"testing"
)

// SlurmClusterName is the ClusterName of the test bed's slurm.conf
// (PORTAL_TEST_SLURM_CONF): the cluster its accounting database knows.
func SlurmClusterName(t testing.TB, conf string) string {
	t.Helper()
	b, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && strings.EqualFold(k, "ClusterName") {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("%s names no ClusterName", conf)
	return ""
}
