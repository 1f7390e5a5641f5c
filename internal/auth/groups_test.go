package auth

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/identitystore"

	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/support/awstest"
)

// storeCache is a GroupCache over a real identitystore client pointed at a
// local identity store endpoint, as cmd/portal builds it.
func storeCache(t *testing.T, f *awstest.IdentityStore, clock func() time.Time) *GroupCache {
	t.Helper()
	api := identitystore.NewFromConfig(awstest.Config(1), func(o *identitystore.Options) { o.BaseEndpoint = aws.String(f.URL()) })
	return &GroupCache{
		Lookup: func(ctx context.Context, userName string) ([]string, error) {
			gs, err := awsprov.UserGroups(ctx, api, f.StoreID(), userName)
			if errors.Is(err, awsprov.ErrUserNotFound) {
				return nil, fmt.Errorf("%w: %v", ErrUserNotInDirectory, err)
			}
			return gs, err
		},
		Clock: clock,
	}
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestGroupCacheHitMissExpiry(t *testing.T) {
	f := awstest.NewIdentityStore(t)
	f.Set(func(f *awstest.IdentityStore) { f.MaxPageSize = 1 }) // one membership a page
	alice := f.AddUser("alice@example.com")
	f.AddMembership(alice, f.AddGroup("team-red-owners"))
	f.AddMembership(alice, f.AddGroup("finance"))
	f.AddMembership(alice, f.AddGroup("platform-admins"))
	clock := &fakeClock{t: time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)}
	c := storeCache(t, f, clock.Now)
	ctx := context.Background()
	want := []string{"finance", "platform-admins", "team-red-owners"}

	calls := func() [3]int {
		return [3]int{f.Count("GetUserId"), f.Count("ListGroupMembershipsForMember"), f.Count("DescribeGroup")}
	}
	gs, err := c.Groups(ctx, "alice@example.com")
	if err != nil || !slices.Equal(gs, want) {
		t.Fatalf("miss: %v, %v; want %v", gs, err, want)
	}
	// A miss asks the store: the user, every page (3 memberships, 1 a
	// page: 3 pages), every group.
	if got := calls(); got != [3]int{1, 3, 3} {
		t.Errorf("calls after a miss %v, want [1 3 3]", got)
	}

	gs[0] = "changed by the caller"
	clock.Add(DefaultGroupCacheTTL - time.Second)
	gs, err = c.Groups(ctx, "alice@example.com")
	if err != nil || !slices.Equal(gs, want) {
		t.Fatalf("hit: %v, %v; want %v (the cache must not share its slice)", gs, err, want)
	}
	if got := calls(); got != [3]int{1, 3, 3} {
		t.Errorf("calls after a hit %v, want still [1 3 3]", got)
	}

	// Past the TTL the store is asked again, and sees a new membership.
	f.AddMembership(alice, f.AddGroup("governance-reviewers"))
	clock.Add(time.Second)
	gs, err = c.Groups(ctx, "alice@example.com")
	if err != nil || !slices.Contains(gs, "governance-reviewers") {
		t.Fatalf("after expiry: %v, %v; want the new group", gs, err)
	}
	if got := calls(); got != [3]int{2, 7, 7} {
		t.Errorf("calls after expiry %v, want [2 7 7]", got)
	}
}

func TestGroupCacheDoesNotCacheErrors(t *testing.T) {
	f := awstest.NewIdentityStore(t)
	f.AddMembership(f.AddUser("alice@example.com"), f.AddGroup("finance"))
	c := storeCache(t, f, nil)
	ctx := context.Background()

	f.Fail(1)
	if _, err := c.Groups(ctx, "alice@example.com"); err == nil {
		t.Fatal("a failing store gave no error")
	}
	gs, err := c.Groups(ctx, "alice@example.com")
	if err != nil || !slices.Equal(gs, []string{"finance"}) {
		t.Fatalf("after the store recovered: %v, %v", gs, err)
	}
	if n := f.Count("GetUserId"); n != 2 {
		t.Errorf("GetUserId called %d times, want 2 (the error was cached?)", n)
	}

	for range 2 {
		if _, err := c.Groups(ctx, "nobody@example.com"); !errors.Is(err, ErrUserNotInDirectory) {
			t.Errorf("unknown user: %v, want ErrUserNotInDirectory", err)
		}
	}
	if n := f.Count("GetUserId"); n != 4 {
		t.Errorf("GetUserId called %d times, want 4: a missing user is asked again", n)
	}
}

func TestGroupCacheIsBounded(t *testing.T) {
	lookups := map[string]int{}
	var mu sync.Mutex
	clock := &fakeClock{t: time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)}
	c := &GroupCache{
		Lookup: func(_ context.Context, u string) ([]string, error) {
			mu.Lock()
			defer mu.Unlock()
			lookups[u]++
			return []string{"g-" + u}, nil
		},
		MaxEntries: 3, Clock: clock.Now,
	}
	ctx := context.Background()
	for _, u := range []string{"a", "b", "c", "d"} {
		if _, err := c.Groups(ctx, u); err != nil {
			t.Fatal(err)
		}
		clock.Add(time.Second)
	}
	if c.Len() != 3 {
		t.Errorf("cache holds %d users, want at most 3", c.Len())
	}
	// "a" was closest to expiry, so it went; "d" stayed.
	_, _ = c.Groups(ctx, "d")
	_, _ = c.Groups(ctx, "a")
	if lookups["d"] != 1 || lookups["a"] != 2 {
		t.Errorf("lookups %v: want d cached and a evicted", lookups)
	}
}

func TestGroupCacheConcurrent(t *testing.T) {
	c := &GroupCache{Lookup: func(_ context.Context, u string) ([]string, error) { return []string{"z", u, "a", "a"}, nil }, MaxEntries: 5}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			u := fmt.Sprint("user", i%10)
			gs, err := c.Groups(context.Background(), u)
			if err != nil || !slices.Equal(gs, []string{"a", u, "z"}) {
				t.Errorf("%s: %v, %v", u, gs, err)
			}
		})
	}
	wg.Wait()
	if c.Len() > 5 {
		t.Errorf("cache holds %d users, want at most 5", c.Len())
	}
}

func TestUserAttribute(t *testing.T) {
	id := Identity{Subject: "sub-123", Email: "alice@example.com", EmailVerified: true, PreferredUsername: "alice"}
	for _, tc := range []struct {
		attr UserAttribute
		id   Identity
		want string // "" means an error
	}{
		{"", id, "alice@example.com"},
		{UserAttrEmail, id, "alice@example.com"},
		{UserAttrPreferredUsername, id, "alice"},
		{UserAttrSubject, id, "sub-123"},
		{UserAttrEmail, Identity{Subject: "s", Email: "alice@example.com", EmailUnverified: true}, ""},
		// email_verified missing is refused like false.
		{UserAttrEmail, Identity{Subject: "s", Email: "alice@example.com"}, ""},
		{"", Identity{Subject: "s", Email: "alice@example.com"}, ""},
		{UserAttrEmail, Identity{Subject: "s", Email: "alice@example.com", EmailVerified: true, EmailUnverified: true}, ""},
		// Other attributes do not need it.
		{UserAttrPreferredUsername, Identity{Subject: "s", Email: "alice@example.com", PreferredUsername: "alice"}, "alice"},
		{UserAttrEmail, Identity{Subject: "s"}, ""},
		{UserAttrPreferredUsername, Identity{Subject: "s", Email: "e@x"}, ""},
		{"upn", id, ""},
	} {
		got, err := tc.attr.UserName(tc.id)
		if tc.want == "" {
			if err == nil {
				t.Errorf("%q of %+v = %q, want an error", tc.attr, tc.id, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q = %q, %v; want %q", tc.attr, got, err, tc.want)
		}
	}
	if !UserAttrSubject.Valid() || UserAttribute("upn").Valid() {
		t.Error("Valid is wrong")
	}
}

func TestMergeEmailVerified(t *testing.T) {
	for _, tc := range []struct {
		v                  any
		unverified, verify bool
	}{{false, true, false}, {"false", true, false}, {true, false, true}, {"true", false, true}, {nil, false, false}, {"yes", false, false}} {
		var id Identity
		all := map[string]any{}
		if tc.v != nil {
			all["email_verified"] = tc.v
		}
		id.merge(claims{Email: "a@example.com", PreferredUsername: "a"}, all, "groups")
		if id.EmailUnverified != tc.unverified || id.EmailVerified != tc.verify || id.PreferredUsername != "a" {
			t.Errorf("email_verified %v: EmailUnverified %v, EmailVerified %v, PreferredUsername %q; want %v, %v, a",
				tc.v, id.EmailUnverified, id.EmailVerified, id.PreferredUsername, tc.unverified, tc.verify)
		}
		_, err := UserAttrEmail.UserName(id)
		if (err == nil) != tc.verify {
			t.Errorf("email_verified %v: UserName error %v", tc.v, err)
		}
	}
	// A true email_verified beside another address (userinfo's, when the
	// ID token's is kept) does not verify the kept one.
	var id Identity
	id.merge(claims{Email: "a@example.com"}, map[string]any{}, "groups")
	id.merge(claims{Email: "b@example.com"}, map[string]any{"email_verified": true}, "groups")
	if id.EmailVerified {
		t.Error("email_verified of b@ verified a@")
	}
	// Nor does one sent without an address.
	id = Identity{}
	id.merge(claims{}, map[string]any{"email_verified": true}, "groups")
	id.merge(claims{Email: "a@example.com"}, map[string]any{}, "groups")
	if id.EmailVerified {
		t.Error("email_verified without an address verified a@")
	}
}
