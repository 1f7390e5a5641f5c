package web

import "testing"

// A waiting workload's place in words: Kueue's position (from 1) of its
// count, or what of the two is known (0 is unknown).
func TestQueuePlace(t *testing.T) {
	for _, tc := range []struct {
		position, waiting int32
		want              string
	}{
		{2, 3, "2 of 3 waiting in this queue"},
		{1, 0, "number 1 in this queue"},
		{0, 3, "3 waiting in this queue (position unknown)"},
		{0, 0, ""},
	} {
		if got := queuePlace(tc.position, tc.waiting); got != tc.want {
			t.Errorf("queuePlace(%d, %d) = %q, want %q", tc.position, tc.waiting, got, tc.want)
		}
	}
}
