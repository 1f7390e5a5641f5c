package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Issue 32 item 6: with a separate operations listener, the pages'
// handler (what the Ingress routes) serves neither /metrics nor /readyz;
// OpsHandler serves them, and nothing else.
func TestOpsEndpointsOnTheirOwnListener(t *testing.T) {
	h := newHarness(t, false, func(o *Options) { o.SeparateOps = true })
	for _, path := range []string{"/metrics", "/readyz"} {
		if resp, body := h.get(noRedirect(h.client()), path); resp.StatusCode == http.StatusOK {
			t.Errorf("the pages' listener serves %s: %d\n%.300s", path, resp.StatusCode, body)
		}
	}
	if resp, _ := h.get(noRedirect(h.client()), "/healthz"); resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz on the pages' listener = %d", resp.StatusCode)
	}
	ops := httptest.NewServer(h.srv.OpsHandler())
	t.Cleanup(ops.Close)
	for path, want := range map[string]string{"/metrics": "# HELP", "/readyz": "ready", "/healthz": "ok"} {
		resp, err := http.Get(ops.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body := readBody(t, resp)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("ops %s = %d, want %q in\n%.300s", path, resp.StatusCode, want, body)
		}
	}
	for _, path := range []string{"/", "/login", "/connections"} {
		resp, err := http.Get(ops.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, resp)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("ops listener serves %s: %d, want 404", path, resp.StatusCode)
		}
	}
	// Without the option, the one listener serves both (serve without
	// --ops-listen, as before).
	h2 := newHarness(t, false)
	for _, path := range []string{"/metrics", "/readyz"} {
		if resp, _ := h2.get(noRedirect(h2.client()), path); resp.StatusCode != http.StatusOK {
			t.Errorf("without SeparateOps, %s = %d", path, resp.StatusCode)
		}
	}
}
