package web

import (
	"net"
	"net/http/httptest"
	"testing"
)

// TestForwardedForOnlyFromTrustedProxies: X-Forwarded-For names the client
// only when the peer is a configured proxy; otherwise (and by default, even
// from loopback or private peers, which echo would trust) the peer is the
// client, so nobody can write the address the logs record.
func TestForwardedForOnlyFromTrustedProxies(t *testing.T) {
	_, proxies, _ := net.ParseCIDR("10.0.0.0/8")
	for _, tc := range []struct {
		name    string
		trusted []*net.IPNet
		peer    string
		xff     string
		want    string
	}{
		{"no proxies, loopback peer", nil, "127.0.0.1:5000", "203.0.113.9", "127.0.0.1"},
		{"no proxies, private peer", nil, "10.1.2.3:5000", "203.0.113.9", "10.1.2.3"},
		{"trusted proxy", []*net.IPNet{proxies}, "10.1.2.3:5000", "203.0.113.9", "203.0.113.9"},
		{"trusted proxy, spoofed chain", []*net.IPNet{proxies}, "10.1.2.3:5000", "6.6.6.6, 203.0.113.9", "203.0.113.9"},
		{"untrusted peer", []*net.IPNet{proxies}, "198.51.100.7:5000", "203.0.113.9", "198.51.100.7"},
		{"loopback peer not in the list", []*net.IPNet{proxies}, "127.0.0.1:5000", "203.0.113.9", "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tc.peer
			r.Header.Set("X-Forwarded-For", tc.xff)
			if got := ipExtractor(tc.trusted)(r); got != tc.want {
				t.Errorf("client = %s, want %s", got, tc.want)
			}
		})
	}
	// The server uses it: a harness server (no proxies) ignores the header.
	h := newHarness(t, false)
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "127.0.0.1:5000"
	r.Header.Set("X-Forwarded-For", "203.0.113.9")
	if h.srv.echo.IPExtractor == nil || h.srv.echo.IPExtractor(r) != "127.0.0.1" {
		t.Error("the server takes X-Forwarded-For from an untrusted peer")
	}
}
