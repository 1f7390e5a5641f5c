package web

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// A team's usage and cost statements through the API: the same figures as
// the team usage page (usage.FiguresOf over the same teamHours) and the
// statement exports (statementJSON), authorized as those pages
// (ActionViewUsage; costTeam's ActionViewCosts), narrowed by the token
// (apiPermits) before anything is read.

// apiUsageTotals are the period's figures of the usage page.
type apiUsageTotals struct {
	GuaranteedAccelSeconds int64   `json:"guaranteed_accelerator_seconds"`
	BorrowedAccelSeconds   int64   `json:"borrowed_accelerator_seconds"`
	GuaranteedHours        float64 `json:"guaranteed_accelerator_hours"`
	BorrowedHours          float64 `json:"borrowed_accelerator_hours"`
	Preemptions            int     `json:"preemptions"`
	PeakRunning            int     `json:"peak_running"`
	PeakPending            int     `json:"peak_pending"`
}

type apiWait struct {
	P50 int64 `json:"p50_seconds"`
	P90 int64 `json:"p90_seconds"`
	P99 int64 `json:"p99_seconds"`
}

type apiWaits struct {
	HoursWithAdmissions int     `json:"hours_with_admissions"`
	MedianHour          apiWait `json:"median_hour"`
	WorstHour           apiWait `json:"worst_hour"`
}

// apiUsageItem is a day, or an hour (with its workloads and waits).
type apiUsageItem struct {
	Start                  time.Time `json:"start"`
	GuaranteedAccelSeconds int64     `json:"guaranteed_accelerator_seconds"`
	BorrowedAccelSeconds   int64     `json:"borrowed_accelerator_seconds"`
	GuaranteedHours        float64   `json:"guaranteed_accelerator_hours"`
	BorrowedHours          float64   `json:"borrowed_accelerator_hours"`
	Preempted              int       `json:"preempted"`
	Running                *int      `json:"running,omitempty"`
	Pending                *int      `json:"pending,omitempty"`
	Wait                   *apiWait  `json:"wait,omitempty"`
}

// apiUsage is a team's usage of a period (schema TeamUsage).
type apiUsage struct {
	Team    string                `json:"team"`
	From    time.Time             `json:"from"`
	To      time.Time             `json:"to"`
	Per     string                `json:"per"`
	Demo    bool                  `json:"demo"`
	Totals  apiUsageTotals        `json:"totals"`
	Waits   *apiWaits             `json:"waits,omitempty"`
	Items   []apiUsageItem        `json:"items"`
	Missing []usage.MissingPeriod `json:"missing_data_periods"`
	Links   struct {
		Page       string `json:"page"`
		SummaryCSV string `json:"summary_csv"`
	} `json:"links"`
}

func accelHours(secs int64) float64 { return float64(secs) / 3600 }

// apiUsageOf renders the figures (per "day" or "hour").
func apiUsageOf(team, per string, from, to time.Time, f usage.PeriodFigures, hourly []usage.TeamHour, missing []usage.Missing) apiUsage {
	u := apiUsage{Team: team, From: from.UTC(), To: to.UTC(), Per: per, Items: []apiUsageItem{}, Missing: []usage.MissingPeriod{},
		Totals: apiUsageTotals{GuaranteedAccelSeconds: f.GuaranteedAccelSeconds, BorrowedAccelSeconds: f.BorrowedAccelSeconds,
			GuaranteedHours: accelHours(f.GuaranteedAccelSeconds), BorrowedHours: accelHours(f.BorrowedAccelSeconds),
			Preemptions: f.Preemptions, PeakRunning: f.PeakRunning, PeakPending: f.PeakPending}}
	if f.WaitHours > 0 {
		u.Waits = &apiWaits{HoursWithAdmissions: f.WaitHours, MedianHour: apiWait{f.MedianP50, f.MedianP90, f.MedianP99},
			WorstHour: apiWait{f.WorstP50, f.WorstP90, f.WorstP99}}
	}
	for _, d := range f.Days {
		if per != "day" {
			break
		}
		u.Items = append(u.Items, apiUsageItem{Start: d.Day, GuaranteedAccelSeconds: d.GuaranteedAccelSeconds, BorrowedAccelSeconds: d.BorrowedAccelSeconds,
			GuaranteedHours: accelHours(d.GuaranteedAccelSeconds), BorrowedHours: accelHours(d.BorrowedAccelSeconds), Preempted: d.Preempted})
	}
	for _, h := range hourly {
		u.Demo = u.Demo || h.Demo
		if per == "hour" {
			it := apiUsageItem{Start: h.Start.UTC(), GuaranteedAccelSeconds: h.GuaranteedAccelSeconds, BorrowedAccelSeconds: h.BorrowedAccelSeconds,
				GuaranteedHours: accelHours(h.GuaranteedAccelSeconds), BorrowedHours: accelHours(h.BorrowedAccelSeconds), Preempted: h.Preempted,
				Running: &h.Running, Pending: &h.Pending}
			if h.WaitP50Seconds >= 0 {
				it.Wait = &apiWait{h.WaitP50Seconds, h.WaitP90Seconds, h.WaitP99Seconds}
			}
			u.Items = append(u.Items, it)
		}
	}
	for _, m := range missing {
		u.Missing = append(u.Missing, usage.MissingPeriod{Cluster: m.Cluster, From: m.From.UTC(), To: m.To.UTC(), Reason: m.Reason})
	}
	return u
}

// apiTeamUsage is GET /api/v1/teams/:team/usage: the team usage page's
// figures (usage.FiguresOf of the same teamHours) for its period (from
// and to as the page reads them: usagePeriod), per day or per hour.
func (s *Server) apiTeamUsage(c echo.Context) error {
	team := c.Param("team")
	if err := apiPermits(c, workflow.ActionViewUsage, team); err != nil {
		return err
	}
	if _, err := authorize(c, workflow.ActionViewUsage, workflow.Object{Team: team}); err != nil {
		return err
	}
	pf, from, to, ok := usagePeriod(c, s.opts.Now())
	var bad []problemField
	for _, k := range slices.Sorted(maps.Keys(pf.Errors)) {
		bad = append(bad, problemField{Field: k, Detail: pf.Errors[k]})
	}
	per := c.QueryParam("per")
	switch per {
	case "":
		per = "day"
	case "day", "hour":
	default:
		bad = append(bad, problemField{Field: "per", Detail: `"day" or "hour"`})
	}
	if !ok || len(bad) > 0 {
		return &problemError{status: http.StatusBadRequest, title: "Invalid query", detail: "Some query parameters are not valid.", fields: bad}
	}
	rows, missing, err := s.teamHours(c.Request().Context(), team, from, to)
	if err != nil {
		return err
	}
	hourly := usage.SumByHour(rows)
	u := apiUsageOf(team, per, from, to, usage.FiguresOf(hourly, from, to), hourly, missing)
	q := url.Values{"from": {pf.From}, "to": {pf.To}}.Encode()
	u.Links.Page, u.Links.SummaryCSV = "/teams/"+team+"/usage?"+q, summaryPath(team)+".csv?"+q
	return c.JSON(http.StatusOK, u)
}

// apiStatementRow is a closed month's statement in the list (schema
// StatementRow), as /finance lists it.
type apiStatementRow struct {
	Month    string            `json:"month"`
	Total    string            `json:"total"`
	Currency string            `json:"currency"`
	Hash     string            `json:"hash"`
	ClosedAt time.Time         `json:"closed_at"`
	Links    apiStatementLinks `json:"links"`
}

type apiStatementLinks struct {
	Self string `json:"self"`
	Page string `json:"page"`
	CSV  string `json:"csv"`
	JSON string `json:"json"`
}

func statementLinks(team, month string) apiStatementLinks {
	u := statementURL(team, month)
	return apiStatementLinks{Self: apiPrefix + u, Page: u, CSV: u + "/csv", JSON: u + "/json"}
}

// apiStatements is GET /api/v1/teams/:team/statements: the team's frozen
// statements, newest month first (the store query /finance lists them
// with), and the month in progress, whose statement is a projection.
// Authorized as the statements (costTeam).
func (s *Server) apiStatements(c echo.Context) error {
	if err := apiPermits(c, workflow.ActionViewCosts, c.Param("team")); err != nil {
		return err
	}
	team, err := s.costTeam(c)
	if err != nil {
		return err
	}
	frozen, err := s.opts.DB.FrozenStatements(c.Request().Context(), team)
	if err != nil {
		return err
	}
	type current struct {
		Month string            `json:"month"`
		Links apiStatementLinks `json:"links"`
	}
	month := usage.MonthOf(s.opts.Now()).From.Format("2006-01")
	out := struct {
		Team    string            `json:"team"`
		Items   []apiStatementRow `json:"items"`
		Current current           `json:"current"`
	}{Team: team, Items: []apiStatementRow{}, Current: current{Month: month, Links: statementLinks(team, month)}}
	for _, f := range frozen {
		out.Items = append(out.Items, apiStatementRow{Month: f.Month, Total: f.Total, Currency: f.Currency, Hash: f.Hash,
			ClosedAt: f.ClosedAt.UTC(), Links: statementLinks(team, f.Month)})
	}
	return c.JSON(http.StatusOK, out)
}

// apiStatement is GET /api/v1/teams/:team/statements/:month: the
// statement's JSON export, byte for byte (statementJSON); a frozen one
// carries its recorded hash as a strong ETag.
func (s *Server) apiStatement(c echo.Context) error {
	if err := apiPermits(c, workflow.ActionViewCosts, c.Param("team")); err != nil {
		return err
	}
	st, body, err := s.statementJSON(c)
	if err != nil {
		return err
	}
	if st.Frozen {
		c.Response().Header().Set("ETag", `"`+usage.HashBytes(body)+`"`)
	}
	return c.Blob(http.StatusOK, "application/json", body)
}
