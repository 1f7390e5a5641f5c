package awsprov

// This file decides whose a SageMaker resource is. The portal tags what it
// creates with TagConnection (CreateComputeQuota and CreateDomain take Tags)
// and reads the tags back with ListTags before it changes or deletes one:
// DescribeComputeQuota, ListComputeQuotas, DescribeDomain and ListDomains
// return no tags (aws-sdk-go-v2/service/sagemaker: DescribeComputeQuotaOutput,
// types.ComputeQuotaSummary, DescribeDomainOutput, types.DomainDetails have
// no Tags member; ListTags, https://docs.aws.amazon.com/sagemaker/latest/dg/API_ListTags.html).
// The rule is the EKS access entries' (checkOwner): what another connection
// or a person made is never silently taken over.

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// SageMakerTagsAPI reads a SageMaker resource's tags.
type SageMakerTagsAPI interface {
	ListTags(context.Context, *sagemaker.ListTagsInput, ...func(*sagemaker.Options)) (*sagemaker.ListTagsOutput, error)
}

// sageMakerTags are the tags of the resource arn, every page.
func sageMakerTags(ctx context.Context, api SageMakerTagsAPI, resourceARN string) (map[string]string, error) {
	in := &sagemaker.ListTagsInput{ResourceArn: aws.String(resourceARN)}
	tags := map[string]string{}
	for {
		out, err := api.ListTags(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("%s: list tags: %w", resourceARN, err)
		}
		for _, t := range out.Tags {
			tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
		}
		if aws.ToString(out.NextToken) == "" {
			return tags, nil
		}
		in.NextToken = out.NextToken
	}
}

func tagValue(tags []types.Tag, key string) string {
	for _, t := range tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value)
		}
	}
	return ""
}

func teamOf(q *sagemaker.CreateComputeQuotaInput) string {
	if q.ComputeQuotaTarget == nil {
		return ""
	}
	return aws.ToString(q.ComputeQuotaTarget.TeamName)
}

// ForeignQuotaError is a compute quota for the team that no portal
// connection made (no TagConnection tag): made in the SageMaker console or
// by another tool, under the portal's name or another. HyperPod keeps one
// quota per team, so the portal cannot make its own beside it, and it does
// not take it over on its own: an admin adopts it explicitly (the adopt
// button of the connection page, AdoptComputeQuota), or deletes it. It is
// permanent: retrying cannot change whose it is.
type ForeignQuotaError struct {
	Name, ID, ARN, Team, Cluster string
}

func (e *ForeignQuotaError) Error() string {
	return fmt.Sprintf("compute quota %s (%s) already allocates compute to team %s on %s and was not made by the portal; "+
		"the portal does not take it over on its own: an admin can adopt it on the connection page (the next run then updates it to the contract), "+
		"or delete it in the SageMaker console; then retry", e.Name, e.ARN, e.Team, e.Cluster)
}

// Permanent: someone has to choose.
func (e *ForeignQuotaError) Permanent() bool { return true }

// foreignQuotaMessage finds the quota's ARN in a ForeignQuotaError's
// message as a job records it.
var foreignQuotaMessage = regexp.MustCompile(`\((arn:aws[a-z-]*:sagemaker:[a-z0-9-]*:[0-9]{12}:compute-quota/[a-z0-9]+)\) already allocates compute to team .* was not made by the portal`)

// ForeignQuotaARN returns the quota ARN of a job error caused by a
// *ForeignQuotaError (the job's recorded message), and whether there is one.
func ForeignQuotaARN(jobError string) (string, bool) {
	m := foreignQuotaMessage.FindStringSubmatch(jobError)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// checkQuotaOwner reads q's tags: nil when it is owner's connection's, a
// *NotOursError when another connection's, a *ForeignQuotaError when no
// connection's.
func checkQuotaOwner(ctx context.Context, api SageMakerTagsAPI, q *types.ComputeQuotaSummary, name, cluster, owner string) error {
	tags, err := sageMakerTags(ctx, api, aws.ToString(q.ComputeQuotaArn))
	if err != nil {
		return fmt.Errorf("compute quota %s: %w", name, err)
	}
	switch tags[TagConnection] {
	case owner:
		return nil
	case "":
		team := ""
		if q.ComputeQuotaTarget != nil {
			team = aws.ToString(q.ComputeQuotaTarget.TeamName)
		}
		return &ForeignQuotaError{Name: aws.ToString(q.Name), ID: aws.ToString(q.ComputeQuotaId), ARN: aws.ToString(q.ComputeQuotaArn), Team: team, Cluster: cluster}
	}
	return &NotOursError{What: "compute quota", Name: aws.ToString(q.Name), Cluster: cluster, Owner: tags[TagConnection],
		Fix: "the portal does not take over a quota another connection made; revoke that connection first"}
}

// checkDomainOwner reads the domain's tags: nil when it is owner's
// connection's ("" checks nothing), else a *NotOursError.
func checkDomainOwner(ctx context.Context, api SageMakerTagsAPI, d *types.DomainDetails, owner string) error {
	if owner == "" {
		return nil
	}
	tags, err := sageMakerTags(ctx, api, aws.ToString(d.DomainArn))
	if err != nil {
		return fmt.Errorf("domain %s: %w", aws.ToString(d.DomainName), err)
	}
	if tags[TagConnection] == owner {
		return nil
	}
	return &NotOursError{What: "Studio domain", Name: aws.ToString(d.DomainName) + " (" + aws.ToString(d.DomainId) + ")", Cluster: "this account and region", Owner: tags[TagConnection],
		Fix: "the portal does not take over a domain it did not make for this connection; rename or delete that domain, or change studio.domain_name_format"}
}

// ErrNotAQuota is wrapped by AdoptComputeQuota's error for an ARN that is
// not a compute quota's of the cluster and team: input an admin corrects.
var ErrNotAQuota = errors.New("not a compute quota of this team on this cluster")

// AdoptComputeQuota makes the compute quota quotaARN this connection's, at
// an admin's explicit choice: it checks that the quota allocates to team on
// cluster, is not being deleted and is no other connection's, then tags it
// with TagConnection (and TagTeam). The next provisioning run finds it by
// team, sees the tag, and updates it to the contract (its name stays: the
// API cannot rename a quota). Adopting a quota already this connection's
// changes nothing.
func AdoptComputeQuota(ctx context.Context, api SageMakerAPI, quotaARN, team, cluster string, connectionID int64) (Result, error) {
	a, err := arn.Parse(strings.TrimSpace(quotaARN))
	id, ok := strings.CutPrefix(a.Resource, "compute-quota/")
	if err != nil || a.Service != "sagemaker" || !ok || id == "" {
		return Result{}, fmt.Errorf("%q: %w (want arn:<partition>:sagemaker:<region>:<account>:compute-quota/<id>)", quotaARN, ErrNotAQuota)
	}
	d, err := api.DescribeComputeQuota(ctx, &sagemaker.DescribeComputeQuotaInput{ComputeQuotaId: aws.String(id)})
	if hasCode(err, "ResourceNotFound", "ValidationException") {
		return Result{}, fmt.Errorf("%s: %w: it does not exist", quotaARN, ErrNotAQuota)
	}
	if err != nil {
		return Result{}, fmt.Errorf("compute quota %s: describe: %w", id, err)
	}
	switch {
	case aws.ToString(d.ComputeQuotaArn) != a.String():
		return Result{}, fmt.Errorf("%s: %w: its ARN is %s", quotaARN, ErrNotAQuota, aws.ToString(d.ComputeQuotaArn))
	case aws.ToString(d.ClusterArn) != cluster:
		return Result{}, fmt.Errorf("%s: %w: it is on cluster %s", quotaARN, ErrNotAQuota, aws.ToString(d.ClusterArn))
	case d.ComputeQuotaTarget == nil || aws.ToString(d.ComputeQuotaTarget.TeamName) != team:
		return Result{}, fmt.Errorf("%s: %w: it allocates to another team", quotaARN, ErrNotAQuota)
	case d.Status == types.SchedulerResourceStatusDeleting || d.Status == types.SchedulerResourceStatusDeleted:
		return Result{}, fmt.Errorf("%s: %w: it is %s", quotaARN, ErrNotAQuota, d.Status)
	}
	tags, err := sageMakerTags(ctx, api, a.String())
	if err != nil {
		return Result{}, err
	}
	owner := strconv.FormatInt(connectionID, 10)
	switch tags[TagConnection] {
	case owner:
		return resultOf(d, Unchanged), nil
	case "":
	default:
		return Result{}, &NotOursError{What: "compute quota", Name: aws.ToString(d.Name), Cluster: cluster, Owner: tags[TagConnection],
			Fix: "the portal does not take over a quota another connection made; revoke that connection first"}
	}
	_, err = api.AddTags(ctx, &sagemaker.AddTagsInput{ResourceArn: aws.String(a.String()), Tags: []types.Tag{
		{Key: aws.String(TagTeam), Value: aws.String(team)},
		{Key: aws.String(TagConnection), Value: aws.String(owner)},
	}})
	if err != nil {
		return Result{}, fmt.Errorf("compute quota %s: tag: %w", id, err)
	}
	return resultOf(d, "adopted"), nil
}
