package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// DecisionRow is an admin's approval, rejection or change request.
type DecisionRow struct {
	ID         int64
	Version    int
	Hash       string
	Kind       string // approve, reject, request_changes
	ActorID    int64
	ActorEmail string
	Reason     string
	CreatedAt  time.Time
}

// Expect pins the version (and hash) a decision was made on. Zero values
// skip the check, except in Approve, which requires all three.
type Expect struct {
	Version int
	Hash    string
	// PlanHash, on an approval, is the provisioning plan the admin saw; the
	// queued job carries it and the worker refuses to apply another plan.
	PlanHash string
	// Adopt, on an approval, is the existing namespace the admin adopted
	// explicitly (one neither the portal nor HyperPod created; the handler
	// checks the cluster), "" for none. It is recorded with the approval
	// (namespace_adoptions, and an audit event), and the version's jobs
	// carry it (workflow.Job.AdoptNamespace).
	Adopt string
}

// Transition records an owner's submit or withdraw, or an admin's
// rejection or change request (workflow.Submit, Withdraw, SendBack), with
// its audit event and, for a decision, its decision row, in one
// transaction. Approvals go through Approve, revocations through Revoke.
func (d *DB) Transition(ctx context.Context, id int64, ev workflow.Event, by workflow.Actor, reason string, expect Expect, now time.Time) (Connection, error) {
	pin := workflow.Pin{Version: expect.Version, Hash: expect.Hash}
	decision := ev == workflow.EventReject || ev == workflow.EventRequestChanges
	c, _, _, err := d.command(ctx, id, decision, now, func(_ *sql.Tx, _ Connection, s workflow.Conn) (workflow.Effect, error) {
		return workflow.PersonTransition(s, by, ev, pin, reason, now)
	})
	return c, err
}

// Approve records an admin's approval of exactly (version, hash, plan)
// (workflow.Approve, which holds every rule: the pin, independence, the
// approvals needed, capacity, claims, a plan that can be built). The facts
// it reads from the database (the version's contract, earlier approvers,
// the cluster's inventory and the capacity other connections hold, the
// namespaces and roles they claim) are read here, inside the transaction
// that records the decision, so a concurrent edit, approval or claim is
// seen. The cluster's part (cluster) the handler learned before. It
// returns the connection and how many approvals the version now has; the
// approval that completes the count also queues the provisioning job.
// Concurrent approvals serialize on the write lock: exactly one completes
// the transition, the other gets a lifecycle error or StaleError.
func (d *DB) Approve(ctx context.Context, id int64, by workflow.Actor, expect Expect, reason string, cluster workflow.ClusterFacts, now time.Time) (Connection, int, error) {
	in := workflow.ApprovalInput{Version: expect.Version, Hash: expect.Hash, PlanHash: expect.PlanHash, Reason: reason, Adopt: expect.Adopt}
	c, eff, _, err := d.command(ctx, id, true, now, func(tx *sql.Tx, cur Connection, s workflow.Conn) (workflow.Effect, error) {
		f, err := d.approvalFacts(ctx, tx, s)
		if err != nil {
			return workflow.Effect{}, err
		}
		f.ClusterFacts = cluster
		return workflow.Approve(s, by, in, f, now)
	})
	return c, eff.Approvals, err
}

// approvalFacts reads what an approval's rules need, inside its
// transaction.
func (d *DB) approvalFacts(ctx context.Context, tx *sql.Tx, s workflow.Conn) (workflow.ApprovalFacts, error) {
	var f workflow.ApprovalFacts
	v, err := getVersion(ctx, tx, s.ID, s.CurrentVersion)
	if err != nil {
		return f, err
	}
	f.Contract = v.Contract
	if s.State.Live() && s.ApprovedVersion != 0 {
		a, err := getVersion(ctx, tx, s.ID, s.ApprovedVersion)
		if err != nil {
			return f, err
		}
		f.Approved = a.Contract
	}
	if f.ApproverIDs, err = column[int64](ctx, tx, `SELECT actor_id FROM decisions WHERE connection_id = ? AND version = ? AND kind = 'approve' ORDER BY id`, s.ID, s.CurrentVersion); err != nil {
		return f, err
	}
	if len(f.ApproverIDs) > 0 {
		if f.LastApproval, err = lastApproval(ctx, tx, s.ID, s.CurrentVersion); err != nil {
			return f, err
		}
	}
	if f.Inventory, err = inventory(ctx, tx, v.Contract.ClusterName); err != nil {
		return f, err
	}
	if f.Committed, err = committedCapacity(ctx, tx, v.Contract.ClusterName, s.ID); err != nil {
		return f, err
	}
	env := validationEnv(ctx, d.dialect, tx, time.Time{}, s.ID, nil)
	f.Claims = v.Contract.ClaimConflicts(env)
	f.ChecksDown = env.Unavailable()
	return f, nil
}

// Decisions returns the admin decisions on a connection, oldest first.
func (d *DB) Decisions(ctx context.Context, id int64) ([]DecisionRow, error) {
	rows, err := d.sql.QueryContext(ctx, `
SELECT d.id, d.version, d.hash, d.kind, d.actor_id, u.email, d.reason, d.created_at
FROM decisions d JOIN users u ON u.id = d.actor_id WHERE d.connection_id = ? ORDER BY d.id`, id)
	if err != nil {
		return nil, fmt.Errorf("store: decisions: %w", err)
	}
	defer rows.Close()
	var out []DecisionRow
	for rows.Next() {
		var r DecisionRow
		var at string
		if err := rows.Scan(&r.ID, &r.Version, &r.Hash, &r.Kind, &r.ActorID, &r.ActorEmail, &r.Reason, &at); err != nil {
			return nil, fmt.Errorf("store: decisions: %w", err)
		}
		if r.CreatedAt, err = parseTime(at); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// SubmitterIDs returns every user who submitted the connection, from its
// audit events.
func (d *DB) SubmitterIDs(ctx context.Context, id int64) ([]int64, error) {
	return submitterIDs(ctx, d.sql, id)
}

func submitterIDs(ctx context.Context, q queryer, id int64) ([]int64, error) {
	return column[int64](ctx, q, `SELECT DISTINCT actor_id FROM audit_events
WHERE object_type = 'connection' AND object_id = ? AND action = 'connection.submit' AND actor_id IS NOT NULL ORDER BY actor_id`, id)
}

// LastApproval is the newest approval of a version (ErrNotFound: none).
func (d *DB) LastApproval(ctx context.Context, id int64, version int) (workflow.ApprovalMark, error) {
	return lastApproval(ctx, d.sql, id, version)
}

func lastApproval(ctx context.Context, q queryer, id int64, version int) (workflow.ApprovalMark, error) {
	var m workflow.ApprovalMark
	var at string
	err := q.QueryRowContext(ctx, `SELECT u.email, d.created_at FROM decisions d JOIN users u ON u.id = d.actor_id
WHERE d.connection_id = ? AND d.version = ? AND d.kind = 'approve' ORDER BY d.id DESC LIMIT 1`, id, version).Scan(&m.By, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return m, ErrNotFound
	}
	if err != nil {
		return m, fmt.Errorf("store: last approval: %w", err)
	}
	m.At, err = parseTime(at)
	return m, err
}

// ApproverIDs returns the admins who approved the given version.
func (d *DB) ApproverIDs(ctx context.Context, id int64, version int) ([]int64, error) {
	return column[int64](ctx, d.sql, `SELECT actor_id FROM decisions WHERE connection_id = ? AND version = ? AND kind = 'approve' ORDER BY id`, id, version)
}
