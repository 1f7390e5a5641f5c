package workflow

import (
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// contractPaths walks the Contract type and returns every text path (a
// string, or a slice of strings as "path[]") and every list path (a slice),
// as FieldError names them.
func contractPaths() (texts, lists []string) {
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for f := range t.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			path := prefix + name
			ft := f.Type
			switch ft.Kind() {
			case reflect.String:
				texts = append(texts, path)
			case reflect.Struct:
				walk(ft, path+".")
			case reflect.Slice:
				lists = append(lists, path)
				switch ft.Elem().Kind() {
				case reflect.String:
					texts = append(texts, path+"[]")
				case reflect.Struct:
					walk(ft.Elem(), path+"[].")
				}
			}
		}
	}
	walk(reflect.TypeFor[Contract](), "")
	return texts, lists
}

// TestLimitsCoverEveryTextAndList: a new text or list field of the contract
// must get a cap in the table, or this fails.
func TestLimitsCoverEveryTextAndList(t *testing.T) {
	texts, lists := contractPaths()
	for _, p := range texts {
		if l, ok := LimitOf(p); !ok || l.Chars <= 0 || l.texts == nil {
			t.Errorf("text %s has no character cap in Limits", p)
		}
	}
	for _, p := range lists {
		if l, ok := LimitOf(p); !ok || l.Rows <= 0 || l.counts == nil {
			t.Errorf("list %s has no row cap in Limits", p)
		}
	}
	if n := len(texts) + len(lists); n != len(Limits) {
		t.Errorf("Limits has %d rows, the contract %d texts and lists", len(Limits), n)
	}
}

// at returns the value a table path names in c, creating the first row of
// every list on the way ("signals[].name" is signals[0].name).
func at(t *testing.T, c *Contract, path string) reflect.Value {
	t.Helper()
	v := reflect.ValueOf(c).Elem()
	for part := range strings.SplitSeq(path, ".") {
		name, row := strings.CutSuffix(part, "[]")
		found := false
		for i := range v.NumField() {
			if n, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ","); n == name {
				v, found = v.Field(i), true
				break
			}
		}
		if !found {
			t.Fatalf("%s: no field %s", path, name)
		}
		if row {
			if v.Len() == 0 {
				v.Set(reflect.Append(v, reflect.New(v.Type().Elem()).Elem()))
			}
			v = v.Index(0)
		}
	}
	return v
}

// setRows gives the list at path n distinct rows.
func setRows(t *testing.T, c *Contract, path string, n int) {
	t.Helper()
	v := at(t, c, path)
	s := reflect.MakeSlice(v.Type(), n, n)
	for i := range n {
		e := s.Index(i)
		switch e.Kind() {
		case reflect.String:
			e.SetString("row-" + strconv.Itoa(i))
		case reflect.Int:
			e.SetInt(int64(1000 + i))
		case reflect.Struct: // distinct by their first field
			e.Field(0).SetString("row-" + strconv.Itoa(i))
		}
	}
	v.Set(s)
}

// TestLimitErrorsAtAndOverEachCap sets each field to its cap, which
// passes, and one over, which LimitErrors and Validate refuse with the same
// message. Texts are written in a two-byte character: the caps count
// characters, not bytes.
func TestLimitErrorsAtAndOverEachCap(t *testing.T) {
	for _, l := range Limits {
		t.Run(l.Field, func(t *testing.T) {
			path := rowPath(l.Field, 0)
			for _, over := range []bool{false, true} {
				c := ExampleContract()
				n := l.Chars + l.Rows
				if over {
					n++
				}
				if l.Rows > 0 {
					setRows(t, &c, l.Field, n)
				} else {
					at(t, &c, l.Field).SetString(strings.Repeat("é", n))
				}
				got := c.LimitErrors().Get(path)
				if !over {
					if got != "" {
						t.Errorf("at the cap (%d): %q", n, got)
					}
					continue
				}
				want := "is too long (" + strconv.Itoa(n) + " characters): at most " + strconv.Itoa(l.Chars)
				if l.Rows > 0 {
					want = "has too many rows (" + strconv.Itoa(n) + "): at most " + strconv.Itoa(l.Rows)
				}
				if got != want {
					t.Errorf("over the cap: LimitErrors()[%s] = %q, want %q", path, got, want)
				}
				if v := c.Validate(testEnv()).Get(path); v != want {
					t.Errorf("over the cap: Validate()[%s] = %q, want %q", path, v, want)
				}
			}
		})
	}
}

// TestLimitErrorsCheckOnlyTheRowsUnderTheCap: a list of thousands of
// over-long rows gets one message for the rows, and messages for at most
// the first rows up to the cap.
func TestLimitErrorsCheckOnlyTheRowsUnderTheCap(t *testing.T) {
	c := ExampleContract()
	long := strings.Repeat("x", MaxRowTextLen+1)
	for range 5000 {
		c.Signals = append(c.Signals, Signal{Name: "s", Owner: "owner.red@example.test", Response: long})
	}
	fe := c.LimitErrors()
	if fe.Get("signals") == "" {
		t.Error("no message for 5001 signals")
	}
	if len(fe) > 1+MaxSignals {
		t.Errorf("%d messages, want at most %d", len(fe), 1+MaxSignals)
	}
}

// TestValidateKeepsFormOrderWithLimitErrors: a cap's message sits among
// the other messages in form order.
func TestValidateKeepsFormOrderWithLimitErrors(t *testing.T) {
	c := ExampleContract()
	c.AccountID = "1"
	setRows(t, &c, "namespaces", MaxNamespaces+1)
	c.ReviewCadenceDays = 1
	c.Team = "red"
	var got []string
	for _, fe := range c.Validate(ValidationEnv{Now: testNow}) {
		got = append(got, fe.Field)
	}
	ai, ni, ri := slices.Index(got, "account_id"), slices.Index(got, "namespaces"), slices.Index(got, "review_cadence_days")
	if ai < 0 || ni < 0 || ri < 0 || ai >= ni || ni >= ri {
		t.Errorf("fields %v: want account_id, namespaces, review_cadence_days in this order", got)
	}
}

// TestLargestContractSize builds the largest contract the caps allow, every
// text at its cap in the character JSON spells longest (a control
// character, \u0001: six bytes), every list at its row cap, and checks its
// canonical JSON against MaxContractJSON, the bound the README gives.
func TestLargestContractSize(t *testing.T) {
	var c Contract
	for _, l := range Limits {
		if l.Rows > 0 && !strings.Contains(l.Field, "[]") {
			setRows(t, &c, l.Field, l.Rows)
		}
	}
	for i := range c.EgressAllowances {
		for j := range MaxPortsPerEgress {
			c.EgressAllowances[i].Ports = append(c.EgressAllowances[i].Ports, 65535-j)
		}
	}
	// Fill every text of every row, distinct so that Normalize keeps them.
	var fill func(v reflect.Value, path string)
	fill = func(v reflect.Value, path string) {
		switch v.Kind() {
		case reflect.String:
			l, ok := LimitOf(path)
			if !ok {
				t.Fatalf("no limit for %s", path)
			}
			v.SetString(strings.Repeat("\x01", l.Chars))
		case reflect.Struct:
			for i := range v.NumField() {
				name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
				p := name
				if path != "" {
					p = path + "." + name
				}
				fill(v.Field(i), p)
			}
		case reflect.Slice:
			for i := range v.Len() {
				fill(v.Index(i), path+"[]")
				if e := v.Index(i); e.Kind() == reflect.String {
					e.SetString(strconv.Itoa(i) + e.String()[len(strconv.Itoa(i)):])
				} else if e.Kind() == reflect.Struct {
					e.Field(0).SetString(strconv.Itoa(i) + e.Field(0).String()[len(strconv.Itoa(i)):])
				}
			}
		}
	}
	fill(reflect.ValueOf(&c).Elem(), "")
	if fe := c.LimitErrors(); len(fe) > 0 {
		t.Fatalf("the largest contract is over a cap: %v", fe)
	}
	n := len(c.Canonical())
	t.Logf("largest contract: %d bytes of canonical JSON", n)
	if n > MaxContractJSON {
		t.Errorf("the largest contract is %d bytes of JSON, over MaxContractJSON (%d)", n, MaxContractJSON)
	}
	if n < MaxContractJSON/2 {
		t.Errorf("the largest contract is %d bytes of JSON: MaxContractJSON (%d) overstates it", n, MaxContractJSON)
	}
}

// TestValidateChecksOnlyTheRowsUnderTheCap: the per-row rules, some of
// which ask the database, see at most the capped rows of a huge list.
func TestValidateChecksOnlyTheRowsUnderTheCap(t *testing.T) {
	c := ExampleContract()
	setRows(t, &c, "namespaces", 50000)
	asked := 0
	env := testEnv()
	env.NamespaceTaken = func(string) bool { asked++; return false }
	fe := c.Validate(env)
	if fe.Get("namespaces") == "" {
		t.Error("no message for 50000 namespaces")
	}
	if asked > MaxNamespaces {
		t.Errorf("NamespaceTaken asked %d times, want at most %d", asked, MaxNamespaces)
	}
}

// TestDocsListEveryLimit: docs/contracts.md's table of limits names every
// field of Limits with its cap, and the version and size bounds.
func TestDocsListEveryLimit(t *testing.T) {
	b, err := os.ReadFile("../../docs/contracts.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(b), "\n### Limits\n")
	section, _, _ = strings.Cut(section, "\n## ")
	var table []string
	for line := range strings.SplitSeq(section, "\n") {
		if strings.HasPrefix(line, "| `") || strings.HasPrefix(line, "| every other text") {
			table = append(table, line)
		}
	}
	for _, l := range Limits {
		want := strings.TrimPrefix(l.What(), "at most ")
		found := false
		for _, line := range table {
			if strings.Contains(line, "`"+l.Field+"`") {
				found = true
				if !strings.Contains(line, "| "+want) {
					t.Errorf("docs/contracts.md: %s is listed without its cap %q: %s", l.Field, want, line)
				}
			}
		}
		if !found && l.Chars == MaxOneLineLen {
			for _, line := range table {
				if strings.HasPrefix(line, "| every other text") {
					found = strings.Contains(line, "| "+strconv.Itoa(MaxOneLineLen)+" characters")
				}
			}
		}
		if !found {
			t.Errorf("README's table of limits lacks %s (%s)", l.Field, l.What())
		}
	}
	for _, want := range []string{"At most " + strconv.Itoa(MaxVersions) + " versions per connection", "at most " + strconv.Itoa(MaxContractJSON>>10) + " KiB"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("README lacks %q", want)
		}
	}
}
