package auth

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

const machinesMapping = goodMapping + `
machines:
  ci-red:
    subject: client-ci-red
    scope: read-write
    groups: [team-red-owners]
  audit.export:
    subject: svc-audit
    groups: [auditors]
`

// TestMachineMapping: the groups file names machines by the token's sub;
// a machine's groups resolve through the file's roles and teams exactly as
// a person's do; the scope defaults to read; and the file refuses a
// machine without subject or groups, a subject named twice, a bad name,
// and any scope but read and read-write (a machine never decides).
func TestMachineMapping(t *testing.T) {
	m, err := ParseMapping([]byte(machinesMapping))
	if err != nil {
		t.Fatal(err)
	}
	name, mc, ok := m.MachineBySubject("client-ci-red")
	if !ok || name != "ci-red" || mc.Scope != workflow.TokenReadWrite {
		t.Fatalf("ci-red: %q %+v %v", name, mc, ok)
	}
	roles, ms := m.Resolve(mc.Groups)
	wantRoles, wantMs := m.Resolve([]string{"team-red-owners"}) // a person in the same groups
	if !slices.Equal(roles, wantRoles) || !slices.Equal(ms, wantMs) || len(ms) != 1 || ms[0] != (workflow.Membership{Team: "red", Role: workflow.TeamOwner}) {
		t.Errorf("ci-red resolves to %v %v", roles, ms)
	}
	if _, mc, _ := m.MachineBySubject("svc-audit"); mc.Scope != workflow.TokenRead {
		t.Errorf("the default scope is %q, want read", mc.Scope)
	}
	for _, sub := range []string{"", "client-ci-RED", "ci-red"} {
		if _, _, ok := m.MachineBySubject(sub); ok {
			t.Errorf("subject %q names a machine", sub)
		}
	}
	for _, d := range []workflow.Action{workflow.ActionApprove, workflow.ActionReject, workflow.ActionRequestChanges} {
		if workflow.TokenPermits(mc.Scope, d).Allowed {
			t.Errorf("a machine's scope %s permits %s", mc.Scope, d)
		}
	}
	bad := map[string]string{
		"machines:\n  ci:\n    groups: [team-red-owners]\n":                                            "machines.ci.subject",
		"machines:\n  ci:\n    subject: s\n":                                                           "machines.ci.groups",
		"machines:\n  ci:\n    subject: s\n    groups: [a]\n  ci2:\n    subject: s\n    groups: [a]\n": "also machines.ci's",
		"machines:\n  CI_Red:\n    subject: s\n    groups: [a]\n":                                      "not a valid machine name",
		"machines:\n  ci:\n    subject: s\n    scope: decide\n    groups: [a]\n":                       "never decides",
		"machines:\n  ci:\n    subject: s\n    scope: admin\n    groups: [a]\n":                        "never decides",
	}
	for doc, want := range bad {
		if _, err := ParseMapping([]byte(goodMapping + doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", doc, err, want)
		}
	}
}

// TestMachineVerifier: go-oidc's checks with the provider's keys: the
// signature, the issuer, the expiry; then one of the configured audiences.
func TestMachineVerifier(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	const iss = "https://idp.example.test"
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	v := NewMachineVerifierWithKeys(iss, []string{"a", "b"}, &oidc.StaticKeySet{PublicKeys: []crypto.PublicKey{&key.PublicKey}}, func() time.Time { return now })
	sign := func(k *rsa.PrivateKey, claims map[string]any) string {
		c := map[string]any{"iss": iss, "sub": "client-1", "aud": []string{"x", "b"}, "exp": now.Add(time.Minute).Unix()}
		for n, x := range claims {
			c[n] = x
		}
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: k}, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(c)
		jws, err := s.Sign(b)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := jws.CompactSerialize()
		return raw
	}
	mt, err := v.Verify(context.Background(), sign(key, nil))
	if err != nil || mt.Subject != "client-1" || mt.Issuer != iss || !mt.Expiry.Equal(now.Add(time.Minute)) {
		t.Fatalf("a good token: %+v %v", mt, err)
	}
	for why, c := range map[string]struct {
		raw  string
		want error
	}{
		"audience": {sign(key, map[string]any{"aud": "c"}), ErrMachineAudience},
		"expired":  {sign(key, map[string]any{"exp": now.Add(-time.Second).Unix()}), ErrMachineToken},
		"no exp":   {sign(key, map[string]any{"exp": nil}), ErrMachineToken},
		"issuer":   {sign(key, map[string]any{"iss": iss + "/other"}), ErrMachineToken},
		"key":      {sign(other, nil), ErrMachineToken},
		"garbage":  {"a.b.c", ErrMachineToken},
	} {
		if _, err := v.Verify(context.Background(), c.raw); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", why, err, c.want)
		}
	}
}
