package store

import (
	"context"
	"fmt"
	"time"

	"github.com/hyperpod-governance/portal/internal/evidence"
)

// EvidenceInput reads what a connection's evidence bundle holds
// (evidence.Build): the connection, every contract version with its
// contract, the decisions, the jobs with their steps, the reviews with
// their frozen evidence, the team's usage
// hours since the connection was created, and the connection's audit
// events up to the chain's head, which it reads first: an event appended
// while the bundle is read is not in it, and the head names the last one
// that is. Plans and cost statements are the caller's to add (the plan
// needs the cluster settings; costs, a reader who may see them:
// TeamStatementBodies). ErrNotFound when there is no such connection.
func (d *DB) EvidenceInput(ctx context.Context, connID int64, now time.Time) (evidence.Input, error) {
	var in evidence.Input
	head, err := d.AuditHead(ctx)
	if err != nil {
		return in, err
	}
	in.Head = evidence.Head{ID: head.ID, Count: head.Count, Hash: head.Hash}
	c, err := d.Connection(ctx, connID)
	if err != nil {
		return in, err
	}
	in.Connection = evidence.Connection{ID: c.ID, Team: c.Team, State: string(c.State), Amendment: string(c.Amendment),
		ClusterName: c.ClusterName, Purpose: c.Purpose, CurrentVersion: c.CurrentVersion, ApprovedVersion: c.ApprovedVersion,
		Requester: c.RequesterEmail, CreatedAt: evidence.Time(c.CreatedAt), SubmittedAt: evidence.Time(c.SubmittedAt), UpdatedAt: evidence.Time(c.UpdatedAt)}

	rows, err := d.sql.QueryContext(ctx, `SELECT `+versionCols+` WHERE cv.connection_id = ? ORDER BY cv.version`, connID)
	if err != nil {
		return in, fmt.Errorf("store: evidence: versions: %w", err)
	}
	for rows.Next() {
		v, err := scanVersion(rows)
		if err != nil {
			rows.Close()
			return in, fmt.Errorf("store: evidence: versions: %w", err)
		}
		in.Versions = append(in.Versions, evidence.VersionInput{Version: v.Version, Author: v.AuthorEmail, CreatedAt: v.CreatedAt, Hash: v.Hash, Contract: v.Contract})
	}
	if err := rows.Close(); err != nil {
		return in, fmt.Errorf("store: evidence: versions: %w", err)
	}

	decisions, err := d.Decisions(ctx, connID)
	if err != nil {
		return in, err
	}
	for _, r := range decisions {
		in.Decisions = append(in.Decisions, evidence.Decision{ID: r.ID, Version: r.Version, Hash: r.Hash, Kind: r.Kind,
			Actor: r.ActorEmail, Reason: r.Reason, At: evidence.Time(r.CreatedAt)})
	}

	jobs, err := d.JobsFor(ctx, connID)
	if err != nil {
		return in, err
	}
	for _, j := range jobs {
		steps, err := d.JobSteps(ctx, j.ID)
		if err != nil {
			return in, err
		}
		ej := evidence.Job{ID: j.ID, Kind: string(j.Kind), Version: j.Version, FromVersion: j.FromVersion, PlanHash: j.PlanHash,
			AppliedPlanHash: j.AppliedPlanHash, AdoptNamespace: j.AdoptNamespace, State: string(j.State), Attempts: j.Attempts,
			DryRun: j.DryRun, LastError: j.LastError, CreatedAt: evidence.Time(j.CreatedAt), UpdatedAt: evidence.Time(j.UpdatedAt)}
		for _, s := range steps {
			ej.Steps = append(ej.Steps, evidence.Step{Seq: s.Seq, Name: s.Name, State: string(s.State), Outcome: s.Outcome,
				Detail: s.Detail, Attempts: s.Attempts, StartedAt: evidence.Time(s.StartedAt), FinishedAt: evidence.Time(s.FinishedAt)})
		}
		in.Jobs = append(in.Jobs, ej)
	}

	reviews, err := d.ReviewsOf(ctx, connID)
	if err != nil {
		return in, err
	}
	for _, r := range reviews {
		in.Reviews = append(in.Reviews, evidence.Review{ID: r.ID, Version: r.Version, Trigger: string(r.Trigger), Detail: r.Detail,
			MoreTriggers: r.MoreTriggers, DueOn: r.DueOn, OpenedAt: evidence.Time(r.OpenedAt), Demo: r.Demo, Evidence: string(r.Evidence),
			EvidenceHash: r.EvidenceHash, Decision: string(r.Decision), Reason: r.Reason, Deadline: r.Deadline, DecidedBy: r.DecidedByEmail,
			DecidedAt: evidence.Time(r.DecidedAt)})
	}

	if in.Exceptions, err = d.Exceptions(ctx, connID); err != nil {
		return in, err
	}

	hours, err := d.UsageHours(ctx, UsageFilter{Team: c.Team, From: c.CreatedAt.UTC().Truncate(time.Hour), To: now})
	if err != nil {
		return in, err
	}
	for _, h := range hours {
		in.Usage = append(in.Usage, evidence.UsageHour{Start: h.Start, InstanceType: h.InstanceType,
			GuaranteedAccelSeconds: h.GuaranteedAccelSeconds, BorrowedAccelSeconds: h.BorrowedAccelSeconds})
	}

	if head.ID > 0 {
		err = d.EachAuditEvent(ctx, AuditFilter{ObjectType: "connection", ObjectID: connID}, head.ID+1, func(e AuditEvent) error {
			in.Events = append(in.Events, evidence.Event{ID: e.ID, At: evidence.AuditTime(e.At), ActorID: e.ActorID, Actor: e.Actor,
				Action: e.Action, ObjectType: e.ObjectType, ObjectID: e.ObjectID, Team: e.Team, Version: e.Version, Reason: e.Reason,
				PrevHash: e.PrevHash, Hash: e.Hash})
			return nil
		})
		if err != nil {
			return in, err
		}
	}
	return in, nil
}

// TeamStatementBodies returns a team's frozen cost statements of the months
// from since's month on, each with its body exactly as frozen and the hash
// recorded for it, oldest first. Callers scope it to readers who may see
// the team's costs (workflow.ActionViewCosts).
func (d *DB) TeamStatementBodies(ctx context.Context, team string, since time.Time) ([]evidence.Statement, error) {
	rows, err := d.sql.QueryContext(ctx, `SELECT month, hash, body FROM cost_statements WHERE team = ? AND month >= ? ORDER BY month`,
		team, since.UTC().Format("2006-01"))
	if err != nil {
		return nil, fmt.Errorf("store: statements of %s: %w", team, err)
	}
	defer rows.Close()
	var out []evidence.Statement
	for rows.Next() {
		var s evidence.Statement
		if err := rows.Scan(&s.Month, &s.Hash, &s.Body); err != nil {
			return nil, fmt.Errorf("store: statements of %s: %w", team, err)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
