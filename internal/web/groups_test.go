package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/identitystore"

	"github.com/hyperpod-governance/portal/internal/auth"
	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/support/awstest"
)

// withIdentityStore makes logins take groups from a local identity store
// endpoint through the real identitystore client, as `portal serve
// --identity-store-id` does.
func withIdentityStore(f *awstest.IdentityStore, attr auth.UserAttribute) harnessOpt {
	api := identitystore.NewFromConfig(awstest.Config(1), func(o *identitystore.Options) { o.BaseEndpoint = aws.String(f.URL()) })
	return func(o *Options) {
		o.Groups = &auth.GroupCache{Lookup: func(ctx context.Context, userName string) ([]string, error) {
			gs, err := awsprov.UserGroups(ctx, api, f.StoreID(), userName)
			if errors.Is(err, awsprov.ErrUserNotFound) {
				return nil, fmt.Errorf("%w: %v", auth.ErrUserNotInDirectory, err)
			}
			return gs, err
		}}
		o.GroupsUser = attr
	}
}

func TestLoginTakesGroupsFromTheIdentityStore(t *testing.T) {
	f := awstest.NewIdentityStore(t)
	// The dev IdP says member.red is in team-red-members; the directory
	// says they own team blue. The directory wins.
	member := f.AddUser("member.red@example.test")
	f.AddMembership(member, f.AddGroup("team-blue-owners"))
	f.AddGroup("team-red-members")
	h := newHarness(t, false, withIdentityStore(f, auth.UserAttrEmail))

	c := h.client()
	resp, body := h.login(c, "member.red")
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/" {
		t.Fatalf("login ended at %s with %d:\n%s", resp.Request.URL, resp.StatusCode, body)
	}
	teams := section(body, "user-teams")
	if !strings.Contains(teams, "blue") || !strings.Contains(teams, "owner") || strings.Contains(teams, "red") {
		t.Errorf("teams %q: want blue (owner) from the identity store and not red from the token", teams)
	}
	if resp, _ := h.get(noRedirect(c), "/teams/red"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("/teams/red = %d, want 404: the token's group must not count", resp.StatusCode)
	}
	if resp, _ := h.get(noRedirect(c), "/teams/blue"); resp.StatusCode != http.StatusOK {
		t.Errorf("/teams/blue = %d, want 200", resp.StatusCode)
	}
	u, err := h.db.UserByID(context.Background(), 1)
	if err != nil || len(u.Groups) != 1 || u.Groups[0] != "team-blue-owners" {
		t.Errorf("recorded user %+v, %v: want the directory's groups", u, err)
	}

	// A second login within the TTL is served from the cache.
	h.login(h.client(), "member.red")
	if n := f.Count("GetUserId"); n != 1 {
		t.Errorf("GetUserId called %d times for two logins, want 1 (cached)", n)
	}

	// A user in the directory but in no mapped group gets the no-access
	// page, naming where the groups came from.
	f.AddUser("owner.red@example.test")
	resp, body = h.login(h.client(), "owner.red")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "no access to the portal") ||
		!strings.Contains(body, "Your groups in the directory (IAM Identity Center): none") {
		t.Errorf("owner.red with no directory groups: %d\n%s", resp.StatusCode, body)
	}
}

func TestLoginWithPreferredUsername(t *testing.T) {
	f := awstest.NewIdentityStore(t)
	f.AddMembership(f.AddUser("admin"), f.AddGroup("platform-admins"))
	h := newHarness(t, false, withIdentityStore(f, auth.UserAttrPreferredUsername))
	resp, body := h.login(h.client(), "admin")
	if resp.StatusCode != http.StatusOK || !strings.Contains(section(body, "user-roles"), "admin") {
		t.Fatalf("admin by preferred_username: %d\n%s", resp.StatusCode, body)
	}
}

func TestLoginFailsWhenTheIdentityStoreDoes(t *testing.T) {
	f := awstest.NewIdentityStore(t)
	f.AddMembership(f.AddUser("owner.red@example.test"), f.AddGroup("team-red-owners"))
	h := newHarness(t, false, withIdentityStore(f, ""))

	t.Run("store failing", func(t *testing.T) {
		f.Fail(1)
		c := h.client()
		resp, body := h.login(c, "owner.red")
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "Your groups could not be looked up") {
			t.Fatalf("store failing: %d\n%s", resp.StatusCode, body)
		}
		for _, leak := range []string{"InternalFailure", f.StoreID(), "identitystore", "ListGroupMemberships", "GetUserId", "awstest"} {
			if strings.Contains(body, leak) {
				t.Errorf("the page shows %q:\n%s", leak, body)
			}
		}
		if !strings.Contains(body, `data-testid="request-id"`) {
			t.Error("the page has no request id")
		}
		rid := resp.Header.Get("X-Request-Id")
		if rid == "" || !strings.Contains(h.logs.String(), rid) || !strings.Contains(h.logs.String(), "InternalFailure") {
			t.Errorf("the failure is not logged with request id %q and its cause", rid)
		}
		if _, home := h.get(c, "/"); strings.Contains(home, `data-testid="user-name"`) {
			t.Error("a failed group lookup left the user signed in")
		}
		// The failure was not cached: the next login works.
		if resp, _ := h.login(c, "owner.red"); resp.StatusCode != http.StatusOK {
			t.Errorf("login after the store recovered = %d", resp.StatusCode)
		}
	})

	t.Run("access denied", func(t *testing.T) {
		f.Deny("GetUserId", 1)
		resp, body := h.login(h.client(), "member.red")
		if resp.StatusCode != http.StatusServiceUnavailable || strings.Contains(body, "AccessDenied") || strings.Contains(body, awstest.Account) {
			t.Errorf("access denied: %d\n%s", resp.StatusCode, body)
		}
	})

	t.Run("user not in the directory", func(t *testing.T) {
		resp, body := h.login(h.client(), "owner.blue")
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "Your account is not in the directory") ||
			!strings.Contains(body, "owner.blue@example.test") {
			t.Errorf("unknown user: %d\n%s", resp.StatusCode, body)
		}
		rid := resp.Header.Get("X-Request-Id")
		if !strings.Contains(h.logs.String(), "user not in the directory") || !strings.Contains(h.logs.String(), rid) {
			t.Error("the refusal is not logged with the request id")
		}
	})
}
