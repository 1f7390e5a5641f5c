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
