package web

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"golang.org/x/net/html"

	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// The contract form is built from the field table (workflow.Fields): these
// tests walk its rows, so a new row is rendered, read back, diffed and
// labelled here without another edit.

// renderForm renders the contract form page of raw values and errors.
func renderForm(t *testing.T, v views.ContractValues, errs map[string]string) string {
	t.Helper()
	f := (&Server{}).formPage("Edit", "/connections/1", "/connections/1", 1, v, errs)
	var b bytes.Buffer
	if err := views.ContractFormPage(views.Page{Title: "Edit", CSRFToken: "tok"}, f).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// submitted is what a browser posts for a form page: the values of its
// named text, date and hidden inputs, text areas, selected options and
// checked boxes, as the HTML form submission algorithm collects them.
func submitted(t *testing.T, page string) url.Values {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	out := url.Values{}
	attr := func(n *html.Node, k string) (string, bool) {
		for _, a := range n.Attr {
			if a.Key == k {
				return a.Val, true
			}
		}
		return "", false
	}
	text := func(n *html.Node) string {
		var b strings.Builder
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.TextNode {
				b.WriteString(c.Data)
			}
		}
		return b.String()
	}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		name, named := attr(n, "name")
		if n.Type == html.ElementNode && named {
			switch n.Data {
			case "input":
				typ, _ := attr(n, "type")
				val, _ := attr(n, "value")
				_, checked := attr(n, "checked")
				if typ == "checkbox" && !checked {
					break
				}
				if typ != "submit" {
					out.Add(name, val)
				}
			case "textarea":
				// The parser drops a text area's leading newline, as a
				// browser does.
				out.Add(name, text(n))
			case "select":
				for o := n.FirstChild; o != nil; o = o.NextSibling {
					if _, sel := attr(o, "selected"); o.Type == html.ElementNode && sel {
						val, _ := attr(o, "value")
						out.Add(name, val)
					}
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return out
}

// readPosted runs readForm on a POST of form, for team.
func readPosted(t *testing.T, form url.Values, team string) views.ContractValues {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/teams/"+team+"/connections", strings.NewReader(form.Encode()))
	req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationForm)
	v, err := readForm(echo.New().NewContext(req, httptest.NewRecorder()), team)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestEveryFieldRoundTripsThroughThePage: for the example contract, and
// for each row of the table its example value on an empty contract, the
// rendered page, submitted as a browser would and read by readForm and
// contractFromForm, gives the contract back; the one-row contract differs
// from the empty one in that row only, under its label. Each input has its
// label, help, id and name.
func TestEveryFieldRoundTripsThroughThePage(t *testing.T) {
	roundTrip := func(t *testing.T, c workflow.Contract) workflow.Contract {
		t.Helper()
		page := renderForm(t, formFromContract(c), nil)
		got, errs := contractFromForm(readPosted(t, submitted(t, page), c.Team))
		if len(errs) > 0 {
			t.Fatalf("form errors: %v", errs)
		}
		return got
	}
	ex := workflow.ExampleContract()
	if got := roundTrip(t, ex); got.Hash() != ex.Hash() {
		t.Errorf("the page changed the example contract:\n%v", workflow.Diff(ex, got))
	}

	page := renderForm(t, formFromContract(ex), nil)
	for _, f := range workflow.Fields() {
		t.Run(f.Path, func(t *testing.T) {
			var one workflow.Contract
			if msg := f.SetFormValue(&one, []string{f.Example}); msg != "" {
				t.Fatalf("example %q: %s", f.Example, msg)
			}
			got := roundTrip(t, one)
			if got.Hash() != one.Hash() {
				t.Errorf("the page changed the contract:\n%v", workflow.Diff(one, got))
			}
			d := workflow.Diff(workflow.Contract{}, got)
			if len(d) != 1 || d[0].Field != f.Path || d[0].Label != f.Label {
				t.Errorf("Diff from the empty contract = %+v, want only %s", d, f.Path)
			}
			if f.Input == workflow.InputNone {
				if !strings.Contains(page, f.FormLabel+" <strong>") || strings.Contains(page, `name="`+f.Key+`"`) {
					t.Errorf("the page has an input for %s, or does not show it", f.Path)
				}
				return
			}
			wants := []string{`name="` + f.Key + `"`, html.EscapeString(f.FormLabel) + "<", html.EscapeString(f.Help)}
			if f.Input != workflow.InputChecks {
				wants = append(wants, `id="`+f.Key+`"`, `<label for="`+f.Key+`">`)
			}
			for _, want := range wants {
				if !strings.Contains(page, want) {
					t.Errorf("the page lacks %s", want)
				}
			}
		})
	}
}

// TestEveryFieldShowsItsErrorAndKeepsItsInput: a message for any row's
// input is shown beside it, and the raw input, however wrong, is kept.
func TestEveryFieldShowsItsErrorAndKeepsItsInput(t *testing.T) {
	for _, f := range workflow.Fields() {
		if f.Input == workflow.InputNone {
			continue
		}
		t.Run(f.Key, func(t *testing.T) {
			v := formFromContract(workflow.ExampleContract())
			raw := []string{"<wrong & kept>"}
			v[f.Key] = raw
			page := renderForm(t, v, map[string]string{f.Key: "is wrong"})
			if !strings.Contains(page, `data-testid="error-`+f.Key+`">is wrong<`) || !strings.Contains(page, `data-testid="form-errors"`) {
				t.Errorf("the page does not show the error of %s", f.Key)
			}
			if f.Input == workflow.InputSelect || f.Input == workflow.InputChecks {
				return // only the choices can be posted back; Validate names the bad value
			}
			if got := submitted(t, page)[f.Key]; !slices.Equal(got, raw) {
				t.Errorf("the page keeps %q of %q", got, raw)
			}
		})
	}
}

// TestFormFieldMapsEveryPathToItsInput: a validation error of any row's
// path, or of a row of its list, is shown beside that row's input.
func TestFormFieldMapsEveryPathToItsInput(t *testing.T) {
	for _, f := range workflow.Fields() {
		if key, prefix := formField(f.Path); key != f.Key || prefix != "" {
			t.Errorf("formField(%s) = %q, %q, want %q", f.Path, key, prefix, f.Key)
		}
	}
	for path, want := range map[string][2]string{
		"slurm_scope":                    {"slurm_account", ""},
		"scheduling.guaranteed[2].count": {"guaranteed", "line 3: "},
		"egress_allowances[0].ports[1]":  {"egress", "line 1: "},
		"workload_types[1]":              {"workload_types", ""},
		"namespaces[0]":                  {"namespaces", "line 1: "},
	} {
		if k, p := formField(path); k != want[0] || p != want[1] {
			t.Errorf("formField(%s) = %q, %q, want %q, %q", path, k, p, want[0], want[1])
		}
	}
}
