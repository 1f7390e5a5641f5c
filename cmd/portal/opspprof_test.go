package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestOpsHandlerProfiles: Go's profiles are served on the operations
// listener with --ops-pprof only, and the server's own paths stay served.
func TestOpsHandlerProfiles(t *testing.T) {
	own := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			w.WriteHeader(http.StatusOK)
			return
		}
		http.NotFound(w, r)
	})
	for _, tc := range []struct {
		pprof bool
		path  string
		want  int
	}{
		{false, "/debug/pprof/", http.StatusNotFound},
		{false, "/metrics", http.StatusOK},
		{true, "/debug/pprof/", http.StatusOK},
		{true, "/debug/pprof/heap?debug=1", http.StatusOK},
		{true, "/metrics", http.StatusOK},
	} {
		rec := httptest.NewRecorder()
		opsHandler(own, tc.pprof).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
		if rec.Code != tc.want {
			t.Errorf("--ops-pprof=%v: GET %s = %d, want %d", tc.pprof, tc.path, rec.Code, tc.want)
		}
	}
}
