package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestChainHashBytes: chainHash hashes exactly "len:field|" for the
// previous hash and each field, as the chain has always been written (the
// format every stored hash was computed with; VerifyAudit recomputes it).
func TestChainHashBytes(t *testing.T) {
	reference := func(prev string, e AuditEvent) string {
		h := sha256.New()
		for _, f := range []string{
			prev, fmtTime(e.At), strconv.FormatInt(e.ActorID, 10), e.Actor, e.Action, e.ObjectType,
			strconv.FormatInt(e.ObjectID, 10), e.Team, strconv.Itoa(e.Version), e.Reason,
		} {
			fmt.Fprintf(h, "%d:%s|", len(f), f)
		}
		return hex.EncodeToString(h.Sum(nil))
	}
	at := time.Date(2026, 12, 7, 13, 0, 0, 123456789, time.UTC)
	for i, e := range []AuditEvent{
		{},
		{At: at, ActorID: 42, Actor: "owner.red@example.test", Action: "token.use", ObjectType: "token", ObjectID: 7, Reason: "GET /api/v1/connections"},
		{At: at, ActorID: -1, Actor: "ünïcode|:", Action: "connection.approved", ObjectType: "connection", ObjectID: 1 << 40, Team: "red", Version: 3,
			Reason: strings.Repeat("a long reason, longer than the buffer; ", 40)},
	} {
		prev := genesisHash
		if i > 0 {
			prev = reference(genesisHash, e)
		}
		if got, want := chainHash(prev, e), reference(prev, e); got != want {
			t.Errorf("event %d: chainHash = %s, want %s", i, got, want)
		}
	}
}

// TestAuditAppendsReusePreparedStatements: on SQLite, batches of events of
// every size from 1 to 12 prepare their statements once: the same sizes
// again prepare nothing (a statement a batch size, past the few the cache
// keeps for big statements, was prepared again every batch). The chain
// they make verifies.
func TestAuditAppendsReusePreparedStatements(t *testing.T) {
	ctx := context.Background()
	d, err := OpenMigrated(ctx, filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.sql.SetMaxOpenConns(1) // one connection: its cache is the one used
	at := time.Date(2026, 12, 7, 13, 0, 0, 0, time.UTC)
	round := func() {
		t.Helper()
		for n := 1; n <= 12; n++ {
			events := make([]AuditEvent, n)
			for i := range events {
				at = at.Add(time.Second)
				events[i] = AuditEvent{At: at, Actor: "owner.red@example.test", Action: "token.use", ObjectType: "token", ObjectID: int64(n), Reason: "GET /api/v1/connections"}
			}
			if err := d.inTx(ctx, func(tx *sql.Tx) error { return appendAudits(ctx, tx, d.dialect, events) }); err != nil {
				t.Fatal(err)
			}
		}
	}
	round()
	before := stmtPrepares.Load()
	round()
	if n := stmtPrepares.Load() - before; n != 0 {
		t.Errorf("the same batch sizes again prepared %d statements, want 0", n)
	}
	if _, brk, err := d.VerifyAudit(ctx); err != nil || brk != nil {
		t.Errorf("audit chain: break %+v, %v", brk, err)
	}
}
