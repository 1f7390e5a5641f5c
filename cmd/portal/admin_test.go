package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

func TestContractImportAndAuditVerify(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "portal.db")
	db, err := store.Open(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for e, groups := range map[string][]string{
		"owner.red@example.test":  {"team-red-owners"},
		"member.red@example.test": {"team-red-members"},
		"owner.blue@example.test": {"team-blue-owners"},
		"admin@example.test":      {"platform-admins"},
	} {
		if _, err := db.RecordLogin(ctx, "https://idp.test", e, e, e, groups, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	ex := workflow.ExampleContract()
	y, err := yaml.JSONToYAML(ex.Canonical())
	if err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "red.yaml")
	os.WriteFile(good, y, 0o600)
	bad := ex
	bad.AccountID = "12"
	badFile := filepath.Join(dir, "bad.json")
	os.WriteFile(badFile, bad.Canonical(), 0o600)
	unknown := filepath.Join(dir, "unknown.json")
	os.WriteFile(unknown, []byte(`{"team":"red","surprise":1}`), 0o600)

	groupsFile := filepath.Join(dir, "groups.yaml")
	os.WriteFile(groupsFile, []byte("roles:\n  admin: [platform-admins]\nteams:\n  red:\n    owners: [team-red-owners]\n    members: [team-red-members]\n  blue:\n    owners: [team-blue-owners]\n"), 0o600)
	env := func(k string) string {
		if k == "PORTAL_GROUPS_FILE" {
			return groupsFile
		}
		return ""
	}
	runCmd := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(ctx, args, env, &out, &errb)
		return out.String() + errb.String(), err
	}

	// Only an owner of the contract's team may file it, as in the form: a
	// member, another team's owner and an admin are refused, nothing is
	// written.
	for _, as := range []string{"member.red@example.test", "owner.blue@example.test", "admin@example.test"} {
		if out, err := runCmd("contract", "import", good, "--as", as, "--db", dbPath); err == nil || !strings.Contains(err.Error(), "may not file a request for team \"red\"") || !strings.Contains(err.Error(), "nothing was imported") {
			t.Errorf("import as %s: %v\n%s", as, err, out)
		}
	}
	if _, err := runCmd("contract", "import", good, "--as", "owner.red@example.test", "--db", dbPath, "--groups-file="); err == nil || !strings.Contains(err.Error(), "--groups-file: required") {
		t.Errorf("import without a groups file: %v", err)
	}

	out, err := runCmd("contract", "import", good, "--as", "owner.red@example.test", "--db", dbPath)
	if err != nil || !strings.Contains(out, "draft connection #1 for team red") || !strings.Contains(out, ex.Hash()) {
		t.Fatalf("import: %v\n%s", err, out)
	}
	if _, err := runCmd("contract", "import", badFile, "--as", "owner.red@example.test", "--db", dbPath); err == nil || !strings.Contains(err.Error(), "account_id") || !strings.Contains(err.Error(), "nothing was imported") {
		t.Errorf("bad contract import: %v", err)
	}
	if _, err := runCmd("contract", "import", unknown, "--as", "owner.red@example.test", "--db", dbPath); err == nil || !strings.Contains(err.Error(), "surprise") {
		t.Errorf("unknown field import: %v", err)
	}
	if _, err := runCmd("contract", "import", good, "--as", "nobody@example.test", "--db", dbPath); err == nil || !strings.Contains(err.Error(), "no portal user") {
		t.Errorf("import as unknown user: %v", err)
	}
	if _, err := runCmd("contract", "import", good, "--db", dbPath); err == nil || !strings.Contains(err.Error(), "--as") {
		t.Errorf("import without --as: %v", err)
	}

	out, err = runCmd("audit", "verify", "--db", dbPath)
	if err != nil || !strings.Contains(out, "audit chain OK: 1 events") {
		t.Fatalf("verify: %v\n%s", err, out)
	}
	// Tamper with the stored event behind the triggers' back.
	db, err = store.Open(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.ExecForTest(ctx, `DROP TRIGGER audit_no_update`, `UPDATE audit_events SET actor = 'mallory@example.test' WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = runCmd("audit", "verify", "--db", dbPath)
	if err == nil || !strings.Contains(err.Error(), "BROKEN at event 1") {
		t.Errorf("verify after tampering: %v", err)
	}
}
