package awsprov

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/datazone"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/identitystore"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/ssoadmin"
)

// More actions, for revocation.
const (
	Deleted Action = "deleted" // removed (or found already gone)
	Kept    Action = "kept"    // left in place by configuration
)

// Clients are the AWS API clients the steps call.
type Clients struct {
	SageMaker     SageMakerAPI
	Domains       SageMakerDomainAPI
	Scheduler     SchedulerAPI
	SSOAdmin      SSOAdminAPI
	IdentityStore IdentityStoreAPI
	EKS           EKSAPI
	DataZone      DataZoneAPI
	// IAM simulates the Studio execution role's policy for the plan
	// preview; nil skips that check.
	IAM IAMAPI
	// ClusterInfo and Addons are read by the readiness page and the
	// inventory refresh only.
	ClusterInfo ClusterInfoAPI
	Addons      AddonAPI
	// VPCEndpoints reads the EKS cluster's VPC endpoints for the readiness
	// page.
	VPCEndpoints VPCEndpointAPI
}

// Endpoints override the services' endpoints (a VPC endpoint, or a local
// test endpoint); empty means the SDK's default for the region.
type Endpoints struct {
	SageMaker, SSOAdmin, IdentityStore, EKS, DataZone, IAM, EC2 string
}

// NewClients builds the real clients from cfg (credentials from the default
// chain in the portal: in a cluster, the Pod Identity of its own
// ServiceAccount; HTTP client sdkhttp.Client) with the endpoint overrides.
func NewClients(cfg aws.Config, ep Endpoints) Clients {
	base := func(url string) *string {
		if url == "" {
			return nil
		}
		return aws.String(url)
	}
	sm := sagemaker.NewFromConfig(cfg, func(o *sagemaker.Options) { o.BaseEndpoint = base(ep.SageMaker) })
	ek := eks.NewFromConfig(cfg, func(o *eks.Options) { o.BaseEndpoint = base(ep.EKS) })
	return Clients{
		ClusterInfo:   sm,
		Addons:        ek,
		VPCEndpoints:  ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = base(ep.EC2) }),
		SageMaker:     sm,
		Domains:       sm,
		Scheduler:     sm,
		SSOAdmin:      ssoadmin.NewFromConfig(cfg, func(o *ssoadmin.Options) { o.BaseEndpoint = base(ep.SSOAdmin) }),
		IdentityStore: identitystore.NewFromConfig(cfg, func(o *identitystore.Options) { o.BaseEndpoint = base(ep.IdentityStore) }),
		EKS:           ek,
		DataZone:      datazone.NewFromConfig(cfg, func(o *datazone.Options) { o.BaseEndpoint = base(ep.DataZone) }),
		IAM:           iam.NewFromConfig(cfg, func(o *iam.Options) { o.BaseEndpoint = base(ep.IAM) }),
	}
}

// Runner makes a plan's calls.
type Runner struct {
	Clients Clients
	Poll    PollConfig
}

// Ensure makes the resource of c exist as c describes it: idempotent, so a
// job retried after a crash or throttling never creates anything twice.
func (r *Runner) Ensure(ctx context.Context, c Call) (Result, error) {
	switch {
	case c.Quota != nil:
		return EnsureComputeQuota(ctx, r.Clients.SageMaker, c.Quota, r.Poll)
	case c.Domain != nil:
		d, err := EnsureDomain(ctx, r.Clients.Domains, *c.Domain, r.Poll)
		return d.Result, err
	case c.Assignment != nil:
		app, group, err := r.assignmentParts(ctx, c.Assignment)
		if err != nil {
			return Result{}, err
		}
		return EnsureGroupAssignment(ctx, r.Clients.SSOAdmin, app, group)
	case c.DataZone != nil:
		return EnsureHyperPodConnection(ctx, r.Clients.DataZone, *c.DataZone)
	case c.AccessEntry != nil:
		return EnsureAccessEntry(ctx, r.Clients.EKS, *c.AccessEntry)
	case c.PodIdentity != nil:
		return EnsurePodIdentity(ctx, r.Clients.EKS, *c.PodIdentity)
	}
	return Result{}, fmt.Errorf("aws: call %s has nothing to ensure", c.Title())
}

// Remove deletes the resource of c, or keeps it when c says so. A resource
// already gone is not an error: a resumed revocation runs every call again.
func (r *Runner) Remove(ctx context.Context, c Call) (Result, error) {
	gone := Result{ID: c.Name, Action: Deleted}
	if c.KeepOnRevoke {
		return Result{ID: c.Name, Action: Kept}, nil
	}
	var err error
	switch {
	case c.Quota != nil:
		q := c.Quota
		err = DeleteComputeQuota(ctx, r.Clients.SageMaker, aws.ToString(q.Name), teamOf(q), aws.ToString(q.ClusterArn), tagValue(q.Tags, TagConnection))
	case c.Domain != nil:
		err = DeleteDomain(ctx, r.Clients.Domains, c.Domain.Name, c.Domain.Tags[TagConnection], r.Poll)
	case c.Assignment != nil:
		var app, group string
		app, group, err = r.assignmentParts(ctx, c.Assignment)
		if errors.Is(err, errNoDomain) {
			return gone, nil // no domain, so no assignment to it
		}
		if err == nil {
			err = DeleteGroupAssignment(ctx, r.Clients.SSOAdmin, app, group)
		}
	case c.DataZone != nil:
		err = DeleteHyperPodConnection(ctx, r.Clients.DataZone, c.DataZone.DomainID, c.DataZone.ProjectID, c.DataZone.Name)
	case c.AccessEntry != nil:
		err = DeleteAccessEntry(ctx, r.Clients.EKS, c.AccessEntry.ClusterName, c.AccessEntry.PrincipalARN, c.AccessEntry.Tags[TagConnection])
		var notOurs *NotOursError
		if errors.As(err, &notOurs) {
			return Result{ID: c.Name, Action: Kept}, nil
		}
	case c.PodIdentity != nil:
		p := c.PodIdentity
		err = DeletePodIdentity(ctx, r.Clients.EKS, p.ClusterName, p.Namespace, p.ServiceAccount)
	default:
		err = fmt.Errorf("aws: call %s has nothing to remove", c.Title())
	}
	// What this connection did not make is left alone, and recorded as
	// kept: revoking one connection never removes another's, or a person's.
	var notOurs *NotOursError
	var foreign *ForeignQuotaError
	if errors.As(err, &notOurs) || errors.As(err, &foreign) {
		return Result{ID: c.Name, Action: Kept}, nil
	}
	if err != nil {
		return Result{}, err
	}
	return gone, nil
}

var errNoDomain = errors.New("aws: the team's Studio domain does not exist")

// assignmentParts finds the SSO application of the assignment's domain and
// the id of its group.
func (r *Runner) assignmentParts(ctx context.Context, a *Assignment) (app, group string, err error) {
	id := a.SharedDomainID
	if a.Domain != nil {
		if id, err = FindDomain(ctx, r.Clients.Domains, a.Domain.Name); err != nil {
			return "", "", err
		}
		if id == "" {
			return "", "", fmt.Errorf("%w: %s", errNoDomain, a.Domain.Name)
		}
	}
	d, err := r.Clients.Domains.DescribeDomain(ctx, &sagemaker.DescribeDomainInput{DomainId: aws.String(id)})
	if err != nil {
		return "", "", fmt.Errorf("studio domain %s: describe: %w", id, err)
	}
	app = aws.ToString(d.SingleSignOnApplicationArn)
	if app == "" {
		return "", "", permanentf("studio domain %s has no IAM Identity Center application: it must use AuthMode SSO", id)
	}
	group, err = GroupID(ctx, r.Clients.IdentityStore, a.IdentityStoreID, a.Group)
	return app, group, err
}
