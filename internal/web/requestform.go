package web

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// formPage builds the contract form's view model.
func (s *Server) formPage(heading, action, cancel string, base int, v views.ContractValues, errs map[string]string) views.ContractForm {
	f := views.ContractForm{
		Heading: heading, Action: action, CancelURL: cancel, BaseVersion: base, Errors: errs, Groups: formGroups(v, errs),
	}
	if strings.TrimSpace(v.Get("orchestrator")) == string(workflow.OrchestratorSlurm) {
		f.SlurmNotice = "Slurm: once approved, the portal makes the team's Slurm account, QoS and an association per person the contract names (its owners and signal owners), in the contract's partition, and makes its four owners the account's coordinators. Tagging the team's roles with SSMSessionRunAs stays an operator's step."
	}
	return f
}

func (s *Server) newRequestForm(c echo.Context) error {
	team := c.Param("team")
	if _, err := authorize(c, workflow.ActionCreateRequest, workflow.Object{Team: team}); err != nil {
		return err
	}
	v := views.ContractValues{teamKey: {team}}
	if c.QueryParam("example") == "1" {
		v = formFromContract(workflow.ExampleContractFor(team))
	}
	f := s.formPage("New connection request for team "+team, "/teams/"+team+"/connections", "/teams/"+team, 0, v, nil)
	f.ExampleURL = "/teams/" + team + "/connections/new?example=1"
	return render(c, http.StatusOK, views.ContractFormPage(s.page(c, "New connection request"), f))
}

// readForm reads the contract form's inputs into raw values: the first
// value of each input, every value of checkboxes. The team is the page's.
func readForm(c echo.Context, team string) (views.ContractValues, error) {
	fp, err := c.FormParams()
	if err != nil {
		return nil, echo.NewHTTPError(http.StatusBadRequest)
	}
	v := views.ContractValues{teamKey: {team}}
	for _, f := range workflow.Fields() {
		vs, ok := fp[f.Key]
		switch {
		case f.Input == workflow.InputNone || !ok:
		case f.Input == workflow.InputChecks:
			v[f.Key] = vs
		default:
			v.Set(f.Key, fp.Get(f.Key))
		}
	}
	return v, nil
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

func (s *Server) editRequestForm(c echo.Context) error {
	p, conn, obj, err := s.loadConnection(c)
	if err != nil {
		return err
	}
	if err := allowed(p, workflow.ActionEditRequest, obj); err != nil {
		return err
	}
	// A change to a live connection starts from the version that runs
	// (its approved version), unless a change is already open.
	from := conn.CurrentVersion
	if conn.State.Live() && !conn.Amendment.Open() {
		from = conn.ApprovedVersion
	}
	v, err := s.opts.DB.Version(c.Request().Context(), conn.ID, from)
	if err != nil {
		return err
	}
	f := s.formPage(editHeading(conn, conn.CurrentVersion),
		fmt.Sprintf("/connections/%d", conn.ID), fmt.Sprintf("/connections/%d", conn.ID), conn.CurrentVersion, formFromContract(v.Contract), nil)
	if conn.CurrentVersion >= workflow.MaxVersions {
		f.Notice = versionLimitNotice(conn.Team)
	}
	if conn.State.Live() {
		f.Notice = strings.TrimSpace(fmt.Sprintf("The connection keeps running on version %d while you change it: saving keeps your change as a draft, "+
			"and an admin approves it before the provisioner applies it in place. The namespaces, orchestrator and cluster cannot change. %s", conn.ApprovedVersion, f.Notice))
	}
	return render(c, http.StatusOK, views.ContractFormPage(s.page(c, "Edit connection request"), f))
}

// editHeading is the edit form's heading: a request's version, or the
// change to a live connection.
func editHeading(conn store.Connection, base int) string {
	switch {
	case conn.State.Live() && !conn.Amendment.Open():
		return fmt.Sprintf("Request a change to connection #%d (active on version %d)", conn.ID, conn.ApprovedVersion)
	case conn.State.Live():
		return fmt.Sprintf("Edit the change to connection #%d (version %d; version %d stays active)", conn.ID, base, conn.ApprovedVersion)
	}
	return fmt.Sprintf("Edit connection request #%d (version %d)", conn.ID, base)
}

// amendmentErrors adds to errs the fields a change to a live connection may
// not touch (workflow.AmendmentErrors, against its approved version).
// found says whether it added any.
func (s *Server) amendmentErrors(c echo.Context, conn store.Connection, con workflow.Contract, errs map[string]string) (_ map[string]string, found bool, _ error) {
	if !conn.State.Live() {
		return errs, false, nil
	}
	approved, err := s.opts.DB.Version(c.Request().Context(), conn.ID, conn.ApprovedVersion)
	if err != nil {
		return errs, false, err
	}
	fe := workflow.AmendmentErrors(approved.Contract, con)
	if len(fe) == 0 {
		return errs, false, nil
	}
	if errs == nil {
		errs = map[string]string{}
	}
	return mergeFieldErrors(errs, fe), true, nil
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
	heading := editHeading(conn, base)
	action := fmt.Sprintf("/connections/%d", conn.ID)
	con, errs, savable, down := s.checkContract(c, v, conn.ID)
	submit := c.FormValue("intent") == "submit"
	if down == nil {
		// A change that touches what a live connection cannot change is
		// never approvable: it is not kept even as a draft.
		var found bool
		if errs, found, err = s.amendmentErrors(c, conn, con, errs); err != nil {
			return err
		}
		if found {
			savable = false
		}
	}
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
	if errors.Is(err, workflow.ErrVersionLimit) {
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
