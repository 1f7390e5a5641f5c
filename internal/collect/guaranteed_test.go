package collect

import (
	"context"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/usage"
)

// countingHistory is the store's guarantee history in instances, counting
// the reads.
type countingHistory struct {
	h     usage.GuaranteeHistory
	reads int
}

func (c *countingHistory) GuaranteeHistory(context.Context, string) (usage.GuaranteeHistory, error) {
	c.reads++
	return c.h, nil
}

// TestGuaranteesFromReadsOnce: the collector's guarantees come from one
// read of the history per flush (the review found two: accelerators and
// CPU each read it), converted to accelerators and CPU millicores by the
// instance type's figures.
func TestGuaranteesFromReadsOnce(t *testing.T) {
	amended := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	db := &countingHistory{h: usage.GuaranteeHistory{}}
	db.h.Add("red", "ml.p5.48xlarge", time.Time{}, 1)
	db.h.Add("red", "ml.p5.48xlarge", amended, 3)
	f := GuaranteesFrom(db,
		func(string) int64 { return 8 },
		func(string) int64 { return 192 * 1000 })
	g, err := f(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if db.reads != 1 {
		t.Errorf("the history was read %d times for one flush, want 1", db.reads)
	}
	for _, c := range []struct {
		what string
		h    usage.GuaranteeHistory
		at   time.Time
		want int64
	}{
		{"accelerators before the amendment", g.Accelerators, amended.Add(-time.Second), 8},
		{"accelerators after", g.Accelerators, amended, 24},
		{"CPU millicores before", g.CPU, amended.Add(-time.Second), 192000},
		{"CPU millicores after", g.CPU, amended, 576000},
	} {
		if got := c.h.At("red", "ml.p5.48xlarge", c.at); got != c.want {
			t.Errorf("%s: %d, want %d", c.what, got, c.want)
		}
	}
	if g, _ := GuaranteesFrom(db, func(string) int64 { return 8 }, nil)(context.Background()); g.CPU != nil {
		t.Errorf("with no CPU figures CPU must stay unsplit (nil), got %v", g.CPU)
	}
}
