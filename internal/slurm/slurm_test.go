package slurm

import (
	"context"
	"strings"
	"testing"
)

func TestRows(t *testing.T) {
	rows, err := Rows([]byte("Account|User|GrpTRES\nred||gres/gpu=4\nred|hp-red-1|\n"))
	if err != nil || len(rows) != 2 || rows[0]["GrpTRES"] != "gres/gpu=4" || rows[1]["User"] != "hp-red-1" || rows[0]["User"] != "" {
		t.Fatalf("Rows = %v, %v", rows, err)
	}
	if _, err := Rows([]byte("A|B\nx|y|z\n")); err == nil || !strings.Contains(err.Error(), "line 2 has 3 fields") {
		t.Errorf("a line with a stray | : %v", err)
	}
	if _, err := Rows(nil); err == nil {
		t.Error("no header: no error")
	}
	if rows, err := Rows([]byte("A|B\n")); err != nil || len(rows) != 0 {
		t.Errorf("header only = %v, %v", rows, err)
	}
}

func TestTRES(t *testing.T) {
	m, err := TRES("billing=1,cpu=1,gres/gpu=2,node=1")
	if err != nil || m["gres/gpu"] != "2" || m["cpu"] != "1" || len(m) != 4 {
		t.Fatalf("TRES = %v, %v", m, err)
	}
	if m, err := TRES(""); err != nil || len(m) != 0 {
		t.Errorf("empty = %v, %v", m, err)
	}
	if _, err := TRES("cpu"); err == nil {
		t.Error("cpu without a count: no error")
	}
}

// TestLocalRunsOnlySlurmCommands: the transport runs Slurm's commands and
// nothing else, whatever a caller passes.
func TestLocalRunsOnlySlurmCommands(t *testing.T) {
	if _, err := (Local{}).Run(context.Background(), "sh", "-c", "true"); err == nil || !strings.Contains(err.Error(), "not one of the Slurm commands") {
		t.Errorf("Run(sh) = %v", err)
	}
}

type plainRunner struct{}

func (plainRunner) Run(context.Context, string, ...string) ([]byte, error) { return nil, nil }

// TestRunEnv: a transport that cannot set the environment fails the command
// instead of running it without; Local refuses an entry that is not
// NAME=value before running anything.
func TestRunEnv(t *testing.T) {
	if _, err := RunEnv(t.Context(), plainRunner{}, []string{"TZ=UTC"}, "sacct"); err == nil || !strings.Contains(err.Error(), "cannot set TZ=UTC") {
		t.Errorf("RunEnv on a plain runner: %v", err)
	}
	for _, bad := range []string{"TZ", "=x", "tz=UTC", "A-B=1"} {
		if _, err := (Local{}).RunEnv(t.Context(), []string{bad}, "sacct"); err == nil || !strings.Contains(err.Error(), "NAME=value") {
			t.Errorf("Local.RunEnv %q: %v", bad, err)
		}
	}
}
