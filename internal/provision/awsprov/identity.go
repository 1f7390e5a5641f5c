package awsprov

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/identitystore"
	"github.com/aws/aws-sdk-go-v2/service/identitystore/document"
	"github.com/aws/aws-sdk-go-v2/service/identitystore/types"
)

// IdentityStoreAPI is the part of the IAM Identity Center identity store API
// the portal calls: at login, to find a user's groups, and when provisioning,
// to find a team's group. *identitystore.Client satisfies it; so does a
// client pointed at a test endpoint. Every method here must appear in
// Actions (actions_test.go checks).
type IdentityStoreAPI interface {
	GetUserId(context.Context, *identitystore.GetUserIdInput, ...func(*identitystore.Options)) (*identitystore.GetUserIdOutput, error)
	GetGroupId(context.Context, *identitystore.GetGroupIdInput, ...func(*identitystore.Options)) (*identitystore.GetGroupIdOutput, error)
	ListGroupMembershipsForMember(context.Context, *identitystore.ListGroupMembershipsForMemberInput, ...func(*identitystore.Options)) (*identitystore.ListGroupMembershipsForMemberOutput, error)
	DescribeGroup(context.Context, *identitystore.DescribeGroupInput, ...func(*identitystore.Options)) (*identitystore.DescribeGroupOutput, error)
	ListGroupMemberships(context.Context, *identitystore.ListGroupMembershipsInput, ...func(*identitystore.Options)) (*identitystore.ListGroupMembershipsOutput, error)
}

var _ IdentityStoreAPI = (*identitystore.Client)(nil)

// ErrUserNotFound: the identity store has no user with that userName.
var ErrUserNotFound = errors.New("identity store: no such user")

// GroupNotFoundError is a group display name the identity store does not
// know. It is permanent (IsPermanent): retrying cannot help until someone
// creates the group in IAM Identity Center or corrects the name.
type GroupNotFoundError struct {
	StoreID     string
	DisplayName string
}

func (e *GroupNotFoundError) Error() string {
	return fmt.Sprintf("identity store %s: no group has the display name %q; create it in IAM Identity Center or correct the name", e.StoreID, e.DisplayName)
}

// Permanent marks the error for IsPermanent.
func (e *GroupNotFoundError) Permanent() bool { return true }

// GroupID returns the id of the group whose display name is displayName
// (display names are unique in an identity store).
func GroupID(ctx context.Context, api IdentityStoreAPI, storeID, displayName string) (string, error) {
	out, err := api.GetGroupId(ctx, &identitystore.GetGroupIdInput{
		IdentityStoreId: aws.String(storeID),
		AlternateIdentifier: &types.AlternateIdentifierMemberUniqueAttribute{Value: types.UniqueAttribute{
			AttributePath:  aws.String("displayName"),
			AttributeValue: document.NewLazyDocument(displayName),
		}},
	})
	if err != nil {
		if groupNotFound(err) {
			return "", &GroupNotFoundError{StoreID: storeID, DisplayName: displayName}
		}
		return "", fmt.Errorf("identity store %s: group %q: get id: %w", storeID, displayName, err)
	}
	return aws.ToString(out.GroupId), nil
}

// groupNotFound tells "no such group" from "no such identity store", which
// the service reports with the same code but another resource type.
func groupNotFound(err error) bool {
	var nf *types.ResourceNotFoundException
	return errors.As(err, &nf) && (nf.ResourceType == "" || nf.ResourceType == types.ResourceTypeGroup)
}

// UserGroups returns the sorted display names of the groups the user whose
// Identity Center userName is userName belongs to (direct memberships; the
// identity store has no nested groups). A user the store does not know is
// ErrUserNotFound.
func UserGroups(ctx context.Context, api IdentityStoreAPI, storeID, userName string) ([]string, error) {
	u, err := api.GetUserId(ctx, &identitystore.GetUserIdInput{
		IdentityStoreId: aws.String(storeID),
		AlternateIdentifier: &types.AlternateIdentifierMemberUniqueAttribute{Value: types.UniqueAttribute{
			AttributePath:  aws.String("userName"),
			AttributeValue: document.NewLazyDocument(userName),
		}},
	})
	if err != nil {
		var nf *types.ResourceNotFoundException
		if errors.As(err, &nf) && (nf.ResourceType == "" || nf.ResourceType == types.ResourceTypeUser) {
			return nil, fmt.Errorf("identity store %s: user %q: %w", storeID, userName, ErrUserNotFound)
		}
		return nil, fmt.Errorf("identity store %s: user %q: get id: %w", storeID, userName, err)
	}
	userID := aws.ToString(u.UserId)

	var groupIDs []string
	pages := identitystore.NewListGroupMembershipsForMemberPaginator(api, &identitystore.ListGroupMembershipsForMemberInput{
		IdentityStoreId: aws.String(storeID),
		MemberId:        &types.MemberIdMemberUserId{Value: userID},
		MaxResults:      aws.Int32(100),
	})
	for pages.HasMorePages() {
		p, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("identity store %s: user %s: list memberships: %w", storeID, userID, err)
		}
		for _, m := range p.GroupMemberships {
			if id := aws.ToString(m.GroupId); id != "" && !slices.Contains(groupIDs, id) {
				groupIDs = append(groupIDs, id)
			}
		}
	}

	names := make([]string, 0, len(groupIDs))
	for _, id := range groupIDs {
		g, err := api.DescribeGroup(ctx, &identitystore.DescribeGroupInput{IdentityStoreId: aws.String(storeID), GroupId: aws.String(id)})
		if err != nil {
			if groupNotFound(err) {
				continue // deleted between the listing and now: no longer a membership
			}
			return nil, fmt.Errorf("identity store %s: group %s: describe: %w", storeID, id, err)
		}
		if n := aws.ToString(g.DisplayName); n != "" {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// GroupMemberIDs returns the sorted user ids of the direct members of the
// group whose display name is displayName (the review scheduler's group
// sync). ListGroupMemberships takes IdentityStoreId and GroupId, pages with
// MaxResults (1-100) and NextToken, and answers GroupMemberships, each with
// a MemberId union whose UserId names a user
// (https://docs.aws.amazon.com/singlesignon/latest/IdentityStoreAPIReference/API_ListGroupMemberships.html).
func GroupMemberIDs(ctx context.Context, api IdentityStoreAPI, storeID, displayName string) ([]string, error) {
	gid, err := GroupID(ctx, api, storeID, displayName)
	if err != nil {
		return nil, err
	}
	var ids []string
	pages := identitystore.NewListGroupMembershipsPaginator(api, &identitystore.ListGroupMembershipsInput{
		IdentityStoreId: aws.String(storeID),
		GroupId:         aws.String(gid),
		MaxResults:      aws.Int32(100),
	})
	for pages.HasMorePages() {
		p, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("identity store %s: group %q: list memberships: %w", storeID, displayName, err)
		}
		for _, m := range p.GroupMemberships {
			if u, ok := m.MemberId.(*types.MemberIdMemberUserId); ok && u.Value != "" {
				ids = append(ids, u.Value)
			}
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// UserID returns the id of the user whose userName is userName, or "" when
// the identity store has no such user.
func UserID(ctx context.Context, api IdentityStoreAPI, storeID, userName string) (string, error) {
	u, err := api.GetUserId(ctx, &identitystore.GetUserIdInput{
		IdentityStoreId: aws.String(storeID),
		AlternateIdentifier: &types.AlternateIdentifierMemberUniqueAttribute{Value: types.UniqueAttribute{
			AttributePath:  aws.String("userName"),
			AttributeValue: document.NewLazyDocument(userName),
		}},
	})
	if err != nil {
		var nf *types.ResourceNotFoundException
		if errors.As(err, &nf) && (nf.ResourceType == "" || nf.ResourceType == types.ResourceTypeUser) {
			return "", nil
		}
		return "", fmt.Errorf("identity store %s: user %q: get id: %w", storeID, userName, err)
	}
	return aws.ToString(u.UserId), nil
}

// GroupDirectory is the identity store as the review scheduler's group
// sync asks it (review.Directory): a group's members, and a user's id.
type GroupDirectory struct {
	API     IdentityStoreAPI
	StoreID string
}

// GroupMemberIDs returns the user ids of the members of group (its display
// name).
func (g GroupDirectory) GroupMemberIDs(ctx context.Context, group string) ([]string, error) {
	return GroupMemberIDs(ctx, g.API, g.StoreID, group)
}

// UserID returns the id of the user named userName, "" for none.
func (g GroupDirectory) UserID(ctx context.Context, userName string) (string, error) {
	return UserID(ctx, g.API, g.StoreID, userName)
}
