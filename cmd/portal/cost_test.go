package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
)

// The demo rate card that make run uses parses, is labelled demo, and prices
// every instance type it names with a known accelerator count.
func TestDemoRateCard(t *testing.T) {
	card, err := loadRateCard("../../hack/demo-rate-card.json")
	if err != nil {
		t.Fatal(err)
	}
	if !card.Demo {
		t.Error("the demo rate card is not marked demo")
	}
	for _, r := range card.Rates() {
		if provision.DefaultAccelerators[r.InstanceType].Accelerators <= 0 {
			t.Errorf("%s has no accelerators in the default table", r.InstanceType)
		}
	}
	if _, err := loadRateCard("/no/such/file.json"); err == nil || !strings.Contains(err.Error(), "--rate-card") {
		t.Errorf("missing file: %v", err)
	}
}

// The closing loop's step freezes last month once and is a no-op after.
func TestMonthCloserOnce(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	card, err := loadRateCard("../../hack/demo-rate-card.json")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	at := time.Date(2026, 11, 10, 4, 0, 0, 0, time.UTC)
	if err := db.PutUsageHours(ctx, []usage.Hour{{Team: "red", Namespace: "hyperpod-ns-red", InstanceType: "ml.p5.48xlarge", Start: at, GuaranteedAccelSeconds: 8 * 3600}}); err != nil {
		t.Fatal(err)
	}
	m := newMonthCloser(db, card, provision.ClusterSettings{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	m.now = func() time.Time { return now }
	m.once(ctx)
	m.once(ctx)
	list, err := db.FrozenStatements(ctx, "")
	if err != nil || len(list) != 1 || list[0].Month != "2026-11" || list[0].Total != "90.00" {
		t.Fatalf("frozen = %+v, %v", list, err)
	}
	ev, _ := db.AuditEvents(ctx, store.AuditFilter{Action: "cost.month_closed"}, 0, 5)
	if len(ev) != 1 {
		t.Errorf("month closed %d times", len(ev))
	}
}
