package devidp

import (
	"slices"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// TestRefreshTokens: offline_access yields a refresh token; each use
// returns a new ID token with the user's current groups and spends the
// token (rotation); a removed user's refresh token is refused.
func TestRefreshTokens(t *testing.T) {
	env := newTestEnv(t)
	f := env.newFlow(t, oauth2.AuthStyleInHeader)
	f.conf.Scopes = append(f.conf.Scopes, oidc.ScopeOfflineAccess)
	code := env.login(t, f, "owner.red")
	tok, err := f.conf.Exchange(env.ctx, code, oauth2.VerifierOption(f.verifier))
	if err != nil {
		t.Fatalf("Exchange: %v", err)
	}
	if tok.RefreshToken == "" {
		t.Fatal("no refresh token for offline_access")
	}
	refresh := func(rt string) (*oauth2.Token, error) {
		return f.conf.TokenSource(env.ctx, &oauth2.Token{RefreshToken: rt, Expiry: time.Unix(1, 0)}).Token()
	}

	if err := env.idp.SetUser(User{Username: "owner.red", Name: "Olivia Owner (Red)", Email: "owner.red@example.test", Groups: []string{"team-blue-members"}}); err != nil {
		t.Fatal(err)
	}
	nt, err := refresh(tok.RefreshToken)
	if err != nil {
		t.Fatalf("refresh: %v", err)
	}
	raw, _ := nt.Extra("id_token").(string)
	idt, err := env.provider.Verifier(&oidc.Config{ClientID: testClientID}).Verify(env.ctx, raw)
	if err != nil {
		t.Fatalf("refreshed ID token: %v", err)
	}
	var cl idClaims
	if err := idt.Claims(&cl); err != nil || idt.Subject != "owner.red" || !slices.Equal(cl.Groups, []string{"team-blue-members"}) {
		t.Errorf("refreshed ID token: sub %q groups %v (%v), want owner.red with the new groups", idt.Subject, cl.Groups, err)
	}
	if nt.RefreshToken == "" || nt.RefreshToken == tok.RefreshToken {
		t.Error("the refresh token was not rotated")
	}
	if _, err := refresh(tok.RefreshToken); oauthErrorCode(err) != "invalid_grant" {
		t.Errorf("a spent refresh token: %v, want invalid_grant", err)
	}

	env.idp.RemoveUser("owner.red")
	if _, err := refresh(nt.RefreshToken); oauthErrorCode(err) != "invalid_grant" {
		t.Errorf("refresh for a removed user: %v, want invalid_grant", err)
	}
	if _, err := env.provider.UserInfo(env.ctx, oauth2.StaticTokenSource(nt)); err == nil {
		t.Error("a removed user's access token still opens userinfo")
	}
}
