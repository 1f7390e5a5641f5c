package web

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// maxNotificationsListed is how many notifications the page lists.
const maxNotificationsListed = 200

// unreadCount is the header's count of the signed-in user's unread
// notifications: one indexed count per page. A database that does not
// answer leaves the count out of the header rather than failing the page.
func (s *Server) unreadCount(c echo.Context, p workflow.Principal) int {
	if p.UserID == 0 {
		return 0
	}
	n, err := s.opts.DB.UnreadNotifications(c.Request().Context(), p.UserID, workflow.NoticeScopeOf(p))
	if err != nil {
		s.opts.Logger.Warn("unread notifications", "err", err)
		return 0
	}
	return n
}

// notificationsPage lists the signed-in user's own notifications. Every
// signed-in user has the page; the query is keyed by the user, so nobody
// reads another's, and scoped by workflow.NoticeScopeOf, so a notice about
// a team the user may no longer see (ActionReadNotice) is left out.
func (s *Server) notificationsPage(c echo.Context) error {
	p, ok := principal(c)
	if !ok {
		return echo.NewHTTPError(http.StatusUnauthorized)
	}
	ctx := c.Request().Context()
	// Only what the reader may still read (workflow.NoticeScope, in the
	// query, before the limit): a notice delivered before they left the
	// team stays theirs in the database but is not shown or counted.
	ns, err := s.opts.DB.Notifications(ctx, p.UserID, workflow.NoticeScopeOf(p), maxNotificationsListed+1)
	if err != nil {
		return err
	}
	v := views.Notifications{}
	if len(ns) > maxNotificationsListed {
		ns, v.More = ns[:maxNotificationsListed], true
	}
	for _, n := range ns {
		it := views.NotificationItem{ID: n.ID, Subject: n.Subject, Kind: n.Kind, When: fmtWhen(n.Created), Read: n.Read,
			ReadURL: fmt.Sprintf("/notifications/%d/read", n.ID)}
		if n.ConnectionID != 0 {
			it.Link, it.LinkText = fmt.Sprintf("/connections/%d", n.ConnectionID), fmt.Sprintf("#%d", n.ConnectionID)
		}
		v.Items = append(v.Items, it)
	}
	pg := s.page(c, "Notifications")
	v.Unread = pg.Unread
	return render(c, http.StatusOK, views.NotificationsPage(pg, v))
}

// markNotificationRead marks one of the user's own notifications read.
// Another user's notification does not exist from here (404), and stays
// unread.
func (s *Server) markNotificationRead(c echo.Context) error {
	p, id, err := principalAndID(c)
	if err != nil {
		return err
	}
	switch err := s.opts.DB.MarkNotificationRead(c.Request().Context(), p.UserID, workflow.NoticeScopeOf(p), id, s.opts.Now()); {
	case errors.Is(err, store.ErrNotFound):
		return echo.NewHTTPError(http.StatusNotFound)
	case err != nil:
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/notifications")
}

// markAllNotificationsRead marks every one of the user's notifications read.
func (s *Server) markAllNotificationsRead(c echo.Context) error {
	p, ok := principal(c)
	if !ok {
		return echo.NewHTTPError(http.StatusUnauthorized)
	}
	if _, err := s.opts.DB.MarkAllNotificationsRead(c.Request().Context(), p.UserID, workflow.NoticeScopeOf(p), s.opts.Now()); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/notifications")
}

// deliveryFailures is the admins' page of failing notification deliveries.
// Errors are stored without secrets (internal/notify keeps passwords and
// the webhook URL out of them).
func (s *Server) deliveryFailures(c echo.Context) error {
	if _, err := authorize(c, workflow.ActionViewAdminHome, workflow.Object{}); err != nil {
		return err
	}
	rows, err := s.opts.DB.FailingDeliveries(c.Request().Context(), 500)
	if err != nil {
		return err
	}
	v := views.DeliveryFailures{Channels: s.opts.NotifyChannels}
	if len(v.Channels) == 0 {
		v.Channels = []string{string(store.ChannelInApp)}
	}
	for _, d := range rows {
		r := views.DeliveryFailure{ID: d.ID, OutboxID: d.OutboxID, Channel: string(d.Channel), Kind: d.Kind, Subject: d.Subject,
			Audience: d.Audience, Recipients: d.Recipients, Attempts: d.Attempts, LastError: d.LastError, NextAttempt: fmtWhen(d.NextAttempt)}
		if d.ConnectionID != 0 {
			r.Link = fmt.Sprintf("/connections/%d", d.ConnectionID)
		}
		v.Rows = append(v.Rows, r)
	}
	return render(c, http.StatusOK, views.DeliveryFailuresPage(s.page(c, "Notification deliveries"), v))
}
