package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/hyperpod-governance/portal/internal/evidence"
)

// evidenceCmd is `portal evidence verify FILE`: it checks a connection's
// evidence bundle (downloaded from /connections/ID/evidence.json) offline,
// with no database, configuration or network, prints each check that
// passed and OK, or what failed (and the command exits 1).
func evidenceCmd(args []string, stdout, stderr io.Writer) error {
	const usage = "usage: portal evidence verify FILE"
	if len(args) == 0 || args[0] != "verify" {
		fmt.Fprintln(stderr, usage)
		return errors.New("evidence: the only subcommand is verify")
	}
	if len(args) != 2 || args[1] == "" || args[1] == "-h" || args[1] == "--help" {
		fmt.Fprintln(stderr, usage)
		return errors.New("evidence verify: give exactly one bundle file")
	}
	data, err := os.ReadFile(args[1])
	if err != nil {
		return fmt.Errorf("evidence verify: %w", err)
	}
	rep := evidence.Verify(data)
	for _, ch := range rep.Checked {
		fmt.Fprintln(stdout, "ok    ", ch)
	}
	for _, f := range rep.Failures {
		fmt.Fprintln(stdout, "FAILED", f)
	}
	if !rep.OK() {
		return fmt.Errorf("evidence verify %s: %d check(s) failed: the bundle is refused", args[1], len(rep.Failures))
	}
	fmt.Fprintf(stdout, "OK: %s verifies (read what this proves under verification_limits in the file)\n", args[1])
	return nil
}
