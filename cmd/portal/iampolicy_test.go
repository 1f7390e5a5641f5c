package main

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
)

func TestIAMPolicyCoversEveryActionAndNarrowsResources(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"iam-policy", "--account", "111122223333", "--region", "us-east-1"}, func(string) string { return "" }, &out, &out); err != nil {
		t.Fatal(err)
	}
	var doc policyDoc
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	var all []string
	for _, st := range doc.Statement {
		all = append(all, st.Action...)
		for _, r := range st.Resource {
			if strings.ContainsAny(r, "{}%") || strings.Contains(r, "::us-east-1") {
				t.Errorf("statement %s: resource %q is not filled in for the account", st.Sid, r)
			}
			if r == "*" && st.Sid != "ListAndLookup" {
				t.Errorf("statement %s is not narrowed: %v", st.Sid, st.Resource)
			}
		}
	}
	for _, a := range awsprov.Actions {
		if !slices.Contains(all, a) {
			t.Errorf("policy lacks %s", a)
		}
	}
	for _, st := range doc.Statement {
		if slices.Contains(st.Action, "iam:PassRole") && st.Condition["StringEquals"]["iam:PassedToService"] == nil {
			t.Errorf("iam:PassRole without an iam:PassedToService condition: %+v", st)
		}
		if strings.HasPrefix(st.Sid, "Unscoped") {
			t.Errorf("statement %s: a service without a resource scope in serviceScopes", st.Sid)
		}
	}
	if len(all) != len(awsprov.Actions) {
		t.Errorf("policy has %d actions, the steps use %d", len(all), len(awsprov.Actions))
	}
	for _, bad := range [][]string{{"iam-policy", "--account", "1"}, {"iam-policy", "--account", "123", "--region", "us-east-1"}, {"iam-policy", "--account", "111122223333", "--region", "Mars"}} {
		if err := run(context.Background(), bad, func(string) string { return "" }, &out, &out); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}
