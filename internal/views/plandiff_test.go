package views

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func renderPlanDiff(t *testing.T, v PlanDiffView) string {
	t.Helper()
	var buf bytes.Buffer
	if err := PlanDiffPanel(v).Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// TestPlanDiffPanel: changed rows are a table with their action (coloured
// by class), unchanged ones are only counted and listed behind a summary,
// and text from the plan is escaped.
func TestPlanDiffPanel(t *testing.T) {
	html := renderPlanDiff(t, PlanDiffView{FromVersion: 3, ToVersion: 4, Rows: []PlanDiffRow{
		{Action: "update", What: "ResourceQuota hyperpod-ns-red/team-quota", Detail: "spec.hard.requests.nvidia.com/gpu: 24 → 36"},
		{Action: "unchanged", What: "LimitRange hyperpod-ns-red/team-container-defaults"},
		{Action: "delete", What: "NetworkPolicy hyperpod-ns-red/allow-egress-10-20-0-0-16", Detail: "<b>egress</b>"},
		{Action: "keep", What: "LocalQueue hyperpod-ns-red/hyperpod-ns-red-localqueue", Detail: "left to HyperPod"},
	}})
	for _, want := range []string{
		`data-testid="plan-diff"`, "version 3 → 4",
		`class="diff-action diff-update" data-testid="plan-diff-action">update</span>`,
		`class="diff-action diff-delete" data-testid="plan-diff-action">delete</span>`,
		`class="diff-action diff-keep" data-testid="plan-diff-action">keep</span>`,
		"spec.hard.requests.nvidia.com/gpu: 24 → 36", "&lt;b&gt;egress&lt;/b&gt;",
		`data-testid="plan-diff-unchanged"`, "1 unchanged", "LimitRange hyperpod-ns-red/team-container-defaults",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("plan diff lacks %s:\n%s", want, html)
		}
	}
	if n := strings.Count(html, `data-testid="plan-diff-row"`); n != 3 {
		t.Errorf("%d rows in the table, want the 3 that change or are kept", n)
	}
	if strings.Contains(html, "<b>") || strings.Contains(html, `data-testid="plan-diff-empty"`) {
		t.Error("plan text rendered as markup, or a diff with changes called empty")
	}
}

func TestPlanDiffPanelEmptyAndError(t *testing.T) {
	html := renderPlanDiff(t, PlanDiffView{Empty: true, Rows: []PlanDiffRow{{Action: "unchanged", What: "Namespace hyperpod-ns-red"}}})
	if !strings.Contains(html, `data-testid="plan-diff-empty"`) || strings.Contains(html, `data-testid="plan-diff-row"`) {
		t.Errorf("an empty diff must say so and list no row:\n%s", html)
	}
	html = renderPlanDiff(t, PlanDiffView{Error: "no plan: Slurm"})
	if !strings.Contains(html, `data-testid="plan-diff-error">no plan: Slurm`) || strings.Contains(html, "plan-diff-empty") {
		t.Errorf("a diff that could not be built must show why and nothing else:\n%s", html)
	}
}
