package web

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	"github.com/pb33f/libopenapi-validator/content"
	"golang.org/x/net/http/httpguts"

	"github.com/hyperpod-governance/portal/internal/auth"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/support/awstest"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

var (
	apiValidatorOnce sync.Once
	apiValidator     validator.Validator
	apiValidatorErr  error
)

// openAPIValidator is the embedded document, checked against the OpenAPI
// 3.1 specification by libopenapi-validator, as a validator of responses.
func openAPIValidator(t testing.TB) validator.Validator {
	t.Helper()
	apiValidatorOnce.Do(func() {
		doc, err := libopenapi.NewDocument(openAPIJSON)
		if err != nil {
			apiValidatorErr = err
			return
		}
		// A stream (application/x-ndjson) is validated line by line: its
		// schema is the array of its lines (OpenAPI 3.2's reading of a
		// sequential media type's schema).
		v, errs := validator.NewValidator(doc, config.WithBodyDecoder(mimeNDJSON, content.DecoderFunc(decodeNDJSON)))
		if len(errs) > 0 {
			apiValidatorErr = fmt.Errorf("%v", errs)
			return
		}
		if ok, verrs := v.ValidateDocument(); !ok {
			var msgs []string
			for _, e := range verrs {
				msgs = append(msgs, e.Message+": "+e.Reason)
			}
			apiValidatorErr = fmt.Errorf("the document is not valid OpenAPI: %s", strings.Join(msgs, "; "))
			return
		}
		apiValidator = v
	})
	if apiValidatorErr != nil {
		t.Fatal(apiValidatorErr)
	}
	return apiValidator
}

// decodeNDJSON decodes newline-delimited JSON as the array of its lines;
// a line that is not one JSON value fails.
func decodeNDJSON(in *content.DecodeInput) (any, error) {
	out := []any{}
	sc := bufio.NewScanner(in.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var v any
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return nil, fmt.Errorf("line %d: %w", len(out)+1, err)
		}
		out = append(out, v)
	}
	return out, sc.Err()
}

// apiReq is one API request of the tests.
type apiReq struct {
	token   string       // the bearer token ("" for none)
	client  *http.Client // a session's client (nil: a plain one)
	method  string
	path    string
	body    []byte
	ctype   string
	headers map[string]string
}

// api sends r and checks its answer against the OpenAPI document: every
// response of a documented operation validates (status, content type,
// headers, body schema).
func (h *harness) api(r apiReq) (*http.Response, []byte) {
	h.t.Helper()
	if r.method == "" {
		r.method = http.MethodGet
	}
	req, err := http.NewRequest(r.method, h.base+r.path, bytes.NewReader(r.body))
	if err != nil {
		h.t.Fatal(err)
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	if r.body != nil {
		ct := r.ctype
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	for k, v := range r.headers {
		req.Header.Set(k, v)
	}
	c := r.client
	if c == nil {
		c = h.ts.Client()
	}
	resp, err := noRedirect(c).Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		h.t.Fatal(err)
	}
	if resp.StatusCode >= 500 {
		h.t.Errorf("%s %s = %d\n%s", r.method, r.path, resp.StatusCode, body)
	}
	if documented(r.method, r.path) {
		vreq := httptest.NewRequest(r.method, r.path, bytes.NewReader(r.body))
		vreq.Header = req.Header.Clone()
		vresp := &http.Response{StatusCode: resp.StatusCode, Header: resp.Header, Body: io.NopCloser(bytes.NewReader(body)), Request: vreq}
		if ok, errs := openAPIValidator(h.t).ValidateHttpResponse(vreq, vresp); !ok {
			for _, e := range errs {
				h.t.Errorf("%s %s = %d does not match the OpenAPI document: %s (%s)\n%s", r.method, r.path, resp.StatusCode, e.Message, e.Reason, body)
			}
		}
	} else if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
		h.t.Errorf("%s %s = %d, but the document has no such operation", r.method, r.path, resp.StatusCode)
	}
	if resp.StatusCode >= 400 && isAPIPath(strings.SplitN(r.path, "?", 2)[0]) {
		var p problemDoc
		if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" || json.Unmarshal(body, &p) != nil || p.Status != resp.StatusCode || p.Title == "" {
			h.t.Errorf("%s %s = %d, not a problem document (%s):\n%s", r.method, r.path, resp.StatusCode, ct, body)
		} else if (p.Type == "about:blank") != (p.Title == http.StatusText(p.Status)) {
			h.t.Errorf("%s %s: type %q with title %q (RFC 9457 4.2.1: about:blank only with the status phrase)", r.method, r.path, p.Type, p.Title)
		}
	}
	return resp, body
}

// documented reports whether the OpenAPI document has an operation for
// method on path (its query ignored).
func documented(method, path string) bool {
	path, _, _ = strings.Cut(path, "?")
	for _, op := range documentedOperations() {
		if op.method == method && op.re.MatchString(path) {
			return true
		}
	}
	return false
}

type docOp struct {
	method, path string
	re           *regexp.Regexp
}

var paramRe = regexp.MustCompile(`\{[^}]+\}|:[^/]+`)

func documentedOperations() []docOp {
	var d struct {
		Paths map[string]map[string]json.RawMessage
	}
	if err := json.Unmarshal(openAPIJSON, &d); err != nil {
		panic(err)
	}
	var out []docOp
	for p, ops := range d.Paths {
		re := regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(paramRe.ReplaceAllString(p, "\x00")), "\x00", `[^/]+`) + "$")
		for m := range ops {
			out = append(out, docOp{method: strings.ToUpper(m), path: paramRe.ReplaceAllString(p, "{}"), re: re})
		}
	}
	return out
}

var reTokenSecret = regexp.MustCompile(`data-testid="token-secret">(hpp_[A-Za-z0-9_-]+)<`)

// newToken makes a token on the settings page as s and returns its secret.
func (h *harness) newToken(s session, scope workflow.TokenScope, teams ...string) string {
	h.t.Helper()
	resp, body := h.postAs(s, "/settings/tokens", url.Values{"name": {"ci " + string(scope)}, "scope": {string(scope)}, "days": {"30"}, "teams": teams})
	m := reTokenSecret.FindStringSubmatch(body)
	if resp.StatusCode != http.StatusOK || m == nil {
		h.t.Fatalf("create token = %d, no secret shown\n%s", resp.StatusCode, body)
	}
	return m[1]
}

func (h *harness) tokenOf(secret string) store.APIToken {
	h.t.Helper()
	t, err := h.db.TokenByHash(context.Background(), tokenHash(secret))
	if err != nil {
		h.t.Fatal(err)
	}
	return t
}

// fileAs files the example contract of team as s (a draft) and returns its id.
func (h *harness) fileAs(s session, team string) int64 {
	h.t.Helper()
	resp, body := h.postAs(s, "/teams/"+team+"/connections", formValues(formFromContract(contractFor(team))))
	if resp.StatusCode != http.StatusSeeOther {
		h.t.Fatalf("create for %s = %d\n%s", team, resp.StatusCode, body)
	}
	id, _ := strconv.ParseInt(strings.TrimPrefix(resp.Header.Get("Location"), "/connections/"), 10, 64)
	return id
}

func contractFor(team string) workflow.Contract { return workflow.ExampleContractFor(team) }

// TestTokenSettings: a token is made on the settings page, its secret shown
// once and kept nowhere in the database; bad input is answered on the form
// with the input kept; a person revokes their own tokens, nobody else's;
// creation and revocation are audited with the token's id.
func TestTokenSettings(t *testing.T) {
	h := newHarness(t, false)
	owner := h.signIn("owner.red")
	if _, body := h.get(owner.c, "/"); !strings.Contains(body, `data-testid="nav-tokens"`) {
		t.Error("the layout does not link the token settings")
	}
	secret := h.newToken(owner, workflow.TokenRead, "red")
	tok := h.tokenOf(secret)
	if tok.Scope != workflow.TokenRead || !slices.Equal(tok.Teams, []string{"red"}) || tok.ExpiresAt.Sub(tok.CreatedAt) != 30*24*time.Hour {
		t.Errorf("stored token %+v", tok)
	}
	if _, body := h.get(owner.c, "/settings/tokens"); strings.Contains(body, secret) || !strings.Contains(body, "ci read") {
		t.Error("the settings page shows the secret again, or not the token")
	}
	for _, f := range []string{h.dbPath, h.dbPath + "-wal"} {
		if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte(secret)) {
			t.Errorf("the secret is stored in %s", f)
		}
	}
	// Bad input: 422, the messages, the name kept.
	resp, body := h.postAs(owner, "/settings/tokens", url.Values{"name": {"keep-me"}, "scope": {"read"}, "days": {"91"}, "teams": {"blue"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="error-days"`) ||
		!strings.Contains(body, `data-testid="error-teams"`) || !strings.Contains(body, `value="keep-me"`) {
		t.Errorf("bad token form = %d\n%s", resp.StatusCode, body)
	}
	if resp, body := h.postAs(owner, "/settings/tokens", url.Values{"name": {"x"}, "scope": {"read"}, "days": {"many"}}); resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="error-days"`) {
		t.Errorf("days not a number = %d", resp.StatusCode)
	}
	// Another person cannot revoke it; its person can.
	path := fmt.Sprintf("/settings/tokens/%d/revoke", tok.ID)
	if resp, _ := h.postAs(h.signIn("admin"), path, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an admin revoking another's token = %d, want 404", resp.StatusCode)
	}
	if resp, _ := h.postAs(owner, path, nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("revoke = %d", resp.StatusCode)
	}
	if got := h.tokenOf(secret); got.RevokedAt.IsZero() {
		t.Error("not revoked")
	}
	evs, _ := h.db.AuditEvents(context.Background(), store.AuditFilter{ObjectType: "token", ObjectID: tok.ID}, 0, 10)
	if len(evs) != 2 || evs[0].Action != "token.revoke" || evs[1].Action != "token.create" || evs[1].Actor != "owner.red@example.test" {
		t.Errorf("audit = %+v", evs)
	}
}

// TestAPIReadsAsThePerson: a token reads what its person reads, through the
// pages' loaders: the list, the connection, and the version in the export
// format (the same bytes as the page's export), with an ETag; every use is
// audited with the token's id and shown as its last use.
func TestAPIReadsAsThePerson(t *testing.T) {
	h := newHarness(t, false)
	owner := h.signIn("owner.red")
	id := h.fileAs(owner, "red")
	h.fileAs(h.signIn("owner.blue"), "blue")
	secret := h.newToken(h.signIn("member.red"), workflow.TokenRead)
	resp, body := h.api(apiReq{token: secret, path: "/api/v1/connections"})
	var list struct {
		Items []apiConnectionBody
		Next  string
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list.Items) != 1 || list.Items[0].ID != id || list.Items[0].Team != "red" {
		t.Fatalf("list = %d\n%s", resp.StatusCode, body)
	}
	if resp, body := h.api(apiReq{token: secret, path: fmt.Sprintf("/api/v1/connections/%d", id)}); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"state":"draft"`) {
		t.Errorf("read = %d\n%s", resp.StatusCode, body)
	}
	resp, body = h.api(apiReq{token: secret, path: fmt.Sprintf("/api/v1/connections/%d/versions/1", id)})
	_, export := h.get(owner.c, fmt.Sprintf("/connections/%d/versions/1/contract.json", id))
	v, _ := h.db.Version(context.Background(), id, 1)
	if resp.StatusCode != http.StatusOK || string(body) != export || resp.Header.Get("ETag") != `"`+v.Hash+`"` {
		t.Errorf("version = %d, ETag %q (want %q); same bytes as the export: %v", resp.StatusCode, resp.Header.Get("ETag"), v.Hash, string(body) == export)
	}
	if c, err := workflow.DecodeContract(body); err != nil || c.Hash() != v.Hash {
		t.Errorf("the exported version does not decode to its hash: %v", err)
	}
	resp, _ = h.api(apiReq{token: secret, path: fmt.Sprintf("/api/v1/connections/%d/versions/1", id), headers: map[string]string{"If-None-Match": `"` + v.Hash + `"`}})
	if resp.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match = %d, want 304", resp.StatusCode)
	}
	tok := h.tokenOf(secret)
	evs, _ := h.db.AuditEvents(context.Background(), store.AuditFilter{Action: "token.use", ObjectID: tok.ID}, 0, 10)
	if len(evs) != 4 || evs[0].Reason != fmt.Sprintf("GET /api/v1/connections/%d/versions/1", id) || evs[0].Actor != "member.red@example.test" {
		t.Errorf("token.use events = %+v, want 4", evs)
	}
	if tok.LastUsedAt.IsZero() || tok.LastUsedFrom == "" {
		t.Errorf("last use not recorded: %+v", tok)
	}
	if _, page := h.get(h.signIn("member.red").c, "/settings/tokens"); strings.Contains(page, `data-testid="token-last-used">never`) {
		t.Error("the settings page says the used token was never used")
	}
}

// apiParams fills an API route's parameters.
func apiParams(route string, id int64) string {
	return strings.NewReplacer(":id", strconv.FormatInt(id, 10), ":v", "1", ":team", "red", ":month", statementMonth).Replace(route)
}

// apiRouteTable is every route under /api/v1 of the router.
func (h *harness) apiRouteTable() []docOp {
	var out []docOp
	for _, r := range h.srv.echo.Routes() {
		if isAPIPath(r.Path) && (r.Method == http.MethodGet || r.Method == http.MethodPost || r.Method == http.MethodPut) {
			out = append(out, docOp{method: r.Method, path: r.Path})
		}
	}
	return out
}

// TestAPIRouteWalkHidesTheOtherTeam walks every /api/v1 route that names a
// connection or review, with tokens of each role and team, read, read-write
// and decide,
// limited or not: team red's connection (and its review) is not found for every token whose
// person is outside red (another team's owner, finance) and for a token
// limited to blue, whose person oversees red; and nothing changes. Every
// route that names a team (usage, statements) is not found for the other
// team's owner (red's) and for the token limited to red (blue's). Lists
// hold only what each token may see. A new API route is covered
// automatically.
func TestAPIRouteWalkHidesTheOtherTeam(t *testing.T) {
	ti := newTestIssuer(t)
	h := newHarness(t, false, ti.option)
	red := h.fileAs(h.signIn("owner.red"), "red")
	blue := h.fileAs(h.signIn("owner.blue"), "blue")
	tokens := map[string]string{ // who: secret
		"owner.blue rw":              h.newToken(h.signIn("owner.blue"), workflow.TokenReadWrite),
		"finance read":               h.newToken(h.signIn("finance"), workflow.TokenRead),
		"revadmin rw (red only)":     h.newToken(h.signIn("revadmin"), workflow.TokenReadWrite, "red"),
		"revadmin decide (red only)": h.newToken(h.signIn("revadmin"), workflow.TokenDecide, "red"),
		"machine ci-red rw":          ti.token("client-ci-red", nil, nil),
	}
	// revadmin is an admin and reviewer who owns red: limited to red, blue
	// is out; the machine ci-red has red's owners' groups only.
	outside := map[string]int64{"owner.blue rw": red, "finance read": red, "revadmin rw (red only)": blue, "revadmin decide (red only)": blue, "machine ci-red rw": blue}
	ctx := context.Background()
	// Both connections live, each with an open review, so that the
	// reviews' routes name a review of the other team.
	if err := h.db.ExecForTest(ctx, `UPDATE connections SET state = 'active', approved_version = 1, submitted_at = created_at`); err != nil {
		t.Fatal(err)
	}
	reviewOf := map[int64]int64{}
	for _, id := range []int64{red, blue} {
		r := h.openReview(id, workflow.OpenReviewInput{Trigger: workflow.TriggerScheduled, DueOn: "2026-01-01", Evidence: []byte(`{}`)})
		reviewOf[id] = r.ID
	}
	before, _, _ := h.db.ListConnections(ctx, store.ListFilter{}, 0, 10)
	checked := 0
	// Team routes: finance reads every team's usage and statements (as
	// their pages), so only these are outside.
	outsideTeam := map[string]string{"owner.blue rw": "red", "revadmin rw (red only)": "blue"}
	for _, r := range h.apiRouteTable() {
		if !strings.Contains(r.path, ":id") && !strings.Contains(r.path, ":team") {
			continue
		}
		for who, secret := range tokens {
			id := outside[who]
			v, _ := h.db.Version(ctx, id, 1)
			if strings.HasPrefix(r.path, apiPrefix+"/reviews/") {
				id = reviewOf[id]
			}
			path := apiParams(r.path, id)
			if strings.Contains(r.path, ":team") {
				if outsideTeam[who] == "" {
					continue
				}
				path = strings.NewReplacer(":team", outsideTeam[who], ":month", statementMonth).Replace(r.path)
			}
			resp, body := h.api(apiReq{token: secret, method: r.method, path: path, headers: map[string]string{"If-Match": `"` + v.Hash + `"`}})
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("%s %s %s = %d, want 404", who, r.method, path, resp.StatusCode)
			}
			if bytes.Contains(body, []byte("hyperpod-ns-")) || bytes.Contains(body, []byte("@example.test")) {
				t.Errorf("%s %s %s leaks the connection", who, r.method, path)
			}
			checked++
		}
	}
	if checked < 3*4 {
		t.Errorf("only %d route×token checks ran; the route table changed?", checked)
	}
	// Filing for another team: not found.
	body, _ := json.Marshal(contractFor("red"))
	if resp, _ := h.api(apiReq{token: tokens["owner.blue rw"], method: http.MethodPost, path: "/api/v1/connections", body: body}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("owner.blue filing for red = %d, want 404", resp.StatusCode)
	}
	if resp, _ := h.api(apiReq{token: tokens["owner.blue rw"], method: http.MethodPost, path: "/api/v1/preview", body: body}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("owner.blue previewing a request for red = %d, want 404", resp.StatusCode)
	}
	body, _ = json.Marshal(contractFor("blue"))
	for _, path := range []string{"/api/v1/connections", "/api/v1/preview"} {
		for _, who := range []string{"revadmin rw (red only)", "machine ci-red rw"} {
			if resp, _ := h.api(apiReq{token: tokens[who], method: http.MethodPost, path: path, body: body}); resp.StatusCode != http.StatusNotFound {
				t.Errorf("%s: POST %s for blue = %d, want 404", who, path, resp.StatusCode)
			}
		}
	}
	after, _, _ := h.db.ListConnections(ctx, store.ListFilter{}, 0, 10)
	if len(after) != len(before) || after[0].State != before[0].State || after[1].State != before[1].State {
		t.Errorf("outsiders changed something: %+v -> %+v", before, after)
	}
	for _, rid := range reviewOf {
		if r, err := h.db.Review(ctx, rid); err != nil || !r.Open() {
			t.Errorf("review %d decided by an outsider: %+v, %v", rid, r, err)
		}
	}
	// The lists.
	for who, want := range map[string][]string{"owner.blue rw": {"blue"}, "finance read": nil, "revadmin rw (red only)": {"red"}, "revadmin decide (red only)": {"red"}, "machine ci-red rw": {"red"}} {
		_, body := h.api(apiReq{token: tokens[who], path: "/api/v1/connections"})
		var list struct{ Items []apiConnectionBody }
		_ = json.Unmarshal(body, &list)
		var teams []string
		for _, it := range list.Items {
			teams = append(teams, it.Team)
		}
		if !slices.Equal(teams, want) {
			t.Errorf("%s lists teams %v, want %v", who, teams, want)
		}
	}
	// The audit trail is the /audit page's room (admins and reviewers): none
	// of these tokens may read it, page or stream (a token limited to red
	// keeps none of revadmin's portal-wide roles), so none reads the other
	// team's events.
	for who, secret := range tokens {
		for _, path := range []string{"/api/v1/audit", "/api/v1/audit?stream=1", "/api/v1/audit?team=" + map[bool]string{true: "blue", false: "red"}[strings.HasPrefix(who, "revadmin")]} {
			resp, body := h.api(apiReq{token: secret, path: path})
			if resp.StatusCode != http.StatusForbidden || bytes.Contains(body, []byte("@example.test")) {
				t.Errorf("%s GET %s = %d, want 403 and no event\n%s", who, path, resp.StatusCode, body)
			}
		}
	}
	// Without the limit the same person sees both.
	_, all := h.api(apiReq{token: h.newToken(h.signIn("revadmin"), workflow.TokenRead), path: "/api/v1/connections"})
	if !bytes.Contains(all, []byte(`"team":"blue"`)) || !bytes.Contains(all, []byte(`"team":"red"`)) {
		t.Errorf("revadmin's unlimited token does not see both teams:\n%s", all)
	}
}

// TestAPIRefusesBadTokens walks every /api/v1 route that needs a token
// with no token, a malformed header, an unknown, an expired and a revoked
// token, and a token whose person's groups are too old: 401 each, with
// WWW-Authenticate, and nothing changes.
func TestAPIRefusesBadTokens(t *testing.T) {
	h := newHarness(t, false)
	owner := h.signIn("owner.red")
	id := h.fileAs(owner, "red")
	expired := h.newToken(owner, workflow.TokenReadWrite)
	revoked := h.newToken(owner, workflow.TokenReadWrite)
	stale := h.newToken(h.signIn("owner.blue"), workflow.TokenReadWrite)
	ctx := context.Background()
	if err := h.db.ExecForTest(ctx, fmt.Sprintf(`UPDATE api_tokens SET created_at = '2000-01-01T00:00:00.000000000Z', expires_at = '2000-01-31T00:00:00.000000000Z' WHERE id = %d`, h.tokenOf(expired).ID)); err != nil {
		t.Fatal(err)
	}
	if resp, _ := h.postAs(owner, fmt.Sprintf("/settings/tokens/%d/revoke", h.tokenOf(revoked).ID), nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatal("revoke failed")
	}
	blueUser, _ := h.db.UserByEmail(ctx, "owner.blue@example.test")
	if err := h.db.ExecForTest(ctx, fmt.Sprintf(`UPDATE users SET groups_checked_at = '2000-01-01T00:00:00.000000000Z' WHERE id = %d`, blueUser.ID)); err != nil {
		t.Fatal(err)
	}
	bad := map[string]map[string]string{
		"no token":     {},
		"basic auth":   {"Authorization": "Basic b3duZXI6cGFzcw=="},
		"empty bearer": {"Authorization": "Bearer "},
		"unknown":      {"Authorization": "Bearer hpp_" + strings.Repeat("A", 43)},
		"expired":      {"Authorization": "Bearer " + expired},
		"revoked":      {"Authorization": "Bearer " + revoked},
		"stale groups": {"Authorization": "Bearer " + stale},
	}
	writes := h.auditCount("connection.submit") + h.auditCount("connection.create")
	checked := 0
	for _, r := range h.apiRouteTable() {
		if r.path == apiPrefix+"/openapi.json" {
			continue
		}
		for name, hdr := range bad {
			if r.method != http.MethodGet && name == "no token" {
				continue // without a header it is the browser's request: refused by CSRF first (TestAPICookieRequests)
			}
			var body []byte
			if r.method != http.MethodGet {
				body, _ = json.Marshal(contractFor("red"))
			}
			resp, _ := h.api(apiReq{method: r.method, path: apiParams(r.path, id), headers: hdr, body: body})
			if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s with %s = %d (WWW-Authenticate %q), want 401", r.method, r.path, name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
			}
			checked++
		}
	}
	if checked < 5*6 {
		t.Errorf("only %d checks ran", checked)
	}
	if n := h.auditCount("connection.submit") + h.auditCount("connection.create"); n != writes {
		t.Error("a refused token changed something")
	}
	if n := h.auditCount("token.use"); n != 0 {
		t.Errorf("%d refused requests were recorded as uses", n)
	}
}

// TestAPITokenFollowsItsPersonsGroups: a token is its person as their
// groups were last confirmed: one who left team red's group loses red's
// connection through every token, one left in no group is refused, and a
// read token cannot write.
func TestAPITokenFollowsItsPersonsGroups(t *testing.T) {
	h := newHarness(t, false)
	owner := h.signIn("owner.red")
	id := h.fileAs(owner, "red")
	read := h.newToken(owner, workflow.TokenRead)
	rw := h.newToken(owner, workflow.TokenReadWrite)
	path := fmt.Sprintf("/api/v1/connections/%d", id)
	v, _ := h.db.Version(context.Background(), id, 1)
	// A read token is refused every write, with 403.
	body, _ := json.Marshal(contractFor("red"))
	if resp, _ := h.api(apiReq{token: read, method: http.MethodPost, path: "/api/v1/connections", body: body}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a read token filing = %d, want 403", resp.StatusCode)
	}
	if resp, _ := h.api(apiReq{token: read, method: http.MethodPost, path: path + "/submit", headers: map[string]string{"If-Match": `"` + v.Hash + `"`}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a read token submitting = %d, want 403", resp.StatusCode)
	}
	if resp, _ := h.api(apiReq{token: rw, path: path}); resp.StatusCode != http.StatusOK {
		t.Fatalf("before = %d", resp.StatusCode)
	}
	ctx := context.Background()
	u, _ := h.db.UserByEmail(ctx, "owner.red@example.test")
	// The person moved to team blue's members (a re-check recorded it).
	if err := h.db.ConfirmUserGroups(ctx, u.ID, []string{"team-blue-members"}, h.srv.opts.Now()); err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{read, rw} {
		if resp, _ := h.api(apiReq{token: tok, path: path}); resp.StatusCode != http.StatusNotFound {
			t.Errorf("after leaving red = %d, want 404", resp.StatusCode)
		}
	}
	if resp, _ := h.api(apiReq{token: rw, method: http.MethodPost, path: "/api/v1/connections", body: body}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("filing for red after leaving it = %d, want 404", resp.StatusCode)
	}
	// In no group at all.
	if err := h.db.ConfirmUserGroups(ctx, u.ID, []string{}, h.srv.opts.Now()); err != nil {
		t.Fatal(err)
	}
	if resp, _ := h.api(apiReq{token: read, path: "/api/v1/connections"}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a person in no group = %d, want 401", resp.StatusCode)
	}
}

// TestAPICookieRequests: the browser's session reads the API, and never
// writes through it (with or without the CSRF token).
func TestAPICookieRequests(t *testing.T) {
	h := newHarness(t, false)
	owner := h.signIn("owner.red")
	id := h.fileAs(owner, "red")
	if resp, _ := h.api(apiReq{client: owner.c, path: fmt.Sprintf("/api/v1/connections/%d", id)}); resp.StatusCode != http.StatusOK {
		t.Errorf("session read = %d", resp.StatusCode)
	}
	body, _ := json.Marshal(contractFor("red"))
	for name, hdr := range map[string]map[string]string{"with the CSRF token": {"X-CSRF-Token": owner.token}, "without": {}} {
		resp, _ := h.api(apiReq{client: owner.c, method: http.MethodPost, path: "/api/v1/connections", body: body, headers: hdr})
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("session write %s = %d, want 403", name, resp.StatusCode)
		}
	}
	if n := h.auditCount("connection.create"); n != 1 {
		t.Errorf("%d creations, want the one filed on the page", n)
	}
}

// TestAPIRateLimitPerToken: over its limit a token gets 429 with
// Retry-After; another token is not affected.
func TestAPIRateLimitPerToken(t *testing.T) {
	h := newHarness(t, false, func(o *Options) { o.APIRateLimit = 3 })
	owner := h.signIn("owner.red")
	a, b := h.newToken(owner, workflow.TokenRead), h.newToken(owner, workflow.TokenRead)
	for i := range 3 {
		if resp, _ := h.api(apiReq{token: a, path: "/api/v1/connections"}); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d = %d", i+1, resp.StatusCode)
		}
	}
	resp, _ := h.api(apiReq{token: a, path: "/api/v1/connections"})
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("4th request = %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if resp, _ := h.api(apiReq{token: b, path: "/api/v1/connections"}); resp.StatusCode != http.StatusOK {
		t.Errorf("another token = %d", resp.StatusCode)
	}
}

// TestAPIBadInput: bad queries, ids, bodies and media types get problem
// documents naming the field where there is one, never a 500.
func TestAPIBadInput(t *testing.T) {
	h := newHarness(t, false, func(o *Options) { o.BodyLimit = "64K" })
	owner := h.signIn("owner.red")
	id := h.fileAs(owner, "red")
	rw := h.newToken(owner, workflow.TokenReadWrite)
	for _, tc := range []struct {
		method, path string
		body         []byte
		ctype        string
		want         int
		field        string
	}{
		{"GET", "/api/v1/connections?limit=abc", nil, "", 400, "limit"},
		{"GET", "/api/v1/connections?limit=1000", nil, "", 400, "limit"},
		{"GET", "/api/v1/connections?state=bogus", nil, "", 400, "state"},
		{"GET", "/api/v1/connections?before=-4", nil, "", 400, "before"},
		{"GET", "/api/v1/connections/abc", nil, "", 404, ""},
		{"GET", "/api/v1/connections/99999999999999999999", nil, "", 404, ""},
		{"GET", fmt.Sprintf("/api/v1/connections/%d/versions/0", id), nil, "", 404, "version"},
		{"GET", fmt.Sprintf("/api/v1/connections/%d/versions/x", id), nil, "", 404, "version"},
		{"GET", fmt.Sprintf("/api/v1/connections/%d/versions/9", id), nil, "", 404, ""},
		{"GET", "/api/v1/nothing-here", nil, "", 404, ""},
		{"POST", "/api/v1/connections", []byte(`{"team":`), "", 400, ""},
		{"POST", "/api/v1/connections", []byte(`{"team":"red","surprise":1}`), "", 400, ""},
		{"POST", "/api/v1/connections", []byte(`[]`), "", 400, ""},
		{"POST", "/api/v1/connections", []byte(`{"team":"red"}`), "text/plain", 415, ""},
		{"POST", "/api/v1/connections", bytes.Repeat([]byte(" "), 100<<10), "", 413, ""},
		{"POST", "/api/v1/connections", []byte(`{"team":"red"}`), "", 422, "cluster_name"},
	} {
		resp, body := h.api(apiReq{token: rw, method: tc.method, path: tc.path, body: tc.body, ctype: tc.ctype})
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s = %d, want %d\n%s", tc.method, tc.path, resp.StatusCode, tc.want, body)
			continue
		}
		var p problemDoc
		_ = json.Unmarshal(body, &p)
		if tc.field != "" && !slices.ContainsFunc(p.Errors, func(f problemField) bool { return f.Field == tc.field }) {
			t.Errorf("%s %s: the problem does not name %s:\n%s", tc.method, tc.path, tc.field, body)
		}
	}
}

// TestAPIFileAndSubmitWithIfMatch: a read-write token files a draft from
// the export format and submits it with If-Match: 428 without, 412 with a
// stale ETag, 200 with the current one; the audit trail names the person.
func TestAPIFileAndSubmitWithIfMatch(t *testing.T) {
	h := newHarness(t, false)
	owner := h.signIn("owner.red")
	rw := h.newToken(owner, workflow.TokenReadWrite)
	c := contractFor("red")
	body, _ := json.Marshal(c)
	resp, out := h.api(apiReq{token: rw, method: http.MethodPost, path: "/api/v1/connections", body: body})
	var conn apiConnectionBody
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(out, &conn) != nil || conn.State != "draft" || resp.Header.Get("Location") != conn.Links.Self {
		t.Fatalf("file = %d\n%s", resp.StatusCode, out)
	}
	etag := resp.Header.Get("ETag")
	if etag != `"`+c.Hash()+`"` {
		t.Errorf("ETag %q, want the contract's hash", etag)
	}
	submit := conn.Links.Self + "/submit"
	if resp, _ := h.api(apiReq{token: rw, method: http.MethodPost, path: submit}); resp.StatusCode != http.StatusPreconditionRequired {
		t.Errorf("no If-Match = %d, want 428", resp.StatusCode)
	}
	// Someone saves version 2 on the page: the pipeline's ETag is stale.
	f := formValues(formFromContract(c))
	f.Set("fair_share_weight", "20")
	f.Set("base_version", "1")
	if resp, _ := h.postAs(owner, fmt.Sprintf("/connections/%d", conn.ID), f); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("save v2 = %d", resp.StatusCode)
	}
	if resp, _ := h.api(apiReq{token: rw, method: http.MethodPost, path: submit, headers: map[string]string{"If-Match": etag}}); resp.StatusCode != http.StatusPreconditionFailed {
		t.Errorf("stale If-Match = %d, want 412", resp.StatusCode)
	}
	resp, _ = h.api(apiReq{token: rw, path: conn.Links.Self + "/versions/2"})
	resp, out = h.api(apiReq{token: rw, method: http.MethodPost, path: submit, headers: map[string]string{"If-Match": resp.Header.Get("ETag")}})
	if resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(`"state":"submitted"`)) {
		t.Errorf("submit = %d\n%s", resp.StatusCode, out)
	}
	evs, _ := h.db.AuditEvents(context.Background(), store.AuditFilter{Action: "connection.submit"}, 0, 10)
	if len(evs) != 1 || evs[0].Actor != "owner.red@example.test" || evs[0].Version != 2 {
		t.Errorf("submit events = %+v", evs)
	}
}

// TestOpenAPIDocumentsEveryRoute: every route under /api/v1 of the router
// is an operation of the document, and every operation is a route.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	h := newHarness(t, false)
	openAPIValidator(t) // the document itself is valid OpenAPI 3.1
	routed := map[string]bool{}
	for _, r := range h.srv.echo.Routes() {
		if isAPIPath(r.Path) {
			routed[r.Method+" "+paramRe.ReplaceAllString(r.Path, "{}")] = true
		}
	}
	docd := map[string]bool{}
	for _, op := range documentedOperations() {
		docd[op.method+" "+op.path] = true
	}
	for k := range routed {
		if !docd[k] {
			t.Errorf("route %s is not in openapi.json", k)
		}
	}
	for k := range docd {
		if !routed[k] {
			t.Errorf("openapi.json documents %s, which is not routed", k)
		}
	}
	if len(routed) < 5 {
		t.Errorf("only %d API routes", len(routed))
	}
	// The document is served as is, and rendered for people.
	if resp, body := h.api(apiReq{path: "/api/v1/openapi.json"}); resp.StatusCode != http.StatusOK || !bytes.Equal(body, openAPIJSON) {
		t.Errorf("GET /api/v1/openapi.json = %d", resp.StatusCode)
	}
	resp, page := h.get(h.client(), "/api/docs")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/docs = %d", resp.StatusCode)
	}
	for k := range docd {
		m, p, _ := strings.Cut(k, " ")
		prefix, _, _ := strings.Cut(p, "{}")
		if !strings.Contains(page, "<code>"+m+" "+prefix) {
			t.Errorf("/api/docs does not show %s", k)
		}
	}
	if strings.Contains(page, "http://") && strings.Contains(page, "cdn") {
		t.Error("/api/docs loads from a CDN")
	}
}

// TestOpenAPIStatesAreTheWorkflows: the document's State enum is
// workflow.AllStates.
func TestOpenAPIStatesAreTheWorkflows(t *testing.T) {
	var d struct {
		Components struct {
			Schemas struct{ State struct{ Enum []string } }
		}
	}
	if err := json.Unmarshal(openAPIJSON, &d); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, s := range workflow.AllStates {
		want = append(want, string(s))
	}
	if !slices.Equal(d.Components.Schemas.State.Enum, want) {
		t.Errorf("State enum %v, want %v", d.Components.Schemas.State.Enum, want)
	}
}

// TestAPITokenAsksTheDirectory: with the organisation's directory, a token's
// person is asked for again before a write and once their groups are older
// than the re-check interval: removed from team red's owners group in the
// directory, they lose red through their token at once for writes and
// after the interval for reads, without signing in.
func TestAPITokenAsksTheDirectory(t *testing.T) {
	f := awstest.NewIdentityStore(t)
	owner := f.AddUser("owner.red@example.test")
	redOwners := f.AddGroup("team-red-owners")
	f.AddMembership(owner, redOwners)
	now := time.Now()
	h := newHarness(t, false, withIdentityStore(f, auth.UserAttrEmail), func(o *Options) {
		o.Now = func() time.Time { return now }
		o.GroupsRecheckInterval = time.Minute
	})
	s := h.signIn("owner.red")
	id := h.fileAs(s, "red")
	rw := h.newToken(s, workflow.TokenReadWrite)
	path := fmt.Sprintf("/api/v1/connections/%d", id)
	if resp, _ := h.api(apiReq{token: rw, path: path}); resp.StatusCode != http.StatusOK {
		t.Fatalf("before = %d", resp.StatusCode)
	}
	f.RemoveMembership(owner, redOwners)
	f.AddMembership(owner, f.AddGroup("team-blue-members"))
	// A write asks at once: no longer red's owner.
	body, _ := json.Marshal(contractFor("red"))
	if resp, _ := h.api(apiReq{token: rw, method: http.MethodPost, path: "/api/v1/connections", body: body}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("filing for red after leaving it in the directory = %d, want 404", resp.StatusCode)
	}
	now = now.Add(2 * time.Minute)
	if resp, _ := h.api(apiReq{token: rw, path: path}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("reading red's connection after the interval = %d, want 404", resp.StatusCode)
	}
	u, _ := h.db.UserByEmail(context.Background(), "owner.red@example.test")
	if !slices.Equal(u.Groups, []string{"team-blue-members"}) {
		t.Errorf("recorded groups %v, want the directory's", u.Groups)
	}
}

// FuzzAPIJSON posts arbitrary bodies, with arbitrary If-Match values, to
// every POST and PUT route under /api/v1 of the router (file, submit, edit,
// withdraw, the previews, mark read, the decisions, and any route added
// later) with a read-write token of team red's owner (an admin's, or an
// admin's or a reviewer's decision token, where only they get to the
// route's body: reachingTokens), and to an open review's decision with a
// reviewer's decision token: every answer is a documented
// problem document or a documented success (harness.api validates each
// against openapi.json), never a 5xx. The seeds hold bad JSON, unknown
// fields and a body over the body limit (TestAPIJSONWritesRefuseBadBodies
// asks the exact answers of those). go test (and so make test) runs the
// seed corpus; make fuzz fuzzes it (go test -fuzz '^FuzzAPIJSON$'
// ./internal/web).
func FuzzAPIJSON(f *testing.F) {
	h := newHarness(f, false, func(o *Options) { o.APIRateLimit = 1 << 20; o.BodyLimit = "64K" })
	owner := h.signIn("owner.red")
	rw := h.newToken(owner, workflow.TokenReadWrite)
	id := h.fileAs(owner, "red")
	// The decisions: an admin's on red's draft (refused after the body is
	// read), a reviewer's on an open review of blue's live connection.
	decide := h.newToken(h.signIn("admin"), workflow.TokenDecide)
	review := h.newToken(h.signIn("reviewer"), workflow.TokenDecide)
	blue := h.fileAs(h.signIn("owner.blue"), "blue")
	if err := h.db.ExecForTest(f.Context(), fmt.Sprintf(`UPDATE connections SET state = 'active', approved_version = 1, submitted_at = created_at WHERE id = %d`, blue)); err != nil {
		f.Fatal(err)
	}
	rev, err := h.db.OpenReview(f.Context(), blue, workflow.OpenReviewInput{Trigger: workflow.TriggerScheduled, DueOn: "2026-01-01", Evidence: []byte(`{}`)}, h.srv.opts.Now())
	if err != nil {
		f.Fatal(err)
	}
	ex, _ := json.Marshal(contractFor("red"))
	for _, seed := range []string{`{"reason":"ok","plan_hash":"x"}`, `{"decision":"renew","reason":"ok"}`, `{"decision":"request_changes","reason":"ok","deadline":"2026-02-30"}`, string(ex), `{}`, `{"team":"red","surprise":1}`, `null`, `{"team":"blue"}`, "\xff\xfe", `{"team":"red","team":"red"}`,
		`{"team":"red","scheduling":{"guaranteed":[{"count":-1}]}}`, `{"TEAM":"red"}`, `{"team":"red"} {}`, strings.Repeat(`[`, 10000),
		`{"team":`, `{"reason":"x","decision":"approve"}`, `{"team":"` + strings.Repeat("a", 70<<10) + `"}`} {
		f.Add([]byte(seed), "")
		f.Add([]byte(seed), `"x"`)
	}
	routes := h.apiWriteRoutes()
	tokens, _ := h.reachingTokens(routes, id, rw, h.newToken(h.signIn("admin"), workflow.TokenReadWrite), decide, review)
	f.Fuzz(func(t *testing.T, body []byte, ifMatch string) {
		if !httpguts.ValidHeaderFieldValue(ifMatch) {
			t.Skip("not a header value an HTTP client sends")
		}
		hh := *h
		hh.t = t
		for _, r := range routes {
			hh.api(apiReq{token: tokens[r.path], method: r.method, path: apiParams(r.path, id), body: body, headers: map[string]string{"If-Match": ifMatch}})
		}
		hh.api(apiReq{token: review, method: http.MethodPost, path: fmt.Sprintf("/api/v1/reviews/%d/decision", rev.ID), body: body})
	})
}

// reachingTokens picks for each write route the first of tokens that gets
// past its authorization on connection id (a valid contract, no If-Match,
// answered neither 403 nor 404), so that the route's body is read: team
// red's owner files, edits and submits, and an admin previews a draft's
// change (its plan is the admins' while it is a draft). A route none of
// them reaches (a decision, which no token makes) gets the first, and ""
// in reached.
func (h *harness) reachingTokens(routes []docOp, id int64, tokens ...string) (out, reached map[string]string) {
	h.t.Helper()
	ex, _ := json.Marshal(contractFor("red"))
	out, reached = map[string]string{}, map[string]string{}
	for _, r := range routes {
		out[r.path] = tokens[0]
		for _, tok := range tokens {
			if resp, _ := h.api(apiReq{token: tok, method: r.method, path: apiParams(r.path, id), body: ex}); resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusNotFound {
				out[r.path], reached[r.path] = tok, tok
				break
			}
		}
	}
	return out, reached
}

// apiWriteRoutes are the router's POST and PUT routes under /api/v1.
func (h *harness) apiWriteRoutes() []docOp {
	var out []docOp
	for _, r := range h.apiRouteTable() {
		if r.method == http.MethodPost || r.method == http.MethodPut {
			out = append(out, r)
		}
	}
	if len(out) < 7 {
		h.t.Fatalf("only %d API write routes: %v", len(out), out)
	}
	return out
}

// documentedBody reports whether openapi.json gives the operation of
// method on route (echo's :params) a JSON request body.
func documentedBody(method, route string) bool {
	var d struct {
		Paths map[string]map[string]struct {
			RequestBody *struct {
				Content map[string]json.RawMessage
			}
		}
	}
	if err := json.Unmarshal(openAPIJSON, &d); err != nil {
		panic(err)
	}
	for p, ops := range d.Paths {
		if paramRe.ReplaceAllString(p, "{}") != paramRe.ReplaceAllString(route, "{}") {
			continue
		}
		op, ok := ops[strings.ToLower(method)]
		return ok && op.RequestBody != nil && op.RequestBody.Content["application/json"] != nil
	}
	return false
}

// TestAPIJSONWritesRefuseBadBodies: on every POST and PUT route under
// /api/v1 whose documented operation takes a JSON body, with a token that
// reaches it (reachingTokens) and the If-Match of the current version, bad JSON and an
// unknown field are refused with a 400 or 422 problem document; on every
// write route a body over the body limit is refused with 413; each answer
// validates against the document (harness.api), and nothing is saved.
func TestAPIJSONWritesRefuseBadBodies(t *testing.T) {
	h := newHarness(t, false, func(o *Options) { o.BodyLimit = "64K" })
	owner := h.signIn("owner.red")
	rw := h.newToken(owner, workflow.TokenReadWrite)
	id := h.fileAs(owner, "red")
	v, _ := h.db.Version(t.Context(), id, 1)
	ex, _ := json.Marshal(contractFor("red"))
	var withField map[string]any
	_ = json.Unmarshal(ex, &withField)
	withField["surprise"] = 1
	unknown, _ := json.Marshal(withField)
	bad := map[string]struct {
		body []byte
		want []int
	}{
		"bad JSON":      {[]byte(`{"team":`), []int{400}},
		"unknown field": {unknown, []int{400, 422}},
		"oversize":      {append(append([]byte(`{"team":"`), bytes.Repeat([]byte("a"), 70<<10)...), `"}`...), []int{413}},
	}
	routes := h.apiWriteRoutes()
	tokens, reached := h.reachingTokens(routes, id, rw, h.newToken(h.signIn("admin"), workflow.TokenReadWrite), h.newToken(h.signIn("admin"), workflow.TokenDecide))
	writes := h.auditCount("connection.create") + h.auditCount("connection.edit") + h.auditCount("connection.submit") + h.auditCount("connection.withdraw")
	withBody := 0
	for _, r := range routes {
		reads := documentedBody(r.method, r.path)
		if reads && reached[r.path] == "" {
			// Refused to every token before its body is read (harness.api
			// still requires a documented problem document).
			t.Logf("%s %s: no token reaches its body", r.method, r.path)
			reads = false
		}
		if reads {
			withBody++
		}
		for name, b := range bad {
			if !reads && name != "oversize" {
				continue // a route without a body ignores one; every route refuses one over the limit
			}
			resp, body := h.api(apiReq{token: tokens[r.path], method: r.method, path: apiParams(r.path, id), body: b.body, headers: map[string]string{"If-Match": `"` + v.Hash + `"`}})
			if !slices.Contains(b.want, resp.StatusCode) {
				t.Errorf("%s %s with %s = %d, want %v\n%s", r.method, r.path, name, resp.StatusCode, b.want, body)
			}
		}
	}
	if withBody < 4 {
		t.Errorf("only %d write routes take a JSON body in the document", withBody)
	}
	if n := h.auditCount("connection.create") + h.auditCount("connection.edit") + h.auditCount("connection.submit") + h.auditCount("connection.withdraw"); n != writes {
		t.Errorf("bad bodies changed something: %d events, %d before", n, writes)
	}
}
