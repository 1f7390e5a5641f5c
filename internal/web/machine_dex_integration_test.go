package web

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/hyperpod-governance/portal/internal/auth"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/support/testenv"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TestMachineIdentityThroughDex: machine identities with the test bed's
// Dex (v2.45.1, the binary hack/testbed/dex.sh builds).
//
// Dex v2.45.1 has no client_credentials grant: its token endpoint knows
// authorization_code, refresh_token, implicit, password, the device code
// and RFC 8693 token exchange (server/oauth2.go, grantTypeAuthorizationCode
// … grantTypeTokenExchange, and handleToken's switch in server/handlers.go
// at tag v2.45.1); client_credentials came after it (dexidp/dex fec4f532,
// "add client credentials flow with opt-in config flag", #4583). The test
// bed's Dex is asked and must refuse it (unsupported_grant_type): when the
// test bed moves to a Dex with the grant, this fails and the test should
// exercise it. What v2.45.1 issues a workload is a token exchange
// (handleTokenExchange): a confidential client presents the workload's
// own token from an upstream issuer that an oidc connector trusts (the
// only connector implementing connector.TokenIdentityConnector), and Dex
// returns its own token signed with its keys: aud the client's id, sub
// Dex's encoding of the upstream subject and the connector
// (base64url of the IDTokenSubject protobuf, server/oauth2.go genSubject),
// groups only with the groups scope and only if the connector passes them.
//
// So the test starts a second Dex of the same binary, with an oidc
// connector "workload" trusting an upstream issuer the test serves (as a
// CI system's or a Kubernetes service account issuer would), and a
// confidential client portal-pipelines; the test bed's shared Dex keeps
// its one connector (a second would put a chooser before its login form).
// A workload token exchanged there is then used as a machine identity:
// the portal verifies it by discovery and Dex's JWKS, maps its sub through
// the groups file, and acts with red's owners' groups only.
func TestMachineIdentityThroughDex(t *testing.T) {
	issuer := testenv.Require(t, "PORTAL_TEST_DEX_ISSUER")
	clientID := testenv.Require(t, "PORTAL_TEST_DEX_CLIENT_ID")
	secretFile := testenv.Require(t, "PORTAL_TEST_DEX_CLIENT_SECRET_FILE")
	dexBin := testenv.Require(t, "PORTAL_TEST_DEX_BIN")
	secret, err := os.ReadFile(secretFile)
	if err != nil {
		t.Fatal(err)
	}

	// The test bed's Dex: no client_credentials.
	var disco struct {
		GrantTypes []string `json:"grant_types_supported"`
		Token      string   `json:"token_endpoint"`
	}
	getJSON(t, issuer+"/.well-known/openid-configuration", &disco)
	if slices.Contains(disco.GrantTypes, "client_credentials") || !slices.Contains(disco.GrantTypes, "urn:ietf:params:oauth:grant-type:token-exchange") {
		t.Fatalf("the test bed's Dex grants %v: client_credentials is new (update this test and docs/api.md)", disco.GrantTypes)
	}
	status, answer := tokenRequest(t, disco.Token, clientID, string(secret), url.Values{"grant_type": {"client_credentials"}, "scope": {"openid"}})
	if status != http.StatusBadRequest || answer["error"] != "unsupported_grant_type" {
		t.Fatalf("client_credentials at the test bed's Dex = %d %v, want 400 unsupported_grant_type", status, answer)
	}

	// The workload's issuer and the exchanging Dex.
	wl := newWorkloadIssuer(t)
	dexIssuer, pipelinesSecret := startExchangeDex(t, dexBin, wl.issuer)
	const workloadSub = "repo:example/infra:ref:refs/heads/main"
	exchange := func(sub string) string {
		t.Helper()
		status, answer := tokenRequest(t, dexIssuer+"/token", "portal-pipelines", pipelinesSecret, url.Values{
			"grant_type":         {"urn:ietf:params:oauth:grant-type:token-exchange"},
			"connector_id":       {"workload"},
			"scope":              {"openid"},
			"subject_token":      {wl.sign(t, sub)},
			"subject_token_type": {"urn:ietf:params:oauth:token-type:id_token"},
		})
		tok, _ := answer["access_token"].(string)
		if status != http.StatusOK || tok == "" {
			t.Fatalf("token exchange for %s = %d %v", sub, status, answer)
		}
		return tok
	}
	machineTok, strangerTok := exchange(workloadSub), exchange("repo:example/other:ref:refs/heads/main")

	// The portal: the exchanging Dex's issuer, audience portal-pipelines,
	// ci-red named by the sub Dex gives the workload (oracle: Dex's
	// encoding computed here, protobuf fields 1 user_id and 2 conn_id).
	sub := base64.RawURLEncoding.EncodeToString(protoStrings(workloadSub, "workload"))
	h := newHarness(t, false, func(o *Options) {
		o.Machines = auth.NewMachineVerifier(dexIssuer, []string{"portal-pipelines"}, nil, time.Now)
		o.Mapping.Machines = map[string]auth.Machine{"ci-red": {Subject: sub, Scope: workflow.TokenReadWrite, Groups: []string{"team-red-owners"}}}
	})
	blue := h.fileAs(h.signIn("owner.blue"), "blue")
	body, _ := json.Marshal(contractFor("red"))
	resp, out := h.api(apiReq{token: machineTok, method: http.MethodPost, path: "/api/v1/connections", body: body})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("the machine files with Dex's token = %d\n%s", resp.StatusCode, out)
	}
	if resp, _ := h.api(apiReq{token: machineTok, path: fmt.Sprintf("/api/v1/connections/%d", blue)}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("the red machine reads blue's connection = %d, want 404", resp.StatusCode)
	}
	evs, _ := h.db.AuditEvents(context.Background(), store.AuditFilter{Action: "connection.create", Actor: "machine:ci-red"}, 0, 10)
	if len(evs) != 1 || h.auditCount("machine.use") != 2 {
		t.Errorf("the machine's filing audited as %+v, %d uses", evs, h.auditCount("machine.use"))
	}
	// Refused: another workload (a sub the groups file does not name), a
	// token Dex did not sign, and Dex's token for another audience.
	forged := wl.signAs(t, dexIssuer, sub, "portal-pipelines")
	for why, tok := range map[string]string{"unknown client": strangerTok, "not Dex's signature": forged} {
		if resp, out := h.api(apiReq{token: tok, path: "/api/v1/connections"}); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s = %d, want 401\n%s", why, resp.StatusCode, out)
		}
	}
	if _, err := auth.NewMachineVerifier(dexIssuer, []string{"portal-other"}, nil, time.Now).Verify(context.Background(), machineTok); !errors.Is(err, auth.ErrMachineAudience) {
		t.Errorf("Dex's token for portal-pipelines, verified for portal-other: %v", err)
	}
}

// protoStrings is the protobuf encoding of a message of string fields
// numbered 1, 2, … (each short: a one-byte length).
func protoStrings(fields ...string) []byte {
	var b []byte
	for i, f := range fields {
		b = append(b, byte((i+1)<<3|2), byte(len(f)))
		b = append(b, f...)
	}
	return b
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("%s: %v", u, err)
	}
}

// tokenRequest posts form to a token endpoint as a confidential client.
func tokenRequest(t *testing.T, endpoint, id, secret string, form url.Values) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// workloadIssuer is an upstream OIDC issuer of workload tokens (as a CI
// system's): discovery and a JWKS, served by the test.
type workloadIssuer struct {
	issuer string
	key    *rsa.PrivateKey
}

func newWorkloadIssuer(t *testing.T) *workloadIssuer {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	wl := &workloadIssuer{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": wl.issuer, "jwks_uri": wl.issuer + "/keys",
			"authorization_endpoint": wl.issuer + "/auth", "token_endpoint": wl.issuer + "/token",
			"response_types_supported": []string{"id_token"}, "subject_types_supported": []string{"public"},
			"id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "wl", Algorithm: "RS256", Use: "sig"}}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	wl.issuer = srv.URL
	return wl
}

func (wl *workloadIssuer) sign(t *testing.T, sub string) string {
	return wl.signAs(t, wl.issuer, sub, "dex")
}

// signAs signs a token with the workload issuer's key, claiming iss.
func (wl *workloadIssuer) signAs(t *testing.T, iss, sub, aud string) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: wl.key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "wl"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"iss": iss, "sub": sub, "aud": aud, "iat": time.Now().Unix(), "exp": time.Now().Add(30 * time.Minute).Unix()})
	jws, err := signer.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := jws.CompactSerialize()
	return raw
}

// startExchangeDex runs Dex (the test bed's binary) with an oidc
// connector "workload" trusting upstream and a confidential client
// portal-pipelines; it returns Dex's issuer and the client's secret.
func startExchangeDex(t *testing.T, bin, upstream string) (string, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	issuer := "http://" + addr + "/dex"
	secret := "pipelines-secret-" + fmt.Sprint(time.Now().UnixNano())
	dir := t.TempDir()
	config := fmt.Sprintf(`issuer: %s
storage: {type: memory}
web: {http: %s}
logger: {level: info, format: text}
staticClients:
  - id: portal-pipelines
    name: Portal pipelines
    secret: %s
    redirectURIs: [%s/unused]
connectors:
  - type: oidc
    id: workload
    name: Workload issuer
    config:
      issuer: %s
      clientID: dex
      clientSecret: unused
      redirectURI: %s/callback
      scopes: [openid]
      userNameKey: sub
`, issuer, addr, secret, issuer, upstream, issuer)
	path := filepath.Join(dir, "dex.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &testenv.Buffer{}
	cmd := exec.Command(bin, "serve", path)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if resp, err := http.Get(issuer + "/.well-known/openid-configuration"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return issuer, secret
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the exchanging Dex did not start:\n%s", logs.String())
		}
	}
}
