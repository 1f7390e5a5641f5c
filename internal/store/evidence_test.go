package store_test

import (
	"bytes"
	"crypto/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/evidence"
	"github.com/hyperpod-governance/portal/internal/signing"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// evidenceBundle builds and encodes connID's bundle from f's database.
func (f *fixture) evidenceBundle(connID int64) (evidence.Bundle, []byte) {
	f.t.Helper()
	ctx := f.t.Context()
	// Signed with the installation's key, kept by the store as the web
	// layer loads it (made before the bundle reads the chain's head: its
	// making is audited).
	cand, err := signing.Generate(rand.Reader, signKey, f.tick())
	if err != nil {
		f.t.Fatal(err)
	}
	row, _, err := f.db.EnsureSigningKey(ctx, cand, f.tick())
	if err != nil {
		f.t.Fatal(err)
	}
	key, err := signing.Open(row, signKey)
	if err != nil {
		f.t.Fatal(err)
	}
	in, err := f.db.EvidenceInput(ctx, connID, f.tick())
	if err != nil {
		f.t.Fatal(err)
	}
	c, _ := f.db.Connection(ctx, connID)
	if in.Statements, err = f.db.TeamStatementBodies(ctx, c.Team, c.CreatedAt); err != nil {
		f.t.Fatal(err)
	}
	b, err := evidence.Build(in, "auditor@example.test", f.tick())
	if err != nil {
		f.t.Fatal(err)
	}
	if err := evidence.Sign(&b, key); err != nil {
		f.t.Fatal(err)
	}
	data, err := evidence.Encode(b)
	if err != nil {
		f.t.Fatal(err)
	}
	return b, data
}

// TestEvidenceBundleFromTheStore takes a connection through create,
// submit, approve, provisioning, a review and its renewal, with another
// team's connection in between, on a real database, and checks that its
// bundle holds all of it and verifies offline: the chain hashes the store
// wrote are the ones the verifier recomputes.
func TestEvidenceBundleFromTheStore(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	red, job := f.approved("red")
	blue, _ := f.approved("blue") // events of another team between red's
	if j := f.claim("provisioner"); j.ID != job.ID {
		t.Fatalf("claimed job %d, want red's %d", j.ID, job.ID)
	}
	f.run(job.ID, "provisioner", []string{"Namespace hyperpod-ns-red", "RoleBinding hyperpod-ns-red/owners"}, false, 0)
	if err := f.db.CompleteJob(ctx, job.ID, "provisioner", f.tick()); err != nil {
		t.Fatal(err)
	}
	frozen := []byte(`{"collected_at":"2025-03-01T09:00:00Z","owners":["owner.red@example.test"]}`)
	r, err := f.db.OpenReview(ctx, red.ID, workflow.OpenReviewInput{Trigger: workflow.TriggerScheduled, DueOn: "2025-03-01", Evidence: frozen}, f.tick())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.DecideReview(ctx, r.ID, f.user("reviewer"), workflow.DecideReviewInput{Decision: workflow.ReviewRenew, Reason: "in use"}, f.tick()); err != nil {
		t.Fatal(err)
	}
	h := f.now.Truncate(time.Hour)
	if err := f.db.PutUsageHours(ctx, []usage.Hour{
		{Team: "red", Namespace: "hyperpod-ns-red", InstanceType: "ml.p5.48xlarge", Start: h, GuaranteedAccelSeconds: 8 * 3600},
		{Team: "blue", Namespace: "hyperpod-ns-blue", InstanceType: "ml.p5.48xlarge", Start: h, GuaranteedAccelSeconds: 3600},
	}); err != nil {
		t.Fatal(err)
	}
	body := "{\n  \"team\": \"red\"\n}\n"
	if _, err := f.raw.ExecContext(ctx, `INSERT INTO cost_months (month, closed_at, currency) VALUES ('2025-03', '2025-04-02T00:00:00.000000000Z', 'USD')`); err != nil {
		t.Fatal(err)
	}
	if _, err := f.raw.ExecContext(ctx, `INSERT INTO cost_statements (month, team, total, body, hash) VALUES ('2025-03', 'red', '1.00', ?, ?), ('2025-03', 'blue', '2.00', '{}', ?)`,
		body, usage.HashBytes([]byte(body)), usage.HashBytes([]byte("{}"))); err != nil {
		t.Fatal(err)
	}
	f.verifyAudit()

	b, data := f.evidenceBundle(red.ID)
	rep := evidence.Verify(data)
	if !rep.OK() {
		t.Fatalf("the bundle of a real connection does not verify: %v", rep.Failures)
	}
	c := b.Connection
	if c.ID != red.ID || c.Team != "red" || c.State != string(workflow.StateActive) || c.ApprovedVersion != 1 || len(b.Versions) != 1 {
		t.Errorf("connection %+v, %d versions", c, len(b.Versions))
	}
	if len(b.Decisions) != 1 || b.Decisions[0].Kind != "approve" || b.Decisions[0].Hash != b.Versions[0].Hash {
		t.Errorf("decisions %+v", b.Decisions)
	}
	if len(b.Jobs) != 1 || b.Jobs[0].State != string(workflow.JobSucceeded) || len(b.Jobs[0].Steps) != 2 || b.Jobs[0].Steps[1].Name != "RoleBinding hyperpod-ns-red/owners" {
		t.Errorf("jobs %+v", b.Jobs)
	}
	if len(b.Reviews) != 1 || b.Reviews[0].Evidence != string(frozen) || b.Reviews[0].Decision != "renew" || b.Reviews[0].DecidedBy != "reviewer@example.test" {
		t.Errorf("reviews %+v", b.Reviews)
	}
	if len(b.Usage.Months) != 1 || b.Usage.Months[0].GuaranteedAccelSeconds != 8*3600 {
		t.Errorf("usage %+v: want red's only", b.Usage.Months)
	}
	if len(b.Costs.Statements) != 1 || b.Costs.Statements[0].Body != body {
		t.Errorf("statements %+v: want red's only", b.Costs.Statements)
	}
	var actions []string
	for _, e := range b.Audit.Events {
		if e.ObjectID != red.ID || e.Team != "red" {
			t.Errorf("event %d is about %s %d of %s", e.ID, e.ObjectType, e.ObjectID, e.Team)
		}
		actions = append(actions, e.Action)
	}
	want := []string{"connection.create", "connection.submit", "connection.approve", "provisioning.start", "provisioning.succeeded", "review.open", "review.renew"}
	if !slices.Equal(actions, want) {
		t.Errorf("audit actions %v, want %v", actions, want)
	}
	head, err := f.db.AuditHead(ctx)
	if err != nil || b.Audit.Head != (evidence.Head{ID: head.ID, Count: head.Count, Hash: head.Hash}) {
		t.Errorf("head %+v, want %+v (%v)", b.Audit.Head, head, err)
	}
	// Blue's three events sit between red's approval and its provisioning:
	// the verifier links red's adjacent events only (1-2, 2-3, 7-8, 8-9,
	// 9-10).
	if !strings.Contains(strings.Join(rep.Checked, "\n"), "7 audit event(s): each chain hash recomputed from its fields and prev_hash; ids increasing; 5 link(s)") {
		t.Errorf("checks: %v", rep.Checked)
	}

	// Blue's bundle, with its events between red's, verifies too.
	if _, data2 := f.evidenceBundle(blue.ID); !evidence.Verify(data2).OK() {
		t.Error("blue's bundle does not verify")
	}

	// A row changed in the database behind the portal's back (the audit
	// trail's trigger dropped, the reason rewritten) makes a bundle that
	// does not verify.
	if _, err := f.raw.ExecContext(ctx, dropTrigger("audit_no_update", "audit_events")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.raw.ExecContext(ctx, `UPDATE audit_events SET reason = 'approved after all' WHERE object_id = ? AND action = 'connection.approve'`, red.ID); err != nil {
		t.Fatal(err)
	}
	_, tampered := f.evidenceBundle(red.ID)
	if rep := evidence.Verify(tampered); rep.OK() || !strings.Contains(rep.Err().Error(), "the event was altered") {
		t.Errorf("a bundle of a tampered trail: %v", rep.Err())
	}
	if bytes.Equal(tampered, data) {
		t.Error("the tampered bundle is the same as before")
	}
}

// The store's audit events and the bundle's use one time layout and one
// genesis hash: the verifier recomputes what the store wrote.
func TestEvidenceSharesTheAuditChainFormat(t *testing.T) {
	f := newFixture(t, 1)
	f.approved("red")
	evs, err := f.db.AuditEvents(t.Context(), store.AuditFilter{}, 0, 10)
	if err != nil || len(evs) == 0 {
		t.Fatal(evs, err)
	}
	for _, e := range evs {
		be := evidence.Event{ID: e.ID, At: evidence.AuditTime(e.At), ActorID: e.ActorID, Actor: e.Actor, Action: e.Action, ObjectType: e.ObjectType,
			ObjectID: e.ObjectID, Team: e.Team, Version: e.Version, Reason: e.Reason}
		if got, want := evidence.ChainHash(e.PrevHash, be), store.ChainHash(e.PrevHash, e); got != want || got != e.Hash {
			t.Errorf("event %d: evidence.ChainHash %s, store %s, stored %s", e.ID, got, want, e.Hash)
		}
		if e.ID == 1 && e.PrevHash != evidence.GenesisHash {
			t.Errorf("the first event follows %s, not evidence.GenesisHash", e.PrevHash)
		}
	}
}
