package web

import (
	"context"
	"database/sql"
	"net/http"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TestAPIReadsAnswerBeforeTheirUseCommits: with the database's writer
// held, a token's read is answered (its use queued, store.QueueTokenUse)
// while a write with the same token waits for its use's transaction (the
// use, and a revocation's refusal, are decided there before the write
// runs). Once the writer is free both uses are in the audit trail.
func TestAPIReadsAnswerBeforeTheirUseCommits(t *testing.T) {
	h := newHarness(t, false)
	secret := h.newToken(h.signIn("owner.red"), workflow.TokenReadWrite)
	tok := h.tokenOf(secret)
	ctx := context.Background()
	raw, err := sql.Open("sqlite", h.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	conn, err := raw.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	held := true
	release := func() {
		if held {
			held = false
			if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
				t.Error(err)
			}
		}
	}
	defer release()

	if resp, body := h.api(apiReq{token: secret, path: "/api/v1/connections"}); resp.StatusCode != http.StatusOK {
		t.Fatalf("read while the writer is held = %d\n%s", resp.StatusCode, body)
	}
	wrote := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, h.base+"/api/v1/notifications/999999/read", nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := h.ts.Client().Do(req)
		if err != nil {
			wrote <- 0
			return
		}
		resp.Body.Close()
		wrote <- resp.StatusCode
	}()
	select {
	case code := <-wrote:
		t.Fatalf("a write was answered (%d) before its use's transaction could run", code)
	case <-time.After(300 * time.Millisecond):
	}
	release()
	if code := <-wrote; code == 0 || code >= 500 {
		t.Fatalf("the write after the writer was freed = %d", code)
	}
	evs, err := h.db.AuditEvents(ctx, store.AuditFilter{Action: "token.use", ObjectID: tok.ID}, 0, 10)
	if err != nil || len(evs) != 2 || evs[1].Reason != "GET /api/v1/connections" || evs[0].Reason != "POST /api/v1/notifications/999999/read" {
		t.Errorf("token.use events = %+v (%v), want the read's then the write's", evs, err)
	}
}
