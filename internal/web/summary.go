package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// The daily summary (usage.DailySummary): HyperPod's summary usage report,
// per UTC day, namespace, team and instance type, as a page and as CSV, for
// one team (/teams/:team/usage/summary, authorized exactly as the team
// usage page) and for admins across teams (/admin/usage/summary, as the
// cluster usage page).

func (s *Server) teamUsageSummary(c echo.Context) error {
	return s.usageSummary(c, c.Param("team"), false)
}
func (s *Server) teamUsageSummaryCSV(c echo.Context) error {
	return s.usageSummary(c, c.Param("team"), true)
}
func (s *Server) adminUsageSummary(c echo.Context) error { return s.usageSummary(c, "", false) }
func (s *Server) adminUsageSummaryCSV(c echo.Context) error {
	return s.usageSummary(c, "", true)
}

// summaryPath is the summary page of team ("" for every team's).
func summaryPath(team string) string {
	if team == "" {
		return "/admin/usage/summary"
	}
	return "/teams/" + team + "/usage/summary"
}

// usageSummary serves team's daily summary (every team's when team is ""),
// as CSV when asCSV. A bad period answers 400 with the form and its
// messages, for the CSV as for the page.
func (s *Server) usageSummary(c echo.Context, team string, asCSV bool) error {
	var err error
	if team != "" {
		_, err = authorize(c, workflow.ActionViewUsage, workflow.Object{Team: team})
	} else {
		_, err = authorize(c, workflow.ActionViewAdminHome, workflow.Object{})
	}
	if err != nil {
		return err
	}
	title := "Daily usage summary"
	if team != "" {
		title = "Team " + team + " daily usage summary"
	}
	now := s.opts.Now()
	pf, from, to, ok := usagePeriod(c, now)
	if !ok {
		return render(c, http.StatusBadRequest, views.UsageSummaryPage(s.page(c, title), views.UsageSummary{Team: team, Period: pf,
			PeriodLabel: "no period shown: correct the dates"}))
	}
	ctx := c.Request().Context()
	rows, err := s.opts.DB.UsageDays(ctx, store.UsageFilter{Team: team, From: from, To: to})
	if err != nil {
		return err
	}
	missing, err := s.opts.DB.MissingIn(ctx, from, to)
	if err != nil {
		return err
	}
	acc := s.accelerators()
	var lines []usage.SummaryLine
	for _, r := range usage.DailySummary(rows, missing, from, to) {
		if r.Team == "" {
			r.Team = team // a day with only a missing data period
		}
		lines = append(lines, r.Line(acc))
	}
	if asCSV {
		name := "all"
		if team != "" {
			name = team
		}
		attachment(c, "usage-summary-"+name+"-"+pf.From+"-"+pf.To+".csv")
		c.Response().Header().Set(echo.HeaderContentType, "text/csv; charset=utf-8")
		c.Response().WriteHeader(http.StatusOK)
		return usage.WriteSummaryCSV(c.Response(), lines)
	}
	u := views.UsageSummary{Team: team, Period: pf, PeriodLabel: periodLabel(from, to), UpTo: upToNote(to, now),
		Missing: missingRows(missing), CSV: summaryPath(team) + ".csv?from=" + pf.From + "&to=" + pf.To,
	}
	for _, t := range usage.SummaryTotals(rows, acc) {
		u.Totals = append(u.Totals, views.SummaryTotalView(t))
	}
	for _, r := range rows {
		u.Demo = u.Demo || r.Source == usage.SourceDemo
	}
	for _, l := range lines {
		u.Lines = append(u.Lines, views.SummaryLineView(l))
	}
	return render(c, http.StatusOK, views.UsageSummaryPage(s.page(c, title), u))
}
