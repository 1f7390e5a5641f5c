package usage_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/usage"
)

// TestFiguresOf: the usage page's (and the API's) figures, worked by hand:
// two days, three hours, one without admissions; every day of the period
// is a day of the figures, one without use too.
func TestFiguresOf(t *testing.T) {
	d0 := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	rows := []usage.Hour{
		{Team: "red", InstanceType: "a", Start: d0.Add(1 * time.Hour), GuaranteedAccelSeconds: 7200, BorrowedAccelSeconds: 0, Running: 2, Pending: 1, WaitP50Seconds: 10, WaitP90Seconds: 20, WaitP99Seconds: 30},
		{Team: "red", InstanceType: "b", Start: d0.Add(1 * time.Hour), GuaranteedAccelSeconds: 3600, BorrowedAccelSeconds: 1800, Running: 1, Preempted: 1, WaitP50Seconds: 40, WaitP90Seconds: 50, WaitP99Seconds: 60},
		{Team: "red", InstanceType: "a", Start: d0.Add(2 * time.Hour), GuaranteedAccelSeconds: 3600, Running: 1, Pending: 4, WaitP50Seconds: -1, WaitP90Seconds: -1, WaitP99Seconds: -1},
		{Team: "red", InstanceType: "a", Start: d0.Add(25 * time.Hour), BorrowedAccelSeconds: 900, Preempted: 2, WaitP50Seconds: 5, WaitP90Seconds: 6, WaitP99Seconds: 700},
	}
	f := usage.FiguresOf(usage.SumByHour(rows), d0, d0.AddDate(0, 0, 3))
	// Hour 1 folds a and b: waits are the larger of each (40, 50, 60).
	// The hours with admissions: hour 1 (40, 50, 60) and hour 25 (5, 6,
	// 700); the median of two is the lower (nearest rank).
	want := usage.PeriodFigures{
		Days: []usage.DayFigures{
			{Day: d0, GuaranteedAccelSeconds: 14400, BorrowedAccelSeconds: 1800, Preempted: 1},
			{Day: d0.AddDate(0, 0, 1), BorrowedAccelSeconds: 900, Preempted: 2},
			{Day: d0.AddDate(0, 0, 2)},
		},
		GuaranteedAccelSeconds: 14400, BorrowedAccelSeconds: 2700, PeakRunning: 3, PeakPending: 4, Preemptions: 3,
		WaitHours: 2, MedianP50: 5, MedianP90: 6, MedianP99: 60, WorstP50: 40, WorstP90: 50, WorstP99: 700,
	}
	if len(f.Days) != len(want.Days) {
		t.Fatalf("days %+v", f.Days)
	}
	for i := range want.Days {
		if f.Days[i] != want.Days[i] {
			t.Errorf("day %d = %+v, want %+v", i, f.Days[i], want.Days[i])
		}
	}
	f.Days, want.Days = nil, nil
	if !reflect.DeepEqual(f, want) {
		t.Errorf("figures %+v\nwant    %+v", f, want)
	}
	if e := usage.FiguresOf(nil, d0, d0.Add(time.Hour)); e.WaitHours != 0 || e.MedianP50 != -1 || e.WorstP99 != -1 || len(e.Days) != 1 {
		t.Errorf("no hours: %+v", e)
	}
}
