package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// putContract is PUT …/contract of c with If-Match etag ("" for none).
func (h *harness) putContract(token string, id int64, c workflow.Contract, etag string) (*http.Response, []byte) {
	h.t.Helper()
	body, _ := json.Marshal(c)
	hdr := map[string]string{}
	if etag != "" {
		hdr["If-Match"] = etag
	}
	return h.api(apiReq{token: token, method: http.MethodPut, path: fmt.Sprintf("/api/v1/connections/%d/contract", id), body: body, headers: hdr})
}

func problemNames(t *testing.T, body []byte, field string) bool {
	t.Helper()
	var p problemDoc
	_ = json.Unmarshal(body, &p)
	return slices.ContainsFunc(p.Errors, func(f problemField) bool { return f.Field == field })
}

// TestAPIEditAndWithdrawADraft: a read-write token edits a draft through
// the edit form's command (a new version, audited as the page's save),
// with If-Match (428 without, 412 stale); a contract for another team is
// refused naming the field; the version's plan is the plan the provisioner
// builds (provision.BuildPlan: the oracle); a never-approved request has no
// plan diff (409); withdraw takes If-Match too.
func TestAPIEditAndWithdrawADraft(t *testing.T) {
	h := newHarness(t, false)
	owner := h.signIn("owner.red")
	rw := h.newToken(owner, workflow.TokenReadWrite)
	c := contractFor("red")
	body, _ := json.Marshal(c)
	resp, out := h.api(apiReq{token: rw, method: http.MethodPost, path: "/api/v1/connections", body: body})
	var conn apiConnectionBody
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(out, &conn) != nil {
		t.Fatalf("file = %d\n%s", resp.StatusCode, out)
	}
	v1 := resp.Header.Get("ETag")
	c2 := c
	c2.BusinessPurpose = "Fine-tuning, now with evaluation runs"
	if resp, _ := h.putContract(rw, conn.ID, c2, ""); resp.StatusCode != http.StatusPreconditionRequired {
		t.Errorf("PUT without If-Match = %d, want 428", resp.StatusCode)
	}
	other := c2
	other.Team = "blue"
	if resp, out := h.putContract(rw, conn.ID, other, v1); resp.StatusCode != http.StatusUnprocessableEntity || !problemNames(t, out, "team") {
		t.Errorf("PUT for another team = %d, want 422 naming team\n%s", resp.StatusCode, out)
	}
	resp, out = h.putContract(rw, conn.ID, c2, v1)
	if resp.StatusCode != http.StatusOK || json.Unmarshal(out, &conn) != nil || conn.CurrentVersion != 2 || conn.State != "draft" ||
		resp.Header.Get("ETag") != `"`+c2.Hash()+`"` {
		t.Fatalf("PUT = %d, ETag %s\n%s", resp.StatusCode, resp.Header.Get("ETag"), out)
	}
	if resp, _ := h.putContract(rw, conn.ID, c, v1); resp.StatusCode != http.StatusPreconditionFailed {
		t.Errorf("PUT with version 1's ETag after version 2 = %d, want 412", resp.StatusCode)
	}
	// Version 1 is the creation's; the edit's version is audited as the page's save.
	evs, _ := h.db.AuditEvents(context.Background(), store.AuditFilter{Action: "contract.version", ObjectID: conn.ID}, 0, 10)
	if len(evs) != 1 || evs[0].Version != 2 || evs[0].Actor != "owner.red@example.test" {
		t.Errorf("contract.version events = %+v", evs)
	}
	// The plan: the provisioner's.
	resp, out = h.api(apiReq{token: rw, path: fmt.Sprintf("/api/v1/connections/%d/versions/2/plan", conn.ID)})
	var plan apiPlanBody
	want, err := provision.BuildPlan(conn.ID, 2, c2.Hash(), c2, h.srv.opts.Cluster)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(out, &plan) != nil || plan.PlanHash != want.Hash() || !slices.Equal(plan.Summary, want.Summary()) {
		t.Errorf("plan = %d, hash %s (want %s)\n%s", resp.StatusCode, plan.PlanHash, want.Hash(), out)
	}
	if resp, _ := h.api(apiReq{token: rw, path: fmt.Sprintf("/api/v1/connections/%d/versions/2/plan-diff", conn.ID)}); resp.StatusCode != http.StatusConflict {
		t.Errorf("plan diff of a never-approved request = %d, want 409", resp.StatusCode)
	}
	withdraw := fmt.Sprintf("/api/v1/connections/%d/withdraw", conn.ID)
	if resp, _ := h.api(apiReq{token: rw, method: http.MethodPost, path: withdraw}); resp.StatusCode != http.StatusPreconditionRequired {
		t.Errorf("withdraw without If-Match = %d, want 428", resp.StatusCode)
	}
	if resp, _ := h.api(apiReq{token: rw, method: http.MethodPost, path: withdraw, headers: map[string]string{"If-Match": v1}}); resp.StatusCode != http.StatusPreconditionFailed {
		t.Errorf("withdraw with a stale ETag = %d, want 412", resp.StatusCode)
	}
	resp, out = h.api(apiReq{token: rw, method: http.MethodPost, path: withdraw, headers: map[string]string{"If-Match": `"` + c2.Hash() + `"`}})
	if resp.StatusCode != http.StatusOK || json.Unmarshal(out, &conn) != nil || conn.State != "withdrawn" {
		t.Errorf("withdraw = %d\n%s", resp.StatusCode, out)
	}
	if n := h.auditCount("connection.withdraw"); n != 1 {
		t.Errorf("%d connection.withdraw events, want 1", n)
	}
	// Withdrawn: no more edits (the policy's 403).
	if resp, _ := h.putContract(rw, conn.ID, c, `"`+c2.Hash()+`"`); resp.StatusCode != http.StatusForbidden {
		t.Errorf("PUT on a withdrawn request = %d, want 403", resp.StatusCode)
	}
}

// TestAPIFilesAChangeOfALiveConnection: on an active connection, PUT files
// its change (the page's "Request a change"): the approved version keeps
// running, the namespaces cannot move (422 naming the field); the preview
// and the plan diff are the contract's and the plans' differences against
// the approved version (oracles: workflow.Diff, provision.DiffPlans); the
// change is submitted and withdrawn with If-Match, the connection staying
// active on version 1.
func TestAPIFilesAChangeOfALiveConnection(t *testing.T) {
	h := newHarness(t, false)
	owner, admin := h.signIn("owner.red"), h.signIn("admin")
	activeConnection(t, h, owner, admin)
	rw := h.newToken(owner, workflow.TokenReadWrite)
	ctx := context.Background()
	v1, _ := h.db.Version(ctx, 1, 1)
	c2 := v1.Contract
	c2.Scheduling.Guaranteed = []workflow.Capacity{{InstanceType: "ml.p5.48xlarge", Count: 1}}
	c2.Scheduling.FairShareWeight = 30
	moved := c2
	moved.Namespaces = []string{"hyperpod-ns-elsewhere"}
	etag := `"` + v1.Hash + `"`
	if resp, out := h.putContract(rw, 1, moved, etag); resp.StatusCode != http.StatusUnprocessableEntity || !problemNames(t, out, "namespaces") {
		t.Errorf("a change moving the namespaces = %d, want 422 naming namespaces\n%s", resp.StatusCode, out)
	}
	// The preview: nothing saved.
	body, _ := json.Marshal(c2)
	resp, out := h.api(apiReq{token: rw, method: http.MethodPost, path: "/api/v1/connections/1/preview", body: body})
	var pre apiPreviewBody
	if resp.StatusCode != http.StatusOK || json.Unmarshal(out, &pre) != nil || pre.ComparedWith != 1 || pre.Unchanged || len(pre.Errors) != 0 || pre.PlanDiff == nil {
		t.Fatalf("preview = %d\n%s", resp.StatusCode, out)
	}
	if !slices.Equal(pre.ContractChanges, apiChanges(v1.Contract, c2)) || len(pre.ContractChanges) != 2 {
		t.Errorf("preview's contract changes %+v", pre.ContractChanges)
	}
	if c, _ := h.db.Connection(ctx, 1); c.CurrentVersion != 1 {
		t.Fatal("the preview saved a version")
	}
	resp, out = h.putContract(rw, 1, c2, etag)
	var conn apiConnectionBody
	if resp.StatusCode != http.StatusOK || json.Unmarshal(out, &conn) != nil || conn.State != "active" || conn.Amendment != "draft" ||
		conn.CurrentVersion != 2 || conn.ApprovedVersion != 1 {
		t.Fatalf("PUT a change = %d\n%s", resp.StatusCode, out)
	}
	// The plan diff: the provisioner's plans of the two versions, compared.
	resp, out = h.api(apiReq{token: rw, path: "/api/v1/connections/1/versions/2/plan-diff"})
	var pd apiPlanDiffBody
	old, _ := provision.BuildPlan(1, 1, v1.Hash, v1.Contract, h.srv.opts.Cluster)
	next, _ := provision.BuildPlan(1, 2, c2.Hash(), c2, h.srv.opts.Cluster)
	var wantRows []apiDiffRow
	for _, r := range provision.DiffPlans(old, next).Rows() {
		wantRows = append(wantRows, apiDiffRow{Action: r.Action, What: r.What, Detail: r.Detail})
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(out, &pd) != nil || pd.FromVersion != 1 || pd.ToVersion != 2 || pd.Empty || !slices.Equal(pd.Rows, wantRows) {
		t.Errorf("plan diff = %d\n%s", resp.StatusCode, out)
	}
	if !slices.Equal(pd.ContractChanges, pre.ContractChanges) || !slices.Equal(pre.PlanDiff.Rows, pd.Rows) {
		t.Error("the preview and the saved version's plan diff differ")
	}
	resp, out = h.api(apiReq{token: rw, method: http.MethodPost, path: "/api/v1/connections/1/submit", headers: map[string]string{"If-Match": `"` + c2.Hash() + `"`}})
	if resp.StatusCode != http.StatusOK || json.Unmarshal(out, &conn) != nil || conn.Amendment != "submitted" {
		t.Fatalf("submit the change = %d\n%s", resp.StatusCode, out)
	}
	resp, out = h.api(apiReq{token: rw, method: http.MethodPost, path: "/api/v1/connections/1/withdraw", headers: map[string]string{"If-Match": `"` + c2.Hash() + `"`}})
	conn = apiConnectionBody{}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(out, &conn) != nil || conn.State != "active" || conn.Amendment != "" || conn.ApprovedVersion != 1 {
		t.Errorf("withdraw the change = %d\n%s", resp.StatusCode, out)
	}
	if n := h.auditCount("amendment.withdraw"); n != 1 {
		t.Errorf("%d amendment.withdraw events, want 1", n)
	}
}

// TestAPIPreviewANewRequest: a read token previews a contract as a new
// request: the form's field errors, nothing saved; another team's is not
// found.
func TestAPIPreviewANewRequest(t *testing.T) {
	h := newHarness(t, false)
	read := h.newToken(h.signIn("owner.red"), workflow.TokenRead)
	c := contractFor("red")
	c.ClusterName = ""
	body, _ := json.Marshal(c)
	resp, out := h.api(apiReq{token: read, method: http.MethodPost, path: "/api/v1/preview", body: body})
	var pre apiPreviewBody
	if resp.StatusCode != http.StatusOK || json.Unmarshal(out, &pre) != nil || pre.Team != "red" ||
		!slices.ContainsFunc(pre.Errors, func(f problemField) bool { return f.Field == "cluster_name" }) || len(pre.ContractChanges) == 0 {
		t.Errorf("preview = %d\n%s", resp.StatusCode, out)
	}
	if n := h.auditCount("connection.create"); n != 0 {
		t.Error("a preview filed a request")
	}
	blue, _ := json.Marshal(contractFor("blue"))
	if resp, _ := h.api(apiReq{token: read, method: http.MethodPost, path: "/api/v1/preview", body: blue}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("previewing for another team = %d, want 404", resp.StatusCode)
	}
	if pre.Plan == nil || pre.Plan.Error == "" || len(pre.Plan.Summary) != 0 {
		t.Errorf("an incomplete contract's preview has a plan: %+v", pre.Plan)
	}
}

// TestAPIPreviewANewRequestsPlan: the preview of a complete new contract
// carries the plan the admin sees once it is filed (oracle: the filed
// request's own plan through the plan route), with the placeholder id
// where the filed request has its own, no plan hash, and a warning saying
// so; nothing is filed by the preview.
func TestAPIPreviewANewRequestsPlan(t *testing.T) {
	h := newHarness(t, false)
	owner := h.signIn("owner.red")
	read, rw := h.newToken(owner, workflow.TokenRead), h.newToken(owner, workflow.TokenReadWrite)
	body, _ := json.Marshal(contractFor("red"))
	resp, out := h.api(apiReq{token: read, method: http.MethodPost, path: "/api/v1/preview", body: body})
	var pre apiPreviewBody
	if resp.StatusCode != http.StatusOK || json.Unmarshal(out, &pre) != nil || len(pre.Errors) != 0 || pre.Plan == nil {
		t.Fatalf("preview = %d\n%s", resp.StatusCode, out)
	}
	if n := h.auditCount("connection.create"); n != 0 {
		t.Fatal("a preview filed a request")
	}
	if pre.Plan.PlanHash != "" || pre.Plan.Error != "" || len(pre.Plan.Summary) == 0 ||
		!slices.ContainsFunc(pre.Plan.Warnings, func(w string) bool { return strings.Contains(w, strconv.FormatInt(previewConnectionID, 10)) }) {
		t.Errorf("the preview's plan: %+v", pre.Plan)
	}
	resp, out = h.api(apiReq{token: rw, method: http.MethodPost, path: "/api/v1/connections", body: body})
	var conn apiConnectionBody
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(out, &conn) != nil {
		t.Fatalf("file = %d\n%s", resp.StatusCode, out)
	}
	resp, out = h.api(apiReq{token: read, path: conn.Links.CurrentVersion + "/plan"})
	var filed apiPlanBody
	if resp.StatusCode != http.StatusOK || json.Unmarshal(out, &filed) != nil || filed.PlanHash == "" {
		t.Fatalf("the filed request's plan = %d\n%s", resp.StatusCode, out)
	}
	placeholder, id := strconv.FormatInt(previewConnectionID, 10), strconv.FormatInt(conn.ID, 10)
	if got := strings.ReplaceAll(pre.Plan.YAML, placeholder, id); got != filed.YAML {
		t.Errorf("the preview's plan, its id replaced, is not the filed request's:\n%s\n---\n%s", got, filed.YAML)
	}
	if !slices.Equal(pre.Plan.Summary, filed.Summary) || !slices.Equal(pre.Plan.AWS, filed.AWS) || pre.Plan.Warnings[len(pre.Plan.Warnings)-1] == "" ||
		!slices.Equal(pre.Plan.Warnings[:len(pre.Plan.Warnings)-1], filed.Warnings) || pre.ContractHash != filed.ContractHash {
		t.Errorf("the preview's plan %+v\nthe filed request's %+v", pre.Plan, filed)
	}
}
