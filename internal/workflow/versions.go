package workflow

// ShownVersion is the contract version a connection's page shows: a live
// connection with no change open shows the version that runs (a later
// version is a change that was withdrawn or rejected); otherwise the
// current version (a draft, a request, or an open change).
func ShownVersion(s State, a Amendment, current, approved int) int {
	if s.Live() && !a.Open() {
		return approved
	}
	return current
}

// DiffBase is the version the shown one is compared with: the approved
// version when there is one and it is not the one shown, else the previous
// version; 0 when there is none (version 1 of a never-approved request).
// Versions are numbered 1..current and never deleted.
func DiffBase(shown, approved int) int {
	switch {
	case approved > 0 && approved != shown:
		return approved
	case shown > 1:
		return shown - 1
	}
	return 0
}

// ApprovalCapacity is the capacity check an approval of this version
// makes (Approve): a new connection's guarantee must fit the free
// capacity; a change's increase must fit and a decrease always does
// (AmendCapacity). The approval page shows the same report.
func ApprovalCapacity(inventory map[string]int, committed []Capacity, amending bool, approved, requested []Capacity) CapacityReport {
	if amending {
		return AmendCapacity(inventory, committed, approved, requested)
	}
	return CheckCapacity(inventory, committed, requested)
}
