package web

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// The contract form is built from the contract's field table
// (workflow.Fields): one input per row, named by the row's Key, grouped in
// the row's fieldset, read and rendered by the row's codec. Lists are kept
// in textareas, one item per line, so the page needs no JavaScript.
// formFromContract and contractFromForm are inverses for every valid
// contract; on bad input the raw text is kept and re-rendered untouched.

// formFromContract renders a contract into the form's raw values.
func formFromContract(c workflow.Contract) views.ContractValues {
	v := views.ContractValues{}
	for _, f := range workflow.Fields() {
		v[f.Key] = f.FormValue(c)
	}
	return v
}

// contractFromForm parses the raw values. Syntax problems (a count that is
// not a number, a line without its parts) become field errors keyed by
// form field; the domain's Validate checks everything else.
func contractFromForm(v views.ContractValues) (workflow.Contract, map[string]string) {
	var c workflow.Contract
	errs := map[string]string{}
	for _, f := range workflow.Fields() {
		if msg := f.SetFormValue(&c, v[f.Key]); msg != "" {
			errs[f.Key] = msg
		}
	}
	return c, errs
}

// teamKey is the form key of the team, which the page supplies (from the
// URL), not an input.
const teamKey = "team"

// inputKinds are the views' input kinds of the table's.
var inputKinds = map[workflow.Input]string{
	workflow.InputNone: views.InputFixed, workflow.InputLine: views.InputLine, workflow.InputDate: views.InputDate,
	workflow.InputText: views.InputText, workflow.InputSelect: views.InputSelect, workflow.InputChecks: views.InputChecks,
}

// formGroups lays out the form: the table's rows, in order, in their
// fieldsets, with their raw values, size caps and errors.
func formGroups(v views.ContractValues, errs map[string]string) []views.FieldGroup {
	limits := limitHelp()
	var groups []views.FieldGroup
	for _, f := range workflow.Fields() {
		if len(groups) == 0 || groups[len(groups)-1].Legend != f.Group {
			groups = append(groups, views.FieldGroup{Legend: f.Group})
		}
		fld := views.FormField{
			Name: f.Key, Input: inputKinds[f.Input], Label: f.FormLabel, Help: f.Help, Limit: limits[f.Key],
			Example: f.Example, Rows: f.Lines, Choices: choicesOf(f.Choices), Value: v.Get(f.Key), Error: errs[f.Key],
		}
		if f.Input == workflow.InputChecks {
			fld.Values = v[f.Key]
		}
		g := &groups[len(groups)-1]
		g.Fields = append(g.Fields, fld)
	}
	return groups
}

// limitHelp says each form field's size caps (workflow.Limits), keyed by
// form field name, for its help text: "At most 2000 characters.", "At most
// 20 entries; signal: at most 200 characters; ...". The one-line backstop
// (workflow.MaxOneLineLen) is left out: those fields' own format, which the
// help states, is stricter.
func limitHelp() map[string]string {
	parts := map[string][]string{}
	for _, l := range workflow.Limits {
		if l.Rows == 0 && l.Chars == workflow.MaxOneLineLen {
			continue
		}
		path := strings.Replace(l.Field, "[]", "[0]", 1)
		name, _ := formField(path)
		phrase := l.What()
		switch {
		case l.Rows > 0 && !strings.Contains(l.Field, "[]"):
			phrase = fmt.Sprintf("at most %d entries", l.Rows)
		case strings.Contains(l.Field, "[]"):
			_, part, _ := strings.Cut(workflow.FieldLabel(path), ": ")
			if l.Rows > 0 {
				phrase = fmt.Sprintf("%s: at most %d per entry", part, l.Rows)
			} else {
				phrase = part + ": " + phrase
			}
		}
		parts[name] = append(parts[name], phrase)
	}
	out := make(map[string]string, len(parts))
	for name, ps := range parts {
		h := strings.Join(ps, "; ") + "."
		out[name] = strings.ToUpper(h[:1]) + h[1:]
	}
	return out
}

var indexRE = regexp.MustCompile(`\[(\d+)\]`)

// formField maps a validation error's JSON path to the form field it is
// shown beside (the table's row the path belongs to, workflow.FieldFor),
// with a "line N:" prefix for a row of a list written one per line.
func formField(path string) (string, string) {
	prefix := ""
	if m := indexRE.FindStringSubmatch(path); m != nil {
		n, _ := strconv.Atoi(m[1])
		prefix = fmt.Sprintf("line %d: ", n+1)
	}
	f, ok := workflow.FieldFor(path)
	if !ok {
		return path, prefix
	}
	if f.Input == workflow.InputChecks {
		prefix = ""
	}
	return f.Key, prefix
}

// mergeFieldErrors adds the domain's errors to the form's syntax errors.
func mergeFieldErrors(form map[string]string, fe workflow.FieldErrors) map[string]string {
	for _, e := range fe {
		f, prefix := formField(e.Field)
		if _, ok := form[f]; ok && prefix == "" {
			continue // the syntax error says more
		}
		msg := prefix + e.Message
		if old, ok := form[f]; ok {
			msg = old + "; " + msg
		}
		form[f] = msg
	}
	return form
}
