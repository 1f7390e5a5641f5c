package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"golang.org/x/time/rate"

	"github.com/hyperpod-governance/portal/internal/auth"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// The JSON API (issue 37) is another door to the same rooms: its handlers
// load through the pages' loaders (loadConnection, scopeTeams), ask the
// same workflow.Decide, and add only what a token narrows
// (workflow.TokenPermits, TokenCoversTeam). It is described by
// openapi.json (served at /api/v1/openapi.json, for people at /api/docs).
//
// Authentication: Authorization: Bearer <token> (a personal access token,
// tokens.go). Such a request has no session and needs no CSRF token (a
// browser never adds the header on its own). A request without the header
// is the browser's, with its session cookie: it may read, never write (a
// cookie would otherwise let another site's form write through the API).

// DefaultAPIRateLimit is how many API requests one token may make per
// minute (and at once).
const DefaultAPIRateLimit = 300

// apiPrefix is the versioned API's root.
const apiPrefix = "/api/v1"

func isAPIPath(p string) bool { return p == apiPrefix || strings.HasPrefix(p, apiPrefix+"/") }

// bearerRequest: an API request that presents a token. The session, CSRF
// and principal middleware leave it alone; apiAuth authenticates it.
func bearerRequest(r *http.Request) bool {
	return isAPIPath(r.URL.Path) && r.Header.Get("Authorization") != ""
}

const ctxToken = "api_token"

// ctxTokenPerson is the token's person as resolved now, before the token
// narrows them (apiDecider).
const ctxTokenPerson = "api_token_person"

// apiToken is the token the request presented, if any.
func apiToken(c echo.Context) (workflow.Token, bool) {
	t, ok := c.Get(ctxToken).(workflow.Token)
	return t, ok
}

// apiRoutes are the JSON API's routes and its documentation. Every route
// under /api/v1 is in openapi.json (TestOpenAPIDocumentsEveryRoute).
func (s *Server) apiRoutes(e *echo.Echo) {
	auth := s.apiAuth()
	e.GET(apiPrefix+"/openapi.json", s.openAPIDocument)
	e.GET("/api/docs", s.apiDocs)
	e.GET(apiPrefix+"/connections", s.apiListConnections, auth, s.cacheAPI)
	e.GET(apiPrefix+"/connections/:id", s.apiConnection, auth)
	e.GET(apiPrefix+"/connections/:id/versions/:v", s.apiVersion, auth)
	e.POST(apiPrefix+"/connections", s.apiCreateConnection, auth)
	e.POST(apiPrefix+"/connections/:id/submit", s.apiSubmitConnection, auth)
	e.PUT(apiPrefix+"/connections/:id/contract", s.apiEditContract, auth)
	e.POST(apiPrefix+"/connections/:id/withdraw", s.apiWithdraw, auth)
	e.GET(apiPrefix+"/connections/:id/versions/:v/plan", s.apiPlan, auth)
	e.GET(apiPrefix+"/connections/:id/versions/:v/plan-diff", s.apiPlanDiff, auth)
	e.POST(apiPrefix+"/connections/:id/preview", s.apiPreviewChange, auth)
	e.POST(apiPrefix+"/preview", s.apiPreview, auth)
	e.GET(apiPrefix+"/teams/:team/usage", s.apiTeamUsage, auth)
	e.GET(apiPrefix+"/teams/:team/statements", s.apiStatements, auth)
	e.GET(apiPrefix+"/teams/:team/statements/:month", s.apiStatement, auth)
	e.GET(apiPrefix+"/audit", s.apiAudit, auth)
	e.GET(apiPrefix+"/notifications", s.apiNotifications, auth)
	e.POST(apiPrefix+"/notifications/:id/read", s.apiMarkNotificationRead, auth)
	s.apiDecisionRoutes(e, auth)
}

// apiAuth authenticates an API request: a bearer token (checked against
// workflow.CheckTokenUse, rate limited per token, and its use recorded
// with its id in the audit trail), or the browser's session for reads.
func (s *Server) apiAuth() echo.MiddlewareFunc {
	limits := middleware.NewRateLimiterMemoryStoreWithConfig(middleware.RateLimiterMemoryStoreConfig{
		Rate: rate.Limit(float64(s.opts.APIRateLimit) / 60), Burst: s.opts.APIRateLimit, ExpiresIn: 10 * time.Minute,
	})
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if !bearerRequest(r) {
				switch r.Method {
				case http.MethodGet, http.MethodHead:
				default:
					return &problemError{status: http.StatusForbidden, title: "A token is needed",
						detail: "Changes through the API need Authorization: Bearer <token>; a browser session only reads."}
				}
				if _, ok := principal(c); !ok {
					return &problemError{status: http.StatusUnauthorized, title: "Not authenticated",
						detail: "Send Authorization: Bearer <token> (make one at /settings/tokens)."}
				}
				return next(c)
			}
			allow := func(key string) error {
				if ok, _ := limits.Allow(key); ok {
					return nil
				}
				c.Response().Header().Set("Retry-After", strconv.Itoa(max(1, 60/s.opts.APIRateLimit)))
				return &problemError{status: http.StatusTooManyRequests, title: "Too many requests",
					detail: fmt.Sprintf("This token may make %d requests a minute.", s.opts.APIRateLimit)}
			}
			if s.machineBearer(r) {
				tok, p, err := s.machinePrincipal(c, allow)
				if err != nil {
					return err
				}
				c.Set(ctxUser, p)
				c.Set(ctxToken, tok)
				return next(c)
			}
			tok, p, err := s.tokenPrincipal(c)
			if err != nil {
				return err
			}
			if err := allow(strconv.FormatInt(tok.ID, 10)); err != nil {
				return err
			}
			what, now := r.Method+" "+r.URL.Path, s.opts.Now()
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				// A read: its use is recorded after the answer, with the
				// next batch of uses (store.DB.QueueTokenUse). The token
				// was found in force as the read began (tokenPrincipal).
				if err := s.opts.DB.QueueTokenUse(r.Context(), tok.ID, actor(p), what, c.RealIP(), now); err != nil {
					return err
				}
			} else if err := s.opts.DB.RecordTokenUse(r.Context(), tok.ID, actor(p), what, c.RealIP(), now); errors.Is(err, store.ErrTokenRevoked) {
				// A write: revoked since tokenPrincipal read it. The use
				// and its refusal are decided in the transaction that
				// records it, before the write runs.
				return &problemError{status: http.StatusUnauthorized, title: "Token refused", detail: "The token is " + string(workflow.TokenRevoked) + ".", err: err}
			} else if err != nil {
				return err
			}
			c.Set(ctxUser, p)
			c.Set(ctxToken, tok)
			return next(c)
		}
	}
}

// tokenPrincipal finds the presented token and what it acts as: its person
// with the groups last confirmed for them, mapped as at login, narrowed by
// workflow.TokenPrincipal. Every refusal is a 401.
func (s *Server) tokenPrincipal(c echo.Context) (workflow.Token, workflow.Principal, error) {
	unauthorized := func(detail string) error {
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="portal"`)
		return &problemError{status: http.StatusUnauthorized, title: "Token refused", detail: detail}
	}
	secret, ok := strings.CutPrefix(c.Request().Header.Get("Authorization"), "Bearer ")
	secret = strings.TrimSpace(secret)
	if !ok || !strings.HasPrefix(secret, tokenPrefix) || len(secret) > 200 {
		return workflow.Token{}, workflow.Principal{}, unauthorized("Send Authorization: Bearer " + tokenPrefix + "….")
	}
	// The content version first: the token and its person are read after
	// it (and may be kept under it), and the API's cached reads key on it
	// (cacheAPI).
	s.readContentVersion(c)
	ctx := c.Request().Context()
	st, u, err := s.opts.DB.TokenAndUser(ctx, tokenHash(secret))
	if errors.Is(err, store.ErrNotFound) {
		return st.Token, workflow.Principal{}, unauthorized("Unknown token.")
	}
	if err != nil {
		return st.Token, workflow.Principal{}, err
	}
	if u, err = s.recheckTokenPerson(c, u); err != nil {
		return st.Token, workflow.Principal{}, err
	}
	roles, ms := s.opts.Mapping.Resolve(u.Groups)
	person := workflow.NewPrincipal(u.ID, u.Subject, u.Email, u.Name, roles, ms)
	if why := workflow.CheckTokenUse(st.Token, person, u.GroupsCheckedAt, s.opts.Now(), s.opts.SessionLifetime); why != workflow.TokenOK {
		s.opts.Logger.InfoContext(ctx, "API token refused", "request_id", requestID(c), "token_id", st.ID, "reason", string(why))
		detail := "The token is " + string(why) + "."
		switch why {
		case workflow.TokenStaleGroups:
			detail = "Your groups were last confirmed too long ago; sign in to the portal to confirm them."
		case workflow.TokenNoAccess:
			detail = "The token's person is in no group that gives it access (any more)."
		}
		return st.Token, person, unauthorized(detail)
	}
	c.Set(ctxTokenPerson, person)
	return st.Token, workflow.TokenPrincipal(person, st.Token), nil
}

// recheckTokenPerson: with a directory (Options.Groups, IAM Identity
// Center), a token's person is asked for again as a session's is
// (recheck.go): before every write, and on a read once their groups are
// older than Options.GroupsRecheckInterval; the answer is recorded
// (ConfirmUserGroups) and used. A person the directory no longer has keeps
// no group. When the directory cannot be reached, a write is refused (503:
// fail closed) and a read keeps the groups last confirmed. Without a
// directory the groups last confirmed by a login or a session's re-check
// are used (workflow.CheckTokenUse bounds their age).
func (s *Server) recheckTokenPerson(c echo.Context, u store.User) (store.User, error) {
	r := c.Request()
	write := r.Method != http.MethodGet && r.Method != http.MethodHead
	now := s.opts.Now()
	if s.opts.Groups == nil || u.DirName == "" || (!write && now.Before(u.GroupsCheckedAt.Add(s.opts.GroupsRecheckInterval))) {
		return u, nil
	}
	ctx := r.Context()
	// A write asks the directory itself; a read may take the lookup cache's
	// answer (--identity-store-cache-ttl), so that the directory is asked
	// at most once a TTL per person however often the token reads (the
	// confirmation is recorded only when the groups changed or once an
	// hour: store.GroupsConfirmRecordEvery).
	groups, err := s.askDirectory(ctx, u.DirName, write)
	switch {
	case errors.Is(err, auth.ErrUserNotInDirectory):
		groups = []string{}
	case err != nil && write:
		return u, &problemError{status: http.StatusServiceUnavailable, title: "Groups cannot be checked",
			detail: "The organisation's directory did not answer, so nothing was changed. Try again in a minute.", err: err}
	case err != nil:
		s.opts.Logger.WarnContext(ctx, "API token: directory unavailable, using the groups last confirmed", "user_id", u.ID, "err", err.Error())
		return u, nil
	}
	if groups == nil {
		groups = []string{}
	}
	if err := s.opts.DB.ConfirmUserGroups(ctx, u.ID, groups, now); err != nil {
		return u, err
	}
	u.Groups, u.GroupsCheckedAt = groups, now
	return u, nil
}

// apiPermits applies what the token narrows: its scope (TokenPermits) and
// its team limit. A request without a token (the browser's) is the person's.
func apiPermits(c echo.Context, a workflow.Action, team string) error {
	t, ok := apiToken(c)
	if !ok {
		return nil
	}
	if d := workflow.TokenPermits(t.Scope, a); !d.Allowed {
		return &problemError{status: http.StatusForbidden, title: "Not allowed with this token", detail: d.Reason, err: errDenied(d.Reason)}
	}
	if team != "" && !workflow.TokenCoversTeam(t, team) {
		return &echo.HTTPError{Code: http.StatusNotFound, Internal: errDenied("token limited to other teams")}
	}
	return nil
}

// apiConnectionBody is a connection in the API (schema Connection).
type apiConnectionBody struct {
	ID              int64      `json:"id"`
	Team            string     `json:"team"`
	State           string     `json:"state"`
	Amendment       string     `json:"amendment,omitempty"`
	Cluster         string     `json:"cluster"`
	Purpose         string     `json:"purpose"`
	Requester       string     `json:"requester"`
	CurrentVersion  int        `json:"current_version"`
	ApprovedVersion int        `json:"approved_version"`
	CreatedAt       time.Time  `json:"created_at"`
	UpdatedAt       time.Time  `json:"updated_at"`
	SubmittedAt     *time.Time `json:"submitted_at,omitempty"`
	Links           apiLinks   `json:"links"`
}

type apiLinks struct {
	Self           string `json:"self"`
	CurrentVersion string `json:"current_version"`
	Page           string `json:"page"`
}

func apiConnectionOf(c store.Connection) apiConnectionBody {
	self := fmt.Sprintf("%s/connections/%d", apiPrefix, c.ID)
	b := apiConnectionBody{ID: c.ID, Team: c.Team, State: string(c.State), Amendment: string(c.Amendment), Cluster: c.ClusterName,
		Purpose: c.Purpose, Requester: c.RequesterEmail, CurrentVersion: c.CurrentVersion, ApprovedVersion: c.ApprovedVersion,
		CreatedAt: c.CreatedAt.UTC(), UpdatedAt: c.UpdatedAt.UTC(),
		Links: apiLinks{Self: self, CurrentVersion: fmt.Sprintf("%s/versions/%d", self, c.CurrentVersion), Page: fmt.Sprintf("/connections/%d", c.ID)}}
	if !c.SubmittedAt.IsZero() {
		t := c.SubmittedAt.UTC()
		b.SubmittedAt = &t
	}
	return b
}

// pageQuery reads a list's paging parameters: before (the previous
// page's next-link cursor; 0 when absent) and limit (1 to 100; pageSize
// when absent). A bad value adds the field's problem to bad.
func pageQuery(q url.Values, bad *[]problemField) (before int64, limit int) {
	before, limit = 0, pageSize
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			*bad = append(*bad, problemField{Field: "before", Detail: "a positive whole number (the next link's cursor)"})
		}
		before = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			*bad = append(*bad, problemField{Field: "limit", Detail: "a whole number from 1 to 100"})
		}
		limit = n
	}
	return before, limit
}

// apiListConnections is GET /api/v1/connections: the connections the
// caller may see (scopeTeams, as /connections), newest first, a page at a
// time (before: the cursor of the previous page's next link).
func (s *Server) apiListConnections(c echo.Context) error {
	p, ok := principal(c)
	if !ok {
		return echo.NewHTTPError(http.StatusUnauthorized)
	}
	if err := apiPermits(c, workflow.ActionViewConnection, ""); err != nil {
		return err
	}
	q := c.QueryParams()
	f := store.ListFilter{Teams: scopeTeams(p), Team: q.Get("team"), State: workflow.State(q.Get("state"))}
	var bad []problemField
	if f.State != "" && !f.State.Valid() {
		bad = append(bad, problemField{Field: "state", Detail: "not a state: " + strconv.Quote(q.Get("state"))})
	}
	before, limit := pageQuery(q, &bad)
	if len(bad) > 0 {
		return &problemError{status: http.StatusBadRequest, title: "Invalid query", detail: "Some query parameters are not valid.", fields: bad}
	}
	rows, next, err := s.opts.DB.ListConnections(c.Request().Context(), f, before, limit)
	if err != nil {
		return err
	}
	out := struct {
		Items []apiConnectionBody `json:"items"`
		Next  string              `json:"next,omitempty"`
	}{Items: []apiConnectionBody{}}
	for _, r := range rows {
		out.Items = append(out.Items, apiConnectionOf(r))
	}
	if next != 0 {
		q.Set("before", strconv.FormatInt(next, 10))
		out.Next = apiPrefix + "/connections?" + q.Encode()
	}
	return writeJSONView(c, http.StatusOK, out)
}

// apiConnection is GET /api/v1/connections/:id, loaded and authorized as
// the connection's page (loadConnection).
func (s *Server) apiConnection(c echo.Context) error {
	_, conn, _, err := s.loadConnection(c)
	if err != nil {
		return err
	}
	if err := apiPermits(c, workflow.ActionViewConnection, conn.Team); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, apiConnectionOf(conn))
}

// apiVersion is GET /api/v1/connections/:id/versions/:v: the version in
// the export format (contractExport, the same bytes as the page's
// contract.json export, which `portal contract import` reads), with its
// hash as a strong ETag (If-None-Match answers 304).
func (s *Server) apiVersion(c echo.Context) error {
	_, conn, _, err := s.loadConnection(c)
	if err != nil {
		return err
	}
	if err := apiPermits(c, workflow.ActionViewConnection, conn.Team); err != nil {
		return err
	}
	n, err := strconv.Atoi(c.Param("v"))
	if err != nil || n < 1 {
		return &problemError{status: http.StatusNotFound, title: "No such version", detail: "Versions are numbered from 1.",
			fields: []problemField{{Field: "version", Detail: "a positive whole number"}}}
	}
	v, err := s.opts.DB.Version(c.Request().Context(), conn.ID, n)
	if errors.Is(err, store.ErrNotFound) {
		return &problemError{status: http.StatusNotFound, title: "No such version",
			detail: fmt.Sprintf("Connection %d has versions 1 to %d.", conn.ID, conn.CurrentVersion)}
	}
	if err != nil {
		return err
	}
	etag := `"` + v.Hash + `"`
	h := c.Response().Header()
	h.Set("ETag", etag)
	h.Set("X-Contract-Hash", v.Hash)
	if inm := c.Request().Header.Get("If-None-Match"); inm != "" && etagMatches(inm, etag) {
		return c.NoContent(http.StatusNotModified)
	}
	body, err := contractExport(v)
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, "application/json", body)
}

// etagMatches reports whether an If-None-Match or If-Match header names
// etag (or is "*"); weak tags compare by their opaque part.
func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}

// problemError is an API error as an RFC 9457 problem document
// (https://www.rfc-editor.org/rfc/rfc9457): status, title, detail, and the
// fields that failed (extension member "errors").
type problemError struct {
	status        int
	title, detail string
	fields        []problemField
	err           error // for the log only
}

func (p *problemError) Error() string {
	if p.err != nil {
		return p.title + ": " + p.err.Error()
	}
	return p.title + ": " + p.detail
}

type problemField struct {
	Field  string `json:"field"`
	Detail string `json:"detail"`
}

// problemType is the type of the portal's problems: its API page's
// description of the problem document.
const problemType = "/api/docs#schema-Problem"

type problemDoc struct {
	Type      string         `json:"type"`
	Title     string         `json:"title"`
	Status    int            `json:"status"`
	Detail    string         `json:"detail,omitempty"`
	Instance  string         `json:"instance,omitempty"`
	Errors    []problemField `json:"errors,omitempty"`
	RequestID string         `json:"request_id,omitempty"`
}

// writeProblem is handleError for the API: every error, the framework's
// too (404, 405, 413), as application/problem+json.
func (s *Server) writeProblem(c echo.Context, err error) {
	doc := problemDoc{Type: "about:blank", Instance: c.Request().URL.Path, RequestID: requestID(c)}
	var pe *problemError
	var ue *userError
	var he *echo.HTTPError
	switch {
	case errors.As(err, &pe):
		doc.Status, doc.Title, doc.Detail, doc.Errors = pe.status, pe.title, pe.detail, pe.fields
	case errors.As(err, &ue):
		doc.Status, doc.Title, doc.Detail = ue.page.Status, ue.page.Title, ue.page.Message
	case errors.As(err, &he):
		doc.Status = he.Code
		doc.Title, doc.Detail = httpMessage(he)
	default:
		doc.Status = http.StatusInternalServerError
		doc.Title, doc.Detail = httpMessage(&echo.HTTPError{Code: http.StatusInternalServerError})
	}
	// RFC 9457 section 4.2.1: "about:blank" only with the status's own
	// phrase as the title; the portal's own titles name its page of
	// problem details instead.
	if doc.Title != http.StatusText(doc.Status) {
		doc.Type = problemType
	}
	if doc.Status >= 500 {
		s.logFailure(c, err)
	} else if errors.As(err, &he) && he.Internal != nil {
		s.opts.Logger.InfoContext(c.Request().Context(), "request refused", "request_id", requestID(c), "status", doc.Status, "reason", he.Internal.Error())
	}
	if doc.Status == http.StatusUnauthorized && c.Response().Header().Get("WWW-Authenticate") == "" {
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="portal"`)
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(doc.Status)
		return
	}
	b, _ := json.Marshal(doc)
	_ = c.Blob(doc.Status, "application/problem+json", b)
}
