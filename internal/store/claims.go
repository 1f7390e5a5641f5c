package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// UserExists reports whether someone with this email has logged in.
func (d *DB) UserExists(ctx context.Context, email string) (bool, error) {
	return userExists(ctx, d.sql, email)
}

func userExists(ctx context.Context, q queryer, email string) (bool, error) {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM users WHERE lower(email) = lower(?)`, email).Scan(&n); err != nil {
		return false, fmt.Errorf("store: user exists: %w", err)
	}
	return n > 0, nil
}

// ValidationEnv is what contract validation needs from the database: owners
// must be portal users (or one of known, lower-case: mapped group names, demo
// users), and a namespace or role must not be held by another connection than
// exclude (otherClaimingVersions says which hold claims: never a draft). Every
// place that saves, imports or approves a contract uses it.
func (d *DB) ValidationEnv(ctx context.Context, now time.Time, exclude int64, known map[string]bool) workflow.ValidationEnv {
	return validationEnv(ctx, d.dialect, d.sql, now, exclude, known)
}

// validationEnv is ValidationEnv reading through q: the database, or the
// transaction of an approval.
func validationEnv(ctx context.Context, dl dialect, q queryer, now time.Time, exclude int64, known map[string]bool) workflow.ValidationEnv {
	var (
		rolesOnce sync.Once
		roles     map[string]bool
		rolesDown bool
		slurmOnce sync.Once
		slurmHeld map[string]bool
		slurmDown bool
		mu        sync.Mutex
		failure   error // the first lookup that could not be answered
	)
	failed := func(err error) bool {
		if err == nil {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		if failure == nil {
			failure = err
		}
		return true
	}
	return workflow.ValidationEnv{
		Now: now,
		OwnerExists: func(email string) bool {
			if known[strings.ToLower(email)] {
				return true
			}
			ok, err := userExists(ctx, q, email)
			// An outage is not a missing owner: report it through
			// Unavailable, and let the owner pass here.
			return failed(err) || ok
		},
		NamespaceTaken: func(ns string) bool {
			id, err := namespaceOwner(ctx, q, ns, exclude)
			return failed(err) || id != 0
		},
		SlurmTaken: func(cluster, what, name string) bool {
			slurmOnce.Do(func() {
				var err error
				slurmHeld, err = slurmInUse(ctx, dl, q, exclude)
				slurmDown = failed(err)
			})
			return slurmDown || slurmHeld[slurmKey(cluster, what, name)]
		},
		RoleTaken: func(arn string) bool {
			// One read of every live contract's roles per environment,
			// however many roles the contract names.
			rolesOnce.Do(func() {
				var err error
				roles, err = rolesInUse(ctx, dl, q, exclude)
				rolesDown = failed(err)
			})
			return rolesDown || roles[arn]
		},
		Unavailable: func() error {
			mu.Lock()
			defer mu.Unlock()
			if failure != nil {
				return fmt.Errorf("store: validation lookups: %w", failure)
			}
			return nil
		},
	}
}

// otherClaimingVersions selects the claiming versions (cv) of every connection
// (c) that holds claims on namespaces and roles, but the one given as the
// first argument. Only what was submitted holds a claim (issue 10 item 3):
// a draft is anyone's unchecked scratch (an owner could otherwise squat
// another team's role or namespace with an incomplete draft nobody can
// clear), so drafts and ended connections (rejected, withdrawn, revoked)
// hold nothing. The claiming versions are:
//   - submitted, approved, provisioning, revoking: the current version,
//     which is the submitted or approved one (these states cannot be
//     edited);
//   - changes_requested: the version the admin sent back (its
//     request_changes decision), which was submitted. The team keeps what
//     it had submitted while it amends the request, but what it adds in the
//     edits (drafts again) claims nothing until it is resubmitted, when
//     validation checks it against everyone else's claims;
//   - active and under_review: the approved version, and the version of
//     its change (amendment) by the same rule: submitted, approved or
//     failed to apply, the change's version; sent back, the version sent
//     back; a draft change claims nothing.
//
// The approval re-checks the claims inside its transaction.
var otherClaimingVersions = ` FROM connections c JOIN contract_versions cv ON cv.connection_id = c.id AND cv.version IN (
  CASE WHEN c.state = 'changes_requested' THEN (SELECT max(d.version) FROM decisions d WHERE d.connection_id = c.id AND d.kind = 'request_changes')
       WHEN c.state IN (` + liveStatesSQL + `) THEN c.approved_version
       ELSE c.current_version END,
  CASE WHEN c.amendment IN ('submitted', 'approved', 'failed') THEN c.current_version
       WHEN c.amendment = 'changes_requested' THEN (SELECT max(d.version) FROM decisions d WHERE d.connection_id = c.id AND d.kind = 'request_changes')
       ELSE -1 END)
WHERE c.id != ? AND c.state IN ('submitted', 'changes_requested', ` + committedStatesSQL + `)`

// rolesInUse is the set of IAM roles (project, access or workload) that the
// claiming versions of connections other than exclude name (see
// otherClaimingVersions: submitted and later, never drafts). It reads
// every live contract (a JSON scan), so ValidationEnv runs it at most once,
// when a contract is saved or approved, never on page views.
func rolesInUse(ctx context.Context, dl dialect, q queryer, exclude int64) (map[string]bool, error) {
	arns, err := column[sql.NullString](ctx, q, `WITH t AS (
SELECT `+dl.jsonText("cv.body", "project_role_arn")+` AS p, `+dl.jsonText("cv.body", "access_role_arn")+` AS a, `+dl.jsonText("cv.body", "workload_role_arn")+` AS w`+otherClaimingVersions+`
) SELECT p FROM t UNION ALL SELECT a FROM t UNION ALL SELECT w FROM t`, exclude)
	if err != nil {
		return nil, fmt.Errorf("store: roles in use: %w", err)
	}
	set := make(map[string]bool, len(arns))
	for _, a := range arns {
		if a.Valid && a.String != "" {
			set[a.String] = true
		}
	}
	return set, nil
}

// slurmKey names a Slurm account or QoS (what) on a cluster.
func slurmKey(cluster, what, name string) string { return cluster + "\x00" + what + "\x00" + name }

// slurmInUse is the set of Slurm accounts and QoS (slurmKey) that the
// claiming versions of connections other than exclude name on their
// clusters (see otherClaimingVersions), read once per ValidationEnv like
// rolesInUse.
func slurmInUse(ctx context.Context, dl dialect, q queryer, exclude int64) (map[string]bool, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+dl.jsonText("cv.body", "cluster_name")+`, `+dl.jsonText("cv.body", "slurm_scope.account")+`, `+dl.jsonText("cv.body", "slurm_scope.qos")+
		otherClaimingVersions+` AND `+dl.jsonText("cv.body", "orchestrator")+` = 'slurm'`, exclude)
	if err != nil {
		return nil, fmt.Errorf("store: Slurm accounts in use: %w", err)
	}
	defer rows.Close()
	set := map[string]bool{}
	for rows.Next() {
		var cluster, account, qos sql.NullString
		if err := rows.Scan(&cluster, &account, &qos); err != nil {
			return nil, fmt.Errorf("store: Slurm accounts in use: %w", err)
		}
		if account.String != "" {
			set[slurmKey(cluster.String, "account", account.String)] = true
		}
		if qos.String != "" {
			set[slurmKey(cluster.String, "qos", qos.String)] = true
		}
	}
	return set, rows.Err()
}
