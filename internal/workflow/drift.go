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
	// HoldWant, on a queue's spec.stopPolicy item, is the stop policy the
	// check compared against: the connection's hold as the pass read it.
	HoldWant string `json:"hold_want,omitempty"`
}

// HoldDriftStillTrue keeps the items that are still drift when they are
// recorded: a queue's stopPolicy item was compared with the hold as the
// drift pass read it, minutes before; if the hold has changed since, or a
// hold job is queued or running (the queues are about to change), that
// item is a race, not drift, and is dropped (review finding: a hold placed
// during a pass wrote a permanent "drift.detected"). The store calls it
// inside the transaction that records the report.
func HoldDriftStillTrue(items []DriftItem, hold Hold, holdJobOpen bool) []DriftItem {
	out := []DriftItem{}
	for _, it := range items {
		if it.HoldWant != "" && (holdJobOpen || it.HoldWant != hold.StopPolicy()) {
			continue
		}
		out = append(out, it)
	}
	return out
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
