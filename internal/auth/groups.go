package auth

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// GroupSource answers, on the server, which groups a user is in, by the
// user's name in a directory (IAM Identity Center's identity store). When the
// portal has one, its groups replace those of the ID token: the OIDC
// provider in front of Identity Center often sends no groups, or a stale or
// partial list, and the directory is the source of truth for who is in which
// team. Merging would let a token claim grant a role the directory does not.
type GroupSource interface {
	// Groups returns the display names of the user's groups, sorted.
	Groups(ctx context.Context, userName string) ([]string, error)
}

// ErrUserNotInDirectory: the directory has no user with that name. Lookups
// wrap it, so the login page can tell it from a directory that is down.
var ErrUserNotInDirectory = errors.New("auth: user not in the directory")

// UserAttribute names the identity claim that is the user's userName in the
// directory.
type UserAttribute string

// User attributes a directory user name can come from.
const (
	UserAttrEmail             UserAttribute = "email"
	UserAttrPreferredUsername UserAttribute = "preferred_username"
	UserAttrSubject           UserAttribute = "subject"
)

// UserAttributes lists the valid attributes, the default first.
var UserAttributes = []UserAttribute{UserAttrEmail, UserAttrPreferredUsername, UserAttrSubject}

// Valid reports whether a is one of UserAttributes.
func (a UserAttribute) Valid() bool { return slices.Contains(UserAttributes, a) }

// UserName returns the user's directory name from id, or an error saying
// why the identity cannot be looked up. An e-mail address the provider did
// not mark verified (email_verified false or missing) is refused: anyone
// able to claim an address at the provider would otherwise get that
// address's groups.
func (a UserAttribute) UserName(id Identity) (string, error) {
	var v string
	switch a {
	case UserAttrEmail, "":
		if id.Email != "" && id.EmailUnverified {
			return "", errors.New("the identity provider marked the e-mail address unverified")
		}
		if id.Email != "" && !id.EmailVerified {
			return "", errors.New("the identity provider sent no email_verified claim (true) for the e-mail address")
		}
		v = id.Email
	case UserAttrPreferredUsername:
		v = id.PreferredUsername
	case UserAttrSubject:
		v = id.Subject
	default:
		return "", fmt.Errorf("unknown user attribute %q", a)
	}
	if v == "" {
		return "", fmt.Errorf("the identity provider sent no %s claim", a.claim())
	}
	return v, nil
}

func (a UserAttribute) claim() string {
	switch a {
	case UserAttrSubject:
		return "sub"
	case "":
		return string(UserAttrEmail)
	}
	return string(a)
}

// Cache defaults.
const (
	DefaultGroupCacheTTL     = 5 * time.Minute
	DefaultGroupCacheEntries = 1000
)

// GroupCache is a GroupSource that remembers Lookup's answers for TTL, so
// that signing in again (or several tabs signing in) does not call the
// directory each time, while a change of membership takes effect within TTL.
// It holds at most MaxEntries users; errors are not cached, so a directory
// that recovers is asked again at the next login. Safe for concurrent use;
// zero fields get defaults.
type GroupCache struct {
	// Lookup asks the directory; cmd/portal binds awsprov.UserGroups to the
	// identity store client. auth does not import provision, so the
	// directory's API stays out of this package.
	Lookup     func(ctx context.Context, userName string) ([]string, error)
	TTL        time.Duration
	MaxEntries int
	Clock      func() time.Time

	mu      sync.Mutex
	entries map[string]groupEntry
}

type groupEntry struct {
	groups  []string
	expires time.Time
}

// Groups returns userName's groups from the cache, or from Lookup when
// absent or expired.
func (c *GroupCache) Groups(ctx context.Context, userName string) ([]string, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[userName]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return slices.Clone(e.groups), nil
	}
	gs, err := c.Lookup(ctx, userName)
	if err != nil {
		return nil, err
	}
	gs = slices.Clone(gs)
	slices.Sort(gs)
	gs = slices.Compact(gs)
	c.store(userName, gs, now)
	return slices.Clone(gs), nil
}

// FreshGroupSource is a GroupSource that can also skip its cache, for the
// portal's re-checks of signed-in users.
type FreshGroupSource interface {
	GroupSource
	FreshGroups(ctx context.Context, userName string) ([]string, error)
}

// FreshGroups asks Lookup even when the cache has an answer, and caches the
// result: a re-check must see a removal at once, not up to TTL later.
func (c *GroupCache) FreshGroups(ctx context.Context, userName string) ([]string, error) {
	gs, err := c.Lookup(ctx, userName)
	if errors.Is(err, ErrUserNotInDirectory) {
		c.mu.Lock()
		delete(c.entries, userName) // a login must not find them cached
		c.mu.Unlock()
	}
	if err != nil {
		return nil, err
	}
	gs = slices.Clone(gs)
	slices.Sort(gs)
	gs = slices.Compact(gs)
	c.store(userName, gs, c.now())
	return slices.Clone(gs), nil
}

func (c *GroupCache) now() time.Time {
	if c.Clock != nil {
		return c.Clock()
	}
	return time.Now()
}

func (c *GroupCache) store(userName string, gs []string, now time.Time) {
	ttl, max := c.TTL, c.MaxEntries
	if ttl <= 0 {
		ttl = DefaultGroupCacheTTL
	}
	if max <= 0 {
		max = DefaultGroupCacheEntries
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]groupEntry{}
	}
	if _, ok := c.entries[userName]; !ok && len(c.entries) >= max {
		// Full: drop what has expired, then, if still full, the entry
		// closest to expiry. A scan is fine at login rates and a few
		// thousand users.
		var oldest string
		var oldestExp time.Time
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			} else if oldestExp.IsZero() || e.expires.Before(oldestExp) {
				oldest, oldestExp = k, e.expires
			}
		}
		if len(c.entries) >= max {
			delete(c.entries, oldest)
		}
	}
	c.entries[userName] = groupEntry{groups: gs, expires: now.Add(ttl)}
}

// Len is how many users are cached (expired entries included until they are
// replaced or evicted).
func (c *GroupCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
