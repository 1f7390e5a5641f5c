package web

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/evidence"
	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// evidenceBundle builds a connection's evidence bundle for the signed-in
// user (workflow.ActionExportEvidence: 404 to other teams), signs it with
// the installation key, and checks it as `portal evidence verify --key-file`
// would before serving it: a bundle whose
// stored records do not verify (a contract that is not its hash, a broken
// audit chain) is refused with what failed, never served as evidence.
func (s *Server) evidenceBundle(c echo.Context) (store.Connection, evidence.Bundle, []byte, evidence.Report, error) {
	_, conn, obj, err := s.loadConnection(c)
	if err != nil {
		return conn, evidence.Bundle{}, nil, evidence.Report{}, err
	}
	p, err := authorize(c, workflow.ActionExportEvidence, obj)
	if err != nil {
		return conn, evidence.Bundle{}, nil, evidence.Report{}, err
	}
	ctx := c.Request().Context()
	now := s.opts.Now()
	in, err := s.opts.DB.EvidenceInput(ctx, conn.ID, now)
	if err != nil {
		return conn, evidence.Bundle{}, nil, evidence.Report{}, err
	}
	in.Plans = evidence.Plans(in, func(v evidence.VersionInput) (string, string, error) {
		pl, err := provision.BuildPlan(conn.ID, v.Version, v.Hash, v.Contract, s.opts.Cluster)
		if err != nil {
			return "", "", err
		}
		return pl.Hash(), pl.HashedText(), nil
	})
	if !workflow.Decide(p, workflow.ActionViewFullErrors, workflow.Object{}).Allowed {
		reduceErrors(&in)
	}
	if workflow.Decide(p, workflow.ActionViewCosts, workflow.Object{Team: conn.Team}).Allowed {
		if in.Statements, err = s.opts.DB.TeamStatementBodies(ctx, conn.Team, conn.CreatedAt); err != nil {
			return conn, evidence.Bundle{}, nil, evidence.Report{}, err
		}
	} else {
		in.CostsOmitted = "Left out: the exporter may not read the team's costs (finance and the team's owners may); a bundle exported by one of them includes the team's frozen cost statements."
	}
	by := p.Email
	if by == "" {
		by = p.DisplayName()
	}
	b, err := evidence.Build(in, by, now)
	if err != nil {
		return conn, b, nil, evidence.Report{}, err
	}
	if err := evidence.Sign(&b, s.opts.Signer); err != nil {
		return conn, b, nil, evidence.Report{}, err
	}
	data, err := evidence.Encode(b)
	if err != nil {
		return conn, b, nil, evidence.Report{}, err
	}
	rep := evidence.VerifyWith(data, evidence.Options{TrustedKey: s.opts.Signer.Public()})
	if !rep.OK() {
		return conn, b, nil, rep, &userError{page: views.ErrorPage{Status: http.StatusInternalServerError, Title: "The connection's records do not verify",
			Message: "The evidence bundle was not served: the portal's own records of this connection fail its verification (" + strings.Join(rep.Failures, "; ") +
				"). Run `portal audit verify` and tell the portal's operators.",
			Action: "Back to the connection", ActionURL: fmt.Sprintf("/connections/%d", conn.ID)}, err: rep.Err()}
	}
	return conn, b, data, rep, nil
}

// reduceErrors applies the connection page's reduction of job errors
// (failure.go) to a bundle exported by someone who may not read full
// errors (issue 32 item 4): a job's last error and its failed steps'
// details become the step and the kind of failure. The audit events that
// record a failed job carry the error in their reason, which their chain
// hash covers, so they cannot be reduced and still verify: they are left
// out, and the audit scope says how many and why (the events kept still
// verify; a gap between non-adjacent events is one of the bundle's stated
// limits).
func reduceErrors(in *evidence.Input) {
	for i := range in.Jobs {
		j := &in.Jobs[i]
		failed := ""
		for k := range j.Steps {
			if st := &j.Steps[k]; st.State == string(workflow.StepFailed) {
				failed, st.Detail = st.Name, publicFailure(st.Name, st.Detail)
			}
		}
		if j.LastError != "" {
			j.LastError = publicFailure(failed, j.LastError)
		}
	}
	kept, left := in.Events[:0:0], 0
	for _, e := range in.Events {
		if strings.HasSuffix(e.Action, ".failed") {
			left++
			continue
		}
		kept = append(kept, e)
	}
	in.Events = kept
	if left > 0 {
		in.AuditOmitted = fmt.Sprintf("Left out: %d events recording failed jobs, whose text may name accounts, ARNs and RBAC subjects; only admins read full errors, and a bundle an admin exports includes them.", left)
	}
}

// evidencePage is the printable bundle: the same content as the JSON, for
// people and paper.
func (s *Server) evidencePage(c echo.Context) error {
	conn, b, _, rep, err := s.evidenceBundle(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.EvidencePage(s.page(c, fmt.Sprintf("Evidence · connection #%d", conn.ID)), views.EvidenceView{
		Bundle: b, Checked: rep.Checked, ConnURL: fmt.Sprintf("/connections/%d", conn.ID), JSONURL: fmt.Sprintf("/connections/%d/evidence.json", conn.ID),
		KeyURL: EvidenceKeyPath,
	}))
}

// evidenceJSON downloads the bundle, for `portal evidence verify --key-file
// KEY.json FILE`.
func (s *Server) evidenceJSON(c echo.Context) error {
	conn, b, data, _, err := s.evidenceBundle(c)
	if err != nil {
		return err
	}
	stamp := strings.NewReplacer("-", "", ":", "").Replace(b.GeneratedAt[:len("2006-01-02T15:04:05")]) + "Z"
	c.Response().Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="connection-%d-evidence-%s.json"`, conn.ID, stamp))
	c.Response().Header().Set("X-Bundle-Hash", b.BundleHash)
	c.Response().Header().Set("X-Signing-Key-ID", b.Signature.KeyID)
	return c.Blob(http.StatusOK, "application/json", data)
}
