package main

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/auth"
	"github.com/hyperpod-governance/portal/internal/support/awstest"
)

func TestParseConfigIdentityStore(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     env
		wantErr []string
		check   func(c Config) string
	}{
		{
			name: "off by default",
			args: prod(),
			check: func(c Config) string {
				if c.IdentityStoreID != "" || c.IdentityStoreUserAttribute != "email" || c.IdentityStoreCacheTTL != 5*time.Minute ||
					c.AWSRegion != "" || c.AWSEndpoints["identitystore"] != "" {
					return "got " + fmtConfig(c)
				}
				return ""
			},
		},
		{
			name: "flags",
			args: prod("identity-store-id", "d-1234567890", "identity-store-user-attribute", "preferred_username",
				"identity-store-cache-ttl", "90s", "aws-region", "eu-west-1", "aws-endpoint-identitystore", "https://vpce.example.com/"),
			check: func(c Config) string {
				if c.IdentityStoreID != "d-1234567890" || c.IdentityStoreUserAttribute != "preferred_username" || c.IdentityStoreCacheTTL != 90*time.Second ||
					c.AWSRegion != "eu-west-1" || c.AWSEndpoints["identitystore"] != "https://vpce.example.com" {
					return "got " + fmtConfig(c)
				}
				return ""
			},
		},
		{
			name: "env",
			args: prod(),
			env: env{"PORTAL_IDENTITY_STORE_ID": "arn:aws:identitystore::111122223333:identitystore/d-1234567890",
				"PORTAL_IDENTITY_STORE_USER_ATTRIBUTE": "subject", "PORTAL_IDENTITY_STORE_CACHE_TTL": "1m",
				"PORTAL_AWS_REGION": "us-east-1", "PORTAL_AWS_ENDPOINT_IDENTITYSTORE": "http://127.0.0.1:4566"},
			check: func(c Config) string {
				if !strings.HasPrefix(c.IdentityStoreID, "arn:") || c.IdentityStoreUserAttribute != "subject" || c.IdentityStoreCacheTTL != time.Minute ||
					c.AWSRegion != "us-east-1" || c.AWSEndpoints["identitystore"] != "http://127.0.0.1:4566" {
					return "got " + fmtConfig(c)
				}
				return ""
			},
		},
		{
			name: "bad values, all reported",
			args: prod("identity-store-id", "ssoins-123", "identity-store-user-attribute", "upn",
				"identity-store-cache-ttl", "0", "aws-region", "Mars"),
			wantErr: []string{
				`--identity-store-id: "ssoins-123" is not an identity store id`,
				`--identity-store-user-attribute: "upn" must be one of`,
				`--identity-store-cache-ttl: "0" is not a positive duration`,
				`--aws-region: "Mars" is not a region name`,
			},
		},
		{
			name:    "endpoint not a URL",
			args:    prod("identity-store-id", "d-1234567890", "aws-endpoint-identitystore", "vpce.example.com"),
			wantErr: []string{`--aws-endpoint-identitystore: "vpce.example.com" must be an https URL`},
		},
		{
			name: "with dev",
			args: []string{"--dev", "--identity-store-id=d-1234567890"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig("serve", tt.args, tt.env.get, io.Discard)
			if len(tt.wantErr) == 0 && err != nil {
				t.Fatalf("parseConfig(%q): %v", tt.args, err)
			}
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("parseConfig(%q) succeeded, want %q", tt.args, tt.wantErr)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error does not contain %q:\n%v", w, err)
					}
				}
				if n := len(unwrapAll(err)); n != len(tt.wantErr) {
					t.Errorf("got %d errors, want %d:\n%v", n, len(tt.wantErr), err)
				}
			}
			if tt.check != nil {
				if msg := tt.check(c); msg != "" {
					t.Error(msg)
				}
			}
		})
	}
}

// isolateAWS makes the SDK's default configuration see only the test
// credentials: no shared files, no instance metadata, no region.
func isolateAWS(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", dir+"/config")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", dir+"/credentials")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_ACCESS_KEY_ID", awstest.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", awstest.SecretAccessKey)
}

// The client cmd/portal builds from flags (LoadDefaultConfig, the region,
// the endpoint override) reaches the store and feeds the cache.
func TestIdentityStoreGroupsFromConfig(t *testing.T) {
	isolateAWS(t)
	f := awstest.NewIdentityStore(t)
	f.Set(func(f *awstest.IdentityStore) { f.MaxPageSize = 1 })
	u := f.AddUser("alice@example.com")
	f.AddMembership(u, f.AddGroup("team-red-owners"))
	f.AddMembership(u, f.AddGroup("finance"))
	ctx := context.Background()

	c, err := parseConfig("serve", prod("identity-store-id", f.StoreID(), "aws-region", awstest.Region,
		"aws-endpoint-identitystore", f.URL()), env{}.get, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	src, err := identityStoreGroups(ctx, c)
	if err != nil || src == nil {
		t.Fatalf("identityStoreGroups = %v, %v", src, err)
	}
	for range 2 {
		gs, err := src.Groups(ctx, "alice@example.com")
		if err != nil || !slices.Equal(gs, []string{"finance", "team-red-owners"}) {
			t.Fatalf("Groups = %v, %v", gs, err)
		}
	}
	if n, p := f.Count("GetUserId"), f.Count("ListGroupMembershipsForMember"); n != 1 || p != 2 {
		t.Errorf("GetUserId %d, ListGroupMembershipsForMember %d; want 1 (then cached) and 2 (pages)", n, p)
	}
	if _, err := src.Groups(ctx, "nobody@example.com"); !errors.Is(err, auth.ErrUserNotInDirectory) {
		t.Errorf("unknown user: %v, want auth.ErrUserNotInDirectory", err)
	}

	c.IdentityStoreID = ""
	if src, err := identityStoreGroups(ctx, c); src != nil || err != nil {
		t.Errorf("without a store id: %v, %v; want a nil source (not a typed nil)", src, err)
	}

	c.IdentityStoreID, c.AWSRegion = f.StoreID(), ""
	if _, err := identityStoreGroups(ctx, c); err == nil || !strings.Contains(err.Error(), "no AWS region: set --aws-region") {
		t.Errorf("no region anywhere: %v", err)
	}
	t.Setenv("AWS_REGION", awstest.Region)
	if _, err := identityStoreGroups(ctx, c); err != nil {
		t.Errorf("region from AWS_REGION: %v", err)
	}
}
