package web

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// The API's plans: what a version would make on the cluster and in AWS,
// and what a change does against the approved version, built by the
// connection page's code (planView, planDiffView) and shown to the same
// people (ActionViewPlan); and a preview of a contract not saved yet, which
// `portal contract apply --dry-run` prints.

// apiPlanBody is a version's provisioning plan (schema Plan).
type apiPlanBody struct {
	Version          int          `json:"version"`
	ContractHash     string       `json:"contract_hash"`
	PlanHash         string       `json:"plan_hash,omitempty"`
	DryRun           bool         `json:"dry_run"`
	Summary          []string     `json:"summary"`
	AWS              []apiAWSCall `json:"aws"`
	Warnings         []string     `json:"warnings"`
	Exceptions       []string     `json:"exceptions,omitempty"`
	ForeignNamespace string       `json:"foreign_namespace,omitempty"`
	YAML             string       `json:"yaml,omitempty"`
	Error            string       `json:"error,omitempty"`
}

type apiAWSCall struct {
	Service       string `json:"service"`
	Kind          string `json:"kind"`
	Name          string `json:"name"`
	Operations    string `json:"operations"`
	BeforeCluster bool   `json:"before_cluster"`
}

func apiPlanOf(v store.Version, pv *views.PlanView) apiPlanBody {
	b := apiPlanBody{Version: v.Version, ContractHash: v.Hash, PlanHash: pv.Hash, DryRun: pv.DryRun, Summary: nonNil(pv.Summary),
		AWS: []apiAWSCall{}, Warnings: nonNil(pv.Warnings), Exceptions: pv.Exceptions, ForeignNamespace: pv.ForeignNamespace, YAML: pv.YAML, Error: pv.Error}
	for i, calls := range [][]views.AWSCallView{pv.AWSBefore, pv.AWSAfter} {
		for _, cv := range calls {
			b.AWS = append(b.AWS, apiAWSCall{Service: cv.Service, Kind: cv.Kind, Name: cv.Name, Operations: cv.Operations, BeforeCluster: i == 0})
		}
	}
	return b
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// apiPlanDiffBody is what a change does against the approved version
// (schema PlanDiff): the contract's fields and the plan's objects.
type apiPlanDiffBody struct {
	FromVersion     int          `json:"from_version"`
	ToVersion       int          `json:"to_version"`
	ContractChanges []apiChange  `json:"contract_changes"`
	Rows            []apiDiffRow `json:"rows"`
	Empty           bool         `json:"empty"`
	Error           string       `json:"error,omitempty"`
}

// apiDiffRow is one object or AWS call of a plan diff (provision.DiffRow).
type apiDiffRow struct {
	Action string `json:"action"`
	What   string `json:"what"`
	Detail string `json:"detail"`
}

type apiChange struct {
	Field string `json:"field"`
	Label string `json:"label"`
	Old   string `json:"old"`
	New   string `json:"new"`
}

func apiChanges(older, newer workflow.Contract) []apiChange {
	out := []apiChange{}
	for _, ch := range workflow.Diff(older, newer) {
		out = append(out, apiChange{Field: ch.Field, Label: ch.Label, Old: ch.Old, New: ch.New})
	}
	return out
}

// planDiffOf is the plan diff of version to against the approved version
// from, as the connection's page builds it (planDiffView).
func (s *Server) planDiffOf(conn store.Connection, from, to store.Version) apiPlanDiffBody {
	var next *provision.Plan
	if built, err := s.builtPlan(conn.ID, to); err == nil {
		next = &built.plan
	}
	pd := s.planDiffView(conn, from, to, next)
	b := apiPlanDiffBody{FromVersion: from.Version, ToVersion: to.Version, ContractChanges: apiChanges(from.Contract, to.Contract),
		Rows: []apiDiffRow{}, Empty: pd.Empty, Error: pd.Error}
	for _, r := range pd.Rows {
		b.Rows = append(b.Rows, apiDiffRow{Action: r.Action, What: r.What, Detail: r.Detail})
	}
	if next == nil {
		b.Error = "The version's plan cannot be built on this cluster: read its plan."
	}
	return b
}

// apiVersionFor loads the connection and the version its path names, with
// the caller allowed a (and the token its scope for it).
func (s *Server) apiVersionFor(c echo.Context, a workflow.Action) (store.Connection, store.Version, error) {
	_, conn, _, err := s.apiConnectionFor(c, a)
	if err != nil {
		return conn, store.Version{}, err
	}
	n, err := strconv.Atoi(c.Param("v"))
	if err != nil || n < 1 {
		return conn, store.Version{}, &problemError{status: http.StatusNotFound, title: "No such version", detail: "Versions are numbered from 1.",
			fields: []problemField{{Field: "version", Detail: "a positive whole number"}}}
	}
	v, err := s.opts.DB.Version(c.Request().Context(), conn.ID, n)
	if errors.Is(err, store.ErrNotFound) {
		return conn, v, &problemError{status: http.StatusNotFound, title: "No such version",
			detail: fmt.Sprintf("Connection %d has versions 1 to %d.", conn.ID, conn.CurrentVersion)}
	}
	return conn, v, err
}

// apiPlan is GET /api/v1/connections/:id/versions/:v/plan: the version's
// provisioning plan as the connection's page shows it (planView, without
// the approvers' AWS look-ups).
func (s *Server) apiPlan(c echo.Context) error {
	conn, v, err := s.apiVersionFor(c, workflow.ActionViewPlan)
	if err != nil {
		return err
	}
	pv, _ := s.planView(c.Request().Context(), conn, v, false, seesFullErrors(c))
	return c.JSON(http.StatusOK, apiPlanOf(v, pv))
}

// apiPlanDiff is GET /api/v1/connections/:id/versions/:v/plan-diff: what
// the version changes against the approved version, in the contract and in
// the plan (the page's "What this change does"). 409 when the connection
// has no approved version.
func (s *Server) apiPlanDiff(c echo.Context) error {
	conn, v, err := s.apiVersionFor(c, workflow.ActionViewPlan)
	if err != nil {
		return err
	}
	if conn.ApprovedVersion == 0 {
		return &problemError{status: http.StatusConflict, title: "Never approved",
			detail: fmt.Sprintf("Connection %d has no approved version to compare with; read the version's plan.", conn.ID)}
	}
	from, err := s.opts.DB.Version(c.Request().Context(), conn.ID, conn.ApprovedVersion)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.planDiffOf(conn, from, v))
}

// apiPreviewBody is what filing a contract would show (schema Preview).
type apiPreviewBody struct {
	Team            string           `json:"team"`
	ConnectionID    int64            `json:"connection_id,omitempty"`
	ComparedWith    int              `json:"compared_with"`
	ContractHash    string           `json:"contract_hash"`
	Unchanged       bool             `json:"unchanged"`
	Errors          []problemField   `json:"errors"`
	ContractChanges []apiChange      `json:"contract_changes"`
	Plan            *apiPlanBody     `json:"plan,omitempty"`
	PlanDiff        *apiPlanDiffBody `json:"plan_diff,omitempty"`
}

// previewConnectionID stands in for the id a new request gets when it is
// filed: a plan names its connection (the objects' connection label, the
// admission parameters and their link to the change page), and a preview
// has none yet. The largest id, which no request gets before the others.
const previewConnectionID int64 = math.MaxInt64

// apiPreview is POST /api/v1/preview: a contract in the export format
// checked as a new request would be, nothing saved: the field errors the
// form would show, its fields (the changes against an empty contract),
// and the plan its version 1 would have (newRequestPlan). A read: a read
// token may ask, for a team whose requests its person may file.
func (s *Server) apiPreview(c echo.Context) error {
	con, err := readPreviewBody(c)
	if err != nil {
		return err
	}
	if _, err := authorize(c, workflow.ActionCreateRequest, workflow.Object{Team: con.Team}); err != nil {
		return err
	}
	if err := apiPermits(c, workflow.ActionViewConnection, con.Team); err != nil {
		return err
	}
	out := apiPreviewBody{Team: con.Team, ContractHash: con.Hash(), ContractChanges: apiChanges(workflow.Contract{}, con),
		Errors: previewErrors(s.previewCheck(c, store.Connection{}, con))}
	plan := s.newRequestPlan(c, con, out.ContractHash)
	out.Plan = &plan
	return c.JSON(http.StatusOK, out)
}

// newRequestPlan is the plan an admin would see on a new request filed
// with con, as its version 1 (planView, as the connection's page builds
// it), built with previewConnectionID for the id filing gives it. The
// plan's hash is left out: an approval names the hash of the plan with
// the request's own id. A contract with field errors has no plan (the
// page's "No plan yet").
func (s *Server) newRequestPlan(c echo.Context, con workflow.Contract, hash string) apiPlanBody {
	conn := store.Connection{ID: previewConnectionID, Team: con.Team, State: workflow.StateDraft, CurrentVersion: 1}
	v := store.Version{ConnectionID: conn.ID, Version: 1, Hash: hash, Contract: con}
	pv, _ := s.planView(c.Request().Context(), conn, v, false, seesFullErrors(c))
	plan := apiPlanOf(v, pv)
	plan.PlanHash = ""
	if pv.Error == "" {
		plan.Warnings = append(plan.Warnings, fmt.Sprintf("A preview: the plan names connection %d where the request will have the id it gets when filed "+
			"(its objects' connection label, the admission parameters); the plan hash an approval names is the filed request's.", previewConnectionID))
	}
	return plan
}

// apiPreviewChange is POST /api/v1/connections/:id/preview: a contract
// checked and compared as the connection's next version, nothing saved:
// the field errors, the changes against the version the admin would
// compare it with (a live connection's approved version, else its current
// one), the plan and, for a live connection, the plan diff. A read, for
// those who see the connection's plan.
func (s *Server) apiPreviewChange(c echo.Context) error {
	conn, base, err := s.previewBase(c)
	if err != nil {
		return err
	}
	con, err := readPreviewBody(c)
	if err != nil {
		return err
	}
	if err := sameTeam(conn, con); err != nil {
		return err
	}
	out := apiPreviewBody{Team: con.Team, ConnectionID: conn.ID, ComparedWith: base.Version, ContractHash: con.Hash(),
		ContractChanges: apiChanges(base.Contract, con), Errors: previewErrors(s.previewCheck(c, conn, con))}
	out.Unchanged = base.Hash == out.ContractHash
	next := store.Version{ConnectionID: conn.ID, Version: conn.CurrentVersion + 1, Hash: out.ContractHash, Contract: con}
	if out.Unchanged {
		next = base
	}
	pv, _ := s.planView(c.Request().Context(), conn, next, false, seesFullErrors(c))
	plan := apiPlanOf(next, pv)
	out.Plan = &plan
	if conn.State.Live() && !out.Unchanged {
		pd := s.planDiffOf(conn, base, next)
		out.PlanDiff = &pd
	}
	return c.JSON(http.StatusOK, out)
}

// readPreviewBody is readContractBody for a preview: a contract over a
// size limit is answered in the preview's errors, not refused.
func readPreviewBody(c echo.Context) (workflow.Contract, error) {
	con, err := readContractBody(c)
	var pe *problemError
	if errors.As(err, &pe) && pe.status == http.StatusUnprocessableEntity {
		err = nil
	}
	return con.Normalize(), err
}

// previewBase loads the preview's connection (as its page does: another
// team's is not found) and the version a contract is compared with.
func (s *Server) previewBase(c echo.Context) (store.Connection, store.Version, error) {
	_, conn, _, err := s.apiConnectionFor(c, workflow.ActionViewPlan)
	if err != nil {
		return conn, store.Version{}, err
	}
	n := conn.CurrentVersion
	if conn.State.Live() {
		n = conn.ApprovedVersion
	}
	v, err := s.opts.DB.Version(c.Request().Context(), conn.ID, n)
	return conn, v, err
}

// previewCheck is the field errors the contract would get as conn's next
// version (conn.ID 0: a new request): its size limits, the form's checks,
// and a change's untouchable fields.
func (s *Server) previewCheck(c echo.Context, conn store.Connection, con workflow.Contract) map[string]string {
	errs := mergeFieldErrors(map[string]string{}, con.LimitErrors())
	env := s.validationEnv(c, conn.ID)
	errs = mergeFieldErrors(errs, con.Validate(env))
	if down := env.Unavailable(); down != nil {
		errs["_"] = "the checks against the other connections could not run just now"
	}
	if conn.ID != 0 {
		if more, _, err := s.amendmentErrors(c, conn, con, errs); err == nil {
			errs = more
		} else {
			errs["_"] = "the approved version could not be read"
		}
	}
	return errs
}

func previewErrors(errs map[string]string) []problemField {
	out := []problemField{}
	for _, f := range slices.Sorted(maps.Keys(errs)) {
		out = append(out, problemField{Field: f, Detail: errs[f]})
	}
	return out
}
