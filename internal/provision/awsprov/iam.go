package awsprov

import (
	"context"
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
		allowed := map[string]bool{}
		decided := map[string]bool{}
		in := &iam.SimulatePrincipalPolicyInput{PolicySourceArn: aws.String(r.RoleARN), ActionNames: g.actions, ResourceArns: []string{g.resource}}
		for {
			out, err := api.SimulatePrincipalPolicy(ctx, in)
			if err != nil {
				return nil, fmt.Errorf("simulating %s: %w", r.RoleARN, err)
			}
			for _, e := range out.EvaluationResults {
				a := aws.ToString(e.EvalActionName)
				// Allowed only if allowed on every resource it was
				// simulated on.
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
		for _, a := range g.actions {
			if !decided[a] {
				return nil, fmt.Errorf("simulating %s: IAM gave no result for %s", r.RoleARN, a)
			}
			if !allowed[a] {
				missing = append(missing, a+" on "+g.resource)
			}
		}
	}
	return missing, nil
}

// studioRoleWarning is the plan's warning for the actions a Studio
// execution role lacks.
func studioRoleWarning(role string, missing []string) string {
	return fmt.Sprintf("The Studio execution role %s is not allowed %s: Studio cannot describe the cluster or list its tasks until the role's IAM policy grants them (AWS's Studio setup for EKS clusters lists them)",
		role, strings.Join(missing, "; "))
}
