package web

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// apiNoticeScope is the notices the request may reach: the person's, as
// the notifications page shows them (workflow.NoticeScopeOf), and through
// a token limited to teams only those about no team or its teams
// (workflow.TokenNoticeScope).
func apiNoticeScope(c echo.Context, p workflow.Principal) workflow.NoticeScope {
	if t, ok := apiToken(c); ok {
		return workflow.TokenNoticeScope(p, t)
	}
	return workflow.NoticeScopeOf(p)
}

// apiNotification is one notification in the API (schema Notification):
// what the notifications page shows of it.
type apiNotification struct {
	ID           int64     `json:"id"`
	Kind         string    `json:"kind"`
	Subject      string    `json:"subject"`
	Team         string    `json:"team"`
	ConnectionID int64     `json:"connection_id,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
	Read         bool      `json:"read"`
	Links        struct {
		Read       string `json:"read"`
		Connection string `json:"connection,omitempty"`
		Page       string `json:"page,omitempty"`
	} `json:"links"`
}

func apiNotificationOf(n store.Notification) apiNotification {
	a := apiNotification{ID: n.ID, Kind: n.Kind, Subject: n.Subject, Team: n.Team, ConnectionID: n.ConnectionID, CreatedAt: n.Created.UTC(), Read: n.Read}
	a.Links.Read = fmt.Sprintf("%s/notifications/%d/read", apiPrefix, n.ID)
	if n.ConnectionID != 0 {
		a.Links.Connection = fmt.Sprintf("%s/connections/%d", apiPrefix, n.ConnectionID)
		a.Links.Page = fmt.Sprintf("/connections/%d", n.ConnectionID)
	}
	return a
}

// apiNotifications is GET /api/v1/notifications: the person's own
// notifications, newest first, as the notifications page lists them (the
// same store query, keyed by the user and scoped by apiNoticeScope), a
// page at a time (before: the cursor of the previous page's next link).
func (s *Server) apiNotifications(c echo.Context) error {
	p, ok := principal(c)
	if !ok {
		return echo.NewHTTPError(http.StatusUnauthorized)
	}
	if err := apiPermits(c, workflow.ActionReadNotice, ""); err != nil {
		return err
	}
	q := c.QueryParams()
	var bad []problemField
	before, limit := pageQuery(q, &bad)
	if len(bad) > 0 {
		return &problemError{status: http.StatusBadRequest, title: "Invalid query", detail: "Some query parameters are not valid.", fields: bad}
	}
	ns, err := s.opts.DB.NotificationsBefore(c.Request().Context(), p.UserID, apiNoticeScope(c, p), before, limit+1)
	if err != nil {
		return err
	}
	out := struct {
		Items []apiNotification `json:"items"`
		Next  string            `json:"next,omitempty"`
	}{Items: []apiNotification{}}
	if len(ns) > limit {
		ns = ns[:limit]
		out.Next = fmt.Sprintf("%s/notifications?before=%d&limit=%d", apiPrefix, ns[limit-1].ID, limit)
	}
	for _, n := range ns {
		out.Items = append(out.Items, apiNotificationOf(n))
	}
	return c.JSON(http.StatusOK, out)
}

// apiMarkNotificationRead is POST /api/v1/notifications/:id/read: the
// page's mark-read (the same store call, keyed by the user and scoped).
// Another person's notification, or one the token may not reach, does not
// exist from here (404) and stays unread. Marking a read one again is
// fine. Scope: read and write.
func (s *Server) apiMarkNotificationRead(c echo.Context) error {
	p, id, err := principalAndID(c)
	if err != nil {
		return err
	}
	notFound := &problemError{status: http.StatusNotFound, title: "No such notification", detail: "You have no notification with this id."}
	ctx, scope := c.Request().Context(), apiNoticeScope(c, p)
	// Found first, as a connection is loaded before the token's scope is
	// asked: another person's notice is 404 to every token, never 403.
	if _, err := s.opts.DB.Notification(ctx, p.UserID, scope, id); errors.Is(err, store.ErrNotFound) {
		return notFound
	} else if err != nil {
		return err
	}
	if err := apiPermits(c, workflow.ActionMarkNoticeRead, ""); err != nil {
		return err
	}
	switch err := s.opts.DB.MarkNotificationRead(ctx, p.UserID, scope, id, s.opts.Now()); {
	case errors.Is(err, store.ErrNotFound):
		return notFound
	case err != nil:
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
