package review_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/identitystore"

	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/review"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/support/awstest"
	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

const ownersGroup = "team-red-owners"

// fixture is a migrated database (real SQLite), an owner and an admin who
// signed in, a scheduler and a test clock that moves one second per call.
type fixture struct {
	t     *testing.T
	db    *store.DB
	raw   *sql.DB // the same file, for what no store method reads
	owner workflow.Actor
	admin workflow.Actor
	now   time.Time
	s     *review.Scheduler
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "portal.db")
	db, err := store.OpenMigrated(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	raw, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	f := &fixture{t: t, db: db, raw: raw, now: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
	f.owner = f.login("owner.red", ownersGroup)
	f.admin = f.login("admin1", "platform-admins")
	if err := db.ExecForTest(t.Context(), `INSERT INTO cluster_observed (cluster_name, instance_type, capacity, basis, observed_at)
VALUES ('shared-hp', 'ml.p5.48xlarge', 10, 'test', '2026-03-01T09:00:00.000000000Z')`); err != nil {
		t.Fatal(err)
	}
	f.s = &review.Scheduler{DB: db, Owner: "test", OwnersGroups: map[string][]string{"red": {ownersGroup}}}
	return f
}

func (f *fixture) tick() time.Time {
	f.now = f.now.Add(time.Second)
	return f.now
}

func (f *fixture) login(subject string, groups ...string) workflow.Actor {
	f.t.Helper()
	u, err := f.db.RecordLogin(f.t.Context(), "https://idp.example.test", subject, subject+"@example.test", subject, groups, f.tick())
	if err != nil {
		f.t.Fatal(err)
	}
	return workflow.Actor{ID: u.ID, Email: u.Email}
}

func (f *fixture) pin(id int64) store.Expect {
	f.t.Helper()
	c, err := f.db.Connection(f.t.Context(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	v, err := f.db.Version(f.t.Context(), id, c.CurrentVersion)
	if err != nil {
		f.t.Fatal(err)
	}
	return store.Expect{Version: v.Version, Hash: v.Hash, PlanHash: "plan-" + v.Hash[:8]}
}

// runJob claims the next job and completes every step.
func (f *fixture) runJob() {
	f.t.Helper()
	ctx := f.t.Context()
	j, ok, err := f.db.ClaimJob(ctx, "w", f.tick(), time.Minute)
	if err != nil || !ok {
		f.t.Fatalf("ClaimJob = %v, %v", ok, err)
	}
	if err := f.db.StartJob(ctx, j.ID, "w", "plan", []string{"Namespace x"}, false, f.tick()); err != nil {
		f.t.Fatal(err)
	}
	if err := f.db.StepStarted(ctx, j.ID, "w", 0, "Namespace x", f.tick()); err != nil {
		f.t.Fatal(err)
	}
	if err := f.db.StepFinished(ctx, j.ID, "w", 0, "Namespace x", "created", "", f.tick()); err != nil {
		f.t.Fatal(err)
	}
	if err := f.db.CompleteJob(ctx, j.ID, "w", f.tick()); err != nil {
		f.t.Fatal(err)
	}
}

// active creates, submits, approves and provisions a connection of c.
func (f *fixture) active(c workflow.Contract) store.Connection {
	f.t.Helper()
	ctx := f.t.Context()
	conn, err := f.db.CreateConnection(ctx, c, f.owner, f.tick())
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.db.Transition(ctx, conn.ID, workflow.EventSubmit, f.owner, "", store.Expect{}, f.tick()); err != nil {
		f.t.Fatal(err)
	}
	if _, _, err := f.db.Approve(ctx, conn.ID, f.admin, f.pin(conn.ID), "ok", workflow.ClusterFacts{}, f.tick()); err != nil {
		f.t.Fatal(err)
	}
	f.runJob()
	return f.conn(conn.ID)
}

func (f *fixture) conn(id int64) store.Connection {
	f.t.Helper()
	c, err := f.db.Connection(f.t.Context(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// run ticks the scheduler at at.
func (f *fixture) run(at time.Time) {
	f.t.Helper()
	if err := f.s.Tick(f.t.Context(), at); err != nil {
		f.t.Fatalf("Tick(%s): %v", at, err)
	}
}

func (f *fixture) reviews(id int64) []store.Review {
	f.t.Helper()
	rs, err := f.db.ReviewsOf(f.t.Context(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return rs
}

// open is the connection's open review; it fails the test without one.
func (f *fixture) open(id int64) store.Review {
	f.t.Helper()
	r, ok, err := f.db.OpenReviewOf(f.t.Context(), id)
	if err != nil || !ok {
		f.t.Fatalf("connection %d has no open review (%v)", id, err)
	}
	return r
}

func (f *fixture) decide(r store.Review) {
	f.t.Helper()
	reviewer := f.login("reviewer", "governance-reviewers")
	if _, err := f.db.DecideReview(f.t.Context(), r.ID, reviewer, workflow.DecideReviewInput{Decision: workflow.ReviewRenew, Reason: "fine"}, f.tick()); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) outbox(kind string) int {
	f.t.Helper()
	var n int
	if err := f.raw.QueryRowContext(f.t.Context(), `SELECT count(*) FROM outbox WHERE kind = ?`, kind).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

func day(s string) time.Time {
	d, _ := time.Parse(workflow.DateLayout, s)
	return d.Add(10 * time.Hour)
}

// A connection that becomes active is due a cadence later; the scheduler
// opens its review on that day (not before), with the due date it had, and
// a second tick opens nothing more. Seven days overdue, reviewers and
// owners are reminded once.
func TestScheduledReview(t *testing.T) {
	f := newFixture(t)
	conn := f.active(workflow.ExampleContract())
	want := workflow.NextReviewDue(f.now, 90, "")
	if conn.ReviewDue != want || conn.ReviewDue != "2026-05-31" {
		t.Fatalf("review_due after activation = %q, want %q", conn.ReviewDue, want)
	}
	f.run(day("2026-05-30"))
	if rs := f.reviews(conn.ID); len(rs) != 0 {
		t.Fatalf("a review opened the day before it is due: %+v", rs)
	}
	f.run(day("2026-05-31"))
	r := f.open(conn.ID)
	if r.Trigger != workflow.TriggerScheduled || r.DueOn != "2026-05-31" || f.conn(conn.ID).State != workflow.StateUnderReview {
		t.Errorf("review = %+v; want a scheduled review due 2026-05-31, the connection under review", r)
	}
	f.run(day("2026-06-01"))
	if rs := f.reviews(conn.ID); len(rs) != 1 || len(rs[0].MoreTriggers) != 0 {
		t.Errorf("after a second tick: %d reviews, more triggers %v; want the one", len(rs), rs[0].MoreTriggers)
	}
	f.run(day("2026-06-06"))
	if n := f.outbox("review.overdue"); n != 0 {
		t.Errorf("6 days overdue: %d reminders", n)
	}
	f.run(day("2026-06-07"))
	f.run(day("2026-06-08"))
	if n := f.outbox("review.overdue"); n != 2 {
		t.Errorf("7 and 8 days overdue: %d reminders, want 2 (reviewers and owners, once)", n)
	}
	// The decision sets the next date; the scheduler opens the next
	// review then.
	f.now = day("2026-06-08")
	f.decide(r)
	next := f.conn(conn.ID).ReviewDue
	if next != "2026-09-06" {
		t.Errorf("review_due after the renewal on 2026-06-08 = %s, want 2026-09-06", next)
	}
	f.run(day("2026-09-05"))
	if rs := f.reviews(conn.ID); len(rs) != 1 {
		t.Errorf("a review opened before the renewal's due date")
	}
	f.run(day(next))
	rs := f.reviews(conn.ID)
	if len(rs) != 2 || rs[0].DueOn != next {
		t.Fatalf("after the renewal's due date: %d reviews; want a second one due %s", len(rs), next)
	}
	// Its evidence lists the contract's changes since the last review:
	// none (the first one listed the first approval).
	var first, second workflow.Evidence
	if err := json.Unmarshal(rs[1].Evidence, &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(rs[0].Evidence, &second); err != nil {
		t.Fatal(err)
	}
	if len(first.Changes) != 1 || len(second.Changes) != 0 || second.Contract.Version != 1 {
		t.Errorf("changes since the last review: first %+v, second %+v; want the first approval, then none", first.Changes, second.Changes)
	}
}

// A contract's end date sets an end_date review EndDateLeadDays ahead.
func TestEndDateReview(t *testing.T) {
	f := newFixture(t)
	c := workflow.ExampleContract()
	c.EndDate = "2026-04-01"
	conn := f.active(c)
	if conn.ReviewDue != "2026-03-18" {
		t.Fatalf("review_due = %q, want 14 days before the end date", conn.ReviewDue)
	}
	f.run(day("2026-03-18"))
	if r := f.open(conn.ID); r.Trigger != workflow.TriggerEndDate || !strings.Contains(r.Detail, "2026-04-01") {
		t.Errorf("review = %+v; want an end_date review naming the end date", r)
	}
}

// A live connection without a date (activated before the scheduler) gets
// one from its activation on the first tick; overdue at once, it opens.
func TestBackfilledReviewDue(t *testing.T) {
	f := newFixture(t)
	conn := f.active(workflow.ExampleContract())
	if err := f.db.ExecForTest(t.Context(), `UPDATE connections SET review_due = ''`); err != nil {
		t.Fatal(err)
	}
	f.run(day("2026-03-10"))
	if got := f.conn(conn.ID).ReviewDue; got != "2026-05-31" {
		t.Errorf("backfilled review_due = %q, want 2026-05-31 (90 days after the activation)", got)
	}
	if rs := f.reviews(conn.ID); len(rs) != 0 {
		t.Errorf("reviews = %+v; want none yet", rs)
	}
	if err := f.db.ExecForTest(t.Context(), `UPDATE connections SET review_due = ''`); err != nil {
		t.Fatal(err)
	}
	f.run(day("2026-07-01"))
	if r := f.open(conn.ID); r.DueOn != "2026-05-31" {
		t.Errorf("review due %s; want the backfilled 2026-05-31, so that overdue days count from it", r.DueOn)
	}
}

// Integration: an amendment that changes an owner opens an event-driven
// review once it is applied, through the real commands.
func TestAmendedOwnerOpensReview(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	conn := f.active(workflow.ExampleContract())
	f.run(f.tick()) // nothing to do yet
	other := f.login("owner2.red", ownersGroup)
	c := workflow.ExampleContract()
	c.BusinessOwner = other.Email
	if _, _, err := f.db.SaveContract(ctx, conn.ID, 1, c, f.owner, f.tick()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Transition(ctx, conn.ID, workflow.EventSubmit, f.owner, "", store.Expect{}, f.tick()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.db.Approve(ctx, conn.ID, f.admin, f.pin(conn.ID), "ok", workflow.ClusterFacts{}, f.tick()); err != nil {
		t.Fatal(err)
	}
	f.run(f.tick())
	if rs := f.reviews(conn.ID); len(rs) != 0 {
		t.Fatalf("a review opened before the change was applied: %+v", rs)
	}
	f.runJob()
	f.run(f.tick())
	r := f.open(conn.ID)
	if r.Trigger != workflow.TriggerAmendment || !strings.Contains(r.Detail, "business_owner") || r.Version != 2 {
		t.Errorf("review = %+v; want an amendment review of version 2 naming the business owner", r)
	}
	var ev workflow.Evidence
	if err := json.Unmarshal(r.Evidence, &ev); err != nil {
		t.Fatal(err)
	}
	if len(ev.Changes) != 2 || !slices.Contains(ev.Changes[1].Fields, "business_owner") || ev.Contract.Version != 2 {
		t.Errorf("evidence changes = %+v; want versions 1 and 2, 2 changing the business owner", ev.Changes)
	}
	var open int
	if err := f.raw.QueryRowContext(ctx, `SELECT count(*) FROM review_triggers WHERE resolved_at = ''`).Scan(&open); err != nil || open != 0 {
		t.Errorf("unresolved review triggers = %d, %v", open, err)
	}
	f.decide(r)
	f.run(f.tick())
	if rs := f.reviews(conn.ID); len(rs) != 1 {
		t.Errorf("the trigger opened %d reviews; want once", len(rs))
	}
}

// The cluster's capacity or orchestrator version changing opens a review
// of its live connections; the first observation does not; a trigger while
// a review is open is added to it.
func TestClusterChangeTriggers(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	version := "v1.30.4-eks"
	f.s.Orchestrator = func(context.Context, string) (string, error) { return version, nil }
	conn := f.active(workflow.ExampleContract())
	f.run(f.tick())
	f.run(f.tick())
	if rs := f.reviews(conn.ID); len(rs) != 0 {
		t.Fatalf("the first observation opened a review: %+v", rs)
	}
	if err := f.db.SetInventory(ctx, "shared-hp", "ml.p5.48xlarge", 4, f.admin, f.tick()); err != nil {
		t.Fatal(err)
	}
	f.run(f.tick())
	r := f.open(conn.ID)
	if r.Trigger != workflow.TriggerCapacity || !strings.Contains(r.Detail, "ml.p5.48xlarge × 10") || !strings.Contains(r.Detail, "× 4") {
		t.Errorf("review = %+v; want a capacity review naming before and after", r)
	}
	version = "v1.31.0-eks"
	f.run(f.tick())
	f.run(f.tick())
	r = f.open(conn.ID)
	if len(r.MoreTriggers) != 1 || !strings.Contains(r.MoreTriggers[0], "orchestrator") || !strings.Contains(r.MoreTriggers[0], "v1.31.0-eks") {
		t.Errorf("more triggers = %q; want the orchestrator change, once", r.MoreTriggers)
	}
}

// A signal that fires for a team opens a review of its live connections,
// once per firing.
func TestSignalOpensReview(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	conn := f.active(workflow.ExampleContract())
	n, err := f.db.RecordFired(ctx, []usage.SignalStatus{{Team: "red", Kind: usage.SignalKind("idle_guarantee"), State: usage.SignalFiring,
		Current: "2% used", Threshold: "below 10%", Owner: "owner.red@example.test"}}, f.tick())
	if err != nil || n != 1 {
		t.Fatalf("RecordFired = %d, %v", n, err)
	}
	f.run(f.tick())
	r := f.open(conn.ID)
	if r.Trigger != workflow.TriggerSignal || !strings.Contains(r.Detail, "2% used") {
		t.Errorf("review = %+v; want a signal review", r)
	}
	var ev workflow.Evidence
	if err := json.Unmarshal(r.Evidence, &ev); err != nil || len(ev.Signals) != 1 {
		t.Errorf("evidence signals = %+v, %v; want the open signal", ev.Signals, err)
	}
	f.decide(r)
	f.run(f.tick())
	if rs := f.reviews(conn.ID); len(rs) != 1 {
		t.Errorf("the signal opened %d reviews; want once per firing", len(rs))
	}
}

// A cost jump found by the real evaluator over stored rows opens a signal
// review: team red held 4 GPUs every hour of the week before last and 8
// every hour of the last week (672 → 1344 accelerator-hours, +100%), with
// the cluster recorded throughout and never idle, so only the cost jump
// fires (the guarantee of 16 GPUs was 37% held, above its 10%).
func TestCostJumpOpensReview(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	conn := f.active(workflow.ExampleContract())
	now := f.tick()
	var hours []usage.Hour
	var cluster []usage.ClusterHour
	for i := 1; i <= 14*24; i++ {
		at := usage.HourStart(now).Add(-time.Duration(i) * time.Hour)
		gpus := int64(8)
		if i > 7*24 {
			gpus = 4
		}
		hours = append(hours, usage.Hour{Team: "red", Namespace: "hyperpod-ns-red", InstanceType: "ml.p5.48xlarge", Start: at,
			GuaranteedAccelSeconds: gpus * 3600, WaitP50Seconds: -1, WaitP90Seconds: -1, WaitP99Seconds: -1, Source: usage.SourceCluster})
		cluster = append(cluster, usage.ClusterHour{Cluster: "shared-hp", InstanceType: "ml.p5.48xlarge", Start: at,
			CapacityAccelSeconds: gpus * 3600, AllocatedAccelSeconds: gpus * 3600, Source: usage.SourceCluster})
	}
	if err := f.db.PutUsageHours(ctx, hours); err != nil {
		t.Fatal(err)
	}
	if err := f.db.PutClusterHours(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	sig := usage.Signals{Store: f.db, Accelerators: map[string]int{"ml.p5.48xlarge": 8}, Thresholds: usage.DefaultThresholds, ClusterOwner: "admins"}
	if n, err := sig.Evaluate(ctx, now); err != nil || n != 1 {
		st, _ := sig.Statuses(ctx, now, nil)
		t.Fatalf("Evaluate = %d, %v; want only the cost jump: %+v", n, err, st)
	}
	f.run(f.tick())
	r := f.open(conn.ID)
	if r.Trigger != workflow.TriggerSignal || !strings.HasPrefix(r.Detail, "Cost jump fired on") ||
		!strings.Contains(r.Detail, "used 1344.0 accelerator-hours in the last 7 days against 672.0 in the 7 days before (+100%)") {
		t.Errorf("review = %s %q; want a signal review naming the cost jump", r.Trigger, r.Detail)
	}
	var ev workflow.Evidence
	if err := json.Unmarshal(r.Evidence, &ev); err != nil || len(ev.Signals) != 1 || ev.Signals[0].Signal != string(usage.SignalCostJump) {
		t.Errorf("evidence signals = %+v, %v; want the cost jump", ev.Signals, err)
	}
}

// An owner who signs in without the team's owners group is seen leaving
// it; as the only owner in the group, the connection is an orphan too,
// flagged and reviewed at once; the flag clears when an owner is back.
func TestOwnerLeftAndOrphan(t *testing.T) {
	f := newFixture(t)
	conn := f.active(workflow.ExampleContract())
	f.run(f.tick())
	if c := f.conn(conn.ID); c.Orphan != "" || len(f.reviews(conn.ID)) != 0 {
		t.Fatalf("orphan %q, reviews %d with the owner in the group", c.Orphan, len(f.reviews(conn.ID)))
	}
	f.login("owner.red") // signs in again, without the group
	f.run(f.tick())
	c := f.conn(conn.ID)
	if c.Orphan != workflow.OrphanNoOwner {
		t.Errorf("orphan = %q; want %q", c.Orphan, workflow.OrphanNoOwner)
	}
	r := f.open(conn.ID)
	if r.Trigger != workflow.TriggerOwnerLeft || !strings.Contains(r.Detail, "owner.red@example.test") {
		t.Errorf("review = %+v; want owner_left naming the owner", r)
	}
	if len(r.MoreTriggers) != 1 || !strings.Contains(r.MoreTriggers[0], "orphan") {
		t.Errorf("more triggers = %q; want the orphan", r.MoreTriggers)
	}
	f.run(f.tick())
	if r := f.open(conn.ID); len(r.MoreTriggers) != 1 {
		t.Errorf("a second tick added triggers: %q", r.MoreTriggers)
	}
	f.decide(r)
	f.login("owner.red", ownersGroup)
	f.run(f.tick())
	if c := f.conn(conn.ID); c.Orphan != "" || c.State != workflow.StateActive {
		t.Errorf("with the owner back: orphan %q, state %s; want cleared and active", c.Orphan, c.State)
	}
}

// An orphan alone (no owner left: the owners never were in the group as
// far as the portal knows, and one never signed in) opens an orphan review.
func TestOrphanReview(t *testing.T) {
	f := newFixture(t)
	c := workflow.ExampleContract()
	c.BusinessOwner, c.CostOwner, c.ExceptionOwner = "nobody@example.test", "nobody@example.test", "nobody@example.test"
	c.OperationsOwner = "nobody@example.test"
	conn := f.active(c)
	f.run(f.tick())
	r := f.open(conn.ID)
	if r.Trigger != workflow.TriggerOrphan || f.conn(conn.ID).Orphan != workflow.OrphanNoOwner {
		t.Errorf("review = %+v, orphan %q; want an orphan review", r, f.conn(conn.ID).Orphan)
	}
	var ev workflow.Evidence
	if err := json.Unmarshal(r.Evidence, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Orphan != workflow.OrphanNoOwner || len(ev.Owners) != 4 || ev.Owners[0].InOwnersGroup != workflow.InGroupUnknown {
		t.Errorf("evidence orphan %q owners %+v; want the orphan and unknown owners", ev.Orphan, ev.Owners)
	}
}

// The evidence is frozen: later changes of usage, signals and the
// contract do not rewrite it; and collecting twice gives the same bytes.
func TestEvidenceFrozen(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	conn := f.active(workflow.ExampleContract())
	hour := usage.HourStart(f.now.Add(-48 * time.Hour))
	if err := f.db.PutUsageHours(ctx, []usage.Hour{{Team: "red", Namespace: "hyperpod-ns-red", InstanceType: "ml.p5.48xlarge", Start: hour,
		GuaranteedAccelSeconds: 7200, BorrowedAccelSeconds: 3600, Running: 1, WaitP50Seconds: -1, WaitP90Seconds: -1, WaitP99Seconds: -1, Source: usage.SourceCluster}}); err != nil {
		t.Fatal(err)
	}
	if err := f.db.SetInventory(ctx, "shared-hp", "ml.p5.48xlarge", 4, f.admin, f.tick()); err != nil {
		t.Fatal(err)
	}
	// The first tick sees the cluster; the reviews open on the calendar.
	f.run(f.tick())
	f.run(day("2026-05-31"))
	r := f.open(conn.ID)
	a, err := review.Collect(ctx, f.s, f.conn(conn.ID), "", day("2026-05-31"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := review.Collect(ctx, f.s, f.conn(conn.ID), "", day("2026-05-31"))
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Errorf("evidence of the same inputs differs:\n%s\n%s", ja, jb)
	}
	var ev workflow.Evidence
	if err := json.Unmarshal(r.Evidence, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Usage != nil {
		t.Errorf("usage from 2026-02-28 counted in the 90 days before 2026-05-31: %+v", ev.Usage)
	}
	if ev.Contract.Version != 1 || ev.Contract.Contract.Team != "red" || len(ev.Owners) != 4 || len(ev.Changes) != 1 {
		t.Errorf("evidence = %+v", ev)
	}
	before := string(r.Evidence)
	// Later: usage, a signal, and a changed contract.
	if err := f.db.PutUsageHours(ctx, []usage.Hour{{Team: "red", Namespace: "hyperpod-ns-red", InstanceType: "ml.p5.48xlarge", Start: usage.HourStart(day("2026-05-30")),
		GuaranteedAccelSeconds: 3600, WaitP50Seconds: -1, WaitP90Seconds: -1, WaitP99Seconds: -1, Source: usage.SourceCluster}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.RecordFired(ctx, []usage.SignalStatus{{Team: "red", Kind: usage.SignalKind("cost_jump"), State: usage.SignalFiring, Current: "x", Threshold: "y"}}, f.tick()); err != nil {
		t.Fatal(err)
	}
	c := workflow.ExampleContract()
	c.BusinessPurpose = "Something else entirely, for the ranking models of the red team."
	if _, _, err := f.db.SaveContract(ctx, conn.ID, 1, c, f.owner, f.tick()); err != nil {
		t.Fatal(err)
	}
	f.run(day("2026-06-01"))
	got, err := f.db.Review(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Evidence) != before || got.EvidenceHash != store.EvidenceHash([]byte(before)) {
		t.Errorf("the frozen evidence changed:\n%s\n%s", before, got.Evidence)
	}
	// A fresh collection sees the new usage and signal.
	now, err := review.Collect(ctx, f.s, f.conn(conn.ID), "", day("2026-06-01"))
	if err != nil {
		t.Fatal(err)
	}
	if now.Usage == nil || now.Usage.Last30.GuaranteedGPUHours != 1 || len(now.Signals) != 1 {
		t.Errorf("a fresh collection = usage %+v signals %+v; want the new hour and signal", now.Usage, now.Signals)
	}
	// The frozen review itself is refused a rewrite by the database.
	if err := f.db.ExecForTest(ctx, `UPDATE reviews SET evidence = '{}'`); err == nil {
		t.Error("the database let a review's evidence be rewritten")
	}
}

// One instance at a time: a second scheduler is refused while the first
// one's heartbeat is fresh, and takes over once it is older than the lease.
func TestSchedulerSingleton(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	conn := f.active(workflow.ExampleContract())
	other := &review.Scheduler{DB: f.db, Owner: "other", Lease: time.Minute, OwnersGroups: f.s.OwnersGroups}
	f.s.Lease = time.Minute
	at := day("2026-05-31")
	f.run(at)
	if err := other.Tick(ctx, at.Add(30*time.Second)); !errors.Is(err, store.ErrSingletonHeld) {
		t.Fatalf("a second instance's tick = %v; want ErrSingletonHeld", err)
	}
	f.run(at.Add(50 * time.Second)) // the holder renews its claim
	if err := other.Tick(ctx, at.Add(100*time.Second)); !errors.Is(err, store.ErrSingletonHeld) {
		t.Fatalf("a second instance's tick after a renewal = %v; want ErrSingletonHeld", err)
	}
	if err := other.Tick(ctx, at.Add(200*time.Second)); err != nil {
		t.Fatalf("the second instance after the lease = %v; want it to take over", err)
	}
	if err := f.s.Tick(ctx, at.Add(210*time.Second)); !errors.Is(err, store.ErrSingletonHeld) {
		t.Errorf("the first instance, taken over = %v; want ErrSingletonHeld", err)
	}
	if rs := f.reviews(conn.ID); len(rs) != 1 {
		t.Errorf("%d reviews; want one", len(rs))
	}
}

// Integration: the group sync sees an owner removed from the owners group
// in the Identity Store test endpoint, though the owner's last sign-in
// still had it, and flags the orphan.
func TestGroupSyncFlagsOrphan(t *testing.T) {
	f := newFixture(t)
	ids := awstest.NewIdentityStore(t)
	group := ids.AddGroup(ownersGroup)
	owner := ids.AddUser("owner.red@example.test")
	ids.AddMembership(owner, group)
	ids.AddUser("member.red@example.test")
	api := identitystore.NewFromConfig(awstest.Config(1), func(o *identitystore.Options) { o.BaseEndpoint = aws.String(ids.URL()) })
	f.s.Directory = awsprov.GroupDirectory{API: api, StoreID: ids.StoreID()}
	conn := f.active(workflow.ExampleContract())
	f.run(f.tick())
	if c := f.conn(conn.ID); c.Orphan != "" || len(f.reviews(conn.ID)) != 0 {
		t.Fatalf("with the owner in the group: orphan %q, %d reviews", c.Orphan, len(f.reviews(conn.ID)))
	}
	ids.RemoveMembership(owner, group)
	f.run(f.tick())
	c := f.conn(conn.ID)
	if c.Orphan != workflow.OrphanNoOwner {
		t.Errorf("orphan = %q after the owner left the group in the Identity Store; want %q", c.Orphan, workflow.OrphanNoOwner)
	}
	r := f.open(conn.ID)
	if r.Trigger != workflow.TriggerOwnerLeft || len(r.MoreTriggers) != 1 || !strings.Contains(r.MoreTriggers[0], "orphan") {
		t.Errorf("review = %+v; want owner_left with the orphan added", r)
	}
	var ev workflow.Evidence
	if err := json.Unmarshal(r.Evidence, &ev); err != nil {
		t.Fatal(err)
	}
	for _, o := range ev.Owners {
		if o.Email == "owner.red@example.test" && o.InOwnersGroup != workflow.InGroupNo {
			t.Errorf("evidence owner %+v; want not in the owners group", o)
		}
	}
	if ids.Count("ListGroupMemberships") == 0 {
		t.Error("the group sync never called ListGroupMemberships")
	}
}

// Seen at login: an owner who signs in without the owners group opens the
// owner_left review at once, before any tick.
func TestOwnerLeftSeenAtSignIn(t *testing.T) {
	f := newFixture(t)
	conn := f.active(workflow.ExampleContract())
	f.run(f.tick()) // the owner is seen in the group
	f.login("owner.red")
	if err := f.s.OwnerSignedIn(t.Context(), "Owner.Red@example.test", f.tick()); err != nil {
		t.Fatal(err)
	}
	if r := f.open(conn.ID); r.Trigger != workflow.TriggerOwnerLeft {
		t.Errorf("review = %+v; want owner_left opened at the sign-in", r)
	}
	// Someone who owns nothing changes nothing.
	f.login("stranger")
	if err := f.s.OwnerSignedIn(t.Context(), "stranger@example.test", f.tick()); err != nil {
		t.Fatal(err)
	}
	if rs := f.reviews(conn.ID); len(rs) != 1 {
		t.Errorf("%d reviews; want the one", len(rs))
	}
}

// An applied change of the review cadence moves the next review date,
// from the day it is applied.
func TestAmendedCadenceMovesTheDueDate(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	conn := f.active(workflow.ExampleContract())
	c := workflow.ExampleContract()
	c.ReviewCadenceDays = 30
	if _, _, err := f.db.SaveContract(ctx, conn.ID, 1, c, f.owner, f.tick()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Transition(ctx, conn.ID, workflow.EventSubmit, f.owner, "", store.Expect{}, f.tick()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.db.Approve(ctx, conn.ID, f.admin, f.pin(conn.ID), "ok", workflow.ClusterFacts{}, f.tick()); err != nil {
		t.Fatal(err)
	}
	if got := f.conn(conn.ID).ReviewDue; got != conn.ReviewDue {
		t.Errorf("review_due moved at the approval: %s, want %s until applied", got, conn.ReviewDue)
	}
	f.runJob()
	if got, want := f.conn(conn.ID).ReviewDue, workflow.NextReviewDue(f.now, 30, ""); got != want || got == conn.ReviewDue {
		t.Errorf("review_due after the change applied = %s, want %s", got, want)
	}
}

// TestWakeTicksAtOnce: Run, whose first tick would come a minute after the
// start and the next an hour later, ticks at once when woken (the
// collector wakes it when the cluster's capacity changed), and again at
// each later wake.
func TestWakeTicksAtOnce(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var mu sync.Mutex
	clockAt := f.now
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		clockAt = clockAt.Add(time.Minute)
		return clockAt
	}
	done := make(chan struct{})
	go func() { defer close(done); f.s.Run(ctx, time.Hour, clock) }()
	heartbeat := func(after time.Time) time.Time {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if owner, hb, err := f.db.SingletonHolder(t.Context(), review.SingletonName); err == nil && owner == "test" && hb.After(after) {
				return hb
			}
		}
		t.Fatalf("no tick after %s within 20 s of a wake", after)
		return time.Time{}
	}
	f.s.Wake()
	first := heartbeat(time.Time{})
	f.s.Wake()
	heartbeat(first)
	cancel()
	<-done
}
