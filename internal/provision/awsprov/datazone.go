package awsprov

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/datazone"
	dztypes "github.com/aws/aws-sdk-go-v2/service/datazone/types"
)

// DataZoneAPI is the part of the DataZone API the SageMaker Unified Studio
// connection step calls. *datazone.Client satisfies it; so does a client
// pointed at a test endpoint. Every method here must appear in Actions
// (actions_test.go checks).
//
// The client needs nothing special: DataZone (restJson1, signing name
// "datazone") puts no host prefix on these operations, so the default
// endpoint resolver, or BaseEndpoint in tests, is used as is.
type DataZoneAPI interface {
	ListEnvironments(context.Context, *datazone.ListEnvironmentsInput, ...func(*datazone.Options)) (*datazone.ListEnvironmentsOutput, error)
	ListConnections(context.Context, *datazone.ListConnectionsInput, ...func(*datazone.Options)) (*datazone.ListConnectionsOutput, error)
	GetConnection(context.Context, *datazone.GetConnectionInput, ...func(*datazone.Options)) (*datazone.GetConnectionOutput, error)
	CreateConnection(context.Context, *datazone.CreateConnectionInput, ...func(*datazone.Options)) (*datazone.CreateConnectionOutput, error)
	UpdateConnection(context.Context, *datazone.UpdateConnectionInput, ...func(*datazone.Options)) (*datazone.UpdateConnectionOutput, error)
	DeleteConnection(context.Context, *datazone.DeleteConnectionInput, ...func(*datazone.Options)) (*datazone.DeleteConnectionOutput, error)
}

var _ DataZoneAPI = (*datazone.Client)(nil)

// Recreated is what EnsureHyperPodConnection did when the connection pointed
// at another cluster (or sat in another environment than the one
// configured): DataZone cannot change either in place, so the connection was
// deleted and created again, under a new ID.
const Recreated Action = "recreated"

// HyperPodConnection is the DataZone connection that gives a team's SageMaker
// Unified Studio project its HyperPod cluster.
type HyperPodConnection struct {
	DomainID  string
	ProjectID string
	// EnvironmentID is the project environment the connection is created in
	// (a connection has no project member: it belongs to the project through
	// its environment). Empty: the project's ACTIVE environment, or, when it
	// has several, the first by name (then by ID). Configure it when a
	// project has several environments and the choice matters.
	EnvironmentID string
	// Name is the connection's name, unique in the project, 1-64
	// characters.
	Name        string
	ClusterName string
	// Description, up to 128 characters, is kept in step with UpdateConnection
	// when set. Empty leaves whatever description the connection has: the
	// API cannot clear one.
	Description string
}

// DataZoneSetupError is a DataZone domain, project or environment that is
// missing or unusable for the connection step, or a desired connection the
// API would reject. It is permanent: the same step fails the same way until
// someone fixes the setup (the portal's Unified Studio configuration, or
// the project in DataZone). Err, when set, is the API error behind it.
//
// ResourceNotFoundException is not a permanent code in itself: from
// GetConnection, UpdateConnection or DeleteConnection it means a connection
// deleted since it was listed, which a rerun resolves. Only this step knows
// that a not-found from ListConnections or ListEnvironments means the domain
// or the project is missing, so it says so with this error.
type DataZoneSetupError struct {
	DomainID, ProjectID string
	Reason              string
	Err                 error
}

func (e *DataZoneSetupError) Error() string {
	msg := fmt.Sprintf("DataZone domain %s, project %s: %s", e.DomainID, e.ProjectID, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *DataZoneSetupError) Unwrap() error { return e.Err }

// Permanent marks the error for IsPermanent: a setup problem someone has to
// fix in DataZone.
func (e *DataZoneSetupError) Permanent() bool { return true }

// EnsureHyperPodConnection makes the project's connection named want.Name a
// HyperPod connection to want.ClusterName. It is idempotent: it finds the
// connection by exact name in the project (ListConnections, every page),
// creates it in the project's environment when missing, and otherwise
// leaves it alone, except that:
//   - a connection to another cluster, or in another environment than a
//     configured want.EnvironmentID, is deleted and created again
//     (Recreated): UpdateConnection's ConnectionPropertiesPatch has no
//     HyperPod member, and a connection cannot change environment;
//   - a description that differs from a non-empty want.Description is
//     updated in place (Updated).
//
// A create that races another, or whose response was lost and was retried
// by the SDK (ConflictException: the name is taken), is resolved by looking
// the connection up again, so a connection is never created twice. A name
// held by a connection of another type is a DataZoneSetupError: it is never
// deleted.
func EnsureHyperPodConnection(ctx context.Context, api DataZoneAPI, want HyperPodConnection) (Result, error) {
	if err := want.check(); err != nil {
		return Result{}, err
	}
	cur, err := findConnection(ctx, api, want.DomainID, want.ProjectID, want.Name)
	if err != nil {
		return Result{}, err
	}
	if cur == nil {
		id, err := createConnection(ctx, api, want)
		if err == nil {
			return Result{ID: id, Action: Created}, nil
		}
		if !hasCode(err, "ConflictException") {
			return Result{}, err
		}
		if cur, err = findConnection(ctx, api, want.DomainID, want.ProjectID, want.Name); err != nil {
			return Result{}, err
		}
		if cur == nil {
			return Result{}, fmt.Errorf("DataZone connection %s: create conflicted but the project has no connection of that name", want.Name)
		}
	}
	if err := isHyperPod(want, cur); err != nil {
		return Result{}, err
	}

	id := aws.ToString(cur.ConnectionId)
	if clusterOf(cur.Props) != want.ClusterName ||
		want.EnvironmentID != "" && aws.ToString(cur.EnvironmentId) != want.EnvironmentID {
		if err := deleteConnection(ctx, api, want.DomainID, id); err != nil {
			return Result{}, err
		}
		// The name is free now; if this create fails, the next run creates.
		newID, err := createConnection(ctx, api, want)
		if err != nil {
			return Result{}, fmt.Errorf("DataZone connection %s: deleted %s to recreate it: %w", want.Name, id, err)
		}
		return Result{ID: newID, Action: Recreated}, nil
	}

	if want.Description == "" {
		return Result{ID: id, Action: Unchanged}, nil
	}
	got, err := api.GetConnection(ctx, &datazone.GetConnectionInput{DomainIdentifier: aws.String(want.DomainID), Identifier: aws.String(id)})
	if err != nil {
		return Result{}, fmt.Errorf("DataZone connection %s: get: %w", id, err)
	}
	if aws.ToString(got.Description) == want.Description {
		return Result{ID: id, Action: Unchanged}, nil
	}
	_, err = api.UpdateConnection(ctx, &datazone.UpdateConnectionInput{
		DomainIdentifier: aws.String(want.DomainID),
		Identifier:       aws.String(id),
		Description:      aws.String(want.Description),
	})
	if err != nil {
		return Result{}, fmt.Errorf("DataZone connection %s: update description: %w", id, err)
	}
	return Result{ID: id, Action: Updated}, nil
}

// DeleteHyperPodConnection deletes the project's HyperPod connection named
// name. A connection that does not exist (never created, or already
// deleted) is not an error, nor is a project or domain that no longer
// exists: nothing of the team is left in it. A connection of that name of
// another type is not the team's and is left alone, with an error.
func DeleteHyperPodConnection(ctx context.Context, api DataZoneAPI, domainID, projectID, name string) error {
	cur, err := findConnection(ctx, api, domainID, projectID, name)
	var setup *DataZoneSetupError
	if errors.As(err, &setup) && hasCode(err, "ResourceNotFoundException") {
		return nil
	}
	if err != nil || cur == nil {
		return err
	}
	if err := isHyperPod(HyperPodConnection{DomainID: domainID, ProjectID: projectID, Name: name}, cur); err != nil {
		return err
	}
	return deleteConnection(ctx, api, domainID, aws.ToString(cur.ConnectionId))
}

// Limits of CreateConnection.
const (
	maxConnectionName        = 64
	maxConnectionDescription = 128
)

// check refuses what the API would, before any call.
func (w HyperPodConnection) check() error {
	switch {
	case w.DomainID == "" || w.ProjectID == "" || w.Name == "" || w.ClusterName == "":
		return &DataZoneSetupError{DomainID: w.DomainID, ProjectID: w.ProjectID,
			Reason: "a HyperPod connection needs a domain, a project, a name and a cluster name"}
	case len(w.Name) > maxConnectionName:
		return &DataZoneSetupError{DomainID: w.DomainID, ProjectID: w.ProjectID,
			Reason: fmt.Sprintf("connection name %q is longer than %d characters", w.Name, maxConnectionName)}
	case len(w.Description) > maxConnectionDescription:
		return &DataZoneSetupError{DomainID: w.DomainID, ProjectID: w.ProjectID,
			Reason: fmt.Sprintf("connection description is longer than %d characters", maxConnectionDescription)}
	}
	return nil
}

func isHyperPod(w HyperPodConnection, c *dztypes.ConnectionSummary) error {
	if c.Type != dztypes.ConnectionTypeHyperpod {
		return &DataZoneSetupError{DomainID: w.DomainID, ProjectID: w.ProjectID,
			Reason: fmt.Sprintf("connection name %q is taken by a %s connection (%s), not a HyperPod one; rename one of them",
				w.Name, c.Type, aws.ToString(c.ConnectionId))}
	}
	return nil
}

// findConnection returns the project's connection named exactly name, or
// nil. The Name filter's matching is not documented, so names are compared
// again here. A domain or project that does not exist is a
// DataZoneSetupError.
func findConnection(ctx context.Context, api DataZoneAPI, domainID, projectID, name string) (*dztypes.ConnectionSummary, error) {
	in := &datazone.ListConnectionsInput{
		DomainIdentifier:  aws.String(domainID),
		ProjectIdentifier: aws.String(projectID),
		Name:              aws.String(name),
		MaxResults:        aws.Int32(50),
	}
	for {
		out, err := api.ListConnections(ctx, in)
		if hasCode(err, "ResourceNotFoundException") {
			return nil, &DataZoneSetupError{DomainID: domainID, ProjectID: projectID, Reason: "the domain or the project does not exist", Err: err}
		}
		if err != nil {
			return nil, fmt.Errorf("DataZone connection %s: list: %w", name, err)
		}
		for i, c := range out.Items {
			if aws.ToString(c.Name) == name && (c.ProjectId == nil || *c.ProjectId == projectID) {
				return &out.Items[i], nil
			}
		}
		if aws.ToString(out.NextToken) == "" {
			return nil, nil
		}
		in.NextToken = out.NextToken
	}
}

func clusterOf(p dztypes.ConnectionPropertiesOutput) string {
	if hp, ok := p.(*dztypes.ConnectionPropertiesOutputMemberHyperPodProperties); ok {
		return aws.ToString(hp.Value.ClusterName)
	}
	return ""
}

// createConnection creates the connection in the environment it resolves,
// and returns its ID.
func createConnection(ctx context.Context, api DataZoneAPI, want HyperPodConnection) (string, error) {
	env, err := resolveEnvironment(ctx, api, want)
	if err != nil {
		return "", err
	}
	in := &datazone.CreateConnectionInput{
		DomainIdentifier:      aws.String(want.DomainID),
		EnvironmentIdentifier: aws.String(env),
		Name:                  aws.String(want.Name),
		Props: &dztypes.ConnectionPropertiesInputMemberHyperPodProperties{
			Value: dztypes.HyperPodPropertiesInput{ClusterName: aws.String(want.ClusterName)},
		},
	}
	if want.Description != "" {
		in.Description = aws.String(want.Description)
	}
	// The SDK fills ClientToken once per call, so its own retries repeat
	// the same token; a retry by the job is a new call and relies on the
	// name's uniqueness (ConflictException) instead.
	out, err := api.CreateConnection(ctx, in)
	if err != nil {
		return "", fmt.Errorf("DataZone connection %s: create in environment %s: %w", want.Name, env, err)
	}
	return aws.ToString(out.ConnectionId), nil
}

func deleteConnection(ctx context.Context, api DataZoneAPI, domainID, id string) error {
	_, err := api.DeleteConnection(ctx, &datazone.DeleteConnectionInput{DomainIdentifier: aws.String(domainID), Identifier: aws.String(id)})
	if err != nil && !hasCode(err, "ResourceNotFoundException") {
		return fmt.Errorf("DataZone connection %s: delete: %w", id, err)
	}
	return nil
}

// resolveEnvironment returns the environment to create the connection in:
// want.EnvironmentID when set, which must be one of the project's, or the
// project's only ACTIVE environment, or the first ACTIVE one by name then
// ID. A project without environments, or whose environments all failed or
// are gone, is a DataZoneSetupError; one whose environment is still being
// created or updated is a transient error.
func resolveEnvironment(ctx context.Context, api DataZoneAPI, want HyperPodConnection) (string, error) {
	envs, err := listEnvironments(ctx, api, want.DomainID, want.ProjectID)
	if err != nil {
		return "", err
	}
	setup := func(format string, args ...any) error {
		return &DataZoneSetupError{DomainID: want.DomainID, ProjectID: want.ProjectID, Reason: fmt.Sprintf(format, args...)}
	}
	if len(envs) == 0 {
		return "", setup("the project has no environment to create the HyperPod connection in; create the project from a profile with an environment (or add one) first")
	}
	if want.EnvironmentID != "" {
		i := slices.IndexFunc(envs, func(e dztypes.EnvironmentSummary) bool { return aws.ToString(e.Id) == want.EnvironmentID })
		if i < 0 {
			return "", setup("environment %s is not one of the project's", want.EnvironmentID)
		}
		envs = envs[i : i+1]
	}
	slices.SortFunc(envs, func(a, b dztypes.EnvironmentSummary) int {
		if c := strings.Compare(aws.ToString(a.Name), aws.ToString(b.Name)); c != 0 {
			return c
		}
		return strings.Compare(aws.ToString(a.Id), aws.ToString(b.Id))
	})
	var states []string
	pending := false
	for _, e := range envs {
		switch e.Status {
		case dztypes.EnvironmentStatusActive:
			return aws.ToString(e.Id), nil
		case dztypes.EnvironmentStatusCreating, dztypes.EnvironmentStatusUpdating:
			pending = true
		}
		states = append(states, fmt.Sprintf("%s %s", aws.ToString(e.Id), e.Status))
	}
	if pending {
		return "", fmt.Errorf("DataZone project %s: no environment is ACTIVE yet (%s); retry later", want.ProjectID, strings.Join(states, ", "))
	}
	return "", setup("no environment is ACTIVE (%s)", strings.Join(states, ", "))
}

func listEnvironments(ctx context.Context, api DataZoneAPI, domainID, projectID string) ([]dztypes.EnvironmentSummary, error) {
	in := &datazone.ListEnvironmentsInput{
		DomainIdentifier:  aws.String(domainID),
		ProjectIdentifier: aws.String(projectID),
		MaxResults:        aws.Int32(50),
	}
	var all []dztypes.EnvironmentSummary
	for {
		out, err := api.ListEnvironments(ctx, in)
		if hasCode(err, "ResourceNotFoundException") {
			return nil, &DataZoneSetupError{DomainID: domainID, ProjectID: projectID, Reason: "the domain or the project does not exist", Err: err}
		}
		if err != nil {
			return nil, fmt.Errorf("DataZone project %s: list environments: %w", projectID, err)
		}
		all = append(all, out.Items...)
		if aws.ToString(out.NextToken) == "" {
			return all, nil
		}
		in.NextToken = out.NextToken
	}
}
