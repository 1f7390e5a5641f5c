package main

import (
	"log/slog"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/support/testenv"
)

// --leader-election picks the lock: with a cluster (auto) or kubernetes,
// a Kubernetes Lease; otherwise (auto without a cluster, or database) a
// PostgreSQL session advisory lock on PostgreSQL and a flock beside the
// file on SQLite.
func TestElectorLock(t *testing.T) {
	lite, err := store.OpenMigrated(t.Context(), filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	kube := &rest.Config{Host: "https://127.0.0.1:1"}
	checkElectors(t, []electorPick{
		{"auto", nil, lite, "sqlite file lock"},
		{"database", kube, lite, "sqlite file lock"},
		{"kubernetes", kube, lite, "kubernetes lease"},
	})
	pg := openPostgresForElector(t) // the rest needs the test bed
	checkElectors(t, []electorPick{
		{"auto", nil, pg, "postgresql advisory lock"},
		{"database", kube, pg, "postgresql advisory lock"},
		{"auto", kube, pg, "kubernetes lease"},
	})
}

type electorPick struct {
	mode string
	kube *rest.Config
	db   *store.DB
	want string
}

func checkElectors(t *testing.T, picks []electorPick) {
	t.Helper()
	for _, c := range picks {
		e, err := newElector(Config{LeaderElection: c.mode, LeaderID: "x"}, c.kube, c.db, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		if got := e.Status().Lock(); got != c.want {
			t.Errorf("--leader-election=%s, cluster %v, PostgreSQL %v: %q, want %q", c.mode, c.kube != nil, c.db.Postgres(), got, c.want)
		}
	}
}

func openPostgresForElector(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(t.Context(), testenv.PostgresDB(t, "portal_elector", true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
