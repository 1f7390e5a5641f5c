package web

import (
	_ "embed"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/views"
)

// openAPIJSON is the API's OpenAPI 3.1 description, written by hand beside
// the handlers (api.go). Tests keep the two together: every route under
// /api/v1 is documented and every documented operation is routed
// (TestOpenAPIDocumentsEveryRoute), and every API response the tests see
// validates against it (libopenapi-validator).
//
//go:embed openapi.json
var openAPIJSON []byte

// openAPIDocument is GET /api/v1/openapi.json. It holds no data, so
// nobody needs to sign in for it.
func (s *Server) openAPIDocument(c echo.Context) error {
	return c.Blob(http.StatusOK, "application/json", openAPIJSON)
}

// openAPIDoc is the part of the document /api/docs shows.
type openAPIDoc struct {
	Info struct {
		Title, Version, Description string
	}
	Paths map[string]map[string]openAPIOperation
	// Webhooks are what the portal posts to a receiver's URL (the notices'
	// webhook), shown beside the operations.
	Webhooks   map[string]map[string]openAPIOperation
	Components struct {
		Schemas map[string]struct {
			Description string
			Properties  map[string]struct {
				Type        any
				Ref         string `json:"$ref"`
				Description string
			}
		}
	}
}

type openAPIOperation struct {
	Summary, Description string
	Parameters           []struct {
		Name, In string
		Ref      string `json:"$ref"`
	}
	Responses map[string]struct{ Description string }
}

// parseOpenAPI reads the embedded document for the docs page.
func parseOpenAPI() (openAPIDoc, error) {
	var d openAPIDoc
	err := json.Unmarshal(openAPIJSON, &d)
	return d, err
}

// apiDocs is GET /api/docs: the document for people, rendered on the
// server from the same JSON (no script, no CDN).
func (s *Server) apiDocs(c echo.Context) error {
	v, err := apiDocsView()
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.APIDocsPage(s.page(c, "API"), v))
}

// apiDocsView is the docs page's view of the embedded document, built once:
// the document is part of the binary.
var apiDocsView = sync.OnceValues(func() (views.APIDocs, error) {
	d, err := parseOpenAPI()
	if err != nil {
		return views.APIDocs{}, err
	}
	v := views.APIDocs{Title: d.Info.Title, Version: d.Info.Version, Description: d.Info.Description}
	for _, path := range slices.Sorted(maps.Keys(d.Paths)) {
		v.Operations = append(v.Operations, docOperations(path, d.Paths[path])...)
	}
	for _, name := range slices.Sorted(maps.Keys(d.Webhooks)) {
		v.Operations = append(v.Operations, docOperations("webhook "+name+" (to your URL)", d.Webhooks[name])...)
	}
	for _, name := range slices.Sorted(maps.Keys(d.Components.Schemas)) {
		sc := d.Components.Schemas[name]
		as := views.APISchema{Name: name, Description: sc.Description}
		for _, pn := range slices.Sorted(maps.Keys(sc.Properties)) {
			p := sc.Properties[pn]
			t := strings.TrimPrefix(p.Ref, "#/components/schemas/")
			if t == "" {
				if ts, ok := p.Type.(string); ok {
					t = ts
				}
			}
			line := pn + ": " + t
			if p.Description != "" {
				line += " (" + p.Description + ")"
			}
			as.Properties = append(as.Properties, line)
		}
		v.Schemas = append(v.Schemas, as)
	}
	return v, nil
})

// docOperations are the docs page's view of one path's (or webhook's)
// operations, by method.
func docOperations(path string, ops map[string]openAPIOperation) []views.APIOperation {
	var out []views.APIOperation
	for _, method := range slices.Sorted(maps.Keys(ops)) {
		op := ops[method]
		o := views.APIOperation{Method: strings.ToUpper(method), Path: path, Summary: op.Summary, Description: op.Description}
		for _, p := range op.Parameters {
			if p.Ref != "" {
				o.Params = append(o.Params, strings.TrimPrefix(p.Ref, "#/components/parameters/"))
				continue
			}
			o.Params = append(o.Params, p.Name+" ("+p.In+")")
		}
		for _, code := range slices.Sorted(maps.Keys(op.Responses)) {
			desc := op.Responses[code].Description
			if desc == "" {
				desc = "a problem document"
			}
			o.Responses = append(o.Responses, code+": "+desc)
		}
		out = append(out, o)
	}
	return out
}
