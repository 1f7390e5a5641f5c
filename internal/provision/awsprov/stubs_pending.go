package awsprov

// TEMPORARY: signatures the helpers are writing in /work/main. Deleted at merge.

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/datazone"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/identitystore"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/ssoadmin"
)

type EKSAPI interface {
	CreateAccessEntry(context.Context, *eks.CreateAccessEntryInput, ...func(*eks.Options)) (*eks.CreateAccessEntryOutput, error)
}
type SageMakerDomainAPI interface {
	DescribeDomain(context.Context, *sagemaker.DescribeDomainInput, ...func(*sagemaker.Options)) (*sagemaker.DescribeDomainOutput, error)
}
type SSOAdminAPI interface {
	ListInstances(context.Context, *ssoadmin.ListInstancesInput, ...func(*ssoadmin.Options)) (*ssoadmin.ListInstancesOutput, error)
}
type IdentityStoreAPI interface {
	GetGroupId(context.Context, *identitystore.GetGroupIdInput, ...func(*identitystore.Options)) (*identitystore.GetGroupIdOutput, error)
}
type DataZoneAPI interface {
	CreateConnection(context.Context, *datazone.CreateConnectionInput, ...func(*datazone.Options)) (*datazone.CreateConnectionOutput, error)
}

type AccessPolicy struct {
	PolicyARN  string
	Namespaces []string
}
type AccessEntry struct {
	ClusterName, PrincipalARN string
	KubernetesGroups          []string
	Policies                  []AccessPolicy
	Tags                      map[string]string
}

func EnsureAccessEntry(ctx context.Context, api EKSAPI, want AccessEntry) (Result, error) { panic("x") }
func DeleteAccessEntry(ctx context.Context, api EKSAPI, cluster, principalARN string) error {
	panic("x")
}

type PodIdentity struct {
	ClusterName, Namespace, ServiceAccount, RoleARN string
	Tags                                            map[string]string
}

func EnsurePodIdentity(ctx context.Context, api EKSAPI, want PodIdentity) (Result, error) { panic("x") }
func DeletePodIdentity(ctx context.Context, api EKSAPI, cluster, namespace, serviceAccount string) error {
	panic("x")
}

type DomainSpec struct {
	Name, ExecutionRoleARN, VpcID string
	SubnetIDs, SecurityGroupIDs   []string
	AppNetworkAccessType          string
	KmsKeyID                      string
	Tags                          map[string]string
}
type DomainResult struct {
	Result
	URL, SSOApplicationARN string
}

func EnsureDomain(ctx context.Context, api SageMakerDomainAPI, want DomainSpec, poll PollConfig) (DomainResult, error) {
	panic("x")
}
func DeleteDomain(ctx context.Context, api SageMakerDomainAPI, name string, poll PollConfig) error {
	panic("x")
}
func EnsureGroupAssignment(ctx context.Context, api SSOAdminAPI, applicationARN, groupID string) (Result, error) {
	panic("x")
}
func DeleteGroupAssignment(ctx context.Context, api SSOAdminAPI, applicationARN, groupID string) error {
	panic("x")
}

type HyperPodConnection struct {
	DomainID, ProjectID, EnvironmentID, Name, ClusterName, Description string
}

func EnsureHyperPodConnection(ctx context.Context, api DataZoneAPI, want HyperPodConnection) (Result, error) {
	panic("x")
}
func DeleteHyperPodConnection(ctx context.Context, api DataZoneAPI, domainID, projectID, name string) error {
	panic("x")
}
func GroupID(ctx context.Context, api IdentityStoreAPI, storeID, displayName string) (string, error) {
	panic("x")
}

func FindDomain(ctx context.Context, api SageMakerDomainAPI, name string) (string, error) { panic("x") }
