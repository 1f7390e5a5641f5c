package auth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/devidp"
)

// TestRecheckErrors: the answers a re-check can end in, against the real
// development provider (codes and tokens the portal never obtained).
func TestRecheckErrors(t *testing.T) {
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	h, err := devidp.New(devidp.Config{
		Issuer: base + "/dev-idp", ClientID: "c", ClientSecret: "s-0123456789abcdef",
		RedirectURIs: []string{base + "/cb"}, Users: devidp.DemoUsers(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var down atomic.Bool
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		h.ServeHTTP(w, r)
	})
	srv.Start()
	defer srv.Close()
	c := NewClient(OIDCConfig{Issuer: base + "/dev-idp", ClientID: "c", ClientSecret: "s-0123456789abcdef", RedirectURL: base + "/cb"})
	ctx := context.Background()

	cases := []struct {
		name string
		t    Tokens
		want error
	}{
		{"access token expired, no refresh token", Tokens{AccessToken: "x", Expiry: time.Now().Add(-time.Minute)}, ErrCannotRecheck},
		{"no tokens at all", Tokens{}, ErrCannotRecheck},
		{"access token the provider does not know", Tokens{AccessToken: "not-a-token", Expiry: time.Now().Add(time.Hour)}, ErrLoginRevoked},
		{"refresh token the provider does not know", Tokens{RefreshToken: "not-a-token"}, ErrLoginRevoked},
	}
	for _, tc := range cases {
		if _, _, err := c.Recheck(ctx, "owner.red", tc.t); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}

	// The provider goes away after discovery: unavailable, not revoked.
	down.Store(true)
	for _, tk := range []Tokens{{RefreshToken: "rt"}, {AccessToken: "at", Expiry: time.Now().Add(time.Hour)}} {
		if _, _, err := c.Recheck(ctx, "owner.red", tk); !errors.Is(err, ErrProviderUnavailable) {
			t.Errorf("provider down (%+v): %v, want ErrProviderUnavailable", tk, err)
		}
	}
}
