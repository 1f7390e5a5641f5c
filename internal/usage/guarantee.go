package usage

import "time"

// GuaranteeStep is a team's guarantee on one instance type from From on,
// until the next step: Count instances, or accelerators once converted
// (GuaranteeHistory.InAccelerators).
type GuaranteeStep struct {
	From  time.Time
	Count int64
}

// GuaranteeHistory is each team's guarantee over time: team -> instance
// type -> steps by From. A team's guarantee at an instant is the last step
// at or before it (none before the first step). The store keeps it from
// the moment each approved version took effect (internal/store,
// team_guarantee_history), so that every second of usage is split, and
// every shared cost weighed, by the guarantee in force at that second, and
// a later change never moves a past figure (issue 38).
type GuaranteeHistory map[string]map[string][]GuaranteeStep

// Add appends a step (in order of From) to team's history on itype.
func (h GuaranteeHistory) Add(team, itype string, from time.Time, count int64) {
	if h[team] == nil {
		h[team] = map[string][]GuaranteeStep{}
	}
	h[team][itype] = append(h[team][itype], GuaranteeStep{From: from.UTC(), Count: count})
}

// At is team's guarantee on itype at t.
func (h GuaranteeHistory) At(team, itype string, t time.Time) int64 {
	return stepAt(h[team][itype], t.Unix())
}

func stepAt(steps []GuaranteeStep, u int64) int64 {
	var n int64
	for _, s := range steps {
		if s.From.Unix() > u {
			break
		}
		n = s.Count
	}
	return n
}

// History is g in force since ever: for callers (and tests) whose
// guarantee never changed.
func (g Guarantees) History() GuaranteeHistory {
	h := GuaranteeHistory{}
	for team, types := range g {
		for itype, n := range types {
			h.Add(team, itype, time.Time{}, n)
		}
	}
	return h
}

// InAccelerators converts a history in instances to accelerators, each
// instance type at perInstance of its own (0 for a type it does not know).
func (h GuaranteeHistory) InAccelerators(perInstance func(itype string) int64) GuaranteeHistory {
	out := GuaranteeHistory{}
	for team, types := range h {
		for itype, steps := range types {
			n := perInstance(itype)
			for _, s := range steps {
				out.Add(team, itype, s.From, s.Count*n)
			}
		}
	}
	return out
}

// During calls f with each piece of [from, to) over which team's guarantee
// on itype stays the same, and that guarantee.
func (h GuaranteeHistory) During(team, itype string, from, to time.Time, f func(from, to time.Time, count int64)) {
	lo, hi := from.Unix(), to.Unix()
	steps := h[team][itype]
	cuts := []int64{lo}
	for _, s := range steps {
		if u := s.From.Unix(); u > lo && u < hi {
			cuts = append(cuts, u)
		}
	}
	cuts = append(cuts, hi)
	for i := 0; i+1 < len(cuts); i++ {
		if cuts[i] < cuts[i+1] {
			f(time.Unix(cuts[i], 0).UTC(), time.Unix(cuts[i+1], 0).UTC(), stepAt(steps, cuts[i]))
		}
	}
}

// Latest is each team's guarantee now, per instance type (the last steps),
// without the zero ones.
func (h GuaranteeHistory) Latest() Guarantees {
	out := Guarantees{}
	for team, types := range h {
		for itype, steps := range types {
			if n := len(steps); n > 0 && steps[n-1].Count != 0 {
				if out[team] == nil {
					out[team] = map[string]int64{}
				}
				out[team][itype] = steps[n-1].Count
			}
		}
	}
	return out
}
