package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// lifecycleError turns a refused transition (of a request, or of a live
// connection's change) into a clear 409 page.
func (s *Server) lifecycleError(err error) error {
	var te *workflow.TransitionError
	var ae *workflow.AmendmentError
	var why error
	switch {
	case errors.As(err, &te):
		why = te
	case errors.As(err, &ae):
		why = ae
	}
	if why != nil {
		return &userError{page: views.ErrorPage{Status: http.StatusConflict, Title: "That is no longer possible",
			Message: "The request changed state: " + why.Error() + ". Reload it to see where it stands.", Action: "Back", ActionURL: "/connections"}, err: err}
	}
	return err
}

// submitRequest sends the current version to the admins, if it validates.
func (s *Server) submitRequest(c echo.Context) error {
	p, conn, obj, err := s.loadConnection(c)
	if err != nil {
		return err
	}
	if err := allowed(p, workflow.ActionSubmitRequest, obj); err != nil {
		return err
	}
	v, errs, err := s.submitCurrent(c, p, conn, "")
	if err != nil {
		return err
	}
	if len(errs) > 0 {
		action := fmt.Sprintf("/connections/%d", conn.ID)
		f := s.formPage(editHeading(conn, conn.CurrentVersion), action, action, conn.CurrentVersion, formFromContract(v.Contract), errs)
		f.Notice = "This draft cannot be submitted yet: complete the fields below, then choose \"Save and submit\"."
		return render(c, http.StatusUnprocessableEntity, views.ContractFormPage(s.page(c, "Edit connection request"), f))
	}
	return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/connections/%d", conn.ID))
}

// submitCurrent submits conn's current version if it validates (the page's
// submit and the API's): the field errors, keyed as the form names them,
// when it cannot be submitted yet. want, when not "", is the version's hash
// the caller saw (the API's If-Match): another is a *store.StaleError, and
// the store checks inside its transaction that the version it submits is
// still the current one with that hash.
func (s *Server) submitCurrent(c echo.Context, p workflow.Principal, conn store.Connection, want string) (store.Version, map[string]string, error) {
	ctx := c.Request().Context()
	v, err := s.opts.DB.Version(ctx, conn.ID, conn.CurrentVersion)
	if err != nil {
		return v, nil, err
	}
	if want != "" && want != v.Hash {
		return v, nil, &store.StaleError{WantVersion: conn.CurrentVersion, WantHash: want, Current: conn, CurrentHash: v.Hash}
	}
	env := s.validationEnv(c, conn.ID)
	fe := v.Contract.Validate(env)
	if down := env.Unavailable(); down != nil {
		return v, nil, &userError{page: views.ErrorPage{Status: http.StatusServiceUnavailable, Title: "Not submitted",
			Message: "Nothing was changed: the portal could not check this request against the others just now (its database did not answer). Try again in a minute."}, err: down}
	}
	errs := mergeFieldErrors(map[string]string{}, fe)
	if errs, _, err = s.amendmentErrors(c, conn, v.Contract, errs); err != nil {
		return v, nil, err
	}
	if len(errs) > 0 {
		return v, errs, nil
	}
	if _, err := s.opts.DB.Transition(ctx, conn.ID, workflow.EventSubmit, actor(p), "", store.Expect{Version: conn.CurrentVersion, Hash: v.Hash}, s.opts.Now()); err != nil {
		return v, nil, s.lifecycleError(err)
	}
	return v, nil, nil
}

func (s *Server) withdrawRequest(c echo.Context) error {
	p, conn, obj, err := s.loadConnection(c)
	if err != nil {
		return err
	}
	if err := allowed(p, workflow.ActionWithdrawRequest, obj); err != nil {
		return err
	}
	if err := s.withdraw(c.Request().Context(), p, conn, store.Expect{}); err != nil {
		return s.lifecycleError(err)
	}
	return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/connections/%d", conn.ID))
}

// withdraw is the owner's withdrawal of conn's request (or of a live
// connection's open change) for the page and the API, pinned to the
// version pin names (none: the page's form).
func (s *Server) withdraw(ctx context.Context, p workflow.Principal, conn store.Connection, pin store.Expect) error {
	_, err := s.opts.DB.Transition(ctx, conn.ID, workflow.EventWithdraw, actor(p), "withdrawn by the owner", pin, s.opts.Now())
	return err
}
