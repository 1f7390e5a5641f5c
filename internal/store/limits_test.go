package store_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TestVersionsReadNoBodies: the history of a connection is its versions'
// metadata; a version whose body no decoder accepts is still listed,
// because Versions never selects the body.
func TestVersionsReadNoBodies(t *testing.T) {
	f := newFixture(t, 0)
	conn := f.create(contract("red", "hyperpod-ns-red", ""))
	if _, err := f.raw.ExecContext(t.Context(), `INSERT INTO contract_versions (connection_id, version, body, hash, namespaces, author_id, created_at)
SELECT id, 2, 'not a contract', 'h2', '', requester_id, created_at FROM connections WHERE id = ?`, conn.ID); err != nil {
		t.Fatal(err)
	}
	vs, err := f.db.Versions(t.Context(), conn.ID)
	if err != nil {
		t.Fatalf("Versions: %v", err)
	}
	if len(vs) != 2 || vs[0].Version != 2 || vs[0].Hash != "h2" || vs[0].AuthorEmail != f.owner.Email || vs[1].Version != 1 || vs[1].CreatedAt.IsZero() {
		t.Errorf("Versions = %+v", vs)
	}
	if _, err := f.db.Version(t.Context(), conn.ID, 2); err == nil {
		t.Error("Version(2) decoded a broken body: the test's version is not broken")
	}
}

// TestSaveContractStopsAtMaxVersions: four writers save changed contracts
// as fast as they can, each retrying on a stale base; the connection ends
// with exactly workflow.MaxVersions versions, every writer's last save is
// refused with ErrVersionLimit, and the refused saves write nothing.
func TestSaveContractStopsAtMaxVersions(t *testing.T) {
	f := newFixture(t, 0)
	conn := f.create(contract("red", "hyperpod-ns-red", ""))
	ctx := t.Context()
	now := f.tick()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			for i := 0; i < 10*workflow.MaxVersions; i++ {
				cur, err := f.db.Connection(ctx, conn.ID)
				if err != nil {
					errs <- err
					return
				}
				c := contract("red", "hyperpod-ns-red", "")
				c.ReviewCadenceDays = 7 + w*1000 + i
				_, _, err = f.db.SaveContract(ctx, conn.ID, cur.CurrentVersion, c, f.owner, now.Add(time.Duration(i)*time.Millisecond))
				var stale *store.StaleError
				switch {
				case errors.Is(err, workflow.ErrVersionLimit):
					errs <- nil
					return
				case errors.As(err, &stale):
				case err != nil:
					errs <- err
					return
				}
			}
			errs <- errors.New("never refused")
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("writer: %v", err)
		}
	}
	var n, audits int
	if err := f.raw.QueryRowContext(ctx, `SELECT count(*) FROM contract_versions WHERE connection_id = ?`, conn.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if err := f.raw.QueryRowContext(ctx, `SELECT count(*) FROM audit_events WHERE object_id = ? AND action = 'contract.version'`, conn.ID).Scan(&audits); err != nil {
		t.Fatal(err)
	}
	got, err := f.db.Connection(ctx, conn.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n != workflow.MaxVersions || got.CurrentVersion != workflow.MaxVersions || audits != workflow.MaxVersions-1 {
		t.Errorf("%d versions, current %d, %d version events; want %d, %d, %d", n, got.CurrentVersion, audits, workflow.MaxVersions, workflow.MaxVersions, workflow.MaxVersions-1)
	}
	// An unchanged save at the cap adds nothing and is not refused.
	v, err := f.db.Version(ctx, conn.ID, workflow.MaxVersions)
	if err != nil {
		t.Fatal(err)
	}
	if _, changed, err := f.db.SaveContract(ctx, conn.ID, workflow.MaxVersions, v.Contract, f.owner, f.tick()); err != nil || changed {
		t.Errorf("unchanged save at the cap = changed %v, %v", changed, err)
	}
}

// TestVersionMetadataReadsNoTableRows: the history's query and the
// editors (read on every page of a connection) are answered from the index
// contract_versions_meta alone. The table row holds the body before those columns, so reading
// them from the row would walk every body's overflow pages.
//
// The statements mirror versions.go and decisions.go; keep them in step.
func TestVersionMetadataReadsNoTableRows(t *testing.T) {
	db := openTB(t)
	for _, q := range []string{
		`SELECT cv.connection_id, cv.version, cv.hash, cv.author_id, u.email, cv.created_at
FROM contract_versions cv JOIN users u ON u.id = cv.author_id WHERE cv.connection_id = ? ORDER BY cv.version DESC`,
		`SELECT DISTINCT author_id FROM contract_versions WHERE connection_id = ? ORDER BY author_id`,
	} {
		plan := explain(t, db, q, 1)
		ok := false
		for _, line := range plan {
			if strings.Contains(line, "USING COVERING INDEX contract_versions_meta") {
				ok = true
			}
		}
		if !ok {
			t.Errorf("%s\nreads contract_versions rows:\n%s", q, strings.Join(plan, "\n"))
		}
	}
}
