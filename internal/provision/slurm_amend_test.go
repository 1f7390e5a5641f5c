package provision

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/provision/slurmprov"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

func slurmDiffSettings() ClusterSettings {
	s := DefaultClusterSettings()
	s.Slurm = SlurmSettings{Cluster: "hp-slurm"}
	return s
}

// TestDiffPlansSlurmRename: the plan diff of an amendment renaming the
// account and the QoS lists, in order, exactly the sacctmgr commands
// slurmprov.AmendCommands gives (the amendment job's), as creates then
// deletes, each with its command; the old account and QoS are deleted.
func TestDiffPlansSlurmRename(t *testing.T) {
	from, to := amendedPlans(t, slurmTestContract(), func(c *workflow.Contract) {
		c.SlurmScope.Account, c.SlurmScope.QoS = "red2", "red2-gpu"
	}, slurmDiffSettings())
	d := DiffPlans(from, to)
	want := slurmprov.AmendCommands(*from.Slurm, *to.Slurm)
	if len(d.Changes) != len(want) || len(want) == 0 {
		t.Fatalf("diff has %d rows, the amendment %d commands: %+v", len(d.Changes), len(want), d.Rows())
	}
	for i, c := range d.Changes {
		if !strings.HasPrefix(c.Detail, want[i].String()+" (") {
			t.Errorf("row %d detail %q, want the command %q", i, c.Detail, want[i])
		}
		wantAction := map[string]DiffAction{"add": DiffCreate, "modify": DiffUpdate, "delete": DiffDelete}[want[i].Args[0]]
		if c.Action != wantAction {
			t.Errorf("row %d (%s) action %s, want %s", i, want[i], c.Action, wantAction)
		}
	}
	got := changed(d)
	for what, action := range map[string]DiffAction{
		"Slurm QoS red2-gpu": DiffCreate,
		"Slurm account red2": DiffCreate,
		"Slurm user owner.red in account red2, partition gpu": DiffCreate,
		"Slurm coordinators of account red2":                  DiffCreate,
		"Slurm user owner.red":                                DiffUpdate, // its default account
		"Slurm coordinators of account red":                   DiffDelete,
		"Slurm user owner.red in account red, partition gpu":  DiffDelete,
		"Slurm account red":                                   DiffDelete,
		"Slurm QoS red-gpu":                                   DiffDelete,
	} {
		if got[what] != action {
			t.Errorf("%s: %q, want %s (rows %v)", what, got[what], action, got)
		}
	}
	if d.Empty() || len(d.DeleteSteps()) != 0 {
		t.Errorf("empty %v, delete steps %v: the Slurm removals are the retire step's, not Kubernetes deletes", d.Empty(), d.DeleteSteps())
	}
}

// TestDiffPlansSlurmRenameHeld: for a team on hold, the diff of a rename
// shows the new account added with GrpJobs=0 (the command
// slurmprov.ApplyKeepingHold runs), and only that row differs from the
// unheld diff; a proposed hold (not applied) and an amendment that keeps
// the account show what they show without a hold.
func TestDiffPlansSlurmRenameHeld(t *testing.T) {
	from, to := amendedPlans(t, slurmTestContract(), func(c *workflow.Contract) { c.SlurmScope.Account = "red2" }, slurmDiffSettings())
	plain := DiffPlans(from, to)
	for _, h := range []workflow.Hold{workflow.HoldOn, workflow.HoldDrain} {
		held := DiffPlansHeld(from, to, h)
		if len(held.Changes) != len(plain.Changes) {
			t.Fatalf("%s: %d rows, unheld %d", h, len(held.Changes), len(plain.Changes))
		}
		differ := 0
		for i, c := range held.Changes {
			if c.Detail == plain.Changes[i].Detail {
				continue
			}
			differ++
			if c.What != "Slurm account red2" || c.Action != DiffCreate ||
				!strings.HasPrefix(c.Detail, "sacctmgr -i add account red2 ") || !strings.Contains(c.Detail, " GrpJobs=0 (") {
				t.Errorf("%s: row %d %s %q, want the new account added with GrpJobs=0", h, i, c.What, c.Detail)
			}
		}
		if differ != 1 {
			t.Errorf("%s: %d rows differ from the unheld diff, want 1 (the new account's add)", h, differ)
		}
	}
	for _, h := range []workflow.Hold{workflow.HoldNone, workflow.HoldProposed} {
		if got := DiffPlansHeld(from, to, h); !reflect.DeepEqual(got.Rows(), plain.Rows()) {
			t.Errorf("%q: the diff differs from the unheld one", h)
		}
	}
	from, to = amendedPlans(t, slurmTestContract(), func(c *workflow.Contract) { c.Scheduling.Guaranteed[0].Count++ }, slurmDiffSettings())
	if got, want := DiffPlansHeld(from, to, workflow.HoldOn).Rows(), DiffPlans(from, to).Rows(); !reflect.DeepEqual(got, want) {
		t.Errorf("an amendment keeping the account, on hold: %v, want %v", got, want)
	}
}

// TestDiffPlansSlurmLimit: a larger guarantee modifies the QoS and the
// account's GrpTRES in place, each row naming the old and new value
// (computed here from the two plans); a contract change that changes no
// Slurm object is one unchanged row and an empty diff.
func TestDiffPlansSlurmLimit(t *testing.T) {
	from, to := amendedPlans(t, slurmTestContract(), func(c *workflow.Contract) { c.Scheduling.Guaranteed[0].Count++ }, slurmDiffSettings())
	d := DiffPlans(from, to)
	oldLimit, newLimit := from.Slurm.QoS.GrpTRES["gres/gpu"], to.Slurm.QoS.GrpTRES["gres/gpu"]
	if newLimit <= oldLimit {
		t.Fatalf("oracle: limit %d → %d", oldLimit, newLimit)
	}
	change := "GrpTRES: gres/gpu=" + strconv.Itoa(oldLimit) + " → gres/gpu=" + strconv.Itoa(newLimit)
	rows := d.Rows()
	want := []DiffRow{
		{"update", "Slurm QoS red-gpu", "sacctmgr -i modify qos where name=red-gpu set GrpTRES=gres/gpu=" + strconv.Itoa(newLimit) + " (" + change + ")"},
		{"update", "Slurm account red", "sacctmgr -i modify account where name=red cluster=hp-slurm set GrpTRES=gres/gpu=" + strconv.Itoa(newLimit) + " (" + change + ")"},
	}
	if !slices.Equal(rows, want) {
		t.Errorf("rows =\n%v\nwant\n%v", rows, want)
	}

	from, to = amendedPlans(t, slurmTestContract(), func(c *workflow.Contract) { c.BusinessPurpose += " (amended)" }, slurmDiffSettings())
	if d := DiffPlans(from, to); !d.Empty() || len(d.Changes) != 1 || d.Changes[0].Action != DiffUnchanged {
		t.Errorf("no Slurm change: %+v", d.Rows())
	}
}

// TestSlurmAmendSteps: an amendment renaming the account gets a retire
// step after the apply, naming the old and new account; one that renames
// nothing is the apply alone.
func TestSlurmAmendSteps(t *testing.T) {
	from, to := amendedPlans(t, slurmTestContract(), func(c *workflow.Contract) { c.SlurmScope.Account = "red2" }, slurmDiffSettings())
	var names []string
	for _, s := range SlurmAmendSteps(from, to) {
		names = append(names, s.Name())
	}
	want := []string{
		"sacctmgr: account red2, QoS red-gpu and members on hp-slurm",
		"sacctmgr: remove the old account red (renamed red2) with its members and coordinators from hp-slurm",
	}
	if !slices.Equal(names, want) {
		t.Errorf("steps %q, want %q", names, want)
	}
	// The apply of a renamed account keeps a hold of the old one
	// (slurmprov.ApplyKeepingHold): it names the approved plan.
	if s := SlurmAmendSteps(from, to); s[0].SlurmFrom != from.Slurm || !strings.Contains(s[0].Detail, "hold (GrpJobs=0) on account red moves to account red2") {
		t.Errorf("renaming apply step: from %v, detail %q; want the approved plan and the hold's move", s[0].SlurmFrom, s[0].Detail)
	}
	from, to = amendedPlans(t, slurmTestContract(), func(c *workflow.Contract) { c.Scheduling.Guaranteed[0].Count++ }, slurmDiffSettings())
	if s := SlurmAmendSteps(from, to); len(s) != 1 || s[0].Action != ActionSlurmApply || s[0].SlurmFrom != nil {
		t.Errorf("no rename: %+v", s)
	}
}
