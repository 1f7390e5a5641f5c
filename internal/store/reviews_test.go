package store_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

func TestReviewInTheStore(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	conn := f.active("red")
	reviewer := f.user("reviewer")
	evidence := []byte(`{"collected_at":"2025-03-01T09:00:00Z","owners":[]}`)

	r, err := f.db.OpenReview(ctx, conn.ID, workflow.OpenReviewInput{Trigger: workflow.TriggerScheduled, DueOn: "2025-02-20", Evidence: evidence}, f.tick())
	if err != nil {
		t.Fatal(err)
	}
	if r.Version != 1 || r.Team != "red" || r.DueOn != "2025-02-20" || string(r.Evidence) != string(evidence) || r.EvidenceHash != store.EvidenceHash(evidence) || !r.Open() {
		t.Fatalf("opened review = %+v", r)
	}
	if f.state(conn.ID) != workflow.StateUnderReview {
		t.Errorf("connection %s, want under review", f.state(conn.ID))
	}
	// One open review per connection: a second trigger joins the open one.
	if _, err := f.db.OpenReview(ctx, conn.ID, workflow.OpenReviewInput{Trigger: workflow.TriggerOwnerLeft}, f.tick()); !errors.Is(err, workflow.ErrReviewOpen) {
		t.Errorf("second OpenReview = %v, want ErrReviewOpen", err)
	}
	if out, err := f.db.RecordReviewEvent(ctx, conn.ID, store.ReviewEvent{Open: true, Trigger: workflow.TriggerOwnerLeft, Detail: "bob left red-owners"}, f.tick()); err != nil || !out.Added {
		t.Fatalf("RecordReviewEvent on a connection under review = %+v, %v; want the trigger added", out, err)
	}
	q, err := f.db.ReviewQueue(ctx, store.ReviewFilter{Team: "red"}, 10)
	if err != nil || len(q) != 1 || q[0].ID != r.ID || len(q[0].MoreTriggers) != 1 || !strings.Contains(q[0].MoreTriggers[0], "owner_left: bob left red-owners") {
		t.Fatalf("queue = %+v, %v", q, err)
	}
	if q, _ := f.db.ReviewQueue(ctx, store.ReviewFilter{Team: "blue"}, 10); len(q) != 0 {
		t.Errorf("blue's queue lists red's review: %+v", q)
	}
	if q, _ := f.db.ReviewQueue(ctx, store.ReviewFilter{Trigger: workflow.TriggerSignal}, 10); len(q) != 0 {
		t.Errorf("the signal filter lists a scheduled review: %+v", q)
	}

	// The evidence is frozen: the database refuses to rewrite it.
	if _, err := f.raw.ExecContext(ctx, `UPDATE reviews SET evidence = '{}' WHERE id = ?`, r.ID); err == nil || !strings.Contains(err.Error(), "frozen") {
		t.Errorf("rewriting the evidence: %v, want refused", err)
	}
	if _, err := f.raw.ExecContext(ctx, `DELETE FROM reviews WHERE id = ?`, r.ID); err == nil {
		t.Error("a review was deleted")
	}

	// The requester does not review.
	if _, err := f.db.DecideReview(ctx, r.ID, f.owner, workflow.DecideReviewInput{Decision: workflow.ReviewRenew, Reason: "mine"}, f.tick()); !errors.Is(err, workflow.ErrNotIndependent) {
		t.Errorf("owner's renewal = %v, want ErrNotIndependent", err)
	}
	now := f.tick()
	got, err := f.db.DecideReview(ctx, r.ID, reviewer, workflow.DecideReviewInput{Decision: workflow.ReviewRenew, Reason: "in use, owners present"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if got.Decision != workflow.ReviewRenew || got.DecidedBy != reviewer.ID || got.DecidedByEmail != reviewer.Email || got.Reason != "in use, owners present" {
		t.Errorf("decided review = %+v", got)
	}
	c, _ := f.db.Connection(ctx, conn.ID)
	if c.State != workflow.StateActive || c.ReviewDue != workflow.NextReviewDue(now, 0, "") {
		t.Errorf("after renewal: %s due %q, want active due %s", c.State, c.ReviewDue, workflow.NextReviewDue(now, 0, ""))
	}
	// Decided once: a second decision (a race lost) is refused inside the
	// transaction, and the decision cannot be rewritten.
	if _, err := f.db.DecideReview(ctx, r.ID, reviewer, workflow.DecideReviewInput{Decision: workflow.ReviewRenew, Reason: "again"}, f.tick()); !errors.Is(err, workflow.ErrReviewClosed) {
		t.Errorf("second decision = %v, want ErrReviewClosed", err)
	}
	if _, err := f.raw.ExecContext(ctx, `UPDATE reviews SET decision = 'hold' WHERE id = ?`, r.ID); err == nil {
		t.Error("a decision was rewritten")
	}
	acts := f.auditActions(conn.ID)
	for _, want := range []string{"review.open", "review.trigger", "review.renew"} {
		found := false
		for _, a := range acts {
			found = found || a == want
		}
		if !found {
			t.Errorf("audit %v lacks %s", acts, want)
		}
	}
	var notices int
	if err := f.raw.QueryRowContext(ctx, `SELECT count(*) FROM outbox WHERE connection_id = ? AND kind LIKE 'review.%'`, conn.ID).Scan(&notices); err != nil || notices != 3 {
		t.Errorf("review notices in the outbox = %d, %v; want 3 (opened: reviewers and owners; renewed: owners)", notices, err)
	}
	f.verifyAudit()
	if rs, err := f.db.ReviewsOf(ctx, conn.ID); err != nil || len(rs) != 1 {
		t.Errorf("ReviewsOf = %+v, %v", rs, err)
	}
}

// A review whose stored evidence was changed behind the portal's back
// (the trigger dropped, say) is reported, never shown as if frozen.
func TestReviewEvidenceTamperDetected(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	conn := f.active("red")
	r, err := f.db.OpenReview(ctx, conn.ID, workflow.OpenReviewInput{Trigger: workflow.TriggerScheduled, Evidence: []byte(`{"a":1}`)}, f.tick())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.raw.ExecContext(ctx, dropTrigger("reviews_frozen", "reviews")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.raw.ExecContext(ctx, `UPDATE reviews SET evidence = '{"a":2}' WHERE id = ?`, r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Review(ctx, r.ID); !errors.Is(err, store.ErrEvidenceTampered) {
		t.Errorf("Review after tampering = %v, want ErrEvidenceTampered", err)
	}
	if _, _, err := f.db.OpenReviewOf(ctx, conn.ID); !errors.Is(err, store.ErrEvidenceTampered) {
		t.Errorf("OpenReviewOf after tampering = %v, want ErrEvidenceTampered", err)
	}
	if _, err := f.db.DecideReview(ctx, r.ID, f.user("reviewer"), workflow.DecideReviewInput{Decision: workflow.ReviewRenew, Reason: "x"}, f.tick()); !errors.Is(err, store.ErrEvidenceTampered) {
		t.Errorf("deciding a tampered review = %v, want ErrEvidenceTampered", err)
	}
	// The queue still lists it, flagged, instead of failing as a whole.
	if q, err := f.db.ReviewQueue(ctx, store.ReviewFilter{}, 10); err != nil || len(q) != 1 || !q[0].Tampered {
		t.Errorf("queue with a tampered review = %+v, %v; want it listed and flagged", q, err)
	}
}

// Request changes sets the follow-up on the deadline; a recommendation of
// revocation keeps the connection under review for an admin; hold returns
// it to active.
func TestReviewDecisionsMoveTheConnection(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	reviewer := f.user("reviewer")
	for _, tt := range []struct {
		team     string
		in       workflow.DecideReviewInput
		want     workflow.State
		wantDue  string
		sameDue  bool
		deadline string
	}{
		{"red", workflow.DecideReviewInput{Decision: workflow.ReviewRequestChanges, Reason: "name a new owner", Deadline: "2025-04-01"}, workflow.StateActive, "2025-04-01", false, "2025-04-01"},
		{"blue", workflow.DecideReviewInput{Decision: workflow.ReviewRecommendRevocation, Reason: "project ended"}, workflow.StateUnderReview, "", true, ""},
		{"green", workflow.DecideReviewInput{Decision: workflow.ReviewHold, Reason: "idle"}, workflow.StateActive, "", false, ""},
	} {
		conn, _ := f.db.Connection(ctx, f.active(tt.team).ID)
		r, err := f.db.OpenReview(ctx, conn.ID, workflow.OpenReviewInput{Trigger: workflow.TriggerSignal, Detail: "idle guarantee"}, f.tick())
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.db.DecideReview(ctx, r.ID, reviewer, tt.in, f.tick())
		if err != nil {
			t.Fatalf("%s: %v", tt.team, err)
		}
		c, _ := f.db.Connection(ctx, conn.ID)
		if c.State != tt.want || got.Deadline != tt.deadline {
			t.Errorf("%s: %s deadline %q, want %s %q", tt.team, c.State, got.Deadline, tt.want, tt.deadline)
		}
		if tt.wantDue != "" && c.ReviewDue != tt.wantDue {
			t.Errorf("%s: due %q, want %q", tt.team, c.ReviewDue, tt.wantDue)
		}
		if tt.sameDue && c.ReviewDue != conn.ReviewDue {
			t.Errorf("%s: due %q, want unchanged (%q, set when it became active)", tt.team, c.ReviewDue, conn.ReviewDue)
		}
	}
}

// A sign-in concerns only the live connections whose approved contract
// names the user as an owner, in any case.
func TestLiveConnectionsOwnedBy(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	red := f.active("red")
	blue := f.active("blue")
	c, _ := f.db.Version(ctx, red.ID, red.ApprovedVersion)
	owner := c.Contract.CostOwner
	if owner == "" {
		t.Fatal("the example contract names no cost owner")
	}
	got, err := f.db.LiveConnectionsOwnedBy(ctx, "  "+strings.ToUpper(owner)+" ")
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, g := range got {
		ids = append(ids, g.ID)
	}
	// Both example contracts name their team's owners; red's cost owner is
	// red's only unless blue's names the same person.
	bc, _ := f.db.Version(ctx, blue.ID, blue.ApprovedVersion)
	want := []int64{red.ID}
	if strings.EqualFold(bc.Contract.CostOwner, owner) || strings.EqualFold(bc.Contract.BusinessOwner, owner) ||
		strings.EqualFold(bc.Contract.OperationsOwner, owner) || strings.EqualFold(bc.Contract.ExceptionOwner, owner) {
		want = []int64{red.ID, blue.ID}
	}
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Errorf("owned by %s: %v, want %v", owner, ids, want)
	}
	if got, err := f.db.LiveConnectionsOwnedBy(ctx, "nobody@example.test"); err != nil || len(got) != 0 {
		t.Errorf("owned by nobody: %+v, %v", got, err)
	}
	f.revoke(red.ID, "done")
	if got, _ := f.db.LiveConnectionsOwnedBy(ctx, owner); len(got) != len(want)-1 {
		t.Errorf("a revoking connection is still listed: %+v", got)
	}
}

// An exception owner's list is the live connections whose approved
// contract names them as exception owner, in any case; another owner field
// naming them does not count.
func TestLiveConnectionsOfExceptionOwner(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	c := contract("red", "hyperpod-ns-red", "")
	c.ExceptionOwner = "decider@example.test"
	red := f.submitted(c)
	red, _ = f.approve(red.ID, f.admins[0], 1)
	f.runJob("provisioner", false, "Namespace x")
	f.active("blue")
	got, err := f.db.LiveConnectionsOfExceptionOwner(ctx, " DECIDER@example.test")
	if err != nil || len(got) != 1 || got[0].ID != red.ID {
		t.Fatalf("of exception owner: %+v, %v; want connection %d", got, err, red.ID)
	}
	// Red's cost owner is blue's exception owner (the example contract's
	// owners), not red's any more.
	if got, err := f.db.LiveConnectionsOfExceptionOwner(ctx, c.CostOwner); err != nil || len(got) != 1 || got[0].Team != "blue" {
		t.Errorf("red's cost owner lists %+v, %v; want blue's connection only", got, err)
	}
	f.revoke(red.ID, "done")
	if got, _ := f.db.LiveConnectionsOfExceptionOwner(ctx, "decider@example.test"); len(got) != 0 {
		t.Errorf("a revoking connection is still listed: %+v", got)
	}
}

// A submitted Slurm connection holds its account and QoS on its cluster
// (ValidationEnv.SlurmTaken, read from the claiming versions' JSON on both
// engines); another cluster's names, its own connection (excluded) and a
// draft hold nothing.
func TestSlurmClaimsHeld(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	slurmC := func(team, account, qos string) workflow.Contract {
		c := contract(team, "hyperpod-ns-"+team, "")
		c.Orchestrator, c.EKSClusterName, c.Namespaces = workflow.OrchestratorSlurm, "", nil
		c.SlurmScope = workflow.SlurmScope{Account: account, Partition: "gpu", QoS: qos}
		return c
	}
	red := f.submitted(slurmC("red", "red-acct", "red-qos"))
	f.create(slurmC("blue", "blue-acct", "blue-qos")) // a draft
	cluster := slurmC("red", "", "").ClusterName
	env := f.db.ValidationEnv(ctx, f.tick(), 0, nil)
	for _, tc := range []struct {
		cluster, what, name string
		want                bool
	}{
		{cluster, "account", "red-acct", true},
		{cluster, "qos", "red-qos", true},
		{cluster, "account", "red-qos", false},
		{"other-hp", "account", "red-acct", false},
		{cluster, "account", "blue-acct", false},
	} {
		if got := env.SlurmTaken(tc.cluster, tc.what, tc.name); got != tc.want {
			t.Errorf("SlurmTaken(%s, %s, %s) = %v, want %v", tc.cluster, tc.what, tc.name, got, tc.want)
		}
	}
	if err := env.Unavailable(); err != nil {
		t.Fatal(err)
	}
	if own := f.db.ValidationEnv(ctx, f.tick(), red.ID, nil); own.SlurmTaken(cluster, "account", "red-acct") {
		t.Error("a connection's own account counts as taken")
	}
}

// ConnectionsByID returns the connections asked for, by id, in one query;
// an unknown id is left out and no id asks nothing.
func TestConnectionsByID(t *testing.T) {
	f := newFixture(t, 1)
	red, blue := f.active("red"), f.active("blue")
	got, err := f.db.ConnectionsByID(t.Context(), []int64{blue.ID, 999, red.ID})
	if err != nil || len(got) != 2 || got[0].ID != red.ID || got[1].ID != blue.ID {
		t.Fatalf("ConnectionsByID = %+v, %v; want red and blue, by id", got, err)
	}
	if got, err := f.db.ConnectionsByID(t.Context(), nil); err != nil || got != nil {
		t.Errorf("no ids: %+v, %v", got, err)
	}
}
