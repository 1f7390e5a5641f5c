package workflow

import "testing"

// TestDriftAudit: drift is reported when it appears and when it goes, once
// each; a failed check reports nothing.
func TestDriftAudit(t *testing.T) {
	for _, tc := range []struct {
		before, found int
		err, want     string
	}{
		{-1, 0, "", ""}, {-1, 2, "", "drift.detected"}, {0, 1, "", "drift.detected"},
		{3, 1, "", ""}, {3, 0, "", "drift.resolved"}, {0, 0, "", ""},
		{0, 2, "cluster unreachable", ""}, {2, 0, "cluster unreachable", ""},
	} {
		if got := DriftAudit(tc.before, tc.found, tc.err); got != tc.want {
			t.Errorf("DriftAudit(%d, %d, %q) = %q, want %q", tc.before, tc.found, tc.err, got, tc.want)
		}
	}
}
