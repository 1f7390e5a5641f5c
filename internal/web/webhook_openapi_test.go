package web

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"

	"github.com/hyperpod-governance/portal/internal/auth"
	"github.com/hyperpod-governance/portal/internal/evidence"
	"github.com/hyperpod-governance/portal/internal/notify"
	"github.com/hyperpod-governance/portal/internal/signing"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// webhookPathItem is the document's webhook of notices.
func webhookPathItem(t *testing.T) *v3.PathItem {
	t.Helper()
	doc, err := libopenapi.NewDocument(openAPIJSON)
	if err != nil {
		t.Fatal(err)
	}
	m, err := doc.BuildV3Model()
	if err != nil {
		t.Fatal(err)
	}
	pi, ok := m.Model.Webhooks.Get("notice")
	if !ok || pi.Post == nil {
		t.Fatal("openapi.json has no webhooks.notice.post")
	}
	return pi
}

// validateWebhook checks one received webhook request (its headers and
// body) against the document's webhook with libopenapi-validator, the
// library that validates the API's responses.
func validateWebhook(t *testing.T, pi *v3.PathItem, header http.Header, body []byte) []string {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/notice", bytes.NewReader(body))
	req.Header = header.Clone()
	ok, errs := openAPIValidator(t).ValidateHttpRequestSyncWithPathItem(req, pi, "/notice")
	if ok {
		return nil
	}
	var out []string
	for _, e := range errs {
		out = append(out, e.Message+": "+e.Reason)
	}
	if len(out) == 0 {
		out = []string{"invalid"}
	}
	return out
}

type hookCall struct {
	header http.Header
	body   []byte
}

// TestWebhookPayloadsMatchTheDocument: the notices the portal posts to its
// webhook, produced by the real code (the workflow's notices of a filed,
// submitted and sent-back request, the audit chain head's publication with
// its body, delivered by notify.Worker through notify.Webhook), validate
// against openapi.json's webhooks.notice (headers and body); each is
// signed as documented. A payload changed without the document fails here,
// and so does the document's schema on a payload it does not describe.
func TestWebhookPayloadsMatchTheDocument(t *testing.T) {
	h := newHarness(t, false, func(o *Options) { o.Signer = nil }) // the stored key, which a publication names
	ctx := t.Context()
	var mu sync.Mutex
	var calls []hookCall
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		calls = append(calls, hookCall{header: r.Header.Clone(), body: b})
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	secret := []byte("webhook-secret")
	// Notices: submitted (to the admins), sent back (to the team), both
	// naming the connection; the audit head (no connection, a body).
	owner, admin := h.signIn("owner.red"), h.signIn("admin")
	f := formValues(formFromContract(workflow.ExampleContract()))
	f.Set("intent", "submit")
	if resp, body := h.postAs(owner, "/teams/red/connections", f); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("create = %d\n%s", resp.StatusCode, body)
	}
	h.mustPost(admin, "/connections/1/decide", h.decision("request_changes", 1))
	now := h.srv.opts.Now()
	ah, err := h.db.AuditHead(ctx)
	if err != nil || ah.ID == 0 {
		t.Fatalf("audit head %+v: %v", ah, err)
	}
	// As portal serve's publisher (cmd/portal/auditpublish.go) makes it.
	day, at, signer := now.UTC().Format(time.DateOnly), evidence.AuditTime(ah.At), h.srv.opts.Signer
	line := signing.HeadLine(day, ah.ID, ah.Count, ah.Hash, at)
	head := workflow.AuditHead{Day: day, ID: ah.ID, Count: ah.Count, Hash: ah.Hash, At: at, Line: line, KeyID: signer.KeyID(),
		Signature: signer.Sign(signing.PurposeAuditHead, line)}
	if _, err := h.db.PublishAuditHead(ctx, store.AuditHeadPublication{Day: head.Day, HeadID: head.ID, HeadCount: head.Count, HeadHash: head.Hash,
		HeadAt: head.At, KeyID: head.KeyID, Signature: head.Signature, PublishedAt: now}, workflow.AuditHeadNotice(head)); err != nil {
		t.Fatal(err)
	}
	w := &notify.Worker{DB: h.db, Resolve: auth.DevMapping().Resolve, Now: h.srv.opts.Now, BaseURL: "https://portal.example.test",
		Webhook: &notify.Webhook{URL: srv.URL, Secret: secret, Now: h.srv.opts.Now}}
	if err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	pi := webhookPathItem(t)
	var kinds []string
	var linked, withBody bool
	mu.Lock()
	defer mu.Unlock()
	for _, c := range calls {
		kind := c.header.Get(notify.HeaderEvent)
		kinds = append(kinds, kind)
		if errs := validateWebhook(t, pi, c.header, c.body); errs != nil {
			t.Errorf("webhook %s does not match openapi.json's webhooks.notice: %v\n%s", kind, errs, c.body)
		}
		if err := notify.Verify(secret, c.header.Get(notify.HeaderTimestamp), c.header.Get(notify.HeaderSignature), c.body, now, time.Minute); err != nil {
			t.Errorf("webhook %s: %v", kind, err)
		}
		var m struct{ Text string }
		_ = json.Unmarshal(c.body, &m)
		linked = linked || strings.Contains(m.Text, " <https://portal.example.test/connections/1|open in the portal>")
		withBody = withBody || strings.Contains(m.Text, "\nhead_hash: ")
	}
	for _, want := range []string{"connection.submitted", "connection.request_changes", "audit.head_published"} {
		if !slices.Contains(kinds, want) {
			t.Errorf("no %s webhook among %v", want, kinds)
		}
	}
	if len(calls) < 3 || !linked || !withBody {
		t.Fatalf("webhooks %v: a linked one %v, one with a body %v", kinds, linked, withBody)
	}
	if _, page := h.get(h.client(), "/api/docs"); !strings.Contains(page, "<code>POST webhook notice") {
		t.Error("/api/docs does not show the webhook")
	}
	// The document does hold the payload to its shape: another field, no
	// text, or a missing signature is refused.
	good := calls[0]
	for name, bad := range map[string]hookCall{
		"another field": {good.header, []byte(`{"text":"x","channel":"#ops"}`)},
		"no text":       {good.header, []byte(`{}`)},
		"no signature":  {func() http.Header { h := good.header.Clone(); h.Del(notify.HeaderSignature); return h }(), good.body},
	} {
		if validateWebhook(t, pi, bad.header, bad.body) == nil {
			t.Errorf("a webhook with %s validates against the document", name)
		}
	}
}
