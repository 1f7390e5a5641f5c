package awsprov

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/identitystore"
	"github.com/aws/aws-sdk-go-v2/service/identitystore/document"
	"github.com/aws/aws-sdk-go-v2/service/identitystore/types"

	"github.com/hyperpod-governance/portal/internal/support/awstest"
)

func identityStoreClient(f *awstest.IdentityStore, maxAttempts int) *identitystore.Client {
	return identitystore.NewFromConfig(awstest.Config(maxAttempts), func(o *identitystore.Options) { o.BaseEndpoint = aws.String(f.URL()) })
}

func TestUserGroupsFollowsEveryPageAndSortsNames(t *testing.T) {
	f := awstest.NewIdentityStore(t)
	f.Set(func(f *awstest.IdentityStore) { f.MaxPageSize = 2 })
	alice := f.AddUser("alice@example.com")
	bob := f.AddUser("bob@example.com")
	var want []string
	for _, n := range []string{"team-red-members", "platform-admins", "finance", "team-blue-owners", "governance-reviewers"} {
		g := f.AddGroup(n)
		f.AddMembership(alice, g)
		want = append(want, n)
	}
	f.AddMembership(bob, f.AddGroup("team-green-owners"))
	slices.Sort(want)

	got, err := UserGroups(context.Background(), identityStoreClient(f, 1), f.StoreID(), "alice@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("groups %v, want %v", got, want)
	}
	// 5 memberships at 2 a page: 3 pages, and one DescribeGroup per group.
	if n := f.Count("ListGroupMembershipsForMember"); n != 3 {
		t.Errorf("ListGroupMembershipsForMember called %d times, want 3 (pages)", n)
	}
	if n := f.Count("GetUserId"); n != 1 {
		t.Errorf("GetUserId called %d times, want 1", n)
	}
	if n := f.Count("DescribeGroup"); n != 5 {
		t.Errorf("DescribeGroup called %d times, want 5", n)
	}

	f.AddUser("carol@example.com")
	got, err = UserGroups(context.Background(), identityStoreClient(f, 1), f.StoreID(), "carol@example.com")
	if err != nil || len(got) != 0 {
		t.Errorf("user in no group: %v, %v; want no groups and no error", got, err)
	}
}

func TestUserGroupsErrors(t *testing.T) {
	f := awstest.NewIdentityStore(t)
	f.AddUser("alice@example.com")
	ctx := context.Background()
	api := identityStoreClient(f, 1)

	_, err := UserGroups(ctx, api, f.StoreID(), "nobody@example.com")
	if !errors.Is(err, ErrUserNotFound) {
		t.Errorf("unknown user: %v, want ErrUserNotFound", err)
	}

	// Another store, well formed: the store is not found, which is not the
	// user's absence.
	_, err = UserGroups(ctx, api, "d-0000000000", "alice@example.com")
	var nf *types.ResourceNotFoundException
	if err == nil || errors.Is(err, ErrUserNotFound) || !errors.As(err, &nf) || nf.ResourceType != types.ResourceTypeIdentityStore {
		t.Errorf("other store: %v, want ResourceNotFoundException for IDENTITY_STORE", err)
	}
	// A malformed id is refused by validation, permanently.
	_, err = UserGroups(ctx, api, "not-a-store", "alice@example.com")
	var ve *types.ValidationException
	if !errors.As(err, &ve) || !IsPermanent(err) {
		t.Errorf("malformed store id: %v, want a permanent ValidationException", err)
	}
	// The store's ARN names it as well as its id.
	if _, err := UserGroups(ctx, api, f.StoreARN(), "alice@example.com"); err != nil {
		t.Errorf("store ARN: %v", err)
	}

	f.Deny("ListGroupMembershipsForMember", 1)
	_, err = UserGroups(ctx, api, f.StoreID(), "alice@example.com")
	var ad *types.AccessDeniedException
	if !errors.As(err, &ad) || !IsPermanent(err) {
		t.Errorf("denied: %v, want a permanent AccessDeniedException", err)
	}

	// Throttling is retried by the SDK when attempts allow.
	f.Throttle(1)
	if _, err := UserGroups(ctx, identityStoreClient(f, 3), f.StoreID(), "alice@example.com"); err != nil {
		t.Errorf("after one throttle with retries: %v", err)
	}
}

func TestGroupID(t *testing.T) {
	f := awstest.NewIdentityStore(t)
	red := f.AddGroup("team-red-owners")
	f.AddGroup("team-blue-owners")
	ctx := context.Background()
	api := identityStoreClient(f, 1)

	id, err := GroupID(ctx, api, f.StoreID(), "team-red-owners")
	if err != nil || id != red {
		t.Fatalf("GroupID = %q, %v; want %q", id, err, red)
	}
	_, err = GroupID(ctx, api, f.StoreID(), "team-green-owners")
	var gnf *GroupNotFoundError
	if !errors.As(err, &gnf) || gnf.DisplayName != "team-green-owners" || !IsPermanent(err) {
		t.Errorf("missing group: %v, want a permanent GroupNotFoundError", err)
	}
	if _, err := GroupID(ctx, api, "d-0000000000", "team-red-owners"); err == nil || errors.As(err, &gnf) {
		t.Errorf("other store: %v, want an error that is not GroupNotFoundError", err)
	}
}

// The endpoint checks what the SDK sends as the service would: paths it
// does not accept, and members the service does not know.
func TestIdentityStoreEndpointIsStrict(t *testing.T) {
	f := awstest.NewIdentityStore(t)
	f.AddUser("alice@example.com")
	f.AddGroup("finance")
	ctx := context.Background()
	api := identityStoreClient(f, 1)
	ua := func(path string, v any) types.AlternateIdentifier {
		return &types.AlternateIdentifierMemberUniqueAttribute{Value: types.UniqueAttribute{AttributePath: aws.String(path), AttributeValue: document.NewLazyDocument(v)}}
	}
	cases := map[string]func() error{
		"group path for a user": func() error {
			_, err := api.GetUserId(ctx, &identitystore.GetUserIdInput{IdentityStoreId: aws.String(f.StoreID()), AlternateIdentifier: ua("displayName", "alice@example.com")})
			return err
		},
		"user path for a group": func() error {
			_, err := api.GetGroupId(ctx, &identitystore.GetGroupIdInput{IdentityStoreId: aws.String(f.StoreID()), AlternateIdentifier: ua("userName", "finance")})
			return err
		},
		"malformed path": func() error {
			_, err := api.GetUserId(ctx, &identitystore.GetUserIdInput{IdentityStoreId: aws.String(f.StoreID()), AlternateIdentifier: ua("user name", "alice@example.com")})
			return err
		},
		"value not a string": func() error {
			_, err := api.GetUserId(ctx, &identitystore.GetUserIdInput{IdentityStoreId: aws.String(f.StoreID()), AlternateIdentifier: ua("userName", 42)})
			return err
		},
		"MaxResults out of range": func() error {
			_, err := api.ListGroupMembershipsForMember(ctx, &identitystore.ListGroupMembershipsForMemberInput{
				IdentityStoreId: aws.String(f.StoreID()), MemberId: &types.MemberIdMemberUserId{Value: "9067a1b2c3-00000001-0000-4000-8000-000000000001"}, MaxResults: aws.Int32(101)})
			return err
		},
		"malformed group id": func() error {
			_, err := api.DescribeGroup(ctx, &identitystore.DescribeGroupInput{IdentityStoreId: aws.String(f.StoreID()), GroupId: aws.String("finance")})
			return err
		},
	}
	for name, call := range cases {
		var ve *types.ValidationException
		if err := call(); !errors.As(err, &ve) {
			t.Errorf("%s: %v, want ValidationException", name, err)
		}
	}
	// A forged page token is refused.
	_, err := api.ListGroupMembershipsForMember(ctx, &identitystore.ListGroupMembershipsForMemberInput{
		IdentityStoreId: aws.String(f.StoreID()), MemberId: &types.MemberIdMemberUserId{Value: "9067a1b2c3-00000001-0000-4000-8000-000000000001"}, NextToken: aws.String("bm9ib2R5OjE=")})
	var ve *types.ValidationException
	if !errors.As(err, &ve) {
		t.Errorf("forged NextToken: %v, want ValidationException", err)
	}
}

// The group sync lists every page of a group's members (and only that
// group's), and finds users by userName; the endpoint checks what it
// receives as the service does.
func TestGroupMemberIDsFollowsEveryPage(t *testing.T) {
	f := awstest.NewIdentityStore(t)
	f.Set(func(f *awstest.IdentityStore) { f.MaxPageSize = 2 })
	owners := f.AddGroup("team-red-owners")
	other := f.AddGroup("team-blue-owners")
	var want []string
	for _, n := range []string{"a@example.com", "b@example.com", "c@example.com", "d@example.com", "e@example.com"} {
		u := f.AddUser(n)
		f.AddMembership(u, owners)
		want = append(want, u)
	}
	f.AddMembership(f.AddUser("z@example.com"), other)
	slices.Sort(want)
	dir := GroupDirectory{API: identityStoreClient(f, 1), StoreID: f.StoreID()}
	ctx := context.Background()
	got, err := dir.GroupMemberIDs(ctx, "team-red-owners")
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("GroupMemberIDs = %v, %v; want %v", got, err, want)
	}
	if n := f.Count("ListGroupMemberships"); n != 3 {
		t.Errorf("ListGroupMemberships calls = %d, want 3 pages of 2", n)
	}
	if id, err := dir.UserID(ctx, "c@example.com"); err != nil || !slices.Contains(want, id) {
		t.Errorf("UserID = %q, %v", id, err)
	}
	if id, err := dir.UserID(ctx, "nobody@example.com"); err != nil || id != "" {
		t.Errorf("UserID of nobody = %q, %v; want \"\"", id, err)
	}
	var nf *GroupNotFoundError
	if _, err := dir.GroupMemberIDs(ctx, "no-such-group"); !errors.As(err, &nf) {
		t.Errorf("an unknown group = %v; want GroupNotFoundError", err)
	}
	// What the endpoint refuses, as the service does.
	api := identityStoreClient(f, 1)
	for name, in := range map[string]*identitystore.ListGroupMembershipsInput{
		"no group":     {IdentityStoreId: aws.String(f.StoreID())},
		"bad group":    {IdentityStoreId: aws.String(f.StoreID()), GroupId: aws.String("not-an-id")},
		"other store":  {IdentityStoreId: aws.String("d-0000000000"), GroupId: aws.String(owners)},
		"max results":  {IdentityStoreId: aws.String(f.StoreID()), GroupId: aws.String(owners), MaxResults: aws.Int32(101)},
		"foreign page": {IdentityStoreId: aws.String(f.StoreID()), GroupId: aws.String(other), NextToken: aws.String("Z3JvdXA6eHwy")},
	} {
		if _, err := api.ListGroupMemberships(ctx, in); err == nil {
			t.Errorf("%s: ListGroupMemberships accepted %+v", name, in)
		}
	}
}
