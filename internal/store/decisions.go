package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
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

// ErrAlreadyDecided: this admin already approved this version.
var ErrAlreadyDecided = errors.New("store: you already approved this version")

// ErrUnpinned refuses an approval that does not name the version, the
// contract hash and the plan hash it approves.
var ErrUnpinned = errors.New("store: an approval must name the version, the contract hash and the plan hash it approves")

// ErrNotIndependent refuses a decision (approval, rejection, change
// request) by the requester, by an author of any version or by someone who
// submitted the request.
var ErrNotIndependent = errors.New("store: nobody decides on a request they filed, submitted or edited")

func checkIndependent(ctx context.Context, tx *sql.Tx, cur Connection, by Actor) error {
	if by.ID == cur.RequesterID {
		return ErrNotIndependent
	}
	editors, err := column[int64](ctx, tx, `SELECT DISTINCT author_id FROM contract_versions WHERE connection_id = ?`, cur.ID)
	if err != nil {
		return err
	}
	submitters, err := submitterIDs(ctx, tx, cur.ID)
	if err != nil {
		return err
	}
	if slices.Contains(editors, by.ID) || slices.Contains(submitters, by.ID) {
		return ErrNotIndependent
	}
	return nil
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

func checkExpect(ctx context.Context, tx *sql.Tx, cur Connection, e Expect) error {
	if e.Version == 0 {
		return nil
	}
	h, err := versionHash(ctx, tx, cur.ID, cur.CurrentVersion)
	if err != nil {
		return err
	}
	if cur.CurrentVersion != e.Version || (e.Hash != "" && h != e.Hash) {
		return &StaleError{WantVersion: e.Version, WantHash: e.Hash, Current: cur, CurrentHash: h}
	}
	return nil
}

var eventAction = map[workflow.Event]string{
	workflow.EventSubmit:         "connection.submit",
	workflow.EventWithdraw:       "connection.withdraw",
	workflow.EventRequestChanges: "connection.request_changes",
	workflow.EventReject:         "connection.reject",
	workflow.EventApprove:        "connection.approve",
	workflow.EventRevoke:         "connection.revoke",
}

var eventDecision = map[workflow.Event]string{
	workflow.EventRequestChanges: "request_changes",
	workflow.EventReject:         "reject",
}

// Transition applies a lifecycle event (not approval: see Approve) with its
// audit event, and for admin decisions the decision row, in one
// transaction.
func (d *DB) Transition(ctx context.Context, id int64, ev workflow.Event, by Actor, reason string, expect Expect, now time.Time) (Connection, error) {
	if ev == workflow.EventApprove {
		return Connection{}, errors.New("store: use Approve for approvals")
	}
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		cur, err := getConn(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := checkExpect(ctx, tx, cur, expect); err != nil {
			return err
		}
		next, err := workflow.Transition(cur.State, ev, now)
		if err != nil {
			return err
		}
		// A decision (rejection, change request) comes from someone
		// independent of the request, as the workflow's policy says: checked
		// again here, against the rows as they are now, because the
		// handler's check ran before this transaction.
		if _, ok := eventDecision[ev]; ok {
			if err := checkIndependent(ctx, tx, cur, by); err != nil {
				return err
			}
		}
		set := `state = ?, updated_at = ?`
		args := []any{next, fmtTime(now)}
		if ev == workflow.EventSubmit {
			set += `, submitted_at = ?`
			args = append(args, fmtTime(now))
		}
		args = append(args, id)
		if _, err := tx.ExecContext(ctx, `UPDATE connections SET `+set+` WHERE id = ?`, args...); err != nil {
			return fmt.Errorf("store: transition: %w", err)
		}
		if kind, ok := eventDecision[ev]; ok {
			h, err := versionHash(ctx, tx, id, cur.CurrentVersion)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO decisions (connection_id, version, hash, kind, actor_id, reason, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
				id, cur.CurrentVersion, h, kind, by.ID, reason, fmtTime(now)); err != nil {
				return fmt.Errorf("store: decision: %w", err)
			}
		}
		action := eventAction[ev]
		if action == "" {
			action = "connection." + string(ev)
		}
		return appendAudit(ctx, tx, AuditEvent{At: now, ActorID: by.ID, Actor: by.Email, Action: action,
			ObjectType: "connection", ObjectID: id, Team: cur.Team, Version: cur.CurrentVersion, Reason: reason})
	})
	if err != nil {
		return Connection{}, err
	}
	return d.Connection(ctx, id)
}

// CapacityCheck is called inside the approval transaction with the cluster's
// inventory and the guaranteed capacity already committed by other
// connections; returning an error refuses the approval.
type CapacityCheck func(inventory map[string]int, committed []workflow.Capacity) error

// Approve records an admin's approval of exactly (version, hash). When the
// contract needs more approvals (restricted data: two distinct admins; needed
// is raised to what the version itself requires, read inside the
// transaction) the connection stays submitted; the approval that completes the count moves it
// to approved. It returns the connection and how many approvals the version
// now has. The approval that completes the count also queues the
// provisioning job, in the same transaction. Concurrent approvals serialize
// on the write lock: exactly one completes the transition, the other gets a
// lifecycle error or StaleError.
func (d *DB) Approve(ctx context.Context, id int64, by Actor, expect Expect, reason string, needed int, check CapacityCheck, now time.Time) (Connection, int, error) {
	var count int
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		// An approval names exactly what it approves: without the version,
		// the contract hash and the plan hash it would approve whatever is
		// current and queue an unpinned job.
		if expect.Version == 0 || expect.Hash == "" || expect.PlanHash == "" {
			return ErrUnpinned
		}
		cur, err := getConn(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := checkExpect(ctx, tx, cur, expect); err != nil {
			return err
		}
		next, err := workflow.Transition(cur.State, workflow.EventApprove, now)
		if err != nil {
			return err
		}
		// Independence, against the rows as they are now: the handler's
		// check ran before this transaction, and the request may have been
		// edited or resubmitted since.
		if err := checkIndependent(ctx, tx, cur, by); err != nil {
			return err
		}
		v, err := getVersion(ctx, tx, id, cur.CurrentVersion)
		if err != nil {
			return err
		}
		// How many distinct admins must approve is a property of the
		// version approved (restricted data: two), read here rather than
		// trusted from the caller, which looked before this transaction.
		needed = max(needed, workflow.ApprovalsNeeded(v.Contract.DataClassification))
		if check != nil {
			inv, err := inventory(ctx, tx, v.Contract.ClusterName)
			if err != nil {
				return err
			}
			committed, err := committedCapacity(ctx, tx, v.Contract.ClusterName, id)
			if err != nil {
				return err
			}
			if err := check(inv, committed); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO decisions (connection_id, version, hash, kind, actor_id, reason, created_at) VALUES (?, ?, ?, 'approve', ?, ?, ?)`,
			id, v.Version, v.Hash, by.ID, reason, fmtTime(now)); err != nil {
			if strings.Contains(err.Error(), "UNIQUE") {
				return ErrAlreadyDecided
			}
			return fmt.Errorf("store: approve: %w", err)
		}
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM decisions WHERE connection_id = ? AND version = ? AND kind = 'approve'`, id, v.Version).Scan(&count); err != nil {
			return fmt.Errorf("store: approve: %w", err)
		}
		if expect.Adopt != "" {
			if !slices.Contains(v.Contract.Namespaces, expect.Adopt) {
				return fmt.Errorf("store: approve: the contract does not name namespace %q, which the approval adopts", expect.Adopt)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO namespace_adoptions (connection_id, version, namespace, actor_id, created_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (connection_id, version) DO NOTHING`, id, v.Version, expect.Adopt, by.ID, fmtTime(now)); err != nil {
				return fmt.Errorf("store: approve: adoption: %w", err)
			}
			if err := appendAudit(ctx, tx, AuditEvent{At: now, ActorID: by.ID, Actor: by.Email, Action: "connection.adopt_namespace",
				ObjectType: "connection", ObjectID: id, Team: cur.Team, Version: v.Version,
				Reason: "adopted the existing namespace " + expect.Adopt + ", which neither the portal nor HyperPod created: the portal may take it over"}); err != nil {
				return err
			}
		}
		action := "connection.approve_partial"
		if count >= needed {
			action = "connection.approve"
			if _, err := tx.ExecContext(ctx, `UPDATE connections SET state = ?, approved_version = ?, updated_at = ? WHERE id = ?`,
				next, v.Version, fmtTime(now), id); err != nil {
				return fmt.Errorf("store: approve: %w", err)
			}
			// The approval and its provisioning job commit together. The
			// plan hash is the one the approver saw; the worker checks it.
			// A provisioning job is never queued unpinned.
			if expect.PlanHash == "" {
				return ErrUnpinned
			}
			if _, err := enqueueJob(ctx, tx, id, workflow.JobProvision, v.Version, expect.PlanHash, now); err != nil {
				return fmt.Errorf("store: approve: %w", err)
			}
		}
		return appendAudit(ctx, tx, AuditEvent{At: now, ActorID: by.ID, Actor: by.Email, Action: action,
			ObjectType: "connection", ObjectID: id, Team: cur.Team, Version: v.Version, Reason: reason})
	})
	if err != nil {
		return Connection{}, 0, err
	}
	c, err := d.Connection(ctx, id)
	return c, count, err
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

// ApproverIDs returns the admins who approved the given version.
func (d *DB) ApproverIDs(ctx context.Context, id int64, version int) ([]int64, error) {
	return column[int64](ctx, d.sql, `SELECT actor_id FROM decisions WHERE connection_id = ? AND version = ? AND kind = 'approve' ORDER BY id`, id, version)
}
