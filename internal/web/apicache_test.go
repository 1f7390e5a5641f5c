package web

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TestAPICacheKeysOnVersionAndToken: a cached API read is served again only
// under the same data version to the same bearer token; another token of
// the same person (another name, scope or team limit) or a new version gets
// its own answer, and a kept answer is the same JSON with its length.
func TestAPICacheKeysOnVersionAndToken(t *testing.T) {
	h := newHarness(t, false)
	calls := 0
	// cached itself: cacheAPI would read the database's version over the
	// ones this test sets.
	handler := h.srv.cached(func(c echo.Context) error {
		calls++
		tok, _ := apiToken(c)
		return writeJSONView(c, http.StatusOK, map[string]any{"token": tok.Name, "call": calls})
	}, store.DataVersionFrom, writeJSON)
	e := echo.New()
	p := workflow.NewPrincipal(7, "sub", "owner.red@example.com", "Red", nil, []workflow.Membership{{Team: "red", Role: workflow.TeamOwner}})
	serve := func(tok workflow.Token, version string) (int, string, *httptest.ResponseRecorder) {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, "/api/v1/connections?limit=5", nil)
		req = req.WithContext(store.WithDataVersion(context.Background(), version))
		rec := httptest.NewRecorder()
		c := e.NewContext(req, rec)
		c.Set(ctxToken, tok)
		c.Set(ctxUser, p)
		if err := handler(c); err != nil {
			t.Fatal(err)
		}
		var got struct {
			Token string
			Call  int
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatalf("body %q: %v", rec.Body, err)
		}
		return got.Call, got.Token, rec
	}
	read := workflow.Token{ID: 1, UserID: 7, Name: "ci", Scope: workflow.TokenRead}
	first, _, rec := serve(read, "v1")
	again, _, rec2 := serve(read, "v1")
	if first != 1 || again != 1 {
		t.Errorf("the same token under the same version was answered by calls %d then %d, want the first kept", first, again)
	}
	if rec2.Body.String() != rec.Body.String() || rec2.Header().Get(echo.HeaderContentType) != echo.MIMEApplicationJSON ||
		rec2.Header().Get(echo.HeaderContentLength) != rec.Header().Get(echo.HeaderContentLength) {
		t.Errorf("the kept answer differs: %q %q %q, first %q %q %q", rec2.Body, rec2.Header().Get(echo.HeaderContentType),
			rec2.Header().Get(echo.HeaderContentLength), rec.Body, rec.Header().Get(echo.HeaderContentType), rec.Header().Get(echo.HeaderContentLength))
	}
	others := map[string]workflow.Token{
		"another token":      {ID: 2, UserID: 7, Name: "ci", Scope: read.Scope},
		"another name":       {ID: 1, UserID: 7, Name: "other", Scope: read.Scope},
		"another scope":      {ID: 1, UserID: 7, Name: "ci", Scope: workflow.TokenReadWrite},
		"another team limit": {ID: 1, UserID: 7, Name: "ci", Scope: read.Scope, Teams: []string{"red"}},
	}
	for what, tok := range others {
		before := calls
		if n, name, _ := serve(tok, "v1"); n != before+1 || name != tok.Name {
			t.Errorf("%s under the same version was served call %d (%q), want its own call %d", what, n, name, before+1)
		}
	}
	before := calls
	if n, _, _ := serve(read, "v2"); n != before+1 {
		t.Errorf("a new data version was served call %d, want a new call %d", n, before+1)
	}
}

// TestAPICacheSharesABatchOfUses: a token's reads record their uses in one
// transaction when they arrive together (store.RecordTokenUse), and the
// reads of one token in that batch share one answer of the list, read
// after the batch committed; two teams' tokens never see each other's
// connections, and a connection filed after the batch shows at the next
// read.
func TestAPICacheSharesABatchOfUses(t *testing.T) {
	h := newHarness(t, false)
	red, blue := h.signIn("owner.red"), h.signIn("owner.blue")
	redID, blueID := h.fileAs(red, "red"), h.fileAs(blue, "blue")
	tokens := map[string]string{"red": h.newToken(red, workflow.TokenRead), "blue": h.newToken(blue, workflow.TokenRead)}
	want := map[string]int64{"red": redID, "blue": blueID}

	// Another process holds SQLite's write lock, so every use waits for it
	// and the uses that arrive meanwhile commit together.
	raw, err := sql.Open("sqlite", h.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	lock, err := raw.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	hits := cacheHits(h.srv)
	const each = 6
	type answer struct {
		team string
		ids  []int64
		code int
	}
	answers := make(chan answer, 2*each)
	var wg sync.WaitGroup
	for team, tok := range tokens {
		for range each {
			wg.Go(func() {
				resp, body := h.api(apiReq{token: tok, path: "/api/v1/connections"})
				var list struct{ Items []struct{ ID int64 } }
				_ = json.Unmarshal(body, &list)
				a := answer{team: team, code: resp.StatusCode}
				for _, it := range list.Items {
					a.ids = append(a.ids, it.ID)
				}
				answers <- a
			})
		}
	}
	time.Sleep(time.Second) // every request reaches its use, which waits for the lock
	if _, err := lock.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(answers)
	for a := range answers {
		if a.code != http.StatusOK || len(a.ids) != 1 || a.ids[0] != want[a.team] {
			t.Errorf("%s's token read %d with connections %v, want only %d", a.team, a.code, a.ids, want[a.team])
		}
	}
	if got := cacheHits(h.srv) - hits; got < 1 {
		t.Errorf("%d of %d reads that committed their uses together were served another's answer, want some", got, 2*each)
	}

	later := h.fileAs(red, "red")
	_, body := h.api(apiReq{token: tokens["red"], path: "/api/v1/connections"})
	var list struct{ Items []struct{ ID int64 } }
	if err := json.Unmarshal(body, &list); err != nil || len(list.Items) != 2 || list.Items[0].ID != later {
		t.Errorf("after a new connection red's token reads %s, want %d first", body, later)
	}
}

// TestAPICacheOutlivesUses: one token's reads, one after another, each
// record their use (the audit trail holds every one) and, after the first,
// are served the first's answer: a use moves the data version but not the
// content version they are kept under (store.DB.ContentVersion). A
// connection filed afterwards, and the token's revocation, are seen at the
// next read.
func TestAPICacheOutlivesUses(t *testing.T) {
	h := newHarness(t, false)
	red := h.signIn("owner.red")
	first := h.fileAs(red, "red")
	tok := h.newToken(red, workflow.TokenRead)
	uses := h.auditCount("token.use")
	hits := cacheHits(h.srv)
	const reads = 5
	for i := range reads {
		resp, body := h.api(apiReq{token: tok, path: "/api/v1/connections"})
		var list struct{ Items []struct{ ID int64 } }
		if err := json.Unmarshal(body, &list); err != nil || resp.StatusCode != http.StatusOK || len(list.Items) != 1 || list.Items[0].ID != first {
			t.Fatalf("read %d: %d %s", i+1, resp.StatusCode, body)
		}
	}
	if got := h.auditCount("token.use") - uses; got != reads {
		t.Errorf("%d reads recorded %d uses", reads, got)
	}
	if got := cacheHits(h.srv) - hits; got != reads-1 {
		t.Errorf("%d of %d reads after the first were served its answer, want every one: a use moved what the answer is kept under", got, reads-1)
	}
	later := h.fileAs(red, "red")
	_, body := h.api(apiReq{token: tok, path: "/api/v1/connections"})
	var list struct{ Items []struct{ ID int64 } }
	if err := json.Unmarshal(body, &list); err != nil || len(list.Items) != 2 || list.Items[0].ID != later {
		t.Errorf("after a new connection the token reads %s, want %d first", body, later)
	}
	u, err := h.db.UserByEmail(t.Context(), "owner.red@example.test")
	if err != nil {
		t.Fatal(err)
	}
	toks, err := h.db.TokensOf(t.Context(), u.ID)
	if err != nil || len(toks) != 1 {
		t.Fatalf("tokens: %v %v", toks, err)
	}
	if err := h.db.RevokeToken(t.Context(), toks[0].ID, workflow.Actor{ID: toks[0].UserID}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if resp, _ := h.api(apiReq{token: tok, path: "/api/v1/connections"}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("after its revocation the token's read answered %d, want 401", resp.StatusCode)
	}
}
