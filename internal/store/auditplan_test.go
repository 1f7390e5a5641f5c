package store_test

import (
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/store"
)

// TestAuditFilterPlans: every filter of the audit page reads its page from
// an index, newest first, without scanning the trail or sorting what
// matches (the trail grows with every decision; a page must not).
func TestAuditFilterPlans(t *testing.T) {
	db, _ := openDB(t, true)
	for name, f := range map[string]store.AuditFilter{
		"team":   {Team: "red"},
		"object": {ObjectType: "connection", ObjectID: 7},
		"actor":  {Actor: "owner.red@example.test"},
		"action": {Action: "connection.approve"},
	} {
		for _, before := range []int64{0, 5000} {
			q, args := store.AuditEventsQuery(f, before, 50)
			plan := strings.Join(explain(t, db, q, args...), "\n")
			if !strings.Contains(plan, "SEARCH audit_events USING INDEX") || strings.Contains(plan, "TEMP B-TREE") {
				t.Errorf("%s (before %d): not a walk of an index:\n%s", name, before, plan)
			}
		}
	}
}
