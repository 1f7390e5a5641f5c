package workflow

import (
	"fmt"
	"strings"
)

// DriftItem is one difference between what is live (the cluster's objects,
// the AWS resources) and a connection's approved plan: the drift check of
// internal/provision finds it, internal/store keeps it (as JSON, hence the
// tags: they are the stored format) and the pages show it.
type DriftItem struct {
	Kind   string   `json:"kind"`
	Ref    string   `json:"ref"`
	What   string   `json:"what"`             // "changed", "deleted" or "extra"
	Fields []string `json:"fields,omitempty"` // for changed: the paths that differ, e.g. spec.hard
	Detail string   `json:"detail,omitempty"`
}

// DriftBasis is what a drift pass compared a connection's cluster objects
// with: the approved version whose plan it built and, when it compared the
// queues' stopPolicy, the one the connection's hold put there (Hold's
// StopPolicy; "" when not compared).
type DriftBasis struct {
	Version    int
	StopPolicy string
}

// DriftReportStale reports whether a drift report made on basis minutes
// ago no longer describes the connection as it is when it is recorded: its
// approved version moved (an amendment applied during the pass), the hold
// the queues were compared with changed, or a job of it is queued or
// running (its objects are about to change). Such a report is a race of
// the pass with that change, not drift, and is not recorded; the next pass
// checks again. The store calls it inside the transaction that records
// the report.
func DriftReportStale(b DriftBasis, approvedVersion int, hold Hold, jobOpen bool) bool {
	return jobOpen || approvedVersion != b.Version || b.StopPolicy != "" && b.StopPolicy != hold.StopPolicy()
}

// DriftAudit is the audit action a recorded drift check calls for:
// "drift.detected" when a check that ran finds items and the last report
// had none (before <= 0: none, or no report yet), "drift.resolved" when it
// finds none and the last report had some, "" otherwise. A failed check
// (checkErr) says nothing about drift.
func DriftAudit(before, found int, checkErr string) string {
	switch {
	case checkErr != "":
		return ""
	case found > 0 && before <= 0:
		return "drift.detected"
	case found == 0 && before > 0:
		return "drift.resolved"
	}
	return ""
}

// String is the item in one line: kind, ref, what, the fields and the
// detail.
func (d DriftItem) String() string {
	s := fmt.Sprintf("%s %s %s", d.Kind, d.Ref, d.What)
	if len(d.Fields) > 0 {
		s += ": " + strings.Join(d.Fields, ", ")
	}
	if d.Detail != "" {
		s += " (" + d.Detail + ")"
	}
	return s
}
