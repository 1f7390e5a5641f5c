package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// CostPolicyVersion is one version of the shared-cost policy: what finance
// chose, who, when and why. Versions are append-only.
type CostPolicyVersion struct {
	Version  int
	Policy   usage.Policy
	ChosenBy string
	ChosenAt time.Time
	Reason   string
}

// DefaultCostPolicy is in force until finance first chooses one: idle
// capacity and overhead stay platform cost, so that nobody is charged for
// what finance has not decided.
var DefaultCostPolicy = usage.Policy{Method: usage.SplitUnallocated}

// ErrReasonRequired is returned when a policy change carries no reason.
var ErrReasonRequired = errors.New("a reason is required")

// ErrPolicyChanged is returned when the policy in force is no longer the
// version the choice was made against: someone saved another meanwhile.
var ErrPolicyChanged = errors.New("the shared-cost policy changed meanwhile")

// SetCostPolicy records a new version of the shared-cost policy and its
// audit event (cost.policy) in one transaction. basedOn is the version in
// force when finance chose (0: the default); it is checked inside the
// transaction, so of two choices made against the same version only the
// first is recorded and the second gets ErrPolicyChanged.
func (d *DB) SetCostPolicy(ctx context.Context, basedOn int, p usage.Policy, reason string, by workflow.Actor, now time.Time) (CostPolicyVersion, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return CostPolicyVersion{}, ErrReasonRequired
	}
	if err := p.Validate(); err != nil {
		return CostPolicyVersion{}, err
	}
	v := CostPolicyVersion{Policy: p, ChosenBy: by.Email, ChosenAt: now.UTC(), Reason: reason}
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) + 1 FROM cost_policies`).Scan(&v.Version); err != nil {
			return fmt.Errorf("store: set cost policy: %w", err)
		}
		if current := v.Version - 1; current != basedOn {
			return fmt.Errorf("%w: version %d is in force, the choice was made against version %d", ErrPolicyChanged, current, basedOn)
		}
		if _, err := tx.ExecContext(ctx, `
INSERT INTO cost_policies (version, method, overhead_bp, chosen_by_id, chosen_by, chosen_at, reason) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			v.Version, string(p.Method), p.OverheadBasisPoints, nullID(by.ID), by.Email, fmtTime(now), reason); err != nil {
			return fmt.Errorf("store: set cost policy: %w", err)
		}
		return appendAudit(ctx, tx, AuditEvent{At: now, ActorID: by.ID, Actor: by.Email, Action: "cost.policy",
			ObjectType: "cost_policy", ObjectID: int64(v.Version), Version: v.Version,
			Reason: fmt.Sprintf("%s, overhead %s%%: %s", p.Method, usage.FormatOverhead(p.OverheadBasisPoints), reason)})
	})
	if err != nil {
		return CostPolicyVersion{}, err
	}
	return v, nil
}

// CostPolicy is the policy in force: the latest version, or
// DefaultCostPolicy as version 0 when none was chosen.
func (d *DB) CostPolicy(ctx context.Context) (CostPolicyVersion, error) {
	vs, err := d.costPolicies(ctx, 1)
	if err != nil || len(vs) == 0 {
		return CostPolicyVersion{Policy: DefaultCostPolicy}, err
	}
	return vs[0], nil
}

// CostPolicies lists the versions, newest first, at most limit.
func (d *DB) CostPolicies(ctx context.Context, limit int) ([]CostPolicyVersion, error) {
	return d.costPolicies(ctx, limit)
}

func (d *DB) costPolicies(ctx context.Context, limit int) ([]CostPolicyVersion, error) {
	rows, err := d.sql.QueryContext(ctx, `
SELECT version, method, overhead_bp, chosen_by, chosen_at, reason FROM cost_policies ORDER BY version DESC LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("store: cost policies: %w", err)
	}
	defer rows.Close()
	var out []CostPolicyVersion
	for rows.Next() {
		var v CostPolicyVersion
		var method, at string
		if err := rows.Scan(&v.Version, &method, &v.Policy.OverheadBasisPoints, &v.ChosenBy, &at, &v.Reason); err != nil {
			return nil, fmt.Errorf("store: cost policies: %w", err)
		}
		v.Policy.Method = usage.Method(method)
		if v.ChosenAt, err = parseTime(at); err != nil {
			return nil, fmt.Errorf("store: cost policies: %w", err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// CostInputVersion is the version of everything a chargeback of the month
// to date is computed from (usage rows, capacity rows, missing periods,
// guarantees, cost policy): triggers bump it in the transaction that
// changes any of them (migrations/00022). Read it before the inputs: a
// result computed after reading version v then reflects at least v.
func (d *DB) CostInputVersion(ctx context.Context) (int64, error) {
	var v int64
	if err := d.sql.QueryRowContext(ctx, `SELECT version FROM cost_input_version WHERE id = 1`).Scan(&v); err != nil {
		return 0, fmt.Errorf("store: cost input version: %w", err)
	}
	return v, nil
}
