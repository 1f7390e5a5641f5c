package testenv

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"sync"

	"k8s.io/client-go/rest"
)

// RequestCounter counts the requests a Kubernetes client sends, by method,
// and the writes among them: a non-GET request whose answer carries a
// resourceVersion different from the last one seen for that path (a no-op
// server-side apply returns the same version, so it is not a write).
type RequestCounter struct {
	mu       sync.Mutex
	byMethod map[string]int
	writes   int
	rv       map[string]string
}

// CountRequests returns a copy of cfg whose requests c counts.
func CountRequests(cfg *rest.Config) (*rest.Config, *RequestCounter) {
	c := &RequestCounter{byMethod: map[string]int{}, rv: map[string]string{}}
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err != nil {
				return resp, err
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(body))
			if err != nil {
				return resp, err
			}
			c.observe(req, resp.StatusCode, body)
			return resp, nil
		})
	})
	return out, c
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (c *RequestCounter) observe(req *http.Request, status int, body []byte) {
	var obj struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(body, &obj) // discovery and errors have none
	rv := obj.Metadata.ResourceVersion
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byMethod[req.Method]++
	path := req.URL.Path
	if req.Method != http.MethodGet && status < 300 && rv != "" && rv != c.rv[path] {
		c.writes++
	}
	if status < 300 && rv != "" {
		c.rv[path] = rv
	}
}

// Reset starts a new count; the resourceVersions seen are kept.
func (c *RequestCounter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byMethod, c.writes = map[string]int{}, 0
}

// Counts returns the requests by method, their total, the non-GET requests
// and the writes since the last Reset.
func (c *RequestCounter) Counts() (byMethod map[string]int, total, nonGet, writes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for m, n := range c.byMethod {
		total += n
		if m != http.MethodGet {
			nonGet += n
		}
	}
	return maps.Clone(c.byMethod), total, nonGet, c.writes
}
