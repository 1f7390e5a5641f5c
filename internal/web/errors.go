package web

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/views"
)

// userError is an error whose page the handler has written for the user:
// status, title, message and optional details. err is for the log only.
type userError struct {
	page views.ErrorPage
	err  error
}

func (u *userError) Error() string {
	if u.err != nil {
		return fmt.Sprintf("%s: %v", u.page.Title, u.err)
	}
	return u.page.Title
}

func (u *userError) Unwrap() error { return u.err }

// render writes a templ component with status.

// statusClientClosed is the status recorded for a request whose client
// went away before its answer (nginx's 499; no response reaches anyone).
const statusClientClosed = 499

// handleError is the one place errors become responses. It logs server-side
// failures once, with the request id, and shows a friendly page that never
// contains an internal error's text.
func (s *Server) handleError(err error, c echo.Context) {
	if ctx := c.Request().Context(); ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		// The client went away (closed the page, gave up waiting) and the
		// handler stopped with it: nothing failed here, and nobody reads
		// an answer. Logged, and counted, as nginx's 499, not as a 500.
		s.opts.Logger.InfoContext(ctx, "request abandoned by the client", "request_id", requestID(c), "err", err)
		if !c.Response().Committed {
			c.Response().WriteHeader(statusClientClosed)
		}
		return
	}
	if c.Response().Committed {
		s.opts.Logger.ErrorContext(c.Request().Context(), "error after response started",
			"request_id", requestID(c), "err", err)
		return
	}
	if isAPIPath(c.Request().URL.Path) {
		s.writeProblem(c, err)
		return
	}
	ep := views.ErrorPage{RequestID: requestID(c)}
	var ue *userError
	var he *echo.HTTPError
	switch {
	case errors.As(err, &ue):
		ep = ue.page
		ep.RequestID = requestID(c)
		if ep.Status >= 500 {
			s.logFailure(c, err)
		}
	case errors.As(err, &he):
		ep.Status = he.Code
		ep.Title, ep.Message = httpMessage(he)
		if he.Code >= 500 {
			s.logFailure(c, err)
		} else if he.Internal != nil {
			s.opts.Logger.InfoContext(c.Request().Context(), "request refused",
				"request_id", requestID(c), "status", he.Code, "reason", he.Internal.Error())
		}
	default:
		ep.Status = http.StatusInternalServerError
		ep.Title, ep.Message = httpMessage(&echo.HTTPError{Code: http.StatusInternalServerError})
		s.logFailure(c, err)
	}
	if ep.Status == http.StatusUnauthorized && ep.ActionURL == "" {
		ep.Action, ep.ActionURL = "Sign in", "/login"
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(ep.Status)
		return
	}
	if rerr := render(c, ep.Status, views.ErrorView(s.page(c, ep.Title), ep)); rerr != nil {
		s.opts.Logger.ErrorContext(c.Request().Context(), "rendering the error page failed",
			"request_id", requestID(c), "err", rerr)
	}
}

func (s *Server) logFailure(c echo.Context, err error) {
	s.opts.Logger.LogAttrs(c.Request().Context(), slog.LevelError, "request failed",
		slog.String("request_id", requestID(c)),
		slog.String("method", c.Request().Method),
		slog.String("path", c.Request().URL.Path),
		slog.String("err", err.Error()))
}

// httpMessage gives the user-facing title and message for a status.
func httpMessage(he *echo.HTTPError) (string, string) {
	switch he.Code {
	case http.StatusNotFound:
		return "Page not found", "There is nothing here, or it is not visible to you. Check the address, or go back to your home page."
	case http.StatusForbidden:
		if he.Message == csrfMessage {
			return "This form has expired", "For your safety the portal refused a form it could not match to your session (it may be old, or sent from another site). Reload the page and submit it again."
		}
		return "Not allowed", "Your roles do not allow this. If you think they should, ask the platform team to check your groups."
	case http.StatusUnauthorized:
		return "Please sign in", "You need to sign in to see this page."
	case http.StatusMethodNotAllowed:
		return "Not allowed here", "This address does not accept that kind of request."
	case http.StatusRequestEntityTooLarge:
		return "Too much data", "The request was larger than the portal accepts. Shorten the input and try again."
	case http.StatusBadRequest:
		return "Bad request", "The portal could not understand that request."
	case http.StatusServiceUnavailable:
		return "Temporarily unavailable", "A service the portal depends on is not answering. Try again in a minute."
	}
	if he.Code >= 500 {
		return "Something went wrong", "The portal hit an internal problem and did not finish your request. Try again; if it keeps happening, tell the platform team the request id below."
	}
	return http.StatusText(he.Code), "The request could not be completed."
}
