package awsprov

// Actions is every IAM action the steps in this package call: the single
// source the portal's least-privilege IAM policy is generated from (`portal
// iam-policy`). Add an action here in the same change that first calls it;
// actions_test.go checks that every method of SageMakerAPI is listed.
var Actions = []string{
	"sagemaker:CreateComputeQuota",
	"sagemaker:DescribeComputeQuota",
	"sagemaker:UpdateComputeQuota",
	"sagemaker:ListComputeQuotas",
	"sagemaker:DeleteComputeQuota",
	// CreateComputeQuota sends Tags, which IAM authorizes as AddTags.
	"sagemaker:AddTags",
}
