package workflow

import "time"

// AWSRecord is an AWS resource provisioning made (or removed) for a
// connection, as the last step that touched it saw it: its ids and ARN, for
// the connection page and for whoever cleans up by hand. The provisioning
// worker fills in what the step did; the store adds JobID and UpdatedAt
// when it records it.
type AWSRecord struct {
	ConnectionID int64
	Kind         string // awsprov.Kind: compute-quota, studio-domain, ...
	Name         string
	ResourceID   string
	ARN          string
	Version      int
	Action       string // created, updated, unchanged, deleted, kept
	JobID        int64
	UpdatedAt    time.Time
}
