package web

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// tokenPrefix starts every API token, so that secret scanners (and people)
// recognise one in a log or a repository.
const tokenPrefix = "hpp_"

// newTokenSecret is a new token: the prefix and 256 random bits.
func newTokenSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// tokenHash is what the store keeps of a secret: its SHA-256, in hex. A
// slow password hash (bcrypt, argon2) defends guessable secrets; a token is
// 256 random bits, which no one can enumerate, so a fast hash protects it
// as well and lets the store find the token by an index on the hash in one
// lookup per request.
func tokenHash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// tokensPage is GET /settings/tokens: the signed-in person's tokens.
func (s *Server) tokensPage(c echo.Context) error {
	p, ok := principal(c)
	if !ok {
		return echo.NewHTTPError(http.StatusUnauthorized)
	}
	v := views.Tokens{Scope: string(workflow.TokenRead), Days: strconv.Itoa(min(30, s.tokenMaxDays()))}
	return s.renderTokens(c, p, http.StatusOK, v, nil)
}

func (s *Server) tokenMaxDays() int { return int(s.opts.APITokenMaxLifetime.Hours() / 24) }

func (s *Server) renderTokens(c echo.Context, p workflow.Principal, status int, v views.Tokens, checked []string) error {
	toks, err := s.opts.DB.TokensOf(c.Request().Context(), p.UserID)
	if err != nil {
		return err
	}
	now := s.opts.Now()
	for _, t := range toks {
		r := views.TokenRow{ID: t.ID, Name: t.Name, Scope: t.Scope.Label(), Teams: strings.Join(t.Teams, ", "),
			Created: fmtWhen(t.CreatedAt), Expires: fmtWhen(t.ExpiresAt), LastUsed: "never", State: "active",
			RevokeURL: "/settings/tokens/" + strconv.FormatInt(t.ID, 10) + "/revoke"}
		if r.Teams == "" {
			r.Teams = "all of yours"
		}
		if !t.LastUsedAt.IsZero() {
			r.LastUsed = fmtWhen(t.LastUsedAt) + " from " + t.LastUsedFrom
		}
		switch t.Ended(now) {
		case workflow.TokenRevoked:
			r.State, r.RevokeURL = "revoked "+fmtWhen(t.RevokedAt), ""
		case workflow.TokenExpired:
			r.State, r.RevokeURL = "expired", ""
		}
		v.Rows = append(v.Rows, r)
	}
	for _, m := range p.Memberships {
		v.Teams = append(v.Teams, views.TokenTeam{Name: m.Team, Checked: slices.Contains(checked, m.Team)})
	}
	for _, sc := range workflow.TokenScopes {
		v.Scopes = append(v.Scopes, views.Choice{Value: string(sc), Label: sc.Label()})
	}
	v.MaxDay = s.tokenMaxDays()
	return render(c, status, views.TokensPage(s.page(c, "API tokens"), v))
}

// createToken is POST /settings/tokens: workflow.CheckTokenRequest decides,
// the store records it (and token.create), and the page shows the secret
// once. Bad input: the form again with its values and the messages.
func (s *Server) createToken(c echo.Context) error {
	p, ok := principal(c)
	if !ok {
		return echo.NewHTTPError(http.StatusUnauthorized)
	}
	form, err := c.FormParams()
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest)
	}
	req := workflow.TokenRequest{Name: form.Get("name"), Scope: workflow.TokenScope(form.Get("scope")), Teams: form["teams"]}
	v := views.Tokens{Name: req.Name, Scope: string(req.Scope), Days: form.Get("days")}
	days, convErr := strconv.Atoi(strings.TrimSpace(form.Get("days")))
	if convErr == nil {
		req.Days = days
	}
	tok, errs := workflow.CheckTokenRequest(p, req, s.opts.Now(), s.opts.APITokenMaxLifetime)
	if convErr != nil && errs.Get("days") == "" {
		errs = append(errs, workflow.FieldError{Field: "days", Message: "A whole number of days."})
	}
	if len(errs) > 0 {
		v.Errors = map[string]string{}
		for _, e := range errs {
			v.Errors[e.Field] = e.Message
		}
		return s.renderTokens(c, p, http.StatusUnprocessableEntity, v, req.Teams)
	}
	secret := newTokenSecret()
	if _, err := s.opts.DB.CreateToken(c.Request().Context(), tok, tokenHash(secret), actor(p)); err != nil {
		return err
	}
	v = views.Tokens{Created: secret, CreatedName: tok.Name, Scope: string(workflow.TokenRead), Days: strconv.Itoa(min(30, s.tokenMaxDays()))}
	return s.renderTokens(c, p, http.StatusOK, v, nil)
}

// revokeToken is POST /settings/tokens/:id/revoke. Another person's token,
// or none, is not found (workflow.DecideRevokeToken).
func (s *Server) revokeToken(c echo.Context) error {
	p, id, err := principalAndID(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	t, err := s.opts.DB.Token(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return echo.NewHTTPError(http.StatusNotFound)
	}
	if err != nil {
		return err
	}
	if d := workflow.DecideRevokeToken(p, t.Token); !d.Allowed {
		return &echo.HTTPError{Code: http.StatusNotFound, Internal: errDenied(d.Reason)}
	}
	if err := s.opts.DB.RevokeToken(ctx, id, actor(p), s.opts.Now()); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/settings/tokens")
}
