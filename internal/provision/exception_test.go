package provision

import (
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TestWithExceptions: an exception in effect adds its Kueue class to the
// parameter object's priorityClasses (what rule 2 reads) and lists it with
// its end; the plan's Hash stays the approved plan's; the plan it was made
// from is unchanged; exceptions of another connection or out of effect add
// nothing.
func TestWithExceptions(t *testing.T) {
	for _, tc := range admissionCases() {
		p, err := BuildPlan(42, 5, tc.c.Hash(), tc.c, tc.s)
		if err != nil {
			t.Fatal(err)
		}
		hash, yaml := p.Hash(), p.YAML()
		params := func(pl Plan) map[string]any {
			for _, o := range pl.Objects {
				if o.Kind == "ConfigMap" && o.Name == NameAdmissionParams {
					return o.Obj.Object["data"].(map[string]any)
				}
			}
			t.Fatal("no parameter object")
			return nil
		}
		end := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
		// A class of the cluster the contract's parameters do not carry.
		grant := ""
		for _, n := range tc.s.PriorityClassNames() {
			if !strings.Contains(","+params(p)["priorityClasses"].(string)+",", ","+tc.s.KueuePriorityClass(n)+",") {
				grant = n
				break
			}
		}
		x := workflow.Exception{ID: 9, ConnectionID: 42, PriorityClass: grant, State: workflow.ExceptionActive, End: end}
		other := x
		other.ConnectionID = 43
		ended := x
		ended.ID, ended.State = 10, workflow.ExceptionReverting
		got := p.WithExceptions([]workflow.Exception{x, other, ended}, tc.s)

		classes := strings.Split(params(got)["priorityClasses"].(string), ",")
		want := append(strings.Split(params(p)["priorityClasses"].(string), ","), tc.s.KueuePriorityClass(grant))
		if strings.Join(classes, ",") != strings.Join(want, ",") {
			t.Errorf("priorityClasses = %v, want %v", classes, want)
		}
		if note := params(got)[ExceptionDataKey]; note != tc.s.KueuePriorityClass(grant)+" until 2026-12-06T10:00:00Z (exception #9)" {
			t.Errorf("exceptions note = %v", note)
		}
		if _, ok := params(p)[ExceptionDataKey]; ok || p.YAML() != yaml {
			t.Error("WithExceptions changed the plan it was given")
		}
		if got.Hash() != hash {
			t.Error("an exception changed the plan hash")
		}
		if got.YAML() == yaml || !strings.Contains(got.YAML(), tc.s.KueuePriorityClass(grant)+" until") {
			t.Error("the plan's YAML does not show the exception")
		}
		if len(got.Exceptions) != 1 || got.Exceptions[0].ID != 9 {
			t.Errorf("plan exceptions = %+v", got.Exceptions)
		}
		if same := p.WithExceptions([]workflow.Exception{other, ended}, tc.s); same.YAML() != yaml || len(same.Exceptions) != 0 {
			t.Error("exceptions of another connection or out of effect changed the plan")
		}
	}
}

// TestExceptionMaxDaysSetting: the cluster file's exception_max_days is
// the grant's limit, 14 when absent; out of range is refused.
func TestExceptionMaxDaysSetting(t *testing.T) {
	if got := DefaultClusterSettings().ExceptionMaxDaysOrDefault(); got != workflow.DefaultExceptionMaxDays {
		t.Errorf("default = %d", got)
	}
	s := DefaultClusterSettings()
	s.ExceptionMaxDays = 30
	if got := s.ExceptionMaxDaysOrDefault(); got != 30 || s.Check() != nil {
		t.Errorf("30 = %d, %v", got, s.Check())
	}
	for _, bad := range []int{-1, MaxExceptionDays + 1} {
		s.ExceptionMaxDays = bad
		if s.Check() == nil {
			t.Errorf("ExceptionMaxDays %d accepted", bad)
		}
	}
	f, err := ParseClusterSettings([]byte("exception_max_days: 30\n"))
	if err != nil || f.ExceptionMaxDaysOrDefault() != 30 {
		t.Errorf("exception_max_days: 30 = %d, %v", f.ExceptionMaxDays, err)
	}
	if f, err := ParseClusterSettings([]byte("{}\n")); err != nil || f.ExceptionMaxDaysOrDefault() != workflow.DefaultExceptionMaxDays {
		t.Errorf("absent = %d, %v", f.ExceptionMaxDays, err)
	}
	if _, err := ParseClusterSettings([]byte("exception_max_days: 91\n")); err == nil || !strings.Contains(err.Error(), "exception_max_days") {
		t.Errorf("exception_max_days: 91 = %v", err)
	}
}
