package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/evidence"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// bundleFile writes a small, valid evidence bundle and returns its path
// and bytes.
func bundleFile(t *testing.T) (string, []byte) {
	t.Helper()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	c := workflow.ExampleContractFor("red")
	e := evidence.Event{ID: 1, At: evidence.AuditTime(now), ActorID: 1, Actor: "owner.red@example.test", Action: "connection.create",
		ObjectType: "connection", ObjectID: 1, Team: "red", Version: 1, PrevHash: evidence.GenesisHash}
	e.Hash = evidence.ChainHash(e.PrevHash, e)
	b, err := evidence.Build(evidence.Input{
		Connection: evidence.Connection{ID: 1, Team: "red", State: "draft", CurrentVersion: 1},
		Versions:   []evidence.VersionInput{{Version: 1, Author: "owner.red@example.test", CreatedAt: now, Hash: c.Hash(), Contract: c}},
		Events:     []evidence.Event{e},
		Head:       evidence.Head{ID: 1, Count: 1, Hash: e.Hash},
	}, "admin@example.test", now)
	if err != nil {
		t.Fatal(err)
	}
	data, err := evidence.Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bundle.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, data
}

// TestEvidenceVerifyCommand runs `portal evidence verify FILE` through the
// real command, offline (no environment, no database): a bundle as written
// verifies and says OK; one byte changed fails with the check that failed.
func TestEvidenceVerifyCommand(t *testing.T) {
	noEnv := func(string) string { return "" }
	path, data := bundleFile(t)
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"evidence", "verify", path}, noEnv, &out, &errOut); err != nil {
		t.Fatalf("verify of a good bundle: %v\n%s%s", err, out.String(), errOut.String())
	}
	for _, want := range []string{"ok     1 contract version(s)", "ok     1 audit event(s)", "ok     bundle hash", "OK: " + path + " verifies"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	// One byte of the actor's name changed.
	i := bytes.Index(data, []byte(`"actor": "owner.red`)) + len(`"actor": "o`)
	bad := bytes.Clone(data)
	bad[i] = 'X'
	tampered := filepath.Join(t.TempDir(), "tampered.json")
	if err := os.WriteFile(tampered, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err := run(context.Background(), []string{"evidence", "verify", tampered}, noEnv, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "the bundle is refused") {
		t.Fatalf("verify of a changed bundle = %v, want refused\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "FAILED audit event 1: its hash is not the chain hash") || strings.Contains(out.String(), "OK:") {
		t.Errorf("output does not name the failure:\n%s", out.String())
	}

	for _, args := range [][]string{{"evidence"}, {"evidence", "check", path}, {"evidence", "verify"}, {"evidence", "verify", path, path},
		{"evidence", "verify", filepath.Join(t.TempDir(), "missing.json")}} {
		if err := run(context.Background(), args, noEnv, &out, &errOut); err == nil {
			t.Errorf("portal %v succeeded", args)
		}
	}
}
