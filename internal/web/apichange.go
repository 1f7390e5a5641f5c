package web

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// The API's owner commands beyond filing and submitting: edit a contract
// (a draft's, or on a live connection its change: the page's "Request a
// change", which is the same edit), and withdraw. Each runs the page
// handler's checks and store command (updateRequest, withdrawRequest) and
// takes If-Match with the ETag of the version it acts on.

// ifMatch is the hash an API write names in If-Match: 428 without one.
func ifMatch(c echo.Context, what string) (string, error) {
	want := strings.Trim(strings.TrimPrefix(strings.TrimSpace(c.Request().Header.Get("If-Match")), "W/"), `"`)
	if want == "" {
		return "", &problemError{status: http.StatusPreconditionRequired, title: "If-Match required",
			detail: "Send If-Match with the ETag of the version you " + what + " (GET the connection's current version first).",
			fields: []problemField{{Field: "If-Match", Detail: "required"}}}
	}
	return want, nil
}

// orStale is err, or the 412 of a write whose If-Match names a version
// that is no longer the current one when err is a *store.StaleError.
func orStale(conn store.Connection, err error) error {
	var stale *store.StaleError
	if !errors.As(err, &stale) {
		return err
	}
	return &problemError{status: http.StatusPreconditionFailed, title: "The version changed",
		detail: fmt.Sprintf("Connection %d is at version %d (%s) now; read it again.", conn.ID, stale.Current.CurrentVersion, stale.Current.State), err: err}
}

// currentIs checks that want is the hash of conn's current version (a
// *store.StaleError otherwise). The store checks the version number again
// inside the transaction that records the write; versions never change, so
// the number pins the hash.
func (s *Server) currentIs(c echo.Context, conn store.Connection, want string) error {
	v, err := s.opts.DB.Version(c.Request().Context(), conn.ID, conn.CurrentVersion)
	if err != nil {
		return err
	}
	if v.Hash != want {
		return &store.StaleError{WantVersion: conn.CurrentVersion, WantHash: want, Current: conn, CurrentHash: v.Hash}
	}
	return nil
}

// apiEditContract is PUT /api/v1/connections/:id/contract: the page's
// save of the edit form (updateRequest) with a contract in the export
// format. On a draft or a request sent back it saves a new version; on a
// live connection it files (or edits) its change request, the approved
// version running meanwhile. The contract is validated as a submission is,
// with the fields a change may not touch refused (amendmentErrors); an
// unchanged contract saves nothing. If-Match: the current version's ETag.
func (s *Server) apiEditContract(c echo.Context) error {
	p, conn, _, err := s.apiConnectionFor(c, workflow.ActionEditRequest)
	if err != nil {
		return err
	}
	want, err := ifMatch(c, "edit")
	if err != nil {
		return err
	}
	con, err := readContractBody(c)
	if err != nil {
		return err
	}
	if err := sameTeam(conn, con); err != nil {
		return err
	}
	if err := s.currentIs(c, conn, want); err != nil {
		return orStale(conn, err)
	}
	if err := s.checkAPIContract(c, conn, con); err != nil {
		return err
	}
	saved, _, err := s.opts.DB.SaveContract(c.Request().Context(), conn.ID, conn.CurrentVersion, con, actor(p), s.opts.Now())
	var stale *store.StaleError
	switch {
	case errors.As(err, &stale):
		return orStale(conn, err)
	case errors.Is(err, workflow.ErrVersionLimit):
		return &problemError{status: http.StatusConflict, title: "Too many versions", detail: "Nothing was saved. " + versionLimitNotice(conn.Team), err: err}
	case err != nil:
		return s.lifecycleError(err)
	}
	v, err := s.opts.DB.Version(c.Request().Context(), saved.ID, saved.CurrentVersion)
	if err != nil {
		return err
	}
	c.Response().Header().Set("ETag", `"`+v.Hash+`"`)
	return c.JSON(http.StatusOK, apiConnectionOf(saved))
}

// checkAPIContract validates con as the next version of conn: the form's
// checks against the other connections and, on a live connection, the
// fields a change may not touch. 422 naming each field, 503 when the
// checks could not run.
func (s *Server) checkAPIContract(c echo.Context, conn store.Connection, con workflow.Contract) error {
	env := s.validationEnv(c, conn.ID)
	fe := con.Validate(env)
	if down := env.Unavailable(); down != nil {
		return &problemError{status: http.StatusServiceUnavailable, title: "Not saved",
			detail: "The checks against the other connections could not run just now; nothing was saved. Try again in a minute.", err: down}
	}
	errs, _, err := s.amendmentErrors(c, conn, con, mergeFieldErrors(map[string]string{}, fe))
	if err != nil {
		return err
	}
	if len(errs) == 0 {
		return nil
	}
	pe := &problemError{status: http.StatusUnprocessableEntity, title: "Invalid contract",
		detail: fmt.Sprintf("%d field(s) failed validation; nothing was saved.", len(errs))}
	for _, f := range slices.Sorted(maps.Keys(errs)) {
		pe.fields = append(pe.fields, problemField{Field: f, Detail: errs[f]})
	}
	return pe
}

// sameTeam refuses a contract for another team than conn's (422, field
// team): a connection's team never changes (workflow.ErrTeamChanged).
func sameTeam(conn store.Connection, con workflow.Contract) error {
	if con.Normalize().Team == conn.Team {
		return nil
	}
	return &problemError{status: http.StatusUnprocessableEntity, title: "Invalid contract", detail: "A contract's team cannot change; nothing was saved.",
		fields: []problemField{{Field: "team", Detail: fmt.Sprintf("must stay %q (connection %d's team)", conn.Team, conn.ID)}}}
}

// apiWithdraw is POST /api/v1/connections/:id/withdraw: the page's
// withdraw (withdrawRequest), of a request, or of a live connection's open
// change (the approved version keeps running). If-Match: the current
// version's ETag, checked again in the store's transaction.
func (s *Server) apiWithdraw(c echo.Context) error {
	p, conn, _, err := s.apiConnectionFor(c, workflow.ActionWithdrawRequest)
	if err != nil {
		return err
	}
	want, err := ifMatch(c, "withdraw")
	if err != nil {
		return err
	}
	if err := s.currentIs(c, conn, want); err != nil {
		return orStale(conn, err)
	}
	ctx := c.Request().Context()
	if err := s.withdraw(ctx, p, conn, store.Expect{Version: conn.CurrentVersion, Hash: want}); err != nil {
		return s.lifecycleError(orStale(conn, err))
	}
	if conn, err = s.opts.DB.Connection(ctx, conn.ID); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, apiConnectionOf(conn))
}
