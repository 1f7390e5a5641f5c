package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
	"sigs.k8s.io/yaml"

	"github.com/hyperpod-governance/portal/internal/store"
)

// exportVersion serves one contract version as JSON or YAML, for IaC
// repositories; `portal contract import` reads either back.
func (s *Server) exportVersion(c echo.Context) error {
	_, conn, _, err := s.loadConnection(c)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(c.Param("v"))
	if err != nil {
		return echo.NewHTTPError(http.StatusNotFound)
	}
	v, err := s.opts.DB.Version(c.Request().Context(), conn.ID, n)
	if errors.Is(err, store.ErrNotFound) {
		return echo.NewHTTPError(http.StatusNotFound)
	}
	if err != nil {
		return err
	}
	body := v.Contract.Canonical()
	name := fmt.Sprintf("connection-%d-v%d", conn.ID, n)
	c.Response().Header().Set("X-Contract-Hash", v.Hash)
	switch c.Param("format") {
	case "contract.json":
		out, err := contractExport(v)
		if err != nil {
			return err
		}
		c.Response().Header().Set("Content-Disposition", `attachment; filename="`+name+`.json"`)
		return c.Blob(http.StatusOK, "application/json", out)
	case "contract.yaml":
		out, err := yaml.JSONToYAML(body)
		if err != nil {
			return err
		}
		c.Response().Header().Set("Content-Disposition", `attachment; filename="`+name+`.yaml"`)
		return c.Blob(http.StatusOK, "application/yaml", out)
	}
	return echo.NewHTTPError(http.StatusNotFound)
}

// contractExport is a version in the export format: its canonical JSON,
// indented. The page's contract.json and the API's version (api.go) serve
// these bytes; `portal contract import` reads them back.
func contractExport(v store.Version) ([]byte, error) {
	var pretty json.RawMessage = v.Contract.Canonical()
	out, err := json.MarshalIndent(pretty, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}
