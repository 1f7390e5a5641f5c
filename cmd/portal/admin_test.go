package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
	// Over a size cap (workflow.Limits): import applies the form's caps.
	long := ex
	long.Signals = slices.Clone(ex.Signals)
	long.Signals[0].Response = strings.Repeat("r", workflow.MaxRowTextLen+1)
	longFile := filepath.Join(dir, "long.json")
	os.WriteFile(longFile, long.Canonical(), 0o600)
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
	if _, err := runCmd("contract", "import", longFile, "--as", "owner.red@example.test", "--db", dbPath); err == nil || !strings.Contains(err.Error(), "signals[0].response: is too long (501 characters): at most 500") || !strings.Contains(err.Error(), "nothing was imported") {
		t.Errorf("over-cap contract import: %v", err)
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

// A hash chain cannot show that its newest events were removed; the head
// published by `portal audit head` can.
func TestAuditHeadDetectsARemovedTail(t *testing.T) {
	ctx := context.Background()
	dbPath := filepath.Join(t.TempDir(), "portal.db")
	db, err := store.Open(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := db.RecordClusterEvent(ctx, "test.event", workflow.Actor{Email: "admin@example.test"}, fmt.Sprint("event ", i+1), time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	env := func(string) string { return "" }
	runCmd := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(ctx, args, env, &out, &errb)
		return out.String() + errb.String(), err
	}
	out, err := runCmd("audit", "head", "--db", dbPath)
	m := regexp.MustCompile(`^audit head: 5 events, newest #5, hash ([0-9a-f]{64})\n$`).FindStringSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("audit head: %v\n%q", err, out)
	}
	head := m[1]
	if out, err := runCmd("audit", "verify", "--head", head, "--db", dbPath); err != nil || !strings.Contains(out, "audit chain OK: 5 events verified; the published head is event #5") {
		t.Fatalf("verify --head on the intact chain: %v\n%s", err, out)
	}
	if _, err := runCmd("audit", "verify", "--head", "abc", "--db", dbPath); err == nil || !strings.Contains(err.Error(), "not a SHA-256 hash") {
		t.Errorf("verify --head abc: %v", err)
	}

	// Remove the two newest events behind the triggers' back: the chain
	// that remains verifies, the published head does not.
	db, err = store.Open(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.ExecForTest(ctx, `DROP TRIGGER audit_no_delete`, `DELETE FROM audit_events WHERE id > 3`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if out, err := runCmd("audit", "verify", "--db", dbPath); err != nil || !strings.Contains(out, "audit chain OK: 3 events") {
		t.Fatalf("plain verify after the truncation (cannot see it): %v\n%s", err, out)
	}
	_, err = runCmd("audit", "verify", "--head", head, "--db", dbPath)
	if err == nil || !strings.Contains(err.Error(), "TRUNCATED") || !strings.Contains(err.Error(), head) ||
		!strings.Contains(err.Error(), "newest event #3") || !strings.Contains(err.Error(), "events after #3 up to the published head were removed") {
		t.Errorf("verify --head after the truncation: %v", err)
	}
	// Events appended after the truncation do not hide it.
	db, err = store.Open(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := db.RecordClusterEvent(ctx, "test.event", workflow.Actor{Email: "admin@example.test"}, "later", time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	if _, err = runCmd("audit", "verify", "--head", head, "--db", dbPath); err == nil || !strings.Contains(err.Error(), "TRUNCATED") {
		t.Errorf("verify --head after truncation and new events: %v", err)
	}
}

// serve logs the head at start and at every store.AuditHeadLogEvery-th
// event, so the log store keeps it.
func TestLogAuditHeads(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	add := func(n int) {
		for range n {
			if err := db.RecordClusterEvent(ctx, "test.event", workflow.Actor{Email: "a@example.test"}, "", time.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	add(3)
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	tick := make(chan time.Time)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); logAuditHeads(runCtx, db, logger, tick) }()
	tick <- time.Time{} // the start line is written before the first tick is taken
	add(2*store.AuditHeadLogEvery - 3 + 1)
	tick <- time.Time{}
	tick <- time.Time{} // taken only once the previous tick's lines are written
	cancel()
	<-done
	var heads []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		if m["msg"] == "audit chain head" {
			heads = append(heads, m)
		}
	}
	want := []float64{3, store.AuditHeadLogEvery, 2 * store.AuditHeadLogEvery}
	if len(heads) != len(want) {
		t.Fatalf("head lines %v, want events %v", heads, want)
	}
	for i, h := range heads {
		if h["events"] != want[i] || len(h["hash"].(string)) != 64 {
			t.Errorf("head line %d = %v, want %v events", i, h, want[i])
		}
	}
	h, _ := db.AuditHeadAt(ctx, heads[2]["hash"].(string))
	if h.Count != 2*store.AuditHeadLogEvery {
		t.Errorf("the logged hash is event %+v", h)
	}
}

// `audit verify` and `audit head` check the database that is there: a
// missing path, an empty file or a database without events fails with a
// message saying so, and nothing is created or migrated (issue 32 item 7).
func TestAuditVerifyNeverCreatesADatabase(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	env := func(string) string { return "" }
	runCmd := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(ctx, args, env, &out, &errb)
		return out.String() + errb.String(), err
	}
	missing := filepath.Join(dir, "typo", "portal.db")
	for _, sub := range []string{"verify", "head"} {
		out, err := runCmd("audit", sub, "--db", missing)
		if err == nil || !strings.Contains(err.Error(), "no database at this path") || strings.Contains(out, "OK") {
			t.Errorf("audit %s on a missing path: %v\n%s", sub, err, out)
		}
		if _, err := os.Stat(filepath.Dir(missing)); !os.IsNotExist(err) {
			t.Fatalf("audit %s created the directory of a missing database: %v", sub, err)
		}
	}
	// An empty file (what a former version left behind) has no schema,
	// and stays empty.
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"verify", "head"} {
		out, err := runCmd("audit", sub, "--db", empty)
		if err == nil || !strings.Contains(err.Error(), "no portal schema here") {
			t.Errorf("audit %s on an empty file: %v\n%s", sub, err, out)
		}
		if fi, err := os.Stat(empty); err != nil || fi.Size() != 0 {
			t.Fatalf("audit %s wrote to the empty file: %v", sub, err)
		}
	}
	// A migrated database without any event: verify has nothing to show.
	fresh := filepath.Join(dir, "fresh.db")
	db, err := store.Open(ctx, fresh)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if out, err := runCmd("audit", "verify", "--db", fresh); err == nil || !strings.Contains(err.Error(), "audit trail of "+fresh+" is empty") {
		t.Errorf("verify of a trail without events: %v\n%s", err, out)
	}
	// On a real trail verify writes nothing: the file's bytes are unchanged.
	db, err = store.Open(ctx, fresh)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.RecordClusterEvent(ctx, "test.event", workflow.Actor{Email: "admin@example.test"}, "one", time.Now()); err != nil {
		t.Fatal(err)
	}
	db.Close()
	before, err := os.ReadFile(fresh)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := runCmd("audit", "verify", "--db", fresh); err != nil || !strings.Contains(out, "audit chain OK: 1 events verified") {
		t.Fatalf("verify: %v\n%s", err, out)
	}
	if after, err := os.ReadFile(fresh); err != nil || !bytes.Equal(before, after) {
		t.Errorf("verify changed the database file (err %v)", err)
	}
}
