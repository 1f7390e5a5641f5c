package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// The API's decisions (issue 37): an admin's approval, rejection or change
// request of a connection's submitted version, and a reviewer's decision
// on a lifecycle review, through the commands the pages run (runDecision,
// runReviewDecision) and workflow.Decide's rules, independence included.
// Only a decision token decides (workflow.TokenPermits: the decide scope),
// acting as its person with the role that decides on the teams it reaches
// (workflow.TokenDecider); a browser's session never writes through the API
// (apiAuth). Every use, these included, is audited with the token's id
// (token.use), and the decision itself as the page's is.

// apiDecisionRoutes are the decisions' routes (apiRoutes).
func (s *Server) apiDecisionRoutes(e *echo.Echo, auth echo.MiddlewareFunc) {
	e.POST(apiPrefix+"/connections/:id/approve", s.apiDecide("approve"), auth)
	e.POST(apiPrefix+"/connections/:id/reject", s.apiDecide("reject"), auth)
	e.POST(apiPrefix+"/connections/:id/request-changes", s.apiDecide("request_changes"), auth)
	e.GET(apiPrefix+"/connections/:id/reviews", s.apiConnectionReviews, auth)
	e.GET(apiPrefix+"/reviews/:id", s.apiReview, auth)
	e.POST(apiPrefix+"/reviews/:id/decision", s.apiDecideReview, auth)
}

// apiDecisionBody is the body of the approve, reject and request-changes
// routes (schema DecisionRequest): the reason the page's form takes, and
// for an approval the plan hash the admin saw (GET …/plan) and the
// existing namespace they adopt, if any.
type apiDecisionBody struct {
	Reason         string `json:"reason"`
	PlanHash       string `json:"plan_hash"`
	AdoptNamespace string `json:"adopt_namespace"`
}

// apiDecide returns the handler of one admin decision (decisionKinds) on a
// connection's current version, named by If-Match with its ETag: 428
// without it, 412 when the version changed (pinned again inside the store's
// transaction by store.Expect).
func (s *Server) apiDecide(kind string) echo.HandlerFunc {
	return func(c echo.Context) error {
		p, conn, obj, err := s.loadConnection(c)
		if err != nil {
			return err
		}
		if err := apiPermits(c, decisionKinds[kind], conn.Team); err != nil {
			return err
		}
		if s.decideHooks.loaded != nil {
			s.decideHooks.loaded()
		}
		want, err := ifMatch(c, "decide on")
		if err != nil {
			return err
		}
		var body apiDecisionBody
		if err := readJSONBody(c, &body); err != nil {
			return err
		}
		in := decisionInput{kind: kind, version: conn.CurrentVersion, hash: want, planHash: body.PlanHash, adopt: body.AdoptNamespace, reason: body.Reason}
		refused, err := s.runDecision(c, apiDecider(c, p, conn.Team), conn, obj, in)
		if err != nil {
			return err
		}
		if refused != nil {
			return decisionProblem(conn, refused)
		}
		if conn, err = s.opts.DB.Connection(c.Request().Context(), conn.ID); err != nil {
			return err
		}
		return c.JSON(http.StatusOK, apiConnectionOf(conn))
	}
}

// decisionProblem is a refused decision as a problem document: a stale
// version 412 (orStale), the reason 422 naming the field, else the page's
// status and notice.
func decisionProblem(conn store.Connection, r *refusal) error {
	var stale *store.StaleError
	if errors.As(r.cause, &stale) {
		return orStale(conn, r.cause)
	}
	pe := &problemError{status: r.status, title: "Not recorded", detail: r.notice, err: r.cause}
	if r.field != "" {
		pe.fields = []problemField{{Field: r.field, Detail: r.notice}}
	}
	return pe
}

// apiDecider is the principal a decision is made as: without a token (the
// browser's session, which apiAuth lets only read) the session's; with one,
// workflow.TokenDecider of the token's person for team.
func apiDecider(c echo.Context, p workflow.Principal, team string) workflow.Principal {
	t, ok := apiToken(c)
	if !ok {
		return p
	}
	person, ok := c.Get(ctxTokenPerson).(workflow.Principal)
	if !ok {
		return p
	}
	return workflow.TokenDecider(person, t, team)
}

// readJSONBody decodes a request body into v: application/json only,
// unknown fields refused, one value, the size capped by the server's
// BodyLimit.
func readJSONBody(c echo.Context, v any) error {
	data, err := readJSONBytes(c, "Send the body as application/json.")
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &problemError{status: http.StatusBadRequest, title: "Invalid JSON", detail: err.Error()}
	}
	if dec.More() {
		return &problemError{status: http.StatusBadRequest, title: "Invalid JSON", detail: "The body holds more than one JSON value."}
	}
	return nil
}

// apiReviewBody is a lifecycle review in the API (schema Review); the
// frozen evidence only when one review is read.
type apiReviewBody struct {
	ID           int64           `json:"id"`
	ConnectionID int64           `json:"connection_id"`
	Team         string          `json:"team"`
	Version      int             `json:"version"`
	Trigger      string          `json:"trigger"`
	Detail       string          `json:"detail,omitempty"`
	DueOn        string          `json:"due_on"`
	OpenedAt     time.Time       `json:"opened_at"`
	MoreTriggers []string        `json:"more_triggers,omitempty"`
	Demo         bool            `json:"demo,omitempty"`
	Tampered     bool            `json:"tampered,omitempty"`
	Open         bool            `json:"open"`
	Decision     string          `json:"decision,omitempty"`
	Reason       string          `json:"reason,omitempty"`
	Deadline     string          `json:"deadline,omitempty"`
	DecidedBy    string          `json:"decided_by,omitempty"`
	DecidedAt    *time.Time      `json:"decided_at,omitempty"`
	EvidenceHash string          `json:"evidence_hash"`
	Evidence     json.RawMessage `json:"evidence,omitempty"`
	Links        apiReviewLinks  `json:"links"`
}

type apiReviewLinks struct {
	Self       string `json:"self"`
	Connection string `json:"connection"`
	Page       string `json:"page"`
}

func apiReviewOf(r store.Review, evidence bool) apiReviewBody {
	b := apiReviewBody{ID: r.ID, ConnectionID: r.ConnectionID, Team: r.Team, Version: r.Version, Trigger: string(r.Trigger), Detail: r.Detail,
		DueOn: r.DueOn, OpenedAt: r.OpenedAt.UTC(), MoreTriggers: r.MoreTriggers, Demo: r.Demo, Tampered: r.Tampered, Open: r.Open(),
		Decision: string(r.Decision), Reason: r.Reason, Deadline: r.Deadline, DecidedBy: r.DecidedByEmail, EvidenceHash: r.EvidenceHash,
		Links: apiReviewLinks{Self: fmt.Sprintf("%s/reviews/%d", apiPrefix, r.ID), Connection: fmt.Sprintf("%s/connections/%d", apiPrefix, r.ConnectionID),
			Page: fmt.Sprintf("/reviews/%d", r.ID)}}
	if !r.DecidedAt.IsZero() {
		t := r.DecidedAt.UTC()
		b.DecidedAt = &t
	}
	if evidence && json.Valid(r.Evidence) {
		b.Evidence = r.Evidence
	}
	return b
}

// apiConnectionReviews is GET /api/v1/connections/:id/reviews: the
// connection's reviews, newest first, for those who read its reviews
// (workflow.ActionViewReview: reviewers, admins, the team's owners); to
// anyone else who sees the connection the list is not found, as the
// review pages are.
func (s *Server) apiConnectionReviews(c echo.Context) error {
	p, conn, _, err := s.loadConnection(c)
	if err != nil {
		return err
	}
	if err := apiPermits(c, workflow.ActionViewReview, conn.Team); err != nil {
		return err
	}
	if d := workflow.Decide(p, workflow.ActionViewReview, workflow.Object{Team: conn.Team}); !d.Allowed {
		return &echo.HTTPError{Code: http.StatusNotFound, Internal: errDenied(d.Reason)}
	}
	reviews, err := s.opts.DB.ReviewsOf(c.Request().Context(), conn.ID)
	if err != nil {
		return err
	}
	out := struct {
		Items []apiReviewBody `json:"items"`
	}{Items: []apiReviewBody{}}
	for _, r := range reviews {
		out.Items = append(out.Items, apiReviewOf(r, false))
	}
	return c.JSON(http.StatusOK, out)
}

// apiReview is GET /api/v1/reviews/:id: one review with its frozen
// evidence, loaded and authorized as the review page (loadReview).
func (s *Server) apiReview(c echo.Context) error {
	_, r, _, _, err := s.loadReview(c)
	if err != nil {
		return err
	}
	if err := apiPermits(c, workflow.ActionViewReview, r.Team); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, apiReviewOf(r, true))
}

// apiReviewDecisionBody is the body of POST …/reviews/:id/decision
// (schema ReviewDecisionRequest): the review page's form.
type apiReviewDecisionBody struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
	Deadline string `json:"deadline"`
}

// apiDecideReview is POST /api/v1/reviews/:id/decision: the review page's
// decision (runReviewDecision) on an open review. The review's id pins
// what is decided on: its evidence was frozen when it opened and never
// changes, and a review decided meanwhile is 409.
func (s *Server) apiDecideReview(c echo.Context) error {
	p, r, _, obj, err := s.loadReview(c)
	if err != nil {
		return err
	}
	if err := apiPermits(c, workflow.ActionReview, r.Team); err != nil {
		return err
	}
	var body apiReviewDecisionBody
	if err := readJSONBody(c, &body); err != nil {
		return err
	}
	in := views.ReviewForm{Decision: body.Decision, Reason: body.Reason, Deadline: body.Deadline}
	errs, err := s.runReviewDecision(c, apiDecider(c, p, r.Team), r, obj, in)
	if err != nil {
		return err
	}
	if len(errs) > 0 {
		pe := &problemError{status: http.StatusUnprocessableEntity, title: "Not recorded", detail: "The decision is not complete; nothing was recorded."}
		for _, f := range slices.Sorted(maps.Keys(errs)) {
			pe.fields = append(pe.fields, problemField{Field: f, Detail: errs[f]})
		}
		return pe
	}
	if r, err = s.opts.DB.Review(c.Request().Context(), r.ID); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, apiReviewOf(r, false))
}
