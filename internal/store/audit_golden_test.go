package store_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// The audit chain's canonical form, written down here independently of
// store.chainHash: SHA-256 over the previous hash and the fields at,
// actor_id (0 for the system), actor, action, object_type, object_id,
// team, version and reason, each written as "<byte length>:<value>|".
// Nothing in this file calls the function under test.
type goldenEvent struct {
	at                        string
	actorID                   int64
	actor, action, objectType string
	objectID                  int64
	team                      string
	version                   int
	reason                    string
}

func refHash(prev string, e goldenEvent) string {
	var b strings.Builder
	for _, f := range []string{prev, e.at, strconv.FormatInt(e.actorID, 10), e.actor, e.action, e.objectType,
		strconv.FormatInt(e.objectID, 10), e.team, strconv.Itoa(e.version), e.reason} {
		fmt.Fprintf(&b, "%d:%s|", len(f), f)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}

// goldenFixture is auditFixture and one event by the system (no user id,
// no object, no team): seven events whose every field is known here.
func goldenFixture(t *testing.T) (*fixture, []goldenEvent) {
	t.Helper()
	f := auditFixture(t)
	if err := f.db.RecordClusterEvent(t.Context(), "scheduler.reconcile", workflow.Actor{Email: "scheduler"}, "dry run", f.tick()); err != nil {
		t.Fatal(err)
	}
	owner, admin := f.owner, f.admins[0]
	at := func(s int) string { return fmt.Sprintf("2025-03-01T09:00:%02d.000000000Z", s) }
	return f, []goldenEvent{
		{at(3), owner.ID, owner.Email, "connection.create", "connection", 1, "red", 1, ""},
		{at(4), owner.ID, owner.Email, "connection.submit", "connection", 1, "red", 1, ""},
		{at(5), owner.ID, owner.Email, "connection.create", "connection", 2, "blue", 1, ""},
		{at(6), admin.ID, admin.Email, "connection.reject", "connection", 1, "red", 1, "no"},
		{at(7), admin.ID, admin.Email, "inventory.set", "cluster", 0, "", 0, "shared-hp ml.p5.48xlarge = 8"},
		{at(8), owner.ID, owner.Email, "connection.withdraw", "connection", 2, "blue", 1, "not needed"},
		{at(9), 0, "scheduler", "scheduler.reconcile", "cluster", 0, "", 0, "dry run"},
	}
}

// The chain the store writes is the one the documented form gives for the
// events the fixture made: dropping any field from the hash, or adding one,
// changes every hash and fails here.
func TestAuditChainMatchesIndependentHashes(t *testing.T) {
	// The reference implementation itself, pinned to a value computed
	// outside Go: printf '64:0…0|30:2025-03-01T09:00:03.000000000Z|1:1|22:owner.red@example.test|17:connection.create|10:connection|1:1|3:red|1:1|0:|' | sha256sum
	first := goldenEvent{"2025-03-01T09:00:03.000000000Z", 1, "owner.red@example.test", "connection.create", "connection", 1, "red", 1, ""}
	if got, want := refHash(strings.Repeat("0", 64), first), "d5805dd737e3fbecd0729800d6bdd36032110284bf325ba6819d3ac2d00c3557"; got != want {
		t.Fatalf("reference hash of the first event = %s, want %s", got, want)
	}

	f, want := goldenFixture(t)
	rows, err := f.raw.QueryContext(t.Context(), `SELECT id, prev_hash, hash FROM audit_events ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	prev := strings.Repeat("0", 64)
	i := 0
	for rows.Next() {
		var id int64
		var gotPrev, gotHash string
		if err := rows.Scan(&id, &gotPrev, &gotHash); err != nil {
			t.Fatal(err)
		}
		if i >= len(want) {
			t.Fatalf("event %d is not in the fixture's list", id)
		}
		h := refHash(prev, want[i])
		if id != int64(i+1) || gotPrev != prev || gotHash != h {
			t.Errorf("event %d (%s): prev_hash %s hash %s; want id %d, prev_hash %s, hash %s",
				id, want[i].action, gotPrev, gotHash, i+1, prev, h)
		}
		prev, i = h, i+1
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if i != len(want) {
		t.Errorf("%d events, want %d", i, len(want))
	}
}

// Changing any one column of one event, without the hashes, is found at
// that event (or, for its id, at the next one). Every column of the table
// has a case: a column added later must be added here, hashed or not.
func TestVerifyAuditFindsEveryColumnTampered(t *testing.T) {
	type tamper struct {
		column, set string
		row         int64 // the event changed
		wantID      int64 // where verification breaks
		wantReason  string
	}
	tests := []tamper{
		{"id", "id = 40", 4, 5, "prev_hash"}, // 1, 2, 3 verify; 5 follows 3
		{"at", "at = '2025-03-02T09:00:06.000000000Z'", 4, 4, "altered"},
		{"actor_id", "actor_id = 1", 4, 4, "altered"},
		{"actor_id", "actor_id = NULL", 4, 4, "altered"},
		{"actor_id", "actor_id = 2", 7, 7, "altered"}, // the system's event given a user
		{"actor", "actor = 'owner.red@example.test'", 4, 4, "altered"},
		{"action", "action = 'connection.request_changes'", 4, 4, "altered"},
		{"object_type", "object_type = 'cluster'", 4, 4, "altered"},
		{"object_id", "object_id = 2", 4, 4, "altered"},
		{"team", "team = 'blue'", 4, 4, "altered"},
		{"version", "version = 2", 4, 4, "altered"},
		{"reason", "reason = 'yes'", 4, 4, "altered"},
		{"prev_hash", "prev_hash = hash", 4, 4, "prev_hash"},
		{"hash", "hash = prev_hash", 4, 4, "altered"},
	}

	f, _ := goldenFixture(t)
	cols, err := f.raw.QueryContext(t.Context(), columnNames("audit_events"))
	if err != nil {
		t.Fatal(err)
	}
	var tableCols []string
	for cols.Next() {
		var c string
		if err := cols.Scan(&c); err != nil {
			t.Fatal(err)
		}
		tableCols = append(tableCols, c)
	}
	cols.Close()
	for _, c := range tableCols {
		if !slices.ContainsFunc(tests, func(tt tamper) bool {
			return tt.column == c
		}) {
			t.Errorf("column %s of audit_events has no tampering case", c)
		}
	}

	for _, tt := range tests {
		t.Run(tt.set+" on event "+strconv.FormatInt(tt.row, 10), func(t *testing.T) {
			f, _ := goldenFixture(t)
			ctx := t.Context()
			if n, brk, err := f.db.VerifyAudit(ctx); n != 7 || brk != nil || err != nil {
				t.Fatalf("before tampering: VerifyAudit = %d, %+v, %v", n, brk, err)
			}
			if _, err := f.raw.ExecContext(ctx, dropTrigger("audit_no_update", "audit_events")); err != nil {
				t.Fatal(err)
			}
			res, err := f.raw.ExecContext(ctx, `UPDATE audit_events SET `+tt.set+` WHERE id = ?`, tt.row)
			if err != nil {
				t.Fatal(err)
			}
			if n, _ := res.RowsAffected(); n != 1 {
				t.Fatalf("changed %d rows", n)
			}
			n, brk, err := f.db.VerifyAudit(ctx)
			if err != nil {
				t.Fatalf("VerifyAudit: %v", err)
			}
			wantN := int(tt.wantID - 1)
			if tt.column == "id" {
				wantN = int(tt.row - 1)
			}
			if brk == nil || brk.ID != tt.wantID || n != wantN || !strings.Contains(brk.Reason, tt.wantReason) {
				t.Errorf("VerifyAudit = %d verified, break %+v; want %d verified and a break at %d mentioning %q",
					n, brk, wantN, tt.wantID, tt.wantReason)
			}
		})
	}
}
