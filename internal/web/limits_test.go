package web

import (
	"context"
	"errors"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TestFormHelpShowsEachCap: every cap of workflow.Limits that is not the
// one-line backstop is stated in its field's help on the form, with its
// number.
func TestFormHelpShowsEachCap(t *testing.T) {
	h := newHarness(t, false)
	owner := h.signIn("owner.red")
	_, body := h.get(owner.c, "/teams/red/connections/new")
	spans := map[string]string{}
	for _, m := range regexp.MustCompile(`data-testid="limit-([a-z_]+)">([^<]*)<`).FindAllStringSubmatch(body, -1) {
		spans[m[1]] = html.UnescapeString(m[2])
	}
	checked := 0
	for _, l := range workflow.Limits {
		if l.Rows == 0 && l.Chars == workflow.MaxOneLineLen {
			continue
		}
		name, _ := formField(strings.Replace(l.Field, "[]", "[0]", 1))
		if name == "workload_types" { // checkboxes: the form offers each type once
			continue
		}
		n := strconv.Itoa(l.Chars + l.Rows)
		if got := spans[name]; !strings.Contains(strings.ToLower(got), "at most "+n) {
			t.Errorf("%s: the help of form field %s says %q, want its cap %s", l.Field, name, got, n)
		}
		checked++
	}
	if checked < 10 {
		t.Errorf("checked %d caps", checked)
	}
}

// overCap is a form change that puts one field over its cap.
var overCap = []struct {
	name, field string // the form field that gets the message
	set         func(v *views.ContractValues)
	want        string
}{
	{"purpose", "business_purpose", func(v *views.ContractValues) {
		v.Set("business_purpose", strings.Repeat("é", workflow.MaxTextLen+1))
	}, fmt.Sprintf("at most %d", workflow.MaxTextLen)},
	{"criteria", "decommission_criteria", func(v *views.ContractValues) {
		v.Set("decommission_criteria", strings.Repeat("c", 900<<10))
	}, fmt.Sprintf("at most %d", workflow.MaxTextLen)},
	{"account id", "account_id", func(v *views.ContractValues) {
		v.Set("account_id", strings.Repeat("1", workflow.MaxOneLineLen+1))
	}, fmt.Sprintf("at most %d", workflow.MaxOneLineLen)},
	{"role arn", "access_role_arn", func(v *views.ContractValues) {
		v.Set("access_role_arn", "arn:aws:iam::111122223333:role/"+strings.Repeat("r", workflow.MaxARNLen))
	}, fmt.Sprintf("at most %d", workflow.MaxARNLen)},
	{"namespaces", "namespaces", func(v *views.ContractValues) {
		var ns []string
		for i := range workflow.MaxNamespaces + 1 {
			ns = append(ns, "ns-"+strconv.Itoa(i))
		}
		v.Set("namespaces", strings.Join(ns, "\n"))
	}, fmt.Sprintf("at most %d", workflow.MaxNamespaces)},
	{"signals", "signals", func(v *views.ContractValues) {
		v.Set("signals", strings.Repeat("GPU idle | owner.red@example.test | shrink\n", workflow.MaxSignals+1))
	}, fmt.Sprintf("at most %d", workflow.MaxSignals)},
	{"signal response", "signals", func(v *views.ContractValues) {
		v.Set("signals", "GPU idle | owner.red@example.test | "+strings.Repeat("r", workflow.MaxRowTextLen+1))
	}, fmt.Sprintf("at most %d", workflow.MaxRowTextLen)},
	{"egress reason", "egress", func(v *views.ContractValues) {
		v.Set("egress", "10.20.0.0/16 | 443 | "+strings.Repeat("r", workflow.MaxRowTextLen+1))
	}, fmt.Sprintf("at most %d", workflow.MaxRowTextLen)},
	{"priority classes", "priority_classes", func(v *views.ContractValues) {
		v.Set("priority_classes", strings.TrimSuffix(strings.Repeat("training, ", workflow.MaxPriorityClasses+1), ", "))
	}, fmt.Sprintf("at most %d", workflow.MaxPriorityClasses)},
}

// TestOverCapIsRefusedWithTheInputKept: a value over its cap is refused on
// the form, for a new draft and for an edit, saved or submitted: 422, a
// message beside the field, the input kept, nothing stored.
func TestOverCapIsRefusedWithTheInputKept(t *testing.T) {
	h := newHarness(t, false)
	owner := h.signIn("owner.red")
	ctx := context.Background()
	// An existing draft to edit: version 1.
	if resp, _ := h.postAs(owner, "/teams/red/connections", formValues(formFromContract(workflow.ExampleContract()))); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("create = %d", resp.StatusCode)
	}
	for _, tc := range overCap {
		for _, intent := range []string{"save", "submit"} {
			for _, path := range []string{"/teams/red/connections", "/connections/1"} {
				t.Run(tc.name+"/"+intent+path, func(t *testing.T) {
					v := formFromContract(workflow.ExampleContract())
					tc.set(&v)
					f := formValues(v)
					f.Set("intent", intent)
					f.Set("base_version", "1")
					resp, body := h.postAs(owner, path, f)
					if resp.StatusCode != http.StatusUnprocessableEntity {
						t.Fatalf("POST = %d, want 422", resp.StatusCode)
					}
					m := regexp.MustCompile(`data-testid="error-` + tc.field + `">([^<]*)<`).FindStringSubmatch(body)
					if m == nil || !strings.Contains(html.UnescapeString(m[1]), tc.want) {
						t.Errorf("message beside %s = %v, want %q", tc.field, m, tc.want)
					}
					if raw := f.Get(tc.field); !strings.Contains(html.UnescapeString(body), raw) {
						t.Errorf("the input of %s is not kept", tc.field)
					}
					rows, _, err := h.db.ListConnections(ctx, store.ListFilter{}, 0, 10)
					if err != nil || len(rows) != 1 || rows[0].CurrentVersion != 1 || rows[0].State != workflow.StateDraft {
						t.Errorf("after a refused POST: %+v, %v; want only draft 1 at version 1", rows, err)
					}
				})
			}
		}
	}
}

// TestManyBadLinesGetAShortAnswer: a pasted list of thousands of malformed
// lines gets a short message.
func TestManyBadLinesGetAShortAnswer(t *testing.T) {
	v := formFromContract(workflow.ExampleContract())
	v.Set("signals", strings.Repeat("no pipes here\n", 20000))
	_, errs := contractFromForm(v)
	if msg := errs["signals"]; len(msg) > 1000 || !strings.Contains(msg, "and 19995 more lines") {
		t.Errorf("signals message is %d bytes: %.200q", len(msg), msg)
	}
}

// TestMessagesQuoteAShortPartOfTheInput: a message quotes at most a short
// part of a huge malformed value (the field keeps all of it).
func TestMessagesQuoteAShortPartOfTheInput(t *testing.T) {
	v := formFromContract(workflow.ExampleContract())
	v.Set("fair_share_weight", strings.Repeat("x", 100000))
	v.Set("guaranteed", "ml.p5.48xlarge "+strings.Repeat("y", 100000))
	v.Set("egress", "10.20.0.0/16 | "+strings.Repeat("z", 100000)+" | reason")
	_, errs := contractFromForm(v)
	for _, f := range []string{"fair_share_weight", "guaranteed", "egress"} {
		if msg := errs[f]; msg == "" || len(msg) > 200 {
			t.Errorf("%s: message of %d bytes: %.100q", f, len(msg), msg)
		}
	}
}

// TestVersionLimitOnTheForm: at workflow.MaxVersions the edit form says so,
// keeps the input and saves nothing.
func TestVersionLimitOnTheForm(t *testing.T) {
	h := newHarness(t, false)
	owner := h.signIn("owner.red")
	ctx := context.Background()
	if resp, _ := h.postAs(owner, "/teams/red/connections", formValues(formFromContract(workflow.ExampleContract()))); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("create = %d", resp.StatusCode)
	}
	conn, err := h.db.Connection(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	by := workflow.Actor{ID: conn.RequesterID, Email: conn.RequesterEmail}
	c := workflow.ExampleContract()
	for v := 1; v < workflow.MaxVersions; v++ {
		c.ReviewCadenceDays = 7 + v
		if _, _, err := h.db.SaveContract(ctx, 1, v, c, by, h.srv.opts.Now()); err != nil {
			t.Fatalf("save %d: %v", v+1, err)
		}
	}
	v := formFromContract(workflow.ExampleContract())
	v.Set("business_purpose", "A purpose worth keeping: fine-tune the ranking models.")
	f := formValues(v)
	f.Set("base_version", strconv.Itoa(workflow.MaxVersions))
	resp, body := h.postAs(owner, "/connections/1", f)
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("save at the cap = %d, want 409", resp.StatusCode)
	}
	for _, want := range []string{"Nothing was saved", strconv.Itoa(workflow.MaxVersions) + " versions", "withdraw this request", "file a new one", v.Get("business_purpose")} {
		if !strings.Contains(html.UnescapeString(body), want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	// The edit form says so before anyone types.
	if _, body := h.get(owner.c, "/connections/1/edit"); !strings.Contains(body, `data-testid="form-notice"`) || !strings.Contains(body, "withdraw this request") {
		t.Error("the edit form at the cap does not say that nothing more can be saved")
	}
	if got, _ := h.db.Connection(ctx, 1); got.CurrentVersion != workflow.MaxVersions {
		t.Errorf("version after a refused save = %d", got.CurrentVersion)
	}
}

// TestPagesLoadOnlyTheVersionsTheyShow: versions 2 and 3 of a connection
// hold bodies no decoder accepts. The detail page (current version 5 and
// its diff against 4, the history of all five) and a diff of 1 and 5 never
// read them, so they answer 200; a diff that shows version 3 fails.
func TestPagesLoadOnlyTheVersionsTheyShow(t *testing.T) {
	h := newHarness(t, false)
	owner := h.signIn("owner.red")
	ctx := context.Background()
	if resp, _ := h.postAs(owner, "/teams/red/connections", formValues(formFromContract(workflow.ExampleContract()))); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("create = %d", resp.StatusCode)
	}
	c := workflow.ExampleContract()
	var stmts []string
	for v := 2; v <= 5; v++ {
		c.ReviewCadenceDays = 10 + v
		body := strings.ReplaceAll(string(c.Canonical()), "'", "''")
		if v == 2 || v == 3 {
			body = "not a contract"
		}
		stmts = append(stmts, fmt.Sprintf(`INSERT INTO contract_versions (connection_id, version, body, hash, namespaces, author_id, created_at)
SELECT 1, %d, '%s', '%s', '', requester_id, created_at FROM connections WHERE id = 1`, v, body, c.Hash()))
	}
	stmts = append(stmts, `UPDATE connections SET current_version = 5 WHERE id = 1`)
	if err := h.db.ExecForTest(ctx, stmts...); err != nil {
		t.Fatal(err)
	}
	resp, body := h.get(owner.c, "/connections/1")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("detail = %d", resp.StatusCode)
	}
	for v := 1; v <= 5; v++ {
		if !strings.Contains(body, fmt.Sprintf("/connections/1/versions/%d/contract.json", v)) {
			t.Errorf("the history lacks version %d", v)
		}
	}
	if !strings.Contains(body, "Changes since version 4") {
		t.Error("the detail page does not diff against version 4")
	}
	if resp, _ := h.get(owner.c, "/connections/1/diff?from=1&to=5"); resp.StatusCode != http.StatusOK {
		t.Errorf("diff 1..5 = %d", resp.StatusCode)
	}
	if resp, _ := h.get(owner.c, "/connections/1/diff?from=3&to=5"); resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("diff 3..5 = %d: the test's broken version is not broken", resp.StatusCode)
	}
	if resp, _ := h.get(owner.c, "/connections/1/diff?from=0&to=5"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("diff 0..5 = %d, want 404", resp.StatusCode)
	}
}

type failingLive struct{ err error }

func (f failingLive) Drift(context.Context, provision.Plan) ([]workflow.DriftItem, error) {
	return nil, f.err
}

func (f failingLive) CheckNamespace(context.Context, provision.Plan) (provision.NamespaceCheck, error) {
	return provision.NamespaceCheck{}, f.err
}

// TestPlanComparisonErrorIsReducedForNonAdmins: when the plan cannot be
// compared with the cluster, owners read the step and the kind of failure;
// admins read client-go's text.
func TestPlanComparisonErrorIsReducedForNonAdmins(t *testing.T) {
	raw := `namespaces "hyperpod-ns-red" is forbidden: User "system:serviceaccount:portal:portal" cannot get resource "namespaces" in API group "" at the cluster scope`
	h := newHarness(t, false, func(o *Options) { o.Live = failingLive{errors.New(raw)} })
	owner := h.signIn("owner.red")
	if resp, _ := h.postAs(owner, "/teams/red/connections", formValues(formFromContract(workflow.ExampleContract()))); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("create = %d", resp.StatusCode)
	}
	_, body := h.get(owner.c, "/connections/1")
	body = html.UnescapeString(body)
	if strings.Contains(body, "system:serviceaccount") || strings.Contains(body, "is forbidden") {
		t.Error("the owner reads client-go's error text")
	}
	if !strings.Contains(body, "Could not compare the plan with the cluster: permission denied") {
		t.Error("the owner is not told the step and the kind of failure")
	}
	_, body = h.get(h.signIn("admin").c, "/connections/1")
	if !strings.Contains(html.UnescapeString(body), raw) {
		t.Error("the admin does not read the full error")
	}
}
