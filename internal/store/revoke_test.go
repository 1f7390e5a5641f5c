package store_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// runJob claims the next job as owner and runs it through every step: the
// connection's objects "exist" afterwards unless dryRun.
func (f *fixture) runJob(owner string, dryRun bool, steps ...string) workflow.Job {
	f.t.Helper()
	ctx := f.t.Context()
	j := f.claim(owner)
	if err := f.db.StartJob(ctx, j.ID, owner, "plan-"+string(j.Kind), steps, dryRun, f.tick()); err != nil {
		f.t.Fatalf("StartJob(%d): %v", j.ID, err)
	}
	for seq, name := range steps {
		if err := f.db.StepStarted(ctx, j.ID, owner, seq, name, f.tick()); err != nil {
			f.t.Fatal(err)
		}
		if err := f.db.StepFinished(ctx, j.ID, owner, seq, name, "done", "", f.tick()); err != nil {
			f.t.Fatal(err)
		}
	}
	if err := f.db.CompleteJob(ctx, j.ID, owner, f.tick()); err != nil {
		f.t.Fatalf("CompleteJob(%d): %v", j.ID, err)
	}
	return f.job(j.ID)
}

// active approves a connection for team and provisions it for real.
func (f *fixture) active(team string) store.Connection {
	f.t.Helper()
	conn, _ := f.approved(team)
	f.runJob("provisioner", false, "Namespace x", "RoleBinding x/b")
	if s := f.state(conn.ID); s != workflow.StateActive {
		f.t.Fatalf("connection %s after provisioning, want active", s)
	}
	return conn
}

func (f *fixture) revoke(id int64, reason string) (store.Connection, workflow.Job) {
	f.t.Helper()
	c, j, err := f.db.Revoke(f.t.Context(), id, f.admins[0], reason, f.tick())
	if err != nil {
		f.t.Fatalf("Revoke(%d): %v", id, err)
	}
	return c, j
}

func TestRevokeRefusals(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	draft := f.create(contract("red", "hyperpod-ns-red", ""))
	submitted := f.submitted(contract("blue", "hyperpod-ns-blue", ""))
	approved, _ := f.approved("green")
	for _, tc := range []struct {
		name   string
		id     int64
		reason string
		is     func(error) bool
	}{
		{"a draft", draft.ID, "no", func(err error) bool { var te *workflow.TransitionError; return errors.As(err, &te) }},
		{"a submitted request", submitted.ID, "no", func(err error) bool { var te *workflow.TransitionError; return errors.As(err, &te) }},
		{"without a reason", approved.ID, "  \n", func(err error) bool { return errors.Is(err, workflow.ErrReasonRequired) }},
		{"a missing connection", 999, "no", func(err error) bool { return errors.Is(err, store.ErrNotFound) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.snapshot()
			jobsBefore := f.jobs(approved.ID)
			_, _, err := f.db.Revoke(ctx, tc.id, f.admins[0], tc.reason, f.tick())
			if !tc.is(err) {
				t.Errorf("Revoke = %v, want the refusal", err)
			}
			f.assertUnchanged(before, "a refused revocation")
			if got := f.jobs(approved.ID); !slices.EqualFunc(got, jobsBefore, func(a, b workflow.Job) bool { return a.State == b.State }) {
				t.Errorf("jobs changed: %+v", got)
			}
		})
	}
	if n := len(f.jobs(draft.ID)) + len(f.jobs(submitted.ID)); n != 0 {
		t.Errorf("%d jobs queued for unapproved requests", n)
	}
}

func TestRevokeWritesStateAuditAndJobTogether(t *testing.T) {

	t.Run("an active connection", func(t *testing.T) {
		f, ctx := newFixture(t, 1), t.Context()
		conn := f.active("red")
		at := f.now.Add(time.Second)
		c, j := f.revoke(conn.ID, "  end of project  ")
		if c.State != workflow.StateRevoking {
			t.Errorf("state %s, want revoking", c.State)
		}
		if j.Kind != workflow.JobRevoke || j.State != workflow.JobQueued || j.Version != c.ApprovedVersion || !j.NotBefore.Equal(at) || j.PlanHash != "" {
			t.Errorf("job = %+v, want a revoke job of version %d due now", j, c.ApprovedVersion)
		}
		acts := f.auditActions(conn.ID)
		if acts[len(acts)-1] != "connection.revoke" {
			t.Errorf("audit = %v, want connection.revoke last", acts)
		}
		evs, _ := f.db.AuditEvents(ctx, store.AuditFilter{ObjectType: "connection", ObjectID: conn.ID}, 0, 1)
		if e := evs[0]; e.Reason != "end of project" || e.ActorID != f.admins[0].ID || e.Version != c.ApprovedVersion {
			t.Errorf("revoke event = %+v, want the admin's trimmed reason", e)
		}
		if _, _, err := f.db.Revoke(ctx, conn.ID, f.admins[0], "again", f.tick()); err == nil {
			t.Error("a second Revoke of a revoking connection succeeded")
		}
	})

	t.Run("a queued provisioning job is cancelled", func(t *testing.T) {
		f := newFixture(t, 1)
		conn, pj := f.approved("blue")
		_, j := f.revoke(conn.ID, "not needed after all")
		if got := f.job(pj.ID); got.State != workflow.JobFailed || !strings.Contains(got.LastError, "being revoked") {
			t.Errorf("provision job = %+v, want failed as cancelled", got)
		}
		if !j.NotBefore.Equal(f.now) {
			t.Errorf("revoke job due %s, want now (%s): nothing was running", j.NotBefore, f.now)
		}
		want := []string{"connection.create", "connection.submit", "connection.approve", "connection.revoke", "provisioning.cancelled"}
		if got := f.auditActions(conn.ID); !slices.Equal(got, want) {
			t.Errorf("audit = %v, want %v", got, want)
		}
		// The only job left to claim is the revocation.
		if got := f.claim("w"); got.ID != j.ID {
			t.Errorf("claimed job %d, want the revoke job %d", got.ID, j.ID)
		}
		f.verifyAudit()
	})

	t.Run("a running provisioning job loses its lease; the revocation waits for it to expire", func(t *testing.T) {
		f, ctx := newFixture(t, 1), t.Context()
		conn, pj := f.approved("green")
		f.claim("slow")
		if err := f.db.StartJob(ctx, pj.ID, "slow", "p", []string{"Namespace x"}, false, f.tick()); err != nil {
			t.Fatal(err)
		}
		leaseUntil := f.job(pj.ID).LeaseUntil
		_, j := f.revoke(conn.ID, "security incident")
		if !j.NotBefore.Equal(leaseUntil) {
			t.Errorf("revoke job due %s, want when the provisioning lease expires (%s)", j.NotBefore, leaseUntil)
		}
		if err := f.db.StepStarted(ctx, pj.ID, "slow", 0, "Namespace x", f.tick()); !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("the provisioning worker's next write = %v, want ErrLeaseLost", err)
		}
		if _, ok, _ := f.db.ClaimJob(ctx, "w", leaseUntil.Add(-time.Nanosecond), lease); ok {
			t.Error("the revoke job was claimed while the cancelled job's lease still held")
		}
		if got, ok, err := f.db.ClaimJob(ctx, "w", leaseUntil, lease); !ok || err != nil || got.ID != j.ID {
			t.Errorf("claim at the lease's expiry = %+v, %v, %v; want the revoke job", got, ok, err)
		}
	})

	t.Run("nothing is written when the job cannot be queued", func(t *testing.T) {
		f, ctx := newFixture(t, 1), t.Context()
		conn, pj := f.approved("yellow")
		// A planted open revoke job makes the revocation's own collide.
		if err := f.db.ExecForTest(ctx, fmt.Sprintf(`INSERT INTO jobs (connection_id, kind, version, state, not_before, created_at, updated_at)
VALUES (%d, 'revoke', 1, 'queued', '2025-03-01T09:00:00.000000000Z', '2025-03-01T09:00:00.000000000Z', '2025-03-01T09:00:00.000000000Z')`, conn.ID)); err != nil {
			t.Fatal(err)
		}
		before := f.snapshot()
		if _, _, err := f.db.Revoke(ctx, conn.ID, f.admins[0], "x", f.tick()); !errors.Is(err, store.ErrJobOpen) {
			t.Errorf("Revoke = %v, want ErrJobOpen", err)
		}
		f.assertUnchanged(before, "a revocation whose job could not be queued")
		if got := f.job(pj.ID); got.State != workflow.JobQueued {
			t.Errorf("provision job %s, want still queued: its cancellation rolled back too", got.State)
		}
	})
}

func TestRevokeJobCompletionAndFailure(t *testing.T) {
	steps := []string{"delete RoleBinding x/b", "delete Namespace x"}

	t.Run("completion moves revoking to revoked", func(t *testing.T) {
		f := newFixture(t, 1)
		conn := f.active("red")
		f.revoke(conn.ID, "end of project")
		j := f.runJob("w", false, steps...)
		if j.State != workflow.JobSucceeded || j.Kind != workflow.JobRevoke {
			t.Errorf("job = %+v, want a succeeded revoke job", j)
		}
		if s := f.state(conn.ID); s != workflow.StateRevoked {
			t.Errorf("connection %s, want revoked", s)
		}
		want := []string{"connection.create", "connection.submit", "connection.approve", "provisioning.start", "provisioning.succeeded",
			"connection.revoke", "revocation.start", "revocation.done"}
		if got := f.auditActions(conn.ID); !slices.Equal(got, want) {
			t.Errorf("audit = %v, want %v", got, want)
		}
		f.verifyAudit()
	})

	t.Run("failure leaves it revoking, and it can be queued again", func(t *testing.T) {
		f, ctx := newFixture(t, 1), t.Context()
		conn := f.active("blue")
		_, rj := f.revoke(conn.ID, "end of project")
		f.claim("w")
		if err := f.db.StartJob(ctx, rj.ID, "w", "p", steps, false, f.tick()); err != nil {
			t.Fatal(err)
		}
		if err := f.db.CompleteJob(ctx, rj.ID, "w", f.tick()); !errors.Is(err, store.ErrStepsNotDone) {
			t.Errorf("CompleteJob with no step done = %v, want ErrStepsNotDone", err)
		}
		if err := f.db.FailJob(ctx, rj.ID, "w", "delete RoleBinding x/b: forbidden", f.tick()); err != nil {
			t.Fatal(err)
		}
		if s := f.state(conn.ID); s != workflow.StateRevoking {
			t.Errorf("connection %s after a failed revocation, want revoking", s)
		}
		if j := f.job(rj.ID); j.State != workflow.JobFailed || j.LastError != "delete RoleBinding x/b: forbidden" {
			t.Errorf("job = %+v, want failed with the error", j)
		}
		acts := f.auditActions(conn.ID)
		if last := acts[len(acts)-1]; last != "revocation.failed" {
			t.Errorf("audit = %v, want revocation.failed last", acts)
		}

		again, err := f.db.EnqueueRevocation(ctx, conn.ID, f.admins[0], "retry after fixing RBAC", f.tick())
		if err != nil || again.Kind != workflow.JobRevoke || again.State != workflow.JobQueued {
			t.Fatalf("EnqueueRevocation = %+v, %v", again, err)
		}
		if _, err := f.db.EnqueueRevocation(ctx, conn.ID, f.admins[0], "twice", f.tick()); !errors.Is(err, store.ErrJobOpen) {
			t.Errorf("second EnqueueRevocation = %v, want ErrJobOpen", err)
		}
		f.runJob("w", false, steps...)
		if s := f.state(conn.ID); s != workflow.StateRevoked {
			t.Errorf("connection %s after the retry, want revoked", s)
		}
		f.verifyAudit()
	})

	t.Run("EnqueueRevocation needs a revoking connection", func(t *testing.T) {
		f, ctx := newFixture(t, 1), t.Context()
		conn := f.active("green")
		var te *workflow.TransitionError
		if _, err := f.db.EnqueueRevocation(ctx, conn.ID, f.admins[0], "x", f.tick()); !errors.As(err, &te) {
			t.Errorf("EnqueueRevocation of an active connection = %v, want a TransitionError", err)
		}
	})

	t.Run("a revoke job of a connection that is not revoking is refused", func(t *testing.T) {
		f, ctx := newFixture(t, 1), t.Context()
		conn := f.active("yellow")
		_, rj := f.revoke(conn.ID, "x")
		if err := f.db.ExecForTest(ctx, fmt.Sprintf(`UPDATE connections SET state = 'active' WHERE id = %d`, conn.ID)); err != nil {
			t.Fatal(err)
		}
		f.claim("w")
		var te *workflow.TransitionError
		if err := f.db.StartJob(ctx, rj.ID, "w", "p", steps, false, f.tick()); !errors.As(err, &te) {
			t.Errorf("StartJob = %v, want a TransitionError", err)
		}
		if len(f.steps(rj.ID)) != 0 {
			t.Error("a refused StartJob recorded steps")
		}
	})
}

func TestRevokeDryRun(t *testing.T) {

	t.Run("never applied: revoked", func(t *testing.T) {
		f := newFixture(t, 1)
		conn, _ := f.approved("red")
		f.runJob("w", true, "Namespace x") // a dry-run provisioning: stays approved
		f.revoke(conn.ID, "x")
		j := f.runJob("w", true, "delete Namespace x")
		if !j.DryRun || j.State != workflow.JobSucceeded {
			t.Errorf("job = %+v", j)
		}
		if s := f.state(conn.ID); s != workflow.StateRevoked {
			t.Errorf("connection %s, want revoked: nothing was ever applied", s)
		}
		if acts := f.auditActions(conn.ID); acts[len(acts)-1] != "revocation.dry_run" {
			t.Errorf("audit = %v, want revocation.dry_run last", acts)
		}
	})

	t.Run("applied for real: stays revoking", func(t *testing.T) {
		f := newFixture(t, 1)
		conn := f.active("blue")
		f.revoke(conn.ID, "x")
		f.runJob("w", true, "delete Namespace x")
		if s := f.state(conn.ID); s != workflow.StateRevoking {
			t.Errorf("connection %s, want revoking: a dry run removed nothing that was applied", s)
		}
		evs, _ := f.db.AuditEvents(t.Context(), store.AuditFilter{ObjectType: "connection", ObjectID: conn.ID}, 0, 1)
		if e := evs[0]; e.Action != "revocation.dry_run" || !strings.Contains(e.Reason, "stays revoking") {
			t.Errorf("last event = %s %q", e.Action, e.Reason)
		}
		f.verifyAudit()
	})
}
