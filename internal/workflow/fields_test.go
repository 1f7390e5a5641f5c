package workflow

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The field table (fields.go) is the one place a contract field is listed.
// These tests walk its rows, so a new row is covered by them without
// another edit; TestContractFieldsCoverEveryJSONField (contract_test.go)
// fails when a field of the Contract type has no row.

// TestEveryRowIsAContractField: the reverse of
// TestContractFieldsCoverEveryJSONField: every row's path is a leaf of the
// Contract type's JSON, and no two rows share a path or a form key.
func TestEveryRowIsAContractField(t *testing.T) {
	leaves := map[string]bool{}
	var walk func(prefix string, tp reflect.Type)
	walk = func(prefix string, tp reflect.Type) {
		for f := range tp.Fields() {
			name := prefix + jsonName(f)
			if f.Type.Kind() == reflect.Struct {
				walk(name+".", f.Type)
			}
			leaves[name] = true
		}
	}
	walk("", reflect.TypeFor[Contract]())
	paths, keys := map[string]bool{}, map[string]bool{}
	for _, f := range Fields() {
		if !leaves[f.Path] {
			t.Errorf("row %s is not a field of Contract", f.Path)
		}
		if paths[f.Path] || keys[f.Key] {
			t.Errorf("row %s: path or form key %q repeated", f.Path, f.Key)
		}
		paths[f.Path], keys[f.Key] = true, true
	}
}

// TestEveryRowIsComplete: every row says all the form needs, and its
// fieldset is one run of rows (the form shows the groups in table order).
func TestEveryRowIsComplete(t *testing.T) {
	var groups []string
	for _, f := range Fields() {
		switch {
		case f.Key == "" || f.Label == "" || f.FormLabel == "" || f.Group == "":
			t.Errorf("row %s lacks its key, labels or group: %+v", f.Path, f)
		case f.Example == "":
			t.Errorf("row %s has no example value", f.Path)
		case f.Help == "" && f.Input != InputChecks:
			t.Errorf("row %s has no help", f.Path)
		case f.Input < InputNone || f.Input > InputChecks:
			t.Errorf("row %s has an unknown input %d", f.Path, f.Input)
		case f.Input == InputText && f.Lines <= 0:
			t.Errorf("row %s is a text area without lines", f.Path)
		case f.get == nil || f.format == nil || f.parse == nil || f.tidy == nil:
			t.Errorf("row %s lacks a codec", f.Path)
		}
		if f.Input == InputSelect || f.Input == InputChecks {
			if len(f.Choices) == 0 {
				t.Errorf("row %s offers no choices", f.Path)
			}
			for _, c := range f.Choices {
				if c.Label == "" || c.Label == c.Value {
					t.Errorf("row %s: choice %q has no label of its own", f.Path, c.Value)
				}
			}
		}
		if n := len(groups); n == 0 || groups[n-1] != f.Group {
			if slices.Contains(groups, f.Group) {
				t.Errorf("row %s: group %q is split", f.Path, f.Group)
			}
			groups = append(groups, f.Group)
		}
	}
}

// TestEveryRowRoundTripsThroughItsCodec: for every row, the form value of
// the example contract parses back to the same value; the row's example,
// set on an empty contract, parses without a syntax problem, survives a
// round trip through its form value, and is the only change Diff sees,
// under the row's label; FieldFor and FieldLabel find the row by its path.
func TestEveryRowRoundTripsThroughItsCodec(t *testing.T) {
	ex := ExampleContract()
	for _, f := range Fields() {
		t.Run(f.Path, func(t *testing.T) {
			var back Contract
			if msg := f.SetFormValue(&back, f.FormValue(ex)); msg != "" {
				t.Fatalf("the example contract's value %q: %s", f.FormValue(ex), msg)
			}
			if !reflect.DeepEqual(f.get(back), f.get(ex)) {
				t.Errorf("example contract: %q parses to %#v, want %#v", f.FormValue(ex), f.get(back), f.get(ex))
			}

			var c Contract
			if msg := f.SetFormValue(&c, []string{f.Example}); msg != "" {
				t.Fatalf("example %q: %s", f.Example, msg)
			}
			var again Contract
			if msg := f.SetFormValue(&again, f.FormValue(c)); msg != "" || again.Hash() != c.Hash() {
				t.Errorf("example %q: form value %q parses to %#v (%s)", f.Example, f.FormValue(c), f.get(again), msg)
			}
			d := Diff(Contract{}, c)
			if len(d) != 1 || d[0].Field != f.Path || d[0].Label != f.Label || d[0].New == "" {
				t.Errorf("example %q: Diff from the empty contract = %s, want only %s", f.Example, fmtChanges(d), f.Path)
			}
			if got, ok := FieldFor(f.Path); !ok || got.Path != f.Path {
				t.Errorf("FieldFor(%s) = %s, %v", f.Path, got.Path, ok)
			}
			if got := FieldLabel(f.Path); got != f.Label {
				t.Errorf("FieldLabel(%s) = %q, want %q", f.Path, got, f.Label)
			}
		})
	}
}

// richContract fills every field of the Contract type, found by
// reflection so that a new field is filled too: every list with three
// rows (every list of numbers with three numbers), every text with a
// distinct word, every number distinct and non-zero.
func richContract() Contract {
	var c Contract
	n := 0
	var fill func(v reflect.Value)
	fill = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.String:
			n++
			v.SetString("v" + strconv.Itoa(n))
		case reflect.Int:
			n++
			v.SetInt(int64(n))
		case reflect.Struct:
			for i := range v.NumField() {
				fill(v.Field(i))
			}
		case reflect.Slice:
			v.Set(reflect.MakeSlice(v.Type(), 3, 3))
			for i := range 3 {
				fill(v.Index(i))
			}
		}
	}
	fill(reflect.ValueOf(&c).Elem())
	return c.Normalize()
}

// TestRichContractRoundTripsThroughTheForm: a contract with every field
// and every list full survives the rows' codecs: the parts of a row, the
// numbers of a list and the rows of a list are each written back where
// they were read.
func TestRichContractRoundTripsThroughTheForm(t *testing.T) {
	rich := richContract()
	var got Contract
	for _, f := range Fields() {
		if msg := f.SetFormValue(&got, f.FormValue(rich)); msg != "" {
			t.Errorf("%s: %q: %s", f.Path, f.FormValue(rich), msg)
		}
	}
	if d := Diff(rich, got); len(d) > 0 || got.Normalize().Hash() != rich.Hash() {
		t.Errorf("the form changed the contract:\n%s", fmtChanges(d))
	}
	if len(rich.EgressAllowances[0].Ports) != 3 || rich.SlurmScope.QoS == "" || rich.Scheduling.FairShareWeight == 0 {
		t.Errorf("not every field is filled: %+v", rich)
	}
}

// TestEveryRowIsTidied: Normalize tidies every text the rows hold, through
// the rows: padding and \r\n never change a contract's hash.
func TestEveryRowIsTidied(t *testing.T) {
	ex := ExampleContract()
	for _, f := range Fields() {
		if f.Input == InputChecks || f.Input == InputSelect {
			continue // the browser sends a choice's value as it is
		}
		raw := f.FormValue(ex)
		padded := make([]string, len(raw))
		for i, r := range raw {
			padded[i] = "  " + strings.ReplaceAll(r, "\n", " \r\n ") + "\t"
		}
		c := ex
		if msg := f.SetFormValue(&c, padded); msg != "" {
			t.Errorf("%s: padded %q: %s", f.Path, padded, msg)
			continue
		}
		if c.Normalize().Hash() != ex.Hash() {
			t.Errorf("%s: padding %q changes the contract: %s", f.Path, padded, fmtChanges(Diff(ex, c)))
		}
	}
}

// TestFieldForBlamesTheRow: every path validation and the caps report
// belongs to a row.
func TestFieldForBlamesTheRow(t *testing.T) {
	for _, path := range []string{"slurm_scope", "scheduling.guaranteed[3].count", "egress_allowances[0].ports[2]", "workload_types[1]", "namespaces[0]"} {
		f, ok := FieldFor(path)
		root, _, _ := strings.Cut(path, "[")
		if !ok || (f.Path != root && !strings.HasPrefix(f.Path, root+".")) {
			t.Errorf("FieldFor(%s) = %s, %v", path, f.Path, ok)
		}
	}
	for _, l := range Limits {
		if _, ok := FieldFor(strings.ReplaceAll(l.Field, "[]", "[0]")); !ok {
			t.Errorf("cap %s belongs to no row", l.Field)
		}
	}
	if _, ok := FieldFor("nope"); ok {
		t.Error("FieldFor found a row for an unknown path")
	}
}
