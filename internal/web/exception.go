package web

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Exceptions with an expiry (workflow/exception.go): the connection page
// lists a connection's exceptions, and for the contract's exception owner
// or an admin outside the team offers the grant form
// (POST /connections/:id/exceptions) and the early revocation
// (POST /connections/:id/exceptions/revoke). The member page lists the
// exceptions in effect with their end (member.go).

// approvedExceptionFacts are the approved contract's exception owner and
// priority classes ("" and nil before an approval); known, when not nil,
// is a version the caller has loaded already.
func (s *Server) approvedExceptionFacts(ctx context.Context, conn store.Connection, known *store.Version) (string, []string, error) {
	if conn.ApprovedVersion == 0 {
		return "", nil, nil
	}
	if known == nil || known.Version != conn.ApprovedVersion {
		v, err := s.opts.DB.Version(ctx, conn.ID, conn.ApprovedVersion)
		if err != nil {
			return "", nil, err
		}
		known = &v
	}
	return known.Contract.ExceptionOwner, known.Contract.Scheduling.PriorityClasses, nil
}

// approvedOf is whichever of the page's versions is the approved one (nil
// for neither).
func approvedOf(conn store.Connection, cur store.Version, against *store.Version) *store.Version {
	switch {
	case conn.ApprovedVersion == 0:
		return nil
	case cur.Version == conn.ApprovedVersion:
		return &cur
	case against != nil && against.Version == conn.ApprovedVersion:
		return against
	}
	return nil
}

// exceptionRows are xs for the page.
func exceptionRows(xs []workflow.Exception, kueueClass func(string) string) []views.ExceptionRow {
	rows := make([]views.ExceptionRow, 0, len(xs))
	for _, x := range xs {
		r := views.ExceptionRow{ID: x.ID, Class: x.PriorityClass + " (label " + kueueClass(x.PriorityClass) + ")", Reason: x.Reason,
			GrantedBy: x.GrantedBy, Start: fmtWhen(x.Start), End: fmtWhen(x.End), State: string(x.State), Active: x.State == workflow.ExceptionActive}
		switch {
		case x.State == workflow.ExceptionActive && x.AppliedAt.IsZero():
			r.Status = "granted; being applied to the cluster"
		case x.State == workflow.ExceptionActive:
			r.Status = "in effect until " + fmtWhen(x.End)
		case x.State == workflow.ExceptionReverting:
			r.Status = "ended " + fmtWhen(x.EndedAt) + "; being reverted on the cluster"
		default:
			r.Status = "ended " + fmtWhen(x.EndedAt) + "; reverted " + fmtWhen(x.RevertedAt)
		}
		if x.RevokedBy != "" {
			r.Ended = "ended early by " + x.RevokedBy + ": " + x.RevokeReason
		}
		rows = append(rows, r)
	}
	return rows
}

// exceptionPanel fills the connection page's exceptions panel: nil when
// the connection has none and this user may grant none.
func (s *Server) exceptionPanel(ctx context.Context, p workflow.Principal, conn store.Connection, approved *store.Version, d *views.ConnectionDetail) error {
	if conn.ApprovedVersion == 0 {
		return nil // never approved: no exception, none to grant
	}
	xs, err := s.opts.DB.Exceptions(ctx, conn.ID)
	if err != nil {
		return err
	}
	live := conn.State.Live()
	if len(xs) == 0 && !live {
		return nil
	}
	owner, allowedClasses, err := s.approvedExceptionFacts(ctx, conn, approved)
	if err != nil {
		return err
	}
	may := workflow.MayDecideException(p, conn.Team, owner)
	_, ofTeam := p.TeamRole(conn.Team)
	adminOfTeam := ofTeam && p.HasRole(workflow.RoleAdmin)
	if len(xs) == 0 && (may != nil || !live) && !(adminOfTeam && live) {
		return nil
	}
	v := &views.ExceptionsView{Rows: exceptionRows(xs, s.opts.Cluster.KueuePriorityClass), MaxDays: s.opts.Cluster.ExceptionMaxDaysOrDefault(),
		Errors: map[string]string{}}
	switch {
	case may == nil && live:
		v.GrantURL = fmt.Sprintf("/connections/%d/exceptions", conn.ID)
		v.RevokeURL = v.GrantURL + "/revoke"
		v.Classes = workflow.ExceptionClasses(s.opts.Cluster.PriorityClassNames(), allowedClasses)
	case may == nil:
		v.RevokeURL = fmt.Sprintf("/connections/%d/exceptions/revoke", conn.ID)
	case adminOfTeam:
		v.Note = "You cannot grant or end exceptions here: " + workflow.ErrExceptionOwnTeam.Error() + "."
	}
	d.Exceptions = v
	return nil
}

// exceptionDenied is the refusal of a grant or revocation by someone who
// may not decide (they can see the connection: others get 404 first).
func exceptionDenied(err error) error {
	return &userError{page: views.ErrorPage{Status: http.StatusForbidden, Title: "Not allowed",
		Message: "You cannot do this: " + err.Error() + "."}, err: errDenied(err.Error())}
}

// loadExceptionDecision is loadConnection for the exception routes, and
// the rule of who decides (MayDecideException, which the store checks again
// inside the transaction that records the decision).
func (s *Server) loadExceptionDecision(c echo.Context) (workflow.Principal, store.Connection, workflow.Object, error) {
	p, conn, obj, err := s.loadConnection(c)
	if err != nil {
		return p, conn, obj, err
	}
	owner, _, err := s.approvedExceptionFacts(c.Request().Context(), conn, nil)
	if err != nil {
		return p, conn, obj, err
	}
	if err := workflow.MayDecideException(p, conn.Team, owner); err != nil {
		return p, conn, obj, exceptionDenied(err)
	}
	return p, conn, obj, nil
}

// grantException takes the grant form.
func (s *Server) grantException(c echo.Context) error {
	p, conn, obj, err := s.loadExceptionDecision(c)
	if err != nil {
		return err
	}
	in := workflow.ExceptionRequest{PriorityClass: strings.TrimSpace(c.FormValue("priority_class")), Reason: strings.TrimSpace(c.FormValue("reason"))}
	daysText := strings.TrimSpace(c.FormValue("days"))
	errs := map[string]string{}
	if msg := reasonProblem(in.Reason, "Give a reason: it is recorded in the connection's history and shown to the team."); msg != "" {
		errs["reason"] = msg
	}
	maxDays := s.opts.Cluster.ExceptionMaxDaysOrDefault()
	if n, err := strconv.Atoi(daysText); err != nil || n < 1 || n > maxDays {
		errs["days"] = fmt.Sprintf("Enter a whole number of days from 1 to %d (the cluster's maximum).", maxDays)
	} else {
		in.Days = n
	}
	if in.PriorityClass == "" {
		errs["priority_class"] = "Choose the priority class the exception allows."
	}
	if len(errs) == 0 {
		_, err = s.opts.DB.GrantException(c.Request().Context(), conn.ID, p, in, s.opts.Cluster.PriorityClassNames(), maxDays, s.opts.Now())
		if err == nil {
			return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/connections/%d#exceptions", conn.ID))
		}
		if err := s.exceptionError(err, errs); err != nil {
			return err
		}
	}
	d, err := s.detail(c, p, conn, obj)
	if err != nil {
		return err
	}
	if d.Exceptions != nil {
		d.Exceptions.Class, d.Exceptions.Days, d.Exceptions.Reason, d.Exceptions.Errors = in.PriorityClass, daysText, in.Reason, errs
	}
	return s.renderDetail(c, http.StatusUnprocessableEntity, conn.ID, d)
}

// exceptionError sorts a refused decision: an input error goes into errs
// (the form shows it, input kept) and nil is returned; the others are
// pages of their own.
func (s *Server) exceptionError(err error, errs map[string]string) error {
	var ie *workflow.ExceptionInputError
	switch {
	case errors.As(err, &ie):
		field := ie.Field
		if _, ok := errs[field]; ok || field == "" {
			field = "form"
		}
		errs[field] = ie.Msg + "."
		return nil
	case errors.Is(err, workflow.ErrExceptionOwnTeam), errors.Is(err, workflow.ErrExceptionNotOwner):
		return exceptionDenied(err)
	case errors.Is(err, workflow.ErrExceptionNotLive), errors.Is(err, workflow.ErrExceptionEnded):
		return &userError{page: views.ErrorPage{Status: http.StatusConflict, Title: "That is no longer possible",
			Message: "Nothing was changed: " + errors.Unwrap(err).Error() + ". Reload the connection to see where it stands.",
			Action:  "Back", ActionURL: "/connections"}, err: err}
	case errors.Is(err, store.ErrNotFound):
		return echo.NewHTTPError(http.StatusNotFound)
	}
	return s.lifecycleError(err)
}

// revokeException takes an early revocation.
func (s *Server) revokeException(c echo.Context) error {
	p, conn, obj, err := s.loadExceptionDecision(c)
	if err != nil {
		return err
	}
	xid, err := strconv.ParseInt(c.FormValue("exception"), 10, 64)
	if err != nil || xid <= 0 {
		return echo.NewHTTPError(http.StatusNotFound)
	}
	reason := strings.TrimSpace(c.FormValue("reason"))
	errs := map[string]string{}
	if msg := reasonProblem(reason, "Say why the exception ends early: it is recorded and sent to the team."); msg != "" {
		errs["revoke_reason"] = msg
	} else {
		err = s.opts.DB.RevokeException(c.Request().Context(), conn.ID, xid, p, reason, s.opts.Now())
		if err == nil {
			return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/connections/%d#exceptions", conn.ID))
		}
		if err := s.exceptionError(err, errs); err != nil {
			return err
		}
		if msg, ok := errs["reason"]; ok {
			errs["revoke_reason"] = msg
			delete(errs, "reason")
		}
	}
	d, err := s.detail(c, p, conn, obj)
	if err != nil {
		return err
	}
	if d.Exceptions != nil {
		d.Exceptions.RevokeID, d.Exceptions.RevokeReason, d.Exceptions.Errors = xid, reason, errs
	}
	return s.renderDetail(c, http.StatusUnprocessableEntity, conn.ID, d)
}

// exceptionsHome is /exceptions (views.ExceptionsPage): the live
// connections whose approved contract names the reader as exception owner
// (they view those connections: workflow.viewConnection), and for admins
// every connection with an exception in effect. Each row links to the
// connection's exceptions panel, where the grant and the early end are.
func (s *Server) exceptionsHome(c echo.Context) error {
	p, ok := principal(c)
	if !ok {
		return echo.NewHTTPError(http.StatusUnauthorized)
	}
	ctx := c.Request().Context()
	var mine []store.Connection
	if p.Email != "" {
		var err error
		if mine, err = s.opts.DB.LiveConnectionsOfExceptionOwner(ctx, p.Email); err != nil {
			return err
		}
	}
	v := views.ExceptionsHome{Admin: workflow.SeesAllExceptions(p), MaxDays: s.opts.Cluster.ExceptionMaxDaysOrDefault()}
	var active []store.Connection
	ids := make([]int64, 0, len(mine))
	for _, conn := range mine {
		ids = append(ids, conn.ID)
	}
	if v.Admin {
		ids = nil // every connection's
	}
	inEffect, err := s.opts.DB.ExceptionsInEffect(ctx, ids)
	if err != nil {
		return err
	}
	if v.Admin {
		// One query for every connection with an exception in effect.
		if active, err = s.opts.DB.ConnectionsByID(ctx, slices.Collect(maps.Keys(inEffect))); err != nil {
			return err
		}
	}
	row := func(conn store.Connection) views.ExceptionsHomeRow {
		_, own := p.TeamRole(conn.Team)
		r := views.ExceptionsHomeRow{ID: conn.ID, Team: conn.Team, Purpose: conn.Purpose, URL: fmt.Sprintf("/connections/%d#exceptions", conn.ID), OwnTeam: own}
		var classes []string
		for _, x := range inEffect[conn.ID] {
			classes = append(classes, x.PriorityClass+" until "+fmtWhen(x.End))
		}
		r.InEffect = strings.Join(classes, "; ")
		return r
	}
	for _, conn := range mine {
		v.Mine = append(v.Mine, row(conn))
	}
	for _, conn := range active {
		v.Active = append(v.Active, row(conn))
	}
	return render(c, http.StatusOK, views.ExceptionsPage(s.page(c, "Exceptions"), v))
}
