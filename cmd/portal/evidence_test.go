package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/evidence"
	"github.com/hyperpod-governance/portal/internal/signing"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// testSigner is a signing key made as the portal makes its own.
func testSigner(t *testing.T) *signing.Signer {
	t.Helper()
	key := []byte("0123456789abcdef0123456789abcdef")
	s, err := signing.Generate(rand.Reader, key, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	sg, err := signing.Open(s, key)
	if err != nil {
		t.Fatal(err)
	}
	return sg
}

// tempFile writes data under a new temporary directory.
func tempFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// sampleEvidence is a small, valid evidence bundle signed with key,
// encoded, and its one audit event (the chain head at export).
func sampleEvidence(t *testing.T, key *signing.Signer, change func(*evidence.Bundle)) ([]byte, evidence.Event) {
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
	if change != nil {
		change(&b)
		if b.BundleHash, err = evidence.Hash(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := evidence.Sign(&b, key); err != nil {
		t.Fatal(err)
	}
	data, err := evidence.Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	return data, e
}

// TestEvidenceVerifyCommand runs `portal evidence verify` through the real
// command, offline (no environment, no database). Without a key a good
// bundle verifies but the command says its signature was not checked
// against a trusted key; with the portal's published key (the well-known
// page's JSON, or the base64 key) it says who signed; a bundle rewritten
// with its hashes recomputed and signed by another key verifies without a
// key and is refused with it; one changed byte is refused either way.
func TestEvidenceVerifyCommand(t *testing.T) {
	noEnv := func(string) string { return "" }
	portal, forger := testSigner(t), testSigner(t)
	data, head := sampleEvidence(t, portal, nil)
	path := tempFile(t, "bundle.json", data)
	doc, _ := json.MarshalIndent(portal.Published(), "", "  ")
	keyFile := tempFile(t, "evidence-key.json", doc)
	cli := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(context.Background(), args, noEnv, &out, &errOut)
		return out.String() + errOut.String(), err
	}

	out, err := cli("evidence", "verify", path)
	if err != nil {
		t.Fatalf("verify of a good bundle: %v\n%s", err, out)
	}
	for _, want := range []string{"ok     1 contract version(s)", "ok     1 audit event(s)", "ok     bundle hash",
		"NOTE   the signature was NOT checked against a trusted key", "OK (hashes only): " + path, "NOT checked against a trusted key, so nothing here shows who made it"} {
		if !strings.Contains(out, want) {
			t.Errorf("without a key, the output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "signed by the trusted key") {
		t.Errorf("without a key the command claims a trusted signature:\n%s", out)
	}
	for _, keyArgs := range [][]string{{"--key-file", keyFile}, {"--key-file=" + keyFile}, {"--key", signing.EncodePublic(portal.Public())}} {
		args := append(append([]string{"evidence", "verify"}, keyArgs...), path)
		out, err := cli(args...)
		if err != nil || !strings.Contains(out, "OK: "+path+" verifies and is signed by the trusted key "+portal.KeyID()) || strings.Contains(out, "NOTE") {
			t.Errorf("portal %v = %v\n%s", args, err, out)
		}
	}

	// Rewritten, hashes recomputed, signed by the forger's key.
	forged, _ := sampleEvidence(t, forger, func(b *evidence.Bundle) { b.GeneratedBy = "auditor@example.test" })
	forgedPath := tempFile(t, "forged.json", forged)
	if out, err := cli("evidence", "verify", forgedPath); err != nil || !strings.Contains(out, "OK (hashes only)") {
		t.Fatalf("the forgery fails the file's own checks, the test forges badly: %v\n%s", err, out)
	}
	out, err = cli("evidence", "verify", "--key-file", keyFile, forgedPath)
	if err == nil || !strings.Contains(err.Error(), "the bundle is refused") || !strings.Contains(out, "FAILED signature: the bundle is signed by key "+forger.KeyID()+", not by the trusted key "+portal.KeyID()) {
		t.Errorf("the forgery against the portal's key = %v\n%s", err, out)
	}
	// The portal's bundle against the wrong key.
	if out, err := cli("evidence", "verify", "--key", signing.EncodePublic(forger.Public()), path); err == nil || strings.Contains(out, "OK") {
		t.Errorf("the portal's bundle against another key = %v\n%s", err, out)
	}

	// One byte of the actor's name changed.
	i := bytes.Index(data, []byte(`"actor": "owner.red`)) + len(`"actor": "o`)
	bad := bytes.Clone(data)
	bad[i] = 'X'
	tampered := tempFile(t, "tampered.json", bad)
	out, err = cli("evidence", "verify", "--key-file", keyFile, tampered)
	if err == nil || !strings.Contains(err.Error(), "the bundle is refused") {
		t.Fatalf("verify of a changed bundle = %v, want refused\n%s", err, out)
	}
	if !strings.Contains(out, "FAILED audit event 1: its hash is not the chain hash") || strings.Contains(out, "OK") {
		t.Errorf("output does not name the failure:\n%s", out)
	}

	// A published head: the bundle's head agrees; another hash there is
	// refused.
	if out, err := cli("evidence", "verify", "--key-file", keyFile, "--audit-head", "1:"+head.Hash, path); err != nil || !strings.Contains(out, "ok     the published audit head (event 1") {
		t.Errorf("--audit-head of the bundle's head = %v\n%s", err, out)
	}
	if out, err := cli("evidence", "verify", "--audit-head=1:"+strings.Repeat("a", 64), path); err == nil || !strings.Contains(out, "FAILED audit head") {
		t.Errorf("--audit-head of another chain = %v\n%s", err, out)
	}

	for _, args := range [][]string{{"evidence"}, {"evidence", "check", path}, {"evidence", "verify"}, {"evidence", "verify", path, path},
		{"evidence", "verify", filepath.Join(t.TempDir(), "missing.json")}, {"evidence", "verify", "--key"}, {"evidence", "verify", "--key", "abc", path},
		{"evidence", "verify", "--key", signing.EncodePublic(portal.Public()), "--key-file", keyFile, path},
		{"evidence", "verify", "--key-file", filepath.Join(t.TempDir(), "none"), path}, {"evidence", "verify", "--audit-head", "12", path},
		{"evidence", "verify", "--frobnicate", path}, {"evidence", "verify", "--audit-head", "1:" + head.Hash, "--audit-head", "1:" + head.Hash, path}} {
		if out, err := cli(args...); err == nil {
			t.Errorf("portal %v succeeded:\n%s", args, out)
		}
	}
}
