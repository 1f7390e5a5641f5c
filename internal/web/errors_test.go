package web

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

// TestAbandonedRequestIsNoFailure: a handler that stopped because its
// client went away is recorded as 499 at level INFO, on a page and on the
// API; the same error while the client still waits is a logged 500.
func TestAbandonedRequestIsNoFailure(t *testing.T) {
	h := newHarness(t, false)
	for _, path := range []string{"/connections", apiPrefix + "/connections"} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, path, nil).WithContext(ctx)
		from := len(h.logs.String())
		h.srv.handleError(fmt.Errorf("store: connections: %w", context.Canceled), echo.New().NewContext(req, rec))
		if rec.Code != statusClientClosed || rec.Body.Len() != 0 {
			t.Errorf("%s abandoned: status %d, body %q; want %d and no body", path, rec.Code, rec.Body, statusClientClosed)
		}
		if logs := h.logs.String()[from:]; strings.Contains(logs, `"level":"ERROR"`) || !strings.Contains(logs, "request abandoned by the client") {
			t.Errorf("%s abandoned: logs %s; want the abandonment at INFO and no ERROR", path, logs)
		}

		rec = httptest.NewRecorder()
		req = httptest.NewRequest(http.MethodGet, path, nil)
		from = len(h.logs.String())
		h.srv.handleError(fmt.Errorf("store: connections: %w", context.Canceled), echo.New().NewContext(req, rec))
		if logs := h.logs.String()[from:]; rec.Code != http.StatusInternalServerError || !strings.Contains(logs, `"level":"ERROR"`) {
			t.Errorf("%s with its client waiting: status %d, logs %s; want a logged 500", path, rec.Code, logs)
		}
	}
}
