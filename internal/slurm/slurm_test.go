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
