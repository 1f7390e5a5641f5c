package web

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// mimeNDJSON is the audit stream's media type: one JSON event a line.
const mimeNDJSON = "application/x-ndjson"

// apiAuditQuery is GET /api/v1/audit's query: the /audit page's filters
// (auditFilter) and the cursors, checked.
type apiAuditQuery struct {
	filter        store.AuditFilter
	before, after int64
	limit         int
	stream        bool
}

func parseAPIAuditQuery(c echo.Context) (apiAuditQuery, error) {
	q := c.QueryParams()
	a := apiAuditQuery{filter: auditFilter(c), limit: pageSize,
		stream: q.Get("stream") == "1" || strings.Contains(c.Request().Header.Get("Accept"), mimeNDJSON)}
	var bad []problemField
	cursor := func(name string, to *int64) {
		if v := q.Get(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				bad = append(bad, problemField{Field: name, Detail: "an event id (a whole number, 0 or more)"})
			}
			*to = n
		}
	}
	cursor("before", &a.before)
	cursor("after", &a.after)
	if v := q.Get("object"); v != "" && a.filter.ObjectID == 0 {
		bad = append(bad, problemField{Field: "object", Detail: "a connection's id"})
	}
	if v := q.Get("stream"); v != "" && v != "1" && v != "0" {
		bad = append(bad, problemField{Field: "stream", Detail: "1 for the stream, 0 or nothing for a page"})
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			bad = append(bad, problemField{Field: "limit", Detail: "a whole number from 1 to 100"})
		}
		a.limit = n
	}
	if a.stream && q.Get("before") != "" {
		bad = append(bad, problemField{Field: "before", Detail: "the stream runs forward from after; before is the pages' cursor"})
	}
	if !a.stream && q.Get("after") != "" {
		bad = append(bad, problemField{Field: "after", Detail: "after is the stream's cursor (stream=1 or Accept: " + mimeNDJSON + "); pages go back with before"})
	}
	if len(bad) > 0 {
		return a, &problemError{status: http.StatusBadRequest, title: "Invalid query", detail: "Some query parameters are not valid.", fields: bad}
	}
	return a, nil
}

// apiAudit is GET /api/v1/audit: the /audit page's trail, authorized as
// the page (workflow.ActionViewAudit: admins and reviewers; a token keeps
// no portal-wide role when limited to teams, TokenPrincipal) and read with
// the same store query and filters. A page is newest first with a next
// link (the cursor is the last event's id: an event appended meanwhile
// never shifts a page); the stream (stream=1 or Accept:
// application/x-ndjson) is every matching event after the cursor after,
// oldest first, up to the newest event when the request came, one JSON
// line each, written as read.
func (s *Server) apiAudit(c echo.Context) error {
	if _, err := authorize(c, workflow.ActionViewAudit, workflow.Object{}); err != nil {
		return err
	}
	if err := apiPermits(c, workflow.ActionViewAudit, ""); err != nil {
		return err
	}
	q, err := parseAPIAuditQuery(c)
	if err != nil {
		return err
	}
	if q.stream {
		return s.apiAuditStream(c, q)
	}
	events, err := s.opts.DB.AuditEvents(c.Request().Context(), q.filter, q.before, q.limit)
	if err != nil {
		return err
	}
	out := struct {
		Items []auditJSONRow `json:"items"`
		Next  string         `json:"next,omitempty"`
	}{Items: []auditJSONRow{}}
	for _, e := range events {
		out.Items = append(out.Items, auditRowOf(e))
	}
	if len(events) == q.limit {
		nq := auditQuery(q.filter)
		nq.Set("before", strconv.FormatInt(events[len(events)-1].ID, 10))
		nq.Set("limit", strconv.Itoa(q.limit))
		out.Next = apiPrefix + "/audit?" + nq.Encode()
	}
	return c.JSON(http.StatusOK, out)
}

// apiAuditStream writes every event of q.filter after q.after up to the
// newest event now, oldest first, as newline-delimited JSON, a batch at a
// time (store.EachAuditEventAfter): memory stays constant at any length.
func (s *Server) apiAuditStream(c echo.Context, q apiAuditQuery) error {
	ctx := c.Request().Context()
	newest, err := s.opts.DB.AuditEvents(ctx, store.AuditFilter{}, 0, 1)
	if err != nil {
		return err
	}
	var upto int64
	if len(newest) > 0 {
		upto = newest[0].ID
	}
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, mimeNDJSON)
	w.Header().Set("X-Audit-Upto", strconv.FormatInt(upto, 10))
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w) // Encode ends each event with a newline
	n := 0
	// The status is sent: a failure now can only cut the stream short (the
	// reader resumes after the last line it got), and the error handler
	// logs it.
	return s.opts.DB.EachAuditEventAfter(ctx, q.filter, q.after, upto, func(e store.AuditEvent) error {
		if err := enc.Encode(auditRowOf(e)); err != nil {
			return err
		}
		if n++; n%100 == 0 {
			w.Flush()
		}
		return nil
	})
}

func auditRowOf(e store.AuditEvent) auditJSONRow {
	return auditJSONRow{e.ID, e.At.UTC().Format(auditTimeLayout), e.Actor, e.Action, e.ObjectType, e.ObjectID, e.Team, e.Version, e.Reason, e.PrevHash, e.Hash}
}
