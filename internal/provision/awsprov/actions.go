package awsprov

// Actions is every IAM action the steps in this package call: the single
// source the portal's least-privilege IAM policy is generated from (`portal
// iam-policy`). Add an action here in the same change that first calls it;
// actions_test.go checks that every method of each *API interface here
// (SageMakerAPI, EKSAPI, ...) is listed.
var Actions = []string{
	"sagemaker:CreateComputeQuota",
	"sagemaker:DescribeComputeQuota",
	"sagemaker:UpdateComputeQuota",
	"sagemaker:ListComputeQuotas",
	"sagemaker:DeleteComputeQuota",
	// CreateComputeQuota sends Tags, which IAM authorizes as AddTags;
	// adopting a quota tags it. ListTags says whose a quota or domain is.
	"sagemaker:AddTags",
	"sagemaker:ListTags",
	// IdentityStoreAPI: users' groups at login, teams' groups by name,
	// and the owners groups' members for the review scheduler's group sync.
	"identitystore:GetUserId",
	"identitystore:GetGroupId",
	"identitystore:ListGroupMembershipsForMember",
	"identitystore:DescribeGroup",
	// The review scheduler's group sync: who is in each team's owners group.
	"identitystore:ListGroupMemberships",
	// DataZoneAPI: the Unified Studio project's HyperPod connection.
	"datazone:ListEnvironments",
	"datazone:ListConnections",
	"datazone:GetConnection",
	"datazone:CreateConnection",
	"datazone:UpdateConnection",
	"datazone:DeleteConnection",
	// SageMakerDomainAPI: the team's Studio domain. CreateDomain sends Tags
	// (sagemaker:AddTags, above), and Create/UpdateDomain hand the team's
	// execution role to SageMaker (iam:PassRole, below).
	"sagemaker:CreateDomain",
	"sagemaker:DescribeDomain",
	"sagemaker:ListDomains",
	"sagemaker:UpdateDomain",
	"sagemaker:DeleteDomain",
	// An SSO domain's Identity Center application is made and removed by
	// SageMaker on the caller's behalf, with the caller's permissions.
	"sso:CreateManagedApplicationInstance",
	"sso:DeleteManagedApplicationInstance",
	"sso:DescribeRegisteredRegions",
	// SSOAdminAPI: the team's group on its domain's application.
	"sso:CreateApplicationAssignment",
	"sso:DescribeApplicationAssignment",
	"sso:DeleteApplicationAssignment",
	// EKSAPI: teams' access entries and Pod Identity associations.
	"eks:CreateAccessEntry",
	"eks:DescribeAccessEntry",
	"eks:UpdateAccessEntry",
	"eks:DeleteAccessEntry",
	"eks:AssociateAccessPolicy",
	"eks:DisassociateAccessPolicy",
	"eks:ListAssociatedAccessPolicies",
	"eks:CreatePodIdentityAssociation",
	"eks:DescribePodIdentityAssociation",
	"eks:UpdatePodIdentityAssociation",
	"eks:DeletePodIdentityAssociation",
	"eks:ListPodIdentityAssociations",
	// CreateAccessEntry and CreatePodIdentityAssociation send tags, which
	// IAM authorizes as TagResource.
	"eks:TagResource",
	// Create/UpdatePodIdentityAssociation hand the team's role to EKS; the
	// generated policy should scope it to the portal's team roles.
	"iam:PassRole",
	// IAMAPI: the plan preview checks the Studio execution role's policy
	// (read-only).
	"iam:SimulatePrincipalPolicy",
	// SchedulerAPI: the cluster's task governance scheduler config.
	"sagemaker:CreateClusterSchedulerConfig",
	"sagemaker:DescribeClusterSchedulerConfig",
	"sagemaker:UpdateClusterSchedulerConfig",
	"sagemaker:ListClusterSchedulerConfigs",
	// ClusterInfoAPI and AddonAPI (cluster.go): the readiness page and the
	// inventory refresh read the cluster's instance groups and add-ons.
	"sagemaker:DescribeCluster",
	"eks:DescribeAddon",
	"eks:DescribeCluster",
	// VPCEndpointAPI (vpcendpoints.go): the readiness page reads the VPC
	// endpoints of the EKS cluster's VPC.
	"ec2:DescribeVpcEndpoints",
	// The Slurm transport (internal/slurm/slurmssm): the controller node
	// of a HyperPod Slurm cluster is found with ListClusterNodes and
	// reached with a Session Manager session running
	// AWS-StartNonInteractiveCommand; the session's data channel is
	// opened with ssmmessages:OpenDataChannel and the session ended with
	// TerminateSession. slurmssm's actions test checks its API interfaces
	// against this list.
	"sagemaker:ListClusterNodes",
	"ssm:StartSession",
	"ssm:TerminateSession",
	"ssmmessages:OpenDataChannel",
}
