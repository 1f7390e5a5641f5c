package web

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"

	"github.com/hyperpod-governance/portal/internal/auth"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// machineAudience is the client id the tests' machine tokens are for.
const machineAudience = "portal-pipelines"

// testIssuer is an identity provider's signing key for machine tokens;
// its option makes the harness accept them (auth.MachineVerifier with the
// key's public half, the provider's JWKS) and names three machines in
// the groups file: ci-red (red's owners, read-write), ci-red-read (red's
// owners, read) and ci-nobody (a group the file maps to nothing).
type testIssuer struct {
	t      testing.TB
	issuer string
	key    *rsa.PrivateKey
}

func newTestIssuer(t testing.TB) *testIssuer {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return &testIssuer{t: t, issuer: "https://idp.example.test/oauth2", key: key}
}

func (ti *testIssuer) option(o *Options) {
	keys := &oidc.StaticKeySet{PublicKeys: []crypto.PublicKey{&ti.key.PublicKey}}
	o.Machines = auth.NewMachineVerifierWithKeys(ti.issuer, []string{"portal-other", machineAudience}, keys, time.Now)
	m := auth.DevMapping()
	m.Machines = map[string]auth.Machine{
		"ci-red":      {Subject: "client-ci-red", Scope: workflow.TokenReadWrite, Groups: []string{"team-red-owners"}},
		"ci-red-read": {Subject: "client-ci-red-read", Groups: []string{"team-red-owners"}},
		"ci-nobody":   {Subject: "client-ci-nobody", Scope: workflow.TokenReadWrite, Groups: []string{"not-mapped"}},
	}
	b, _ := json.Marshal(m)
	var err error
	if o.Mapping, err = auth.ParseMapping(b); err != nil { // as serve loads it: the scope's default filled in
		ti.t.Fatal(err)
	}
}

// token signs claims (issuer, audience and an expiry unless
// given; 30 minutes: the walk outlasts 5 on a loaded machine) with key (the issuer's unless given).
func (ti *testIssuer) token(sub string, claims map[string]any, key *rsa.PrivateKey) string {
	ti.t.Helper()
	c := map[string]any{"iss": ti.issuer, "sub": sub, "aud": machineAudience, "iat": time.Now().Unix(), "exp": time.Now().Add(30 * time.Minute).Unix()}
	for k, v := range claims {
		c[k] = v
	}
	if key == nil {
		key = ti.key
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		ti.t.Fatal(err)
	}
	payload, _ := json.Marshal(c)
	jws, err := signer.Sign(payload)
	if err != nil {
		ti.t.Fatal(err)
	}
	raw, err := jws.CompactSerialize()
	if err != nil {
		ti.t.Fatal(err)
	}
	return raw
}

// TestMachineIdentityActsWithItsGroups: a machine mapped to red's owners
// files and submits a red request through the API, with every use in the
// audit trail as machine:ci-red and the request's events its own; it
// lists only red; its read-only sibling may read but not write (403); a
// session's decide form is out of its reach (no session), and the groups
// file refuses a machine scope that decides.
func TestMachineIdentityActsWithItsGroups(t *testing.T) {
	ti := newTestIssuer(t)
	h := newHarness(t, false, ti.option)
	h.fileAs(h.signIn("owner.blue"), "blue")
	rw := ti.token("client-ci-red", nil, nil)
	body, _ := json.Marshal(contractFor("red"))
	resp, out := h.api(apiReq{token: rw, method: http.MethodPost, path: "/api/v1/connections", body: body})
	var conn apiConnectionBody
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(out, &conn) != nil || conn.Team != "red" {
		t.Fatalf("the machine files = %d\n%s", resp.StatusCode, out)
	}
	if resp, out := h.api(apiReq{token: rw, method: http.MethodPost, path: conn.Links.Self + "/submit", headers: map[string]string{"If-Match": resp.Header.Get("ETag")}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("the machine submits = %d\n%s", resp.StatusCode, out)
	}
	_, out = h.api(apiReq{token: rw, path: "/api/v1/connections"})
	var list struct{ Items []apiConnectionBody }
	if json.Unmarshal(out, &list) != nil || len(list.Items) != 1 || list.Items[0].ID != conn.ID {
		t.Errorf("the machine's list: %s", out)
	}
	ctx := context.Background()
	uses, _ := h.db.AuditEvents(ctx, store.AuditFilter{Action: "machine.use"}, 0, 100)
	if len(uses) != 3 {
		t.Errorf("%d machine.use events, want 3 (one a request)", len(uses))
	}
	for _, e := range uses {
		if e.Actor != "machine:ci-red" || e.ObjectType != "machine" || e.ActorID == 0 || e.ObjectID != e.ActorID {
			t.Errorf("a machine use audited as %+v", e)
		}
	}
	for _, a := range []string{"connection.create", "connection.submit"} {
		evs, _ := h.db.AuditEvents(ctx, store.AuditFilter{Action: a, ObjectID: conn.ID}, 0, 10)
		if len(evs) != 1 || evs[0].Actor != "machine:ci-red" {
			t.Errorf("%s audited as %+v, want machine:ci-red", a, evs)
		}
	}
	read := ti.token("client-ci-red-read", nil, nil)
	if resp, _ := h.api(apiReq{token: read, path: conn.Links.Self}); resp.StatusCode != http.StatusOK {
		t.Errorf("the read machine reads = %d", resp.StatusCode)
	}
	if resp, _ := h.api(apiReq{token: read, method: http.MethodPost, path: "/api/v1/connections", body: body}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("the read machine files = %d, want 403", resp.StatusCode)
	}
	// The pages take no bearer token: a decision there needs a session.
	req, _ := http.NewRequest(http.MethodPost, h.base+conn.Links.Page+"/decide", strings.NewReader("decision=approve"))
	req.Header.Set("Authorization", "Bearer "+rw)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, err := h.ts.Client().Do(req); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	if got, _ := h.db.Connection(ctx, conn.ID); got.State != workflow.StateSubmitted {
		t.Errorf("after the machine's attempts the request is %s", got.State)
	}
}

// TestMachineTokenRefusals: a token for another audience, expired, of
// another issuer, signed by another key, of a subject the groups file does
// not name, or of a machine whose groups give nothing: 401 problem
// documents on every kind of route, nothing audited, nothing filed.
func TestMachineTokenRefusals(t *testing.T) {
	ti := newTestIssuer(t)
	h := newHarness(t, false, ti.option)
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string]string{
		"wrong audience": ti.token("client-ci-red", map[string]any{"aud": "someone-else"}, nil),
		"expired":        ti.token("client-ci-red", map[string]any{"exp": time.Now().Add(-time.Minute).Unix()}, nil),
		"wrong issuer":   ti.token("client-ci-red", map[string]any{"iss": "https://other.example.test"}, nil),
		"another key":    ti.token("client-ci-red", nil, other),
		"unknown client": ti.token("client-unknown", nil, nil),
		"no access":      ti.token("client-ci-nobody", nil, nil),
		"no subject":     ti.token("", nil, nil),
	}
	body, _ := json.Marshal(contractFor("red"))
	for why, tok := range bad {
		for _, r := range []apiReq{{path: "/api/v1/connections"}, {method: http.MethodPost, path: "/api/v1/connections", body: body}, {path: "/api/v1/audit"}} {
			r.token = tok
			resp, out := h.api(r)
			var p struct {
				Status int    `json:"status"`
				Title  string `json:"title"`
			}
			if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Content-Type") != "application/problem+json" || json.Unmarshal(out, &p) != nil || p.Status != 401 {
				t.Errorf("%s: %s %s = %d %s\n%s", why, r.method, r.path, resp.StatusCode, resp.Header.Get("Content-Type"), out)
			}
		}
	}
	if n := h.auditCount("machine.use") + h.auditCount("connection.create"); n != 0 {
		t.Errorf("%d events after refused machine tokens", n)
	}
	if !strings.Contains(h.logs.String(), "API machine token refused") {
		t.Error("refusals are not logged")
	}
}

// TestMachineTokenProviderUnreachable: when the provider's keys cannot be
// read (discovery fails), a machine's token is refused (fail closed: 401
// problem document saying the provider could not be asked), nothing
// audited; a personal token still works.
func TestMachineTokenProviderUnreachable(t *testing.T) {
	ti := newTestIssuer(t)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	h := newHarness(t, false, ti.option, func(o *Options) {
		o.Machines = auth.NewMachineVerifier(down.URL, []string{machineAudience}, nil, time.Now)
	})
	resp, out := h.api(apiReq{token: ti.token("client-ci-red", map[string]any{"iss": down.URL}, nil), path: "/api/v1/connections"})
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Content-Type") != "application/problem+json" || !strings.Contains(string(out), "keys could not be read") {
		t.Errorf("a machine token with the provider down = %d\n%s", resp.StatusCode, out)
	}
	if n := h.auditCount("machine.use"); n != 0 {
		t.Errorf("%d machine.use events with the provider down", n)
	}
	if resp, _ := h.api(apiReq{token: h.newToken(h.signIn("owner.red"), workflow.TokenRead), path: "/api/v1/connections"}); resp.StatusCode != http.StatusOK {
		t.Errorf("a personal token with the provider down = %d", resp.StatusCode)
	}
}
