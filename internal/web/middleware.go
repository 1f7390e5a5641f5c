package web

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyperpod-governance/portal/internal/store"
)

func (s *Server) middleware() {
	e := s.echo
	e.Use(middleware.RequestIDWithConfig(middleware.RequestIDConfig{Generator: newRequestIDs().next}))
	e.Use(s.observe())
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{
		DisableStackAll:   true,
		DisablePrintStack: true, // the error handler logs the panic once, with the request id
	}))
	e.Use(s.securityHeaders())
	e.Use(middleware.BodyLimit(s.opts.BodyLimit))
	e.Use(s.session)
	e.Use(s.csrf)
	e.Use(s.loadPrincipal)
}

// metricMethod is a request's method as a metric label: any method HTTP
// does not define is "other", so that clients cannot make series (and
// observe's lookups) without bound.
func metricMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}

// observe logs one line per request and records metrics by route. It runs
// the error handler itself so both see the final status.
func (s *Server) observe() echo.MiddlewareFunc {
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "portal_http_requests_total",
		Help: "HTTP requests by method, route pattern and status code.",
	}, []string{"method", "route", "code"})
	lat := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "portal_http_request_duration_seconds",
		Help:    "HTTP request latency by method and route pattern.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"method", "route"})
	s.opts.Registry.MustRegister(reqs, lat)
	// The series of each method, route and status, looked up once: a
	// lookup by label values hashes them on every request.
	type seriesKey struct {
		method, route string
		status        int
	}
	type series struct {
		count   prometheus.Counter
		latency prometheus.Observer
	}
	var known sync.Map // seriesKey -> series
	seriesOf := func(k seriesKey) series {
		if v, ok := known.Load(k); ok {
			return v.(series)
		}
		v, _ := known.LoadOrStore(k, series{reqs.WithLabelValues(k.method, k.route, strconv.Itoa(k.status)), lat.WithLabelValues(k.method, k.route)})
		return v.(series)
	}

	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			if err := next(c); err != nil {
				c.Error(err)
			}
			d := time.Since(start)
			route := c.Path()
			if route == "" || c.Response().Status == http.StatusNotFound && route == "/*" {
				route = "unmatched" // keep label cardinality bounded
			}
			status := c.Response().Status
			m := seriesOf(seriesKey{metricMethod(c.Request().Method), route, status})
			m.count.Inc()
			m.latency.Observe(d.Seconds())
			if isProbe(c.Request().URL.Path) {
				return nil
			}
			level := slog.LevelInfo
			if status >= 500 {
				level = slog.LevelError
			}
			// The record goes to the handler directly: Logger.LogAttrs
			// would also take the caller's stack (for a source the
			// handler does not print) on every request.
			ctx := c.Request().Context()
			if h := s.opts.Logger.Handler(); h.Enabled(ctx, level) {
				rec := slog.NewRecord(time.Now(), level, "request", 0)
				rec.AddAttrs(
					slog.String("request_id", requestID(c)),
					slog.String("method", c.Request().Method),
					slog.String("path", c.Request().URL.Path), // never the query: it may carry codes
					slog.String("route", route),
					slog.Int("status", status),
					slog.Int64("bytes", c.Response().Size),
					slog.Float64("duration_ms", float64(d.Microseconds())/1000),
					slog.String("remote_ip", c.RealIP()),
				)
				_ = h.Handle(ctx, rec)
			}
			return nil
		}
	}
}

func isProbe(p string) bool { return p == "/healthz" || p == "/readyz" || p == "/metrics" }

// requestIDs names the requests that arrive without an X-Request-Id: a
// random prefix drawn once per process, then a counter. Unique across
// replicas and restarts as echo's default (32 random characters a
// request) is, without drawing 32 random characters for every request
// (make bench, issue 33: 2% of a cached page's cost). A request id is a
// label for the logs, not a secret.
type requestIDs struct {
	prefix string
	n      atomic.Uint64
}

func newRequestIDs() *requestIDs {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	return &requestIDs{prefix: hex.EncodeToString(b) + "-"}
}

func (r *requestIDs) next() string {
	var buf [40]byte
	return string(strconv.AppendUint(append(buf[:0], r.prefix...), r.n.Add(1), 36))
}

func requestID(c echo.Context) string {
	return c.Response().Header().Get(echo.HeaderXRequestID)
}

// securityHeaders sets the headers every response carries, including
// Cache-Control: no-store (every page behind login, the exports, errors). The CSP allows no
// inline script or style; form-action also allows the identity provider's
// origin because logout's redirect to its end-session endpoint follows a form.
//
// The headers are made once, here: echo applies its middleware to each
// request's handler as the request arrives (Echo.ServeHTTP calls
// applyMiddleware), so what a MiddlewareFunc does before returning its
// handler runs for every request (make bench, issue 33: building these
// headers was a twenty-fifth of a cached page's cost).
func (s *Server) securityHeaders() echo.MiddlewareFunc {
	formAction := "'self'"
	if o := originOf(s.opts.OIDC.Issuer()); o != "" && o != originOf(s.opts.BaseURL.String()) {
		formAction += " " + o
	}
	csp := "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action " + formAction
	set := http.Header{}
	set.Set("Content-Security-Policy", csp)
	set.Set("X-Content-Type-Options", "nosniff")
	set.Set("X-Frame-Options", "DENY")
	set.Set("Referrer-Policy", "same-origin")
	set.Set("Cross-Origin-Opener-Policy", "same-origin")
	set.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
	// Pages show team data and the signed-in user; no browser or proxy
	// may keep them. cacheStatic overrides this for /static/ assets.
	set.Set("Cache-Control", "no-store")
	if s.tls {
		set.Set("Strict-Transport-Security", "max-age=63072000; includeSubDomains")
	}
	// The keys are canonical already (set.Set made them so). Every
	// response shares these value slices, clipped: a handler's Set or Del
	// replaces the entry and its Add reallocates, so no response changes
	// another's (TestSecurityHeadersAreEachResponses); one slice per
	// header per response was 8 allocations a request.
	type entry struct {
		key   string
		value []string
	}
	entries := make([]entry, 0, len(set))
	for k, v := range set {
		entries = append(entries, entry{k, slices.Clip(v)})
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			h := c.Response().Header()
			for _, e := range entries {
				h[e.key] = e.value
			}
			return next(c)
		}
	}
}

func originOf(raw string) string {
	i := strings.Index(raw, "://")
	if i < 0 {
		return ""
	}
	rest := raw[i+3:]
	if j := strings.IndexAny(rest, "/?#"); j >= 0 {
		rest = rest[:j]
	}
	return raw[:i+3] + rest
}

// session loads and saves the server-side session, except on paths that
// need none (so probes and assets never write to the database).
func (s *Server) session(next echo.HandlerFunc) echo.HandlerFunc {
	wrapped := s.loadAndSave(next)
	return func(c echo.Context) error {
		r := c.Request()
		if isAnonymousPath(r.URL.Path) || bearerRequest(r) {
			return next(c) // an API token's request has no session (api.go)
		}
		// The data version first, before the session or any page data are
		// read (store.DataVersion; the session store's read-through cache
		// and cachePage keep what they read under it).
		s.readDataVersion(c)
		return wrapped(c)
	}
}

// readDataVersion puts the database's data version, read now, in the
// request's context (store.WithDataVersion) for the caches that keep what
// is read after it; without one (unavailable, or another session's write
// in progress) they keep nothing.
func (s *Server) readDataVersion(c echo.Context) {
	s.readVersion(c, "data version", s.opts.DB.DataVersion, store.WithDataVersion)
}

// readContentVersion puts the database's content version (store.DB.ContentVersion:
// the data version less the API's uses) in the request's context, for a
// bearer token's request: its token lookup and its cached reads
// (cacheAPI) are kept under it.
func (s *Server) readContentVersion(c echo.Context) {
	s.readVersion(c, "content version", s.opts.DB.ContentVersion, store.WithContentVersion)
}

func (s *Server) readVersion(c echo.Context, what string, read func(context.Context) (string, bool, error), with func(context.Context, string) context.Context) {
	r := c.Request()
	if v, ok, err := read(r.Context()); err != nil {
		s.opts.Logger.WarnContext(r.Context(), what+" unavailable: nothing is served from the caches", "err", err)
	} else if ok {
		c.SetRequest(r.WithContext(with(r.Context(), v)))
	}
}

const csrfKey = "csrf_token"

// csrfToken returns the session's CSRF token, creating it on first use.
func (s *Server) csrfToken(c echo.Context) string {
	ctx := c.Request().Context()
	if t := s.sessions.GetString(ctx, csrfKey); t != "" {
		return t
	}
	t := newToken()
	s.sessions.Put(ctx, csrfKey, t)
	return t
}

// csrf refuses every state-changing request whose form field _csrf (in the
// body, never the query string) or X-CSRF-Token header does not match the
// token bound to the session, and any that the browser marks as cross-site.
// The token lives server-side and is replaced at login, so a token seen
// before login is useless after it.
func (s *Server) csrf(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			return next(c)
		}
		// A bearer token's request: no cookie authenticates it, so no other
		// site can forge it (api.go).
		if isAnonymousPath(r.URL.Path) || bearerRequest(r) {
			return next(c)
		}
		if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
			return errCSRF("cross-site request")
		}
		want := s.sessions.GetString(r.Context(), csrfKey)
		got := r.Header.Get("X-CSRF-Token")
		if got == "" {
			// The form body only: a token in the query string would leak
			// into logs, history and Referer headers.
			got = r.PostFormValue("_csrf")
		}
		if want == "" || got == "" || subtle.ConstantTimeCompare([]byte(want), []byte(got)) != 1 {
			return errCSRF("token missing or wrong")
		}
		return next(c)
	}
}

func errCSRF(why string) error {
	return &echo.HTTPError{Code: http.StatusForbidden, Message: csrfMessage, Internal: fmt.Errorf("csrf: %s", why)}
}

const csrfMessage = "csrf"

func newToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
