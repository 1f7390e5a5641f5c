package views

// PlanDiffView is what approving an amendment changes: the difference
// between the plan of the connection's approved version and the plan of the
// amended one (provision.DiffPlans), for the admin's approval page.
type PlanDiffView struct {
	// FromVersion and ToVersion name the two contract versions (0: not
	// shown).
	FromVersion, ToVersion int
	// Rows in the order the amendment runs them (provision.PlanDiff.Rows;
	// convert each with PlanDiffRow(row)).
	Rows []PlanDiffRow
	// Empty: nothing is created, updated or deleted.
	Empty bool
	// Error says why there is no diff (a plan could not be built).
	Error string
}

// PlanDiffRow is one object or AWS resource of a PlanDiffView. Its fields
// are those of provision.DiffRow.
type PlanDiffRow struct {
	// Action is create, update, delete, unchanged or keep.
	Action string
	// What names it: "ResourceQuota hyperpod-ns-red/team-quota".
	What string
	// Detail says what changes, or why it is kept.
	Detail string
}

// Changed are the rows that are not unchanged, in order.
func (v PlanDiffView) Changed() []PlanDiffRow {
	var out []PlanDiffRow
	for _, r := range v.Rows {
		if r.Action != "unchanged" {
			out = append(out, r)
		}
	}
	return out
}

// Unchanged are the unchanged rows, in order.
func (v PlanDiffView) Unchanged() []PlanDiffRow {
	var out []PlanDiffRow
	for _, r := range v.Rows {
		if r.Action == "unchanged" {
			out = append(out, r)
		}
	}
	return out
}
