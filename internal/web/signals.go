package web

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// ClusterSignalOwner answers for the cluster's own signals (capacity, node
// health): they belong to no team's contract.
const ClusterSignalOwner = "platform admins"

// maxAckNote bounds an acknowledgement's note.
const maxAckNote = 2000

// NewSignals is the signal evaluator over db's usage rows with the
// accelerators per instance type of the cluster settings and util's GPU
// utilization (nil without --prometheus-url); cmd/portal runs its Evaluate
// periodically, the pages call Statuses.
func NewSignals(db *store.DB, cs provision.ClusterSettings, util usage.Utilization, logger *slog.Logger) usage.Signals {
	acc := map[string]int{}
	for t, r := range cs.WithDefaults().Accelerators {
		acc[t] = r.Accelerators
	}
	return usage.Signals{Store: db, Accelerators: acc, Thresholds: usage.DefaultThresholds, ClusterOwner: ClusterSignalOwner, Utilization: util, Logger: logger}
}

// Signals is the server's evaluator: its database, cluster settings and
// utilization source (Options.Utilization). cmd/portal's loop and the pages
// both take it from here, so that what fires and what the pages show read
// the same sources.
func (s *Server) Signals(logger *slog.Logger) usage.Signals {
	return NewSignals(s.opts.DB, s.opts.Cluster, s.opts.Utilization, logger)
}

// teamSignals is a team's signals: their status now and the events that
// fired, each open one with an acknowledgement form for those who may.
func (s *Server) teamSignals(c echo.Context) error {
	team := c.Param("team")
	p, err := authorize(c, workflow.ActionViewSignals, workflow.Object{Team: team})
	if err != nil {
		return err
	}
	v, err := s.signalsView(c, p, []string{team}, 0, "", "")
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.SignalsPage(s.page(c, "Signals · team "+team), v))
}

// allSignals is the admins' view: the cluster's signals and every team's.
func (s *Server) allSignals(c echo.Context) error {
	p, err := authorize(c, workflow.ActionViewSignals, workflow.Object{})
	if err != nil {
		return err
	}
	v, err := s.signalsView(c, p, nil, 0, "", "")
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.SignalsPage(s.page(c, "Signals"), v))
}

// ackTeamSignal acknowledges one of a team's fired signals.
func (s *Server) ackTeamSignal(c echo.Context) error {
	team := c.Param("team")
	p, err := authorize(c, workflow.ActionAckSignal, workflow.Object{Team: team})
	if err != nil {
		return err
	}
	return s.ackSignal(c, p, []string{team}, c.Param("id"), "/teams/"+team+"/signals")
}

// ackAnySignal is the admins' acknowledgement, of any team's or the
// cluster's signal.
func (s *Server) ackAnySignal(c echo.Context) error {
	p, err := authorize(c, workflow.ActionViewSignals, workflow.Object{})
	if err != nil {
		return err
	}
	return s.ackSignal(c, p, nil, c.FormValue("id"), "/admin/signals")
}

func (s *Server) ackSignal(c echo.Context, p workflow.Principal, teams []string, rawID, back string) error {
	ctx := c.Request().Context()
	id, err := strconv.ParseInt(rawID, 10, 64)
	if err != nil || id <= 0 {
		return echo.NewHTTPError(http.StatusNotFound)
	}
	ev, err := s.opts.DB.SignalEvent(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && teams != nil && ev.Team != teams[0] {
		// Another team's event does not exist from here.
		return echo.NewHTTPError(http.StatusNotFound)
	}
	if err != nil {
		return err
	}
	// The right is decided on the event's own team (the cluster's: "").
	if _, err := authorize(c, workflow.ActionAckSignal, workflow.Object{Team: ev.Team}); err != nil {
		return err
	}
	note := strings.TrimSpace(c.FormValue("note"))
	title := "Signals"
	if teams != nil {
		title += " · team " + teams[0]
	}
	rerender := func(status int, msg string) error {
		v, err := s.signalsView(c, p, teams, id, note, msg)
		if err != nil {
			return err
		}
		return render(c, status, views.SignalsPage(s.page(c, title), v))
	}
	switch {
	case note == "":
		return rerender(http.StatusUnprocessableEntity, "Write a note: what you found and what happens next. It is kept with the signal and in the audit trail.")
	case utf8.RuneCountInString(note) > maxAckNote:
		return rerender(http.StatusUnprocessableEntity, fmt.Sprintf("Keep the note under %d characters.", maxAckNote))
	}
	err = s.opts.DB.AckSignal(ctx, id, actor(p), note, s.opts.Now())
	if errors.Is(err, store.ErrAcknowledged) {
		return rerender(http.StatusConflict, "Someone acknowledged this signal meanwhile; their note is shown below.")
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, back)
}

// signalsView builds the page: teams nil is every team and the cluster.
// errID, note and errMsg re-show a refused acknowledgement with its input.
func (s *Server) signalsView(c echo.Context, p workflow.Principal, teams []string, errID int64, note, errMsg string) (views.Signals, error) {
	ctx := c.Request().Context()
	now := s.opts.Now()
	sig := s.Signals(s.opts.Logger)
	statuses, err := sig.Statuses(ctx, now, teams)
	if err != nil {
		return views.Signals{}, err
	}
	v := views.Signals{AckURL: "/admin/signals"}
	if teams != nil {
		v.Team = teams[0]
		v.AckURL = "/teams/" + teams[0] + "/signals"
	}
	for _, st := range statuses {
		v.Statuses = append(v.Statuses, views.SignalRow{
			Title: st.Kind.Title(), Team: orCluster(st.Team), State: string(st.State), Threshold: st.Threshold,
			Current: st.Current, Intent: st.Intent, Owner: st.Owner, Response: st.Response,
		})
	}
	if teams != nil && len(v.Statuses) == 0 {
		v.NoLiveConnection = true
	}
	events, err := s.opts.DB.SignalEvents(ctx, store.SignalFilter{Teams: teams})
	if err != nil {
		return views.Signals{}, err
	}
	for _, e := range events {
		r := views.SignalEventRow{
			ID: e.ID, Title: e.Signal.Title(), Team: orCluster(e.Team), FiredAt: fmtWhen(e.FiredAt), Detail: e.Detail,
			Owner: e.Owner, Response: e.Response, Open: e.Open(), AckBy: e.AckBy, AckNote: e.AckNote,
		}
		if !e.Open() {
			r.AckAt = fmtWhen(e.AckAt)
		}
		if e.Open() && workflow.Decide(p, workflow.ActionAckSignal, workflow.Object{Team: e.Team}).Allowed {
			r.AckAction = fmt.Sprintf("%s/%d/ack", v.AckURL, e.ID)
			if teams == nil { // the admins' form names the event in its body
				r.AckAction, r.AckID = v.AckURL+"/ack", e.ID
			}
		}
		if e.ID == errID {
			r.Note, r.Error = note, errMsg
		}
		v.Events = append(v.Events, r)
	}
	return v, nil
}

func orCluster(team string) string {
	if team == "" {
		return "cluster"
	}
	return team
}
