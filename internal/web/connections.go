package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"sigs.k8s.io/yaml"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

const pageSize = 50

func actor(p workflow.Principal) store.Actor { return store.Actor{ID: p.UserID, Email: p.Email} }

func choicesOf(cs []workflow.Choice) []views.Choice {
	out := make([]views.Choice, len(cs))
	for i, c := range cs {
		out[i] = views.Choice{Value: c.Value, Label: c.Label}
	}
	return out
}

func fmtWhen(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

func age(d time.Duration) string {
	switch {
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h", int(d.Hours()))
	default:
		return fmt.Sprintf("%d days", int(d.Hours()/24))
	}
}

func (s *Server) row(c store.Connection) views.ConnectionRow {
	return views.ConnectionRow{
		ID: c.ID, Href: fmt.Sprintf("/connections/%d", c.ID), Team: c.Team, State: string(c.State),
		StateLabel: c.State.Label(), Cluster: c.ClusterName, Purpose: c.Purpose, Requester: c.RequesterEmail,
		Updated: fmtWhen(c.UpdatedAt), Waiting: age(s.opts.Now().Sub(c.SubmittedAt)),
	}
}

// scopeTeams is the set of teams whose connections p may list: nil for
// everything (admins and reviewers), else p's own teams.
func scopeTeams(p workflow.Principal) []string {
	if workflow.SeesAllTeams(p) {
		return nil
	}
	teams := []string{}
	for _, m := range p.Memberships {
		teams = append(teams, m.Team)
	}
	return teams
}

// listConnections shows the connections p may see, filtered and paginated.
func (s *Server) listConnections(c echo.Context) error {
	p, ok := principal(c)
	if !ok {
		return echo.NewHTTPError(http.StatusUnauthorized)
	}
	f := store.ListFilter{
		Teams: scopeTeams(p), Team: c.QueryParam("team"), State: workflow.State(c.QueryParam("state")),
		Cluster: strings.TrimSpace(c.QueryParam("cluster")), Query: c.QueryParam("q"),
	}
	if f.State != "" && !f.State.Valid() {
		f.State = ""
	}
	before, _ := strconv.ParseInt(c.QueryParam("before"), 10, 64)
	rows, next, err := s.opts.DB.ListConnections(c.Request().Context(), f, before, pageSize)
	if err != nil {
		return err
	}
	l := views.ConnectionList{
		Heading: "Connections", Lead: "Connection requests and connections you can see.",
		Team: f.Team, State: string(f.State), Cluster: f.Cluster, Query: f.Query, TestID: "connections",
		EmptyTitle: "No connections match", EmptyBody: "Change the filters, or file a request from your team's page.",
	}
	for _, st := range workflow.AllStates {
		l.States = append(l.States, views.Choice{Value: string(st), Label: st.Label()})
	}
	teams := f.Teams
	if teams == nil {
		teams = slices.Sorted(func(yield func(string) bool) {
			for t := range s.opts.Mapping.Teams {
				if !yield(t) {
					return
				}
			}
		})
	}
	for _, t := range teams {
		l.Teams = append(l.Teams, views.Choice{Value: t, Label: t})
	}
	for _, r := range rows {
		l.Rows = append(l.Rows, s.row(r))
	}
	if next != 0 {
		q := c.QueryParams()
		q.Set("before", strconv.FormatInt(next, 10))
		l.NextURL = "/connections?" + q.Encode()
	}
	return render(c, http.StatusOK, views.ConnectionListPage(s.page(c, "Connections"), l))
}

// formPage builds the contract form's view model.
func (s *Server) formPage(heading, action, cancel string, base int, v views.ContractValues, errs map[string]string) views.ContractForm {
	f := views.ContractForm{
		Heading: heading, Action: action, CancelURL: cancel, BaseVersion: base, Values: v, Errors: errs,
		StudioModes: choicesOf(workflow.StudioModeChoices()), Orchestrators: choicesOf(workflow.OrchestratorChoices()),
		WorkloadTypes: choicesOf(workflow.WorkloadTypeChoices()), DataClasses: choicesOf(workflow.DataClassificationChoices()),
		Sharings: choicesOf(workflow.SharingChoices()), Preemptions: choicesOf(workflow.PreemptionChoices()),
		Limits: limitHelp(),
	}
	if strings.TrimSpace(v.Orchestrator) == string(workflow.OrchestratorSlurm) {
		f.SlurmNotice = "Slurm: " + workflow.SlurmNotSupported + ". You can save and submit it, but an admin will have to request changes or reject it."
	}
	return f
}

func (s *Server) newRequestForm(c echo.Context) error {
	team := c.Param("team")
	if _, err := authorize(c, workflow.ActionCreateRequest, workflow.Object{Team: team}); err != nil {
		return err
	}
	v := views.ContractValues{Team: team}
	if c.QueryParam("example") == "1" {
		v = formFromContract(workflow.ExampleContractFor(team))
	}
	f := s.formPage("New connection request for team "+team, "/teams/"+team+"/connections", "/teams/"+team, 0, v, nil)
	f.ExampleURL = "/teams/" + team + "/connections/new?example=1"
	return render(c, http.StatusOK, views.ContractFormPage(s.page(c, "New connection request"), f))
}

// readForm reads the contract form's fields into raw values.
func readForm(c echo.Context, team string) (views.ContractValues, error) {
	fp, err := c.FormParams()
	if err != nil {
		return views.ContractValues{}, echo.NewHTTPError(http.StatusBadRequest)
	}
	g := func(k string) string { return fp.Get(k) }
	return views.ContractValues{
		Team: team, BusinessPurpose: g("business_purpose"), BusinessOwner: g("business_owner"),
		OperationsOwner: g("operations_owner"), CostOwner: g("cost_owner"), ExceptionOwner: g("exception_owner"),
		StudioMode: g("studio_mode"), UnifiedDomainID: g("unified_domain_id"), UnifiedProjectID: g("unified_project_id"),
		AccountID: g("account_id"), Region: g("region"), Orchestrator: g("orchestrator"), ClusterName: g("cluster_name"),
		ClusterARN: g("cluster_arn"), EKSClusterName: g("eks_cluster_name"), ProjectRoleARN: g("project_role_arn"),
		AccessRoleARN: g("access_role_arn"), WorkloadRoleARN: g("workload_role_arn"), WorkloadTypes: fp["workload_types"],
		DataClassification: g("data_classification"), Namespaces: g("namespaces"), SlurmAccount: g("slurm_account"),
		SlurmPartition: g("slurm_partition"), SlurmQoS: g("slurm_qos"), Guaranteed: g("guaranteed"), Sharing: g("sharing"),
		BorrowLimitPercent: g("borrow_limit_percent"), Preemption: g("preemption"), FairShareWeight: g("fair_share_weight"),
		PriorityClasses: g("priority_classes"), Signals: g("signals"), ReviewCadenceDays: g("review_cadence_days"),
		EndDate: g("end_date"), DecommissionCriteria: g("decommission_criteria"), Egress: g("egress"),
	}, nil
}

// validationEnv is what the domain's validation needs from the portal.
func (s *Server) validationEnv(c echo.Context, exclude int64) workflow.ValidationEnv {
	env := s.opts.DB.ValidationEnv(c.Request().Context(), s.opts.Now(), exclude, s.knownOwners)
	env.InstanceTypes = s.opts.Cluster.AllowedInstanceTypes()
	env.TeamNamespaceOnly = !s.opts.Cluster.ClusterQueueManagedByPortal
	// Contract roles must be team roles, which the portal's own IAM policy
	// may pass (the AWS settings' team_role_prefix).
	env.TeamRolePrefix = s.opts.Cluster.AWS.TeamRolePrefix
	// The settings' reserved namespaces, on top of the built-in ones.
	env.ReservedNamespaces = s.opts.Cluster.ReservedNamespaces
	return env
}

// checkContract parses and validates the form. errs is nil when the
// contract is valid; savable says whether it may still be kept as a draft:
// a draft may be incomplete, but never syntactically broken (a count that is
// not a number), because it must round-trip through the form unchanged, and
// never over a size cap (workflow.Limits), because every save keeps a copy.
//
// down is set when the checks could not run (the database did not answer
// a lookup): the handler then keeps the input on the form with a notice
// and a 503, rather than blaming a field for the outage.
func (s *Server) checkContract(c echo.Context, v views.ContractValues, exclude int64) (con workflow.Contract, errs map[string]string, savable bool, down error) {
	con, syntax := contractFromForm(v)
	savable = len(syntax) == 0 && len(con.LimitErrors()) == 0
	env := s.validationEnv(c, exclude)
	errs = mergeFieldErrors(syntax, con.Validate(env))
	if down = env.Unavailable(); down != nil {
		s.logFailure(c, down)
		return con, nil, false, down
	}
	if len(errs) == 0 {
		return con, nil, true, nil
	}
	return con, errs, savable, nil
}

// checksDown is the form's notice when the contract's checks could not run.
const checksDown = "Nothing was saved: the portal could not check this request against the others just now (its database did not answer). Your input is kept below; try again in a minute."

// createRequest stores a new request as a draft, or submits it directly
// when the user chose "Save and submit" and the contract validates.
func (s *Server) createRequest(c echo.Context) error {
	team := c.Param("team")
	p, err := authorize(c, workflow.ActionCreateRequest, workflow.Object{Team: team})
	if err != nil {
		return err
	}
	v, err := readForm(c, team)
	if err != nil {
		return err
	}
	con, errs, savable, down := s.checkContract(c, v, 0)
	submit := c.FormValue("intent") == "submit"
	if down != nil {
		f := s.formPage("New connection request for team "+team, "/teams/"+team+"/connections", "/teams/"+team, 0, v, nil)
		f.Notice = checksDown
		return render(c, http.StatusServiceUnavailable, views.ContractFormPage(s.page(c, "New connection request"), f))
	}
	if errs != nil && (submit || !savable) {
		f := s.formPage("New connection request for team "+team, "/teams/"+team+"/connections", "/teams/"+team, 0, v, errs)
		return render(c, http.StatusUnprocessableEntity, views.ContractFormPage(s.page(c, "New connection request"), f))
	}
	ctx := c.Request().Context()
	conn, err := s.opts.DB.CreateConnection(ctx, con, actor(p), s.opts.Now())
	if err != nil {
		return err
	}
	if submit {
		if _, err := s.opts.DB.Transition(ctx, conn.ID, workflow.EventSubmit, actor(p), "", store.Expect{Version: conn.CurrentVersion}, s.opts.Now()); err != nil {
			return err
		}
	}
	return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/connections/%d", conn.ID))
}

// loadConnection loads a connection and the policy object describing it.
// A connection the principal may not view is reported as not found.
func (s *Server) loadConnection(c echo.Context) (workflow.Principal, store.Connection, workflow.Object, error) {
	p, ok := principal(c)
	if !ok {
		return p, store.Connection{}, workflow.Object{}, echo.NewHTTPError(http.StatusUnauthorized)
	}
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return p, store.Connection{}, workflow.Object{}, echo.NewHTTPError(http.StatusNotFound)
	}
	ctx := c.Request().Context()
	conn, err := s.opts.DB.Connection(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return p, conn, workflow.Object{}, echo.NewHTTPError(http.StatusNotFound)
	}
	if err != nil {
		return p, conn, workflow.Object{}, err
	}
	obj := workflow.Object{Team: conn.Team, State: conn.State, RequesterID: conn.RequesterID}
	if d := workflow.Decide(p, workflow.ActionViewConnection, obj); !d.Allowed {
		return p, conn, obj, &echo.HTTPError{Code: http.StatusNotFound, Internal: errDenied(d.Reason)}
	}
	if obj.EditorIDs, err = s.opts.DB.EditorIDs(ctx, id); err != nil {
		return p, conn, obj, err
	}
	if obj.SubmitterIDs, err = s.opts.DB.SubmitterIDs(ctx, id); err != nil {
		return p, conn, obj, err
	}
	if obj.ApproverIDs, err = s.opts.DB.ApproverIDs(ctx, id, conn.CurrentVersion); err != nil {
		return p, conn, obj, err
	}
	v, err := s.opts.DB.Version(ctx, id, conn.CurrentVersion)
	if err != nil {
		return p, conn, obj, err
	}
	obj.DataClassification = v.Contract.DataClassification
	return p, conn, obj, nil
}

// allowed applies a mutation's policy to a connection the user can see:
// 403 with the policy's reason.
func allowed(p workflow.Principal, a workflow.Action, obj workflow.Object) error {
	if d := workflow.Decide(p, a, obj); !d.Allowed {
		return &userError{page: views.ErrorPage{Status: http.StatusForbidden, Title: "Not allowed",
			Message: "You cannot do this: " + d.Reason + "."}, err: errDenied(d.Reason)}
	}
	return nil
}

func (s *Server) showConnection(c echo.Context) error {
	p, conn, obj, err := s.loadConnection(c)
	if err != nil {
		return err
	}
	d, err := s.detail(c, p, conn, obj)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.ConnectionDetailPage(s.page(c, fmt.Sprintf("Connection #%d", conn.ID)), d))
}

// detail builds the detail page's view model.
func (s *Server) detail(c echo.Context, p workflow.Principal, conn store.Connection, obj workflow.Object) (views.ConnectionDetail, error) {
	ctx := c.Request().Context()
	// The page shows one contract (the current version) and its changes
	// against one other (the approved or the previous version): it loads
	// those two bodies, and the history's metadata without bodies, so its
	// cost does not grow with the number of versions.
	versions, err := s.opts.DB.Versions(ctx, conn.ID)
	if err != nil {
		return views.ConnectionDetail{}, err
	}
	cur, err := s.opts.DB.Version(ctx, conn.ID, conn.CurrentVersion)
	if err != nil {
		return views.ConnectionDetail{}, err
	}
	base := fmt.Sprintf("/connections/%d", conn.ID)
	d := views.ConnectionDetail{
		ID: conn.ID, Team: conn.Team, State: string(conn.State), StateLabel: conn.State.Label(), Purpose: conn.Purpose,
		CurrentVersion: conn.CurrentVersion, ApprovedVersion: conn.ApprovedVersion, Hash: cur.Hash,
		DiffURL: fmt.Sprintf("/connections/%d/diff", conn.ID),
	}
	for _, ch := range workflow.Diff(workflow.Contract{}, cur.Contract) {
		d.Fields = append(d.Fields, views.FieldRow{Label: ch.Label, Value: ch.New})
	}
	// Diff against the last approved version, else the previous version.
	// Versions are numbered 1..current and never deleted.
	var against *store.Version
	switch {
	case conn.ApprovedVersion > 0 && conn.ApprovedVersion != cur.Version:
		v, err := s.opts.DB.Version(ctx, conn.ID, conn.ApprovedVersion)
		if err != nil {
			return d, err
		}
		against = &v
		d.DiffTitle = fmt.Sprintf("Changes since approved version %d", v.Version)
	case cur.Version > 1:
		v, err := s.opts.DB.Version(ctx, conn.ID, cur.Version-1)
		if err != nil {
			return d, err
		}
		against = &v
		d.DiffTitle = fmt.Sprintf("Changes since version %d", v.Version)
	}
	if against != nil {
		for _, ch := range workflow.Diff(against.Contract, cur.Contract) {
			d.Diff = append(d.Diff, views.ChangeRow{Label: ch.Label, Old: ch.Old, New: ch.New})
		}
	}
	for _, v := range versions {
		d.Versions = append(d.Versions, views.VersionRow{
			Version: v.Version, Hash: v.Hash[:12], Author: v.AuthorEmail, At: fmtWhen(v.CreatedAt),
			Approved: v.Version == conn.ApprovedVersion,
			JSONURL:  fmt.Sprintf("%s/versions/%d/contract.json", base, v.Version),
			YAMLURL:  fmt.Sprintf("%s/versions/%d/contract.yaml", base, v.Version),
		})
	}
	decisions, err := s.opts.DB.Decisions(ctx, conn.ID)
	if err != nil {
		return d, err
	}
	for _, x := range decisions {
		d.Decisions = append(d.Decisions, views.DecisionView{Kind: strings.ReplaceAll(x.Kind, "_", " "), Actor: x.ActorEmail,
			Version: x.Version, Reason: x.Reason, At: fmtWhen(x.CreatedAt)})
	}
	events, err := s.opts.DB.AuditEvents(ctx, store.AuditFilter{ObjectType: "connection", ObjectID: conn.ID}, 0, 200)
	if err != nil {
		return d, err
	}
	full := seesFullErrors(c)
	for _, e := range events {
		reason := e.Reason
		if !full && strings.HasSuffix(e.Action, ".failed") {
			reason = publicFailure("", e.Reason) // the job's error text (store.FailJob)
		}
		d.Audit = append(d.Audit, views.AuditRow{At: fmtWhen(e.At), Actor: e.Actor, Action: e.Action, Version: e.Version, Reason: reason})
	}
	if d.Progress, err = s.progressViewFor(c, conn.ID, &obj); err != nil {
		return d, err
	}
	if d.Drift, err = s.connectionDrift(c, p, conn, obj); err != nil {
		return d, err
	}
	s.adoptForm(p, conn, obj, &d)
	if conn.ApprovedVersion > 0 && conn.State.Committed() && conn.State != workflow.StateRevoking {
		switch {
		case conn.ApprovedVersion == cur.Version:
			d.Access = s.accessView(conn, cur)
		case against != nil && against.Version == conn.ApprovedVersion:
			d.Access = s.accessView(conn, *against)
		}
	}
	resources, err := s.opts.DB.AWSResources(ctx, conn.ID)
	if err != nil {
		return d, err
	}
	for _, r := range resources {
		d.AWSResources = append(d.AWSResources, views.AWSResourceRow{Kind: r.Kind, Name: r.Name, ID: r.ResourceID, ARN: r.ARN,
			Version: r.Version, Action: r.Action, At: fmtWhen(r.UpdatedAt)})
	}
	if workflow.Decide(p, workflow.ActionEditRequest, obj).Allowed {
		d.EditURL = base + "/edit"
	}
	if workflow.Decide(p, workflow.ActionSubmitRequest, obj).Allowed {
		d.SubmitURL = base + "/submit"
	}
	if workflow.Decide(p, workflow.ActionWithdrawRequest, obj).Allowed {
		d.WithdrawURL = base + "/withdraw"
	}
	s.revokeForm(p, obj, &d)
	if p.HasRole(workflow.RoleAdmin) || workflow.Decide(p, workflow.ActionEditRequest, obj).Allowed ||
		(conn.State == workflow.StateSubmitted && workflow.Decide(p, workflow.ActionWithdrawRequest, obj).Allowed) {
		// Only the approvers of a submitted version get the AWS lookups: they
		// cost a few AWS reads per view, and drafts change anyway.
		preview := p.HasRole(workflow.RoleAdmin) && conn.State == workflow.StateSubmitted
		d.Plan = s.planView(c.Request().Context(), conn, cur, preview, seesFullErrors(c))
	}
	if cur.Contract.Orchestrator == workflow.OrchestratorSlurm {
		d.Slurm = slurmView(cur.Contract)
	}
	if p.HasRole(workflow.RoleAdmin) && conn.State == workflow.StateSubmitted {
		d.ApprovalsNeed = workflow.ApprovalsNeeded(cur.Contract.DataClassification)
		d.ApprovalsHave = len(obj.ApproverIDs)
		if dec := workflow.Decide(p, workflow.ActionApprove, obj); dec.Allowed {
			d.DecideURL = base + "/decide"
		} else {
			d.DecideNote = "You cannot decide on this request: " + dec.Reason + "."
		}
		inv, err := s.opts.DB.Inventory(ctx, cur.Contract.ClusterName)
		if err != nil {
			return d, err
		}
		committed, err := s.opts.DB.CommittedCapacity(ctx, cur.Contract.ClusterName, conn.ID)
		if err != nil {
			return d, err
		}
		rep := workflow.CheckCapacity(inv, committed, cur.Contract.Scheduling.Guaranteed)
		d.CapacityOK = rep.OK()
		for _, r := range rep.Rows {
			d.Capacity = append(d.Capacity, views.CapacityRowView{InstanceType: r.InstanceType, Capacity: r.Capacity,
				Committed: r.Committed, Requested: r.Requested, After: r.After, OK: r.OK})
		}
		if d.Slurm != nil {
			d.DecideNote = strings.TrimSpace(d.DecideNote + " Approval is refused: " + workflow.SlurmNotSupported + " (see \"Slurm\" below for what it would take).")
		}
		if !d.CapacityOK {
			d.DecideNote = strings.TrimSpace(d.DecideNote + " Approval is blocked: the request does not fit the cluster " +
				cur.Contract.ClusterName + "'s free capacity (see the table). Ask for changes, or raise the inventory if the cluster grew.")
		}
	}
	return d, nil
}

func (s *Server) editRequestForm(c echo.Context) error {
	p, conn, obj, err := s.loadConnection(c)
	if err != nil {
		return err
	}
	if err := allowed(p, workflow.ActionEditRequest, obj); err != nil {
		return err
	}
	v, err := s.opts.DB.Version(c.Request().Context(), conn.ID, conn.CurrentVersion)
	if err != nil {
		return err
	}
	f := s.formPage(fmt.Sprintf("Edit connection request #%d (version %d)", conn.ID, conn.CurrentVersion),
		fmt.Sprintf("/connections/%d", conn.ID), fmt.Sprintf("/connections/%d", conn.ID), conn.CurrentVersion, formFromContract(v.Contract), nil)
	if conn.CurrentVersion >= workflow.MaxVersions {
		f.Notice = versionLimitNotice(conn.Team)
	}
	return render(c, http.StatusOK, views.ContractFormPage(s.page(c, "Edit connection request"), f))
}

// updateRequest saves the edited contract as a new version (if it changed)
// and optionally submits it.
func (s *Server) updateRequest(c echo.Context) error {
	p, conn, obj, err := s.loadConnection(c)
	if err != nil {
		return err
	}
	if err := allowed(p, workflow.ActionEditRequest, obj); err != nil {
		return err
	}
	v, err := readForm(c, conn.Team)
	if err != nil {
		return err
	}
	base, _ := strconv.Atoi(c.FormValue("base_version"))
	heading := fmt.Sprintf("Edit connection request #%d (version %d)", conn.ID, base)
	action := fmt.Sprintf("/connections/%d", conn.ID)
	con, errs, savable, down := s.checkContract(c, v, conn.ID)
	submit := c.FormValue("intent") == "submit"
	if down != nil {
		f := s.formPage(heading, action, action, base, v, nil)
		f.Notice = checksDown
		return render(c, http.StatusServiceUnavailable, views.ContractFormPage(s.page(c, "Edit connection request"), f))
	}
	if errs != nil && (submit || !savable) {
		f := s.formPage(heading, action, action, base, v, errs)
		return render(c, http.StatusUnprocessableEntity, views.ContractFormPage(s.page(c, "Edit connection request"), f))
	}
	ctx := c.Request().Context()
	saved, _, err := s.opts.DB.SaveContract(ctx, conn.ID, base, con, actor(p), s.opts.Now())
	var stale *store.StaleError
	if errors.As(err, &stale) {
		f := s.formPage(heading, action, action, base, v, map[string]string{})
		f.Notice = fmt.Sprintf("Someone saved version %d of this request while you were editing version %d. Nothing was saved. "+
			"Open the request to see their changes, then edit again; your input is kept below so you can copy it.", stale.Current.CurrentVersion, base)
		f.Errors = nil
		return render(c, http.StatusConflict, views.ContractFormPage(s.page(c, "Edit connection request"), f))
	}
	if errors.Is(err, store.ErrVersionLimit) {
		f := s.formPage(heading, action, action, base, v, nil)
		f.Notice = "Nothing was saved. " + versionLimitNotice(conn.Team)
		return render(c, http.StatusConflict, views.ContractFormPage(s.page(c, "Edit connection request"), f))
	}
	if err != nil {
		return s.lifecycleError(err)
	}
	if submit {
		if _, err := s.opts.DB.Transition(ctx, conn.ID, workflow.EventSubmit, actor(p), "", store.Expect{Version: saved.CurrentVersion}, s.opts.Now()); err != nil {
			return s.lifecycleError(err)
		}
	}
	return c.Redirect(http.StatusSeeOther, action)
}

// versionLimitNotice says what to do with a request at workflow.MaxVersions.
// Only drafts and requests sent back for changes are edited, and the owner
// may withdraw both (workflow's lifecycle).
func versionLimitNotice(team string) string {
	return fmt.Sprintf("This request has %d versions, the most one connection keeps, so no change can be saved. "+
		"Copy your input from this form, withdraw this request, and file a new one for team %s with it.", workflow.MaxVersions, team)
}

// lifecycleError turns a refused transition into a clear 409 page.
func (s *Server) lifecycleError(err error) error {
	var te *workflow.TransitionError
	if errors.As(err, &te) {
		return &userError{page: views.ErrorPage{Status: http.StatusConflict, Title: "That is no longer possible",
			Message: "The request changed state: " + te.Error() + ". Reload it to see where it stands.", Action: "Back", ActionURL: "/connections"}, err: err}
	}
	return err
}

// submitRequest sends the current version to the admins, if it validates.
func (s *Server) submitRequest(c echo.Context) error {
	p, conn, obj, err := s.loadConnection(c)
	if err != nil {
		return err
	}
	if err := allowed(p, workflow.ActionSubmitRequest, obj); err != nil {
		return err
	}
	ctx := c.Request().Context()
	v, err := s.opts.DB.Version(ctx, conn.ID, conn.CurrentVersion)
	if err != nil {
		return err
	}
	env := s.validationEnv(c, conn.ID)
	fe := v.Contract.Validate(env)
	if down := env.Unavailable(); down != nil {
		return &userError{page: views.ErrorPage{Status: http.StatusServiceUnavailable, Title: "Not submitted",
			Message: "Nothing was changed: the portal could not check this request against the others just now (its database did not answer). Try again in a minute."}, err: down}
	}
	if len(fe) > 0 {
		errs := mergeFieldErrors(map[string]string{}, fe)
		action := fmt.Sprintf("/connections/%d", conn.ID)
		f := s.formPage(fmt.Sprintf("Edit connection request #%d (version %d)", conn.ID, conn.CurrentVersion), action, action, conn.CurrentVersion, formFromContract(v.Contract), errs)
		f.Notice = "This draft cannot be submitted yet: complete the fields below, then choose \"Save and submit\"."
		return render(c, http.StatusUnprocessableEntity, views.ContractFormPage(s.page(c, "Edit connection request"), f))
	}
	if _, err := s.opts.DB.Transition(ctx, conn.ID, workflow.EventSubmit, actor(p), "", store.Expect{Version: conn.CurrentVersion, Hash: v.Hash}, s.opts.Now()); err != nil {
		return s.lifecycleError(err)
	}
	return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/connections/%d", conn.ID))
}

func (s *Server) withdrawRequest(c echo.Context) error {
	p, conn, obj, err := s.loadConnection(c)
	if err != nil {
		return err
	}
	if err := allowed(p, workflow.ActionWithdrawRequest, obj); err != nil {
		return err
	}
	if _, err := s.opts.DB.Transition(c.Request().Context(), conn.ID, workflow.EventWithdraw, actor(p), "withdrawn by the owner", store.Expect{}, s.opts.Now()); err != nil {
		return s.lifecycleError(err)
	}
	return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/connections/%d", conn.ID))
}

// decide records an admin's approval, rejection or change request of the
// exact version and hash shown on the page.
func (s *Server) decide(c echo.Context) error {
	p, conn, obj, err := s.loadConnection(c)
	if err != nil {
		return err
	}
	if s.decideHooks.loaded != nil {
		s.decideHooks.loaded()
	}
	decision := c.FormValue("decision")
	actions := map[string]workflow.Action{"approve": workflow.ActionApprove, "reject": workflow.ActionReject, "request_changes": workflow.ActionRequestChanges}
	act, ok := actions[decision]
	if !ok {
		return echo.NewHTTPError(http.StatusBadRequest)
	}
	if err := allowed(p, act, obj); err != nil {
		return err
	}
	version, _ := strconv.Atoi(c.FormValue("version"))
	hash := c.FormValue("hash")
	reason := strings.TrimSpace(c.FormValue("reason"))
	rerender := func(status int, notice, reasonErr string) error {
		fresh, err := s.opts.DB.Connection(c.Request().Context(), conn.ID)
		if err != nil {
			return err
		}
		obj.State = fresh.State
		d, err := s.detail(c, p, fresh, obj)
		if err != nil {
			return err
		}
		d.Notice, d.ReasonError, d.Reason = notice, reasonErr, reason
		return render(c, status, views.ConnectionDetailPage(s.page(c, fmt.Sprintf("Connection #%d", conn.ID)), d))
	}
	if reason == "" {
		return rerender(http.StatusUnprocessableEntity, "", "Give a reason: it is recorded with the decision and shown to the requester.")
	}
	if len(reason) > 2000 {
		return rerender(http.StatusUnprocessableEntity, "", "Keep the reason under 2000 characters.")
	}
	// A decision names exactly what it decides on: the version and the
	// contract hash, and for an approval the plan hash the admin saw.
	// Without them it would apply to whatever is current (and an approval
	// would queue an unpinned job). The store refuses an unpinned approval
	// again inside its transaction.
	planHash := c.FormValue("plan_hash")
	if version <= 0 || hash == "" {
		return rerender(http.StatusBadRequest, "Not recorded: a decision must name the version and the contract hash it decides on. Reload the page and decide again.", "")
	}
	ctx := c.Request().Context()
	expect := store.Expect{Version: version, Hash: hash, PlanHash: planHash}
	var (
		cur   store.Version
		check store.CapacityCheck
	)
	if decision == "approve" {
		// The checks below are about the version the approval names, not
		// the one that was current when the request arrived: the body may
		// have been read after an edit. The store checks again, inside its
		// transaction, that this version is still the current one.
		cur, err = s.opts.DB.Version(ctx, conn.ID, version)
		if errors.Is(err, store.ErrNotFound) || err == nil && cur.Hash != hash {
			fresh, ferr := s.opts.DB.Connection(ctx, conn.ID)
			if ferr != nil {
				return ferr
			}
			return rerender(http.StatusConflict, s.staleNotice(c, conn.ID, &store.StaleError{WantVersion: version, WantHash: hash, Current: fresh}), "")
		}
		if err != nil {
			return err
		}
		// The portal sets up nothing for Slurm: an approval would queue a
		// job that can only fail. The version and hash are checked again
		// inside the approval's transaction and a version never changes,
		// so its orchestrator cannot change after this check.
		if cur.Contract.Orchestrator == workflow.OrchestratorSlurm {
			return rerender(http.StatusConflict, "Not approved: "+workflow.SlurmNotSupported+". The steps it would take are listed below; request changes or reject.", "")
		}
		// A version whose plan cannot be built would only fail its job:
		// refuse it here, with the reason the plan page shows.
		plan, perr := provision.BuildPlan(conn.ID, cur.Version, cur.Hash, cur.Contract, s.opts.Cluster)
		if perr != nil {
			return rerender(http.StatusConflict, "Not approved: this version cannot be provisioned on this cluster: "+perr.Error()+". Request changes instead.", "")
		}
		if planHash == "" {
			return rerender(http.StatusBadRequest, "Not approved: an approval must name the version, the contract hash and the plan hash it approves. Reload the page and decide again.", "")
		}
		// An existing namespace that neither the portal nor HyperPod
		// created is taken over only when the admin adopts it here,
		// explicitly (issue 10 item 14); the worker checks again before
		// it applies anything.
		if s.opts.Live != nil {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			nc, err := s.opts.Live.CheckNamespace(cctx, plan)
			cancel()
			if err != nil {
				s.opts.Logger.Warn("approval: namespace check", "connection_id", conn.ID, "error", err.Error())
				return rerender(http.StatusServiceUnavailable, "Not approved: the portal could not read namespace "+plan.Namespace+" on the cluster, to check whether someone else created it. Try again in a moment.", "")
			}
			if nc.Foreign {
				if c.FormValue("adopt_namespace") != nc.Namespace {
					return rerender(http.StatusConflict, "Not approved: namespace "+nc.Namespace+" already exists on the cluster, and neither the portal nor HyperPod created it. "+
						"Approving would force the team's default-deny NetworkPolicy, quota and RoleBindings onto whatever runs there. "+
						"Tick \"Adopt the existing namespace "+nc.Namespace+"\" to hand it to the team deliberately, or request changes.", "")
				}
				expect.Adopt = nc.Namespace
			}
		}
		env := s.validationEnv(c, conn.ID)
		check = func(inv map[string]int, committed []workflow.Capacity) error {
			if rep := workflow.CheckCapacity(inv, committed, cur.Contract.Scheduling.Guaranteed); !rep.OK() {
				return errOverCapacity
			}
			taken := cur.Contract.ClaimConflicts(env)
			if down := env.Unavailable(); down != nil {
				return fmt.Errorf("%w: %w", errChecksDown, down)
			}
			if len(taken) > 0 {
				return fmt.Errorf("%w: %s", errClaimTaken, strings.Join(taken, "; "))
			}
			return nil
		}
	}
	// Everything checked so far was read before the store's transaction:
	// the store checks the state, the version and independence again
	// inside it, against the rows as they are then.
	if s.decideHooks.checked != nil {
		s.decideHooks.checked()
	}
	switch decision {
	case "approve":
		_, _, err = s.opts.DB.Approve(ctx, conn.ID, actor(p), expect, reason, workflow.ApprovalsNeeded(cur.Contract.DataClassification), check, s.opts.Now())
	case "reject":
		_, err = s.opts.DB.Transition(ctx, conn.ID, workflow.EventReject, actor(p), reason, expect, s.opts.Now())
	case "request_changes":
		_, err = s.opts.DB.Transition(ctx, conn.ID, workflow.EventRequestChanges, actor(p), reason, expect, s.opts.Now())
	}
	var stale *store.StaleError
	switch {
	case errors.As(err, &stale):
		return rerender(http.StatusConflict, s.staleNotice(c, conn.ID, stale), "")
	case errors.Is(err, errOverCapacity):
		return rerender(http.StatusConflict, "Not approved: the request no longer fits the cluster's free capacity.", "")
	case errors.Is(err, errChecksDown):
		s.logFailure(c, err)
		return rerender(http.StatusServiceUnavailable, "Not approved: the portal could not check the request's namespaces and roles against the other connections just now (its database did not answer). Nothing was recorded; try again in a minute.", "")
	case errors.Is(err, errClaimTaken):
		return rerender(http.StatusConflict, "Not approved: "+strings.TrimPrefix(err.Error(), errClaimTaken.Error()+": ")+".", "")
	case errors.Is(err, store.ErrNotIndependent):
		// The handler's own check passed: the request was filed, edited or
		// submitted by this user since it read the connection.
		return &userError{page: views.ErrorPage{Status: http.StatusForbidden, Title: "Not allowed",
			Message: "Nothing was recorded: nobody decides on a request they filed, submitted or edited, and you did. Another admin must decide.",
			Action:  "Back to the request", ActionURL: fmt.Sprintf("/connections/%d", conn.ID)}, err: err}
	case errors.Is(err, store.ErrUnpinned):
		return rerender(http.StatusBadRequest, "Not approved: an approval must name the version, the contract hash and the plan hash it approves. Reload the page and decide again.", "")
	case errors.Is(err, store.ErrAlreadyDecided):
		return rerender(http.StatusConflict, "You already approved this version; it needs another admin's approval.", "")
	case err != nil:
		return s.lifecycleError(err)
	}
	return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/connections/%d", conn.ID))
}

// slurmView says what the portal does not do for a Slurm contract.
func slurmView(c workflow.Contract) *views.SlurmView {
	v := &views.SlurmView{Reason: workflow.SlurmNotSupported}
	for _, st := range workflow.SlurmManualSteps(c) {
		v.Steps = append(v.Steps, views.SlurmStepView{What: st.What, Command: st.Command})
	}
	return v
}

var (
	errOverCapacity = errors.New("over capacity")
	errClaimTaken   = errors.New("claimed by another connection")
	errChecksDown   = errors.New("the approval's checks could not run")
)

// staleNotice says what changed between the version the admin saw and now.
func (s *Server) staleNotice(c echo.Context, id int64, st *store.StaleError) string {
	msg := fmt.Sprintf("Nothing was recorded: the contract changed after you opened it (you saw version %d, it is now version %d, %s).",
		st.WantVersion, st.Current.CurrentVersion, st.Current.State.Label())
	old, err1 := s.opts.DB.Version(c.Request().Context(), id, st.WantVersion)
	cur, err2 := s.opts.DB.Version(c.Request().Context(), id, st.Current.CurrentVersion)
	if err1 == nil && err2 == nil {
		var parts []string
		for _, ch := range workflow.Diff(old.Contract, cur.Contract) {
			parts = append(parts, fmt.Sprintf("%s: %q → %q", ch.Label, ch.Old, ch.New))
		}
		if len(parts) > 0 {
			msg += " What changed: " + strings.Join(parts, "; ") + "."
		}
	}
	return msg + " Review the current version below and decide again."
}

// exportVersion serves one contract version as JSON or YAML, for IaC
// repositories; `portal contract import` reads either back.
func (s *Server) exportVersion(c echo.Context) error {
	_, conn, _, err := s.loadConnection(c)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(c.Param("v"))
	if err != nil {
		return echo.NewHTTPError(http.StatusNotFound)
	}
	v, err := s.opts.DB.Version(c.Request().Context(), conn.ID, n)
	if errors.Is(err, store.ErrNotFound) {
		return echo.NewHTTPError(http.StatusNotFound)
	}
	if err != nil {
		return err
	}
	body := v.Contract.Canonical()
	name := fmt.Sprintf("connection-%d-v%d", conn.ID, n)
	c.Response().Header().Set("X-Contract-Hash", v.Hash)
	switch c.Param("format") {
	case "contract.json":
		var pretty json.RawMessage = body
		out, err := json.MarshalIndent(pretty, "", "  ")
		if err != nil {
			return err
		}
		c.Response().Header().Set("Content-Disposition", `attachment; filename="`+name+`.json"`)
		return c.Blob(http.StatusOK, "application/json", append(out, '\n'))
	case "contract.yaml":
		out, err := yaml.JSONToYAML(body)
		if err != nil {
			return err
		}
		c.Response().Header().Set("Content-Disposition", `attachment; filename="`+name+`.yaml"`)
		return c.Blob(http.StatusOK, "application/yaml", out)
	}
	return echo.NewHTTPError(http.StatusNotFound)
}

// adminQueue is the admin home: submitted requests, oldest first.
func (s *Server) adminQueue(c echo.Context) error {
	if _, err := authorize(c, workflow.ActionViewAdminHome, workflow.Object{}); err != nil {
		return err
	}
	conns, err := s.opts.DB.Queue(c.Request().Context(), 200)
	if err != nil {
		return err
	}
	rows := make([]views.ConnectionRow, 0, len(conns))
	for _, conn := range conns {
		rows = append(rows, s.row(conn))
	}
	return render(c, http.StatusOK, views.AdminQueuePage(s.page(c, "Admin"), rows))
}

// planView builds the provisioning plan of a version for display; with
// preview, each AWS call is looked up on AWS (Options.AWSPreview). Without
// full (owners and members), a failure's client-go text is reduced to the
// step and the kind of failure (publicFailure's words).
func (s *Server) planView(ctx context.Context, conn store.Connection, v store.Version, preview, full bool) *views.PlanView {
	id := conn.ID
	pv := &views.PlanView{DryRun: s.opts.DryRun}
	if fe := v.Contract.Validate(workflow.ValidationEnv{Now: s.opts.Now()}); len(fe) > 0 {
		pv.Error = "No plan yet: the contract is incomplete (" + strconv.Itoa(len(fe)) + " field(s) to complete)."
		return pv
	}
	plan, err := provision.BuildPlan(id, v.Version, v.Hash, v.Contract, s.opts.Cluster)
	if err != nil {
		pv.Error = "No plan: " + err.Error()
		return pv
	}
	pv.Summary, pv.Warnings, pv.YAML, pv.Hash = plan.Summary(), plan.Warnings, plan.YAML(), plan.Hash()
	if preview && s.opts.ClusterCheck != nil {
		// What the cluster serves and enforces now (the readiness page's
		// checks): an old Kueue would fail the job, and unenforced
		// NetworkPolicies void the plan's isolation.
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		for _, ch := range s.opts.ClusterCheck.Readiness(rctx).Checks {
			if ch.Status == provision.CheckFailing && (ch.Name == provision.CheckKueueAPI || ch.Name == provision.CheckNetworkPolicies) {
				pv.Warnings = append(pv.Warnings, "Cluster readiness, "+ch.Name+": "+ch.Detail+" "+ch.Todo)
			}
		}
		cancel()
	}
	var actx context.Context
	if s.opts.AWSPreview != nil && preview {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	for _, call := range plan.AWS {
		cv := views.AWSCallView{Service: call.Service, Kind: string(call.Kind), Name: call.Name, Operations: call.Operations}
		if actx != nil {
			now := s.opts.AWSPreview.Preview(actx, call)
			cv.Now, cv.NowDetail = now.State, now.Detail
			switch now.State {
			case awsprov.PreviewStops:
				pv.Warnings = append(pv.Warnings, "On AWS now, "+call.Title()+" would stop the job: "+now.Detail)
			case awsprov.PreviewUnknown:
				pv.Warnings = append(pv.Warnings, "Could not look up "+call.Title()+" on AWS: "+now.Detail)
			}
			pv.Warnings = append(pv.Warnings, now.Warnings...)
		}
		for _, f := range call.Fields {
			cv.Fields = append(cv.Fields, [2]string{f.Name, f.Value})
		}
		for _, g := range call.Grants() {
			cv.Grants = append(cv.Grants, views.AWSGrantView{Policy: g.Policy, Scope: g.Scope, Allows: g.Allows})
		}
		if call.Phase == awsprov.Guardrail {
			pv.AWSBefore = append(pv.AWSBefore, cv)
		} else {
			pv.AWSAfter = append(pv.AWSAfter, cv)
		}
	}
	// Before approval, say what each object would do on the cluster as it
	// is now: create, update (which fields), or nothing.
	if s.opts.Live != nil && !conn.State.Committed() {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		items, err := s.opts.Live.Drift(cctx, plan)
		if err != nil {
			detail := err.Error()
			if !full {
				detail = failureKind(detail) + ". The platform team sees the full error"
			}
			pv.Warnings = append(pv.Warnings, "Could not compare the plan with the cluster: "+detail)
			return pv
		}
		byRef := map[string]provision.DriftItem{}
		for _, it := range items {
			byRef[it.Kind+" "+it.Ref] = it
		}
		for i, o := range plan.Objects {
			it, ok := byRef[o.Kind+" "+o.Ref()]
			switch {
			case !ok:
				pv.Summary[i] = "unchanged · " + pv.Summary[i]
			case it.What == "deleted" && o.Owner != provision.OwnerPortal:
				pv.Summary[i] = "made by HyperPod · " + pv.Summary[i]
			case it.What == "deleted":
				pv.Summary[i] = "create · " + pv.Summary[i]
			default:
				pv.Summary[i] = "update " + strings.Join(it.Fields, ", ") + " · " + pv.Summary[i]
			}
		}
		for _, it := range items {
			if it.What == "extra" {
				pv.Warnings = append(pv.Warnings, "The namespace already has "+it.Kind+" "+it.Ref+" ("+it.Detail+"), which this plan does not contain.")
			}
		}
		nc, err := s.opts.Live.CheckNamespace(cctx, plan)
		switch {
		case err != nil:
			pv.Warnings = append(pv.Warnings, "Could not check who created namespace "+plan.Namespace+": "+err.Error())
		case nc.Foreign:
			pv.ForeignNamespace = nc.Namespace
			pv.Warnings = append(pv.Warnings, "Namespace "+nc.Namespace+" already exists, and neither the portal nor HyperPod created it: approving needs the explicit adoption below.")
		}
	}
	return pv
}
