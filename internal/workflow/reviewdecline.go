package workflow

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrNoRecommendation: declining needs a recommendation of revocation that
// waits for an admin (the connection under review, its last review decided
// with recommend_revocation, no review open).
var ErrNoRecommendation = errors.New("no recommendation of revocation waits for a decision on this connection")

// DeclineRevocationInput is an admin's answer to a reviewer's
// recommendation of revocation: keep the connection.
type DeclineRevocationInput struct {
	Reason string
	// Recommended: the connection's last review ended in a recommendation
	// of revocation and no review is open. The store reads it inside the
	// transaction that records the decline.
	Recommended bool
	// Approved is the connection's approved contract: its cadence and end
	// date set the next review's due date.
	Approved Contract
}

// DeclineRevocation is an admin declining a review's recommendation of
// revocation: the connection goes back to active (EventRenew, recorded as
// review.decline_revocation), its next review due a cadence later
// (NextReviewDue), and the reviewers and the team's owners are told. An
// admin who executes the recommendation revokes instead (Revoke).
func DeclineRevocation(s Conn, by Actor, in DeclineRevocationInput, now time.Time) (Effect, error) {
	if now.IsZero() {
		return Effect{}, ErrNoClock
	}
	reason := strings.TrimSpace(in.Reason)
	if reason == "" {
		return Effect{}, ErrReviewReason
	}
	if s.State != StateUnderReview || !in.Recommended {
		return Effect{}, ErrNoRecommendation
	}
	if err := independentOf(s, by); err != nil {
		return Effect{}, err
	}
	next, err := Transition(s.State, EventRenew, now)
	if err != nil {
		return Effect{}, err
	}
	due := NextReviewDue(now, in.Approved.ReviewCadenceDays, in.Approved.EndDate)
	subject := fmt.Sprintf("An admin declined the recommendation to revoke connection #%d of team %s: it stays active, next review due %s. %s",
		s.ID, s.Team, due, reason)
	return Effect{By: by, Next: next, ReviewDue: due,
		Audit: []AuditRecord{audit(by, "review.decline_revocation", s.ApprovedVersion, reason)},
		Notify: []Notice{
			{Kind: "review.decline_revocation", To: ToReviewers, Subject: subject},
			{Kind: "review.decline_revocation", To: ToTeam, Subject: subject},
		},
	}, nil
}
