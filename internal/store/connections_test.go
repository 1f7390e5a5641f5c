package store_test

import (
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// fixture is a migrated database with a requester and admins who have
// logged in, and a clock that moves forward one second per call.
type fixture struct {
	t      *testing.T
	db     *store.DB
	raw    *sql.DB
	dsn    string // the database's file or URL
	owner  workflow.Actor
	admins []workflow.Actor
	now    time.Time
}

func newFixture(t *testing.T, admins int) *fixture {
	t.Helper()
	db, dsn := openDB(t, true)
	f := &fixture{t: t, db: db, raw: db.RawSQL(), dsn: dsn, now: time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)}
	f.owner = f.user("owner.red")
	// The example contracts' cluster has room for every test's
	// approvals, as observed from the cluster (tests that are about
	// capacity set their own rows, which win).
	if _, err := f.raw.Exec(`INSERT INTO cluster_observed (cluster_name, instance_type, capacity, basis, observed_at) VALUES ('shared-hp', 'ml.p5.48xlarge', 1000, 'test', '2025-03-01T09:00:00.000000000Z')`); err != nil {
		t.Fatal(err)
	}
	for i := range admins {
		f.admins = append(f.admins, f.user(fmt.Sprintf("admin%d", i+1)))
	}
	// Whatever the test did, the capacity totals apply keeps equal the sum
	// of the rows (runs before openDB's cleanup closes the database).
	t.Cleanup(func() { f.checkCapacityTotals("the test") })
	return f
}

// user records a login and returns the user as an audit actor.
func (f *fixture) user(subject string) workflow.Actor {
	f.t.Helper()
	u, err := f.db.RecordLogin(f.t.Context(), "https://idp.example.test", subject, subject+"@example.test", subject, nil, f.tick())
	if err != nil {
		f.t.Fatalf("RecordLogin(%s): %v", subject, err)
	}
	return workflow.Actor{ID: u.ID, Email: u.Email}
}

func (f *fixture) tick() time.Time {
	f.now = f.now.Add(time.Second)
	return f.now
}

// contract is the example contract for another team, namespace and
// purpose.
func contract(team, ns, purpose string) workflow.Contract {
	c := workflow.ExampleContractFor(team)
	// A team's roles are its own, per connection: the approval refuses a
	// role another connection names.
	for _, r := range []*string{&c.ProjectRoleARN, &c.AccessRoleARN, &c.WorkloadRoleARN} {
		*r = strings.Replace(*r, ":role/"+team+"-", ":role/"+team+"-"+ns+"-", 1)
	}
	c.Namespaces = []string{ns}
	if purpose != "" {
		c.BusinessPurpose = purpose
	}
	return c
}

func (f *fixture) create(c workflow.Contract) store.Connection {
	f.t.Helper()
	conn, err := f.db.CreateConnection(f.t.Context(), c, f.owner, f.tick())
	if err != nil {
		f.t.Fatalf("CreateConnection: %v", err)
	}
	return conn
}

func (f *fixture) transition(id int64, ev workflow.Event, by workflow.Actor, reason string) store.Connection {
	f.t.Helper()
	var conn store.Connection
	var err error
	switch ev {
	case workflow.EventSubmit, workflow.EventWithdraw, workflow.EventReject, workflow.EventRequestChanges:
		conn, err = f.db.Transition(f.t.Context(), id, ev, by, reason, store.Expect{}, f.tick())
	default:
		conn, err = f.db.FireForTest(f.t.Context(), id, ev, f.tick())
	}
	if err != nil {
		f.t.Fatalf("Transition(%d, %s): %v", id, ev, err)
	}
	return conn
}

func (f *fixture) approve(id int64, by workflow.Actor, needed int) (store.Connection, int) {
	f.t.Helper()
	conn, n, err := f.db.Approve(f.t.Context(), id, by, f.pin(id), "looks good", workflow.ClusterFacts{}, f.tick())
	if err != nil {
		f.t.Fatalf("Approve(%d): %v", id, err)
	}
	return conn, n
}

// pin names the connection's current version, its hash and a plan hash,
// as the decide form does.
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

// submitted creates a connection and submits it.
func (f *fixture) submitted(c workflow.Contract) store.Connection {
	f.t.Helper()
	return f.transition(f.create(c).ID, workflow.EventSubmit, f.owner, "")
}

// snapshot is everything a refused change must leave as it was.
type snapshot struct {
	connections, versions, decisions, audit int
	rows                                    string
}

func (f *fixture) snapshot() snapshot {
	f.t.Helper()
	var s snapshot
	for _, c := range []struct {
		table string
		n     *int
	}{{"connections", &s.connections}, {"contract_versions", &s.versions}, {"decisions", &s.decisions}, {"audit_events", &s.audit}} {
		if err := f.raw.QueryRowContext(f.t.Context(), `SELECT count(*) FROM `+c.table).Scan(c.n); err != nil {
			f.t.Fatal(err)
		}
	}
	// Built here rather than with group_concat, which PostgreSQL lacks.
	rows, err := f.raw.QueryContext(f.t.Context(), `SELECT id, state, current_version, approved_version, updated_at, submitted_at FROM connections ORDER BY id`)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var (
			id, cur        int64
			state, updated string
			approved       sql.NullInt64
			submitted      sql.NullString
		)
		if err := rows.Scan(&id, &state, &cur, &approved, &updated, &submitted); err != nil {
			f.t.Fatal(err)
		}
		a, sub := "-", "-"
		if approved.Valid {
			a = strconv.FormatInt(approved.Int64, 10)
		}
		if submitted.Valid {
			sub = submitted.String
		}
		parts = append(parts, fmt.Sprintf("%d:%s:%d:%s:%s:%s", id, state, cur, a, updated, sub))
	}
	if err := rows.Err(); err != nil {
		f.t.Fatal(err)
	}
	s.rows = strings.Join(parts, " ")
	return s
}

func (f *fixture) assertUnchanged(before snapshot, what string) {
	f.t.Helper()
	if after := f.snapshot(); after != before {
		f.t.Errorf("%s wrote to the database:\nbefore %+v\nafter  %+v", what, before, after)
	}
}

// auditActions lists the actions recorded for a connection, oldest first.
func (f *fixture) auditActions(id int64) []string {
	f.t.Helper()
	evs, err := f.db.AuditEvents(f.t.Context(), store.AuditFilter{ObjectType: "connection", ObjectID: id}, 0, 1000)
	if err != nil {
		f.t.Fatalf("AuditEvents: %v", err)
	}
	var out []string
	for _, e := range slices.Backward(evs) {
		out = append(out, e.Action)
	}
	return out
}

func (f *fixture) decisions(id int64) []store.DecisionRow {
	f.t.Helper()
	d, err := f.db.Decisions(f.t.Context(), id)
	if err != nil {
		f.t.Fatalf("Decisions: %v", err)
	}
	return d
}

func TestCreateConnection(t *testing.T) {
	f := newFixture(t, 0)
	ctx := t.Context()
	c := workflow.ExampleContract()
	at := f.now.Add(time.Second)
	conn := f.create(c)

	if !conn.CreatedAt.Equal(at) || !conn.UpdatedAt.Equal(at) || !conn.SubmittedAt.IsZero() {
		t.Errorf("times: created %v updated %v submitted %v; want %v, %v, zero", conn.CreatedAt, conn.UpdatedAt, conn.SubmittedAt, at, at)
	}
	want := store.Connection{
		ID: conn.ID, Team: "red", State: workflow.StateDraft, ClusterName: c.ClusterName, Purpose: c.BusinessPurpose,
		CurrentVersion: 1, RequesterID: f.owner.ID, RequesterEmail: f.owner.Email,
	}
	conn.CreatedAt, conn.UpdatedAt = time.Time{}, time.Time{}
	if conn != want {
		t.Errorf("CreateConnection =\n%+v, want\n%+v", conn, want)
	}
	v, err := f.db.Version(ctx, conn.ID, 1)
	if err != nil {
		t.Fatalf("Version: %v", err)
	}
	if v.Hash != c.Hash() || v.Contract.Hash() != c.Hash() {
		t.Errorf("version 1 hash = %s (decoded body hashes to %s), want %s", v.Hash, v.Contract.Hash(), c.Hash())
	}
	if string(v.Contract.Canonical()) != string(c.Canonical()) {
		t.Errorf("stored body decodes to\n%s\nwant\n%s", v.Contract.Canonical(), c.Canonical())
	}
	if v.AuthorID != f.owner.ID || v.AuthorEmail != f.owner.Email || !v.CreatedAt.Equal(at) {
		t.Errorf("version 1 author/time = %d %s %v, want %d %s %v", v.AuthorID, v.AuthorEmail, v.CreatedAt, f.owner.ID, f.owner.Email, at)
	}
	if got := f.auditActions(conn.ID); !slices.Equal(got, []string{"connection.create"}) {
		t.Errorf("audit actions = %v, want [connection.create]", got)
	}
	evs, err := f.db.AuditEvents(ctx, store.AuditFilter{}, 0, 10)
	if err != nil || len(evs) != 1 {
		t.Fatalf("AuditEvents = %v, %v; want one event", evs, err)
	}
	if e := evs[0]; e.Team != "red" || e.Version != 1 || e.ActorID != f.owner.ID || e.Actor != f.owner.Email || !e.At.Equal(at) {
		t.Errorf("create event = %+v", e)
	}
	if _, err := f.db.Version(ctx, conn.ID, 2); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Version(2) error = %v, want ErrNotFound", err)
	}
	if _, err := f.db.Connection(ctx, conn.ID+100); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Connection(missing) error = %v, want ErrNotFound", err)
	}
}

// The list shows the purpose's first line, cut to 120 characters.
func TestCreateConnectionPurposeLine(t *testing.T) {
	f := newFixture(t, 0)
	tests := []struct {
		purpose, want string
	}{
		{"Short.\nSecond line is not shown.", "Short."},
		{strings.Repeat("é", 130), strings.Repeat("é", 119) + "…"},
		{strings.Repeat("x", 120), strings.Repeat("x", 120)},
	}
	for _, tt := range tests {
		conn := f.create(contract("red", "ns-red", tt.purpose))
		if conn.Purpose != tt.want {
			t.Errorf("purpose %q listed as %q, want %q", tt.purpose, conn.Purpose, tt.want)
		}
	}
}

func TestSaveContract(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	editor := f.user("member.red")
	v1 := workflow.ExampleContract()
	conn := f.create(v1)

	// The same contract written differently normalizes to the same hash.
	same := v1
	same.Team = "  RED "
	same.Namespaces = []string{"HYPERPOD-NS-RED", "hyperpod-ns-red"}
	before := f.snapshot()
	got, changed, err := f.db.SaveContract(ctx, conn.ID, 1, same, editor, f.tick())
	if err != nil || changed || got.CurrentVersion != 1 {
		t.Fatalf("SaveContract(unchanged) = v%d, changed %v, %v; want v1, false, nil", got.CurrentVersion, changed, err)
	}
	f.assertUnchanged(before, "saving an unchanged contract")

	v2 := v1
	v2.BusinessPurpose = "Train the red team's ranking models.\nMore detail."
	v2.ClusterName = "other-hp"
	at := f.tick()
	got, changed, err = f.db.SaveContract(ctx, conn.ID, 1, v2, editor, at)
	if err != nil || !changed {
		t.Fatalf("SaveContract(changed) = changed %v, %v", changed, err)
	}
	if got.CurrentVersion != 2 || got.State != workflow.StateDraft || got.ClusterName != "other-hp" ||
		got.Purpose != "Train the red team's ranking models." || !got.UpdatedAt.Equal(at) {
		t.Errorf("after save: %+v", got)
	}
	ver, err := f.db.Version(ctx, conn.ID, 2)
	if err != nil {
		t.Fatalf("Version(2): %v", err)
	}
	if ver.AuthorID != editor.ID || ver.AuthorEmail != editor.Email || ver.Hash != v2.Hash() {
		t.Errorf("version 2 = author %d %s hash %s, want %d %s %s", ver.AuthorID, ver.AuthorEmail, ver.Hash, editor.ID, editor.Email, v2.Hash())
	}
	if got := f.auditActions(conn.ID); !slices.Equal(got, []string{"connection.create", "contract.version"}) {
		t.Errorf("audit actions = %v", got)
	}
	vs, err := f.db.Versions(ctx, conn.ID)
	if err != nil || len(vs) != 2 || vs[0].Version != 2 || vs[1].Version != 1 {
		t.Errorf("Versions = %v, %v; want versions 2, 1", vs, err)
	}
	if ids, err := f.db.EditorIDs(ctx, conn.ID); err != nil || !slices.Equal(ids, []int64{f.owner.ID, editor.ID}) {
		t.Errorf("EditorIDs = %v, %v; want [%d %d]", ids, err, f.owner.ID, editor.ID)
	}

	refusals := []struct {
		name  string
		setup func()
		base  int
		edit  func(*workflow.Contract)
		check func(t *testing.T, err error)
	}{
		{
			name: "stale base version",
			base: 1,
			edit: func(c *workflow.Contract) { c.ReviewCadenceDays = 30 },
			check: func(t *testing.T, err error) {
				var se *store.StaleError
				if !errors.As(err, &se) {
					t.Fatalf("error = %v, want *StaleError", err)
				}
				if se.WantVersion != 1 || se.Current.CurrentVersion != 2 || se.CurrentHash != v2.Hash() {
					t.Errorf("StaleError = want v%d, current v%d %s; want 1, 2 %s", se.WantVersion, se.Current.CurrentVersion, se.CurrentHash, v2.Hash())
				}
			},
		},
		{
			name: "team changed",
			base: 2,
			edit: func(c *workflow.Contract) { c.Team = "blue" },
			check: func(t *testing.T, err error) {
				if err == nil || !strings.Contains(err.Error(), "team") {
					t.Errorf("error = %v, want a refusal to change the team", err)
				}
			},
		},
		{
			name:  "submitted",
			setup: func() { f.transition(conn.ID, workflow.EventSubmit, f.owner, "") },
			base:  2,
			edit:  func(c *workflow.Contract) { c.ReviewCadenceDays = 30 },
			check: func(t *testing.T, err error) {
				var te *workflow.TransitionError
				if !errors.As(err, &te) || te.From != workflow.StateSubmitted || te.Event != workflow.EventEdit {
					t.Errorf("error = %v, want TransitionError{submitted, edit}", err)
				}
			},
		},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			if tt.setup != nil {
				tt.setup()
			}
			c := v2
			tt.edit(&c)
			before := f.snapshot()
			_, changed, err := f.db.SaveContract(ctx, conn.ID, tt.base, c, editor, f.tick())
			tt.check(t, err)
			if changed {
				t.Error("changed = true on a refused save")
			}
			f.assertUnchanged(before, "a refused save")
		})
	}
}

// A changes_requested request keeps its state when edited, so the list
// still says whose move it is.
func TestSaveContractKeepsChangesRequested(t *testing.T) {
	f := newFixture(t, 1)
	conn := f.submitted(workflow.ExampleContract())
	f.transition(conn.ID, workflow.EventRequestChanges, f.admins[0], "tighten the egress")
	c := workflow.ExampleContract()
	c.EgressAllowances = nil
	got, changed, err := f.db.SaveContract(t.Context(), conn.ID, 1, c, f.owner, f.tick())
	if err != nil || !changed || got.State != workflow.StateChangesRequested || got.CurrentVersion != 2 {
		t.Errorf("SaveContract = %s v%d changed %v, %v; want changes_requested v2 true nil", got.State, got.CurrentVersion, changed, err)
	}
}

func TestContractVersionsImmutable(t *testing.T) {
	f := newFixture(t, 0)
	conn := f.create(workflow.ExampleContract())
	for _, stmt := range []string{
		`UPDATE contract_versions SET body = '{}' WHERE connection_id = ?`,
		`UPDATE contract_versions SET hash = 'x', version = 9 WHERE connection_id = ?`,
		`DELETE FROM contract_versions WHERE connection_id = ?`,
	} {
		before := f.snapshot()
		_, err := f.raw.ExecContext(t.Context(), stmt, conn.ID)
		if err == nil || !strings.Contains(err.Error(), "immutable") {
			t.Errorf("%s: error = %v, want the trigger's refusal", stmt, err)
		}
		f.assertUnchanged(before, stmt)
	}
	v, err := f.db.Version(t.Context(), conn.ID, 1)
	if err != nil || v.Hash != workflow.ExampleContract().Hash() {
		t.Errorf("version 1 after refused writes: %v, hash %s", err, v.Hash)
	}
}

func TestTransition(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	admin := f.admins[0]

	t.Run("submit", func(t *testing.T) {
		conn := f.create(workflow.ExampleContract())
		at := f.now.Add(time.Second)
		got := f.transition(conn.ID, workflow.EventSubmit, f.owner, "")
		if got.State != workflow.StateSubmitted || !got.SubmittedAt.Equal(at) || !got.UpdatedAt.Equal(at) {
			t.Errorf("after submit: state %s submitted_at %v updated_at %v, want submitted %v", got.State, got.SubmittedAt, got.UpdatedAt, at)
		}
		if len(f.decisions(conn.ID)) != 0 {
			t.Error("submit wrote a decision")
		}
		if got := f.auditActions(conn.ID); !slices.Equal(got, []string{"connection.create", "connection.submit"}) {
			t.Errorf("audit actions = %v", got)
		}
	})

	decisions := []struct {
		ev        workflow.Event
		wantState workflow.State
		kind      string
		action    string
	}{
		{workflow.EventRequestChanges, workflow.StateChangesRequested, "request_changes", "connection.request_changes"},
		{workflow.EventReject, workflow.StateRejected, "reject", "connection.reject"},
	}
	for _, tt := range decisions {
		t.Run(string(tt.ev), func(t *testing.T) {
			conn := f.submitted(workflow.ExampleContract())
			reason := "because " + string(tt.ev)
			got := f.transition(conn.ID, tt.ev, admin, reason)
			if got.State != tt.wantState {
				t.Errorf("state = %s, want %s", got.State, tt.wantState)
			}
			ds := f.decisions(conn.ID)
			if len(ds) != 1 {
				t.Fatalf("decisions = %+v, want one", ds)
			}
			if d := ds[0]; d.Kind != tt.kind || d.Reason != reason || d.ActorID != admin.ID || d.ActorEmail != admin.Email ||
				d.Version != 1 || d.Hash != workflow.ExampleContract().Hash() {
				t.Errorf("decision = %+v", d)
			}
			evs, err := f.db.AuditEvents(ctx, store.AuditFilter{ObjectType: "connection", ObjectID: conn.ID}, 0, 1)
			if err != nil || len(evs) != 1 {
				t.Fatalf("AuditEvents: %v %v", evs, err)
			}
			if e := evs[0]; e.Action != tt.action || e.Reason != reason || e.ActorID != admin.ID || e.Version != 1 {
				t.Errorf("audit event = %+v, want %s with reason %q", e, tt.action, reason)
			}
		})
	}

	t.Run("withdraw", func(t *testing.T) {
		for _, from := range []func() store.Connection{
			func() store.Connection { return f.create(workflow.ExampleContract()) },
			func() store.Connection { return f.submitted(workflow.ExampleContract()) },
		} {
			conn := from()
			got := f.transition(conn.ID, workflow.EventWithdraw, f.owner, "no longer needed")
			if got.State != workflow.StateWithdrawn {
				t.Errorf("withdraw from %s: state %s", conn.State, got.State)
			}
			if len(f.decisions(conn.ID)) != 0 {
				t.Errorf("withdraw from %s wrote a decision", conn.State)
			}
			if acts := f.auditActions(conn.ID); acts[len(acts)-1] != "connection.withdraw" {
				t.Errorf("withdraw from %s: audit actions %v", conn.State, acts)
			}
		}
	})

	draft := f.create(workflow.ExampleContract())
	sub := f.submitted(workflow.ExampleContract())
	gone := f.transition(f.create(workflow.ExampleContract()).ID, workflow.EventWithdraw, f.owner, "")
	refused := []struct {
		conn store.Connection
		ev   workflow.Event
	}{
		{draft, workflow.EventReject},
		{draft, workflow.EventRequestChanges},
		{draft, workflow.EventStartProvisioning},
		{draft, workflow.EventRevoke},
		{sub, workflow.EventSubmit},
		{sub, workflow.EventEdit},
		{sub, workflow.EventRenew},
		{gone, workflow.EventSubmit},
		{gone, workflow.EventWithdraw},
	}
	for _, tt := range refused {
		t.Run(fmt.Sprintf("%s refuses %s", tt.conn.State, tt.ev), func(t *testing.T) {
			before := f.snapshot()
			_, err := f.db.Transition(ctx, tt.conn.ID, tt.ev, admin, "reason", store.Expect{}, f.tick())
			var te *workflow.TransitionError
			if !errors.As(err, &te) || te.From != tt.conn.State || te.Event != tt.ev {
				t.Errorf("error = %v, want TransitionError{%s, %s}", err, tt.conn.State, tt.ev)
			}
			f.assertUnchanged(before, "a refused transition")
		})
	}

	t.Run("approve is refused", func(t *testing.T) {
		before := f.snapshot()
		if _, err := f.db.Transition(ctx, sub.ID, workflow.EventApprove, admin, "", store.Expect{}, f.tick()); err == nil {
			t.Error("Transition(approve) succeeded; approvals must go through Approve")
		}
		f.assertUnchanged(before, "Transition(approve)")
	})

	t.Run("missing connection", func(t *testing.T) {
		_, err := f.db.Transition(ctx, 99999, workflow.EventSubmit, f.owner, "", store.Expect{}, f.tick())
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("error = %v, want ErrNotFound", err)
		}
	})

	stale := []struct {
		name   string
		expect store.Expect
	}{
		{"older version", store.Expect{Version: 1}},
		{"newer version", store.Expect{Version: 3}},
		{"other hash", store.Expect{Version: 2, Hash: workflow.ExampleContract().Hash()}},
	}
	// A request sent back, edited to version 2 and resubmitted.
	conn := f.submitted(workflow.ExampleContract())
	f.transition(conn.ID, workflow.EventRequestChanges, admin, "smaller guarantee")
	c2 := workflow.ExampleContract()
	c2.Scheduling.Guaranteed[0].Count = 1
	if _, _, err := f.db.SaveContract(ctx, conn.ID, 1, c2, f.owner, f.tick()); err != nil {
		t.Fatal(err)
	}
	f.transition(conn.ID, workflow.EventSubmit, f.owner, "")
	for _, tt := range stale {
		t.Run("stale "+tt.name, func(t *testing.T) {
			before := f.snapshot()
			_, err := f.db.Transition(ctx, conn.ID, workflow.EventReject, admin, "no", tt.expect, f.tick())
			var se *store.StaleError
			if !errors.As(err, &se) {
				t.Fatalf("error = %v, want *StaleError", err)
			}
			if se.Current.CurrentVersion != 2 || se.CurrentHash != c2.Hash() || se.WantVersion != tt.expect.Version {
				t.Errorf("StaleError = %+v", se)
			}
			f.assertUnchanged(before, "a stale transition")
		})
	}
	t.Run("current expectation", func(t *testing.T) {
		got, err := f.db.Transition(ctx, conn.ID, workflow.EventReject, admin, "no", store.Expect{Version: 2, Hash: c2.Hash()}, f.tick())
		if err != nil || got.State != workflow.StateRejected {
			t.Errorf("Transition with the current version = %s, %v; want rejected", got.State, err)
		}
	})
}

func TestApprove(t *testing.T) {
	f := newFixture(t, 2)
	ctx := t.Context()
	a1, a2 := f.admins[0], f.admins[1]
	h := workflow.ExampleContract().Hash()

	t.Run("one approval needed", func(t *testing.T) {
		conn := f.submitted(workflow.ExampleContract())
		at := f.now.Add(time.Second)
		got, n, err := f.db.Approve(ctx, conn.ID, a1, store.Expect{Version: 1, Hash: h, PlanHash: "plan"}, "ok", workflow.ClusterFacts{}, at)
		f.now = at
		if err != nil {
			t.Fatalf("Approve: %v", err)
		}
		if n != 1 || got.State != workflow.StateApproved || got.ApprovedVersion != 1 || !got.UpdatedAt.Equal(at) {
			t.Errorf("Approve = %s approved_version %d count %d", got.State, got.ApprovedVersion, n)
		}
		ds := f.decisions(conn.ID)
		if len(ds) != 1 || ds[0].Kind != "approve" || ds[0].ActorID != a1.ID || ds[0].Hash != h || ds[0].Reason != "ok" {
			t.Errorf("decisions = %+v", ds)
		}
		if acts := f.auditActions(conn.ID); acts[len(acts)-1] != "connection.approve" {
			t.Errorf("audit actions = %v", acts)
		}
	})

	t.Run("two approvals needed", func(t *testing.T) {
		c := contract("blue", "ns-blue", "")
		c.DataClassification = workflow.DataRestricted
		conn := f.submitted(c)
		got, n := f.approve(conn.ID, a1, 2)
		if n != 1 || got.State != workflow.StateSubmitted || got.ApprovedVersion != 0 {
			t.Errorf("first approval: %s approved_version %d count %d; want submitted, 0, 1", got.State, got.ApprovedVersion, n)
		}
		if acts := f.auditActions(conn.ID); acts[len(acts)-1] != "connection.approve_partial" {
			t.Errorf("audit actions after first approval = %v", acts)
		}

		before := f.snapshot()
		_, _, err := f.db.Approve(ctx, conn.ID, a1, f.pin(conn.ID), "again", workflow.ClusterFacts{}, f.tick())
		if !errors.Is(err, workflow.ErrAlreadyDecided) {
			t.Errorf("same admin again: error = %v, want ErrAlreadyDecided", err)
		}
		f.assertUnchanged(before, "a repeated approval")

		got, n = f.approve(conn.ID, a2, 2)
		if n != 2 || got.State != workflow.StateApproved || got.ApprovedVersion != 1 {
			t.Errorf("second approval: %s approved_version %d count %d; want approved, 1, 2", got.State, got.ApprovedVersion, n)
		}
		if ids, err := f.db.ApproverIDs(ctx, conn.ID, 1); err != nil || !slices.Equal(ids, []int64{a1.ID, a2.ID}) {
			t.Errorf("ApproverIDs = %v, %v", ids, err)
		}
		if acts := f.auditActions(conn.ID); !slices.Equal(acts[len(acts)-2:], []string{"connection.approve_partial", "connection.approve"}) {
			t.Errorf("audit actions = %v", acts)
		}
	})

	t.Run("stale after a new version", func(t *testing.T) {
		conn := f.submitted(workflow.ExampleContract())
		seen := store.Expect{Version: 1, Hash: h, PlanHash: "plan"} // the admin opened version 1
		f.transition(conn.ID, workflow.EventRequestChanges, a2, "fewer GPUs")
		c2 := workflow.ExampleContract()
		c2.Scheduling.Guaranteed[0].Count = 1
		if _, _, err := f.db.SaveContract(ctx, conn.ID, 1, c2, f.owner, f.tick()); err != nil {
			t.Fatal(err)
		}
		f.transition(conn.ID, workflow.EventSubmit, f.owner, "")

		before := f.snapshot()
		_, _, err := f.db.Approve(ctx, conn.ID, a1, seen, "ok", workflow.ClusterFacts{}, f.tick())
		var se *store.StaleError
		if !errors.As(err, &se) || se.Current.CurrentVersion != 2 || se.CurrentHash != c2.Hash() {
			t.Errorf("error = %v, want *StaleError at version 2", err)
		}
		f.assertUnchanged(before, "a stale approval")
	})

	t.Run("unpinned", func(t *testing.T) {
		// An approval that does not name the version, the contract hash
		// and the plan hash is refused and records nothing: it would
		// approve whatever is current and queue an unpinned job.
		conn := f.submitted(workflow.ExampleContract())
		full := f.pin(conn.ID)
		for name, e := range map[string]store.Expect{
			"nothing":      {},
			"no version":   {Hash: full.Hash, PlanHash: full.PlanHash},
			"no hash":      {Version: full.Version, PlanHash: full.PlanHash},
			"no plan hash": {Version: full.Version, Hash: full.Hash},
		} {
			before := f.snapshot()
			if _, _, err := f.db.Approve(ctx, conn.ID, a1, e, "ok", workflow.ClusterFacts{}, f.tick()); !errors.Is(err, workflow.ErrUnpinned) {
				t.Errorf("%s: error = %v, want ErrUnpinned", name, err)
			}
			f.assertUnchanged(before, "an unpinned approval ("+name+")")
		}
	})

	t.Run("not submitted", func(t *testing.T) {
		conn := f.create(workflow.ExampleContract())
		before := f.snapshot()
		_, _, err := f.db.Approve(ctx, conn.ID, a1, f.pin(conn.ID), "ok", workflow.ClusterFacts{}, f.tick())
		var te *workflow.TransitionError
		if !errors.As(err, &te) || te.From != workflow.StateDraft {
			t.Errorf("error = %v, want TransitionError from draft", err)
		}
		f.assertUnchanged(before, "approving a draft")
	})
}

func TestApproveCapacityCheck(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	admin := f.admins[0]
	const p5, g5 = "ml.p5.48xlarge", "ml.g5.12xlarge"
	for _, inv := range []struct {
		cluster, typ string
		n            int
	}{{"shared-hp", p5, 10}, {"shared-hp", g5, 4}, {"other-hp", p5, 99}} {
		if err := f.db.SetInventory(ctx, inv.cluster, inv.typ, inv.n, admin, f.tick()); err != nil {
			t.Fatalf("SetInventory: %v", err)
		}
	}
	// SetInventory with 0 removes a type.
	if err := f.db.SetInventory(ctx, "shared-hp", "ml.trn1.32xlarge", 3, admin, f.tick()); err != nil {
		t.Fatal(err)
	}
	if err := f.db.SetInventory(ctx, "shared-hp", "ml.trn1.32xlarge", 0, admin, f.tick()); err != nil {
		t.Fatal(err)
	}

	withCapacity := func(team, cluster string, caps ...workflow.Capacity) workflow.Contract {
		c := contract(team, "ns-"+team, "")
		c.ClusterName = cluster
		c.Scheduling.Guaranteed = caps
		return c
	}
	// Approved on the same cluster: counts.
	approved := f.submitted(withCapacity("amber", "shared-hp", workflow.Capacity{InstanceType: p5, Count: 3}, workflow.Capacity{InstanceType: g5, Count: 1}))
	f.approve(approved.ID, admin, 1)
	// Approved then revoked: revoking still holds capacity, revoked does not.
	revoking := f.submitted(withCapacity("bronze", "shared-hp", workflow.Capacity{InstanceType: p5, Count: 2}))
	f.approve(revoking.ID, admin, 1)
	f.transition(revoking.ID, workflow.EventRevoke, admin, "end of project")
	revoked := f.submitted(withCapacity("coral", "shared-hp", workflow.Capacity{InstanceType: p5, Count: 4}))
	f.approve(revoked.ID, admin, 1)
	f.transition(revoked.ID, workflow.EventRevoke, admin, "end of project")
	f.transition(revoked.ID, workflow.EventRevocationDone, workflow.Actor{Email: "system"}, "")
	// Not counted: a draft, a submitted request, an approval on another cluster.
	f.create(withCapacity("dune", "shared-hp", workflow.Capacity{InstanceType: p5, Count: 5}))
	f.submitted(withCapacity("ember", "shared-hp", workflow.Capacity{InstanceType: p5, Count: 6}))
	other := f.submitted(withCapacity("fern", "other-hp", workflow.Capacity{InstanceType: p5, Count: 7}))
	f.approve(other.ID, admin, 1)

	target := f.submitted(withCapacity("gold", "shared-hp", workflow.Capacity{InstanceType: p5, Count: 6}))

	before := f.snapshot()
	_, _, err := f.db.Approve(ctx, target.ID, admin, f.pin(target.ID), "ok", workflow.ClusterFacts{}, f.tick())
	if !errors.Is(err, workflow.ErrOverCapacity) {
		t.Fatalf("Approve over capacity: error = %v, want %v", err, workflow.ErrOverCapacity)
	}
	f.assertUnchanged(before, "a refused approval")
	if inv, err := f.db.Inventory(ctx, "shared-hp"); err != nil || fmt.Sprint(inv) != fmt.Sprint(map[string]int{p5: 10, g5: 4}) {
		t.Errorf("inventory = %v, %v", inv, err)
	}
	sortCaps := func(cs []workflow.Capacity) []workflow.Capacity {
		cs = slices.Clone(cs)
		slices.SortFunc(cs, func(a, b workflow.Capacity) int {
			return strings.Compare(a.InstanceType+fmt.Sprint(a.Count), b.InstanceType+fmt.Sprint(b.Count))
		})
		return cs
	}
	// Committed capacity is summed per instance type (the approved
	// connection's g5×1 + p5×3 and the revoking one's p5×2).
	wantCommitted := []workflow.Capacity{{InstanceType: g5, Count: 1}, {InstanceType: p5, Count: 5}}
	if cc, err := f.db.CommittedCapacity(ctx, "shared-hp", 0); err != nil || !slices.Equal(sortCaps(cc), wantCommitted) {
		t.Errorf("CommittedCapacity = %v, %v; want %v", cc, err, wantCommitted)
	}
	if cc, err := f.db.CommittedCapacity(ctx, "shared-hp", approved.ID); err != nil || !slices.Equal(sortCaps(cc), []workflow.Capacity{{InstanceType: p5, Count: 2}}) {
		t.Errorf("CommittedCapacity excluding %d = %v, %v; want p5×2", approved.ID, cc, err)
	}

	// Once the revoking connection is gone, 3 + 6 fits in 10.
	f.transition(revoking.ID, workflow.EventRevocationDone, workflow.Actor{Email: "system"}, "")
	got, _, err := f.db.Approve(ctx, target.ID, admin, f.pin(target.ID), "ok", workflow.ClusterFacts{}, f.tick())
	if err != nil || got.State != workflow.StateApproved {
		t.Errorf("Approve within capacity = %s, %v; want approved", got.State, err)
	}
	if cl, err := f.db.Clusters(ctx); err != nil || !slices.Equal(cl, []string{"other-hp", "shared-hp"}) {
		t.Errorf("Clusters = %v, %v", cl, err)
	}
}

// Concurrent approvals serialize on the write lock: one admin wins, the
// others find the request already approved, by whom and when.
func TestApproveConcurrent(t *testing.T) {
	const admins = 8
	f := newFixture(t, admins)
	ctx := t.Context()
	conn := f.submitted(workflow.ExampleContract())
	expect := store.Expect{Version: 1, Hash: workflow.ExampleContract().Hash(), PlanHash: "plan"}
	at := f.tick()

	errs := make([]error, admins)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, a := range f.admins {
		wg.Go(func() {
			<-start
			_, _, errs[i] = f.db.Approve(ctx, conn.ID, a, expect, "ok", workflow.ClusterFacts{}, at)
		})
	}
	close(start)
	wg.Wait()

	// Every loser is told who won and when (issue 32 item 8), decided
	// inside its transaction from the decision row the winner wrote.
	winner := -1
	for i, err := range errs {
		if err == nil {
			if winner >= 0 {
				t.Errorf("admins %d and %d both approved", winner+1, i+1)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatalf("no approval succeeded: %v", errs)
	}
	for i, err := range errs {
		var already *workflow.AlreadyApprovedError
		if i != winner && (!errors.As(err, &already) || already.Version != 1 || already.Last.By != f.admins[winner].Email || !already.Last.At.Equal(at)) {
			t.Errorf("admin %d: error %v, want already approved by %s at %s", i+1, err, f.admins[winner].Email, at)
		}
	}
	ds := f.decisions(conn.ID)
	if len(ds) != 1 || ds[0].Kind != "approve" {
		t.Errorf("decisions = %+v, want one approval", ds)
	}
	got, err := f.db.Connection(ctx, conn.ID)
	if err != nil || got.State != workflow.StateApproved || got.ApprovedVersion != 1 {
		t.Errorf("connection = %+v, %v; want approved at version 1", got, err)
	}
	if acts := f.auditActions(conn.ID); !slices.Equal(acts, []string{"connection.create", "connection.submit", "connection.approve"}) {
		t.Errorf("audit actions = %v", acts)
	}
	n, brk, err := f.db.VerifyAudit(ctx)
	if err != nil || brk != nil {
		t.Errorf("VerifyAudit = %d, %+v, %v; want an intact chain", n, brk, err)
	}
}

// listed is one connection of the list fixture with what the filters see.
type listed struct {
	id      int64
	team    string
	state   workflow.State
	cluster string
	purpose string
}

// listFixture creates connections in several teams, states, clusters and
// purposes and returns them oldest first.
func listFixture(t *testing.T) (*fixture, []listed) {
	f := newFixture(t, 1)
	if _, err := f.raw.Exec(`INSERT INTO cluster_observed (cluster_name, instance_type, capacity, basis, observed_at) VALUES ('other-hp', 'ml.p5.48xlarge', 1000, 'test', '2025-03-01T09:00:00.000000000Z')`); err != nil {
		t.Fatal(err)
	}
	teams := []string{"red", "blue", "green"}
	purposes := []string{"Run 100% of evals nightly.", "Run 1000 GPU-hours of evals.", "Train a_b rankers.", "Train axb rankers."}
	var out []listed
	for i := range 24 {
		team := teams[i%len(teams)]
		c := contract(team, fmt.Sprintf("ns-%d", i), purposes[i%len(purposes)])
		if i%5 == 0 {
			c.ClusterName = "other-hp"
		}
		conn := f.create(c)
		switch i % 4 {
		case 1:
			conn = f.transition(conn.ID, workflow.EventSubmit, f.owner, "")
		case 2:
			f.transition(conn.ID, workflow.EventSubmit, f.owner, "")
			conn, _ = f.approve(conn.ID, f.admins[0], 1)
		case 3:
			conn = f.transition(conn.ID, workflow.EventWithdraw, f.owner, "")
		}
		out = append(out, listed{conn.ID, team, conn.State, c.ClusterName, c.BusinessPurpose})
	}
	return f, out
}

func TestListConnections(t *testing.T) {
	f, all := listFixture(t)
	ctx := t.Context()
	tests := []struct {
		name   string
		filter store.ListFilter
		match  func(listed) bool
	}{
		{"everything", store.ListFilter{}, func(listed) bool { return true }},
		{"nil scope sees all", store.ListFilter{Teams: nil}, func(listed) bool { return true }},
		{"empty scope sees none", store.ListFilter{Teams: []string{}}, func(listed) bool { return false }},
		{"scope red", store.ListFilter{Teams: []string{"red"}}, func(c listed) bool { return c.team == "red" }},
		{"scope red and green", store.ListFilter{Teams: []string{"red", "green"}}, func(c listed) bool { return c.team != "blue" }},
		{"scope of an unknown team", store.ListFilter{Teams: []string{"violet"}}, func(listed) bool { return false }},
		{"team filter", store.ListFilter{Team: "blue"}, func(c listed) bool { return c.team == "blue" }},
		{"team filter outside scope", store.ListFilter{Teams: []string{"red"}, Team: "blue"}, func(listed) bool { return false }},
		{"state", store.ListFilter{State: workflow.StateSubmitted}, func(c listed) bool { return c.state == workflow.StateSubmitted }},
		{"team and state", store.ListFilter{Team: "red", State: workflow.StateApproved},
			func(c listed) bool { return c.team == "red" && c.state == workflow.StateApproved }},
		{"cluster", store.ListFilter{Cluster: "other-hp"}, func(c listed) bool { return c.cluster == "other-hp" }},
		{"query literal percent", store.ListFilter{Query: "100%"}, func(c listed) bool { return strings.Contains(c.purpose, "100%") }},
		{"query literal underscore", store.ListFilter{Query: " a_b "}, func(c listed) bool { return strings.Contains(c.purpose, "a_b") }},
		{"query backslash", store.ListFilter{Query: `a\b`}, func(listed) bool { return false }},
		{"query and scope", store.ListFilter{Teams: []string{"green"}, Query: "evals"},
			func(c listed) bool { return c.team == "green" && strings.Contains(c.purpose, "evals") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want []int64
			for _, c := range slices.Backward(all) {
				if tt.match(c) {
					want = append(want, c.id)
				}
			}
			got, next, err := f.db.ListConnections(ctx, tt.filter, 0, 100)
			if err != nil {
				t.Fatalf("ListConnections: %v", err)
			}
			if ids := connIDs(got); !slices.Equal(ids, want) {
				t.Errorf("ids = %v, want %v", ids, want)
			}
			if next != 0 {
				t.Errorf("next = %d on the only page, want 0", next)
			}
		})
	}
	// A sanity check on the fixture, so that the filters above are not
	// vacuous.
	got, _, _ := f.db.ListConnections(ctx, store.ListFilter{Query: "100%"}, 0, 100)
	if len(got) == 0 || len(got) == len(all) {
		t.Errorf("query 100%% matched %d of %d", len(got), len(all))
	}
	if got[0].RequesterEmail != f.owner.Email || got[0].Purpose != "Run 100% of evals nightly." {
		t.Errorf("listed row = %+v", got[0])
	}
}

func connIDs(cs []store.Connection) []int64 {
	out := make([]int64, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

func TestListConnectionsPages(t *testing.T) {
	f, all := listFixture(t)
	ctx := t.Context()
	for _, tt := range []struct {
		filter store.ListFilter
		limit  int
	}{
		{store.ListFilter{}, 5},
		{store.ListFilter{}, 1},
		{store.ListFilter{}, 24}, // exactly one full page
		{store.ListFilter{}, 8},  // pages divide the rows evenly
		{store.ListFilter{Teams: []string{"red", "blue"}}, 3},
		{store.ListFilter{State: workflow.StateDraft}, 4},
	} {
		t.Run(fmt.Sprintf("%+v limit %d", tt.filter, tt.limit), func(t *testing.T) {
			want, _, err := f.db.ListConnections(ctx, tt.filter, 0, 1000)
			if err != nil || len(want) == 0 {
				t.Fatalf("full list: %d rows, %v", len(want), err)
			}
			var got []int64
			before := int64(0)
			for pages := 0; ; pages++ {
				if pages > len(all) {
					t.Fatal("pagination does not end")
				}
				page, next, err := f.db.ListConnections(ctx, tt.filter, before, tt.limit)
				if err != nil {
					t.Fatalf("page %d: %v", pages, err)
				}
				if len(page) > tt.limit {
					t.Fatalf("page %d has %d rows, limit %d", pages, len(page), tt.limit)
				}
				got = append(got, connIDs(page)...)
				if next == 0 {
					break
				}
				if len(page) != tt.limit || next != page[len(page)-1].ID {
					t.Fatalf("page %d: %d rows, next %d; want a full page and its last id", pages, len(page), next)
				}
				before = next
			}
			if w := connIDs(want); !slices.Equal(got, w) {
				t.Errorf("pages gave %v, want every row once, newest first: %v", got, w)
			}
		})
	}
}

// A limit below one used to panic (the cursor indexed an empty page).
func TestListConnectionsRefusesEmptyPages(t *testing.T) {
	f := newFixture(t, 0)
	f.create(workflow.ExampleContract())
	for _, limit := range []int{0, -1, -10} {
		page, next, err := f.db.ListConnections(t.Context(), store.ListFilter{}, 0, limit)
		if err == nil || len(page) != 0 || next != 0 {
			t.Errorf("ListConnections(limit %d) = %d rows, next %d, %v; want an error", limit, len(page), next, err)
		}
	}
}

func TestQueue(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	a := f.create(contract("red", "ns-a", ""))
	b := f.create(contract("blue", "ns-b", ""))
	c := f.create(contract("green", "ns-c", ""))
	d := f.create(contract("red", "ns-d", ""))
	f.create(contract("red", "ns-draft", ""))
	// Submitted in the order c, b, d, a (not the order of their ids); d is
	// then approved, and c is sent back and resubmitted, so it waits from its
	// resubmission.
	for _, conn := range []store.Connection{c, b, d, a} {
		f.transition(conn.ID, workflow.EventSubmit, f.owner, "")
	}
	f.approve(d.ID, f.admins[0], 1)
	f.transition(c.ID, workflow.EventRequestChanges, f.admins[0], "more detail")
	f.transition(c.ID, workflow.EventSubmit, f.owner, "")

	got, err := f.db.Queue(ctx, 10)
	if err != nil {
		t.Fatalf("Queue: %v", err)
	}
	if ids, want := connIDs(got), []int64{b.ID, a.ID, c.ID}; !slices.Equal(ids, want) {
		t.Errorf("Queue = %v, want %v", ids, want)
	}
	for _, conn := range got {
		if conn.State != workflow.StateSubmitted || conn.SubmittedAt.IsZero() {
			t.Errorf("queued %d: state %s submitted_at %v", conn.ID, conn.State, conn.SubmittedAt)
		}
	}
	if got, err := f.db.Queue(ctx, 2); err != nil || !slices.Equal(connIDs(got), []int64{b.ID, a.ID}) {
		t.Errorf("Queue(limit 2) = %v, %v", connIDs(got), err)
	}
}

func TestNamespaceOwner(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	withNS := func(team string, ns ...string) workflow.Contract {
		c := contract(team, "", "")
		c.Namespaces = ns
		return c
	}
	draft := f.create(withNS("red", "old-ns"))
	// The latest version names ml-team; old-ns is released. Once
	// submitted, it claims ml-team.
	if _, _, err := f.db.SaveContract(ctx, draft.ID, 1, withNS("red", "ml-team"), f.owner, f.tick()); err != nil {
		t.Fatal(err)
	}
	f.transition(draft.ID, workflow.EventSubmit, f.owner, "")
	// A draft claims nothing (issue 10 item 3).
	f.create(withNS("teal", "drafted"))
	f.transition(f.create(withNS("blue", "ml")).ID, workflow.EventWithdraw, f.owner, "")
	rejected := f.submitted(withNS("green", "ml"))
	f.transition(rejected.ID, workflow.EventReject, f.admins[0], "no")
	multi := f.submitted(withNS("amber", "alpha", "beta", "gamma"))
	approved := f.submitted(withNS("bronze", "prod"))
	f.approve(approved.ID, f.admins[0], 1)

	tests := []struct {
		ns      string
		exclude int64
		want    int64
	}{
		{"ml-team", 0, draft.ID},
		{"ml-team", draft.ID, 0},
		{"ml", 0, 0},      // only ended connections claim it; ml-team is not ml
		{"ml-", 0, 0},     // no prefixes
		{"team", 0, 0},    // no suffixes
		{"ml_team", 0, 0}, // _ is not a wildcard
		{"ml%", 0, 0},     // nor is %
		{"old-ns", 0, 0},  // released by version 2
		{"alpha", 0, multi.ID},
		{"beta", 0, multi.ID},
		{"gamma", 0, multi.ID},
		{"prod", 0, approved.ID},
		{"prod", multi.ID, approved.ID},
		{"unused", 0, 0},
		{"drafted", 0, 0},
	}
	for _, tt := range tests {
		got, err := f.db.NamespaceOwner(ctx, tt.ns, tt.exclude)
		if err != nil || got != tt.want {
			t.Errorf("NamespaceOwner(%q, exclude %d) = %d, %v; want %d", tt.ns, tt.exclude, got, err, tt.want)
		}
	}
}

func TestUserExists(t *testing.T) {
	f := newFixture(t, 0)
	for _, tt := range []struct {
		email string
		want  bool
	}{{f.owner.Email, true}, {strings.ToUpper(f.owner.Email), true}, {"nobody@example.test", false}} {
		if got, err := f.db.UserExists(t.Context(), tt.email); err != nil || got != tt.want {
			t.Errorf("UserExists(%s) = %v, %v; want %v", tt.email, got, err, tt.want)
		}
	}
}

func TestValidationEnvKnowsTakenNamespacesAndRoles(t *testing.T) {
	f := newFixture(t, 1)
	red := f.submitted(workflow.ExampleContract())
	blue := f.create(workflow.ExampleContractFor("blue"))
	gone := workflow.ExampleContractFor("green")
	g := f.create(gone)
	f.transition(g.ID, workflow.EventSubmit, f.owner, "")
	f.transition(g.ID, workflow.EventWithdraw, f.owner, "")
	ex := workflow.ExampleContract()

	env := f.db.ValidationEnv(t.Context(), f.now, blue.ID, nil)
	for _, r := range []string{ex.ProjectRoleARN, ex.AccessRoleARN, ex.WorkloadRoleARN} {
		if !env.RoleTaken(r) {
			t.Errorf("red's %s is not seen as taken from blue's connection", r)
		}
	}
	if env.RoleTaken(workflow.ExampleContractFor("blue").AccessRoleARN) || env.RoleTaken(gone.AccessRoleARN) {
		t.Error("blue's own role, or a withdrawn connection's, is seen as taken")
	}
	if !env.NamespaceTaken("hyperpod-ns-red") || env.NamespaceTaken("hyperpod-ns-blue") || env.NamespaceTaken("hyperpod-ns-green") {
		t.Error("namespaces taken wrongly")
	}
	if self := f.db.ValidationEnv(t.Context(), f.now, red.ID, nil); self.RoleTaken(ex.AccessRoleARN) {
		t.Error("a connection's own role is seen as taken by itself")
	}
}

// TestClaimsAreHeldFromSubmission: which states hold a namespace or role
// claim (issue 10 item 3). A draft holds none, so an owner cannot squat
// another team's names with an incomplete draft that nobody can clear; a
// submitted request and every later live state does; an ended connection
// does not. A request sent back for changes keeps what it had submitted,
// but its edits claim nothing new until they are resubmitted.
func TestClaimsAreHeldFromSubmission(t *testing.T) {
	holds := map[workflow.State]bool{
		workflow.StateDraft: false, workflow.StateSubmitted: true, workflow.StateChangesRequested: true,
		workflow.StateApproved: true, workflow.StateRejected: false, workflow.StateWithdrawn: false,
		workflow.StateProvisioning: true, workflow.StateActive: true, workflow.StateUnderReview: true,
		workflow.StateRevoking: true, workflow.StateRevoked: false,
	}
	if len(holds) != len(workflow.AllStates) {
		t.Fatalf("the table covers %d of %d states", len(holds), len(workflow.AllStates))
	}
	for _, st := range workflow.AllStates {
		t.Run(string(st), func(t *testing.T) {
			f := newFixture(t, 1)
			ctx := t.Context()
			red := workflow.ExampleContract()
			red.Namespaces = []string{"squat"}
			red.AccessRoleARN = workflow.ExampleContractFor("blue").AccessRoleARN
			conn := f.create(red)
			switch st {
			case workflow.StateDraft:
			case workflow.StateWithdrawn:
				f.transition(conn.ID, workflow.EventWithdraw, f.owner, "")
			default:
				f.transition(conn.ID, workflow.EventSubmit, f.owner, "")
				switch st {
				case workflow.StateSubmitted:
				case workflow.StateChangesRequested:
					f.transition(conn.ID, workflow.EventRequestChanges, f.admins[0], "fix it")
				case workflow.StateRejected:
					f.transition(conn.ID, workflow.EventReject, f.admins[0], "no")
				default:
					f.approve(conn.ID, f.admins[0], 1)
					if st != workflow.StateApproved {
						// The states after approval keep the approved
						// version; only the state differs.
						if _, err := f.raw.ExecContext(ctx, `UPDATE connections SET state = ? WHERE id = ?`, st, conn.ID); err != nil {
							t.Fatal(err)
						}
						f.rebuildCapacityTotals() // the row was written around apply
					}
				}
			}
			if got := f.state(conn.ID); got != st {
				t.Fatalf("fixture reached %s, want %s", got, st)
			}
			blue := f.create(workflow.ExampleContractFor("blue"))
			env := f.db.ValidationEnv(ctx, f.now, blue.ID, nil)
			if got := env.NamespaceTaken("squat"); got != holds[st] {
				t.Errorf("a %s connection holds its namespace: %v, want %v", st, got, holds[st])
			}
			if got := env.RoleTaken(red.AccessRoleARN); got != holds[st] {
				t.Errorf("a %s connection holds its role: %v, want %v", st, got, holds[st])
			}
			if got := red.ClaimConflicts(env); (len(got) > 0) != holds[st] {
				t.Errorf("claim conflicts with a %s connection: %q", st, got)
			}
		})
	}
}

// TestChangesRequestedHoldsOnlyWhatWasSubmitted: while a request is back
// with its owner, the version sent back keeps its claims, and what the
// owner's edits add claims nothing until it is resubmitted.
func TestChangesRequestedHoldsOnlyWhatWasSubmitted(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	c := contract("red", "kept", "")
	conn := f.submitted(c)
	f.transition(conn.ID, workflow.EventRequestChanges, f.admins[0], "fix it")
	edited := c
	edited.Namespaces = []string{"added"}
	edited.WorkloadRoleARN = "arn:aws:iam::111122223333:role/added-workload"
	if _, _, err := f.db.SaveContract(ctx, conn.ID, conn.CurrentVersion, edited, f.owner, f.tick()); err != nil {
		t.Fatal(err)
	}
	env := f.db.ValidationEnv(ctx, f.now, 0, nil)
	if !env.NamespaceTaken("kept") || !env.RoleTaken(c.WorkloadRoleARN) {
		t.Error("the version sent back for changes lost its claims")
	}
	if env.NamespaceTaken("added") || env.RoleTaken(edited.WorkloadRoleARN) {
		t.Error("an unsubmitted edit of a request sent back for changes claims names")
	}
	f.transition(conn.ID, workflow.EventSubmit, f.owner, "")
	env = f.db.ValidationEnv(ctx, f.now, 0, nil)
	if !env.NamespaceTaken("added") || env.NamespaceTaken("kept") || !env.RoleTaken(edited.WorkloadRoleARN) {
		t.Error("after resubmission the new version does not hold the claims alone")
	}
}

// Approve checks independence inside its transaction, against the rows as
// they are then: nobody approves a request they filed, submitted or edited
// (a version saved after the handler's check counts too).
func TestApproveIndependence(t *testing.T) {
	f := newFixture(t, 2)
	ctx := t.Context()
	a1, a2 := f.admins[0], f.admins[1]

	t.Run("submitter", func(t *testing.T) {
		conn := f.create(workflow.ExampleContract())
		f.transition(conn.ID, workflow.EventSubmit, a1, "") // a1 submits the owner's draft
		ids, err := f.db.SubmitterIDs(ctx, conn.ID)
		if err != nil || len(ids) != 1 || ids[0] != a1.ID {
			t.Fatalf("SubmitterIDs = %v, %v; want [%d]", ids, err, a1.ID)
		}
		before := f.snapshot()
		if _, _, err := f.db.Approve(ctx, conn.ID, a1, f.pin(conn.ID), "ok", workflow.ClusterFacts{}, f.tick()); !errors.Is(err, workflow.ErrNotIndependent) {
			t.Errorf("approval by the submitter: error = %v, want ErrNotIndependent", err)
		}
		f.assertUnchanged(before, "an approval by the submitter")
		if got, _, err := f.db.Approve(ctx, conn.ID, a2, f.pin(conn.ID), "ok", workflow.ClusterFacts{}, f.tick()); err != nil || got.State != workflow.StateApproved {
			t.Errorf("approval by another admin = %s, %v; want approved", got.State, err)
		}
	})

	t.Run("author of a version saved after the handler's check", func(t *testing.T) {
		conn := f.submitted(workflow.ExampleContract())
		f.transition(conn.ID, workflow.EventRequestChanges, a2, "fewer GPUs")
		c2 := workflow.ExampleContract()
		c2.Scheduling.Guaranteed[0].Count = 1
		if _, _, err := f.db.SaveContract(ctx, conn.ID, 1, c2, a1, f.tick()); err != nil {
			t.Fatal(err)
		}
		f.transition(conn.ID, workflow.EventSubmit, f.owner, "")
		before := f.snapshot()
		if _, _, err := f.db.Approve(ctx, conn.ID, a1, f.pin(conn.ID), "ok", workflow.ClusterFacts{}, f.tick()); !errors.Is(err, workflow.ErrNotIndependent) {
			t.Errorf("approval by an author: error = %v, want ErrNotIndependent", err)
		}
		f.assertUnchanged(before, "an approval by an author")
	})

	t.Run("requester", func(t *testing.T) {
		conn := f.submitted(workflow.ExampleContract())
		before := f.snapshot()
		if _, _, err := f.db.Approve(ctx, conn.ID, f.owner, f.pin(conn.ID), "ok", workflow.ClusterFacts{}, f.tick()); !errors.Is(err, workflow.ErrNotIndependent) {
			t.Errorf("approval by the requester: error = %v, want ErrNotIndependent", err)
		}
		f.assertUnchanged(before, "an approval by the requester")
	})
}
