package web

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/auth"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Machine identities (issue 37, auth/machine.go): a pipeline's bearer
// token issued by the identity provider, not a personal access token. It
// is verified against the provider's keys (issuer, expiry, one of
// Options.Machines' audiences), its sub claim must name a machine of the
// groups file, and the machine acts with exactly the groups the file gives
// it, mapped by the file's roles and teams, under the file's scope (read
// or read-write: workflow.TokenPermits, so it never decides). Every
// accepted use is in the audit trail (machine.use, actor machine:<name>);
// every refusal is a 401 problem document and a log line.

// machineBearer: the request's bearer token is not a personal access token
// and the portal accepts machine identities: a JWT (three dot-separated
// parts) for the machine verifier.
func (s *Server) machineBearer(r *http.Request) bool {
	if s.opts.Machines == nil {
		return false
	}
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	raw = strings.TrimSpace(raw)
	return ok && !strings.HasPrefix(raw, tokenPrefix) && strings.Count(raw, ".") == 2 && len(raw) <= 16<<10
}

// machinePrincipal verifies the machine's token, asks allow (the rate
// limit, per machine) and records the use, and returns what it acts as: a
// token-like grant (its scope, named machine:<name>, no team limit: its
// groups are its limit) and the principal its groups give.
func (s *Server) machinePrincipal(c echo.Context, allow func(key string) error) (workflow.Token, workflow.Principal, error) {
	ctx := c.Request().Context()
	refuse := func(reason, detail string, err error) (workflow.Token, workflow.Principal, error) {
		s.opts.Logger.InfoContext(ctx, "API machine token refused", "request_id", requestID(c), "reason", reason, "err", fmt.Sprint(err))
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="portal", error="invalid_token"`)
		return workflow.Token{}, workflow.Principal{}, &problemError{status: http.StatusUnauthorized, title: "Machine token refused", detail: detail}
	}
	raw := strings.TrimSpace(strings.TrimPrefix(c.Request().Header.Get("Authorization"), "Bearer "))
	mt, err := s.opts.Machines.Verify(ctx, raw)
	switch {
	case errors.Is(err, auth.ErrMachineAudience):
		return refuse("audience", "The token was not issued for the portal (its audience is none of the portal's machine audiences).", err)
	case errors.Is(err, auth.ErrProviderUnavailable):
		// Fail closed. A 401, not a 503: the document answers 503 on few
		// operations, and the detail says it is the provider, not the token.
		return refuse("provider unavailable", "The identity provider's keys could not be read, so the token could not be checked. Try again in a minute.", err)
	case err != nil:
		return refuse("invalid", "The token is not a valid, unexpired token of the portal's identity provider.", err)
	}
	name, m, ok := s.opts.Mapping.MachineBySubject(mt.Subject)
	if !ok {
		return refuse("unknown", "The token's subject is no machine identity of the portal's groups file.", nil)
	}
	roles, ms := s.opts.Mapping.Resolve(m.Groups)
	if len(roles) == 0 && len(ms) == 0 {
		return refuse("no access", "The machine identity's groups give it no access.", nil)
	}
	who := auth.MachinePrefix + name
	if err := allow(who); err != nil {
		return workflow.Token{}, workflow.Principal{}, err
	}
	r := c.Request()
	u, err := s.opts.DB.RecordMachineUse(ctx, s.opts.Machines.Issuer(), who, r.Method+" "+r.URL.Path, s.opts.Now())
	if err != nil {
		return workflow.Token{}, workflow.Principal{}, err
	}
	p := workflow.NewPrincipal(u.ID, who, who, who, roles, ms)
	return workflow.Token{UserID: u.ID, Name: who, Scope: m.Scope}, p, nil
}
