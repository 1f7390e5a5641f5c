package store_test

import (
	"testing"
	"github.com/hyperpod-governance/portal/internal/store"
)

func TestScratchPlans(t *testing.T) {
	db, _ := openDB(t, true)
	base := `SELECT ` + store.ConnCols + ` FROM connections c JOIN users u ON u.id = c.requester_id`
	for _, q := range []string{
		base + ` ORDER BY c.id DESC LIMIT 51`,
		base + ` WHERE c.id < 100 ORDER BY c.id DESC LIMIT 51`,
		base + ` WHERE c.team IN ('a') ORDER BY c.id DESC LIMIT 51`,
		base + ` WHERE c.team IN ('a','b','c') ORDER BY c.id DESC LIMIT 51`,
		base + ` WHERE c.team IN ('a','b','c') AND c.id < 100 ORDER BY c.id DESC LIMIT 51`,
		base + ` WHERE c.team = 'a' ORDER BY c.id DESC LIMIT 51`,
		base + ` WHERE c.team = 'a' AND c.id < 100 ORDER BY c.id DESC LIMIT 51`,
		base + ` WHERE c.state = 'a' ORDER BY c.id DESC LIMIT 51`,
		base + ` WHERE c.team = 'a' AND c.state = 'b' ORDER BY c.id DESC LIMIT 51`,
		base + ` WHERE c.team = 'a' AND c.state = 'b' AND c.id < 100 ORDER BY c.id DESC LIMIT 51`,
		base + ` WHERE c.team IN ('a','b') AND c.state = 'b' ORDER BY c.id DESC LIMIT 51`,
		base + ` WHERE c.cluster_name = 'a' ORDER BY c.id DESC LIMIT 51`,
		base + ` WHERE c.purpose LIKE '%x%' ESCAPE '\' ORDER BY c.id DESC LIMIT 51`,
		base + ` WHERE c.state = 'submitted' ORDER BY c.submitted_at, c.id LIMIT 51`,
	} {
		rows, err := db.RawSQL().Query("EXPLAIN QUERY PLAN " + q)
		if err != nil { t.Fatal(err) }
		t.Log(q[len(base):])
		for rows.Next() {
			var id, parent, notused int; var detail string
			rows.Scan(&id, &parent, &notused, &detail)
			t.Log("   ", detail)
		}
		rows.Close()
	}
}
