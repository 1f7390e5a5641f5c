package workflow

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// This file holds the kinds of rows of the field table (fields.go): a row
// is built from one accessor of the Contract field it describes, and gets
// from it everything else a field needs (its value for Diff, its tidying for
// Normalize and Validate, its size caps for Limits, its form codec). Adding
// a field of a kind that exists is a Contract field and one row; see README
// "Adding a contract field".

// Input is how the contract form asks for a field.
type Input int

// Inputs of the contract form. The zero Input is none of them: a row
// must say how the form shows it (TestEveryRowIsComplete).
const (
	InputNone   Input = iota + 1 // not an input: the page supplies it (the team, from the URL)
	InputLine                    // a one-line text input
	InputDate                    // a date input
	InputText                    // a text area
	InputSelect                  // a select of Choices
	InputChecks                  // checkboxes of Choices: any number of values
)

// Field is one field of the contract: how people name it, how it is tidied
// and capped, and how the form shows and reads it. The rows of the table
// are built by the constructors below, never by hand, so that the parts
// always agree with each other.
type Field struct {
	// Path is the field's JSON path, as in FieldError.Field.
	Path string
	// Label names the field for people: in diffs and messages.
	Label string
	// Unit is shown after a non-zero number in a diff: "%", " days".
	Unit string

	// Key is the form input's name (and id), also the key of the form's
	// raw values and of its error messages.
	Key string
	// FormLabel is the input's label on the form.
	FormLabel string
	// Group is the form's fieldset the input is in.
	Group string
	// Input is the kind of input; InputNone for a field the page supplies.
	Input Input
	// Help says what the field needs; Example is a valid value, shown as
	// the input's placeholder where the input has one.
	Help, Example string
	// Lines is a text area's height.
	Lines int
	// Choices of a select or of checkboxes.
	Choices []Choice

	get    func(Contract) any
	format func(Contract) []string
	parse  func(*Contract, []string) string
	tidy   func(*Contract) // keeps every list's length and order; fresh slices
	norm   func(*Contract) // after tidy: sorts sets and rows
	cut    func(*Contract) // cuts lists to their row caps
	limits []Limit
}

// Fields returns the table of the contract's fields, in form order.
func Fields() []Field { return slices.Clone(contractFields) }

// FieldFor returns the row a field path belongs to: "signals[2].owner" and
// "signals" belong to Watched signals, the group "slurm_scope" to its first
// field, the Slurm account.
func FieldFor(path string) (Field, bool) {
	if i := formRank(path); i < len(contractFields) {
		return contractFields[i], true
	}
	return Field{}, false
}

// FormValue renders the field of c into its raw form values: one string,
// or one per checked box.
func (f Field) FormValue(c Contract) []string { return f.format(c) }

// SetFormValue sets the field of c from its raw form values, and returns
// what is wrong with their syntax ("" when nothing): a count that is not a
// number, a row without its parts. The domain's Validate checks the rest.
func (f Field) SetFormValue(c *Contract, raw []string) string { return f.parse(c, raw) }

// Modifiers of a row: where and how the form shows it.

func (f Field) line(help, example string) Field {
	f.Input, f.Help, f.Example = InputLine, help, example
	return f
}

func (f Field) area(help, example string, lines int) Field {
	f.Input, f.Help, f.Example, f.Lines = InputText, help, example, lines
	return f
}

// date is a date input; its value is trimmed as it is read. The example is
// for tests: a date input has no placeholder.
func (f Field) date(help, example string) Field {
	f.Input, f.Help, f.Example = InputDate, help, example
	parse := f.parse
	f.parse = func(c *Contract, raw []string) string { return parse(c, []string{strings.TrimSpace(first(raw))}) }
	return f
}

// fixed is a field the page supplies (the team): the form shows its value
// with help after it, and has no input for it.
func (f Field) fixed(help, example string) Field {
	f.Input, f.Help, f.Example = InputNone, help, example
	return f
}

// says gives a select or checkboxes their help, and an example choice for
// tests.
func (f Field) says(help, example string) Field {
	f.Help, f.Example = help, example
	return f
}

// checks asks for a set with checkboxes of cs.
func (f Field) checks(cs []Choice) Field {
	f.Input, f.Choices = InputChecks, cs
	return f
}

func (f Field) key(k string) Field       { f.Key = k; return f }
func (f Field) formLabel(l string) Field { f.FormLabel = l; return f }
func (f Field) unit(u string) Field      { f.Unit = u; return f }

// group puts rows in one fieldset of the form.
func group(legend string, fs ...Field) []Field {
	for i := range fs {
		fs[i].Group = legend
	}
	return fs
}

func base(path, label string) Field {
	return Field{Path: path, Label: label, Key: path, FormLabel: label}
}

// str is a field holding one string, tidied by tidy (line, lower or text)
// and capped at chars characters.
func str(path, label string, ref func(*Contract) *string, tidy func(string) string, chars int) Field {
	f := base(path, label)
	f.get = func(c Contract) any { return *ref(&c) }
	f.format = func(c Contract) []string { return []string{*ref(&c)} }
	f.parse = func(c *Contract, raw []string) string { *ref(c) = first(raw); return "" }
	f.tidy = func(c *Contract) { p := ref(c); *p = tidy(*p) }
	f.limits = []Limit{text1(path, chars, func(c Contract) string { return *ref(&c) })}
	return f
}

// enum is a field holding one of all, chosen in a select.
func enum[T interface {
	~string
	Label() string
}](path, label string, ref func(*Contract) *T, all []T) Field {
	f := base(path, label)
	f.Input = InputSelect
	f.Choices = choices(all, T.Label)
	f.get = func(c Contract) any { return *ref(&c) }
	f.format = func(c Contract) []string { return []string{string(*ref(&c))} }
	f.parse = func(c *Contract, raw []string) string { *ref(c) = T(first(raw)); return "" }
	f.tidy = func(c *Contract) { p := ref(c); *p = T(lower(string(*p))) }
	f.limits = []Limit{text1(path, MaxOneLineLen, func(c Contract) string { return string(*ref(&c)) })}
	return f
}

// number is a field holding a whole number, typed in a one-line input. A
// zero is shown as an empty input when blankZero.
func number(path, label string, ref func(*Contract) *int, blankZero bool) Field {
	f := base(path, label)
	f.get = func(c Contract) any { return *ref(&c) }
	f.format = func(c Contract) []string {
		n := *ref(&c)
		if blankZero && n == 0 {
			return []string{""}
		}
		return []string{strconv.Itoa(n)}
	}
	f.parse = func(c *Contract, raw []string) string {
		s := strings.TrimSpace(first(raw))
		if s == "" {
			*ref(c) = 0
			return ""
		}
		n, err := strconv.Atoi(s)
		*ref(c) = n
		if err != nil {
			return fmt.Sprintf("%q is not a whole number", clip(s))
		}
		return ""
	}
	f.tidy = func(*Contract) {}
	return f
}

// listForm is how a list of names is written on the form.
type listForm struct {
	format func([]string) []string
	parse  func([]string) []string
}

var (
	// oneLine: a text area, one item per line.
	oneLine = listForm{
		format: func(items []string) []string { return []string{strings.Join(items, "\n")} },
		parse:  func(raw []string) []string { return lines(first(raw)) },
	}
	// commas: a one-line input, items separated by commas.
	commas = listForm{
		format: func(items []string) []string { return []string{strings.Join(items, ", ")} },
		parse: func(raw []string) []string {
			var out []string
			for _, p := range strings.Split(first(raw), ",") {
				if p = strings.TrimSpace(p); p != "" {
					out = append(out, p)
				}
			}
			return out
		},
	}
	// checked: checkboxes, one value per checked box.
	checked = listForm{
		format: func(items []string) []string { return items },
		parse:  func(raw []string) []string { return slices.Clone(raw) },
	}
)

// set is a field holding a set of case-insensitive names: at most rowCap of
// them, each a one-line value; Normalize sorts it and drops duplicates.
func set[T ~string](path, label string, ref func(*Contract) *[]T, rowCap int, form listForm) Field {
	f := base(path, label)
	f.get = func(c Contract) any { return *ref(&c) }
	f.format = func(c Contract) []string {
		var items []string
		for _, v := range *ref(&c) {
			items = append(items, string(v))
		}
		return form.format(items)
	}
	f.parse = func(c *Contract, raw []string) string {
		var out []T
		for _, s := range form.parse(raw) {
			out = append(out, T(s))
		}
		*ref(c) = out
		return ""
	}
	f.tidy = func(c *Contract) {
		p := ref(c)
		*p = mapSlice(*p, func(v T) T { return T(lower(string(v))) })
	}
	f.norm = func(c *Contract) { p := ref(c); *p = sortedSet(*p) }
	f.cut = func(c *Contract) { p := ref(c); *p = firstRows(*p, rowCap) }
	f.limits = []Limit{
		{Field: path, Rows: rowCap, counts: rows(func(c Contract) []T { return *ref(&c) })},
		{Field: path + "[]", Chars: MaxOneLineLen, texts: each(func(c Contract) []T { return *ref(&c) }, func(v T) string { return string(v) })},
	}
	return f
}

// table is a field holding rows of T, written on the form as a text area
// with one row per line: row renders a row as its line, parseRow reads a
// line (1-based n) into a row, says whether to keep it, and what is wrong
// with it. The problems of all lines are reported together, shortened by
// someLines.
// tidy, norm and limits are the rows' own.
type table[T any] struct {
	path, label string
	ref         func(*Contract) *[]T
	rowCap      int
	row         func(T) string
	parseRow    func(n int, line string) (r T, keep bool, problems []string)
	tidyRow     func(T) T
	compare     func(a, b T) int
	normRow     func(T) T // optional: Normalize's work inside a row
	cutRow      func(T) T
	parts       []Limit // the caps of the rows' parts ("signals[].name")
}

func (t table[T]) field() Field {
	f := base(t.path, t.label)
	ref := t.ref
	f.get = func(c Contract) any { return *ref(&c) }
	f.format = func(c Contract) []string {
		var ls []string
		for _, r := range *ref(&c) {
			ls = append(ls, t.row(r))
		}
		return []string{strings.Join(ls, "\n")}
	}
	f.parse = func(c *Contract, raw []string) string {
		var out []T
		var bad []string
		for i, l := range lines(first(raw)) {
			r, keep, problems := t.parseRow(i+1, l)
			bad = append(bad, problems...)
			if keep {
				out = append(out, r)
			}
		}
		*ref(c) = out
		return someLines(bad)
	}
	f.tidy = func(c *Contract) { p := ref(c); *p = mapSlice(*p, t.tidyRow) }
	f.norm = func(c *Contract) {
		p := ref(c)
		if t.normRow != nil {
			for i := range *p {
				(*p)[i] = t.normRow((*p)[i])
			}
		}
		slices.SortFunc(*p, t.compare)
	}
	f.cut = func(c *Contract) {
		p := ref(c)
		*p = firstRows(*p, t.rowCap)
		if t.cutRow != nil {
			for i := range *p {
				(*p)[i] = t.cutRow((*p)[i])
			}
		}
	}
	f.limits = append([]Limit{{Field: t.path, Rows: t.rowCap, counts: rows(func(c Contract) []T { return *ref(&c) })}}, t.parts...)
	return f
}

func first(raw []string) string {
	if len(raw) == 0 {
		return ""
	}
	return raw[0]
}

// lines splits a text area into its non-empty trimmed lines.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func splitPipes(l string) []string {
	parts := strings.Split(l, "|")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// clip shortens a value quoted in a message: the field itself keeps the
// whole input.
func clip(s string) string {
	const most = 40
	if r := []rune(s); len(r) > most {
		return string(r[:most]) + "…"
	}
	return s
}

// someLines keeps a form's list of per-line problems short: the first few,
// and how many more. A pasted list of thousands of bad lines gets a short
// answer.
func someLines(bad []string) string {
	const shown = 5
	if len(bad) == 0 {
		return ""
	}
	if len(bad) <= shown {
		return strings.Join(bad, "; ")
	}
	return strings.Join(bad[:shown], "; ") + fmt.Sprintf("; and %d more lines", len(bad)-shown)
}
