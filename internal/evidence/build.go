package evidence

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Input is what the store read for one connection (store.DB.EvidenceInput)
// plus what the web layer adds (plan texts, cost statements if the exporter
// may read costs). Build turns it into a Bundle.
type Input struct {
	Connection Connection
	Versions   []VersionInput
	Decisions  []Decision
	Jobs       []Job
	Reviews    []Review
	// Exceptions are the connection's exceptions with an expiry.
	Exceptions []workflow.Exception
	// Usage are the team's hourly rows since the connection was created.
	Usage []UsageHour
	// Statements are the team's frozen cost statements; CostsOmitted,
	// when set, says why there are none.
	Statements   []Statement
	CostsOmitted string
	// AuditOmitted says which of the connection's events were left out
	// and why ("" for none); the audit scope carries it.
	AuditOmitted string
	// Events are the connection's audit events, in any order; Head is the
	// chain's head read before them (no event is newer than it).
	Events []Event
	Head   Head
	// Plans are the plans of the jobs' versions, rebuilt at export by
	// whoever can (the web layer, with the cluster settings).
	Plans []Plan
}

// VersionInput is a stored contract version.
type VersionInput struct {
	Version   int
	Author    string
	CreatedAt time.Time
	Hash      string
	Contract  workflow.Contract
}

// UsageHour is one collected hour of one instance type, reduced to what the
// summary needs.
type UsageHour struct {
	Start                  time.Time
	InstanceType           string
	GuaranteedAccelSeconds int64
	BorrowedAccelSeconds   int64
}

// Build makes the bundle: every list in a fixed order (versions, decisions,
// jobs, events and reviews by number; usage by month and type), the limits,
// and the bundle hash.
func Build(in Input, by string, now time.Time) (Bundle, error) {
	b := Bundle{
		Format:        Format,
		FormatVersion: FormatVersion,
		GeneratedAt:   ts(now),
		GeneratedBy:   by,
		Connection:    in.Connection,
		Versions:      []Version{},
		Decisions:     slices.Clone(in.Decisions),
		Plans:         slices.Clone(in.Plans),
		Jobs:          slices.Clone(in.Jobs),
		Reviews:       slices.Clone(in.Reviews),
		Usage: Usage{Note: "The team's allocated accelerator-seconds by month and instance type, from the connection's creation to the export, as collected; usage is metered per team, not per connection.",
			Months: usageMonths(in.Usage)},
		Costs: Costs{Omitted: in.CostsOmitted, Statements: slices.Clone(in.Statements)},
		Audit: Audit{Scope: strings.TrimSpace(fmt.Sprintf("The audit events about connection %d (object_type connection, object_id %d), oldest first, up to the chain head at export. %s",
			in.Connection.ID, in.Connection.ID, in.AuditOmitted)), Events: slices.Clone(in.Events), Head: in.Head},
		Limits: slices.Clone(Limits),
	}
	for _, v := range in.Versions {
		b.Versions = append(b.Versions, Version{Version: v.Version, Author: v.Author, CreatedAt: ts(v.CreatedAt), Hash: v.Hash,
			Contract: json.RawMessage(v.Contract.Canonical())})
	}
	for _, x := range in.Exceptions {
		b.Exceptions = append(b.Exceptions, Exception{ID: x.ID, PriorityClass: x.PriorityClass, Reason: x.Reason, GrantedBy: x.GrantedBy,
			Start: ts(x.Start), End: ts(x.End), State: string(x.State), AppliedAt: ts(x.AppliedAt), RevokedBy: x.RevokedBy,
			RevokeReason: x.RevokeReason, EndedAt: ts(x.EndedAt), RevertedAt: ts(x.RevertedAt)})
	}
	slices.SortFunc(b.Exceptions, func(x, y Exception) int { return cmp.Compare(x.ID, y.ID) })
	slices.SortFunc(b.Versions, func(x, y Version) int { return cmp.Compare(x.Version, y.Version) })
	slices.SortFunc(b.Decisions, func(x, y Decision) int { return cmp.Compare(x.ID, y.ID) })
	slices.SortFunc(b.Plans, func(x, y Plan) int { return cmp.Or(cmp.Compare(x.Version, y.Version), cmp.Compare(x.Hash, y.Hash)) })
	slices.SortFunc(b.Jobs, func(x, y Job) int { return cmp.Compare(x.ID, y.ID) })
	slices.SortFunc(b.Reviews, func(x, y Review) int { return cmp.Compare(x.ID, y.ID) })
	slices.SortFunc(b.Costs.Statements, func(x, y Statement) int { return cmp.Compare(x.Month, y.Month) })
	slices.SortFunc(b.Audit.Events, func(x, y Event) int { return cmp.Compare(x.ID, y.ID) })
	// Empty lists are written as [] rather than null: a reader sees
	// "none", not "unknown".
	if b.Decisions == nil {
		b.Decisions = []Decision{}
	}
	if b.Plans == nil {
		b.Plans = []Plan{}
	}
	if b.Jobs == nil {
		b.Jobs = []Job{}
	}
	for i := range b.Jobs {
		if b.Jobs[i].Steps == nil {
			b.Jobs[i].Steps = []Step{}
		}
	}
	if b.Reviews == nil {
		b.Reviews = []Review{}
	}
	for i := range b.Reviews {
		if b.Reviews[i].MoreTriggers == nil {
			b.Reviews[i].MoreTriggers = []string{}
		}
	}
	if b.Costs.Statements == nil {
		b.Costs.Statements = []Statement{}
	}
	if b.Audit.Events == nil {
		b.Audit.Events = []Event{}
	}
	h, err := Hash(b)
	if err != nil {
		return Bundle{}, fmt.Errorf("evidence: %w", err)
	}
	b.BundleHash = h
	return b, nil
}

// usageMonths sums hourly rows by month and instance type.
func usageMonths(hours []UsageHour) []UsageMonth {
	type key struct{ month, typ string }
	sums := map[key]*UsageMonth{}
	var keys []key
	for _, h := range hours {
		k := key{h.Start.UTC().Format("2006-01"), h.InstanceType}
		m, ok := sums[k]
		if !ok {
			m = &UsageMonth{Month: k.month, InstanceType: k.typ}
			sums[k] = m
			keys = append(keys, k)
		}
		m.GuaranteedAccelSeconds += h.GuaranteedAccelSeconds
		m.BorrowedAccelSeconds += h.BorrowedAccelSeconds
		m.HoursCollected++
	}
	slices.SortFunc(keys, func(x, y key) int { return cmp.Or(cmp.Compare(x.month, y.month), cmp.Compare(x.typ, y.typ)) })
	out := []UsageMonth{}
	for _, k := range keys {
		out = append(out, *sums[k])
	}
	return out
}

// AuditTime is an audit event's time as its chain hash covers it.
func AuditTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

// Time is a time as a bundle writes it ("" for the zero time).
func Time(t time.Time) string { return ts(t) }

// Rebuild builds the plan of a contract version again, as the provisioner
// builds it now: its hash and the text that hash covers.
type Rebuild func(v VersionInput) (hash, text string, err error)

// Plans are the plans of every (version, plan hash) the input's jobs name.
// When rebuild gives the recorded hash, the plan carries the text that hash
// covers, so the verifier recomputes it; otherwise the hash is kept as
// recorded, with why.
func Plans(in Input, rebuild Rebuild) []Plan {
	versions := map[int]VersionInput{}
	for _, v := range in.Versions {
		versions[v.Version] = v
	}
	type key struct {
		version int
		hash    string
	}
	seen := map[key]bool{}
	var out []Plan
	for _, j := range in.Jobs {
		for _, h := range []string{j.PlanHash, j.AppliedPlanHash} {
			k := key{j.Version, h}
			if h == "" || seen[k] {
				continue
			}
			seen[k] = true
			pl := Plan{Version: j.Version, Hash: h}
			v, ok := versions[j.Version]
			if !ok {
				pl.Note = "The version is not in the bundle."
				out = append(out, pl)
				continue
			}
			switch hash, text, err := rebuild(v); {
			case err != nil:
				pl.Note = "As recorded: the plan could not be rebuilt at export (" + err.Error() + ")."
			case hash != h:
				pl.Note = "As recorded: the plan rebuilt with the cluster settings in force at export has another hash (the settings, or the job's steps, differ from the approved plan's)."
			default:
				pl.Text = text
				pl.Note = "Rebuilt at export with the same hash: the text is what the hash covers."
			}
			out = append(out, pl)
		}
	}
	return out
}
