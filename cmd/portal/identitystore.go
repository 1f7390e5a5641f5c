package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/identitystore"

	"github.com/hyperpod-governance/portal/internal/auth"
	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
)

// identityStoreIDRE is what IdentityStoreId accepts: the d- id, the UUID
// form, or the store's ARN.
var identityStoreIDRE = regexp.MustCompile(`^(d-[0-9a-f]{10}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|arn:aws[a-z-]*:identitystore::[0-9]{12}:identitystore/d-[0-9a-f]{10})$`)

// identityStoreLookupTimeout bounds one user's lookup (the SDK's retries
// included), so a slow directory fails the login rather than hanging it.
const identityStoreLookupTimeout = 15 * time.Second

func (c Config) validateIdentityStore() []error {
	var errs []error
	if c.IdentityStoreID != "" && !identityStoreIDRE.MatchString(c.IdentityStoreID) {
		errs = append(errs, fmt.Errorf("--identity-store-id: %q is not an identity store id such as d-1234567890 (see `aws sso-admin list-instances`)", c.IdentityStoreID))
	}
	if !auth.UserAttribute(c.IdentityStoreUserAttribute).Valid() {
		errs = append(errs, fmt.Errorf("--identity-store-user-attribute: %q must be one of %v", c.IdentityStoreUserAttribute, auth.UserAttributes))
	}
	if c.AWSRegion != "" && !regionRE.MatchString(c.AWSRegion) {
		errs = append(errs, fmt.Errorf("--aws-region: %q is not a region name such as us-east-1", c.AWSRegion))
	}
	return errs
}

// identityStoreGroups returns where logins take users' groups from: the
// identity store through a cache, or nil (groups from the token) when
// --identity-store-id is empty. It does not call AWS: like the OIDC
// provider, the store is first asked at a login, which fails with an
// explanation while it cannot be reached.
func identityStoreGroups(ctx context.Context, cfg Config) (auth.GroupSource, error) {
	if cfg.IdentityStoreID == "" {
		return nil, nil
	}
	awsCfg, err := loadAWSConfig(ctx, cfg.AWSRegion)
	if err != nil {
		return nil, fmt.Errorf("--identity-store-id: %w", err)
	}
	api := identitystore.NewFromConfig(awsCfg, func(o *identitystore.Options) {
		if ep := cfg.AWSEndpoints["identitystore"]; ep != "" {
			o.BaseEndpoint = aws.String(ep)
		}
	})
	return &auth.GroupCache{Lookup: identityStoreLookup(api, cfg.IdentityStoreID), TTL: cfg.IdentityStoreCacheTTL}, nil
}

// identityStoreLookup binds awsprov.UserGroups to a client and store, and
// reports a user the store does not know as auth.ErrUserNotInDirectory
// (auth does not import provision).
func identityStoreLookup(api awsprov.IdentityStoreAPI, storeID string) func(context.Context, string) ([]string, error) {
	return func(ctx context.Context, userName string) ([]string, error) {
		ctx, cancel := context.WithTimeout(ctx, identityStoreLookupTimeout)
		defer cancel()
		gs, err := awsprov.UserGroups(ctx, api, storeID, userName)
		if errors.Is(err, awsprov.ErrUserNotFound) {
			return nil, fmt.Errorf("%w: %w", auth.ErrUserNotInDirectory, err)
		}
		return gs, err
	}
}
