package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
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

// The reviewer's pages (issue 13): the queue of open reviews, one review
// with its frozen evidence and the decision form, and the reviews on a
// connection's page. Who may read a review is workflow.ActionViewReview
// (reviewers, admins, the team's owners; everyone else gets 404), who may
// decide it workflow.ActionReview on its connection.

// reviewPageSize bounds one page of the review queue.
var reviewPageSize = 50

// reviewHome is the reviewer's queue: open reviews, the longest due first,
// filtered by team and trigger.
func (s *Server) reviewHome(c echo.Context) error {
	if _, err := authorize(c, workflow.ActionViewReviewHome, workflow.Object{}); err != nil {
		return err
	}
	ctx := c.Request().Context()
	now := s.opts.Now()
	today := now.UTC().Format(workflow.DateLayout)
	q := c.QueryParams()
	teams, err := s.reviewTeams(c)
	if err != nil {
		return err
	}
	v := views.ReviewQueue{Today: today}
	var problems []string
	f := store.ReviewFilter{Team: strings.TrimSpace(q.Get("team")), Trigger: workflow.ReviewTrigger(strings.TrimSpace(q.Get("trigger")))}
	if f.Team != "" && !slices.Contains(teams, f.Team) {
		problems = append(problems, fmt.Sprintf("There is no team %q with reviews; showing every team.", f.Team))
		f.Team = ""
	}
	if f.Trigger != "" && !f.Trigger.Valid() {
		problems = append(problems, fmt.Sprintf("%q is not a review trigger; showing every trigger.", string(f.Trigger)))
		f.Trigger = ""
	}
	var after store.ReviewCursor
	if a := q.Get("after"); a != "" {
		var ok bool
		if after, ok = parseReviewCursor(a); !ok {
			problems = append(problems, "The page link is not valid; showing the first page.")
		}
	}
	rows, next, err := s.opts.DB.ReviewQueuePage(ctx, f, after, reviewPageSize)
	if err != nil {
		return err
	}
	if v.Open, v.Overdue, err = s.opts.DB.ReviewCounts(ctx, today); err != nil {
		return err
	}
	v.Team, v.Trigger, v.Filtered = f.Team, string(f.Trigger), f.Team != "" || f.Trigger != ""
	v.FilterError = strings.Join(problems, " ")
	for _, t := range teams {
		v.Teams = append(v.Teams, views.Choice{Value: t, Label: t})
	}
	for _, t := range workflow.AllReviewTriggers {
		v.Triggers = append(v.Triggers, views.Choice{Value: string(t), Label: t.Label()})
	}
	for _, r := range rows {
		if r.Tampered {
			r.Detail += " — its stored evidence no longer matches the hash it was frozen with; tell the platform team"
		}
		v.Rows = append(v.Rows, views.ReviewQueueRow{
			ID: r.ID, Href: fmt.Sprintf("/reviews/%d", r.ID), ConnectionID: r.ConnectionID, ConnectionHref: fmt.Sprintf("/connections/%d", r.ConnectionID),
			Team: r.Team, Purpose: r.Purpose, TriggerLabel: r.Trigger.Label(), Event: r.Trigger.Event(), Detail: r.Detail,
			DueOn: r.DueOn, DaysOverdue: workflow.DaysOverdue(r.DueOn, now), OpenedAt: fmtWhen(r.OpenedAt),
			MoreTriggers: r.MoreTriggers, Orphan: r.Orphan, Demo: r.Demo,
		})
	}
	if next.ID != 0 {
		nq := url.Values{}
		if f.Team != "" {
			nq.Set("team", f.Team)
		}
		if f.Trigger != "" {
			nq.Set("trigger", string(f.Trigger))
		}
		nq.Set("after", fmt.Sprintf("%s~%d", next.DueOn, next.ID))
		v.NextURL = "/reviews?" + nq.Encode()
	}
	status := http.StatusOK
	if len(problems) > 0 {
		status = http.StatusBadRequest
	}
	return render(c, status, views.ReviewQueuePage(s.page(c, "Reviews"), v))
}

// parseReviewCursor reads the queue's "after" parameter: due date ~ id.
func parseReviewCursor(s string) (store.ReviewCursor, bool) {
	due, id, ok := strings.Cut(s, "~")
	if !ok {
		return store.ReviewCursor{}, false
	}
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || n <= 0 {
		return store.ReviewCursor{}, false
	}
	if _, err := time.Parse(workflow.DateLayout, due); err != nil {
		return store.ReviewCursor{}, false
	}
	return store.ReviewCursor{DueOn: due, ID: n}, true
}

// reviewTeams are the teams the queue filters by: the mapped teams and
// any other team with an open review.
func (s *Server) reviewTeams(c echo.Context) ([]string, error) {
	open, err := s.opts.DB.ReviewTeams(c.Request().Context())
	if err != nil {
		return nil, err
	}
	teams := slices.Clone(open)
	for t := range s.opts.Mapping.Teams {
		if !slices.Contains(teams, t) {
			teams = append(teams, t)
		}
	}
	slices.Sort(teams)
	return teams, nil
}

// loadReview loads a review, its connection and the policy object of the
// connection. A review the principal may not read is not found.
func (s *Server) loadReview(c echo.Context) (workflow.Principal, store.Review, store.Connection, workflow.Object, error) {
	var (
		r    store.Review
		conn store.Connection
		obj  workflow.Object
	)
	p, id, err := principalAndID(c)
	if err != nil {
		return p, r, conn, obj, err
	}
	ctx := c.Request().Context()
	r, err = s.opts.DB.Review(ctx, id)
	// Who may read the review is decided before anything about it is
	// said: a review whose evidence was altered is still another team's
	// review (404), not a 500 that tells them it exists (issue 32 nit).
	// The store returns the row with ErrEvidenceTampered.
	if err == nil || errors.Is(err, store.ErrEvidenceTampered) {
		if d := workflow.Decide(p, workflow.ActionViewReview, workflow.Object{Team: r.Team}); !d.Allowed {
			return p, r, conn, obj, &echo.HTTPError{Code: http.StatusNotFound, Internal: errDenied(d.Reason)}
		}
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return p, r, conn, obj, echo.NewHTTPError(http.StatusNotFound)
	case errors.Is(err, store.ErrEvidenceTampered):
		return p, r, conn, obj, &userError{page: views.ErrorPage{Status: http.StatusInternalServerError, Title: "This review's evidence was changed",
			Message: "The evidence stored with this review no longer matches the hash it was frozen with, so the portal does not show it. Tell the platform team: the database was changed outside the portal."}, err: err}
	case err != nil:
		return p, r, conn, obj, err
	}
	if conn, err = s.opts.DB.Connection(ctx, r.ConnectionID); err != nil {
		return p, r, conn, obj, err
	}
	obj = workflow.Object{Team: conn.Team, State: conn.State, Amendment: conn.Amendment, RequesterID: conn.RequesterID}
	if obj.EditorIDs, err = s.opts.DB.EditorIDs(ctx, conn.ID); err != nil {
		return p, r, conn, obj, err
	}
	if obj.SubmitterIDs, err = s.opts.DB.SubmitterIDs(ctx, conn.ID); err != nil {
		return p, r, conn, obj, err
	}
	return p, r, conn, obj, nil
}

func (s *Server) showReview(c echo.Context) error {
	p, r, conn, obj, err := s.loadReview(c)
	if err != nil {
		return err
	}
	v := s.reviewPage(p, r, conn, obj, views.ReviewForm{})
	return render(c, http.StatusOK, views.ReviewDetailPage(s.page(c, fmt.Sprintf("Review #%d", r.ID)), v))
}

// reviewPage builds the review page: the review, its frozen evidence, the
// decision or the form.
func (s *Server) reviewPage(p workflow.Principal, r store.Review, conn store.Connection, obj workflow.Object, form views.ReviewForm) views.ReviewPage {
	now := s.opts.Now()
	base := fmt.Sprintf("/connections/%d", r.ConnectionID)
	v := views.ReviewPage{
		ID: r.ID, ConnectionID: r.ConnectionID, ConnectionHref: base, Team: r.Team, Version: r.Version,
		VersionJSONURL: fmt.Sprintf("%s/versions/%d/contract.json", base, r.Version),
		VersionYAMLURL: fmt.Sprintf("%s/versions/%d/contract.yaml", base, r.Version),
		TriggerLabel:   r.Trigger.Label(), Detail: r.Detail, DueOn: r.DueOn, DaysOverdue: workflow.DaysOverdue(r.DueOn, now),
		OpenedAt: fmtWhen(r.OpenedAt), EvidenceHash: r.EvidenceHash, FrozenAt: fmtWhen(r.OpenedAt),
		MoreTriggers: r.MoreTriggers, Demo: r.Demo, Orphan: conn.Orphan, Open: r.Open(),
		Decision: string(r.Decision), DecisionLabel: r.Decision.Label(), DecidedBy: r.DecidedByEmail, DecidedAt: fmtWhen(r.DecidedAt),
		Reason: r.Reason, Deadline: r.Deadline, Form: form,
		MinDate: now.UTC().AddDate(0, 0, 1).Format(workflow.DateLayout),
	}
	v.Evidence, v.EvidenceError = evidenceView(r.Evidence)
	if v.Open {
		if d := workflow.Decide(p, workflow.ActionReview, obj); d.Allowed {
			v.DecideURL = fmt.Sprintf("/reviews/%d/decide", r.ID)
			for _, d := range workflow.AllReviewDecisions {
				v.Decisions = append(v.Decisions, views.Choice{Value: string(d), Label: d.Label()})
			}
		} else if p.HasRole(workflow.RoleReviewer) {
			v.DecideNote = "You cannot decide this review: " + d.Reason + "."
		}
	}
	return v
}

// evidenceView renders the frozen evidence (workflow.Evidence) as the
// review page shows it; a body that is not that JSON is reported, not
// guessed at.
func evidenceView(raw []byte) (*views.ReviewEvidenceView, string) {
	var ev workflow.Evidence
	if err := json.Unmarshal(raw, &ev); err != nil {
		return nil, "The evidence frozen with this review cannot be read as the portal's evidence format: " + err.Error() + "."
	}
	num := func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }
	v := &views.ReviewEvidenceView{
		CollectedAt: fmtWhen(ev.CollectedAt), ContractVersion: ev.Contract.Version, ContractHash: ev.Contract.Hash,
		ApprovedAt: fmtWhen(ev.Contract.ApprovedAt), Orphan: ev.Orphan, Gaps: ev.Gaps,
	}
	if ev.Contract.Version > 0 {
		for _, ch := range workflow.Diff(workflow.Contract{}, ev.Contract.Contract) {
			v.Fields = append(v.Fields, views.FieldRow{Label: ch.Label, Value: ch.New})
		}
	}
	for _, c := range ev.Changes {
		v.Changes = append(v.Changes, views.EvidenceChangeRow{Version: c.Version, Hash: short(c.Hash), ApprovedAt: fmtWhen(c.ApprovedAt),
			ApprovedBy: c.ApprovedBy, Fields: strings.Join(c.Fields, ", ")})
	}
	if d := ev.Drift; d != nil {
		v.Drift = &views.EvidenceDriftView{CheckedAt: fmtWhen(d.CheckedAt), Status: d.Status, Findings: d.Findings}
	}
	for _, o := range ev.Owners {
		last := fmtWhen(o.LastSignIn)
		if last == "" {
			last = "never signed in"
		}
		v.Owners = append(v.Owners, views.EvidenceOwnerRow{Role: o.Role, Email: o.Email, InOwnersGroup: o.InOwnersGroup, LastSignIn: last})
	}
	if u := ev.Usage; u != nil {
		uv := &views.EvidenceUsageView{LastWorkload: fmtWhen(u.LastWorkload)}
		if uv.LastWorkload == "" {
			uv.LastWorkload = "none seen"
		}
		for _, w := range []workflow.EvidenceWindow{u.Last30, u.Last90} {
			cost := w.Cost
			if cost == "" {
				cost = "no rate card"
			}
			uv.Windows = append(uv.Windows, views.EvidenceWindowRow{Days: w.Days, Guaranteed: num(w.GuaranteedGPUHours), Used: num(w.UsedGPUHours),
				Borrowed: num(w.BorrowedGPUHours), Cost: cost, Missing: w.Missing})
		}
		v.Usage = uv
	}
	for _, sg := range ev.Signals {
		v.Signals = append(v.Signals, views.EvidenceSignalRow{Signal: usage.SignalKind(sg.Signal).Title(), FiredAt: fmtWhen(sg.FiredAt), Detail: sg.Detail})
	}
	for _, x := range ev.Exceptions {
		line := fmt.Sprintf("#%d: priority class %s, %s to %s, granted by %s (%s); %s", x.ID, x.PriorityClass, fmtWhen(x.Start), fmtWhen(x.End), x.GrantedBy, x.Reason, x.State)
		if x.EndedEarlyBy != "" {
			line += ", ended early by " + x.EndedEarlyBy
		}
		v.Exceptions = append(v.Exceptions, line)
	}
	return v, ""
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}

const reviewReasonNeeded = "Give a reason: it is recorded in the contract's history and the audit trail, and the team reads it."

// decideReview records a reviewer's decision on an open review
// (runReviewDecision); bad input: the form again with its messages.
func (s *Server) decideReview(c echo.Context) error {
	p, r, conn, obj, err := s.loadReview(c)
	if err != nil {
		return err
	}
	form := views.ReviewForm{Decision: c.FormValue("decision"), Reason: strings.TrimSpace(c.FormValue("reason")),
		Deadline: strings.TrimSpace(c.FormValue("deadline"))}
	form.Errors, err = s.runReviewDecision(c, p, r, obj, form)
	switch {
	case err != nil:
		return err
	case len(form.Errors) > 0:
		v := s.reviewPage(p, r, conn, obj, form)
		return render(c, http.StatusUnprocessableEntity, views.ReviewDetailPage(s.page(c, fmt.Sprintf("Review #%d", r.ID)), v))
	}
	return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/reviews/%d", r.ID))
}

// runReviewDecision is the command behind both doors (the review page's
// form, the API's POST /api/v1/reviews/{id}/decision): p's decision in
// (its Decision, Reason and Deadline) on the open review r, authorized by
// workflow.Decide and recorded by the store, whose transaction checks the
// review is still open and p independent. Bad input is returned by field
// (decision, reason, deadline); a refusal is the error (409 when the review
// was decided meanwhile, 403 when p may not decide it).
func (s *Server) runReviewDecision(c echo.Context, p workflow.Principal, r store.Review, obj workflow.Object, in views.ReviewForm) (map[string]string, error) {
	if !r.Open() {
		return nil, s.reviewClosed(r)
	}
	if err := allowed(p, workflow.ActionReview, obj); err != nil {
		return nil, err
	}
	now := s.opts.Now()
	in.Reason, in.Deadline = strings.TrimSpace(in.Reason), strings.TrimSpace(in.Deadline)
	errs := map[string]string{}
	dec := workflow.ReviewDecision(in.Decision)
	if !dec.Valid() {
		errs["decision"] = "Choose a decision: renew, request changes, hold or recommend revocation."
	}
	if msg := reasonProblem(in.Reason, reviewReasonNeeded); msg != "" {
		errs["reason"] = msg
	}
	deadline := ""
	if dec == workflow.ReviewRequestChanges {
		var err error
		if deadline, err = workflow.ReviewDeadline(in.Deadline, now); err != nil {
			errs["deadline"] = err.Error()
		}
	}
	if len(errs) > 0 {
		return errs, nil
	}
	_, err := s.opts.DB.DecideReview(c.Request().Context(), r.ID, actor(p),
		workflow.DecideReviewInput{Decision: dec, Reason: in.Reason, Deadline: deadline}, now)
	var stale *store.StaleError
	switch {
	case errors.Is(err, workflow.ErrReviewClosed), errors.As(err, &stale):
		fresh, ferr := s.opts.DB.Review(c.Request().Context(), r.ID)
		if ferr != nil {
			return nil, ferr
		}
		return nil, s.reviewClosed(fresh)
	case errors.Is(err, workflow.ErrNotIndependent):
		return nil, &userError{page: views.ErrorPage{Status: http.StatusForbidden, Title: "Not allowed",
			Message: "You cannot decide this review: nobody reviews a request they filed, submitted or edited."}, err: err}
	case errors.Is(err, workflow.ErrReviewReason):
		return map[string]string{"reason": reviewReasonNeeded}, nil
	case errors.Is(err, workflow.ErrReviewDeadline):
		return map[string]string{"deadline": err.Error()}, nil
	case err != nil:
		return nil, s.lifecycleError(err)
	}
	return nil, nil
}

// reviewClosed is the 409 page of a decision on a review that is no
// longer open (decided meanwhile, by someone else or in another tab).
func (s *Server) reviewClosed(r store.Review) error {
	msg := "This review was already decided, so your decision was not recorded."
	if !r.Open() {
		msg = fmt.Sprintf("This review was already decided by %s at %s (%s: %s), so your decision was not recorded. A new review opens when the next one comes due or an event calls for it.",
			r.DecidedByEmail, fmtWhen(r.DecidedAt), r.Decision.Label(), r.Reason)
	}
	return &userError{page: views.ErrorPage{Status: http.StatusConflict, Title: "This review is already decided", Message: msg,
		Action: "See the review", ActionURL: fmt.Sprintf("/reviews/%d", r.ID)}, err: workflow.ErrReviewClosed}
}

// connectionReviews fills the reviews part of a connection's page: the
// next due date and the orphan flag for everyone who sees the connection;
// the open review, the history and a recommendation waiting for an admin
// for those who may read its reviews.
func (s *Server) connectionReviews(c echo.Context, p workflow.Principal, conn store.Connection, obj workflow.Object, d *views.ConnectionDetail) error {
	d.Orphan = conn.Orphan
	if !conn.State.Committed() && conn.ApprovedVersion == 0 {
		return nil
	}
	ctx := c.Request().Context()
	now := s.opts.Now()
	rv := &views.ConnectionReviews{ReviewDue: conn.ReviewDue}
	if conn.State.Live() {
		rv.DaysOverdue = workflow.DaysOverdue(conn.ReviewDue, now)
	}
	if workflow.Decide(p, workflow.ActionViewReview, workflow.Object{Team: conn.Team}).Allowed {
		reviews, err := s.opts.DB.ReviewsOf(ctx, conn.ID)
		if err != nil {
			return err
		}
		for _, r := range reviews {
			href := fmt.Sprintf("/reviews/%d", r.ID)
			if r.Open() {
				rv.OpenHref = href
				rv.OpenLabel = fmt.Sprintf("Review #%d is open (%s, due %s)", r.ID, r.Trigger.Label(), r.DueOn)
			}
			rv.History = append(rv.History, views.ReviewHistoryRow{Href: href, OpenedAt: fmtWhen(r.OpenedAt), TriggerLabel: r.Trigger.Label(),
				Decision: r.Decision.Label(), DecidedBy: r.DecidedByEmail, DecidedAt: fmtWhen(r.DecidedAt), Reason: r.Reason,
				Deadline: r.Deadline, Demo: r.Demo})
		}
		if len(reviews) > 0 && reviews[0].Decision == workflow.ReviewRecommendRevocation && conn.State == workflow.StateUnderReview {
			r := reviews[0]
			rec := &views.RecommendationView{ReviewHref: fmt.Sprintf("/reviews/%d", r.ID), By: r.DecidedByEmail, At: fmtWhen(r.DecidedAt), Reason: r.Reason}
			if dec := workflow.Decide(p, workflow.ActionDeclineRevocation, obj); dec.Allowed {
				rec.DeclineURL = fmt.Sprintf("/connections/%d/decline-revocation", conn.ID)
			} else if p.HasRole(workflow.RoleAdmin) {
				rec.DeclineNote = "You cannot decline it: " + dec.Reason + "."
			}
			rv.Recommendation = rec
		}
	}
	if rv.ReviewDue == "" && len(rv.History) == 0 && !conn.State.Live() {
		return nil
	}
	d.Reviews = rv
	return nil
}

// declineRevocation is an admin declining a reviewer's recommendation of
// revocation: the connection goes back to active, with a reason.
func (s *Server) declineRevocation(c echo.Context) error {
	p, conn, obj, err := s.loadConnection(c)
	if err != nil {
		return err
	}
	if err := allowed(p, workflow.ActionDeclineRevocation, obj); err != nil {
		return err
	}
	const needed = "Give a reason: it is recorded in the connection's history and sent to the reviewers and the team."
	reason := strings.TrimSpace(c.FormValue("reason"))
	msg := reasonProblem(reason, needed)
	if msg == "" {
		_, err = s.opts.DB.DeclineRevocation(c.Request().Context(), conn.ID, actor(p), reason, s.opts.Now())
		var stale *store.StaleError
		switch {
		case err == nil:
			return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/connections/%d", conn.ID))
		case errors.Is(err, workflow.ErrNoRecommendation), errors.As(err, &stale):
			return noRecommendation(conn.ID, err)
		case errors.Is(err, workflow.ErrNotIndependent):
			return &userError{page: views.ErrorPage{Status: http.StatusForbidden, Title: "Not allowed",
				Message: "You cannot decline it: nobody decides on a request they filed, submitted or edited."}, err: err}
		case errors.Is(err, workflow.ErrReviewReason):
			msg = needed
		default:
			return s.lifecycleError(err)
		}
	}
	// The form again with its error; the recommendation it answers must
	// still wait (the store checks it again in the decision's transaction).
	if _, pending, err := s.opts.DB.PendingRecommendation(c.Request().Context(), conn.ID); err != nil {
		return err
	} else if !pending {
		return noRecommendation(conn.ID, workflow.ErrNoRecommendation)
	}
	d, err := s.detail(c, p, conn, obj)
	if err != nil {
		return err
	}
	if d.Reviews != nil && d.Reviews.Recommendation != nil {
		d.Reviews.Recommendation.DeclineReason, d.Reviews.Recommendation.DeclineError = reason, msg
	}
	return s.renderDetail(c, http.StatusUnprocessableEntity, conn.ID, d)
}

func noRecommendation(id int64, err error) error {
	return &userError{page: views.ErrorPage{Status: http.StatusConflict, Title: "No recommendation waits",
		Message: "No recommendation of revocation waits on this connection any more: an admin revoked it or declined it meanwhile, or a new review opened. Reload the connection to see where it stands.",
		Action:  "Back to the connection", ActionURL: fmt.Sprintf("/connections/%d", id)}, err: err}
}

// recommendationRows are the recommendations of revocation waiting for an
// admin, for the admin queue.
func (s *Server) recommendationRows(c echo.Context) ([]views.RecommendationRow, error) {
	recs, err := s.opts.DB.RevocationRecommended(c.Request().Context(), 200)
	if err != nil {
		return nil, err
	}
	var out []views.RecommendationRow
	for _, r := range recs {
		out = append(out, views.RecommendationRow{ConnectionID: r.ConnectionID, ConnectionHref: fmt.Sprintf("/connections/%d", r.ConnectionID),
			ReviewHref: fmt.Sprintf("/reviews/%d", r.ID), Team: r.Team, Purpose: r.Purpose, By: r.DecidedByEmail, At: fmtWhen(r.DecidedAt),
			Reason: r.Reason, Orphan: r.Orphan})
	}
	return out, nil
}

// reviewCardBody is the reviewer's home card: how many reviews wait.
func (s *Server) reviewCardBody(c echo.Context) (string, error) {
	open, overdue, err := s.opts.DB.ReviewCounts(c.Request().Context(), s.opts.Now().UTC().Format(workflow.DateLayout))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("Run scheduled and event-driven lifecycle reviews of connections: %d open, %d overdue.", open, overdue), nil
}
