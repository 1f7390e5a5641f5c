package usage

import (
	"cmp"
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"
)

// TaskCSVHeader is the detailed task report's columns: HyperPod's per-task
// report (task, namespace, priority class, execution window, status) with
// the accelerator-hours the task's pods held within the report's period,
// exact in seconds beside the rounded hours, and the missing data periods
// during the task's window. HyperPod's detailed report lists its "Missing
// data periods" above its table (docs.aws.amazon.com/sagemaker/latest/dg/
// sagemaker-hyperpod-usage-reporting-content.html, "Common report
// headers"; awslabs/sagemaker-hyperpod-usage-report csv_generator.py,
// generate_detailed_report); here each is a row of its own
// (MissingDataStatus), so the file stays one table.
var TaskCSVHeader = []string{"team", "period", "task", "namespace", "instance_type", "priority_class",
	"start", "end", "status", "accelerator_seconds", "accelerator_hours", "missing_data_periods"}

// MissingDataStatus is the status of a task report row that is a missing
// data period of the report's period rather than a task: its start and end
// are the period's, its reason in the task column, no accelerator-seconds.
const MissingDataStatus = "Missing data"

// WriteTasksCSV writes the detailed task report for one team and period:
// the missing data periods that touch it (missing, as store.DB.MissingIn
// selects them), then the tasks, each with the missing data periods during
// its window (a task's figures leave those out). A task still running has
// an empty end; its accelerator-seconds run to the period's end or now,
// whichever came first (to).
func WriteTasksCSV(w io.Writer, team, period string, tasks []Task, missing []Missing, to time.Time) error {
	cw := csv.NewWriter(w)
	_ = cw.Write(TaskCSVHeader)
	for _, m := range missing {
		_ = cw.Write([]string{team, period, m.Reason, "", "", "", m.From.UTC().Format(time.RFC3339), m.To.UTC().Format(time.RFC3339),
			MissingDataStatus, "0", Hours(0), MissingText([]Missing{m})})
	}
	for _, t := range tasks {
		end, windowEnd := "", to
		if !t.End.IsZero() {
			end, windowEnd = t.End.UTC().Format(time.RFC3339), t.End
		}
		var during []Missing
		for _, m := range missing {
			if m.Overlaps(t.Start, windowEnd) {
				during = append(during, m)
			}
		}
		_ = cw.Write([]string{team, period, t.Task, t.Namespace, t.InstanceType, t.PriorityClass,
			t.Start.UTC().Format(time.RFC3339), end, t.Status, strconv.FormatInt(t.AccelSeconds, 10), Hours(t.AccelSeconds),
			MissingText(during)})
	}
	cw.Flush()
	return cw.Error()
}

// ParseTasksCSV reads a detailed task report back (for its consumers'
// tests and for anyone checking a download), checking its header and that
// every row's exact seconds are a number.
func ParseTasksCSV(r io.Reader) ([]CSVRow, error) {
	recs, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 || !slices.Equal(recs[0], TaskCSVHeader) {
		return nil, fmt.Errorf("task report CSV: the header is not %v", TaskCSVHeader)
	}
	out := make([]CSVRow, 0, len(recs)-1)
	for i, rec := range recs[1:] {
		row := CSVRow{}
		for j, h := range TaskCSVHeader {
			row[h] = rec[j]
		}
		if _, err := strconv.ParseInt(row["accelerator_seconds"], 10, 64); err != nil {
			return nil, fmt.Errorf("task report CSV: row %d: accelerator_seconds %q is not a number", i+2, row["accelerator_seconds"])
		}
		out = append(out, row)
	}
	return out, nil
}

// TasksOf folds allocations into the detailed task report for [from, to):
// one line per Workload (names and priorityClasses by its uid; a pod
// without one is a task of its own), from its earliest start to its latest
// end (zero while a pod still runs, and then Running), with the
// accelerator-seconds its pods held within the period, by start. to is
// where still-running pods are counted until.
func TasksOf(as []Alloc, names, priorityClasses map[string]string, from, to time.Time) []Task {
	wpc := priorityClasses
	lo, hi := from.Unix(), to.Unix()
	byTask := map[string]*Task{}
	var order []string
	for _, a := range as {
		key := a.Task
		if key == "" {
			key = "pod:" + a.Key
		}
		t := byTask[key]
		if t == nil {
			t = &Task{Task: cmp.Or(names[a.Task], a.Pod), Team: a.Team, Namespace: a.Namespace, InstanceType: a.InstanceType,
				PriorityClass: cmp.Or(wpc[a.Task], a.PriorityClass), Start: a.Start, End: a.End, Status: a.Status}
			byTask[key] = t
			order = append(order, key)
		}
		if a.Start.Before(t.Start) {
			t.Start = a.Start
		}
		switch {
		case a.End.IsZero() || t.End.IsZero():
			t.End, t.Status = time.Time{}, cmp.Or(runningStatus(a, t), t.Status)
		case a.End.After(t.End):
			t.End, t.Status = a.End, a.Status
		}
		s, e := max(a.Start.Unix(), lo), hi
		if !a.End.IsZero() {
			e = min(a.End.Unix(), hi)
		}
		if e > s {
			t.AccelSeconds += a.Accelerators * (e - s)
		}
	}
	out := make([]Task, 0, len(order))
	for _, k := range order {
		out = append(out, *byTask[k])
	}
	slices.SortStableFunc(out, func(a, b Task) int { return a.Start.Compare(b.Start) })
	return out
}

// runningStatus: a task with a pod still running is Running.
func runningStatus(a Alloc, t *Task) string {
	if a.End.IsZero() {
		return a.Status
	}
	return t.Status
}
