package web

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// usagePeriodDays is the default period of the usage pages, ending today.
const usagePeriodDays = 30

// maxUsagePeriodDays bounds a chosen period (a year of hourly points).
const maxUsagePeriodDays = 366

// usagePeriod reads the from and to query parameters (UTC days, both
// included; default the last 30 days) and returns the hours they cover,
// up to the last complete hour (the current one is still being recorded,
// and would show as a drop to nothing). Bad input yields the form with its
// messages.
func usagePeriod(c echo.Context, now time.Time) (views.PeriodForm, time.Time, time.Time, bool) {
	today := usage.DayStart(now)
	f := views.PeriodForm{From: c.QueryParam("from"), To: c.QueryParam("to"), Errors: map[string]string{}}
	to, from := today, today.AddDate(0, 0, -(usagePeriodDays-1))
	if f.To != "" {
		t, err := time.Parse(time.DateOnly, f.To)
		if err != nil {
			f.Errors["to"] = "To: enter a day as YYYY-MM-DD, e.g. " + today.Format(time.DateOnly) + "."
		}
		to = t
	}
	if f.From != "" {
		t, err := time.Parse(time.DateOnly, f.From)
		if err != nil {
			f.Errors["from"] = "From: enter a day as YYYY-MM-DD, e.g. " + today.AddDate(0, 0, -(usagePeriodDays-1)).Format(time.DateOnly) + "."
		}
		from = t
	} else if f.To != "" {
		from = to.AddDate(0, 0, -(usagePeriodDays - 1))
	}
	if len(f.Errors) == 0 {
		switch {
		case from.After(today):
			f.Errors["from"] = "From: " + from.Format(time.DateOnly) + " is in the future; usage is recorded up to today (" + today.Format(time.DateOnly) + ", UTC)."
		case to.Before(from):
			f.Errors["period"] = "The period ends (" + to.Format(time.DateOnly) + ") before it starts (" + from.Format(time.DateOnly) + ")."
		case to.Sub(from) >= maxUsagePeriodDays*24*time.Hour:
			f.Errors["period"] = fmt.Sprintf("Choose a period of at most %d days.", maxUsagePeriodDays)
		}
	}
	f.From, f.To = strings.TrimSpace(f.From), strings.TrimSpace(f.To)
	if len(f.Errors) > 0 {
		return f, time.Time{}, time.Time{}, false
	}
	f.From, f.To = from.Format(time.DateOnly), to.Format(time.DateOnly)
	end := to.AddDate(0, 0, 1)
	if cur := usage.HourStart(now); end.After(cur) {
		end = cur
	}
	return f, from, end, true
}

// upToNote says, when the period was cut at the hour in progress, that
// the figures run to its start: that hour's rows are still being recomputed
// each minute by the collector and would show as a drop.
func upToNote(to, now time.Time) string {
	if cur := usage.HourStart(now); !to.Before(cur) {
		return "Figures run to " + cur.Format("2006-01-02 15:04") + " UTC, the end of the last complete hour; the hour in progress (from " +
			cur.Format("15:04") + ") is still being recorded and is not shown yet."
	}
	return ""
}

func periodLabel(from, to time.Time) string {
	return from.Format("2006-01-02 15:04") + " to " + to.Format("2006-01-02 15:04") + " (UTC)"
}

// teamHours is a team's hourly rows in [from, to) and the missing data
// periods that touch it: what every usage figure of a team is computed from.
func (s *Server) teamHours(ctx context.Context, team string, from, to time.Time) ([]usage.Hour, []usage.Missing, error) {
	s.teamHourReads.Add(1)
	rows, err := s.opts.DB.UsageHours(ctx, store.UsageFilter{Team: team, From: from, To: to})
	if err != nil {
		return nil, nil, err
	}
	missing, err := s.opts.DB.MissingIn(ctx, from, to)
	return rows, missing, err
}

func missingRows(ms []usage.Missing) []views.MissingRow {
	var out []views.MissingRow
	for _, m := range ms {
		out = append(out, views.MissingRow{From: m.From.UTC().Format("2006-01-02 15:04"), To: m.To.UTC().Format("2006-01-02 15:04 MST"), Reason: m.Reason})
	}
	return out
}

// guaranteeLine is team's guarantee in accelerators over the hour that
// starts at h (the mean, when it changed within the hour).
func (s *Server) guaranteeLine(h usage.GuaranteeHistory, team string) func(time.Time) float64 {
	acc := h.InAccelerators(func(t string) int64 { return int64(s.accelPerInstance(t)) })
	return func(at time.Time) float64 {
		var secs int64
		for itype := range acc[team] {
			acc.During(team, itype, at, at.Add(time.Hour), func(from, to time.Time, n int64) {
				secs += n * int64(to.Sub(from)/time.Second)
			})
		}
		return float64(secs) / 3600
	}
}

// hourInProgress is team's hour that starts at cur (the hour in
// progress) as far as the collector has recorded it: the page's totals
// leave it out because its rows are recomputed at every flush, and this
// shows them apart, marked as growing.
func (s *Server) hourInProgress(ctx context.Context, team string, cur time.Time) (*views.HourInProgress, error) {
	rows, err := s.opts.DB.UsageHours(ctx, store.UsageFilter{Team: team, From: cur, To: cur.Add(time.Hour)})
	if err != nil {
		return nil, err
	}
	v := &views.HourInProgress{Start: cur.Format("15:04 MST"), Recorded: len(rows) > 0}
	var g, b int64
	for _, h := range usage.SumByHour(rows) {
		g, b = g+h.GuaranteedAccelSeconds, b+h.BorrowedAccelSeconds
		v.Running, v.Pending, v.Preempted = v.Running+h.Running, v.Pending+h.Pending, v.Preempted+h.Preempted
	}
	v.GuaranteedHours, v.BorrowedHours = hoursText(g), hoursText(b)
	return v, nil
}

// hoursText formats accelerator-seconds as accelerator-hours.
func hoursText(secs int64) string {
	return strconv.FormatFloat(math.Round(float64(secs)/36)/100, 'f', 2, 64)
}

func (s *Server) accelPerInstance(typ string) int { return s.accelerators()[typ].Count }

// guaranteeAccel is a guarantee in accelerators.
func (s *Server) guaranteeAccel(caps []workflow.Capacity) int {
	n := 0
	for _, c := range caps {
		n += c.Count * s.accelPerInstance(c.InstanceType)
	}
	return n
}

// teamUsage is a team's usage page.
func (s *Server) teamUsage(c echo.Context) error {
	team := c.Param("team")
	p, err := authorize(c, workflow.ActionViewUsage, workflow.Object{Team: team})
	if err != nil {
		return err
	}
	title := "Team " + team + " usage"
	pf, from, to, ok := usagePeriod(c, s.opts.Now())
	if !ok {
		return render(c, http.StatusBadRequest, views.TeamUsagePage(s.page(c, title), views.TeamUsage{Team: team, Period: pf,
			PeriodLabel: "no period shown: correct the dates", NoData: true, Guarantee: "-"}))
	}
	u, err := s.teamUsageView(c.Request().Context(), team, from, to)
	if err != nil {
		return err
	}
	u.Period, u.UpTo = pf, upToNote(to, s.opts.Now())
	if u.UpTo != "" {
		if u.InProgress, err = s.hourInProgress(c.Request().Context(), team, to); err != nil {
			return err
		}
	}
	// The month's cost so far and its projection (finance.go), to those
	// who may read the team's statements only.
	b, ok, err := s.TeamCostBlock(c.Request().Context(), p, team)
	if err != nil {
		return err
	}
	if ok {
		u.Cost = views.CostBlockView(b)
	}
	return render(c, http.StatusOK, views.TeamUsagePage(s.page(c, title), u))
}

func (s *Server) teamUsageView(ctx context.Context, team string, from, to time.Time) (views.TeamUsage, error) {
	u := views.TeamUsage{Team: team, PeriodLabel: periodLabel(from, to)}
	// The page's period and the quota suggestions' 30 days before its end
	// are read at once: the team's rows of both, split here.
	sugFrom, sugEnd := suggestionSpan(to)
	allRows, allMissing, err := s.teamHours(ctx, team, usage.Earlier(from, sugFrom), usage.Later(to, sugEnd))
	if err != nil {
		return u, err
	}
	rows, missing := hoursIn(allRows, from, to), missingIn(allMissing, from, to)
	g, err := s.opts.DB.Guarantees(ctx, team)
	if err != nil {
		return u, err
	}
	guarantee := g[team]
	// The chart's guarantee line is the guarantee in force at each hour,
	// from the same history the collector splits usage by.
	gHist, err := s.opts.DB.GuaranteeHistory(ctx, team)
	if err != nil {
		return u, err
	}
	u.Missing = missingRows(missing)
	u.NoData = len(rows) == 0
	u.Guarantee = guaranteeText(team, guarantee, s.guaranteeAccel(guarantee))
	hourly := usage.SumByHour(rows)
	s.allocationChart(ctx, &u, rows, hourly, missing, s.guaranteeLine(gHist, team), from, to)
	dailyHoursAndWaits(&u, hourly, from, to)
	u.Suggestions = s.suggestFrom(hoursIn(allRows, sugFrom, sugEnd), missingIn(allMissing, sugFrom, sugEnd), guarantee, nil, sugFrom, sugEnd)
	return u, nil
}

// guaranteeText says the team's guarantee today, in instances and
// accelerators.
func guaranteeText(team string, guarantee []workflow.Capacity, accel int) string {
	if len(guarantee) == 0 {
		return "none in force (team " + team + " has no approved connection)"
	}
	var parts []string
	for _, c := range guarantee {
		parts = append(parts, fmt.Sprintf("%d × %s", c.Count, c.InstanceType))
	}
	return fmt.Sprintf("%s = %d accelerators (the approved connection's guarantee today)", strings.Join(parts, " + "), accel)
}

// allocationChart is the hourly chart: accelerators held against the
// guarantee in force at each hour (gLine), and, with Prometheus, how busy
// they were.
func (s *Server) allocationChart(ctx context.Context, u *views.TeamUsage, rows []usage.Hour, hourly []usage.TeamHour,
	missing []usage.Missing, gLine func(time.Time) float64, from, to time.Time) {
	byHour := map[time.Time]usage.TeamHour{}
	for _, h := range hourly {
		byHour[h.Start] = h
		u.Demo = u.Demo || h.Demo
	}
	var namespaces []string
	for _, r := range rows {
		if !slices.Contains(namespaces, r.Namespace) {
			namespaces = append(namespaces, r.Namespace)
		}
	}
	var busy map[time.Time]float64
	if s.opts.Utilization == nil {
		u.UtilizationNote = "Allocation only: utilization (how busy the allocated accelerators were) needs the portal to run with --prometheus-url."
	} else {
		markLive(ctx) // Prometheus, now
		var err error
		if busy, err = busyAccelerators(ctx, s.opts.Utilization, rows, namespaces, from, to); err != nil {
			s.opts.Logger.WarnContext(ctx, "utilization unavailable", "err", err)
			u.UtilizationNote = "Utilization could not be read from Prometheus just now; allocation only."
			busy = nil
		}
	}
	var xs []time.Time
	var alloc, guar, busyV []float64
	for h := from; h.Before(to); h = h.Add(time.Hour) {
		xs = append(xs, h)
		guar = append(guar, gLine(h))
		if usage.InMissing(missing, h) {
			alloc, busyV = append(alloc, math.NaN()), append(busyV, math.NaN())
			continue
		}
		alloc = append(alloc, float64(byHour[h].AccelSeconds())/3600)
		if v, ok := busy[h]; ok {
			busyV = append(busyV, v)
		} else {
			busyV = append(busyV, math.NaN())
		}
	}
	series := []views.SeriesInput{
		{Name: "Allocated (guaranteed + borrowed)", Class: "s-alloc", Values: alloc, Area: true},
		{Name: "Guarantee", Class: "s-guarantee", Values: guar, Step: true},
	}
	if busy != nil {
		series = append(series, views.SeriesInput{Name: "Busy (allocated × utilization)", Class: "s-busy", Values: busyV})
	}
	u.Allocation = views.NewTimeSeries("usage-allocation", "Team "+u.Team+": accelerators allocated vs guaranteed, per hour",
		"Mean accelerators the team held in each hour of "+u.PeriodLabel+", against the guarantee in force in that hour. Gaps are missing data periods.",
		"accelerators", xs, series)
}

// dailyHoursAndWaits is the daily chart of guaranteed and borrowed
// accelerator-hours, the period's totals, peaks, preemptions and waits:
// usage.FiguresOf, which the API serves too (apiusage.go).
func dailyHoursAndWaits(u *views.TeamUsage, hourly []usage.TeamHour, from, to time.Time) {
	f := usage.FiguresOf(hourly, from, to)
	var labels []string
	gh, bh := make([]float64, len(f.Days)), make([]float64, len(f.Days))
	for i, d := range f.Days {
		labels = append(labels, d.Day.Format("Jan 2"))
		gh[i], bh[i] = float64(d.GuaranteedAccelSeconds)/3600, float64(d.BorrowedAccelSeconds)/3600
	}
	u.PeakRunning, u.PeakPending, u.Preemptions = f.PeakRunning, f.PeakPending, f.Preemptions
	u.Hours = views.NewStackedBars("usage-hours", "Team "+u.Team+": guaranteed vs borrowed accelerator-hours, per day",
		"Accelerator-hours per UTC day within the team's guarantee and borrowed above it.", "accelerator-hours", labels,
		[]views.BarSeries{{Name: "Guaranteed", Class: "s-guaranteed", Values: gh}, {Name: "Borrowed", Class: "s-borrowed", Values: bh}})
	u.GuaranteedHours, u.BorrowedHours = hoursText(f.GuaranteedAccelSeconds), hoursText(f.BorrowedAccelSeconds)
	if f.WaitHours == 0 {
		u.Waits = []views.WaitView{{Label: "No workload admitted in this period", P50: "-", P90: "-", P99: "-"}}
		return
	}
	worst := views.WaitView{Label: "Worst hour", P50: waitText(f.WorstP50), P90: waitText(f.WorstP90), P99: waitText(f.WorstP99)}
	u.Waits = []views.WaitView{{Label: fmt.Sprintf("Median hour (of %d with admissions)", f.WaitHours), P50: waitText(f.MedianP50),
		P90: waitText(f.MedianP90), P99: waitText(f.MedianP99)}, worst}
}

// suggestionSpan is the 30 days of hourly rows before end that quota
// suggestions are computed from.
func suggestionSpan(end time.Time) (time.Time, time.Time) {
	end = usage.HourStart(end)
	return end.Add(-usagePeriodDays * 24 * time.Hour), end
}

// hoursIn is the rows of hours in [from, to).
func hoursIn(rows []usage.Hour, from, to time.Time) []usage.Hour {
	var out []usage.Hour
	for _, r := range rows {
		if !r.Start.Before(from) && r.Start.Before(to) {
			out = append(out, r)
		}
	}
	return out
}

// missingIn is the missing data periods that touch [from, to), as
// store.DB.MissingIn selects them.
func missingIn(ms []usage.Missing, from, to time.Time) []usage.Missing {
	var out []usage.Missing
	for _, m := range ms {
		if m.To.After(from) && m.From.Before(to) {
			out = append(out, m)
		}
	}
	return out
}

func waitText(secs int64) string {
	if secs < 0 {
		return "-"
	}
	return (time.Duration(secs) * time.Second).String()
}

// quotaSuggestions suggests a guarantee per instance type the team is
// guaranteed, uses, or (proposed) a change names, from the 30 days of
// hourly rows before end.
func (s *Server) quotaSuggestions(ctx context.Context, team string, current, proposed []workflow.Capacity, end time.Time) ([]views.QuotaSuggestionView, error) {
	from, end := suggestionSpan(end)
	rows, missing, err := s.teamHours(ctx, team, from, end)
	if err != nil {
		return nil, err
	}
	return s.suggestFrom(rows, missing, current, proposed, from, end), nil
}

// suggestFrom is quotaSuggestions from the team's rows and missing periods
// of [from, end).
func (s *Server) suggestFrom(rows []usage.Hour, missing []usage.Missing, current, proposed []workflow.Capacity, from, end time.Time) []views.QuotaSuggestionView {
	cur := map[string]int{}
	var types []string
	add := func(t string) {
		if !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	for _, c := range current {
		cur[c.InstanceType] += c.Count
		add(c.InstanceType)
	}
	for _, c := range proposed {
		add(c.InstanceType)
	}
	for _, r := range rows {
		add(r.InstanceType)
	}
	slices.Sort(types)
	var out []views.QuotaSuggestionView
	for _, t := range types {
		sg := usage.SuggestGuarantee(rows, missing, t, s.accelPerInstance(t), cur[t], from, end)
		out = append(out, views.QuotaSuggestionView{InstanceType: t, Current: sg.CurrentInstances, Suggested: sg.SuggestedInstances,
			Enough: sg.Enough, Reasoning: sg.Reasoning()})
	}
	return out
}

// clusterUsage is the admins' cluster overview: every team against
// capacity, idle capacity, teams above and below their guarantee, and
// unhealthy nodes.
func (s *Server) clusterUsage(c echo.Context) error {
	if _, err := authorize(c, workflow.ActionViewAdminHome, workflow.Object{}); err != nil {
		return err
	}
	pf, from, to, ok := usagePeriod(c, s.opts.Now())
	if !ok {
		return render(c, http.StatusBadRequest, views.ClusterUsagePage(s.page(c, "Cluster usage"), views.ClusterUsage{Period: pf,
			PeriodLabel: "no period shown: correct the dates", NoData: true}))
	}
	u, err := s.clusterUsageView(c.Request().Context(), pf, from, to)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.ClusterUsagePage(s.page(c, "Cluster usage"), u))
}

// clusterUsageView is the cluster usage page of a period: every team's
// accelerator-hours per day stacked with the idle capacity, the totals,
// each team against its guarantee, and the unhealthy node-hours.
func (s *Server) clusterUsageView(ctx context.Context, pf views.PeriodForm, from, to time.Time) (views.ClusterUsage, error) {
	u := views.ClusterUsage{Period: pf, PeriodLabel: periodLabel(from, to), UpTo: upToNote(to, s.opts.Now())}
	rows, err := s.opts.DB.UsageHours(ctx, store.UsageFilter{From: from, To: to})
	if err != nil {
		return u, err
	}
	cluster, err := s.opts.DB.ClusterHours(ctx, "", from, to)
	if err != nil {
		return u, err
	}
	missing, err := s.opts.DB.MissingIn(ctx, from, to)
	if err != nil {
		return u, err
	}
	guarantees, err := s.opts.DB.Guarantees(ctx, "")
	if err != nil {
		return u, err
	}
	u.Missing = missingRows(missing)
	u.NoData = len(rows) == 0 && len(cluster) == 0

	days := usage.Days(from, to)
	dayIdx := map[time.Time]int{}
	var labels []string
	for i, d := range days {
		dayIdx[d] = i
		labels = append(labels, d.Format("Jan 2"))
	}
	teams := slices.Collect(maps.Keys(guarantees))
	perTeamHour := map[string]map[time.Time]int64{}
	borrowed := map[string]int64{}
	for _, r := range rows {
		u.Demo = u.Demo || r.Source == usage.SourceDemo
		if perTeamHour[r.Team] == nil {
			perTeamHour[r.Team] = map[time.Time]int64{}
			if !slices.Contains(teams, r.Team) {
				teams = append(teams, r.Team)
			}
		}
		perTeamHour[r.Team][r.Start] += r.AccelSeconds()
		borrowed[r.Team] += r.BorrowedAccelSeconds
	}
	slices.Sort(teams)
	var series []views.BarSeries
	for i, t := range teams {
		v := make([]float64, len(days))
		for at, secs := range perTeamHour[t] {
			v[dayIdx[usage.DayStart(at)]] += float64(secs) / 3600
		}
		series = append(series, views.BarSeries{Name: "Team " + t, Class: fmt.Sprintf("s-team%d", i%6), Values: v})
	}
	capacityAndHealth(&u, cluster, len(days), dayIdx, labels, series)
	for _, t := range teams {
		g := s.guaranteeAccel(guarantees[t])
		row := views.TeamUsageRow{Team: t, Href: "/teams/" + t + "/usage?from=" + pf.From + "&to=" + pf.To,
			GuaranteeAccelerators: strconv.Itoa(g), BorrowedHours: hoursText(borrowed[t]), MeanAccelerators: "-", P95Accelerators: "-"}
		if mean, p95, st, ok := usage.GuaranteeStanding(perTeamHour[t], missing, from, to, g); ok {
			row.MeanAccelerators, row.P95Accelerators = hoursText(mean), hoursText(p95)
			row.Status, row.StatusLabel = string(st), string(st)+" its guarantee"
		}
		u.Teams = append(u.Teams, row)
	}
	return u, nil
}

// capacityAndHealth tops the teams' daily bars with the idle capacity,
// fills the capacity, allocated and idle totals, and lists the unhealthy
// node-hours per cluster and instance type.
func capacityAndHealth(u *views.ClusterUsage, cluster []usage.ClusterHour, ndays int, dayIdx map[time.Time]int, labels []string, series []views.BarSeries) {
	idle := make([]float64, ndays)
	var capS, allocS, idleS int64
	type key struct{ cluster, typ string }
	unhealthy := map[key]int64{}
	latest := map[key]usage.ClusterHour{}
	for _, ch := range cluster {
		u.Demo = u.Demo || ch.Source == usage.SourceDemo
		idle[dayIdx[usage.DayStart(ch.Start)]] += float64(ch.IdleAccelSeconds()) / 3600
		capS += ch.CapacityAccelSeconds
		allocS += ch.AllocatedAccelSeconds
		idleS += ch.IdleAccelSeconds()
		k := key{ch.Cluster, ch.InstanceType}
		unhealthy[k] += ch.UnhealthyNodeSeconds
		if l, ok := latest[k]; !ok || ch.Start.After(l.Start) {
			latest[k] = ch
		}
	}
	series = append(series, views.BarSeries{Name: "Idle capacity", Class: "s-idle", Values: idle})
	u.Stacked = views.NewStackedBars("cluster-stacked", "Accelerator-hours per day: every team, and idle capacity",
		"Each team's accelerator-hours per UTC day stacked, topped by the capacity nobody held; a full bar is the cluster's capacity.",
		"accelerator-hours", labels, series)
	u.CapacityHours, u.AllocatedHours, u.IdleHours = hoursText(capS), hoursText(allocS), hoursText(idleS)
	u.IdlePercent = "-"
	if capS > 0 {
		u.IdlePercent = fmt.Sprintf("%d%% of capacity", idleS*100/capS)
	}
	keys := slices.SortedFunc(maps.Keys(unhealthy), func(a, b key) int { return strings.Compare(a.cluster+" "+a.typ, b.cluster+" "+b.typ) })
	for _, k := range keys {
		if unhealthy[k] == 0 {
			continue
		}
		u.Unhealthy = append(u.Unhealthy, views.UnhealthyRow{Cluster: k.cluster, InstanceType: k.typ, NodeHours: hoursText(unhealthy[k]),
			LatestHour: fmt.Sprintf("%s nodes (%s)", hoursText(latest[k].UnhealthyNodeSeconds), latest[k].Start.Format("2006-01-02 15:04"))})
	}
}

// busyAccelerators is, per UTC hour in [from, to), how many of the
// namespaces' allocated accelerators were busy: each namespace's allocation
// that hour (its rows) times its GPUs' mean utilization (Prometheus, one
// point per hour). An hour without a utilization point is absent (a gap in
// the chart, not a zero).
func busyAccelerators(ctx context.Context, u usage.Utilization, rows []usage.Hour, namespaces []string, from, to time.Time) (map[time.Time]float64, error) {
	alloc := map[string]map[time.Time]float64{}
	for _, r := range rows {
		if alloc[r.Namespace] == nil {
			alloc[r.Namespace] = map[time.Time]float64{}
		}
		alloc[r.Namespace][r.Start] += float64(r.AccelSeconds()) / 3600
	}
	out := map[time.Time]float64{}
	for _, ns := range namespaces {
		points, err := u.NamespaceUtilization(ctx, ns, from, to, time.Hour)
		if err != nil {
			return nil, fmt.Errorf("utilization of %s: %w", ns, err)
		}
		for _, p := range points {
			out[p.At] += alloc[ns][p.At] * p.Percent / 100
		}
	}
	return out, nil
}
