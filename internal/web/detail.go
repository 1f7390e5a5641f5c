package web

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// principalAndID is a handler's signed-in principal (401 without one) and
// the positive :id of its path (404 otherwise: an id that cannot exist is
// not found, like one the principal may not see).
func principalAndID(c echo.Context) (workflow.Principal, int64, error) {
	p, ok := principal(c)
	if !ok {
		return p, 0, echo.NewHTTPError(http.StatusUnauthorized)
	}
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return p, 0, echo.NewHTTPError(http.StatusNotFound)
	}
	return p, id, nil
}

// loadConnection loads a connection and the policy object describing it.
// A connection the principal may not view is reported as not found.
func (s *Server) loadConnection(c echo.Context) (workflow.Principal, store.Connection, workflow.Object, error) {
	p, id, err := principalAndID(c)
	if err != nil {
		return p, store.Connection{}, workflow.Object{}, err
	}
	ctx := c.Request().Context()
	conn, err := s.opts.DB.Connection(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return p, conn, workflow.Object{}, echo.NewHTTPError(http.StatusNotFound)
	}
	if err != nil {
		return p, conn, workflow.Object{}, err
	}
	obj := workflow.Object{Team: conn.Team, State: conn.State, Amendment: conn.Amendment, RequesterID: conn.RequesterID, Hold: conn.Hold}
	d := workflow.Decide(p, workflow.ActionViewConnection, obj)
	if !d.Allowed && conn.ApprovedVersion != 0 {
		// Perhaps the exception owner its approved contract names (read
		// only for those the team rule refuses).
		if obj.ExceptionOwner, _, err = s.approvedExceptionFacts(ctx, conn, nil); err != nil {
			return p, conn, obj, err
		}
		d = workflow.Decide(p, workflow.ActionViewConnection, obj)
	}
	if !d.Allowed {
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
	if conn.State.Live() && conn.Amendment.Open() {
		// The approvals a change needs depend on the running version's
		// data too (workflow.ApprovalsNeededFor).
		a, err := s.opts.DB.Version(ctx, id, conn.ApprovedVersion)
		if err != nil {
			return p, conn, obj, err
		}
		obj.ApprovedDataClassification = a.Contract.DataClassification
	}
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
	return s.renderDetail(c, http.StatusOK, conn.ID, d)
}

// detail builds the detail page's view model.
func (s *Server) detail(c echo.Context, p workflow.Principal, conn store.Connection, obj workflow.Object) (views.ConnectionDetail, error) {
	ctx := c.Request().Context()
	cur, against, err := s.detailVersions(ctx, conn)
	if err != nil {
		return views.ConnectionDetail{}, err
	}
	d := detailHeader(p, conn, obj, cur, against)
	if err := s.detailHistory(c, p, conn, &d); err != nil {
		return d, err
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
	if err := s.detailAWSResources(ctx, conn, &d); err != nil {
		return d, err
	}
	s.revokeForm(p, obj, cur.Contract.Orchestrator, &d)
	s.holdPanel(p, conn, obj, approvedOf(conn, cur, against), &d)
	if err := s.exceptionPanel(ctx, p, conn, approvedOf(conn, cur, against), &d); err != nil {
		return d, err
	}
	if err := s.connectionReviews(c, p, conn, obj, &d); err != nil {
		return d, err
	}
	waiting := conn.State == workflow.StateSubmitted || conn.State.Live() && conn.Amendment == workflow.AmendSubmitted
	admin := workflow.Decide(p, workflow.ActionViewAdminHome, workflow.Object{}).Allowed
	if workflow.Decide(p, workflow.ActionViewPlan, obj).Allowed {
		// Only the approvers of a submitted version get the AWS lookups: they
		// cost a few AWS reads per view, and drafts change anyway.
		var next *provision.Plan
		d.Plan, next = s.planView(ctx, conn, cur, admin && waiting, seesFullErrors(c))
		if conn.State.Live() && conn.Amendment.Open() && against != nil && against.Version == conn.ApprovedVersion {
			d.PlanDiff = s.planDiffView(conn, *against, cur, next)
		}
	}
	if cur.Contract.Orchestrator == workflow.OrchestratorSlurm {
		d.Slurm = s.slurmView(cur.Contract)
		s.slurmHoldCommands(conn, approvedOf(conn, cur, against), d.Slurm)
	}
	if admin && waiting {
		if err := s.approvalPanel(ctx, p, conn, obj, cur, against, &d); err != nil {
			return d, err
		}
	}
	return d, nil
}

// detailVersions loads the version the page shows and the one it is
// compared with (workflow.ShownVersion, DiffBase; nil: none). The page
// loads those two bodies, and the history's metadata without bodies, so
// its cost does not grow with the number of versions.
func (s *Server) detailVersions(ctx context.Context, conn store.Connection) (store.Version, *store.Version, error) {
	shown := workflow.ShownVersion(conn.State, conn.Amendment, conn.CurrentVersion, conn.ApprovedVersion)
	cur, err := s.opts.DB.Version(ctx, conn.ID, shown)
	if err != nil {
		return cur, nil, err
	}
	base := workflow.DiffBase(cur.Version, conn.ApprovedVersion)
	if base == 0 {
		return cur, nil, nil
	}
	v, err := s.opts.DB.Version(ctx, conn.ID, base)
	if err != nil {
		return cur, nil, err
	}
	return cur, &v, nil
}

// detailHeader is the page's top: the connection, the fields of the shown
// version, its changes against the other, and the links its viewer's
// policy allows.
func detailHeader(p workflow.Principal, conn store.Connection, obj workflow.Object, cur store.Version, against *store.Version) views.ConnectionDetail {
	base := fmt.Sprintf("/connections/%d", conn.ID)
	d := views.ConnectionDetail{
		ID: conn.ID, Team: conn.Team, State: string(conn.State), StateLabel: conn.State.Label(), Purpose: conn.Purpose,
		CurrentVersion: conn.CurrentVersion, ApprovedVersion: conn.ApprovedVersion, Hash: cur.Hash, ShownVersion: cur.Version,
		DiffURL: base + "/diff", EditLabel: "Edit",
	}
	if conn.State.Live() {
		d.EditLabel = "Request a change"
		if conn.Amendment.Open() {
			d.Amendment, d.AmendmentState, d.EditLabel = conn.Amendment.Label(), string(conn.Amendment), "Edit the change"
		}
	}
	for _, ch := range workflow.Diff(workflow.Contract{}, cur.Contract) {
		d.Fields = append(d.Fields, views.FieldRow{Label: ch.Label, Value: ch.New})
	}
	if against != nil {
		switch {
		case against.Version != conn.ApprovedVersion:
			d.DiffTitle = fmt.Sprintf("Changes since version %d", against.Version)
		case conn.State.Live():
			d.DiffTitle = fmt.Sprintf("What this change does to the active version %d", against.Version)
		default:
			d.DiffTitle = fmt.Sprintf("Changes since approved version %d", against.Version)
		}
		for _, ch := range workflow.Diff(against.Contract, cur.Contract) {
			d.Diff = append(d.Diff, views.ChangeRow{Label: ch.Label, Old: ch.Old, New: ch.New})
		}
	}
	// The header's actions, each linked when the viewer's policy allows it.
	for _, l := range []struct {
		action workflow.Action
		path   string
		url    *string
	}{
		{workflow.ActionExportEvidence, "/evidence", &d.EvidenceURL},
		{workflow.ActionEditRequest, "/edit", &d.EditURL},
		{workflow.ActionSubmitRequest, "/submit", &d.SubmitURL},
		{workflow.ActionWithdrawRequest, "/withdraw", &d.WithdrawURL},
	} {
		if workflow.Decide(p, l.action, obj).Allowed {
			*l.url = base + l.path
		}
	}
	return d
}

// detailHistory fills the versions, the decisions and the latest
// detailHistory audit events, so that the page costs the same whatever the
// connection's age (issue 15); the evidence bundle and, for admins, the
// audit trail filtered to the connection hold them all.
func (s *Server) detailHistory(c echo.Context, p workflow.Principal, conn store.Connection, d *views.ConnectionDetail) error {
	ctx := c.Request().Context()
	versions, err := s.opts.DB.Versions(ctx, conn.ID)
	if err != nil {
		return err
	}
	for _, v := range versions {
		d.Versions = append(d.Versions, views.VersionRow{
			Version: v.Version, Hash: v.Hash[:12], Author: v.AuthorEmail, At: fmtWhen(v.CreatedAt),
			Approved: v.Version == conn.ApprovedVersion,
			JSONURL:  fmt.Sprintf("/connections/%d/versions/%d/contract.json", conn.ID, v.Version),
			YAMLURL:  fmt.Sprintf("/connections/%d/versions/%d/contract.yaml", conn.ID, v.Version),
		})
	}
	decisions, err := s.opts.DB.Decisions(ctx, conn.ID)
	if err != nil {
		return err
	}
	for _, x := range decisions {
		d.Decisions = append(d.Decisions, views.DecisionView{Kind: strings.ReplaceAll(x.Kind, "_", " "), Actor: x.ActorEmail,
			Version: x.Version, Reason: x.Reason, At: fmtWhen(x.CreatedAt)})
	}
	events, err := s.opts.DB.AuditEvents(ctx, store.AuditFilter{ObjectType: "connection", ObjectID: conn.ID}, 0, detailHistory+1)
	if err != nil {
		return err
	}
	if len(events) > detailHistory {
		events = events[:detailHistory]
		d.AuditMore = true
		if workflow.Decide(p, workflow.ActionViewAudit, workflow.Object{}).Allowed {
			d.AuditURL = fmt.Sprintf("/audit?object=%d", conn.ID)
		}
	}
	full := seesFullErrors(c)
	for _, e := range events {
		reason := e.Reason
		if !full && strings.HasSuffix(e.Action, ".failed") {
			reason = publicFailure("", e.Reason) // the job's error text (store.FailJob)
		}
		d.Audit = append(d.Audit, views.AuditRow{At: fmtWhen(e.At), Actor: e.Actor, Action: e.Action, Version: e.Version, Reason: reason})
	}
	return nil
}

// detailAWSResources lists what provisioning made in AWS.
func (s *Server) detailAWSResources(ctx context.Context, conn store.Connection, d *views.ConnectionDetail) error {
	resources, err := s.opts.DB.AWSResources(ctx, conn.ID)
	if err != nil {
		return err
	}
	for _, r := range resources {
		d.AWSResources = append(d.AWSResources, views.AWSResourceRow{Kind: r.Kind, Name: r.Name, ID: r.ResourceID, ARN: r.ARN,
			Version: r.Version, Action: r.Action, At: fmtWhen(r.UpdatedAt)})
	}
	return nil
}

// approvalPanel is what an admin deciding a waiting request sees: who may
// decide, the approvals it has and needs, and the capacity report the
// approval itself will check (workflow.ApprovalCapacity), with the team's
// usage beside a change to its guarantee.
func (s *Server) approvalPanel(ctx context.Context, p workflow.Principal, conn store.Connection, obj workflow.Object,
	cur store.Version, against *store.Version, d *views.ConnectionDetail) error {
	d.ApprovalsNeed = workflow.ApprovalsNeededFor(obj)
	d.ApprovalsHave = len(obj.ApproverIDs)
	if dec := workflow.Decide(p, workflow.ActionApprove, obj); dec.Allowed {
		d.DecideURL = fmt.Sprintf("/connections/%d/decide", conn.ID)
	} else {
		d.DecideNote = "You cannot decide on this request: " + dec.Reason + "."
	}
	inv, err := s.opts.DB.Inventory(ctx, cur.Contract.ClusterName)
	if err != nil {
		return err
	}
	committed, err := s.opts.DB.CommittedCapacity(ctx, cur.Contract.ClusterName, conn.ID)
	if err != nil {
		return err
	}
	amending := conn.State.Live() && against != nil
	var approved []workflow.Capacity
	if amending {
		approved = against.Contract.Scheduling.Guaranteed
	}
	rep := workflow.ApprovalCapacity(inv, committed, amending, approved, cur.Contract.Scheduling.Guaranteed)
	if amending && !sameCapacity(approved, cur.Contract.Scheduling.Guaranteed) {
		if err := s.suggestQuota(ctx, conn.Team, approved, cur.Contract.Scheduling.Guaranteed, d); err != nil {
			return err
		}
	}
	d.CapacityOK = rep.OK()
	for _, r := range rep.Rows {
		d.Capacity = append(d.Capacity, views.CapacityRowView{InstanceType: r.InstanceType, Capacity: r.Capacity, Held: r.Held,
			Committed: r.Committed, Requested: r.Requested, After: r.After, OK: r.OK})
	}
	if !d.CapacityOK {
		d.DecideNote = strings.TrimSpace(d.DecideNote + " Approval is blocked: the request does not fit the cluster " +
			cur.Contract.ClusterName + "'s free capacity (see the table). Ask for changes, or raise the inventory if the cluster grew.")
	}
	return nil
}

// suggestQuota shows, beside a change to the guarantee, what the team's
// usage suggests, with the count the change proposes per instance type.
func (s *Server) suggestQuota(ctx context.Context, team string, approved, proposed []workflow.Capacity, d *views.ConnectionDetail) error {
	var err error
	if d.QuotaSuggestions, err = s.quotaSuggestions(ctx, team, approved, proposed, s.opts.Now()); err != nil {
		return err
	}
	for i := range d.QuotaSuggestions {
		n := 0
		for _, c := range proposed {
			if c.InstanceType == d.QuotaSuggestions[i].InstanceType {
				n += c.Count
			}
		}
		d.QuotaSuggestions[i].Proposed = strconv.Itoa(n)
	}
	return nil
}

// planDiffView is what a change does on the cluster and AWS: the plan of
// the active version against the change's (provision.DiffPlansHeld: for a
// team on hold, a renamed Slurm account is added held), which the
// change's job applies in place. next is the change's plan as the plan
// panel built it (nil: it could not be built).
func (s *Server) planDiffView(conn store.Connection, from, to store.Version, next *provision.Plan) *views.PlanDiffView {
	v := &views.PlanDiffView{FromVersion: from.Version, ToVersion: to.Version}
	if next == nil {
		v.Error = "The change's plan cannot be built on this cluster: see the plan below."
		return v
	}
	old, err := s.builtPlan(conn.ID, from)
	if err != nil {
		v.Error = "The active version's plan cannot be built on this cluster: " + err.Error()
		return v
	}
	diff := provision.DiffPlansHeld(old.plan, *next, conn.Hold)
	for _, r := range diff.Rows() {
		v.Rows = append(v.Rows, views.PlanDiffRow(r))
	}
	v.Empty = diff.Empty()
	return v
}

// sameCapacity reports whether two guarantees hold the same instances per
// type (in any order).
func sameCapacity(a, b []workflow.Capacity) bool {
	sum := func(cs []workflow.Capacity) map[string]int {
		m := map[string]int{}
		for _, c := range cs {
			m[c.InstanceType] += c.Count
		}
		for t, n := range m {
			if n == 0 {
				delete(m, t)
			}
		}
		return m
	}
	return maps.Equal(sum(a), sum(b))
}

// detailHistory is how many of a connection's latest audit events its page
// lists.
const detailHistory = 25

// renderDetail writes a connection's page.
func (s *Server) renderDetail(c echo.Context, status int, id int64, d views.ConnectionDetail) error {
	return render(c, status, views.ConnectionDetailPage(s.page(c, fmt.Sprintf("Connection #%d", id)), d))
}
