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
		{"bad scope", TokenRequest{Name: "ci", Scope: "admin", Days: 1}, "scope"},
		{"decide, admin", TokenRequest{Name: "ci", Scope: TokenDecide, Days: 1}, ""},
		{"decide, admin, limited", TokenRequest{Name: "ci", Scope: TokenDecide, Teams: []string{"red"}, Days: 1}, ""},
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
	// Only a person allowed to decide makes a decision token: an admin or a
	// reviewer; a team's owner (who files, never decides) or finance does not.
	for _, who := range []Principal{
		NewPrincipal(9, "s", "o@x", "", nil, []Membership{{Team: "red", Role: TeamOwner}}),
		NewPrincipal(9, "s", "f@x", "", []Role{RoleFinance}, nil),
	} {
		if _, errs := CheckTokenRequest(who, TokenRequest{Name: "ci", Scope: TokenDecide, Days: 1}, tokenNow, DefaultTokenMaxLifetime); errs.Get("scope") == "" {
			t.Errorf("%s made a decision token", who.Email)
		}
	}
	if _, errs := CheckTokenRequest(NewPrincipal(9, "s", "r@x", "", []Role{RoleReviewer}, nil), TokenRequest{Name: "ci", Scope: TokenDecide, Days: 1}, tokenNow, DefaultTokenMaxLifetime); len(errs) != 0 {
		t.Errorf("a reviewer cannot make a decision token: %v", errs)
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
		{TokenRead, ActionApprove, false},
		{TokenDecide, ActionViewConnection, true},
		{TokenDecide, ActionApprove, true},
		{TokenDecide, ActionReject, true},
		{TokenDecide, ActionRequestChanges, true},
		{TokenDecide, ActionReview, true},
		{TokenDecide, ActionCreateRequest, false},
		{TokenDecide, ActionSubmitRequest, false},
		{TokenDecide, ActionEditRequest, false},
		{TokenDecide, ActionWithdrawRequest, false},
		{TokenDecide, ActionMarkNoticeRead, false},
		{TokenDecide, ActionRevoke, false},
		{TokenDecide, ActionConfirmHold, false},
		{TokenDecide, ActionDeclineRevocation, false},
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
	// A refusal names the scope the action needs.
	if d := TokenPermits(TokenReadWrite, ActionApprove); !strings.Contains(d.Reason, `needs the decide scope`) {
		t.Errorf("refusal %q does not name the decide scope", d.Reason)
	}
	if d := TokenPermits(TokenDecide, ActionSubmitRequest); !strings.Contains(d.Reason, `needs the read-write scope`) {
		t.Errorf("refusal %q does not name the read-write scope", d.Reason)
	}
	if !TokenCoversTeam(Token{}, "blue") || TokenCoversTeam(Token{Teams: []string{"red"}}, "blue") || !TokenCoversTeam(Token{Teams: []string{"red"}}, "red") {
		t.Error("TokenCoversTeam")
	}
}

// TestTokenDecider: a decision token decides as its person (the admin or
// reviewer role included) only on the teams it reaches; everything else
// acts as TokenPrincipal, and Decide's independence still holds.
func TestTokenDecider(t *testing.T) {
	p := redOwnerAdmin()
	submitted := func(team string, requester int64) Object {
		return Object{Team: team, State: StateSubmitted, RequesterID: requester}
	}
	for _, tc := range []struct {
		name string
		tok  Token
		obj  Object
		want bool
	}{
		{"decide, unlimited, blue", Token{Scope: TokenDecide}, submitted("blue", 1), true},
		{"decide, red only, red", Token{Scope: TokenDecide, Teams: []string{"red"}}, submitted("red", 1), true},
		{"decide, red only, blue", Token{Scope: TokenDecide, Teams: []string{"red"}}, submitted("blue", 1), false},
		{"decide, own request", Token{Scope: TokenDecide}, submitted("blue", 7), false},
		{"read-write, red only", Token{Scope: TokenReadWrite, Teams: []string{"red"}}, submitted("red", 1), false},
	} {
		if got := Decide(TokenDecider(p, tc.tok, tc.obj.Team), ActionApprove, tc.obj).Allowed; got != tc.want {
			t.Errorf("%s: approve allowed = %v", tc.name, got)
		}
	}
	if got := TokenDecider(p, Token{Scope: TokenDecide, Teams: []string{"red"}}, ""); got.HasRole(RoleAdmin) {
		t.Error("a limited decision token keeps the admin role outside a team's connection")
	}
}
