package workflow

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// Canonical returns the contract's canonical JSON: c normalized, fields in
// the order of the Contract type, no insignificant whitespace, no HTML
// escaping. Equal contracts have equal bytes, however they were written.
// Export indents it (json.Indent) for people; the hash is of these bytes.
func (c Contract) Canonical() []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	// A Contract is strings, ints and slices of them: encoding cannot fail.
	if err := enc.Encode(c.Normalize()); err != nil {
		panic("workflow: encoding a contract: " + err.Error())
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// Hash is the hex SHA-256 of Canonical: the identity of a contract version
// that approvals and reviews bind to.
func (c Contract) Hash() string {
	sum := sha256.Sum256(c.Canonical())
	return hex.EncodeToString(sum[:])
}

// DecodeContract decodes one contract from JSON strictly, for import: the
// input must be a single object; unknown fields, fields spelled in another
// case and repeated fields are refused (encoding/json alone would accept the
// last two silently), and so is anything after the object. The contract is
// returned as written, not normalized, so that Validate's paths match the
// file.
func DecodeContract(data []byte) (Contract, error) {
	if err := checkKeys(data); err != nil {
		return Contract{}, fmt.Errorf("contract: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c Contract
	if err := dec.Decode(&c); err != nil {
		return Contract{}, fmt.Errorf("contract: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Contract{}, errors.New("contract: unexpected data after the contract object")
	}
	return c, nil
}

// jsonKeys are the exact JSON names of every field of Contract and the types
// inside it.
var jsonKeys = func() map[string]bool {
	keys := map[string]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return
		}
		for f := range t.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			keys[name] = true
			walk(f.Type)
		}
	}
	walk(reflect.TypeFor[Contract]())
	return keys
}()

// checkKeys walks the JSON tokens and refuses what encoding/json would let
// through: a top level that is not an object, keys that match a field only
// case-insensitively, repeated keys, and trailing data.
func checkKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return errors.New("a contract must be a JSON object")
	}
	type frame struct {
		object  bool
		wantKey bool
		seen    map[string]bool
	}
	stack := []frame{{object: true, wantKey: true, seen: map[string]bool{}}}
	valueDone := func() {
		if top := len(stack) - 1; top >= 0 && stack[top].object {
			stack[top].wantKey = true
		}
	}
	for len(stack) > 0 {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		top := &stack[len(stack)-1]
		if top.object && top.wantKey {
			key, ok := tok.(string)
			if !ok { // the decoder allows only '}' here
				stack = stack[:len(stack)-1]
				valueDone()
				continue
			}
			switch {
			case !jsonKeys[key]:
				return fmt.Errorf("unknown field %q", key)
			case top.seen[key]:
				return fmt.Errorf("field %q appears twice", key)
			}
			top.seen[key] = true
			top.wantKey = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{object: true, wantKey: true, seen: map[string]bool{}})
		case json.Delim('['):
			stack = append(stack, frame{})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueDone()
		default:
			valueDone()
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the contract object")
	}
	return nil
}

// Change is one field that differs between two contract versions, rendered
// for people.
type Change struct {
	Field string // the path, as in FieldError.Field
	Label string
	Old   string
	New   string
}

// Diff lists the fields that differ between two versions, in form order;
// nil when the contracts are equal (have the same Hash). Both are
// normalized first, so a change of case, spacing or order is no change.
func Diff(older, newer Contract) []Change {
	older, newer = older.Normalize(), newer.Normalize()
	var out []Change
	for _, f := range contractFields {
		if reflect.DeepEqual(f.get(older), f.get(newer)) {
			continue
		}
		out = append(out, Change{Field: f.Path, Label: f.Label, Old: f.show(older), New: f.show(newer)})
	}
	return out
}
