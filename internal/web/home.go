package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// home is the landing page for visitors and the role overview for users.
func (s *Server) home(c echo.Context) error {
	p, ok := principal(c)
	if !ok {
		return render(c, http.StatusOK, views.LandingPage(s.page(c, "Welcome"), views.Landing{}))
	}
	var h views.Home
	for _, m := range p.Memberships {
		body := "Your team's connection to the shared cluster: namespace, queue and quota, and how much of it the team uses."
		action := "Open team " + m.Team
		if m.Role == workflow.TeamOwner {
			body = "Request and manage your team's connection to the shared cluster, and follow its approval, usage and reviews."
		}
		h.Cards = append(h.Cards, views.HomeCard{Title: "Team " + m.Team + " (" + string(m.Role) + ")", Body: body,
			Href: "/teams/" + m.Team, Action: action, TestID: "card-team-" + m.Team, UsageHref: "/teams/" + m.Team + "/usage"})
	}
	if workflow.Decide(p, workflow.ActionViewAdminHome, workflow.Object{}).Allowed {
		h.Cards = append(h.Cards, views.HomeCard{Title: "Cluster admin", Body: "Approve connection requests, watch provisioning, revoke access.",
			Href: "/admin", Action: "Open the admin queue", TestID: "card-admin"})
	}
	if workflow.Decide(p, workflow.ActionViewReviewHome, workflow.Object{}).Allowed {
		body, err := s.reviewCardBody(c)
		if err != nil {
			return err
		}
		h.Cards = append(h.Cards, views.HomeCard{Title: "Reviews", Body: body,
			Href: "/reviews", Action: "Open reviews", TestID: "card-reviews"})
	}
	if workflow.Decide(p, workflow.ActionViewFinanceHome, workflow.Object{}).Allowed {
		h.Cards = append(h.Cards, views.HomeCard{Title: "Usage and cost", Body: "Per-team usage, cost and monthly chargeback.",
			Href: "/finance", Action: "Open usage and cost", TestID: "card-finance"})
	}
	return render(c, http.StatusOK, views.HomePage(s.page(c, "Home"), h))
}

func (s *Server) signedOut(c echo.Context) error {
	if _, ok := principal(c); ok {
		return c.Redirect(http.StatusSeeOther, "/")
	}
	return render(c, http.StatusOK, views.LandingPage(s.page(c, "Signed out"), views.Landing{SignedOut: true}))
}

// teamHome lists a team's connections; owners can file a new request.
func (s *Server) teamHome(c echo.Context) error {
	team := c.Param("team")
	p, err := authorize(c, workflow.ActionViewTeam, workflow.Object{Team: team})
	if err != nil {
		return err
	}
	rows, _, err := s.opts.DB.ListConnections(c.Request().Context(), store.ListFilter{Team: team}, 0, pageSize)
	if err != nil {
		return err
	}
	l := views.ConnectionList{
		Heading: "Team " + team, Lead: "Team " + team + "'s requests and connections to the shared HyperPod cluster.",
		Team: team, TestID: "team-home", EmptyTitle: "No connection yet",
		SubmitURL: "/teams/" + team + "/submit", SignalsURL: "/teams/" + team + "/signals",
	}
	if workflow.Decide(p, workflow.ActionViewUsage, workflow.Object{Team: team}).Allowed {
		l.UsageURL = "/teams/" + team + "/usage"
	}
	for _, st := range workflow.AllStates {
		l.States = append(l.States, views.Choice{Value: string(st), Label: st.Label()})
	}
	for _, r := range rows {
		l.Rows = append(l.Rows, s.row(r))
	}
	role, _ := p.TeamRole(team)
	switch {
	case workflow.Decide(p, workflow.ActionCreateRequest, workflow.Object{Team: team}).Allowed:
		l.CreateURL = "/teams/" + team + "/connections/new"
		l.EmptyBody = "Team " + team + " has no connection to the shared cluster. File a connection contract: purpose, owners, identities, scheduling policy and review cadence; an admin approves that exact version and the portal provisions it."
	case role == workflow.TeamMember:
		l.EmptyBody = "Team " + team + " has no connection yet. When your team's owner has one approved, you will find its namespace, queue and quota here. Ask your team's owner to request one."
	default:
		l.EmptyBody = "Team " + team + " has no connection to the shared cluster yet."
	}
	if len(rows) == pageSize {
		l.NextURL = "/connections?team=" + team
	}
	return render(c, http.StatusOK, views.ConnectionListPage(s.page(c, "Team "+team), l))
}
