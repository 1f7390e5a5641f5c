package usage

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestStatementCSVParsesBack(t *testing.T) {
	in := goldenInput(t)
	in.Policy = Policy{Method: SplitByGuarantee, OverheadBasisPoints: 1250}
	cb, err := Charge(in)
	if err != nil {
		t.Fatal(err)
	}
	gap := Missing{Cluster: "demo", From: day0.Add(5 * time.Hour), To: day0.Add(7 * time.Hour), Reason: "portal down, with \"quotes\", commas"}
	far := Missing{Cluster: "demo", From: day0.AddDate(0, 2, 0), To: day0.AddDate(0, 2, 1), Reason: "another month"}
	st := StatementOf(cb, "red", []Missing{gap, far}, true, day0)
	var buf bytes.Buffer
	if err := st.WriteCSV(&buf); err != nil {
		t.Fatal(err)
	}
	rows, err := ParseStatementCSV(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var sum, total Money
	var missing []string
	for _, r := range rows {
		if r["team"] != "red" || r["currency"] != "USD" || r["month"] != "2026-11" {
			t.Errorf("row %v", r)
		}
		switch r["item"] {
		case ItemUsage, ItemIdle, ItemOverhead:
			m, err := ParseAmount(r["cost"], r["currency"])
			if err != nil {
				t.Fatal(err)
			}
			sum = sum.Add(m)
		case ItemTotal:
			total, _ = ParseAmount(r["cost"], r["currency"])
			if !strings.Contains(r["note"], "demo prices") || !strings.Contains(r["note"], "projection") {
				t.Errorf("total row note %q", r["note"])
			}
		case ItemMissing:
			missing = append(missing, r["note"])
		}
	}
	if sum != total || total.Amount() != cb.Team("red").Total.Amount() {
		t.Errorf("rows add to %v, total row %v, chargeback %v", sum, total, cb.Team("red").Total)
	}
	if len(missing) != 1 || !strings.Contains(missing[0], gap.Reason) || !strings.Contains(missing[0], "2026-11-01T05:00:00Z") {
		t.Errorf("missing data rows %q", missing)
	}
	if rows[0]["guaranteed_gpu_hours"] != "864.000" || rows[0]["borrowed_neuroncore_hours"] != "0.000" || rows[0]["cpu_hours"] != "6912.000" {
		t.Errorf("usage row %v", rows[0])
	}

	// The JSON parses back to the same statement, and the hash is of it.
	var back Statement
	if err := json.Unmarshal(st.JSON(), &back); err != nil {
		t.Fatal(err)
	}
	if string(back.JSON()) != string(st.JSON()) || back.Hash() != HashBytes(st.JSON()) {
		t.Error("the JSON does not round-trip")
	}
	if _, err := ParseStatementCSV(strings.NewReader("a,b\n1,2\n")); err == nil {
		t.Error("a CSV with another header parsed")
	}
}
