package awsprov

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// FailedError is a resource the service failed to create, update or delete
// (a compute quota in CreateFailed, a domain in Failed, ...). It is
// permanent: retrying the same step fails the same way until someone looks
// at the FailureReason.
type FailedError struct {
	Kind     string // "compute quota", "domain", "scheduler config"
	Name, ID string
	Status   string
	Reason   string
}

func (e *FailedError) Error() string {
	reason := e.Reason
	if reason == "" {
		reason = "no failure reason given"
	}
	return fmt.Sprintf("%s %s (%s): %s: %s", e.Kind, e.Name, e.ID, e.Status, reason)
}

// Permanent marks the error for IsPermanent.
func (e *FailedError) Permanent() bool { return true }

// TimeoutError is a resource still not settled after PollConfig.Timeout. It
// is transient: a later run picks the resource up where it is.
type TimeoutError struct {
	Kind     string
	Name, ID string
	Status   string
	After    time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("%s %s (%s): still %s after %s", e.Kind, e.Name, e.ID, e.Status, e.After)
}

// settling says what a resource's statuses mean while a step waits for it.
type settling struct {
	kind, name, id string
	done, failed   []string
	// abort are statuses that end the wait with a transient error: the
	// message says why (e.g. "is being deleted; retry later").
	abort map[string]string
}

// waitFor polls describe until the resource reaches a done status, and
// fails with a FailedError (with the reason describe gives) or a
// TimeoutError. Time waited is counted in intervals slept, not read from the
// clock, so a test's Sleep that returns at once still ends at the timeout.
func waitFor[T any](ctx context.Context, poll PollConfig, s settling, describe func(context.Context) (out T, status, reason string, err error)) (T, error) {
	var zero T
	var waited time.Duration
	for {
		out, status, reason, err := describe(ctx)
		switch {
		case err != nil:
			return zero, err
		case slices.Contains(s.done, status):
			return out, nil
		case slices.Contains(s.failed, status):
			return out, &FailedError{Kind: s.kind, Name: s.name, ID: s.id, Status: status, Reason: reason}
		case s.abort[status] != "":
			return zero, fmt.Errorf("%s %s (%s): %s", s.kind, s.name, s.id, s.abort[status])
		}
		if waited+poll.Interval > poll.Timeout {
			return zero, &TimeoutError{Kind: s.kind, Name: s.name, ID: s.id, Status: status, After: waited}
		}
		if err := poll.Sleep(ctx, poll.Interval); err != nil {
			return zero, fmt.Errorf("%s %s (%s): waiting: %w", s.kind, s.name, s.id, err)
		}
		waited += poll.Interval
	}
}
