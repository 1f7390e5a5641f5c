package review

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// evidence collects what a review of c shows its reviewer, as JSON of
// workflow.Evidence, frozen with the review when it opens. Each part that
// cannot be collected is named in Gaps with why. The same inputs give the
// same bytes (every list is sorted).
func (t *tick) evidence(ctx context.Context, c store.Connection, orphan string) ([]byte, error) {
	ev, err := Collect(ctx, t.s, c, orphan, t.now)
	if err != nil {
		return nil, err
	}
	return json.Marshal(ev)
}

// Collect gathers the evidence of a review of connection c at now.
func Collect(ctx context.Context, s *Scheduler, c store.Connection, orphan string, now time.Time) (workflow.Evidence, error) {
	db := s.DB
	ev := workflow.Evidence{CollectedAt: now.UTC(), Orphan: orphan, Changes: []workflow.EvidenceChange{},
		Owners: []workflow.EvidenceOwner{}, Signals: []workflow.EvidenceSignal{}}
	gap := func(format string, args ...any) { ev.Gaps = append(ev.Gaps, fmt.Sprintf(format, args...)) }

	// The approved contract, and its versions approved since the last
	// decided review (since the first approval when none was decided).
	approved, err := db.ApprovedVersions(ctx, c.ID)
	if err != nil {
		return ev, err
	}
	cur, err := db.Version(ctx, c.ID, c.ApprovedVersion)
	if err != nil {
		return ev, err
	}
	ev.Contract = workflow.EvidenceContract{Version: cur.Version, Hash: cur.Hash, Contract: cur.Contract}
	for _, a := range approved {
		if a.Version.Version == c.ApprovedVersion {
			ev.Contract.ApprovedAt = a.ApprovedAt.UTC()
		}
	}
	var since time.Time
	reviews, err := db.ReviewsOf(ctx, c.ID)
	if err != nil {
		return ev, err
	}
	for _, r := range reviews { // newest first
		if !r.Open() {
			since = r.DecidedAt
			break
		}
	}
	var prev *workflow.Contract
	for _, a := range approved {
		if !a.ApprovedAt.After(since) {
			pc := a.Version.Contract
			prev = &pc
			continue
		}
		ch := workflow.EvidenceChange{Version: a.Version.Version, Hash: a.Version.Hash, ApprovedAt: a.ApprovedAt.UTC(), ApprovedBy: a.ApprovedBy, Fields: []string{}}
		if prev == nil {
			ch.Fields = append(ch.Fields, "(first approved version)")
		} else {
			for _, d := range workflow.Diff(*prev, a.Version.Contract) {
				ch.Fields = append(ch.Fields, d.Field)
			}
		}
		pc := a.Version.Contract
		prev = &pc
		ev.Changes = append(ev.Changes, ch)
	}

	// The last drift report.
	switch d, err := db.Drift(ctx, c.ID); {
	case errors.Is(err, store.ErrNotFound):
		gap("drift: no drift check has run on this connection (the drift checker runs only with a cluster configured)")
	case err != nil:
		return ev, err
	default:
		ed := &workflow.EvidenceDrift{CheckedAt: d.CheckedAt.UTC(), Status: "in sync"}
		switch {
		case d.Error != "":
			ed.Status = "check failed: " + d.Error
		case len(d.Items) > 0:
			ed.Status = fmt.Sprintf("%d drift findings", len(d.Items))
		}
		for _, it := range d.Items {
			ed.Findings = append(ed.Findings, it.String())
		}
		sort.Strings(ed.Findings)
		ev.Drift = ed
	}

	// The exceptions granted since the last decided review, or still
	// not reverted.
	xs, err := db.Exceptions(ctx, c.ID)
	if err != nil {
		return ev, err
	}
	for _, x := range xs {
		if x.State == workflow.ExceptionReverted && !x.Start.After(since) {
			continue
		}
		ev.Exceptions = append(ev.Exceptions, workflow.EvidenceException{ID: x.ID, PriorityClass: x.PriorityClass, Reason: x.Reason,
			GrantedBy: x.GrantedBy, Start: x.Start.UTC(), End: x.End.UTC(), State: string(x.State), EndedEarlyBy: x.RevokedBy})
	}

	// The owners: their membership of the owners group and last sign-in.
	t := &tick{s: s, now: now, members: map[string]memberSet{}}
	owners, err := t.owners(ctx, c.Team, cur.Contract)
	if err != nil {
		return ev, err
	}
	ev.Owners = append(ev.Owners, owners...)
	sort.SliceStable(ev.Owners, func(i, j int) bool {
		if ev.Owners[i].Role != ev.Owners[j].Role {
			return ev.Owners[i].Role < ev.Owners[j].Role
		}
		return ev.Owners[i].Email < ev.Owners[j].Email
	})
	if len(s.OwnersGroups[c.Team]) == 0 {
		gap("owners group: no group is mapped to the owners of team %s, so membership is unknown", c.Team)
	} else if s.Directory == nil {
		gap("owners group: membership is as recorded at each owner's last sign-in (no Identity Store group sync configured)")
	}

	// Usage and cost over 30 and 90 days, and the last workload.
	if err := usageEvidence(ctx, s, c.Team, now, &ev); err != nil {
		return ev, err
	}

	// The team's open signals.
	sigs, err := db.SignalEvents(ctx, store.SignalFilter{Teams: []string{c.Team}, OpenOnly: true, Limit: 1000})
	if err != nil {
		return ev, err
	}
	for _, e := range sigs {
		ev.Signals = append(ev.Signals, workflow.EvidenceSignal{Signal: string(e.Signal), FiredAt: e.FiredAt.UTC(), Detail: e.Detail})
	}
	sort.Slice(ev.Signals, func(i, j int) bool {
		a, b := ev.Signals[i], ev.Signals[j]
		if !a.FiredAt.Equal(b.FiredAt) {
			return a.FiredAt.Before(b.FiredAt)
		}
		if a.Signal != b.Signal {
			return a.Signal < b.Signal
		}
		return a.Detail < b.Detail
	})
	sort.Strings(ev.Gaps)
	return ev, nil
}

// usageEvidence fills the usage windows from the team's stored hourly rows;
// without any rows it is a gap.
func usageEvidence(ctx context.Context, s *Scheduler, team string, now time.Time, ev *workflow.Evidence) error {
	end := usage.HourStart(now)
	hours, err := s.DB.UsageHours(ctx, store.UsageFilter{Team: team, From: end.Add(-90 * 24 * time.Hour), To: end})
	if err != nil {
		return err
	}
	if len(hours) == 0 {
		ev.Gaps = append(ev.Gaps, fmt.Sprintf("usage: no usage of team %s is recorded for the last 90 days (no usage collector, or no workload ran)", team))
		return nil
	}
	missing, err := s.DB.MissingIn(ctx, end.Add(-90*24*time.Hour), end)
	if err != nil {
		return err
	}
	u := &workflow.EvidenceUsage{}
	for _, w := range []struct {
		days int
		out  *workflow.EvidenceWindow
	}{{30, &u.Last30}, {90, &u.Last90}} {
		from := end.Add(-time.Duration(w.days) * 24 * time.Hour)
		win := workflow.EvidenceWindow{Days: w.days}
		var g, b int64
		for _, h := range hours {
			if h.Start.Before(from) {
				continue
			}
			g += h.GuaranteedAccelSeconds
			b += h.BorrowedAccelSeconds
		}
		win.GuaranteedGPUHours = round2(float64(g) / 3600)
		win.BorrowedGPUHours = round2(float64(b) / 3600)
		win.UsedGPUHours = round2(float64(g+b) / 3600)
		for _, m := range missing {
			if m.To.After(from) && m.From.Before(end) {
				win.Missing = true
			}
		}
		if s.Rates != nil {
			cost, err := teamCost(ctx, s, team, usage.Period{From: from, To: end})
			if err != nil {
				ev.Gaps = append(ev.Gaps, fmt.Sprintf("cost over %d days: %v", w.days, err))
			} else {
				win.Cost = cost
			}
		}
		*w.out = win
	}
	if s.Rates == nil {
		ev.Gaps = append(ev.Gaps, "cost: no rate card is configured, so usage is not priced")
	}
	for _, h := range hours {
		if h.AccelSeconds() > 0 || h.Running > 0 {
			if last := h.Start.Add(time.Hour).UTC(); last.After(u.LastWorkload) {
				u.LastWorkload = last
			}
		}
	}
	ev.Usage = u
	return nil
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

// teamCost is the team's charge over p under the cost policy in force, as
// the finance page and the statements compute it (usage.CostsOf): its
// direct charges and its shares of idle capacity and overhead.
func teamCost(ctx context.Context, s *Scheduler, team string, p usage.Period) (string, error) {
	pol, err := s.DB.CostPolicy(ctx)
	if err != nil {
		return "", err
	}
	c, err := usage.CostsOf(ctx, s.DB, p, pol.Policy, usage.Pricing{Rates: s.Rates, Accelerators: s.Accelerators})
	if err != nil {
		return "", err
	}
	return c.Team(team).Total.String(), nil
}
