package web

import (
	"html"
	"net/http"
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TestValidationOutageIsNotAFieldError: when the database cannot answer the
// contract's lookups (is this owner a portal user? is this namespace held?),
// the form keeps the input and says the checks could not run (503); it
// never tells the user that an owner "does not exist" or a namespace is
// "not available", and nothing is stored.
func TestValidationOutageIsNotAFieldError(t *testing.T) {
	h := newHarness(t, false)
	owner := h.signIn("owner.red")
	con := workflow.ExampleContract()
	// Not a demo user or mapped group: the form must ask the database.
	con.CostOwner = "someone.new@example.test"
	form := formValues(formFromContract(con))

	w := openDBWatch(t, h)
	w.exec(t, `ALTER TABLE users RENAME TO users_away`)
	resp, body := h.postAs(owner, "/teams/red/connections", form)
	w.exec(t, `ALTER TABLE users_away RENAME TO users`)
	body = html.UnescapeString(body)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("create during an outage = %d, want 503\n%.2000s", resp.StatusCode, body)
	}
	if !strings.Contains(body, "could not check this request") || !strings.Contains(body, "someone.new@example.test") {
		t.Errorf("the page does not say the checks could not run, or lost the input:\n%.3000s", body)
	}
	if strings.Contains(body, "is not a portal user") || strings.Contains(body, "not available") || strings.Contains(body, `data-testid="form-errors"`) {
		t.Errorf("an outage is reported as a field error:\n%.3000s", body)
	}
	var n int
	if err := w.raw.QueryRow(`SELECT count(*) FROM connections`).Scan(&n); err != nil || n != 0 {
		t.Errorf("connections stored = %d (%v), want 0", n, err)
	}

	// With the database back, the same form is accepted.
	if resp, body := h.postAs(owner, "/teams/red/connections", form); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("create after the outage = %d\n%.2000s", resp.StatusCode, body)
	}
}
