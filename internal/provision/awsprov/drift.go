package awsprov

// This file compares the AWS half of an approved plan with AWS, read-only:
// the drift check's AWS side. It makes the reads the steps make first
// (List/Describe, ListTags), never a write; re-applying the plan (the
// steps' Ensure) is what fixes what it finds.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// Finding is one difference between a plan's AWS call and its resource on
// AWS: What is "deleted" (the resource is gone) or "changed" (Fields name
// what differs; Detail says more).
type Finding struct {
	Call   Call
	What   string
	Fields []string
	Detail string
}

// Drift compares each call's resource with the call: the compute quota
// (config and target), the Studio domain (execution role, network, KMS key,
// authentication), each access entry (its groups, its access policies and
// their scopes) and the Pod Identity association (its role). A resource
// that is no longer this connection's (its TagConnection changed) is
// "changed" in "tags". Studio group assignments and the DataZone
// connection are not compared. An error is a failed read: the check then
// failed, which is not "no drift".
func (r *Runner) Drift(ctx context.Context, calls []Call) ([]Finding, error) {
	var out []Finding
	for _, c := range calls {
		f, err := r.drift(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("aws drift: %s: %w", c.Title(), err)
		}
		if f != nil {
			f.Call = c
			out = append(out, *f)
		}
	}
	return out, nil
}

func (r *Runner) drift(ctx context.Context, c Call) (*Finding, error) {
	switch {
	case c.Quota != nil:
		return r.quotaDrift(ctx, c.Quota)
	case c.Domain != nil:
		return r.domainDrift(ctx, *c.Domain)
	case c.AccessEntry != nil:
		return r.accessEntryDrift(ctx, *c.AccessEntry)
	case c.PodIdentity != nil:
		return r.podIdentityDrift(ctx, *c.PodIdentity)
	}
	return nil, nil
}

// ownership is the finding for a resource that is not this connection's.
func ownership(err error) (*Finding, error) {
	var notOurs *NotOursError
	var foreign *ForeignQuotaError
	if errors.As(err, &notOurs) || errors.As(err, &foreign) {
		return &Finding{What: "changed", Fields: []string{"tags"}, Detail: err.Error()}, nil
	}
	return nil, err
}

func (r *Runner) quotaDrift(ctx context.Context, want *sagemaker.CreateComputeQuotaInput) (*Finding, error) {
	name, cluster := aws.ToString(want.Name), aws.ToString(want.ClusterArn)
	found, err := findComputeQuota(ctx, r.Clients.SageMaker, name, teamOf(want), cluster)
	if errors.Is(err, errQuotaDeleting) {
		return &Finding{What: "deleted", Detail: err.Error()}, nil
	}
	if err != nil {
		return nil, err
	}
	if found == nil {
		return &Finding{What: "deleted"}, nil
	}
	if err := checkQuotaOwner(ctx, r.Clients.SageMaker, found, name, cluster, tagValue(want.Tags, TagConnection)); err != nil {
		return ownership(err)
	}
	cur, err := describe(ctx, r.Clients.SageMaker, aws.ToString(found.ComputeQuotaId))
	if err != nil {
		return nil, err
	}
	fields := quotaFields(want, cur)
	if len(fields) == 0 {
		return nil, nil
	}
	return &Finding{What: "changed", Fields: fields, Detail: fmt.Sprintf("%s version %d", aws.ToString(cur.ComputeQuotaId), aws.ToInt32(cur.ComputeQuotaVersion))}, nil
}

// quotaFields names what of the quota differs from desired, as differs
// compares it.
func quotaFields(desired *sagemaker.CreateComputeQuotaInput, cur *sagemaker.DescribeComputeQuotaOutput) []string {
	var out []string
	if activation(desired.ActivationState) != activation(cur.ActivationState) {
		out = append(out, "ActivationState")
	}
	dt, ct := desired.ComputeQuotaTarget, cur.ComputeQuotaTarget
	if dt == nil {
		dt = &types.ComputeQuotaTarget{}
	}
	if ct == nil {
		ct = &types.ComputeQuotaTarget{}
	}
	if aws.ToString(dt.TeamName) != aws.ToString(ct.TeamName) {
		out = append(out, "ComputeQuotaTarget.TeamName")
	}
	if aws.ToInt32(dt.FairShareWeight) != aws.ToInt32(ct.FairShareWeight) {
		out = append(out, "ComputeQuotaTarget.FairShareWeight")
	}
	d, c := strings.SplitN(configKey(desired.ComputeQuotaConfig), "|", 4), strings.SplitN(configKey(cur.ComputeQuotaConfig), "|", 4)
	for i, f := range []string{"ComputeQuotaConfig.PreemptTeamTasks", "ComputeQuotaConfig.ResourceSharingConfig.Strategy",
		"ComputeQuotaConfig.ResourceSharingConfig.BorrowLimit", "ComputeQuotaConfig.ComputeQuotaResources"} {
		if d[i] != c[i] {
			out = append(out, f)
		}
	}
	return out
}

func (r *Runner) domainDrift(ctx context.Context, spec DomainSpec) (*Finding, error) {
	want, err := spec.normalized()
	if err != nil {
		return nil, err
	}
	found, err := findDomain(ctx, r.Clients.Domains, want.Name)
	if err != nil {
		return nil, err
	}
	if found == nil || found.Status == types.DomainStatusDeleting {
		return &Finding{What: "deleted"}, nil
	}
	if err := checkDomainOwner(ctx, r.Clients.Domains, found, want.Tags[TagConnection]); err != nil {
		return ownership(err)
	}
	cur, err := describeDomain(ctx, r.Clients.Domains, want.Name, aws.ToString(found.DomainId))
	if err != nil {
		return nil, err
	}
	settings := cur.DefaultUserSettings
	if settings == nil {
		settings = &types.UserSettings{}
	}
	var fields []string
	for _, f := range []struct {
		name string
		same bool
	}{
		{"AuthMode", cur.AuthMode == types.AuthModeSso},
		{"DefaultUserSettings.ExecutionRole", aws.ToString(settings.ExecutionRole) == want.ExecutionRoleARN},
		{"DefaultUserSettings.SecurityGroups", slices.Equal(sortedSet(settings.SecurityGroups), want.SecurityGroupIDs)},
		{"VpcId", aws.ToString(cur.VpcId) == want.VpcID},
		{"SubnetIds", slices.Equal(sortedSet(cur.SubnetIds), want.SubnetIDs)},
		{"AppNetworkAccessType", string(cur.AppNetworkAccessType) == want.AppNetworkAccessType},
		{"KmsKeyId", aws.ToString(cur.KmsKeyId) == want.KmsKeyID},
	} {
		if !f.same {
			fields = append(fields, f.name)
		}
	}
	if len(fields) == 0 {
		return nil, nil
	}
	detail := aws.ToString(cur.DomainId)
	if err := immutableDiff(want, cur); err != nil {
		detail += "; re-applying cannot fix it: " + err.Error()
	}
	return &Finding{What: "changed", Fields: fields, Detail: detail}, nil
}

func (r *Runner) accessEntryDrift(ctx context.Context, e AccessEntry) (*Finding, error) {
	cur, err := describeAccessEntry(ctx, r.Clients.EKS, e.ClusterName, e.PrincipalARN)
	if err != nil {
		return nil, err
	}
	if cur == nil {
		return &Finding{What: "deleted"}, nil
	}
	if err := checkOwner(cur, e.ClusterName, e.PrincipalARN, e.Tags[TagConnection]); err != nil {
		return ownership(err)
	}
	var fields, details []string
	if !sameSet(e.KubernetesGroups, cur.KubernetesGroups) {
		fields = append(fields, "kubernetesGroups")
		details = append(details, fmt.Sprintf("groups %v, want %v", cur.KubernetesGroups, e.KubernetesGroups))
	}
	have, err := associatedPolicies(ctx, r.Clients.EKS, e.ClusterName, e.PrincipalARN)
	if err != nil {
		return nil, err
	}
	associate, drop := policyChanges(e.Policies, have)
	for _, p := range associate {
		name := p.PolicyARN[strings.LastIndex(p.PolicyARN, "/")+1:]
		if s, ok := have[p.PolicyARN]; ok {
			fields = append(fields, "accessScope "+name)
			details = append(details, fmt.Sprintf("%s scoped %s, want %s", name, scopeKey(s), scopeKey(p.scope())))
		} else {
			fields = append(fields, "accessPolicy "+name)
			details = append(details, name+" is not associated")
		}
	}
	for _, arn := range drop {
		name := arn[strings.LastIndex(arn, "/")+1:]
		fields = append(fields, "accessPolicy "+name)
		details = append(details, name+" is associated but not in the plan")
	}
	if len(fields) == 0 {
		return nil, nil
	}
	return &Finding{What: "changed", Fields: fields, Detail: strings.Join(details, "; ")}, nil
}

func (r *Runner) podIdentityDrift(ctx context.Context, p PodIdentity) (*Finding, error) {
	id, err := findPodIdentity(ctx, r.Clients.EKS, p.ClusterName, p.Namespace, p.ServiceAccount)
	if err != nil {
		return nil, err
	}
	if id == "" {
		return &Finding{What: "deleted"}, nil
	}
	cur, err := r.Clients.EKS.DescribePodIdentityAssociation(ctx, &eks.DescribePodIdentityAssociationInput{ClusterName: aws.String(p.ClusterName), AssociationId: aws.String(id)})
	if hasCode(err, notFoundCode) {
		return &Finding{What: "deleted"}, nil
	}
	if err != nil {
		return nil, err
	}
	if got := aws.ToString(cur.Association.RoleArn); got != p.RoleARN {
		return &Finding{What: "changed", Fields: []string{"roleArn"}, Detail: fmt.Sprintf("%s: role %s, want %s", id, got, p.RoleARN)}, nil
	}
	return nil, nil
}
