package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TeamGuarantees is each team's guaranteed instances per instance type: the
// approved contract versions of its live connections (approved, being
// provisioned, active, under review or being revoked), summed over them.
//
// Read from team_capacity, which apply keeps (capacity.go), as Guarantees.
func (d *DB) TeamGuarantees(ctx context.Context) (map[string]map[string]int, error) {
	all, err := d.Guarantees(ctx, "")
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string]int, len(all))
	for team, caps := range all {
		out[team] = make(map[string]int, len(caps))
		for _, c := range caps {
			out[team][c.InstanceType] = c.Count
		}
	}
	return out, nil
}

// CostInput loads what a chargeback of the period needs from the store:
// every team's hourly rows, every cluster's capacity rows, the teams'
// guarantees, and the missing data periods that touch the period. Money is
// computed from CostInputSummed (usage.CostsOf); this hourly reader is what
// tests build their oracles from.
func (d *DB) CostInput(ctx context.Context, p usage.Period) (usage.ChargeInput, []usage.Missing, error) {
	in := usage.ChargeInput{Period: p}
	var err error
	if in.Hours, err = d.UsageHours(ctx, UsageFilter{From: p.From, To: p.To}); err != nil {
		return in, nil, err
	}
	return d.costContext(ctx, in)
}

// costContext completes a chargeback's input whose hours are read: the
// cluster's hourly capacity rows, the teams' guarantees over time, and the
// missing data periods that touch the period.
func (d *DB) costContext(ctx context.Context, in usage.ChargeInput) (usage.ChargeInput, []usage.Missing, error) {
	var err error
	if in.Cluster, err = d.ClusterHours(ctx, "", in.Period.From, in.Period.To); err != nil {
		return in, nil, err
	}
	if in.Guarantees, err = d.GuaranteeHistory(ctx, ""); err != nil {
		return in, nil, err
	}
	missing, err := d.MissingIn(ctx, in.Period.From, in.Period.To)
	return in, missing, err
}

// CostInputSummed is CostInput with each team's hourly rows summed in SQL
// per team, namespace, instance type and source between the times at which
// a rate changes (changes: usage.RateCard.Changes of the period): a
// chargeback of it equals that of CostInput, because Charge prices each row
// at the rate in force at its hour and adds them up, and every row of one
// sum is billed at the same rates. Each summed row starts at its first
// hour, whole day or whole month. It reads a few rows per team and month
// or day instead of every hour of every team.
// The cluster's capacity rows stay hourly (idle capacity is clamped per
// hour).
func (d *DB) CostInputSummed(ctx context.Context, p usage.Period, changes []time.Time) (usage.ChargeInput, []usage.Missing, error) {
	in := usage.ChargeInput{Period: p}
	var err error
	from := p.From
	for _, to := range append(slices.Clone(changes), p.To) {
		if !to.After(from) || to.After(p.To) {
			continue
		}
		if in.Hours, err = d.summedHours(ctx, in.Hours, from, to); err != nil {
			return in, nil, err
		}
		from = to
	}
	return d.costContext(ctx, in)
}

// summedHoursSQL sums a span's rows by line: the whole calendar months
// (UTC) inside it from usage_months (migrations/00038), the whole UTC days
// around them from usage_days (migrations/00025), the hours of its partial
// first and last days from usage_hours; all three kept by triggers on
// usage_hours. Each part reads its range through an index
// (TestCostInputSummedUsesIndexes), the days through one that covers the
// columns read (usage_days_span, migrations/00037: no table lookup per
// row). A closed month at 1,000 teams is 1,000 month rows; the end of a
// month to date about 30,000 day rows; instead of 720,000 hours.
// Arguments, pairwise the bounds of each part, as text in the store's time
// layout: the span's start and its first whole day, the first whole day
// and the first whole month, the first and the end of the last whole
// month, that end and the end of the last whole day, that end and the
// span's end (spanParts). A line's first row (MIN(at)) is an hour, a day's
// or a month's first midnight inside the span: Charge needs only that it
// lies there.
const summedHoursSQL = `
SELECT team, namespace, instance_type, source, MIN(at), SUM(g), SUM(b), SUM(c), SUM(m) FROM (
  SELECT team, namespace, instance_type, source, hour AS at, guaranteed_accel_s AS g, borrowed_accel_s AS b, cpu_milli_s AS c, memory_mib_s AS m
  FROM usage_hours WHERE hour >= ? AND hour < ?
  UNION ALL
  SELECT team, namespace, instance_type, source, day, guaranteed_accel_s, borrowed_accel_s, cpu_milli_s, memory_mib_s
  FROM usage_days WHERE day >= ? AND day < ?
  UNION ALL
  SELECT team, namespace, instance_type, source, month, guaranteed_accel_s, borrowed_accel_s, cpu_milli_s, memory_mib_s
  FROM usage_months WHERE month >= ? AND month < ?
  UNION ALL
  SELECT team, namespace, instance_type, source, day, guaranteed_accel_s, borrowed_accel_s, cpu_milli_s, memory_mib_s
  FROM usage_days WHERE day >= ? AND day < ?
  UNION ALL
  SELECT team, namespace, instance_type, source, hour, guaranteed_accel_s, borrowed_accel_s, cpu_milli_s, memory_mib_s
  FROM usage_hours WHERE hour >= ? AND hour < ?
) AS span
GROUP BY team, namespace, instance_type, source ORDER BY team, namespace, instance_type, source`

// wholeDays is the whole UTC days of [from, to): [first, last). A span
// without one has first = last (its hours are then all read from the
// first part of summedHoursSQL, [from, to)).
func wholeDays(from, to time.Time) (first, last time.Time) {
	first = from.UTC().Truncate(24 * time.Hour)
	if first.Before(from) {
		first = first.Add(24 * time.Hour)
	}
	last = to.UTC().Truncate(24 * time.Hour)
	if !last.After(first) {
		return to, to
	}
	return first, last
}

// wholeMonths is the whole UTC calendar months of the whole days [first,
// last): [mFirst, mLast). Days without one have mFirst = mLast = last
// (their days are then all read from the second part of summedHoursSQL).
func wholeMonths(first, last time.Time) (mFirst, mLast time.Time) {
	mFirst = usage.MonthOf(first).From
	if mFirst.Before(first) {
		mFirst = mFirst.AddDate(0, 1, 0)
	}
	mLast = usage.MonthOf(last).From
	if !mLast.After(mFirst) {
		return last, last
	}
	return mFirst, mLast
}

// spanParts is summedHoursSQL's arguments for the span [from, to): five
// adjacent ranges that cover it, each empty or of one kind of row.
func spanParts(from, to time.Time) []any {
	first, last := wholeDays(from, to)
	mFirst, mLast := wholeMonths(first, last)
	bounds := []time.Time{from, first, mFirst, mLast, last, to}
	args := make([]any, 0, 10)
	for i := range 5 {
		args = append(args, fmtTime(bounds[i]), fmtTime(bounds[i+1]))
	}
	return args
}

func (d *DB) summedHours(ctx context.Context, out []usage.Hour, from, to time.Time) ([]usage.Hour, error) {
	rows, err := d.sql.QueryContext(ctx, summedHoursSQL, spanParts(from, to)...)
	if err != nil {
		return out, fmt.Errorf("store: summed usage hours: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var h usage.Hour
		var at, src string
		if err := rows.Scan(&h.Team, &h.Namespace, &h.InstanceType, &src, &at, &h.GuaranteedAccelSeconds, &h.BorrowedAccelSeconds,
			&h.CPUMilliSeconds, &h.MemoryMiBSeconds); err != nil {
			return out, fmt.Errorf("store: summed usage hours: %w", err)
		}
		if h.Start, err = parseTime(at); err != nil {
			return out, fmt.Errorf("store: summed usage hours: %w", err)
		}
		h.Source = usage.Source(src)
		out = append(out, h)
	}
	return out, rows.Err()
}

// FrozenStatement is a closed month's statement as listed.
type FrozenStatement struct {
	Team, Month string
	Total       string
	Currency    string
	Hash        string
	ClosedAt    time.Time
}

// ErrNoRateCard: statements carry money, so a month is not closed without
// prices.
var ErrNoRateCard = errors.New("no rate card (--rate-card): months are not closed without prices")

// CloseMonth freezes the month's statements for every team, at the policy
// in force now, in one transaction with their audit events: one
// cost.statement per team whose reason carries the SHA-256 of the frozen
// JSON, and one cost.month_closed. It is idempotent: a month closed before
// is left as it is, and closed reports false.
func (d *DB) CloseMonth(ctx context.Context, month usage.Period, rates *usage.RateCard, accel map[string]usage.InstanceAccel, now time.Time) (closed bool, err error) {
	if rates == nil {
		return false, ErrNoRateCard
	}
	label := month.From.Format("2006-01")
	if usage.MonthOf(month.From) != month {
		return false, fmt.Errorf("store: close month: %s is not a calendar month", month.Label())
	}
	if now.Before(month.To) {
		return false, fmt.Errorf("store: close month: %s has not ended", label)
	}
	var done int
	if err := d.sql.QueryRowContext(ctx, `SELECT COUNT(*) FROM cost_months WHERE month = ?`, label).Scan(&done); err != nil {
		return false, fmt.Errorf("store: close month: %w", err)
	}
	if done > 0 {
		return false, nil
	}
	pol, err := d.CostPolicy(ctx)
	if err != nil {
		return false, err
	}
	// The one computation of money (usage.CostsOf), as the pages show it.
	costs, err := usage.CostsOf(ctx, d, month, pol.Policy, usage.Pricing{Rates: rates, Accelerators: accel})
	if err != nil {
		return false, fmt.Errorf("store: close month %s: %w", label, err)
	}
	cb, missing := costs.Chargeback, costs.Missing
	err = d.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO cost_months (month, closed_at, policy_version, currency) VALUES (?, ?, ?, ?)
ON CONFLICT (month) DO NOTHING`, label, fmtTime(now), nullID(int64(pol.Version)), cb.Currency)
		if err != nil {
			return fmt.Errorf("store: close month: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil // closed meanwhile by another caller
		}
		closed = true
		for _, tc := range cb.Teams {
			st := usage.StatementOf(cb, tc.Team, missing, rates.Demo, now)
			st.Frozen = true
			body := st.JSON()
			hash := usage.HashBytes(body)
			if _, err := tx.ExecContext(ctx, `INSERT INTO cost_statements (month, team, total, body, hash) VALUES (?, ?, ?, ?, ?)`,
				label, tc.Team, tc.Total.Amount(), string(body), hash); err != nil {
				return fmt.Errorf("store: close month: %w", err)
			}
			if err := appendAudit(ctx, tx, AuditEvent{At: now, Actor: workflow.Provisioner.Email, Action: "cost.statement",
				ObjectType: "cost_statement", Team: tc.Team,
				Reason: fmt.Sprintf("%s statement frozen: total %v, sha256 %s", label, tc.Total, hash)}); err != nil {
				return err
			}
		}
		return appendAudit(ctx, tx, AuditEvent{At: now, Actor: workflow.Provisioner.Email, Action: "cost.month_closed",
			ObjectType: "cost_month", Version: pol.Version,
			Reason: fmt.Sprintf("%s closed: %d statements, cluster cost %v, unallocated %v, policy version %d (%s, overhead %s%%)",
				label, len(cb.Teams), cb.ClusterCost, cb.Unallocated, pol.Version, pol.Policy.Method, usage.FormatOverhead(pol.Policy.OverheadBasisPoints))})
	})
	return closed, err
}

// LastClosableMonth is the month before the one now (less grace) falls in:
// the grace lets the collector write the month's last hour before it closes.
func LastClosableMonth(now time.Time, grace time.Duration) usage.Period {
	cur := usage.MonthOf(now.Add(-grace))
	return usage.MonthOf(cur.From.Add(-time.Hour))
}

// FrozenStatements lists closed months' statements, newest month first; a
// team's only when team is set (callers scope it to what the user may read).
func (d *DB) FrozenStatements(ctx context.Context, team string) ([]FrozenStatement, error) {
	rows, err := d.sql.QueryContext(ctx, `
SELECT s.team, s.month, s.total, m.currency, s.hash, m.closed_at FROM cost_statements s JOIN cost_months m ON m.month = s.month
WHERE (? = '' OR s.team = ?) ORDER BY s.month DESC, s.team`, team, team)
	if err != nil {
		return nil, fmt.Errorf("store: statements: %w", err)
	}
	defer rows.Close()
	var out []FrozenStatement
	for rows.Next() {
		var f FrozenStatement
		var at string
		if err := rows.Scan(&f.Team, &f.Month, &f.Total, &f.Currency, &f.Hash, &at); err != nil {
			return nil, fmt.Errorf("store: statements: %w", err)
		}
		if f.ClosedAt, err = parseTime(at); err != nil {
			return nil, fmt.Errorf("store: statements: %w", err)
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// FrozenStatement returns a closed month's statement of a team, checking
// its body against the recorded hash; ok is false when the month is not
// closed or the team had no statement in it.
func (d *DB) FrozenStatement(ctx context.Context, team, month string) (st usage.Statement, ok bool, err error) {
	var body, hash string
	err = d.sql.QueryRowContext(ctx, `SELECT body, hash FROM cost_statements WHERE team = ? AND month = ?`, team, month).Scan(&body, &hash)
	if errors.Is(err, sql.ErrNoRows) {
		return st, false, nil
	}
	if err != nil {
		return st, false, fmt.Errorf("store: statement: %w", err)
	}
	if usage.HashBytes([]byte(body)) != hash {
		return st, false, fmt.Errorf("store: statement %s %s: its body does not match its recorded hash", team, month)
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		return st, false, fmt.Errorf("store: statement %s %s: %w", team, month, err)
	}
	return st, true, nil
}

// MonthClosed reports whether a month ("2026-11") is closed.
func (d *DB) MonthClosed(ctx context.Context, month string) (bool, error) {
	var n int
	if err := d.sql.QueryRowContext(ctx, `SELECT COUNT(*) FROM cost_months WHERE month = ?`, month).Scan(&n); err != nil {
		return false, fmt.Errorf("store: month closed: %w", err)
	}
	return n > 0, nil
}
