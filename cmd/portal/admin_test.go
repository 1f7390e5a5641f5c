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
	for _, e := range []string{"owner.red@example.test", "member.red@example.test"} {
		if _, err := db.RecordLogin(ctx, "https://idp.test", e, e, e, nil, time.Now()); err != nil {
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

	env := func(string) string { return "" }
	runCmd := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(ctx, args, env, &out, &errb)
		return out.String() + errb.String(), err
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

	// With a team role prefix in the AWS settings, import refuses roles
	// outside it, as the form does.
	settings := filepath.Join(dir, "aws.yaml")
	os.WriteFile(settings, []byte("team_role_prefix: /hyperpod-teams/\n"), 0o600)
	if _, err := runCmd("contract", "import", good, "--as", "owner.red@example.test", "--db", dbPath, "--aws-settings", settings); err == nil || !strings.Contains(err.Error(), "role/hyperpod-teams/") {
		t.Errorf("import of roles outside team_role_prefix: %v", err)
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
