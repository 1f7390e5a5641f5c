package hpcluster

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestHolderGone: a lock whose holder on this host has ended is reported
// at once (its cleanup will never run); a running holder's, another host's
// or one without a pid (an older fixture's) is waited for.
func TestHolderGone(t *testing.T) {
	host, _ := os.Hostname()
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	dead := strconv.Itoa(ended.Process.Pid)
	if got := holderGone(map[string]string{"holder": "TestGone", "pid": dead, "host": host}, host); !strings.Contains(got, "TestGone of pid "+dead+", which is no longer running") {
		t.Errorf("an ended holder: %q", got)
	}
	for name, data := range map[string]map[string]string{
		"running":      {"holder": "TestRunning", "pid": strconv.Itoa(os.Getpid()), "host": host},
		"another host": {"holder": "TestElsewhere", "pid": dead, "host": host + "-other"},
		"no pid":       {"holder": "TestOld"},
	} {
		if got := holderGone(data, host); got != "" {
			t.Errorf("%s: %q, want to wait", name, got)
		}
	}
}
