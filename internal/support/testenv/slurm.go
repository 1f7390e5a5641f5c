package testenv

import (
	"os"
	"path/filepath"
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

// SlurmUsers are the test bed's local accounts of team ("red" or "blue")
// reserved for the calling package's tests (PORTAL_TEST_SLURM_USERS,
// entries lane:team:user; the lane is the package directory's name).
// Slurm's user records are global (default account, coordinators), and
// packages' tests run at once: a package never shares its users with
// another. It skips, naming make test, when the test bed is not up.
func SlurmUsers(t testing.TB, team string) []string {
	t.Helper()
	all := Require(t, "PORTAL_TEST_SLURM_USERS")
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	lane := filepath.Base(wd)
	var users []string
	for _, e := range strings.Split(all, ",") {
		if parts := strings.Split(e, ":"); len(parts) == 3 && parts[0] == lane && parts[1] == team {
			users = append(users, parts[2])
		}
	}
	if len(users) < 2 {
		t.Fatalf("the test bed has %d %s Slurm users for package %s, want 2: add %q to LANES in hack/testbed/slurm.sh", len(users), team, lane, lane)
	}
	return users
}
