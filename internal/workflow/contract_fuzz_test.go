package workflow

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// FuzzDecodeAndValidate feeds arbitrary bytes to the import path. Whatever
// the input: decoding and validating never panic; a decoded contract's
// canonical JSON decodes again to the same bytes and hash; Normalize is
// idempotent; and normalizing a valid contract keeps it valid (what is
// validated is what is stored).
func FuzzDecodeAndValidate(f *testing.F) {
	seeds := []Contract{ExampleContract(), slurmContract(), unifiedContract()}
	restricted := ExampleContract()
	restricted.DataClassification = DataRestricted
	restricted.EndDate = "2027-06-30"
	restricted.EgressAllowances = append(restricted.EgressAllowances, Egress{"10.20.0.0/16", []int{443, 8443}, "Registry."})
	seeds = append(seeds, restricted)
	for _, c := range seeds {
		f.Add(c.Canonical())
		f.Add([]byte(indent(string(c.Canonical()))))
	}
	valid := string(ExampleContract().Canonical())
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `"x"`, `{"team":"red","team":"blue"}`, `{"Team":"red"}`,
		`{"team":"red"} {}`, valid[:len(valid)/3], valid + `x`,
		`{"review_cadence_days":1e400}`, `{"scheduling":{"guaranteed":[{"count":-9223372036854775808}]}}`,
		`{"team":"\u0000\ud800 Red\r\n"}`, "{\"team\":\"bad\xff\"}",
		`{"namespaces":["hyperpod-ns-red","HYPERPOD-NS-RED"," "]}`,
		`{"egress_allowances":[{"destination":"10.0.0.1/8","ports":[0,65536,443,443]}]}`,
		`{"signals":[{"name":"a"},{"name":"A"}],"slurm_scope":{"qos":""}}`,
		`{"end_date":"2026-02-30","data_classification":"restricted"}`,
		strings.Repeat(`{"signals":[`, 50),
	} {
		f.Add([]byte(s))
	}
	env := ValidationEnv{
		Now:            testNow,
		OwnerExists:    func(email string) bool { return strings.HasSuffix(email, "@example.test") },
		NamespaceTaken: func(ns string) bool { return ns == "blue-shared" },
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeContract(data)
		if err != nil {
			if !reflect.DeepEqual(c, Contract{}) {
				t.Fatalf("DecodeContract returned a contract with its error %v", err)
			}
			return
		}
		errs := c.Validate(env)

		b1 := c.Canonical()
		d, err := DecodeContract(b1)
		if err != nil {
			t.Fatalf("canonical JSON does not decode: %v\n%s", err, b1)
		}
		if b2 := d.Canonical(); !bytes.Equal(b1, b2) {
			t.Fatalf("canonical JSON changed in a round trip:\n%s\n%s", b1, b2)
		}
		if d.Hash() != c.Hash() {
			t.Fatal("hash changed in a round trip")
		}
		if diff := Diff(c, d); len(diff) != 0 {
			t.Fatalf("Diff after a round trip = %+v", diff)
		}
		n := c.Normalize()
		if again := n.Normalize(); !reflect.DeepEqual(again, n) {
			t.Fatalf("Normalize is not idempotent:\n%+v\n%+v", n, again)
		}
		if len(errs) == 0 {
			if nerrs := n.Validate(env); len(nerrs) != 0 {
				t.Fatalf("valid contract is invalid once normalized: %v\n%s", nerrs, b1)
			}
		}
	})
}
