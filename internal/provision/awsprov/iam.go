package awsprov

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/iam/types"
)

// IAMAPI is the part of the IAM API the plan preview calls: it simulates
// the Studio execution role's policies and changes nothing. *iam.Client
// satisfies it. Every method here must appear in Actions.
type IAMAPI interface {
	SimulatePrincipalPolicy(context.Context, *iam.SimulatePrincipalPolicyInput, ...func(*iam.Options)) (*iam.SimulatePrincipalPolicyOutput, error)
}

var _ IAMAPI = (*iam.Client)(nil)

// StudioRole is a Studio execution role and the clusters Studio reaches
// with it.
type StudioRole struct {
	RoleARN            string
	HyperPodClusterARN string // sagemaker:DescribeCluster
	EKSClusterARN      string // the eks: actions
}

// The IAM actions a domain's execution role needs for Studio to show a
// HyperPod EKS cluster and its tasks, on which resource: AWS's Studio setup
// ("Setting up an Amazon EKS cluster in Studio", step 2, statements
// DescribeHyperpodClusterPermissions, UseEksClusterPermissions and
// DescribeSpacesAddon,
// https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-studio-setup-eks.html).
// Without them Studio cannot describe the cluster and its Tasks tab does not
// load, whatever the EKS access policies allow.
var (
	studioHyperPodActions = []string{"sagemaker:DescribeCluster"}
	studioEKSActions      = []string{"eks:DescribeCluster", "eks:AccessKubernetesApi", "eks:MutateViaKubernetesApi"}
	// eks:DescribeAddon is authorized on an add-on (the addon resource of
	// the Service Authorization Reference for Amazon EKS,
	// arn:<partition>:eks:<region>:<account>:addon/<cluster>/<addon>/<uuid>);
	// AWS's setup grants it on the cluster's ARN followed by /*.
	studioAddonActions = []string{"eks:DescribeAddon"}
)

// StudioActions are all of them, in the order the plan names them.
func StudioActions() []string {
	return slices.Concat(studioHyperPodActions, studioEKSActions, studioAddonActions)
}

// CheckStudioRole simulates the role's IAM policies (IAM
// SimulatePrincipalPolicy, which makes no call on the resources) and
// returns the Studio actions the role is not allowed, each with its
// resource. A lookup that fails is an error; the caller shows it as a
// warning, since the role may well be fine.
func CheckStudioRole(ctx context.Context, api IAMAPI, r StudioRole) ([]string, error) {
	var missing []string
	for _, g := range []struct {
		resource string
		actions  []string
	}{
		{r.HyperPodClusterARN, studioHyperPodActions},
		{r.EKSClusterARN, studioEKSActions},
		{r.EKSClusterARN + "/*", studioAddonActions},
	} {
		allowed, err := simulate(ctx, api, r.RoleARN, g.resource, g.actions)
		if err != nil {
			return nil, err
		}
		for _, a := range g.actions {
			if !allowed[a] {
				missing = append(missing, a+" on "+g.resource)
			}
		}
	}
	return missing, nil
}

// simulate runs IAM's policy simulation of role for actions on resource
// and says, for each action, whether it is allowed (on every resource the
// simulation evaluated it on).
func simulate(ctx context.Context, api IAMAPI, role, resource string, actions []string) (map[string]bool, error) {
	allowed := map[string]bool{}
	decided := map[string]bool{}
	in := &iam.SimulatePrincipalPolicyInput{PolicySourceArn: aws.String(role), ActionNames: actions, ResourceArns: []string{resource}}
	for {
		out, err := api.SimulatePrincipalPolicy(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("simulating %s: %w", role, err)
		}
		for _, e := range out.EvaluationResults {
			a := aws.ToString(e.EvalActionName)
			ok := e.EvalDecision == types.PolicyEvaluationDecisionTypeAllowed
			if !decided[a] {
				allowed[a], decided[a] = ok, true
			} else {
				allowed[a] = allowed[a] && ok
			}
		}
		if !out.IsTruncated || aws.ToString(out.Marker) == "" {
			break
		}
		in.Marker = out.Marker
	}
	for _, a := range actions {
		if !decided[a] {
			return nil, fmt.Errorf("simulating %s: IAM gave no result for %s", role, a)
		}
	}
	return allowed, nil
}

// The cluster lifecycle actions a project-facing role must not hold (the
// seed: a project role gets no cluster lifecycle permission), by the
// resource they are authorized on. They are the write actions of the
// Service Authorization Reference for Amazon SageMaker on the cluster, its
// nodes and instance groups (instance groups are changed through
// UpdateCluster; nodes added, removed and their volumes attached through
// the Batch*ClusterNodes and *ClusterNodeVolume actions), its software, its
// task governance scheduler config and its compute quotas
// (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonsagemaker.html,
// read in its programmatic form, servicereference.us-east-1.amazonaws.com
// v1/sagemaker/sagemaker.json, snapshot github.com/dgwhited/servicereference
// @e4e908ea45969e841198a0785270ab12223c4a0f: each action's resource types
// are cluster, cluster-scheduler-config or compute-quota).
var (
	clusterLifecycleActions = []string{"sagemaker:CreateCluster", "sagemaker:UpdateCluster", "sagemaker:DeleteCluster",
		"sagemaker:UpdateClusterSoftware", "sagemaker:BatchAddClusterNodes", "sagemaker:BatchDeleteClusterNodes",
		"sagemaker:AttachClusterNodeVolume", "sagemaker:DetachClusterNodeVolume", "sagemaker:StartClusterHealthCheck",
		"sagemaker:UpdateClusterInference", "sagemaker:CreateClusterSchedulerConfig", "sagemaker:CreateComputeQuota"}
	schedulerConfigActions = []string{"sagemaker:UpdateClusterSchedulerConfig", "sagemaker:DeleteClusterSchedulerConfig"}
	computeQuotaActions    = []string{"sagemaker:UpdateComputeQuota", "sagemaker:DeleteComputeQuota"}
)

// ErrRoleNotFound: IAM has no role of that ARN (NoSuchEntity).
var ErrRoleNotFound = errors.New("IAM has no such role")

// ClusterLifecycleActions are all of them.
func ClusterLifecycleActions() []string {
	return slices.Concat(clusterLifecycleActions, schedulerConfigActions, computeQuotaActions)
}

// ClusterLifecycleAllowed simulates role's policies for every cluster
// lifecycle action and returns those IAM allows: on the cluster itself,
// and on any scheduler config or compute quota of the cluster's account
// and region (the resource "…:cluster-scheduler-config/*", which a policy
// naming those resources, or "*", matches). A lookup that fails is an
// error; a role IAM does not have is ErrRoleNotFound.
func ClusterLifecycleAllowed(ctx context.Context, api IAMAPI, role, clusterARN string) ([]string, error) {
	prefix, _, ok := strings.Cut(clusterARN, ":cluster/")
	if !ok {
		return nil, fmt.Errorf("%q is not a HyperPod cluster ARN", clusterARN)
	}
	var out []string
	for _, g := range []struct {
		resource string
		actions  []string
	}{
		{clusterARN, clusterLifecycleActions},
		{prefix + ":cluster-scheduler-config/*", schedulerConfigActions},
		{prefix + ":compute-quota/*", computeQuotaActions},
	} {
		allowed, err := simulate(ctx, api, role, g.resource, g.actions)
		// SimulatePrincipalPolicy answers NoSuchEntity for a PolicySourceArn
		// that does not exist
		// (https://docs.aws.amazon.com/IAM/latest/APIReference/API_SimulatePrincipalPolicy.html,
		// Errors). That is an answer, not an outage, but not a clean one
		// either: a role created after the approval could be given the
		// lifecycle actions unchecked, so the caller refuses the approval
		// until the role exists (ErrRoleNotFound).
		if nse := (*types.NoSuchEntityException)(nil); errors.As(err, &nse) {
			return nil, fmt.Errorf("%w: %s", ErrRoleNotFound, role)
		}
		if err != nil {
			return nil, err
		}
		for _, a := range g.actions {
			if allowed[a] {
				out = append(out, a)
			}
		}
	}
	return out, nil
}

// studioRoleWarning is the plan's warning for the actions a Studio
// execution role lacks.
func studioRoleWarning(role string, missing []string) string {
	return fmt.Sprintf("The Studio execution role %s is not allowed %s: Studio cannot describe the cluster or list its tasks until the role's IAM policy grants them (AWS's Studio setup for EKS clusters lists them)",
		role, strings.Join(missing, "; "))
}
