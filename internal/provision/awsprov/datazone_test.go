package awsprov

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/datazone"
	dztypes "github.com/aws/aws-sdk-go-v2/service/datazone/types"
	smithy "github.com/aws/smithy-go"

	"github.com/hyperpod-governance/portal/internal/support/awstest"
)

const (
	dzDomain  = "dzd_portaltest01"
	dzProject = "prj_mlresearch"
	dzEnv     = "env_tooling"
)

// newDataZone is an endpoint with the test domain, and the test project with
// one ACTIVE environment.
func newDataZone(t *testing.T) *awstest.DataZone {
	t.Helper()
	f := awstest.NewDataZone(t)
	f.AddDomain(dzDomain)
	f.AddProject(dzDomain, dzProject)
	f.AddEnvironment(dzDomain, dzProject, dzEnv, "Tooling")
	return f
}

// dzClient is a real DataZone client pointed at the test endpoint, with
// maxAttempts SDK attempts per call and no backoff.
func dzClient(f *awstest.DataZone, maxAttempts int) *datazone.Client {
	return datazone.NewFromConfig(awstest.Config(maxAttempts), func(o *datazone.Options) { o.BaseEndpoint = aws.String(f.URL()) })
}

func wantConnection() HyperPodConnection {
	return HyperPodConnection{
		DomainID: dzDomain, ProjectID: dzProject,
		Name: "hyperpod-ml-research", ClusterName: "ml-cluster-a",
		Description: "HyperPod cluster of team ml-research",
	}
}

func ensureConnection(t *testing.T, api DataZoneAPI, want HyperPodConnection) Result {
	t.Helper()
	res, err := EnsureHyperPodConnection(context.Background(), api, want)
	if err != nil {
		t.Fatalf("EnsureHyperPodConnection: %v", err)
	}
	return res
}

// only is the endpoint's one connection; it fails the test when there is
// not exactly one.
func only(t *testing.T, f *awstest.DataZone) awstest.Connection {
	t.Helper()
	all := f.Connections()
	if len(all) != 1 {
		t.Fatalf("endpoint stores %d connections, want 1: %+v", len(all), all)
	}
	return all[0]
}

func TestEnsureHyperPodConnectionCreatesThenIsUnchanged(t *testing.T) {
	f := newDataZone(t)
	api := dzClient(f, 1)
	want := wantConnection()

	res := ensureConnection(t, api, want)
	if res.Action != Created || res.ID == "" {
		t.Errorf("result = %+v, want created with an id", res)
	}
	c := only(t, f)
	if c.ID != res.ID || c.ProjectID != dzProject || c.EnvironmentID != dzEnv || c.Name != want.Name ||
		c.ClusterName != want.ClusterName || c.Description != want.Description || c.ClientToken == "" {
		t.Errorf("stored connection = %+v", c)
	}

	again := ensureConnection(t, api, want)
	if again.Action != Unchanged || again.ID != res.ID {
		t.Errorf("second ensure = %+v, want unchanged %s", again, res.ID)
	}
	if f.Count("created:datazone-connection") != 1 || f.Count("CreateConnection") != 1 ||
		f.Count("UpdateConnection") != 0 || f.Count("DeleteConnection") != 0 {
		t.Errorf("calls after two ensures: %v; want one create and no update or delete", f.Counts())
	}
}

func TestEnsureHyperPodConnectionHandlesChanges(t *testing.T) {
	f := newDataZone(t)
	api := dzClient(f, 1)
	want := wantConnection()
	first := ensureConnection(t, api, want)

	// The description can be updated in place.
	want.Description = "HyperPod cluster of team ml-research (GPU)"
	res := ensureConnection(t, api, want)
	if res.Action != Updated || res.ID != first.ID || only(t, f).Description != want.Description {
		t.Errorf("description change: %+v, stored %+v; want updated in place", res, only(t, f))
	}

	// The cluster cannot: the connection is replaced.
	want.ClusterName = "ml-cluster-b"
	res = ensureConnection(t, api, want)
	c := only(t, f)
	if res.Action != Recreated || res.ID == first.ID || c.ID != res.ID || c.ClusterName != "ml-cluster-b" || c.Description != want.Description {
		t.Errorf("cluster change: %+v, stored %+v; want recreated under a new id", res, c)
	}
	if f.Count("deleted:datazone-connection") != 1 || f.Count("created:datazone-connection") != 2 || f.Count("updated:datazone-connection") != 1 {
		t.Errorf("events: %v; want 2 created, 1 updated, 1 deleted", f.Counts())
	}
	if again := ensureConnection(t, api, want); again.Action != Unchanged || again.ID != res.ID {
		t.Errorf("after the change: %+v, want unchanged %s", again, res.ID)
	}

	// An empty description leaves the one set: the API cannot clear it.
	want.Description = ""
	if again := ensureConnection(t, api, want); again.Action != Unchanged || only(t, f).Description == "" {
		t.Errorf("empty description: %+v, stored %+v", again, only(t, f))
	}
}

func TestEnsureHyperPodConnectionSurvivesThrottlingStorm(t *testing.T) {
	t.Run("SDK retries", func(t *testing.T) {
		f := newDataZone(t)
		f.Throttle(3)
		res := ensureConnection(t, dzClient(f, 5), wantConnection())
		if res.Action != Created || f.Count("created:datazone-connection") != 1 || only(t, f).ID != res.ID {
			t.Errorf("result %+v, events %v; want exactly one connection", res, f.Counts())
		}
		if f.Count("ListConnections") != 4 {
			t.Errorf("list called %d times, want 3 throttled + 1", f.Count("ListConnections"))
		}
	})
	t.Run("job retries", func(t *testing.T) {
		f := newDataZone(t)
		f.Throttle(3)
		api := dzClient(f, 1)
		var res Result
		var err error
		runs := 0
		for runs = 1; runs <= 10; runs++ {
			res, err = EnsureHyperPodConnection(context.Background(), api, wantConnection())
			if err == nil {
				break
			}
			if IsPermanent(err) || !strings.Contains(err.Error(), "ThrottlingException") {
				t.Fatalf("run %d: %v, want a transient throttling error", runs, err)
			}
		}
		if err != nil || runs != 4 || res.Action != Created || f.Count("created:datazone-connection") != 1 {
			t.Errorf("after %d runs: %+v, %v, events %v; want created once on run 4", runs, res, err, f.Counts())
		}
		only(t, f)
	})
}

func TestEnsureHyperPodConnectionLostCreateResponse(t *testing.T) {
	t.Run("SDK retry with the same client token", func(t *testing.T) {
		f := newDataZone(t)
		f.Set(func(f *awstest.DataZone) { f.LoseCreateResponses = 1 })
		res := ensureConnection(t, dzClient(f, 3), wantConnection())
		if res.Action != Created || res.ID != only(t, f).ID {
			t.Errorf("result = %+v, stored %+v", res, only(t, f))
		}
		if f.Count("CreateConnection") != 2 || f.Count("created:datazone-connection") != 1 {
			t.Errorf("create calls %d, created %d; want 2, 1", f.Count("CreateConnection"), f.Count("created:datazone-connection"))
		}
	})
	t.Run("SDK retry answered ConflictException", func(t *testing.T) {
		f := newDataZone(t)
		f.Set(func(f *awstest.DataZone) { f.LoseCreateResponses, f.IgnoreClientTokens = 1, true })
		res := ensureConnection(t, dzClient(f, 3), wantConnection())
		if res.ID != only(t, f).ID || res.Action != Unchanged {
			t.Errorf("result = %+v, stored %+v; want the connection found again", res, only(t, f))
		}
		if f.Count("CreateConnection") != 2 || f.Count("created:datazone-connection") != 1 || f.Count("ListConnections") != 2 {
			t.Errorf("calls %v; want 2 creates (1 created, 1 conflict) and 2 lists", f.Counts())
		}
	})
	t.Run("job retry", func(t *testing.T) {
		f := newDataZone(t)
		f.Set(func(f *awstest.DataZone) { f.LoseCreateResponses = 1 })
		api := dzClient(f, 1)
		_, err := EnsureHyperPodConnection(context.Background(), api, wantConnection())
		if err == nil || IsPermanent(err) {
			t.Fatalf("lost response: err = %v, want transient", err)
		}
		res := ensureConnection(t, api, wantConnection())
		if res.Action != Unchanged || res.ID != only(t, f).ID || f.Count("CreateConnection") != 1 {
			t.Errorf("rerun = %+v, calls %v; want the stored connection, unchanged, created once", res, f.Counts())
		}
	})
}

func TestEnsureHyperPodConnectionEnvironment(t *testing.T) {
	const other = "prj_other"
	for _, tc := range []struct {
		name      string
		setup     func(f *awstest.DataZone)
		envID     string // want.EnvironmentID
		wantEnv   string // "" : an error
		permanent bool
		message   string
	}{
		{name: "only one", wantEnv: dzEnv},
		{
			name: "first ACTIVE by name",
			setup: func(f *awstest.DataZone) {
				f.AddEnvironment(dzDomain, dzProject, "env_a", "Alpha")
				f.AddEnvironment(dzDomain, dzProject, "env_0", "Zulu")
				f.AddEnvironment(dzDomain, dzProject, "env_b", "Beta")
				f.SetEnvironmentStatus(dzDomain, "env_a", dztypes.EnvironmentStatusCreateFailed)
			},
			wantEnv: "env_b",
		},
		{
			name:    "configured",
			setup:   func(f *awstest.DataZone) { f.AddEnvironment(dzDomain, dzProject, "env_a", "Alpha") },
			envID:   dzEnv,
			wantEnv: dzEnv,
		},
		{
			name: "configured in another project",
			setup: func(f *awstest.DataZone) {
				f.AddProject(dzDomain, other)
				f.AddEnvironment(dzDomain, other, "env_other", "Tooling")
			},
			envID: "env_other", permanent: true, message: "environment env_other is not one of the project's",
		},
		{
			name:    "still creating",
			setup:   func(f *awstest.DataZone) { f.SetEnvironmentStatus(dzDomain, dzEnv, dztypes.EnvironmentStatusCreating) },
			message: "no environment is ACTIVE yet (env_tooling CREATING); retry later",
		},
		{
			name: "failed",
			setup: func(f *awstest.DataZone) {
				f.SetEnvironmentStatus(dzDomain, dzEnv, dztypes.EnvironmentStatusCreateFailed)
			},
			permanent: true, message: "no environment is ACTIVE (env_tooling CREATE_FAILED)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newDataZone(t)
			if tc.setup != nil {
				tc.setup(f)
			}
			want := wantConnection()
			want.EnvironmentID = tc.envID
			res, err := EnsureHyperPodConnection(context.Background(), dzClient(f, 1), want)
			if tc.wantEnv != "" {
				if err != nil {
					t.Fatal(err)
				}
				if c := only(t, f); c.EnvironmentID != tc.wantEnv || c.ID != res.ID {
					t.Errorf("created in %s, want %s", c.EnvironmentID, tc.wantEnv)
				}
				return
			}
			var setup *DataZoneSetupError
			if err == nil || IsPermanent(err) != tc.permanent || errors.As(err, &setup) != tc.permanent || !strings.Contains(err.Error(), tc.message) {
				t.Errorf("err = %v, want permanent %v with %q", err, tc.permanent, tc.message)
			}
			if f.Count("CreateConnection") != 0 {
				t.Errorf("create called %d times without a usable environment", f.Count("CreateConnection"))
			}
		})
	}
}

// A connection created in the wrong environment moves to the configured one.
func TestEnsureHyperPodConnectionMovesToConfiguredEnvironment(t *testing.T) {
	f := newDataZone(t)
	f.AddEnvironment(dzDomain, dzProject, "env_a", "Alpha")
	api := dzClient(f, 1)
	first := ensureConnection(t, api, wantConnection())
	if only(t, f).EnvironmentID != "env_a" {
		t.Fatalf("created in %s, want env_a (Alpha sorts first)", only(t, f).EnvironmentID)
	}
	want := wantConnection()
	want.EnvironmentID = dzEnv
	res := ensureConnection(t, api, want)
	if c := only(t, f); res.Action != Recreated || res.ID == first.ID || c.EnvironmentID != dzEnv {
		t.Errorf("result %+v, stored %+v; want recreated in %s", res, c, dzEnv)
	}
}

func TestEnsureHyperPodConnectionProjectWithoutEnvironment(t *testing.T) {
	f := newDataZone(t)
	f.AddProject(dzDomain, "prj_empty")
	want := wantConnection()
	want.ProjectID = "prj_empty"
	_, err := EnsureHyperPodConnection(context.Background(), dzClient(f, 3), want)
	var setup *DataZoneSetupError
	if !errors.As(err, &setup) || !IsPermanent(err) || setup.ProjectID != "prj_empty" ||
		!strings.Contains(err.Error(), "project prj_empty: the project has no environment") {
		t.Fatalf("err = %v, want a permanent error saying the project has no environment", err)
	}
	if f.Count("CreateConnection") != 0 || len(f.Connections()) != 0 {
		t.Errorf("calls %v; want no create", f.Counts())
	}
}

func TestEnsureHyperPodConnectionMissingDomainOrProjectIsPermanent(t *testing.T) {
	for _, tc := range []struct{ name, domain, project, code string }{
		{"unknown domain", "dzd_nosuchdomain", dzProject, "ResourceNotFoundException"},
		{"unknown project", dzDomain, "prj_nosuchproject", "ResourceNotFoundException"},
		{"malformed domain id", "domain-1", dzProject, "ValidationException"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newDataZone(t)
			want := wantConnection()
			want.DomainID, want.ProjectID = tc.domain, tc.project
			_, err := EnsureHyperPodConnection(context.Background(), dzClient(f, 3), want)
			var ae smithy.APIError
			if !errors.As(err, &ae) || ae.ErrorCode() != tc.code || !IsPermanent(err) {
				t.Fatalf("err = %v, want a permanent %s", err, tc.code)
			}
			if f.Count("ListConnections") != 1 || f.Count("CreateConnection") != 0 {
				t.Errorf("calls %v; want one list (not retried) and no create", f.Counts())
			}
		})
	}
}

func TestEnsureHyperPodConnectionAccessDeniedIsPermanent(t *testing.T) {
	f := newDataZone(t)
	f.Deny("CreateConnection", -1)
	_, err := EnsureHyperPodConnection(context.Background(), dzClient(f, 3), wantConnection())
	var denied *dztypes.AccessDeniedException
	if !errors.As(err, &denied) || !IsPermanent(err) || !strings.Contains(err.Error(), "datazone:CreateConnection") {
		t.Fatalf("err = %v, want a permanent AccessDeniedException naming the action", err)
	}
	if f.Count("CreateConnection") != 1 || len(f.Connections()) != 0 {
		t.Errorf("create called %d times, stored %d; a denial is not retried", f.Count("CreateConnection"), len(f.Connections()))
	}
}

func TestEnsureHyperPodConnectionRejectedIsPermanent(t *testing.T) {
	f := newDataZone(t)
	want := wantConnection()
	want.ClusterName = "ml_cluster!"
	_, err := EnsureHyperPodConnection(context.Background(), dzClient(f, 3), want)
	var invalid *dztypes.ValidationException
	if !errors.As(err, &invalid) || !IsPermanent(err) || !strings.Contains(err.Error(), "ml_cluster!") {
		t.Fatalf("err = %v, want a permanent ValidationException with the service's message", err)
	}
	if f.Count("CreateConnection") != 1 || len(f.Connections()) != 0 {
		t.Errorf("calls %v; want one rejected create", f.Counts())
	}

	// What the API would refuse is refused before any call.
	f2 := newDataZone(t)
	long := wantConnection()
	long.Name = strings.Repeat("n", 65)
	if _, err := EnsureHyperPodConnection(context.Background(), dzClient(f2, 1), long); !IsPermanent(err) || len(f2.Log()) != 0 {
		t.Errorf("65-character name: err = %v after %d calls, want permanent before any call", err, len(f2.Log()))
	}
}

// Only the connection with exactly our name is ours, even when the name
// filter returns others and ours is on a later page.
func TestEnsureHyperPodConnectionMatchesExactNameAcrossPages(t *testing.T) {
	f := newDataZone(t)
	api := dzClient(f, 1)
	ctx := context.Background()
	want := wantConnection()
	for i := range 55 {
		_, err := api.CreateConnection(ctx, &datazone.CreateConnectionInput{
			DomainIdentifier: aws.String(dzDomain), EnvironmentIdentifier: aws.String(dzEnv),
			Name: aws.String(fmt.Sprintf("a-%02d-%s", i, want.Name)),
			Props: &dztypes.ConnectionPropertiesInputMemberHyperPodProperties{
				Value: dztypes.HyperPodPropertiesInput{ClusterName: aws.String("other")},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	lists := f.Count("ListConnections")
	res := ensureConnection(t, api, want)
	if res.Action != Created || f.Count("created:datazone-connection") != 56 || f.Count("ListConnections")-lists != 2 {
		t.Errorf("result %+v, events %v; want ours created after listing 2 pages", res, f.Counts())
	}
	lists = f.Count("ListConnections")
	if again := ensureConnection(t, api, want); again.Action != Unchanged || again.ID != res.ID || f.Count("ListConnections")-lists != 2 {
		t.Errorf("second ensure %+v after %d lists; want unchanged %s, found on page 2", again, f.Count("ListConnections")-lists, res.ID)
	}
}

func TestDeleteHyperPodConnectionIsIdempotent(t *testing.T) {
	f := newDataZone(t)
	api := dzClient(f, 1)
	ctx := context.Background()
	name := wantConnection().Name

	if err := DeleteHyperPodConnection(ctx, api, dzDomain, dzProject, name); err != nil {
		t.Fatalf("delete before create: %v", err)
	}
	res := ensureConnection(t, api, wantConnection())
	for i := range 2 {
		if err := DeleteHyperPodConnection(ctx, api, dzDomain, dzProject, name); err != nil {
			t.Fatalf("delete %d: %v", i+1, err)
		}
	}
	if len(f.Connections()) != 0 || f.Count("deleted:datazone-connection") != 1 || f.Count("DeleteConnection") != 1 {
		t.Errorf("stored %d, calls %v; want 0 stored and one delete", len(f.Connections()), f.Counts())
	}

	// The service's not-found reaches us as the SDK's typed error.
	_, err := api.DeleteConnection(ctx, &datazone.DeleteConnectionInput{DomainIdentifier: aws.String(dzDomain), Identifier: aws.String(res.ID)})
	var nf *dztypes.ResourceNotFoundException
	if !errors.As(err, &nf) {
		t.Errorf("deleting a deleted connection: %v, want *types.ResourceNotFoundException", err)
	}

	// A project that is gone has nothing left to delete.
	if err := DeleteHyperPodConnection(ctx, api, dzDomain, "prj_gone", name); err != nil {
		t.Errorf("delete in a missing project: %v", err)
	}
	// Ensure after delete creates it again.
	if again := ensureConnection(t, api, wantConnection()); again.Action != Created || again.ID == res.ID {
		t.Errorf("ensure after delete = %+v", again)
	}
	// A denied delete is permanent, and leaves the connection.
	f.Deny("DeleteConnection", 1)
	if err := DeleteHyperPodConnection(ctx, api, dzDomain, dzProject, name); !IsPermanent(err) || len(f.Connections()) != 1 {
		t.Errorf("denied delete: %v, stored %d", err, len(f.Connections()))
	}
}
