package workflow

import (
	"slices"
	"strings"
)

// CapacityRow is the approval math for one instance type.
type CapacityRow struct {
	InstanceType string
	Capacity     int  // the cluster's inventory
	Committed    int  // guaranteed to approved and active connections
	Requested    int  // guaranteed by this request
	After        int  // Committed + Requested
	OK           bool // After <= Capacity (for an amendment, or Requested <= Held)
	// Held, for an amendment (AmendCapacity), is what the connection's
	// approved version already guarantees of the type.
	Held int
}

// CapacityReport is the capacity check shown on the approval page.
type CapacityReport struct {
	Rows []CapacityRow // one per instance type, sorted by instance type
}

// OK reports whether the request fits: every instance type it asks for
// stays within the cluster's capacity. A type already over-committed by
// earlier approvals (the inventory shrank) shows as not OK, but does not
// block a request that asks for none of it.
func (r CapacityReport) OK() bool {
	for _, row := range r.Rows {
		if row.Requested > 0 && !row.OK {
			return false
		}
	}
	return true
}

// CheckCapacity adds a request's guaranteed capacity to what is already
// committed (the guaranteed capacity of every other connection whose State
// is Committed) and compares the sums with the cluster inventory, per
// instance type. A type missing from the inventory has capacity 0, so any
// guarantee of it is over-commitment. Instance types are compared
// case-insensitively.
func CheckCapacity(inventory map[string]int, committed []Capacity, requested []Capacity) CapacityReport {
	rows := map[string]*CapacityRow{}
	row := func(t string) *CapacityRow {
		t = strings.ToLower(strings.TrimSpace(t))
		if rows[t] == nil {
			rows[t] = &CapacityRow{InstanceType: t}
		}
		return rows[t]
	}
	for t, n := range inventory {
		row(t).Capacity += n
	}
	for _, c := range committed {
		row(c.InstanceType).Committed += c.Count
	}
	for _, c := range requested {
		row(c.InstanceType).Requested += c.Count
	}
	out := CapacityReport{Rows: make([]CapacityRow, 0, len(rows))}
	for _, r := range rows {
		r.After = r.Committed + r.Requested
		r.OK = r.After <= r.Capacity
		out.Rows = append(out.Rows, *r)
	}
	slices.SortFunc(out.Rows, func(a, b CapacityRow) int { return strings.Compare(a.InstanceType, b.InstanceType) })
	return out
}
