package workflow

import (
	"strings"
	"testing"
	"time"
)

var tokenNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func redOwnerAdmin() Principal {
	return NewPrincipal(7, "sub", "o@example.test", "O", []Role{RoleAdmin},
		[]Membership{{Team: "red", Role: TeamOwner}, {Team: "green", Role: TeamMember}})
}

func TestCheckTokenRequest(t *testing.T) {
	p := redOwnerAdmin()
	for _, tc := range []struct {
		name  string
		req   TokenRequest
		field string // "" = accepted
	}{
		{"ok", TokenRequest{Name: " ci ", Scope: TokenRead, Days: 90}, ""},
		{"ok limited", TokenRequest{Name: "ci", Scope: TokenReadWrite, Teams: []string{"red", "red"}, Days: 1}, ""},
		{"no name", TokenRequest{Name: "  ", Scope: TokenRead, Days: 1}, "name"},
		{"long name", TokenRequest{Name: strings.Repeat("é", MaxTokenNameLen+1), Scope: TokenRead, Days: 1}, "name"},
		{"control char", TokenRequest{Name: "a\nb", Scope: TokenRead, Days: 1}, "name"},
		{"bad scope", TokenRequest{Name: "ci", Scope: "decide", Days: 1}, "scope"},
		{"other team", TokenRequest{Name: "ci", Scope: TokenRead, Teams: []string{"blue"}, Days: 1}, "teams"},
		{"too long", TokenRequest{Name: "ci", Scope: TokenRead, Days: 91}, "days"},
		{"zero days", TokenRequest{Name: "ci", Scope: TokenRead, Days: 0}, "days"},
	} {
		tok, errs := CheckTokenRequest(p, tc.req, tokenNow, DefaultTokenMaxLifetime)
		if tc.field == "" {
			if len(errs) != 0 {
				t.Errorf("%s: refused: %v", tc.name, errs)
				continue
			}
			if tok.UserID != 7 || tok.Name != "ci" || !tok.ExpiresAt.Equal(tokenNow.AddDate(0, 0, tc.req.Days)) {
				t.Errorf("%s: token %+v", tc.name, tok)
			}
			continue
		}
		if errs.Get(tc.field) == "" {
			t.Errorf("%s: want an error on %s, got %v", tc.name, tc.field, errs)
		}
	}
	// A shorter installation maximum is the cap.
	if _, errs := CheckTokenRequest(p, TokenRequest{Name: "ci", Scope: TokenRead, Days: 31}, tokenNow, 30*24*time.Hour); errs.Get("days") == "" {
		t.Error("31 days accepted under a 30-day maximum")
	}
	// Nobody without access makes one.
	if _, errs := CheckTokenRequest(NewPrincipal(8, "s", "n@x", "", nil, nil), TokenRequest{Name: "ci", Scope: TokenRead, Days: 1}, tokenNow, DefaultTokenMaxLifetime); len(errs) == 0 {
		t.Error("a person without access made a token")
	}
}

func TestDecideRevokeToken(t *testing.T) {
	p := redOwnerAdmin()
	if !DecideRevokeToken(p, Token{ID: 1, UserID: 7}).Allowed {
		t.Error("a person cannot revoke their own token")
	}
	if DecideRevokeToken(p, Token{ID: 2, UserID: 8}).Allowed {
		t.Error("an admin revoked another person's token")
	}
}

func TestTokenPrincipalNeverGains(t *testing.T) {
	p := redOwnerAdmin()
	if got := TokenPrincipal(p, Token{}); !got.HasRole(RoleAdmin) || len(got.Memberships) != 2 {
		t.Errorf("unlimited token: %+v, want the person", got)
	}
	lim := TokenPrincipal(p, Token{Teams: []string{"red", "blue"}})
	if lim.HasRole(RoleAdmin) || len(lim.Memberships) != 1 || lim.Memberships[0] != (Membership{"red", TeamOwner}) {
		t.Errorf("limited token: %+v, want red's owner only", lim)
	}
	// The token's person is outside blue: Decide refuses it, whatever the token names.
	if Decide(lim, ActionViewTeam, Object{Team: "blue"}).Allowed || Decide(lim, ActionViewTeam, Object{Team: "green"}).Allowed {
		t.Error("a token limited to red (and blue, which its person is not in) sees blue or green")
	}
	// The person left red's group: the token loses red.
	left := NewPrincipal(7, "sub", "o@example.test", "O", nil, []Membership{{Team: "green", Role: TeamMember}})
	if got := TokenPrincipal(left, Token{Teams: []string{"red"}}); got.HasAccess() {
		t.Errorf("after leaving red: %+v", got)
	}
	if CheckTokenUse(Token{Teams: []string{"red"}, ExpiresAt: tokenNow.Add(time.Hour)}, left, tokenNow, tokenNow, time.Hour) != TokenNoAccess {
		t.Error("a token whose person left its only team is still accepted")
	}
}

func TestCheckTokenUse(t *testing.T) {
	p := redOwnerAdmin()
	ok := Token{ExpiresAt: tokenNow.Add(time.Hour)}
	for _, tc := range []struct {
		name    string
		tok     Token
		checked time.Time
		want    TokenRefusal
	}{
		{"fresh", ok, tokenNow, TokenOK},
		{"expired at the instant", Token{ExpiresAt: tokenNow}, tokenNow, TokenExpired},
		{"revoked", Token{ExpiresAt: tokenNow.Add(time.Hour), RevokedAt: tokenNow.Add(-time.Second)}, tokenNow, TokenRevoked},
		{"groups stale", ok, tokenNow.Add(-13 * time.Hour), TokenStaleGroups},
		{"groups just fresh", ok, tokenNow.Add(-12 * time.Hour), TokenOK},
	} {
		if got := CheckTokenUse(tc.tok, p, tc.checked, tokenNow, 12*time.Hour); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestTokenPermits(t *testing.T) {
	for _, tc := range []struct {
		s    TokenScope
		a    Action
		want bool
	}{
		{TokenRead, ActionViewConnection, true},
		{TokenRead, ActionCreateRequest, false},
		{TokenRead, ActionSubmitRequest, false},
		{TokenReadWrite, ActionCreateRequest, true},
		{TokenReadWrite, ActionSubmitRequest, true},
		{TokenReadWrite, ActionApprove, false},
		{TokenReadWrite, ActionReject, false},
		{TokenReadWrite, ActionRequestChanges, false},
		{TokenReadWrite, ActionRevoke, false},
		{TokenReadWrite, ActionReview, false},
		{TokenRead, ActionReadNotice, true},
		{TokenRead, ActionMarkNoticeRead, false},
		{TokenReadWrite, ActionMarkNoticeRead, true},
		{"", ActionViewConnection, false},
		{"", ActionMarkNoticeRead, false},
	} {
		if got := TokenPermits(tc.s, tc.a).Allowed; got != tc.want {
			t.Errorf("TokenPermits(%q, %s) = %v", tc.s, tc.a, got)
		}
	}
	if !TokenCoversTeam(Token{}, "blue") || TokenCoversTeam(Token{Teams: []string{"red"}}, "blue") || !TokenCoversTeam(Token{Teams: []string{"red"}}, "red") {
		t.Error("TokenCoversTeam")
	}
}
