package awsprov

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
)

// Preview is what a call would do on AWS as it is now, for the plan an
// approver reads: read-only, it makes no change.
type Preview struct {
	// State is "create", "update", "unchanged", "would stop" (the
	// resource is someone else's, or cannot change that way: Detail says
	// why), "checked when it runs" (the call depends on an earlier step) or
	// "unknown" (the lookup failed: Detail has the error).
	State  string
	Detail string
	// Warnings are what the approver should know beyond the state: a
	// Studio execution role without the IAM actions Studio needs, or that
	// check failing.
	Warnings []string
}

// The preview states.
const (
	PreviewCreate    = "create"
	PreviewUpdate    = "update"
	PreviewUnchanged = "unchanged"
	PreviewStops     = "would stop"
	PreviewLater     = "checked when it runs"
	PreviewUnknown   = "unknown"
)

// Preview looks up c's resource with the same reads the step makes first,
// and says whether the step would create, update or leave it, or stop.
func (r *Runner) Preview(ctx context.Context, c Call) Preview {
	p, err := r.preview(ctx, c)
	if err != nil {
		p = Preview{State: PreviewUnknown, Detail: err.Error()}
	}
	if c.StudioRole != nil && r.Clients.IAM != nil {
		missing, err := CheckStudioRole(ctx, r.Clients.IAM, *c.StudioRole)
		switch {
		case err != nil:
			p.Warnings = append(p.Warnings, "Could not check that the Studio execution role "+c.StudioRole.RoleARN+" holds the IAM actions Studio needs ("+
				strings.Join(StudioActions(), ", ")+"): "+err.Error())
		case len(missing) > 0:
			p.Warnings = append(p.Warnings, studioRoleWarning(c.StudioRole.RoleARN, missing))
		}
	}
	return p
}

func (r *Runner) preview(ctx context.Context, c Call) (Preview, error) {
	switch {
	case c.Quota != nil:
		q := c.Quota
		found, err := findComputeQuota(ctx, r.Clients.SageMaker, aws.ToString(q.Name), teamOf(q), aws.ToString(q.ClusterArn))
		if err != nil || found == nil {
			return Preview{State: PreviewCreate}, err
		}
		if err := checkQuotaOwner(ctx, r.Clients.SageMaker, found, aws.ToString(q.Name), aws.ToString(q.ClusterArn), tagValue(q.Tags, TagConnection)); err != nil {
			var foreign *ForeignQuotaError
			var notOurs *NotOursError
			if errors.As(err, &foreign) || errors.As(err, &notOurs) {
				return Preview{State: PreviewStops, Detail: err.Error()}, nil
			}
			return Preview{}, err
		}
		id := aws.ToString(found.ComputeQuotaId)
		cur, err := describe(ctx, r.Clients.SageMaker, id)
		if err != nil {
			return Preview{}, err
		}
		if differs(c.Quota, cur) {
			return Preview{State: PreviewUpdate, Detail: fmt.Sprintf("%s version %d", id, aws.ToInt32(cur.ComputeQuotaVersion))}, nil
		}
		return Preview{State: PreviewUnchanged, Detail: id}, nil
	case c.Domain != nil:
		found, err := findDomain(ctx, r.Clients.Domains, c.Domain.Name)
		if err != nil || found == nil {
			return Preview{State: PreviewCreate}, err
		}
		if err := checkDomainOwner(ctx, r.Clients.Domains, found, c.Domain.Tags[TagConnection]); err != nil {
			var notOurs *NotOursError
			if errors.As(err, &notOurs) {
				return Preview{State: PreviewStops, Detail: err.Error()}, nil
			}
			return Preview{}, err
		}
		id := aws.ToString(found.DomainId)
		cur, err := r.Clients.Domains.DescribeDomain(ctx, &sagemaker.DescribeDomainInput{DomainId: aws.String(id)})
		if err != nil {
			return Preview{}, err
		}
		want, err := c.Domain.normalized()
		if err != nil {
			return Preview{}, err
		}
		if err := immutableDiff(want, cur); err != nil {
			return Preview{State: PreviewStops, Detail: err.Error()}, nil
		}
		if domainUpdate(want, cur) != nil {
			return Preview{State: PreviewUpdate, Detail: id}, nil
		}
		return Preview{State: PreviewUnchanged, Detail: id}, nil
	case c.AccessEntry != nil:
		e := c.AccessEntry
		cur, err := describeAccessEntry(ctx, r.Clients.EKS, e.ClusterName, e.PrincipalARN)
		if err != nil || cur == nil {
			return Preview{State: PreviewCreate}, err
		}
		if err := checkOwner(cur, e.ClusterName, e.PrincipalARN, e.Tags[TagConnection]); err != nil {
			return Preview{State: PreviewStops, Detail: err.Error()}, nil
		}
		have, err := associatedPolicies(ctx, r.Clients.EKS, e.ClusterName, e.PrincipalARN)
		if err != nil {
			return Preview{}, err
		}
		associate, drop := policyChanges(e.Policies, have)
		if !sameSet(e.KubernetesGroups, cur.KubernetesGroups) || len(associate)+len(drop) > 0 {
			return Preview{State: PreviewUpdate}, nil
		}
		return Preview{State: PreviewUnchanged}, nil
	case c.PodIdentity != nil:
		p := c.PodIdentity
		id, err := findPodIdentity(ctx, r.Clients.EKS, p.ClusterName, p.Namespace, p.ServiceAccount)
		if err != nil || id == "" {
			return Preview{State: PreviewCreate}, err
		}
		cur, err := r.Clients.EKS.DescribePodIdentityAssociation(ctx, &eks.DescribePodIdentityAssociationInput{ClusterName: aws.String(p.ClusterName), AssociationId: aws.String(id)})
		if err != nil {
			return Preview{}, err
		}
		if cur.Association == nil || aws.ToString(cur.Association.RoleArn) != p.RoleARN {
			return Preview{State: PreviewUpdate, Detail: id}, nil
		}
		return Preview{State: PreviewUnchanged, Detail: id}, nil
	case c.Assignment != nil, c.DataZone != nil:
		return Preview{State: PreviewLater}, nil
	}
	return Preview{}, errors.New("aws: nothing to preview")
}
