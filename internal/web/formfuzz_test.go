package web

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hyperpod-governance/portal/internal/auth"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// FuzzContractForms drives the real server (echo, sessions, CSRF, the
// handlers, SQLite) with random form bodies, as owner.red, against every
// state-changing route of the route table: random subsets and repeats of
// the contract form's fields (read from the rendered forms) and of the
// other forms' fields, random names, random sizes up to past the body
// limit, raw undecodable bodies, multipart bodies and missing tokens.
//
// For every input:
//   - the status is below 500;
//   - a refusal (any 4xx: 400, 403, 404, 409, 413, 422) changed no row of
//     any table (sessions excepted: each request refreshes its expiry). A
//     trigger on every table counts inserts, updates and deletes, so a
//     write that a refused request commits is caught whatever the table;
//   - a 422 says what is wrong on the page (form errors or a notice);
//   - a request without the session's CSRF token is refused with 403 (or
//     413 when it is also over the body limit, which is checked first);
//   - a success redirects to a path on the portal.
//
// Successful requests may change state; the database is then restored to
// the fixture, so every input runs against the same data and a failing
// input reproduces on its own. The fixture: team red's requests in several
// states (draft, incomplete draft, changes requested, submitted, approved,
// active, withdrawn) and team blue's draft.
//
//	go test -run '^$' -fuzz FuzzContractForms -fuzztime 1000000x ./internal/web
//
// make fuzz runs that; make test runs the seed corpus (go test). See
// docs/security.md.
func FuzzContractForms(f *testing.F) {
	fx := newFormFuzz(f)
	for _, s := range fx.seeds() {
		f.Add(s.route, s.target, s.mode, s.data)
	}
	f.Fuzz(func(t *testing.T, route, target, mode uint8, data []byte) {
		fx.run(t, route, target, mode, data)
	})
}

// fuzzLog keeps the log lines of the current request only, so a failure
// can show them and a long run does not grow memory.
type fuzzLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *fuzzLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *fuzzLog) take() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.b.String()
	l.b.Reset()
	return s
}

type formFuzz struct {
	h      *harness
	log    *fuzzLog
	db     *dbWatch
	cookie *http.Cookie
	token  string
	routes []string // POST route patterns, sorted
	names  []string // field names the fuzzer picks from, sorted
}

// The ids and teams a route's parameters take. 1-8 are the fixture's.
var (
	fuzzIDs   = []string{"1", "2", "3", "4", "5", "6", "7", "8", "0", "9", "-1", "01", "abc", "1e3", "99999999999999999999", "%31"}
	fuzzTeams = []string{"red", "blue", "nope", "RED", "red%2F..", "re%00d"}
	fuzzExtra = []string{
		// Fields of the portal's other forms and of the contract form's
		// hidden inputs, and names a form does not have.
		"_csrf", "intent", "base_version", "decision", "reason", "version", "hash", "plan_hash", "quota_arn",
		"cluster", "instance_type", "count", "team", "id", "workload_types[]", "", "business_purpose ",
	}
	// sizeClass gives the length a value is repeated to for size bytes
	// 0xF0-0xFF: around the field caps, and (the last two, at most one
	// field per body, as they are slow) at and past the 1 MiB body limit.
	sizeClass = []int{64, 255, 256, 300, 500, 1000, 1 << 10, 2000, 2 << 10, 4 << 10, 4<<10 + 1, 8 << 10, 16 << 10, 64 << 10,
		1<<20 - 300, 1<<20 + 1}
)

const fuzzMaxBody = 3 << 20

func newFormFuzz(f *testing.F) *formFuzz {
	log := &fuzzLog{}
	h := newHarness(f, false, func(o *Options) {
		o.Logger = slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelInfo}))
		// Every POST re-checks the user's groups (recheck.go). Against the
		// dev IdP that is a refresh grant, which signs new tokens with RSA:
		// under the fuzzer's coverage instrumentation that was most of an
		// execution. A directory answers the same groups at a fraction of
		// the cost; the re-check itself is tested in session_test.go.
		o.Groups = fuzzDirectory{}
	})
	fx := &formFuzz{h: h, log: log}
	owner := h.signIn("owner.red")
	blue := h.signIn("owner.blue")
	fx.cookie = sessionCookie(owner.c, h.base)
	fx.token = owner.token
	if fx.cookie == nil {
		f.Fatal("no session cookie after login")
	}

	// The fixture, through the pages where the pages can make it.
	create := func(s session, team string, v url.Values) {
		f.Helper()
		if resp, body := h.postAs(s, "/teams/"+team+"/connections", v); resp.StatusCode != http.StatusSeeOther {
			f.Fatalf("fixture: create = %d\n%s", resp.StatusCode, body)
		}
	}
	red := formValues(formFromContract(workflow.ExampleContract()))
	create(owner, "red", red)                                             // 1 draft, complete
	create(owner, "red", url.Values{"business_purpose": {"Incomplete."}}) // 2 draft, incomplete
	// 3-7: states set below. Incomplete contracts, so that they hold no
	// namespace or role and a complete draft can be submitted.
	for range 5 {
		create(owner, "red", url.Values{"business_purpose": {"A fixture request in a later state."}})
	}
	create(blue, "blue", formValues(formFromContract(workflow.ExampleContractFor("blue")))) // 8 blue draft

	fx.db = openDBWatch(f, h)
	fx.db.exec(f, `UPDATE connections SET state = 'changes_requested', submitted_at = created_at WHERE id = 3`,
		`UPDATE connections SET state = 'submitted', submitted_at = created_at WHERE id = 4`,
		`UPDATE connections SET state = 'approved', submitted_at = created_at, approved_version = 1 WHERE id = 5`,
		`UPDATE connections SET state = 'active', submitted_at = created_at, approved_version = 1 WHERE id = 6`,
		`UPDATE connections SET state = 'withdrawn', submitted_at = created_at WHERE id = 7`)
	fx.db.watch(f)

	// The routes: every state-changing route of the table, except logout
	// (which ends the session the fuzzer uses) and the development IdP.
	for _, r := range h.srv.echo.Routes() {
		if r.Method != http.MethodPost || r.Path == "/logout" || strings.HasPrefix(r.Path, "/dev-idp") {
			continue
		}
		fx.routes = append(fx.routes, r.Path)
	}
	slices.Sort(fx.routes)
	fx.routes = slices.Compact(fx.routes)
	if !slices.Contains(fx.routes, "/teams/:team/connections") || !slices.Contains(fx.routes, "/connections/:id") {
		f.Fatalf("routes %v lack the contract form's", fx.routes)
	}

	// The field names: every input of the forms the owner sees (the new and
	// edit forms, the request page), so a new field is fuzzed too.
	names := map[string]bool{}
	reName := regexp.MustCompile(`name="([^"]+)"`)
	for _, p := range []string{"/teams/red/connections/new", "/connections/1/edit", "/connections/1"} {
		resp, body := h.get(owner.c, p)
		if resp.StatusCode != http.StatusOK {
			f.Fatalf("GET %s = %d", p, resp.StatusCode)
		}
		for _, m := range reName.FindAllStringSubmatch(body, -1) {
			names[m[1]] = true
		}
	}
	for _, want := range []string{"business_purpose", "namespaces", "guaranteed", "workload_types", "egress", "signals"} {
		if !names[want] {
			f.Fatalf("the contract form has no field %q?", want)
		}
	}
	for _, n := range fuzzExtra {
		names[n] = true
	}
	for n := range names {
		fx.names = append(fx.names, n)
	}
	slices.Sort(fx.names)
	return fx
}

// dbWatch is the test's own connection to the harness's database. watch
// saves every table (the sessions excepted: each request refreshes its
// expiry) as the fixture and puts a trigger on each that counts inserts,
// updates and deletes: writes says whether a request wrote anything, in
// any table, and reset restores the fixture.
type dbWatch struct {
	raw    *sql.DB
	tables []string
	// triggers are the schema's own triggers that forbid deleting rows:
	// reset drops and recreates them.
	triggers map[string]string
}

func openDBWatch(tb testing.TB, h *harness) *dbWatch {
	tb.Helper()
	raw, err := sql.Open("sqlite", "file:"+h.dbPath+"?_pragma=busy_timeout(10000)")
	if err != nil {
		tb.Fatal(err)
	}
	raw.SetMaxOpenConns(1) // foreign keys are off on it: reset deletes parents first
	tb.Cleanup(func() { raw.Close() })
	return &dbWatch{raw: raw, triggers: map[string]string{}}
}

func (w *dbWatch) exec(tb testing.TB, stmts ...string) {
	tb.Helper()
	for _, s := range stmts {
		if _, err := w.raw.Exec(s); err != nil {
			tb.Fatalf("%s: %v", s, err)
		}
	}
}

func (w *dbWatch) strings(tb testing.TB, query string) [][2]string {
	tb.Helper()
	rows, err := w.raw.Query(query)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var out [][2]string
	for rows.Next() {
		var a, b string
		if err := rows.Scan(&a, &b); err != nil {
			tb.Fatal(err)
		}
		out = append(out, [2]string{a, b})
	}
	return out
}

// watch takes the database as it is now as the fixture.
func (w *dbWatch) watch(tb testing.TB) {
	tb.Helper()
	for _, r := range w.strings(tb, `SELECT name, '' FROM sqlite_master WHERE type = 'table'
		AND name NOT LIKE 'sqlite_%' AND name NOT IN ('sessions', 'goose_db_version') ORDER BY name`) {
		w.tables = append(w.tables, r[0])
	}
	for _, r := range w.strings(tb, `SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND sql LIKE '%DELETE ON%'`) {
		w.triggers[r[0]] = r[1]
	}
	if len(w.tables) < 8 || !slices.Contains(w.tables, "connections") || !slices.Contains(w.tables, "audit_events") {
		tb.Fatalf("watched tables %v: the schema changed?", w.tables)
	}
	stmts := []string{`CREATE TABLE fuzz_writes (name TEXT PRIMARY KEY, n INTEGER NOT NULL)`}
	for _, t := range w.tables {
		stmts = append(stmts, fmt.Sprintf(`CREATE TABLE fuzz_fixture_%s AS SELECT * FROM %s`, t, t),
			fmt.Sprintf(`INSERT INTO fuzz_writes VALUES ('%s', 0)`, t))
		for _, op := range []string{"INSERT", "UPDATE", "DELETE"} {
			stmts = append(stmts, fmt.Sprintf(`CREATE TRIGGER fuzz_%s_%s AFTER %s ON %s BEGIN UPDATE fuzz_writes SET n = n + 1 WHERE name = '%s'; END`,
				strings.ToLower(op), t, op, t, t))
		}
	}
	w.exec(tb, stmts...)
}

// writes counts the rows written since the last reset.
func (w *dbWatch) writes(tb testing.TB) int64 {
	tb.Helper()
	var n int64
	if err := w.raw.QueryRow(`SELECT total(n) FROM fuzz_writes`).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}

// reset restores the tables written since the last reset to the fixture,
// in one transaction.
func (w *dbWatch) reset(tb testing.TB) {
	tb.Helper()
	stmts := []string{"BEGIN IMMEDIATE"}
	for n := range w.triggers {
		stmts = append(stmts, "DROP TRIGGER "+n)
	}
	for _, r := range w.strings(tb, `SELECT name, '' FROM fuzz_writes WHERE n > 0 ORDER BY name`) {
		stmts = append(stmts, "DELETE FROM "+r[0], fmt.Sprintf("INSERT INTO %s SELECT * FROM fuzz_fixture_%s", r[0], r[0]))
	}
	for _, s := range w.triggers {
		stmts = append(stmts, s)
	}
	stmts = append(stmts, "UPDATE fuzz_writes SET n = 0", "COMMIT")
	w.exec(tb, stmts...)
}

// fuzzField is one name=value pair of a generated body, in order.
type fuzzField struct{ name, value string }

// decodeFields turns fuzz bytes into form fields: [name byte][size byte]
// [length, 2 bytes little-endian][value], repeated; a short tail is a value
// of its own. A name byte of 0xFF takes the name from the value, up to its
// first '='. A size byte of 0xF0-0xFF repeats the value to one of
// sizeClass's lengths.
func (fx *formFuzz) decodeFields(data []byte) []fuzzField {
	var out []fuzzField
	total, huge := 0, false
	for len(data) >= 2 && total < fuzzMaxBody {
		nb, sb := data[0], data[1]
		data = data[2:]
		n := len(data)
		if len(data) >= 2 {
			n = int(data[0]) | int(data[1])<<8
			data = data[2:]
		}
		n = min(n, len(data))
		value := string(data[:n])
		data = data[n:]
		name := fx.names[int(nb)%len(fx.names)]
		if nb == 0xFF {
			name, value, _ = strings.Cut(value, "=")
		}
		if sb >= 0xF0 {
			if value == "" {
				value = "x"
			}
			c := int(sb - 0xF0)
			if c >= len(sizeClass)-2 {
				if huge {
					c -= 4
				}
				huge = true
			}
			size := sizeClass[c]
			value = strings.Repeat(value, size/len(value)+1)[:size]
		}
		total += len(name) + len(value)
		out = append(out, fuzzField{name, value})
	}
	return out
}

func encodeFields(fs []fuzzField) string {
	var b strings.Builder
	for i, f := range fs {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(url.QueryEscape(f.name))
		b.WriteByte('=')
		b.WriteString(url.QueryEscape(f.value))
	}
	return b.String()
}

// Body modes (mode % 6).
const (
	modeTokenLast  = iota // urlencoded, the token appended in the body
	modeTokenFirst        // urlencoded, the token first in the body
	modeHeader            // urlencoded, the token in X-CSRF-Token
	modeMultipart         // multipart/form-data, the token in the header
	modeRaw               // the bytes as they are, the token in the header
	modeNoToken           // urlencoded, no token or a wrong one: must be 403
	modes
)

var rawContentTypes = []string{"application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "multipart/form-data",
	"text/plain", "application/json", "", "application/x-www-form-urlencoded; charset=utf-16"}

func (fx *formFuzz) request(route, target, mode uint8, data []byte) (*http.Request, string) {
	pattern := fx.routes[int(route)%len(fx.routes)]
	path := strings.NewReplacer(":id", fuzzIDs[int(target)%len(fuzzIDs)], ":team", fuzzTeams[int(target)%len(fuzzTeams)]).Replace(pattern)
	m := int(mode) % modes
	var body []byte
	ctype := "application/x-www-form-urlencoded"
	header := fx.token
	switch m {
	case modeTokenLast, modeTokenFirst, modeNoToken:
		fs := fx.decodeFields(data)
		switch m {
		case modeTokenLast:
			fs = append(fs, fuzzField{"_csrf", fx.token})
		case modeTokenFirst:
			fs = append([]fuzzField{{"_csrf", fx.token}}, fs...)
		case modeNoToken:
			if mode&0x80 != 0 {
				fs = append(fs, fuzzField{"_csrf", fx.token[:len(fx.token)-1]})
			}
		}
		body = []byte(encodeFields(fs))
		header = ""
	case modeHeader:
		body = []byte(encodeFields(fx.decodeFields(data)))
	case modeMultipart:
		var b bytes.Buffer
		w := multipart.NewWriter(&b)
		for _, f := range fx.decodeFields(data) {
			_ = w.WriteField(f.name, f.value)
		}
		_ = w.Close()
		body, ctype = b.Bytes(), w.FormDataContentType()
	case modeRaw:
		if len(data) > 0 {
			ctype = rawContentTypes[int(data[0])%len(rawContentTypes)]
		}
		body = data
	}
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if header != "" {
		req.Header.Set("X-CSRF-Token", header)
	}
	req.AddCookie(fx.cookie)
	return req, pattern
}

func (fx *formFuzz) run(t *testing.T, route, target, mode uint8, data []byte) {
	req, pattern := fx.request(route, target, mode, data)
	desc := fmt.Sprintf("POST %s (%s, mode %d, %d-byte body)", req.URL.Path, pattern, int(mode)%modes, req.ContentLength)
	before := fx.db.writes(t)
	fx.log.take()
	rec := httptest.NewRecorder()
	fx.h.srv.Handler().ServeHTTP(rec, req)
	status, body := rec.Code, rec.Body.String()
	changed := fx.db.writes(t) != before
	if changed {
		defer fx.db.reset(t)
	}
	switch {
	case status >= 500:
		t.Fatalf("%s = %d\nlog:\n%s\npage:\n%.2000s", desc, status, fx.log.take(), body)
	case status >= 400 && changed:
		t.Fatalf("%s = %d, a refusal, but it changed the database\nlog:\n%s", desc, status, fx.log.take())
	case int(mode)%modes == modeNoToken && status != http.StatusForbidden && status != http.StatusRequestEntityTooLarge:
		// The body limit comes first; both refusals write nothing.
		t.Fatalf("%s without the CSRF token = %d, want 403 (or 413)", desc, status)
	case status == http.StatusUnprocessableEntity && !strings.Contains(body, `data-testid="form-errors"`) &&
		!strings.Contains(body, `data-testid="form-notice"`) && !strings.Contains(body, `data-testid="error-`):
		t.Fatalf("%s = 422 without a message on the page:\n%.3000s", desc, body)
	case status >= 300 && status < 400:
		if loc := rec.Header().Get("Location"); !strings.HasPrefix(loc, "/") || strings.HasPrefix(loc, "//") {
			t.Fatalf("%s redirects to %q", desc, loc)
		}
	case status < 300 && changed:
		// The form routes answer a change with a redirect (303); a 2xx
		// that wrote is a page the next reload would submit again.
		t.Fatalf("%s = %d and changed the database", desc, status)
	}
}

// fuzzSeed is one seed input.
type fuzzSeed struct {
	route, target, mode uint8
	data                []byte
}

// fieldsBytes encodes fields in decodeFields's format.
func (fx *formFuzz) fieldsBytes(fs []fuzzField, size uint8) []byte {
	var b []byte
	for _, f := range fs {
		i, v := slices.Index(fx.names, f.name), f.value
		if i < 0 || i >= 0xFF {
			i, v = 0xFF, f.name+"="+f.value
		}
		b = append(b, byte(i), size, byte(len(v)), byte(len(v)>>8))
		b = append(b, v...)
	}
	return b
}

func (fx *formFuzz) seeds() []fuzzSeed {
	var out []fuzzSeed
	route := func(p string) uint8 { return uint8(slices.Index(fx.routes, p)) }
	ex := formValues(formFromContract(workflow.ExampleContract()))
	var full []fuzzField
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range ex {
			if !yield(k) {
				return
			}
		}
	}) {
		for _, v := range ex[k] {
			full = append(full, fuzzField{k, v})
		}
	}
	submit := append(slices.Clone(full), fuzzField{"intent", "submit"})
	edit := append(slices.Clone(full), fuzzField{"base_version", "1"})
	editSubmit := append(slices.Clone(edit), fuzzField{"intent", "submit"})
	weird := []fuzzField{
		{"business_purpose", "Purpose with \x00 NUL, \u202e bidi, \ufeff BOM, \xff\xfe invalid UTF-8 and <script>alert(1)</script>"},
		{"namespaces", "hyperpod-ns-red\r\n\r\nkube-system\n\t\n" + strings.Repeat("a", 300)},
		{"guaranteed", "ml.p5.48xlarge 99999999999999999999\nml.p5.48xlarge -1\n× x 2"},
		{"egress", "10.0.0.0/8 | 443,,65536,-1 | why\n|||\n a | b"},
		{"signals", "a|b|c|d\n | | "},
		{"workload_types", "training"}, {"workload_types", "training"}, {"workload_types", "\x00"},
		{"fair_share_weight", "1e9"}, {"borrow_limit_percent", "-0"}, {"review_cadence_days", "9223372036854775808"},
		{"end_date", "2026-02-30"}, {"base_version", "-9223372036854775808"}, {"intent", "submit"},
	}
	target := map[string]uint8{"/teams/:team/connections": 0} // red
	for _, r := range fx.routes {
		tg, ok := target[r]
		if !ok {
			tg = 0 // connection 1 (draft)
		}
		out = append(out,
			fuzzSeed{route(r), tg, modeTokenLast, nil},
			fuzzSeed{route(r), tg, modeTokenLast, fx.fieldsBytes(full, 0)},
			fuzzSeed{route(r), tg, modeHeader, fx.fieldsBytes(weird, 0)},
			fuzzSeed{route(r), tg, modeNoToken, fx.fieldsBytes(submit, 0)},
			fuzzSeed{route(r), tg, modeRaw, []byte("%zz=%&&=&business_purpose=%E2%82")},
		)
	}
	create, update := route("/teams/:team/connections"), route("/connections/:id")
	out = append(out,
		fuzzSeed{create, 0, modeTokenLast, fx.fieldsBytes(submit, 0)},                           // created and submitted
		fuzzSeed{create, 1, modeTokenFirst, fx.fieldsBytes(full, 0)},                            // blue: 404
		fuzzSeed{create, 0, modeMultipart, fx.fieldsBytes(weird, 0)},                            // multipart
		fuzzSeed{create, 0, modeHeader, fx.fieldsBytes([]fuzzField{{"signals", "x"}}, 0xFE)},    // 1 MiB - 300: fits
		fuzzSeed{create, 0, modeHeader, fx.fieldsBytes([]fuzzField{{"egress", "x|1|"}}, 0xFF)},  // past the limit: 413
		fuzzSeed{create, 0, modeTokenLast, fx.fieldsBytes([]fuzzField{{"reason", "r"}}, 0xFC)},  // 16 KiB of an unknown field
		fuzzSeed{create, 0, modeHeader, fx.fieldsBytes([]fuzzField{{"namespaces", "n"}}, 0xFA)}, // over a field cap
		fuzzSeed{update, 0, modeTokenLast, fx.fieldsBytes(edit, 0)},                             // draft 1, same contract
		fuzzSeed{update, 0, modeTokenLast, fx.fieldsBytes(editSubmit, 0)},                       // draft 1 submitted
		fuzzSeed{update, 2, modeTokenLast, fx.fieldsBytes(editSubmit, 0)},                       // changes requested, resubmitted
		fuzzSeed{update, 3, modeTokenLast, fx.fieldsBytes(edit, 0)},                             // submitted: refused
		fuzzSeed{update, 4, modeTokenLast, fx.fieldsBytes(edit, 0)},                             // approved: refused
		fuzzSeed{update, 7, modeTokenLast, fx.fieldsBytes(edit, 0)},                             // blue's: 404
		fuzzSeed{update, 1, modeTokenLast, fx.fieldsBytes(append(slices.Clone(weird), fuzzField{"base_version", "1"}), 0)},
		fuzzSeed{route("/connections/:id/submit"), 1, modeTokenLast, nil},   // incomplete draft: 422
		fuzzSeed{route("/connections/:id/submit"), 0, modeTokenLast, nil},   // complete draft: submitted
		fuzzSeed{route("/connections/:id/withdraw"), 3, modeTokenLast, nil}, // submitted: withdrawn
		fuzzSeed{route("/connections/:id/withdraw"), 4, modeTokenLast, nil}, // approved: refused
		fuzzSeed{route("/connections/:id/decide"), 3, modeTokenLast, fx.fieldsBytes([]fuzzField{{"decision", "approve"}, {"reason", "mine"}, {"version", "1"}}, 0)},
		fuzzSeed{route("/connections/:id/revoke"), 5, modeTokenLast, fx.fieldsBytes([]fuzzField{{"reason", "x"}}, 0)},
	)
	return out
}

// fuzzDirectory is the fuzz harness's directory: the dev IdP's groups for
// the two owners it signs in.
type fuzzDirectory struct{}

func (fuzzDirectory) Groups(_ context.Context, user string) ([]string, error) {
	switch user {
	case "owner.red@example.test":
		return []string{"team-red-owners"}, nil
	case "owner.blue@example.test":
		return []string{"team-blue-owners"}, nil
	}
	return nil, auth.ErrUserNotInDirectory
}
