package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// pageCache keeps the pages of the busiest routes as rendered for one
// session, under the database's data version (store.DataVersion) read at
// the start of the request and the minute of the clock (issue 15: every
// view of an unchanged page re-ran its queries and its template).
//
// Why a hit is what a fresh render would show:
//   - The data: a page read after the version was read is at least as new
//     as the version; any commit after it, on any replica (a decision, a
//     job step, usage collected, a session signed in, out or changed)
//     changes the version every replica's next request reads, and entries
//     under another version are never served.
//   - The viewer: the key holds the session token, so a page is only ever
//     served to the session it was rendered for, and the principal's roles
//     and teams as this request decided them (a group re-check during the
//     request changes them after the version was read); the principal, the CSRF
//     token and a pending flash message live in that session, and changing
//     any of them writes the session's data, which changes the version (a
//     commit that only moves its idle expiry does not, on PostgreSQL:
//     migrations/00032).
//   - The clock: pages show times to the minute ("12 min", due dates), so
//     the key holds the minute. One relaxation: while one view renders a
//     page for the new minute, the other views of the same key are served
//     the previous minute's page of the same data version ("stale"), not
//     made to wait for the render: the same data, its clock text behind by
//     at most one render. Under load every cached page's key moved at
//     every minute and all the views in flight waited for one render (in
//     the page benchmark on PostgreSQL at 1,000,000 audit events, 34 to 63
//     views waited up to 80-150 ms: the p99 of a run that crossed a
//     minute). A new data version is never answered with an older one's
//     page: its views wait for the render as before.
//   - Live sources: a view that read the cluster, AWS or Prometheus marks
//     itself (markLive) and is not kept.
//
// Only responses rendered with status 200 by render are kept. Bounded by
// pageCacheMaxBytes of bodies: past that, or when a page of another
// version is stored, it starts over.
type pageCache struct {
	mu      sync.Mutex
	version string
	entries map[string][]byte
	size    int

	// views counts the cached routes' views by how they were served
	// (/metrics): "hit" (a kept page), "shared" (the page another view
	// of the same key was rendering), "stale" (the previous minute's
	// page, while another view renders this minute's), "rendered" (this
	// view rendered it).
	// Under steady load nearly every view is a hit; a burst of rendered
	// ones means the data version or the minute kept moving.
	views *prometheus.CounterVec

	// flights: the views of a key being rendered now. Requests for the
	// same key meanwhile wait for that view instead of rendering it again
	// (under load, every session's views of a page miss together whenever
	// the version moves, and rendering them all at once made each take as
	// long as the version lasted).
	flights map[string]*pageFlight
}

type pageFlight struct {
	key  string // the page's key (pageKey)
	done chan struct{}
	body []byte // nil: not kept (an error, a live source): render it yourself
}

func newPageCacheViews() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "portal_page_cache_views_total",
		Help: "Views of the cached pages (dashboard, lists, detail, audit, usage, reviews, the API's list of connections) by how they were served: hit, shared (another view's render), stale (the previous minute's page of the same data while this minute's renders), rendered, unversioned (rendered without a data version while another session's write was in progress; not kept).",
	}, []string{"result"})
}

// pageKey is the key of a page: base (the data version, session, access
// and URL) at minute (the clock's Unix minute).
func pageKey(base string, minute int64) string {
	return base + "\x00" + strconv.FormatInt(minute, 10)
}

// lookup finds the page of base at minute: a kept page ("hit"); else, when
// another view is rendering it and the previous minute's page of base is
// kept, that page ("stale"); else the flight rendering it, which this view
// leads (renders) or joins (waits for).
func (pc *pageCache) lookup(base string, minute int64) (body []byte, result string, f *pageFlight, lead bool) {
	key := pageKey(base, minute)
	if b, ok := pc.get(key); ok {
		return b, "hit", nil, false
	}
	f, lead = pc.join(key)
	if !lead {
		if b, ok := pc.get(pageKey(base, minute-1)); ok {
			return b, "stale", nil, false
		}
	}
	return nil, "", f, lead
}

// count records one view served as result (views is nil only in a
// pageCache no Server made).
func (pc *pageCache) count(result string) {
	if pc.views != nil {
		pc.views.WithLabelValues(result).Inc()
	}
}

// join returns the flight rendering key now, or starts one (lead).
func (pc *pageCache) join(key string) (f *pageFlight, lead bool) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if f, ok := pc.flights[key]; ok {
		return f, false
	}
	if pc.flights == nil {
		pc.flights = map[string]*pageFlight{}
	}
	f = &pageFlight{key: key, done: make(chan struct{})}
	pc.flights[key] = f
	return f, true
}

// land ends the flight f, keeping body (when not nil) under version.
func (pc *pageCache) land(version string, f *pageFlight, body []byte) {
	if body != nil {
		pc.put(version, f.key, body)
	}
	pc.mu.Lock()
	delete(pc.flights, f.key)
	pc.mu.Unlock()
	f.body = body
	close(f.done)
}

const pageCacheMaxBytes = 8 << 20

func (pc *pageCache) get(key string) ([]byte, bool) {
	pc.mu.Lock()
	b, ok := pc.entries[key]
	pc.mu.Unlock()
	return b, ok
}

// put keeps body under key, a key of version.
func (pc *pageCache) put(version, key string, body []byte) {
	if len(body) > pageCacheMaxBytes/8 {
		return
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.entries == nil || version != pc.version || pc.size+len(body) > pageCacheMaxBytes {
		pc.entries, pc.version, pc.size = map[string][]byte{}, version, 0
	}
	if old, ok := pc.entries[key]; ok {
		pc.size -= len(old)
	}
	pc.entries[key] = body
	pc.size += len(body)
}

// clear forgets every page (tests that change what a page shows without
// changing the database: a package variable).
func (pc *pageCache) clear() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.entries, pc.size = nil, 0
}

// appendAccess appends what a page's authorization depends on: the
// principal's user, roles and team memberships (sorted and deduplicated
// by workflow.NewPrincipal), each field after a NUL (names hold none), so
// that two principals with different access never append the same bytes.
func appendAccess(b []byte, p workflow.Principal) []byte {
	b = strconv.AppendInt(b, p.UserID, 10)
	for _, r := range p.Roles {
		b = append(append(b, "\x00r"...), r...)
	}
	for _, m := range p.Memberships {
		b = append(append(b, "\x00m"...), m.Team...)
		b = append(append(b, "\x00"...), m.Role...)
	}
	return b
}

// pageView is what one view of a cached route records while it renders.
type pageView struct {
	body []byte // the page render wrote with status 200
	live bool   // the view read a live source (markLive)
}

type pageViewKey struct{}

// markLive records that the page being rendered shows something read from
// outside the database (the cluster, AWS, Prometheus): it is not kept.
func markLive(ctx context.Context) {
	if v, ok := ctx.Value(pageViewKey{}).(*pageView); ok {
		v.live = true
	}
}

// cachePage serves a signed-in session's GET of the route from the page
// cache when its data version, minute and URL match, and keeps what the
// handler renders otherwise.
func (s *Server) cachePage(next echo.HandlerFunc) echo.HandlerFunc {
	return s.cached(next, store.DataVersionFrom, writeHTML)
}

// cacheAPI is cachePage for the JSON API's reads (issue 33: the API's row
// in make bench read the store and encoded the same 50 connections for
// every request). The viewer is the browser's session, or the bearer
// token the request presented (viewerKey); the handler writes through
// writeJSONView. A session's answer is kept under the data version its
// session middleware read. A token's request records its use (apiAuth),
// a commit that moves the data version but not the content version
// (store.DB.ContentVersion), which apiAuth read before it looked the
// token up: a token's answer is kept under that, so that one token's reads
// share one answer until something they show changes, whatever uses are
// recorded meanwhile. A route under cacheAPI must show nothing a use
// writes (a token's last use, the audit trail).
func (s *Server) cacheAPI(next echo.HandlerFunc) echo.HandlerFunc {
	return s.cached(next, func(ctx context.Context) (string, bool) {
		if v, ok := store.ContentVersionFrom(ctx); ok {
			return v, true
		}
		return store.DataVersionFrom(ctx)
	}, writeJSON)
}

// viewerKey is whom a cached response may be served to: the bearer token
// the request presented (its id, person, name, scope and teams: what a
// token narrows), or else the session ("" when signed out: nothing is
// cached). A bearer request has no session (the session middleware leaves
// it alone), so the token is asked first.
func (s *Server) viewerKey(c echo.Context) string {
	if t, ok := apiToken(c); ok {
		return fmt.Sprint("bearer\x00", t.ID, "\x00", t.UserID, "\x00", t.Name, "\x00", t.Scope, "\x00", t.Teams)
	}
	return s.sessions.Token(c.Request().Context())
}

// cached serves a signed-in viewer's GET of the route from the page cache
// when its version (versionOf: the data version, or for the API's tokens
// the content version), minute and URL match, and keeps what the handler
// renders otherwise; write answers with a kept body.
func (s *Server) cached(next echo.HandlerFunc, versionOf func(context.Context) (string, bool), write func(echo.Context, int, []byte) error) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		ctx := r.Context()
		version, ok := versionOf(ctx)
		viewer := s.viewerKey(c)
		if !ok || viewer == "" || r.Method != http.MethodGet {
			if !ok && viewer != "" && r.Method == http.MethodGet {
				// Signed in, but no data version (another session's
				// write in progress, store.DataVersion): rendered from
				// the database and not kept.
				s.pages.count("unversioned")
			}
			return next(c)
		}
		// The principal as this request decided it (after any group
		// re-check), not only the session: a re-check that changed the
		// roles or teams during the request commits after the version
		// above was read, so the version alone would still find the page
		// rendered for the roles before it (issue 32 item 5).
		p, _ := principal(c)
		b := make([]byte, 0, len(version)+len(viewer)+len(r.URL.Path)+64)
		b = append(append(append(b, version...), 0), viewer...)
		b = append(appendAccess(append(b, 0), p), 0)
		base := string(append(b, r.URL.RequestURI()...))
		minute := s.opts.Now().Unix() / 60
		body, result, f, lead := s.pages.lookup(base, minute)
		if body != nil {
			s.pages.count(result)
			return write(c, http.StatusOK, body)
		}
		if !lead {
			select {
			case <-f.done:
				if f.body != nil {
					s.pages.count("shared")
					return write(c, http.StatusOK, f.body)
				}
			case <-ctx.Done():
				return ctx.Err()
			}
			s.pages.count("rendered") // the shared view was not kept
			return next(c)
		}
		s.pages.count("rendered")
		v := &pageView{}
		var kept []byte
		defer func() { s.pages.land(version, f, kept) }()
		c.SetRequest(r.WithContext(context.WithValue(ctx, pageViewKey{}, v)))
		if err := next(c); err != nil {
			return err
		}
		if v.body != nil && !v.live {
			kept = v.body
		}
		return nil
	}
}

// renderBuffers are render's buffers: a page is rendered whole before its
// first byte is written, so a template that fails shows the error page
// rather than half a page, and the response goes out in one write with
// its length.
var renderBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func render(c echo.Context, status int, comp templ.Component) error {
	b := renderBuffers.Get().(*bytes.Buffer)
	b.Reset()
	defer func() {
		if b.Cap() <= 1<<20 {
			renderBuffers.Put(b)
		}
	}()
	ctx := c.Request().Context()
	if err := comp.Render(ctx, b); err != nil {
		return err
	}
	keepView(ctx, status, b.Bytes())
	return writeHTML(c, status, b.Bytes())
}

// keepView gives the body a handler wrote with status 200 to the cached
// view being rendered, if any (cached).
func keepView(ctx context.Context, status int, body []byte) {
	if v, ok := ctx.Value(pageViewKey{}).(*pageView); ok && status == http.StatusOK {
		v.body = bytes.Clone(body)
	}
}

// writeJSONView is echo's c.JSON (the same bytes: ?pretty indents by two
// spaces) for a route under cacheAPI: the body is encoded whole, kept for
// the cache when the status is 200, and written in one write with its
// length.
func writeJSONView(c echo.Context, status int, v any) error {
	b := renderBuffers.Get().(*bytes.Buffer)
	b.Reset()
	defer func() {
		if b.Cap() <= 1<<20 {
			renderBuffers.Put(b)
		}
	}()
	enc := json.NewEncoder(b)
	if _, pretty := c.QueryParams()["pretty"]; pretty {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(v); err != nil {
		return err
	}
	keepView(c.Request().Context(), status, b.Bytes())
	return writeJSON(c, status, b.Bytes())
}

// writeJSON is echo's JSONBlob with the body's length.
func writeJSON(c echo.Context, status int, body []byte) error {
	return writeBlob(c, status, jsonContentType, body)
}

// writeHTML is echo's HTMLBlob with the body's length.
func writeHTML(c echo.Context, status int, body []byte) error {
	return writeBlob(c, status, htmlContentType, body)
}

// The Content-Type values of writeBlob, shared by every response and
// clipped (an Add to one reallocates).
var (
	jsonContentType = []string{echo.MIMEApplicationJSON}[:1:1]
	htmlContentType = []string{echo.MIMETextHTMLCharsetUTF8}[:1:1]
)

// writeBlob is echo's Blob (the content type unless the handler set one,
// the status, the body) with the body's length, setting both headers
// without canonicalizing their names for every response.
func writeBlob(c echo.Context, status int, contentType []string, body []byte) error {
	res := c.Response()
	h := res.Header()
	if v := h["Content-Type"]; len(v) == 0 || v[0] == "" {
		h["Content-Type"] = contentType
	}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	res.WriteHeader(status)
	_, err := res.Write(body)
	return err
}
