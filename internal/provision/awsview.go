package provision

// This file is what the web layer needs of the plans' AWS side, so that it
// never imports awsprov: the read-only preview of a plan's AWS calls, and an
// admin's adoption of a compute quota made outside the portal. cmd/portal
// wires both from awsprov (AWSPreviews, AWSQuotaAdopter); without real AWS
// calls they are nil and the pages offer neither.

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
)

// AWSCallPreview is what one AWS call of a plan would do on AWS now.
type AWSCallPreview struct {
	// State is awsprov.Preview's: "create", "update", "unchanged",
	// "would stop", "checked when it runs" or "unknown"; Detail says why.
	State, Detail string
	// Stops: the call would stop the job (the resource is someone else's,
	// or cannot change that way). Unknown: the lookup failed.
	Stops, Unknown bool
	// Warnings are what the approver should know beyond the state.
	Warnings []string
}

// AWSPreviewer looks up, read-only, what an AWS call of a plan would do.
type AWSPreviewer interface {
	PreviewCall(ctx context.Context, c awsprov.Call) AWSCallPreview
}

// AWSPreviews is an AWSPreviewer on awsprov's lookups (*awsprov.Runner).
type AWSPreviews struct {
	Lookup interface {
		Preview(context.Context, awsprov.Call) awsprov.Preview
	}
}

// PreviewCall looks the call up.
func (a AWSPreviews) PreviewCall(ctx context.Context, c awsprov.Call) AWSCallPreview {
	p := a.Lookup.Preview(ctx, c)
	return AWSCallPreview{State: p.State, Detail: p.Detail, Warnings: p.Warnings,
		Stops: p.State == awsprov.PreviewStops, Unknown: p.State == awsprov.PreviewUnknown}
}

// BeforeCluster reports whether an AWS call runs before the plan's
// Kubernetes objects (a guardrail: the compute quota) rather than after.
func BeforeCluster(c awsprov.Call) bool { return c.Phase == awsprov.Guardrail }

// ForeignQuotaARN is the ARN of the compute quota made outside the portal
// that stopped a provisioning job, read from the job's last error; ok is
// false when something else stopped it.
func ForeignQuotaARN(jobError string) (string, bool) { return awsprov.ForeignQuotaARN(jobError) }

// QuotaConnectionTag is the tag that says which connection an AWS resource
// is; an adopted compute quota gets it.
const QuotaConnectionTag = awsprov.TagConnection

// PlanQuota is the compute quota call of a plan, nil when it has none.
func PlanQuota(p Plan) *awsprov.Call {
	for i := range p.AWS {
		if p.AWS[i].Quota != nil {
			return &p.AWS[i]
		}
	}
	return nil
}

// QuotaAdoption is what adopting a compute quota did.
type QuotaAdoption struct {
	ID        string
	Unchanged bool // it was already the connection's
}

// QuotaRefusedError is an adoption refused for a reason the admin can fix
// on the form: the ARN is not a compute quota of the team on the cluster,
// or the quota is another connection's. Its text is the reason.
type QuotaRefusedError struct{ Err error }

func (e *QuotaRefusedError) Error() string { return e.Err.Error() }
func (e *QuotaRefusedError) Unwrap() error { return e.Err }

// QuotaAdopter tags a compute quota made outside the portal as a
// connection's, at an admin's explicit choice.
type QuotaAdopter interface {
	// AdoptQuota adopts the quota quotaARN for the compute quota of the
	// connection's plan. A refusal is a *QuotaRefusedError.
	AdoptQuota(ctx context.Context, quotaARN string, plan Plan, connectionID int64) (QuotaAdoption, error)
}

// AWSQuotaAdopter adopts through SageMaker (awsprov.AdoptComputeQuota).
type AWSQuotaAdopter struct{ API awsprov.SageMakerAPI }

// AdoptQuota checks the quota is the plan's team's on the plan's cluster
// and nobody else's, and tags it as the connection's.
func (a AWSQuotaAdopter) AdoptQuota(ctx context.Context, quotaARN string, plan Plan, connectionID int64) (QuotaAdoption, error) {
	call := PlanQuota(plan)
	if call == nil {
		return QuotaAdoption{}, &QuotaRefusedError{Err: errors.New("the plan has no compute quota")}
	}
	res, err := awsprov.AdoptComputeQuota(ctx, a.API, quotaARN, aws.ToString(call.Quota.ComputeQuotaTarget.TeamName), aws.ToString(call.Quota.ClusterArn), connectionID)
	var notOurs *awsprov.NotOursError
	switch {
	case errors.Is(err, awsprov.ErrNotAQuota), errors.As(err, &notOurs):
		return QuotaAdoption{}, &QuotaRefusedError{Err: err}
	case err != nil:
		return QuotaAdoption{}, err
	}
	return QuotaAdoption{ID: res.ID, Unchanged: res.Action == awsprov.Unchanged}, nil
}

// ClusterLifecycleChecker says which cluster lifecycle actions IAM allows
// a contract's project-facing roles (the seed: they get none); approval
// waits while any is allowed.
type ClusterLifecycleChecker interface {
	// ManagesCluster returns "<role> may <action>" for every lifecycle
	// action IAM allows one of roles ("" roles are skipped), and the roles
	// IAM does not have (their permissions cannot be checked, so an
	// approval waits until they exist). The error is an outage only.
	ManagesCluster(ctx context.Context, roles []string) (allowed, missing []string, err error)
}

// AWSLifecycleCheck simulates the roles' IAM policies
// (awsprov.ClusterLifecycleAllowed) against the portal's HyperPod cluster.
type AWSLifecycleCheck struct {
	IAM        awsprov.IAMAPI
	ClusterARN string
}

// ManagesCluster simulates each role.
func (a AWSLifecycleCheck) ManagesCluster(ctx context.Context, roles []string) (out, missing []string, err error) {
	for _, role := range roles {
		if role == "" {
			continue
		}
		allowed, err := awsprov.ClusterLifecycleAllowed(ctx, a.IAM, role, a.ClusterARN)
		if errors.Is(err, awsprov.ErrRoleNotFound) {
			missing = append(missing, role)
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		for _, act := range allowed {
			out = append(out, role+" may "+act)
		}
	}
	return out, missing, nil
}
