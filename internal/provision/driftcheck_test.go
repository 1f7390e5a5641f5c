package provision

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

func TestDriftCheckerSavesEveryResultAndFailure(t *testing.T) {
	type saved struct {
		items int
		err   string
	}
	got := map[int64]saved{}
	d := &DriftChecker{
		List: func(context.Context) ([]ConnVersion, error) {
			return []ConnVersion{{1, 1}, {2, 3}, {3, 1}}, nil
		},
		Plans: func(_ context.Context, id int64, v int) (Plan, error) {
			if id == 3 {
				return Plan{}, errors.New("plan of connection 3 cannot be built")
			}
			return Plan{ConnectionID: id, ContractVersion: v}, nil
		},
		CheckAll: func(_ context.Context, plans []Plan, _ *ListCache) []DriftResult {
			out := make([]DriftResult, len(plans))
			for i, p := range plans {
				if p.ConnectionID == 2 {
					out[i].Items = []workflow.DriftItem{{Kind: "ResourceQuota", Ref: "ns/q", What: "changed"}}
				}
			}
			return out
		},
		Save: func(_ context.Context, id int64, _ workflow.DriftBasis, items []workflow.DriftItem, checkErr string, _ time.Time) error {
			got[id] = saved{len(items), checkErr}
			return nil
		},
	}
	n, err := d.RunOnce(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("RunOnce = %d, %v; want 1 drifted", n, err)
	}
	if got[1] != (saved{0, ""}) || got[2].items != 1 || got[3].err == "" {
		t.Errorf("saved = %+v", got)
	}
}
