package web

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// noRateCard is what pages say when the portal has no prices.
const noRateCard = "No rate card is configured (--rate-card), so usage is shown without money: hours only, no cost, no statements frozen."

// accelerators is what one instance of each type carries.
func (s *Server) accelerators() map[string]usage.InstanceAccel {
	return usage.AcceleratorsOf(s.opts.Cluster.AcceleratorTable())
}

// pricing is the rate card and accelerator table money is computed with.
func (s *Server) pricing() usage.Pricing {
	return usage.Pricing{Rates: s.opts.RateCard, Accelerators: s.accelerators()}
}

// costView is one period's chargeback as the pages show it. Without a rate
// card, Priced is false and the chargeback is computed at price zero, for
// its hours only.
type costView struct {
	cb        *usage.Chargeback
	in        usage.ChargeInput
	missing   []usage.Missing
	priced    bool
	demoUsage bool
}

// charge computes a period's chargeback under a policy (usage.CostsOf:
// the same figures as the statements and the review evidence). The input
// is each team's hours summed between the rate card's changes (the same
// chargeback as from every hourly row, read in a few rows per team:
// BenchmarkFinancePages).
func (s *Server) charge(ctx context.Context, p usage.Period, pol usage.Policy) (costView, error) {
	c, err := usage.CostsOf(ctx, s.opts.DB, p, pol, s.pricing())
	return costView{cb: c.Chargeback, in: c.Input, missing: c.Missing, priced: c.Priced, demoUsage: c.DemoUsage}, err
}

// monthToDate is the current month up to the end of the current hour.
func monthToDate(now time.Time) (month, toDate usage.Period) {
	month = usage.MonthOf(now)
	return month, usage.Period{From: month.From, To: usage.HourStart(now).Add(time.Hour)}
}

// monthSoFar is the current month's chargeback to date under the policy in
// force: what /finance and the team usage page's cost block show. It is
// computed once per cost input version and hour (monthCache); the result
// is shared: read it, never change it.
func (s *Server) monthSoFar(ctx context.Context, now time.Time) (month, toDate usage.Period, pol store.CostPolicyVersion, v costView, err error) {
	month, toDate = monthToDate(now)
	// The version is read before the inputs (store.DB.CostInputVersion).
	ver, err := s.opts.DB.CostInputVersion(ctx)
	if err != nil {
		return month, toDate, pol, v, err
	}
	pol, v, err = s.monthCache.get(ctx, monthKey{version: ver, toDate: toDate}, func() (store.CostPolicyVersion, costView, error) {
		pol, err := s.opts.DB.CostPolicy(ctx)
		if err != nil {
			return pol, costView{}, err
		}
		v, err := s.charge(ctx, toDate, pol.Policy)
		return pol, v, err
	})
	return month, toDate, pol, v, err
}

func missingText(ms []usage.Missing) []string {
	var out []string
	for _, m := range ms {
		out = append(out, fmt.Sprintf("%s to %s on %s: %s", m.From.UTC().Format("2006-01-02 15:04"), m.To.UTC().Format("2006-01-02 15:04 UTC"), m.Cluster, m.Reason))
	}
	return out
}

func unpricedText(us []usage.Unpriced) []string {
	var out []string
	for _, u := range us {
		out = append(out, fmt.Sprintf("%s accelerator-hours of %s (%s); charged nothing", usage.Hours(u.AccelSeconds), u.InstanceType, u.Reason))
	}
	return out
}

func statementURL(team, month string) string { return "/teams/" + team + "/statements/" + month }

// TeamCostBlock is a team's cost to date and projected month end, for the
// team usage page to embed (views.CostBlockView). The caller has already
// decided the viewer may read the team's usage; money is shown under the
// statements' rule (workflow.ActionViewCosts: finance and the team's
// owners), so a viewer who may not read the statements gets no block
// (ok false) rather than the figures they add up to (issue 32 item 3).
func (s *Server) TeamCostBlock(ctx context.Context, p workflow.Principal, team string) (b views.CostBlock, ok bool, err error) {
	if !workflow.Decide(p, workflow.ActionViewCosts, workflow.Object{Team: team}).Allowed {
		return views.CostBlock{}, false, nil
	}
	now := s.opts.Now()
	month, _, _, v, err := s.monthSoFar(ctx, now)
	if err != nil {
		return views.CostBlock{}, false, err
	}
	tc := v.cb.Team(team)
	b = views.CostBlock{Team: team, Month: month.From.Format("2006-01"), Priced: v.priced, Why: noRateCard,
		DemoUsage: v.demoUsage, Missing: missingText(v.missing)}
	if v.priced {
		b.DemoPrices = s.opts.RateCard.Demo
		b.ToDate = tc.Total.String()
		b.Projected = usage.Project(tc.Total, now.Sub(month.From), month.To.Sub(month.From)).String()
	}
	b.StatementURL = statementURL(team, b.Month)
	return b, true, nil
}

// financeHome is finance's page: every team's month to date, the missing
// data periods, the frozen statements, and the policy editor with its
// preview.
func (s *Server) financeHome(c echo.Context) error {
	p, err := authorize(c, workflow.ActionViewFinanceHome, workflow.Object{})
	if err != nil {
		return err
	}
	// ?page=N: the N-th window of teams (a page number that is not one
	// shows the first window, one past the last the last, as the
	// connection list treats its cursor).
	page, _ := strconv.Atoi(c.QueryParam("page"))
	f, err := s.financeView(c.Request().Context(), p, page, views.PolicyForm{}, nil)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.FinancePage(s.page(c, "Usage and cost"), f))
}

// financeTeamsPerPage is how many teams the finance page shows at once.
// With every team on one page, 1,000 teams made a 688 KiB page, and bare
// echo serving those bytes alone had a p99 of 49 ms at 64 clients on this
// 2-core machine (make bench, 2026-12-06), over the page target of 20.
const financeTeamsPerPage = 50

// windowFinance narrows f to the page-th window of financeTeamsPerPage
// teams, by name: the month's table, the statements and the preview's rows
// show the teams of the window (the preview keeps its unallocated and
// premium rows), and f.Window says which teams these are and links the
// windows before and after. The cluster's figures stay every team's. With
// no more teams than a window holds, f is unchanged.
func windowFinance(f *views.Finance, page int) {
	seen := map[string]bool{}
	var names []string
	add := func(team string) {
		if !seen[team] {
			seen[team] = true
			names = append(names, team)
		}
	}
	for _, t := range f.Teams {
		add(t.Team)
	}
	for _, st := range f.Statements {
		add(st.Team)
	}
	for _, r := range f.Preview.Rows {
		if r.Team != RowUnallocated && r.Team != RowPremium {
			add(r.Team)
		}
	}
	if len(names) <= financeTeamsPerPage {
		return
	}
	slices.Sort(names)
	pages := (len(names) + financeTeamsPerPage - 1) / financeTeamsPerPage
	page = min(max(page, 1), pages)
	lo, hi := (page-1)*financeTeamsPerPage, min(page*financeTeamsPerPage, len(names))
	in := map[string]bool{}
	for _, n := range names[lo:hi] {
		in[n] = true
	}
	f.Teams = slices.DeleteFunc(f.Teams, func(t views.FinanceTeam) bool { return !in[t.Team] })
	f.Statements = slices.DeleteFunc(f.Statements, func(st views.StatementRow) bool { return !in[st.Team] })
	f.Preview.Rows = slices.DeleteFunc(f.Preview.Rows, func(r views.PreviewRow) bool {
		return r.Team != RowUnallocated && r.Team != RowPremium && !in[r.Team]
	})
	f.Window = views.TeamWindow{From: names[lo], To: names[hi-1], First: lo + 1, Last: hi, Of: len(names)}
	if page > 1 {
		f.Window.PrevURL = "/finance?page=" + strconv.Itoa(page-1)
	}
	if page < pages {
		f.Window.NextURL = "/finance?page=" + strconv.Itoa(page+1)
	}
}

// financeView is the finance page's content, its teams narrowed to the
// page-th window (windowFinance; the policy form's answers show the first).
func (s *Server) financeView(ctx context.Context, p workflow.Principal, page int, form views.PolicyForm, errs map[string]string) (views.Finance, error) {
	now := s.opts.Now()
	month, toDate, pol, v, err := s.monthSoFar(ctx, now)
	if err != nil {
		return views.Finance{}, err
	}
	f := views.Finance{Month: month.From.Format("2006-01"), Elapsed: "to " + toDate.To.Format("2006-01-02 15:04 UTC"),
		Priced: v.priced, NoPrices: noRateCard, DemoUsage: v.demoUsage, Currency: v.cb.Currency,
		Missing: missingText(v.missing), Notes: v.cb.Notes, Policy: policyInfo(pol),
		CanEdit: workflow.Decide(p, workflow.ActionEditCostPolicy, workflow.Object{}).Allowed, Errors: errs,
		BasedOn: pol.Version}
	if v.priced {
		f.DemoPrices, f.RateNote = s.opts.RateCard.Demo, s.opts.RateCard.Note
		f.ClusterCost = v.cb.ClusterCost.String()
		f.Unallocated, f.Premium = splitUnallocated(v.cb.Unallocated)
		if v.cb.Unallocated.Minor < 0 {
			f.PremiumNote = premiumNote
		}
		f.Unpriced = unpricedText(v.cb.Unpriced)
	}
	whole, elapsed := month.To.Sub(month.From), now.Sub(month.From)
	for _, tc := range v.cb.Teams {
		var gpu, neuron, cpu int64
		for _, l := range tc.Lines {
			if l.Neuron {
				neuron += l.GuaranteedAccelSeconds + l.BorrowedAccelSeconds
			} else {
				gpu += l.GuaranteedAccelSeconds + l.BorrowedAccelSeconds
			}
			cpu += l.CPUMilliSeconds / 1000
		}
		ft := views.FinanceTeam{Team: tc.Team, GPUHours: usage.Hours(gpu), NeuronHours: usage.Hours(neuron), CPUHours: usage.Hours(cpu),
			StatementURL: statementURL(tc.Team, f.Month)}
		if v.priced {
			ft.Guaranteed, ft.Borrowed, ft.Idle, ft.Overhead = tc.Guaranteed.String(), tc.Borrowed.String(), tc.Idle.String(), tc.Overhead.String()
			ft.ToDate, ft.Projected = tc.Total.String(), usage.Project(tc.Total, elapsed, whole).String()
		}
		f.Teams = append(f.Teams, ft)
	}
	frozen, err := s.opts.DB.FrozenStatements(ctx, "")
	if err != nil {
		return f, err
	}
	for _, st := range frozen {
		u := statementURL(st.Team, st.Month)
		f.Statements = append(f.Statements, views.StatementRow{Team: st.Team, Month: st.Month, Total: st.Total + " " + st.Currency,
			Hash: st.Hash, URL: u, CSV: u + "/csv", JSON: u + "/json"})
	}
	hist, err := s.opts.DB.CostPolicies(ctx, 20)
	if err != nil {
		return f, err
	}
	for _, h := range hist {
		f.History = append(f.History, policyInfo(h))
	}
	for _, m := range usage.Methods {
		f.Methods = append(f.Methods, views.Choice{Value: string(m), Label: methodLabel(m) + ": " + m.Describe()})
	}
	if form == (views.PolicyForm{}) {
		form = views.PolicyForm{Method: string(pol.Policy.Method), Overhead: usage.FormatOverhead(pol.Policy.OverheadBasisPoints)}
	}
	f.Form = form
	if f.Preview, err = s.preview(ctx, now, pol.Policy, form, v.in); err != nil {
		return f, err
	}
	windowFinance(&f, page)
	return f, nil
}

func methodLabel(m usage.Method) string {
	switch m {
	case usage.SplitByGuarantee:
		return "By guarantee"
	case usage.SplitByUsage:
		return "By usage"
	case usage.SplitEvenly:
		return "Evenly"
	case usage.SplitUnallocated:
		return "Unallocated"
	}
	return string(m)
}

func policyInfo(v store.CostPolicyVersion) views.PolicyInfo {
	pi := views.PolicyInfo{Version: v.Version, Method: methodLabel(v.Policy.Method), Describe: v.Policy.Method.Describe(),
		Overhead: usage.FormatOverhead(v.Policy.OverheadBasisPoints), ChosenBy: v.ChosenBy, Reason: v.Reason}
	if !v.ChosenAt.IsZero() {
		pi.ChosenAt = v.ChosenAt.Format("2006-01-02 15:04 UTC")
	}
	return pi
}

// preview splits last month (or, when it has no usage, this month to date)
// under every method, at the overhead on the form (else the policy's): what
// next month would look like if usage repeated.
//
// toDateIn is this month's input to date as already loaded for the page, so
// that it is not read twice.
func (s *Server) preview(ctx context.Context, now time.Time, cur usage.Policy, form views.PolicyForm, toDateIn usage.ChargeInput) (views.Preview, error) {
	if s.opts.RateCard == nil {
		return views.Preview{Empty: true, Basis: "No preview without a rate card: there is no cost to split."}, nil
	}
	overhead := cur.OverheadBasisPoints
	if bp, err := usage.ParseOverhead(form.Overhead); err == nil {
		overhead = bp
	}
	month, toDate := monthToDate(now)
	last := usage.MonthOf(month.From.Add(-time.Hour))
	basis := last
	basisText := fmt.Sprintf("Basis: last month's (%s) usage and capacity at the current guarantees and prices, with %s %% overhead: next month's split if usage repeats.",
		last.From.Format("2006-01"), usage.FormatOverhead(overhead))
	// Read and priced once (usage.CostsOf), then charged under each method.
	base, err := usage.CostsOf(ctx, s.opts.DB, last, usage.Policy{Method: usage.Methods[0], OverheadBasisPoints: overhead}, s.pricing())
	if err != nil {
		return views.Preview{}, err
	}
	if len(base.Input.Hours) == 0 && len(base.Input.Cluster) == 0 {
		basis = toDate
		basisText = fmt.Sprintf("Basis: this month's (%s) usage and capacity so far, because last month has none, at the current guarantees and prices, with %s %% overhead: next month's split if usage repeats.",
			month.From.Format("2006-01"), usage.FormatOverhead(overhead))
		if toDateIn.Period != basis {
			return views.Preview{}, fmt.Errorf("web: preview: the month to date given is %s, not %s", toDateIn.Period.Label(), basis.Label())
		}
		base = usage.Costs{Input: toDateIn}
	}
	if len(base.Input.Hours) == 0 && len(base.Input.Cluster) == 0 {
		return views.Preview{Empty: true, Basis: "No preview yet: neither last month nor this month has usage to split."}, nil
	}
	pv := views.Preview{Basis: basisText}
	rows := map[string][]string{}
	var teams []string
	var unalloc, premium []string
	anyPremium := false
	for _, m := range usage.Methods {
		pv.Methods = append(pv.Methods, methodLabel(m))
		cb, err := base.Under(usage.Policy{Method: m, OverheadBasisPoints: overhead})
		if err != nil {
			return views.Preview{}, err
		}
		for _, tc := range cb.Teams {
			if _, ok := rows[tc.Team]; !ok {
				teams = append(teams, tc.Team)
			}
			rows[tc.Team] = append(rows[tc.Team], tc.Total.String())
		}
		u, p := splitUnallocated(cb.Unallocated)
		unalloc, premium = append(unalloc, u), append(premium, p)
		anyPremium = anyPremium || cb.Unallocated.Minor < 0
	}
	for _, t := range teams {
		pv.Rows = append(pv.Rows, views.PreviewRow{Team: t, Amounts: rows[t]})
	}
	pv.Rows = append(pv.Rows, views.PreviewRow{Team: RowUnallocated, Amounts: unalloc})
	if anyPremium {
		pv.Rows = append(pv.Rows, views.PreviewRow{Team: RowPremium, Amounts: premium})
		pv.PremiumNote = premiumNote
	}
	return pv, nil
}

// The rest of a split beside the teams' rows: what the cluster cost and no
// team was charged (platform cost), or, when the teams' charges exceed the
// cluster's cost, what they paid above it. The second happens when
// borrowed hours carry a premium rate (usage.Chargeback.Unallocated is then
// negative); shown as a negative platform cost, finance read it as an
// error, so it gets its own name.
const (
	RowUnallocated = "Unallocated (platform cost)"
	RowPremium     = "Premium collected above cost"
	premiumNote    = "Premium collected above cost: under some policies the teams' charges exceed the cluster's cost, because borrowed hours are charged at the rate card's premium borrowed rate while the idle capacity they used costs less. The teams' charges minus the premium, or plus the platform cost, are the cluster's cost to the cent."
)

// splitUnallocated says a chargeback's unallocated amount as the two rows:
// platform cost when it is zero or more, premium above cost (its opposite)
// when it is negative; the other row shows a dash.
func splitUnallocated(m usage.Money) (platform, premium string) {
	if m.Minor < 0 {
		return "—", usage.Money{Minor: -m.Minor, Currency: m.Currency}.String()
	}
	return m.String(), "—"
}

// setCostPolicy records finance's choice of policy, with a reason.
func (s *Server) setCostPolicy(c echo.Context) error {
	p, err := authorize(c, workflow.ActionEditCostPolicy, workflow.Object{})
	if err != nil {
		return err
	}
	form := views.PolicyForm{Method: strings.TrimSpace(c.FormValue("method")), Overhead: strings.TrimSpace(c.FormValue("overhead")),
		Reason: strings.TrimSpace(c.FormValue("reason"))}
	errs := map[string]string{}
	method, err := usage.ParseMethod(form.Method)
	if err != nil {
		errs["method"] = "Choose how idle capacity and overhead are split."
	}
	bp, err := usage.ParseOverhead(form.Overhead)
	if err != nil {
		errs["overhead"] = "Give a percentage between 0 and 100 with at most two decimals, e.g. 12.5."
	}
	if msg := reasonProblem(form.Reason, "Say why: the reason is kept with the policy in the audit trail."); msg != "" {
		errs["reason"] = msg
	}
	ctx := c.Request().Context()
	if len(errs) > 0 {
		f, err := s.financeView(ctx, p, 1, form, errs)
		if err != nil {
			return err
		}
		return render(c, http.StatusUnprocessableEntity, views.FinancePage(s.page(c, "Usage and cost"), f))
	}
	// based_on is the version the page showed: a missing or garbled one
	// can match no version but 0, so at worst the choice is refused.
	basedOn, err := strconv.Atoi(c.FormValue("based_on"))
	if err != nil {
		basedOn = -1
	}
	v, err := s.opts.DB.SetCostPolicy(ctx, basedOn, usage.Policy{Method: method, OverheadBasisPoints: bp}, form.Reason, actor(p), s.opts.Now())
	if errors.Is(err, store.ErrPolicyChanged) {
		f, err := s.financeView(ctx, p, 1, form, map[string]string{"policy": "Someone saved another policy while you chose: it is shown above. Your choice is kept below; check it and save again."})
		if err != nil {
			return err
		}
		return render(c, http.StatusConflict, views.FinancePage(s.page(c, "Usage and cost"), f))
	}
	if err != nil {
		return err
	}
	f, err := s.financeView(ctx, p, 1, views.PolicyForm{}, nil)
	if err != nil {
		return err
	}
	f.Saved = fmt.Sprintf("Saved: policy version %d, %s, overhead %s %%. It applies to the month in progress and to every month that closes while it is in force.",
		v.Version, v.Policy.Method.Describe(), usage.FormatOverhead(bp))
	return render(c, http.StatusOK, views.FinancePage(s.page(c, "Usage and cost"), f))
}

// statement finds a team's statement of a month: the frozen one of a closed
// month, else computed now (a projection for the current month). A month
// that is not a past or current calendar month is not found.
func (s *Server) statement(c echo.Context) (usage.Statement, string, costView, error) {
	team, err := s.costTeam(c)
	if err != nil {
		return usage.Statement{}, "", costView{}, err
	}
	ctx := c.Request().Context()
	now := s.opts.Now()
	month, ok := monthParam(c, now)
	if !ok {
		return usage.Statement{}, "", costView{}, echo.NewHTTPError(http.StatusNotFound)
	}
	st, ok, err := s.opts.DB.FrozenStatement(ctx, team, month.From.Format("2006-01"))
	if err != nil {
		return st, "", costView{}, err
	}
	if ok {
		return st, st.Hash(), costView{priced: true}, nil
	}
	pol, err := s.opts.DB.CostPolicy(ctx)
	if err != nil {
		return st, "", costView{}, err
	}
	period := month
	if now.Before(month.To) {
		_, period = monthToDate(now)
	}
	v, err := s.charge(ctx, period, pol.Policy)
	if err != nil {
		return st, "", costView{}, err
	}
	st = usage.StatementOf(v.cb, team, v.missing, v.priced && s.opts.RateCard.Demo, now)
	st.Month = month.From.Format("2006-01")
	return st, "", v, nil
}

// teamStatement is a team's statement page.
func (s *Server) teamStatement(c echo.Context) error {
	st, hash, v, err := s.statement(c)
	if err != nil {
		return err
	}
	u := statementURL(st.Team, st.Month)
	sp := views.StatementPage{Team: st.Team, Month: st.Month, Frozen: st.Frozen, Priced: v.priced, NoPrices: noRateCard,
		DemoPrices: st.DemoPrices, DemoUsage: v.demoUsage, Currency: st.Currency, Hash: hash,
		Policy:     fmt.Sprintf("%s, overhead %s %%", st.Policy.Method.Describe(), st.Policy.OverheadPercent),
		Guaranteed: st.Guaranteed, Borrowed: st.Borrowed, Idle: st.IdleShare, Overhead: st.Overhead, Total: st.Total,
		CSV: u + "/csv", JSON: u + "/json", Tasks: u + "/tasks"}
	for _, m := range st.Missing {
		sp.Missing = append(sp.Missing, missingText([]usage.Missing{{Cluster: m.Cluster, From: m.From, To: m.To, Reason: m.Reason}})...)
	}
	sp.Unpriced = unpricedText(st.Unpriced)
	for _, l := range st.Lines {
		sp.Lines = append(sp.Lines, views.StatementLine{Namespace: l.Namespace, InstanceType: l.InstanceType,
			GuaranteedGPU: l.GuaranteedGPUHours, BorrowedGPU: l.BorrowedGPUHours, GuaranteedNeuron: l.GuaranteedNeuronCoreHours,
			BorrowedNeuron: l.BorrowedNeuronCoreHours, CPU: l.CPUHours, Cost: l.Cost})
	}
	switch {
	case st.Frozen:
		sp.Status = "Frozen when " + st.Month + " closed (" + st.ComputedAt.Format("2006-01-02 15:04 UTC") + "): it will not change."
	case v.cb != nil && st.Month == s.opts.Now().UTC().Format("2006-01"):
		sp.Status = "Projection: " + st.Month + " is in progress; this is the month to date, computed now, and it changes as usage arrives."
		if v.priced {
			month := usage.MonthOf(s.opts.Now())
			total := v.cb.Team(st.Team).Total
			sp.Projected = usage.Project(total, s.opts.Now().Sub(month.From), month.To.Sub(month.From)).String()
		}
	default:
		sp.Status = st.Month + " has not been closed: computed now from the current data, not frozen."
	}
	if !v.priced {
		sp.Total = ""
	} else {
		for _, p := range []*string{&sp.Guaranteed, &sp.Borrowed, &sp.Idle, &sp.Overhead, &sp.Total} {
			*p += " " + st.Currency
		}
	}
	return render(c, http.StatusOK, views.StatementView(s.page(c, "Statement "+st.Month+" of team "+st.Team), sp))
}

// teamStatementCSV serves the statement as CSV (HyperPod's summary
// columns plus cost); without a rate card the cost columns are empty.
func (s *Server) teamStatementCSV(c echo.Context) error {
	st, _, v, err := s.statement(c)
	if err != nil {
		return err
	}
	if !v.priced {
		st = unpricedStatement(st)
	}
	attachment(c, "statement-"+st.Team+"-"+st.Month+".csv")
	c.Response().Header().Set(echo.HeaderContentType, "text/csv; charset=utf-8")
	c.Response().WriteHeader(http.StatusOK)
	return st.WriteCSV(c.Response())
}

// teamStatementJSON serves the statement as JSON: for a frozen month, the
// very bytes whose hash is in the audit trail.
func (s *Server) teamStatementJSON(c echo.Context) error {
	st, body, err := s.statementJSON(c)
	if err != nil {
		return err
	}
	attachment(c, "statement-"+st.Team+"-"+st.Month+".json")
	return c.Blob(http.StatusOK, "application/json", body)
}

// statementJSON is the statement's JSON export (money blanked without a
// rate card), which the API serves too (apiStatement).
func (s *Server) statementJSON(c echo.Context) (usage.Statement, []byte, error) {
	st, _, v, err := s.statement(c)
	if err != nil {
		return st, nil, err
	}
	if !v.priced {
		st = unpricedStatement(st)
	}
	return st, st.JSON(), nil
}

// costTeam is the :team of a statement or task report route, authorized
// (workflow.ActionViewCosts) and one of the groups file's teams: finance
// may read every team's costs, and a name that is no team is no team (404)
// rather than a statement of nothing with the raw name in its file name.
func (s *Server) costTeam(c echo.Context) (string, error) {
	team := c.Param("team")
	if _, err := authorize(c, workflow.ActionViewCosts, workflow.Object{Team: team}); err != nil {
		return "", err
	}
	if _, ok := s.opts.Mapping.Teams[team]; !ok {
		return "", echo.NewHTTPError(http.StatusNotFound)
	}
	return team, nil
}

// attachment names the response's download, quoted and escaped as RFC 2183
// wants (mime.FormatMediaType), whatever the name holds.
func attachment(c echo.Context, filename string) {
	c.Response().Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": filename}))
}

// monthParam reads the :month of a statement route ("2026-11", exactly):
// a month that has begun by now. Anything else is no statement (404).
func monthParam(c echo.Context, now time.Time) (usage.Period, bool) {
	t, err := time.Parse("2006-01", c.Param("month"))
	if err != nil || t.After(now) || t.Format("2006-01") != c.Param("month") {
		return usage.Period{}, false
	}
	return usage.MonthOf(t), true
}

// teamTasksCSV serves the detailed task report beside a statement: the
// team's tasks (Kueue Workloads, or pods without one) that held
// accelerators in the statement's month, up to now for the current month,
// as the collector recorded them. Who may read the statement may read it.
func (s *Server) teamTasksCSV(c echo.Context) error {
	team, err := s.costTeam(c)
	if err != nil {
		return err
	}
	now := s.opts.Now()
	month, ok := monthParam(c, now)
	if !ok {
		return echo.NewHTTPError(http.StatusNotFound)
	}
	to := month.To
	if now.Before(to) {
		to = now
	}
	tasks, err := s.opts.DB.UsageTasks(c.Request().Context(), store.TaskFilter{Team: team, From: month.From, To: to})
	if err != nil {
		return err
	}
	// The missing data periods of the month, as HyperPod's detailed report
	// lists them (usage.TaskCSVHeader).
	missing, err := s.opts.DB.MissingIn(c.Request().Context(), month.From, to)
	if err != nil {
		return err
	}
	label := month.From.Format("2006-01")
	attachment(c, "tasks-"+team+"-"+label+".csv")
	c.Response().Header().Set(echo.HeaderContentType, "text/csv; charset=utf-8")
	c.Response().WriteHeader(http.StatusOK)
	return usage.WriteTasksCSV(c.Response(), team, label, tasks, missing, to)
}

// unpricedStatement blanks the money of a statement computed at price
// zero (no rate card): hours only.
func unpricedStatement(st usage.Statement) usage.Statement {
	st.Currency = ""
	st.Guaranteed, st.Borrowed, st.IdleShare, st.Overhead, st.Total = "", "", "", "", ""
	for i := range st.Lines {
		st.Lines[i].Cost = ""
	}
	return st
}
