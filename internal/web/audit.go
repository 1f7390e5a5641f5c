package web

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

func auditFilter(c echo.Context) store.AuditFilter {
	f := store.AuditFilter{
		Team:   strings.TrimSpace(c.QueryParam("team")),
		Action: strings.TrimSpace(c.QueryParam("action")),
		Actor:  strings.TrimSpace(c.QueryParam("actor")),
	}
	if id, err := strconv.ParseInt(strings.TrimPrefix(strings.TrimSpace(c.QueryParam("object")), "#"), 10, 64); err == nil && id > 0 {
		f.ObjectType, f.ObjectID = "connection", id
	}
	return f
}

func auditQuery(f store.AuditFilter) url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"team": f.Team, "action": f.Action, "actor": f.Actor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.ObjectID > 0 {
		q.Set("object", strconv.FormatInt(f.ObjectID, 10))
	}
	return q
}

// auditTrail shows the portal-wide audit trail with filters, and exports it.
func (s *Server) auditTrail(c echo.Context) error {
	if _, err := authorize(c, workflow.ActionViewAudit, workflow.Object{}); err != nil {
		return err
	}
	ctx := c.Request().Context()
	f := auditFilter(c)
	before, _ := strconv.ParseInt(c.QueryParam("before"), 10, 64)
	switch c.QueryParam("format") {
	case "csv":
		return s.exportAuditCSV(c, f, before)
	case "json":
		return s.exportAuditJSON(c, f, before)
	case "":
	default:
		return &userError{page: views.ErrorPage{Status: http.StatusBadRequest, Title: "Unknown export format",
			Message: "The audit trail can be exported as csv or json only; leave format out for the page.",
			Action:  "Back to the audit trail", ActionURL: "/audit"}, err: fmt.Errorf("audit: unknown format %q", truncate(c.QueryParam("format"), 32))}
	}
	limit := pageSize
	events, err := s.opts.DB.AuditEvents(ctx, f, before, limit)
	if err != nil {
		return err
	}
	cp, brk, err := s.verifyAuditSinceCheckpoint(ctx)
	if err != nil {
		return err
	}
	a := views.AuditPage{Team: f.Team, Action: f.Action, Actor: f.Actor, ChainOK: brk == nil,
		ChainNote: fmt.Sprintf("Hash chain verified: %d events, none altered or removed since the portal (any replica) started checking (run `portal audit verify` for a full walk).", cp.Count)}
	if f.ObjectID > 0 {
		a.Object = strconv.FormatInt(f.ObjectID, 10)
	}
	// The verification walked the chain from the shared checkpoint to its
	// head, counting: that is the head, without counting every event of
	// the trail again (issue 15: a count that grew with history). After a
	// break, or with no event, the head is read as it is.
	head := store.AuditHead{ID: cp.ID, Hash: cp.Hash, Count: cp.Count}
	if brk != nil || cp.ID == 0 {
		if head, err = s.opts.DB.AuditHead(ctx); err != nil {
			return err
		}
	}
	a.HeadCount, a.HeadID, a.HeadHash, a.HeadLogEvery = head.Count, head.ID, head.Hash, store.AuditHeadLogEvery
	if brk != nil {
		a.ChainNote = fmt.Sprintf("The hash chain is BROKEN at event %d: %s. Treat the trail after it as untrusted and restore from a backup.", brk.ID, brk.Reason)
	}
	for _, e := range events {
		r := views.AuditRow{ID: e.ID, At: fmtWhen(e.At), Actor: e.Actor, Action: e.Action, Version: e.Version, Reason: e.Reason, Team: e.Team, Object: e.ObjectType}
		if e.ObjectType == "connection" {
			r.Object = fmt.Sprintf("connection #%d", e.ObjectID)
			r.Href = fmt.Sprintf("/connections/%d", e.ObjectID)
		}
		a.Rows = append(a.Rows, r)
	}
	if len(events) == limit {
		nq := auditQuery(f)
		nq.Set("before", strconv.FormatInt(events[len(events)-1].ID, 10))
		a.NextURL = "/audit?" + nq.Encode()
	}
	cq, jq := auditQuery(f), auditQuery(f)
	cq.Set("format", "csv")
	jq.Set("format", "json")
	a.CSVURL, a.JSONURL = "/audit?"+cq.Encode(), "/audit?"+jq.Encode()
	return render(c, http.StatusOK, views.AuditTrailPage(s.page(c, "Audit trail"), a))
}

const auditTimeLayout = "2006-01-02T15:04:05.000000000Z"

// exportAuditCSV streams every matching event, newest first: rows go to the
// client as they are read, so memory stays constant at any length.
func (s *Server) exportAuditCSV(c echo.Context, f store.AuditFilter, before int64) error {
	c.Response().Header().Set("Content-Disposition", `attachment; filename="audit.csv"`)
	c.Response().Header().Set(echo.HeaderContentType, "text/csv; charset=utf-8")
	c.Response().WriteHeader(http.StatusOK)
	w := csv.NewWriter(c.Response())
	_ = w.Write([]string{"id", "at", "actor", "action", "object_type", "object_id", "team", "version", "reason", "prev_hash", "hash"})
	err := s.opts.DB.EachAuditEvent(c.Request().Context(), f, before, func(e store.AuditEvent) error {
		return w.Write([]string{strconv.FormatInt(e.ID, 10), e.At.UTC().Format(auditTimeLayout), csvSafe(e.Actor), e.Action,
			e.ObjectType, strconv.FormatInt(e.ObjectID, 10), csvSafe(e.Team), strconv.Itoa(e.Version), csvSafe(e.Reason), e.PrevHash, e.Hash})
	})
	w.Flush()
	// The status is sent: a failure now can only cut the download short,
	// and the error handler logs it.
	return errors.Join(err, w.Error())
}

type auditJSONRow struct {
	ID         int64  `json:"id"`
	At         string `json:"at"`
	Actor      string `json:"actor"`
	Action     string `json:"action"`
	ObjectType string `json:"object_type"`
	ObjectID   int64  `json:"object_id"`
	Team       string `json:"team"`
	Version    int    `json:"version"`
	Reason     string `json:"reason"`
	PrevHash   string `json:"prev_hash"`
	Hash       string `json:"hash"`
}

// exportAuditJSON streams every matching event as one JSON array, newest
// first, an element at a time.
func (s *Server) exportAuditJSON(c echo.Context, f store.AuditFilter, before int64) error {
	c.Response().Header().Set("Content-Disposition", `attachment; filename="audit.json"`)
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	c.Response().WriteHeader(http.StatusOK)
	bw := bufio.NewWriter(c.Response())
	sep := "[\n  "
	err := s.opts.DB.EachAuditEvent(c.Request().Context(), f, before, func(e store.AuditEvent) error {
		b, err := json.MarshalIndent(auditRowOf(e), "  ", "  ")
		if err != nil {
			return err
		}
		if _, err := bw.WriteString(sep); err != nil {
			return err
		}
		sep = ",\n  "
		_, err = bw.Write(b)
		return err
	})
	if err == nil {
		if sep == "[\n  " {
			_, err = bw.WriteString("[]\n")
		} else {
			_, err = bw.WriteString("\n]\n")
		}
	}
	return errors.Join(err, bw.Flush())
}

// csvSafe defuses spreadsheet formula injection in user-controlled cells.
func csvSafe(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// versionDiff compares any two versions of a connection's contract.
func (s *Server) versionDiff(c echo.Context) error {
	_, conn, _, err := s.loadConnection(c)
	if err != nil {
		return err
	}
	// Versions are numbered 1..current and never deleted: the choice of
	// versions needs no query, and the diff loads exactly the two bodies it
	// compares.
	ctx := c.Request().Context()
	d := views.VersionDiff{ConnectionID: conn.ID, BackURL: fmt.Sprintf("/connections/%d", conn.ID)}
	for v := 1; v <= conn.CurrentVersion; v++ {
		d.Versions = append(d.Versions, v)
	}
	d.To = conn.CurrentVersion
	d.From = max(1, d.To-1)
	if n, err := strconv.Atoi(c.QueryParam("from")); err == nil {
		d.From = n
	}
	if n, err := strconv.Atoi(c.QueryParam("to")); err == nil {
		d.To = n
	}
	if d.From < 1 || d.From > conn.CurrentVersion || d.To < 1 || d.To > conn.CurrentVersion {
		return echo.NewHTTPError(http.StatusNotFound)
	}
	from, err := s.opts.DB.Version(ctx, conn.ID, d.From)
	if err != nil {
		return err
	}
	to, err := s.opts.DB.Version(ctx, conn.ID, d.To)
	if err != nil {
		return err
	}
	for _, ch := range workflow.Diff(from.Contract, to.Contract) {
		d.Changes = append(d.Changes, views.ChangeRow{Label: ch.Label, Old: ch.Old, New: ch.New})
	}
	return render(c, http.StatusOK, views.VersionDiffPage(s.page(c, "Compare versions"), d))
}

// verifyAuditSinceCheckpoint verifies the events appended after the shared
// checkpoint (the database's, the same on every replica: a second replica
// neither starts over nor keeps one of its own); a break is reported. A GET
// writes nothing: the checkpoint is moved on by every replica's background
// check (store.VerifyAuditSinceCheckpoint, cmd/portal), not by page views.
// Every view that renders walks from it, so an event altered after a view
// verified it shows as a break at the next view; a view of an unchanged
// database is served by the page cache (cachePage) without walking.
func (s *Server) verifyAuditSinceCheckpoint(ctx context.Context) (store.AuditCheckpoint, *store.AuditBreak, error) {
	from, err := s.opts.DB.SharedAuditCheckpoint(ctx)
	if err != nil {
		return store.AuditCheckpoint{}, nil, err
	}
	return s.opts.DB.VerifyAuditFrom(ctx, from)
}
