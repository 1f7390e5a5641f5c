package awsprov

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/ssoadmin"
	ssotypes "github.com/aws/aws-sdk-go-v2/service/ssoadmin/types"
)

// SageMakerDomainAPI is the part of the SageMaker API the Studio domain steps
// call. It is apart from SageMakerAPI so that each step's fake, and each
// step's IAM actions, stay small. Every method must appear in Actions
// (actions_test.go checks).
type SageMakerDomainAPI interface {
	CreateDomain(context.Context, *sagemaker.CreateDomainInput, ...func(*sagemaker.Options)) (*sagemaker.CreateDomainOutput, error)
	DescribeDomain(context.Context, *sagemaker.DescribeDomainInput, ...func(*sagemaker.Options)) (*sagemaker.DescribeDomainOutput, error)
	ListDomains(context.Context, *sagemaker.ListDomainsInput, ...func(*sagemaker.Options)) (*sagemaker.ListDomainsOutput, error)
	UpdateDomain(context.Context, *sagemaker.UpdateDomainInput, ...func(*sagemaker.Options)) (*sagemaker.UpdateDomainOutput, error)
	DeleteDomain(context.Context, *sagemaker.DeleteDomainInput, ...func(*sagemaker.Options)) (*sagemaker.DeleteDomainOutput, error)
	// ListTags reads whose a domain is (TagConnection) before it is
	// changed or deleted (ownership.go).
	ListTags(context.Context, *sagemaker.ListTagsInput, ...func(*sagemaker.Options)) (*sagemaker.ListTagsOutput, error)
}

var _ SageMakerDomainAPI = (*sagemaker.Client)(nil)

// SSOAdminAPI is the part of the IAM Identity Center admin API (ssoadmin,
// IAM prefix "sso") that assigns a team's group to its domain's application.
// Every method must appear in Actions as "sso:<method>".
type SSOAdminAPI interface {
	CreateApplicationAssignment(context.Context, *ssoadmin.CreateApplicationAssignmentInput, ...func(*ssoadmin.Options)) (*ssoadmin.CreateApplicationAssignmentOutput, error)
	DescribeApplicationAssignment(context.Context, *ssoadmin.DescribeApplicationAssignmentInput, ...func(*ssoadmin.Options)) (*ssoadmin.DescribeApplicationAssignmentOutput, error)
	DeleteApplicationAssignment(context.Context, *ssoadmin.DeleteApplicationAssignmentInput, ...func(*ssoadmin.Options)) (*ssoadmin.DeleteApplicationAssignmentOutput, error)
}

var _ SSOAdminAPI = (*ssoadmin.Client)(nil)

// DomainSpec is the SageMaker domain a team should have. The domain always
// authenticates through IAM Identity Center (AuthMode SSO), so that access
// is granted by assigning the team's group (EnsureGroupAssignment).
type DomainSpec struct {
	Name string
	// ExecutionRoleARN is the team's execution role: Studio reaches the
	// cluster as this role, so it decides what the team sees there.
	ExecutionRoleARN string
	VpcID            string
	SubnetIDs        []string
	SecurityGroupIDs []string
	// AppNetworkAccessType is "VpcOnly" (the default here, unlike the API's
	// PublicInternetOnly: a team's Studio traffic stays in the VPC) or
	// "PublicInternetOnly".
	AppNetworkAccessType string
	// KmsKeyID encrypts the domain's volumes; empty is an AWS managed key.
	KmsKeyID string
	// Tags are set when the domain is created only: Describe does not return
	// them (ListTags does), and UpdateDomain cannot change them. Its
	// TagConnection says whose it is: a domain with the name that is not
	// this connection's is never updated or deleted (*NotOursError).
	Tags map[string]string
}

// DomainResult is the domain after EnsureDomain, to record in the DB. ID is
// the domain id (d-...), ARN the domain ARN; Version is unused.
type DomainResult struct {
	Result
	URL string
	// SSOApplicationARN is the domain's IAM Identity Center application, to
	// assign the team's group to (EnsureGroupAssignment).
	SSOApplicationARN string
}

// ErrDomainRecreate is wrapped by the error EnsureDomain returns when the
// domain differs from the spec in something SageMaker cannot change on an
// existing domain (its VPC, KMS key or authentication mode): the domain has
// to be deleted (DeleteDomain) and provisioned again, which drops every
// user's apps and spaces, so EnsureDomain never does it on its own.
var ErrDomainRecreate = errors.New("SageMaker cannot change this on an existing domain: delete the domain and provision it again")

// permanentError marks err as one that retrying the same step cannot fix
// (IsPermanent), keeping it for errors.As and its message.
type permanentError struct{ err error }

func (e *permanentError) Error() string   { return e.err.Error() }
func (e *permanentError) Unwrap() error   { return e.err }
func (e *permanentError) Permanent() bool { return true }

func permanentf(format string, args ...any) error {
	return &permanentError{fmt.Errorf(format, args...)}
}

// domainNamePattern is the API's pattern for DomainName.
var domainNamePattern = regexp.MustCompile(`^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$`)

// normalized checks what the API would reject before any call is made, and
// fills the defaults, so that what is compared is what is sent.
func (s DomainSpec) normalized() (DomainSpec, error) {
	if !domainNamePattern.MatchString(s.Name) {
		return s, permanentf("domain: name %q is not 1-63 letters, digits and hyphens", s.Name)
	}
	if s.ExecutionRoleARN == "" || s.VpcID == "" || len(s.SubnetIDs) == 0 {
		return s, permanentf("domain %s: the spec needs an execution role, a VPC and subnets", s.Name)
	}
	if s.AppNetworkAccessType == "" {
		s.AppNetworkAccessType = string(types.AppNetworkAccessTypeVpcOnly)
	}
	if !slices.Contains(types.AppNetworkAccessType("").Values(), types.AppNetworkAccessType(s.AppNetworkAccessType)) {
		return s, permanentf("domain %s: app network access type %q is not VpcOnly or PublicInternetOnly", s.Name, s.AppNetworkAccessType)
	}
	if s.AppNetworkAccessType == string(types.AppNetworkAccessTypeVpcOnly) && len(s.SecurityGroupIDs) == 0 {
		return s, permanentf("domain %s: a VpcOnly domain needs security groups", s.Name)
	}
	s.SubnetIDs, s.SecurityGroupIDs = sortedSet(s.SubnetIDs), sortedSet(s.SecurityGroupIDs)
	return s, nil
}

func (s DomainSpec) createInput() *sagemaker.CreateDomainInput {
	in := &sagemaker.CreateDomainInput{
		DomainName: aws.String(s.Name),
		AuthMode:   types.AuthModeSso,
		DefaultUserSettings: &types.UserSettings{
			ExecutionRole:  aws.String(s.ExecutionRoleARN),
			SecurityGroups: s.SecurityGroupIDs,
		},
		SubnetIds:            s.SubnetIDs,
		VpcId:                aws.String(s.VpcID),
		AppNetworkAccessType: types.AppNetworkAccessType(s.AppNetworkAccessType),
	}
	if s.KmsKeyID != "" {
		in.KmsKeyId = aws.String(s.KmsKeyID)
	}
	keys := make([]string, 0, len(s.Tags))
	for k := range s.Tags {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		in.Tags = append(in.Tags, types.Tag{Key: aws.String(k), Value: aws.String(s.Tags[k])})
	}
	return in
}

// EnsureDomain makes the SageMaker domain named want.Name match want, and
// waits until it is InService. It is idempotent: it finds the domain by
// exact name (ListDomains, every page), creates it when missing (AuthMode
// SSO), updates it when its execution role, security groups, subnets or app
// network access type differ, and does nothing otherwise.
//
// UpdateDomain can change the subnets (removing one fails while the domain
// has running apps, which the service reports), but not the VPC, the KMS key
// or the authentication mode: a domain that differs in those is left alone
// and reported with an error wrapping ErrDomainRecreate, which is permanent.
// A domain that failed (Failed) is a permanent FailedError; one still
// settling after poll.Timeout is a transient TimeoutError.
//
// A create that races another, or whose response was lost and was retried by
// the SDK (ResourceInUse: the name is taken), is resolved by looking the
// domain up again, so a domain is never created twice.
func EnsureDomain(ctx context.Context, api SageMakerDomainAPI, want DomainSpec, poll PollConfig) (DomainResult, error) {
	poll = poll.withDefaults()
	want, err := want.normalized()
	if err != nil {
		return DomainResult{}, err
	}

	found, err := findDomain(ctx, api, want.Name)
	if err != nil {
		return DomainResult{}, err
	}
	if found != nil && found.Status == types.DomainStatusDeleting {
		return DomainResult{}, fmt.Errorf("domain %s (%s): is being deleted; retry later", want.Name, aws.ToString(found.DomainId))
	}
	var id string
	if found != nil {
		if err := checkDomainOwner(ctx, api, found, want.Tags[TagConnection]); err != nil {
			return DomainResult{}, err
		}
		id = aws.ToString(found.DomainId)
	} else {
		out, cerr := api.CreateDomain(ctx, want.createInput())
		switch {
		case cerr == nil:
			d, err := waitDomain(ctx, api, want.Name, aws.ToString(out.DomainId), poll)
			if err != nil {
				return DomainResult{}, err
			}
			return domainResultOf(d, Created), nil
		case hasCode(cerr, "ResourceInUse", "ConflictException"):
			if found, err = findDomain(ctx, api, want.Name); err != nil {
				return DomainResult{}, err
			}
			if found == nil {
				return DomainResult{}, fmt.Errorf("domain %s: create conflicted but no domain has that name: %w", want.Name, cerr)
			}
			if err := checkDomainOwner(ctx, api, found, want.Tags[TagConnection]); err != nil {
				return DomainResult{}, err
			}
			id = aws.ToString(found.DomainId)
		default:
			return DomainResult{}, fmt.Errorf("domain %s: create: %w", want.Name, cerr)
		}
	}

	// It exists: let any change in flight settle, then compare.
	cur, err := waitDomain(ctx, api, want.Name, id, poll)
	var failed *FailedError
	if errors.As(err, &failed) && failed.Status == string(types.DomainStatusUpdateFailed) {
		// A failed update leaves the domain in service as it was; try ours.
		cur, err = describeDomain(ctx, api, want.Name, id)
	}
	if err != nil {
		return DomainResult{}, err
	}
	if err := immutableDiff(want, cur); err != nil {
		return DomainResult{}, err
	}
	update := domainUpdate(want, cur)
	if update == nil {
		return domainResultOf(cur, Unchanged), nil
	}
	if _, err := api.UpdateDomain(ctx, update); err != nil {
		return DomainResult{}, fmt.Errorf("domain %s (%s): update: %w", want.Name, id, err)
	}
	d, err := waitDomain(ctx, api, want.Name, id, poll)
	if err != nil {
		return DomainResult{}, err
	}
	return domainResultOf(d, Updated), nil
}

// DeleteDomain deletes the domain named name and waits until it is gone. A
// domain that does not exist (never created, or already deleted) is not an
// error, and one already being deleted is waited for. owner, when not
// empty, is the connection id the domain must be tagged with: one that is
// not that connection's is left alone and reported as a *NotOursError.
//
// The domain's home EFS volume (every user's home directory: notebooks,
// code, data) is retained (RetentionPolicy HomeEfsFileSystem=Retain):
// deleting a team's domain, say when its contract ends, must not destroy the
// team's work, and a deleted volume cannot be brought back. The volume
// stays in the account, costing storage, until the platform team archives
// or deletes it. The service refuses (ResourceInUse) to delete a domain that
// still has user profiles, spaces or apps; this step does not delete those.
func DeleteDomain(ctx context.Context, api SageMakerDomainAPI, name, owner string, poll PollConfig) error {
	poll = poll.withDefaults()
	found, err := findDomain(ctx, api, name)
	if err != nil || found == nil {
		return err
	}
	if err := checkDomainOwner(ctx, api, found, owner); err != nil {
		return err
	}
	id := aws.ToString(found.DomainId)
	if found.Status != types.DomainStatusDeleting {
		_, err = api.DeleteDomain(ctx, &sagemaker.DeleteDomainInput{
			DomainId:        aws.String(id),
			RetentionPolicy: &types.RetentionPolicy{HomeEfsFileSystem: types.RetentionTypeRetain},
		})
		if hasCode(err, "ResourceNotFound") {
			return nil
		}
		if hasCode(err, "ResourceInUse") && found.Status == types.DomainStatusInService {
			// Not a change in flight: the domain still has user profiles,
			// spaces or apps (every SSO user gets a profile at first
			// sign-in). Retrying cannot help; people have to decide.
			return &DomainInUseError{Name: name, ID: id, Err: err}
		}
		if err != nil {
			return fmt.Errorf("domain %s (%s): delete: %w", name, id, err)
		}
	}
	_, err = waitFor(ctx, poll, settling{kind: "domain", name: name, id: id, done: []string{gone}, failed: []string{string(types.DomainStatusDeleteFailed)}},
		func(ctx context.Context) (struct{}, string, string, error) {
			d, err := api.DescribeDomain(ctx, &sagemaker.DescribeDomainInput{DomainId: aws.String(id)})
			switch {
			case hasCode(err, "ResourceNotFound"):
				return struct{}{}, gone, "", nil
			case err != nil:
				return struct{}{}, "", "", fmt.Errorf("domain %s (%s): describe: %w", name, id, err)
			}
			return struct{}{}, string(d.Status), aws.ToString(d.FailureReason), nil
		})
	return err
}

// FindDomain returns the id of the domain named exactly name, or "" when
// there is none.
func FindDomain(ctx context.Context, api SageMakerDomainAPI, name string) (string, error) {
	d, err := findDomain(ctx, api, name)
	if err != nil || d == nil {
		return "", err
	}
	return aws.ToString(d.DomainId), nil
}

// DomainInUseError is a domain revocation was asked to delete that still
// has user profiles, spaces or apps. It is permanent: the portal does not
// delete people's profiles and spaces on its own; an admin removes them
// (the home EFS volume is retained) or sets studio.on_revoke: keep, then
// tries the revocation again.
type DomainInUseError struct {
	Name, ID string
	Err      error
}

func (e *DomainInUseError) Error() string {
	return fmt.Sprintf("domain %s (%s) still has user profiles, spaces or apps, so it cannot be deleted: remove them in the SageMaker console (home directories are retained) or set studio.on_revoke to keep, then try again: %v", e.Name, e.ID, e.Err)
}

func (e *DomainInUseError) Unwrap() error { return e.Err }

// Permanent: retrying cannot remove the profiles.
func (e *DomainInUseError) Permanent() bool { return true }

// findDomain returns the domain named exactly name, or nil when there is
// none. ListDomains has no name filter, so every page is read. Two domains
// with the name (SageMaker does not promise names are unique) is permanent:
// someone has to say which one is the team's.

func findDomain(ctx context.Context, api SageMakerDomainAPI, name string) (*types.DomainDetails, error) {
	in := &sagemaker.ListDomainsInput{MaxResults: aws.Int32(100)}
	var found []types.DomainDetails
	for {
		out, err := api.ListDomains(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("domain %s: list: %w", name, err)
		}
		for _, d := range out.Domains {
			if aws.ToString(d.DomainName) == name {
				found = append(found, d)
			}
		}
		if aws.ToString(out.NextToken) == "" {
			break
		}
		in.NextToken = out.NextToken
	}
	switch len(found) {
	case 0:
		return nil, nil
	case 1:
		return &found[0], nil
	}
	ids := make([]string, len(found))
	for i, d := range found {
		ids[i] = aws.ToString(d.DomainId)
	}
	return nil, permanentf("domain %s: %d domains have this name (%s); delete all but the team's", name, len(found), strings.Join(ids, ", "))
}

func describeDomain(ctx context.Context, api SageMakerDomainAPI, name, id string) (*sagemaker.DescribeDomainOutput, error) {
	d, err := api.DescribeDomain(ctx, &sagemaker.DescribeDomainInput{DomainId: aws.String(id)})
	if err != nil {
		return nil, fmt.Errorf("domain %s (%s): describe: %w", name, id, err)
	}
	return d, nil
}

// gone is the status waitFor is given for a resource Describe no longer
// finds.
const gone = "(gone)"

// waitDomain polls Describe until the domain is InService, and fails with
// the FailureReason when it failed, or with a TimeoutError.
func waitDomain(ctx context.Context, api SageMakerDomainAPI, name, id string, poll PollConfig) (*sagemaker.DescribeDomainOutput, error) {
	return waitFor(ctx, poll, settling{kind: "domain", name: name, id: id,
		done:   []string{string(types.DomainStatusInService)},
		failed: []string{string(types.DomainStatusFailed), string(types.DomainStatusUpdateFailed), string(types.DomainStatusDeleteFailed)},
		abort:  map[string]string{string(types.DomainStatusDeleting): "is being deleted; retry later"},
	}, func(ctx context.Context) (*sagemaker.DescribeDomainOutput, string, string, error) {
		d, err := describeDomain(ctx, api, name, id)
		if err != nil {
			return nil, "", "", err
		}
		return d, string(d.Status), aws.ToString(d.FailureReason), nil
	})
}

func domainResultOf(d *sagemaker.DescribeDomainOutput, a Action) DomainResult {
	return DomainResult{
		Result:            Result{ID: aws.ToString(d.DomainId), ARN: aws.ToString(d.DomainArn), Action: a},
		URL:               aws.ToString(d.Url),
		SSOApplicationARN: aws.ToString(d.SingleSignOnApplicationArn),
	}
}

// immutableDiff reports what of want an existing domain cannot be changed
// to, wrapping ErrDomainRecreate.
func immutableDiff(want DomainSpec, cur *sagemaker.DescribeDomainOutput) error {
	id := aws.ToString(cur.DomainId)
	recreate := func(what, have, wanted string) error {
		if have == "" {
			have = "none"
		}
		if wanted == "" {
			wanted = "none"
		}
		return &permanentError{fmt.Errorf("domain %s (%s): %s is %s, the spec asks for %s: %w", want.Name, id, what, have, wanted, ErrDomainRecreate)}
	}
	switch {
	case cur.AuthMode != types.AuthModeSso:
		return recreate("authentication mode", string(cur.AuthMode), string(types.AuthModeSso))
	case aws.ToString(cur.VpcId) != want.VpcID:
		return recreate("VPC", aws.ToString(cur.VpcId), want.VpcID)
	case aws.ToString(cur.KmsKeyId) != want.KmsKeyID:
		return recreate("KMS key", aws.ToString(cur.KmsKeyId), want.KmsKeyID)
	}
	return nil
}

// domainUpdate is the UpdateDomain call that makes cur match want, with only
// what differs, or nil when nothing does. Lists compare as sets.
func domainUpdate(want DomainSpec, cur *sagemaker.DescribeDomainOutput) *sagemaker.UpdateDomainInput {
	in := &sagemaker.UpdateDomainInput{DomainId: cur.DomainId}
	changed := false
	settings := cur.DefaultUserSettings
	if settings == nil {
		settings = &types.UserSettings{}
	}
	if aws.ToString(settings.ExecutionRole) != want.ExecutionRoleARN || !slices.Equal(sortedSet(settings.SecurityGroups), want.SecurityGroupIDs) {
		// UpdateDomain sets the members it is sent and keeps the rest; an
		// empty, non-nil SecurityGroups clears them.
		in.DefaultUserSettings = &types.UserSettings{
			ExecutionRole:  aws.String(want.ExecutionRoleARN),
			SecurityGroups: append([]string{}, want.SecurityGroupIDs...),
		}
		changed = true
	}
	if !slices.Equal(sortedSet(cur.SubnetIds), want.SubnetIDs) {
		in.SubnetIds = want.SubnetIDs
		changed = true
	}
	access := cur.AppNetworkAccessType
	if access == "" {
		access = types.AppNetworkAccessTypePublicInternetOnly // the API's default
	}
	if string(access) != want.AppNetworkAccessType {
		in.AppNetworkAccessType = types.AppNetworkAccessType(want.AppNetworkAccessType)
		changed = true
	}
	if !changed {
		return nil
	}
	return in
}

// sortedSet is s sorted without duplicates, as a new slice.
func sortedSet(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

// EnsureGroupAssignment assigns the Identity Center group groupID to the
// application applicationARN (a domain's SSOApplicationARN), so that the
// group's members can open the team's Studio. It is idempotent: it looks the
// assignment up first (Created, or Unchanged when present). A create that
// conflicts (the assignment appeared meanwhile, or a lost response was
// retried) is confirmed by looking again. An application that does not exist
// is permanent, with the service's message: the domain has to be provisioned
// (and be InService) first. The Result's ID is the group, its ARN the
// application.
func EnsureGroupAssignment(ctx context.Context, api SSOAdminAPI, applicationARN, groupID string) (Result, error) {
	if applicationARN == "" || groupID == "" {
		return Result{}, permanentf("group assignment: needs an application ARN and a group id")
	}
	res := Result{ID: groupID, ARN: applicationARN}
	present, err := groupAssigned(ctx, api, applicationARN, groupID)
	if err != nil {
		return Result{}, err
	}
	if present {
		res.Action = Unchanged
		return res, nil
	}
	_, err = api.CreateApplicationAssignment(ctx, &ssoadmin.CreateApplicationAssignmentInput{
		ApplicationArn: aws.String(applicationARN),
		PrincipalId:    aws.String(groupID),
		PrincipalType:  ssotypes.PrincipalTypeGroup,
	})
	switch {
	case err == nil:
		res.Action = Created
		return res, nil
	case hasCode(err, "ConflictException"):
		if present, derr := groupAssigned(ctx, api, applicationARN, groupID); derr != nil || !present {
			return Result{}, fmt.Errorf("group %s on application %s: create conflicted and no assignment was found: %w", groupID, applicationARN, err)
		}
		res.Action = Unchanged
		return res, nil
	case hasCode(err, "ResourceNotFoundException"):
		return Result{}, permanentf("group %s on application %s: create: %w", groupID, applicationARN, err)
	}
	return Result{}, fmt.Errorf("group %s on application %s: create: %w", groupID, applicationARN, err)
}

// groupAssigned reports whether the group is assigned to the application. A
// missing assignment and a missing application are both not found here;
// Create tells them apart.
func groupAssigned(ctx context.Context, api SSOAdminAPI, applicationARN, groupID string) (bool, error) {
	_, err := api.DescribeApplicationAssignment(ctx, &ssoadmin.DescribeApplicationAssignmentInput{
		ApplicationArn: aws.String(applicationARN),
		PrincipalId:    aws.String(groupID),
		PrincipalType:  ssotypes.PrincipalTypeGroup,
	})
	switch {
	case err == nil:
		return true, nil
	case hasCode(err, "ResourceNotFoundException"):
		return false, nil
	}
	return false, fmt.Errorf("group %s on application %s: describe: %w", groupID, applicationARN, err)
}

// DeleteGroupAssignment removes the group's assignment to the application.
// An assignment, or an application, that does not exist is not an error:
// deleting a domain takes its application and assignments with it.
func DeleteGroupAssignment(ctx context.Context, api SSOAdminAPI, applicationARN, groupID string) error {
	if applicationARN == "" || groupID == "" {
		return permanentf("group assignment: needs an application ARN and a group id")
	}
	_, err := api.DeleteApplicationAssignment(ctx, &ssoadmin.DeleteApplicationAssignmentInput{
		ApplicationArn: aws.String(applicationARN),
		PrincipalId:    aws.String(groupID),
		PrincipalType:  ssotypes.PrincipalTypeGroup,
	})
	if err != nil && !hasCode(err, "ResourceNotFoundException") {
		return fmt.Errorf("group %s on application %s: delete: %w", groupID, applicationARN, err)
	}
	return nil
}
