package usage

import (
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
// exact in seconds beside the rounded hours.
var TaskCSVHeader = []string{"team", "period", "task", "namespace", "instance_type", "priority_class",
	"start", "end", "status", "accelerator_seconds", "accelerator_hours"}

// WriteTasksCSV writes the detailed task report for one team and period. A
// task still running has an empty end; its accelerator-seconds run to the
// period's end or now, whichever came first.
func WriteTasksCSV(w io.Writer, team, period string, tasks []Task) error {
	cw := csv.NewWriter(w)
	_ = cw.Write(TaskCSVHeader)
	for _, t := range tasks {
		end := ""
		if !t.End.IsZero() {
			end = t.End.UTC().Format(time.RFC3339)
		}
		_ = cw.Write([]string{team, period, t.Task, t.Namespace, t.InstanceType, t.PriorityClass,
			t.Start.UTC().Format(time.RFC3339), end, t.Status, strconv.FormatInt(t.AccelSeconds, 10), Hours(t.AccelSeconds)})
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
