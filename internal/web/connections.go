package web

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

const pageSize = 50

func actor(p workflow.Principal) workflow.Actor { return workflow.Actor{ID: p.UserID, Email: p.Email} }

func choicesOf(cs []workflow.Choice) []views.Choice {
	out := make([]views.Choice, len(cs))
	for i, c := range cs {
		out[i] = views.Choice{Value: c.Value, Label: c.Label}
	}
	return out
}

func fmtWhen(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

func age(d time.Duration) string {
	switch {
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h", int(d.Hours()))
	default:
		return fmt.Sprintf("%d days", int(d.Hours()/24))
	}
}

func (s *Server) row(c store.Connection) views.ConnectionRow {
	return views.ConnectionRow{
		ID: c.ID, Href: fmt.Sprintf("/connections/%d", c.ID), Team: c.Team, State: string(c.State),
		StateLabel: stateLabel(c), Cluster: c.ClusterName, Purpose: c.Purpose, Requester: c.RequesterEmail,
		Updated: fmtWhen(c.UpdatedAt), Waiting: age(s.opts.Now().Sub(c.SubmittedAt)), Orphan: c.Orphan,
	}
}

// scopeTeams is the set of teams whose connections p may list: nil for
// everything (admins and reviewers), else p's own teams.
func scopeTeams(p workflow.Principal) []string {
	if workflow.SeesAllTeams(p) {
		return nil
	}
	teams := []string{}
	for _, m := range p.Memberships {
		teams = append(teams, m.Team)
	}
	return teams
}

// listConnections shows the connections p may see, filtered and paginated.
func (s *Server) listConnections(c echo.Context) error {
	p, ok := principal(c)
	if !ok {
		return echo.NewHTTPError(http.StatusUnauthorized)
	}
	f := store.ListFilter{
		Teams: scopeTeams(p), Team: c.QueryParam("team"), State: workflow.State(c.QueryParam("state")),
		Cluster: strings.TrimSpace(c.QueryParam("cluster")), Query: c.QueryParam("q"),
	}
	if f.State != "" && !f.State.Valid() {
		f.State = ""
	}
	before, _ := strconv.ParseInt(c.QueryParam("before"), 10, 64)
	rows, next, err := s.opts.DB.ListConnections(c.Request().Context(), f, before, pageSize)
	if err != nil {
		return err
	}
	l := views.ConnectionList{
		Heading: "Connections", Lead: "Connection requests and connections you can see.",
		Team: f.Team, State: string(f.State), Cluster: f.Cluster, Query: f.Query, TestID: "connections",
		EmptyTitle: "No connections match", EmptyBody: "Change the filters, or file a request from your team's page.",
	}
	for _, st := range workflow.AllStates {
		l.States = append(l.States, views.Choice{Value: string(st), Label: st.Label()})
	}
	teams := f.Teams
	if teams == nil {
		teams = slices.Sorted(func(yield func(string) bool) {
			for t := range s.opts.Mapping.Teams {
				if !yield(t) {
					return
				}
			}
		})
	}
	for _, t := range teams {
		l.Teams = append(l.Teams, views.Choice{Value: t, Label: t})
	}
	for _, r := range rows {
		l.Rows = append(l.Rows, s.row(r))
	}
	if next != 0 {
		q := c.QueryParams()
		q.Set("before", strconv.FormatInt(next, 10))
		l.NextURL = "/connections?" + q.Encode()
	}
	return render(c, http.StatusOK, views.ConnectionListPage(s.page(c, "Connections"), l))
}

// adminQueue is the admin home: submitted requests, oldest first.
func (s *Server) adminQueue(c echo.Context) error {
	if _, err := authorize(c, workflow.ActionViewAdminHome, workflow.Object{}); err != nil {
		return err
	}
	conns, err := s.opts.DB.Queue(c.Request().Context(), 200)
	if err != nil {
		return err
	}
	rows := make([]views.ConnectionRow, 0, len(conns))
	for _, conn := range conns {
		rows = append(rows, s.row(conn))
	}
	holds, err := s.holdRows(c)
	if err != nil {
		return err
	}
	recs, err := s.recommendationRows(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.AdminQueuePage(s.page(c, "Admin"), rows, recs, holds...))
}

// stateLabel is a connection's state for lists: "Active · change v4 in
// review" while a live connection's change is open.
func stateLabel(c store.Connection) string {
	if c.State.Live() && c.Amendment.Open() {
		return fmt.Sprintf("%s · change v%d %s", c.State.Label(), c.CurrentVersion, c.Amendment.Label())
	}
	return c.State.Label()
}
