package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// applyAction is what apply does for one file.
type applyAction int

const (
	actNothing    applyAction = iota
	actCreate                 // file a request, then submit it
	actSubmit                 // submit the current version (a draft of this contract)
	actEditSubmit             // save the file as the next version (a draft's, or a change), then submit it
)

// applyDecision is decideApply's answer: the action and why, or why apply
// cannot make the portal match the file (err).
type applyDecision struct {
	act applyAction
	why string
	err error
}

// decideApply is apply's rule for a file whose contract hashes to hash:
// open is its open connection (nil: none), ended the newest rejected,
// withdrawn or revoked one. A contract a person ended is not filed again
// unchanged; what is in review, sent back unchanged, or being applied is
// left to the people deciding it.
func decideApply(hash string, open, ended *remote) applyDecision {
	if open == nil {
		if ended != nil && ended.curHash == hash {
			return applyDecision{why: fmt.Sprintf("connection #%d of this contract was %s; change the file to file it again", ended.conn.ID, ended.conn.State)}
		}
		return applyDecision{act: actCreate, why: "new contract"}
	}
	c := open.conn
	same := open.curHash == hash
	st := workflow.State(c.State)
	if st.Live() {
		return decideChange(hash, open)
	}
	switch {
	case st == workflow.StateDraft && same:
		return applyDecision{act: actSubmit, why: fmt.Sprintf("draft #%d holds this contract but was not submitted", c.ID)}
	case st == workflow.StateDraft, st == workflow.StateChangesRequested && !same:
		return applyDecision{act: actEditSubmit, why: fmt.Sprintf("request #%d (%s) differs from the file", c.ID, st.Label())}
	case same:
		return applyDecision{why: fmt.Sprintf("request #%d is %s with this contract", c.ID, strings.ToLower(st.Label()))}
	}
	return applyDecision{err: fmt.Errorf("request #%d is %s with another version (v%d); it cannot be edited now: wait for it (or withdraw it in the portal), then apply again",
		c.ID, strings.ToLower(st.Label()), c.CurrentVersion)}
}

// decideChange is decideApply for a live connection: the file against its
// approved version, or against its open change.
func decideChange(hash string, open *remote) applyDecision {
	c := open.conn
	same := open.curHash == hash
	switch a := workflow.Amendment(c.Amendment); {
	case a == workflow.AmendNone && hash == open.approvedHash:
		return applyDecision{why: fmt.Sprintf("connection #%d is %s on this contract (version %d)", c.ID, c.State, c.ApprovedVersion)}
	case a == workflow.AmendNone:
		return applyDecision{act: actEditSubmit, why: fmt.Sprintf("connection #%d's active version %d differs from the file: a change", c.ID, c.ApprovedVersion)}
	case a == workflow.AmendDraft && same:
		return applyDecision{act: actSubmit, why: fmt.Sprintf("connection #%d has this change as a draft, not submitted", c.ID)}
	case a == workflow.AmendDraft && hash == open.approvedHash:
		return applyDecision{err: fmt.Errorf("connection #%d has a draft change (v%d), and the file is its active version %d: withdraw the draft change in the portal", c.ID, c.CurrentVersion, c.ApprovedVersion)}
	case (a == workflow.AmendDraft || a == workflow.AmendChangesRequested) && !same:
		return applyDecision{act: actEditSubmit, why: fmt.Sprintf("connection #%d's open change (v%d, %s) differs from the file", c.ID, c.CurrentVersion, a.Label())}
	case same:
		return applyDecision{why: fmt.Sprintf("connection #%d's change v%d is %s with this contract", c.ID, c.CurrentVersion, a.Label())}
	}
	return applyDecision{err: fmt.Errorf("connection #%d has a change (v%d) %s, and the file differs from it; it cannot be edited now: wait for it (or withdraw it in the portal), then apply again",
		c.ID, c.CurrentVersion, workflow.Amendment(c.Amendment).Label())}
}

// applyOne makes the portal match one file (or, dry, says what it would do).
func applyOne(ctx context.Context, cl *apiClient, f localContract, remotes []remote, dry bool, w io.Writer) error {
	open, ended, err := match(f, remotes)
	if err != nil {
		return err
	}
	d := decideApply(f.c.Hash(), open, ended)
	if d.err != nil {
		return d.err
	}
	head := fmt.Sprintf("%s (%s)", f.file, describeKey(f.c))
	if d.act == actNothing {
		fmt.Fprintf(w, "%s: unchanged: %s\n", head, d.why)
		return nil
	}
	if dry {
		return previewOne(ctx, cl, f, open, d, head, w)
	}
	body, err := json.Marshal(f.c)
	if err != nil {
		return err
	}
	var conn apiConn
	etag := ""
	switch d.act {
	case actCreate:
		h, err := cl.do(ctx, http.MethodPost, "/api/v1/connections", body, nil, &conn)
		if err != nil {
			return err
		}
		etag = h.Get("ETag")
		fmt.Fprintf(w, "%s: %s: filed request #%d: %s%s\n", head, d.why, conn.ID, cl.base, conn.Links.Page)
	case actEditSubmit:
		h, err := cl.do(ctx, http.MethodPut, open.conn.Links.Self+"/contract", body, map[string]string{"If-Match": quoted(open.curHash)}, &conn)
		if err != nil {
			return err
		}
		etag = h.Get("ETag")
		fmt.Fprintf(w, "%s: %s: saved it as version %d of #%d: %s%s\n", head, d.why, conn.CurrentVersion, conn.ID, cl.base, conn.Links.Page)
	case actSubmit:
		conn, etag = open.conn, quoted(open.curHash)
		fmt.Fprintf(w, "%s: %s\n", head, d.why)
	}
	if _, err := cl.do(ctx, http.MethodPost, conn.Links.Self+"/submit", nil, map[string]string{"If-Match": etag}, &conn); err != nil {
		return fmt.Errorf("not submitted (apply again to submit it): %w", err)
	}
	fmt.Fprintf(w, "%s: submitted #%d version %d for approval: %s%s\n", head, conn.ID, conn.CurrentVersion, cl.base, conn.Links.Page)
	return nil
}

func quoted(hash string) string { return `"` + hash + `"` }

// applyPreview is the API's Preview (the fields apply prints).
type applyPreview struct {
	ComparedWith    int           `json:"compared_with"`
	Errors          []previewItem `json:"errors"`
	ContractChanges []struct {
		Label, Old, New string
	} `json:"contract_changes"`
	Plan *struct {
		Summary  []string `json:"summary"`
		Warnings []string `json:"warnings"`
		Error    string   `json:"error"`
	} `json:"plan"`
	PlanDiff *struct {
		Rows []struct {
			Action, What, Detail string
		} `json:"rows"`
		Error string `json:"error"`
	} `json:"plan_diff"`
}

type previewItem struct{ Field, Detail string }

// previewOne prints what applying f would do: the contract's changes and
// the plan or plan diff an admin would see, and the fields that would be
// refused (an error then). Nothing changes.
func previewOne(ctx context.Context, cl *apiClient, f localContract, open *remote, d applyDecision, head string, w io.Writer) error {
	body, err := json.Marshal(f.c)
	if err != nil {
		return err
	}
	path, what := "/api/v1/preview", "would file a new request and submit it"
	if open != nil {
		path = open.conn.Links.Self + "/preview"
		what = fmt.Sprintf("would submit #%d", open.conn.ID)
		if d.act == actEditSubmit {
			what = fmt.Sprintf("would save the file as version %d of #%d and submit it", open.conn.CurrentVersion+1, open.conn.ID)
		}
	}
	var p applyPreview
	if _, err := cl.do(ctx, http.MethodPost, path, body, nil, &p); err != nil {
		return err
	}
	fmt.Fprintf(w, "%s: %s: %s (dry run: nothing changed)\n", head, d.why, what)
	against := "a new contract"
	if p.ComparedWith > 0 {
		against = fmt.Sprintf("against version %d", p.ComparedWith)
	}
	fmt.Fprintf(w, "  contract (%s):\n", against)
	for _, ch := range p.ContractChanges {
		fmt.Fprintf(w, "    ~ %s: %s -> %s\n", ch.Label, shown(ch.Old), shown(ch.New))
	}
	switch {
	case p.PlanDiff != nil:
		fmt.Fprintf(w, "  plan diff (against the active version):\n")
		for _, r := range p.PlanDiff.Rows {
			if r.Action != "unchanged" {
				fmt.Fprintf(w, "    %s %s: %s\n", r.Action, r.What, r.Detail)
			}
		}
		if p.PlanDiff.Error != "" {
			fmt.Fprintf(w, "    (%s)\n", p.PlanDiff.Error)
		}
	case p.Plan != nil:
		fmt.Fprintf(w, "  plan:\n")
		for _, s := range p.Plan.Summary {
			fmt.Fprintf(w, "    %s\n", s)
		}
		for _, s := range p.Plan.Warnings {
			fmt.Fprintf(w, "    warning: %s\n", s)
		}
		if p.Plan.Error != "" {
			fmt.Fprintf(w, "    (%s)\n", p.Plan.Error)
		}
	default:
		fmt.Fprintf(w, "  plan: none (the portal did not send one)\n")
	}
	if len(p.Errors) > 0 {
		e := &apiError{method: http.MethodPost, path: path, status: http.StatusUnprocessableEntity, title: "Invalid contract",
			detail: fmt.Sprintf("%d field(s) would be refused", len(p.Errors))}
		for _, it := range p.Errors {
			e.fields = append(e.fields, struct{ Field, Detail string }{it.Field, it.Detail})
		}
		return errors.New(strings.Replace(e.Error(), "the portal refused", "the portal would refuse", 1))
	}
	return nil
}

func shown(s string) string {
	if s == "" {
		return "(empty)"
	}
	return s
}
