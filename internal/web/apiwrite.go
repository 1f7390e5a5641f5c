package web

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// The API's writes: the owner's commands, through the same checks as the
// pages (authorize, Validate with the same environment, the store's
// commands) and the token's narrowing (apiPermits: read-write scope, team
// limit). Writes to an existing version take If-Match with the version's
// ETag, so that two pipelines cannot act on each other's changes unseen.

// apiCreateConnection is POST /api/v1/connections: a contract in the
// export format (the body of GET …/versions/{version}) filed as a new
// request's draft, validated as the form validates a submission.
func (s *Server) apiCreateConnection(c echo.Context) error {
	con, err := readContractBody(c)
	if err != nil {
		return err
	}
	// The person's rule first (another team's is not found), then what
	// the token narrows (its scope, its teams).
	p, err := authorize(c, workflow.ActionCreateRequest, workflow.Object{Team: con.Team})
	if err != nil {
		return err
	}
	if err := apiPermits(c, workflow.ActionCreateRequest, con.Team); err != nil {
		return err
	}
	env := s.validationEnv(c, 0)
	fe := con.Validate(env)
	if down := env.Unavailable(); down != nil {
		return &problemError{status: http.StatusServiceUnavailable, title: "Not created",
			detail: "The checks against the other connections could not run just now; nothing was saved. Try again in a minute.", err: down}
	}
	if len(fe) > 0 {
		return invalidContract(fe)
	}
	conn, err := s.opts.DB.CreateConnection(c.Request().Context(), con, actor(p), s.opts.Now())
	if err != nil {
		return err
	}
	body := apiConnectionOf(conn)
	c.Response().Header().Set("Location", body.Links.Self)
	c.Response().Header().Set("ETag", `"`+con.Hash()+`"`)
	return c.JSON(http.StatusCreated, body)
}

// apiSubmitConnection is POST /api/v1/connections/:id/submit: the current
// version to the admins, as the page's submit (submitCurrent). If-Match
// must name the current version's ETag: 428 without it, 412 when the
// version moved on.
func (s *Server) apiSubmitConnection(c echo.Context) error {
	p, conn, _, err := s.apiConnectionFor(c, workflow.ActionSubmitRequest)
	if err != nil {
		return err
	}
	want, err := ifMatch(c, "submit")
	if err != nil {
		return err
	}
	_, errs, err := s.submitCurrent(c, p, conn, want)
	if err = orStale(conn, err); err != nil {
		return err
	}
	if len(errs) > 0 {
		pe := &problemError{status: http.StatusUnprocessableEntity, title: "Not submitted",
			detail: "The current version cannot be submitted yet."}
		for _, f := range slices.Sorted(maps.Keys(errs)) {
			pe.fields = append(pe.fields, problemField{Field: f, Detail: errs[f]})
		}
		return pe
	}
	conn, err = s.opts.DB.Connection(c.Request().Context(), conn.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, apiConnectionOf(conn))
}

// readContractBody decodes a request body as a contract in the export
// format: JSON only, unknown fields refused (workflow.DecodeContract), the
// body size capped by the server's BodyLimit.
func readContractBody(c echo.Context) (workflow.Contract, error) {
	data, err := readJSONBytes(c, "Send the contract as application/json (the export format).")
	if err != nil {
		return workflow.Contract{}, err
	}
	con, err := workflow.DecodeContract(data)
	if err != nil {
		return con, &problemError{status: http.StatusBadRequest, title: "Not a contract", detail: err.Error()}
	}
	if len(con.LimitErrors()) > 0 {
		return con, invalidContract(con.LimitErrors())
	}
	return con, nil
}

// readJSONBytes reads a request body sent as application/json (else 415
// with hint), up to the server's BodyLimit (its 413 passed on).
func readJSONBytes(c echo.Context, hint string) ([]byte, error) {
	if mt, _, err := mime.ParseMediaType(c.Request().Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return nil, &problemError{status: http.StatusUnsupportedMediaType, title: "JSON only", detail: hint}
	}
	data, err := io.ReadAll(c.Request().Body)
	if err != nil {
		var he *echo.HTTPError
		if errors.As(err, &he) {
			return nil, he // the body limit's 413
		}
		return nil, &problemError{status: http.StatusBadRequest, title: "Unreadable body", detail: "The request body could not be read."}
	}
	return data, nil
}

func invalidContract(fe workflow.FieldErrors) error {
	pe := &problemError{status: http.StatusUnprocessableEntity, title: "Invalid contract",
		detail: fmt.Sprintf("%d field(s) failed validation; nothing was saved.", len(fe))}
	for _, e := range fe {
		pe.fields = append(pe.fields, problemField{Field: e.Field, Detail: e.Message})
	}
	return pe
}

// apiConnectionFor loads the route's connection (loadConnection: 404 for
// one the caller does not see) and checks that the token's scope and team
// limit allow a on it (apiPermits) and that the caller may (allowed): the
// prologue of the API routes that act on one connection.
func (s *Server) apiConnectionFor(c echo.Context, a workflow.Action) (workflow.Principal, store.Connection, workflow.Object, error) {
	p, conn, obj, err := s.loadConnection(c)
	if err != nil {
		return p, conn, obj, err
	}
	if err := apiPermits(c, a, conn.Team); err != nil {
		return p, conn, obj, err
	}
	return p, conn, obj, allowed(p, a, obj)
}
