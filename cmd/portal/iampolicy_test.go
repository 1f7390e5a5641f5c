package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/usage/prom"
)

// The Service Authorization Reference pages each row below comes from,
// read in their programmatic form
// (https://servicereference.us-east-1.amazonaws.com/v1/<service>/<service>.json,
// which each page links; snapshot of github.com/dgwhited/servicereference
// at commit e4e908ea45969e841198a0785270ab12223c4a0f).
const (
	sageMakerSAR      = "Actions, resources, and condition keys for Amazon SageMaker: https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonsagemaker.html"
	eksSAR            = "Actions, resources, and condition keys for Amazon Elastic Kubernetes Service: https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonelastickubernetesservice.html"
	identityCenterSAR = "Actions, resources, and condition keys for AWS IAM Identity Center: https://docs.aws.amazon.com/service-authorization/latest/reference/list_awsiamidentitycenter.html"
	identityStoreSAR  = "Actions, resources, and condition keys for AWS Identity Store: https://docs.aws.amazon.com/service-authorization/latest/reference/list_awsidentitystore.html"
	dataZoneSAR       = "Actions, resources, and condition keys for Amazon DataZone: https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazondatazone.html"
	kmsSAR            = "Actions, resources, and condition keys for AWS Key Management Service: https://docs.aws.amazon.com/service-authorization/latest/reference/list_awskeymanagementservice.html"
	apsSAR            = "Actions, resources, and condition keys for Amazon Managed Service for Prometheus: https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonmanagedserviceforprometheus.html"
	iamSAR            = "Actions, resources, and condition keys for AWS Identity and Access Management (IAM): https://docs.aws.amazon.com/service-authorization/latest/reference/list_awsidentityandaccessmanagementiam.html"
	// ec2/ec2.json read at commit 008b429405593642e7167c626e47c2ecd2798511
	// of the same snapshot repository: DescribeVpcEndpoints is IsList with
	// no Resources.
	ec2SAR = "Actions, resources, and condition keys for Amazon EC2: https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2.html"
	// StartSession: document, managed-instance, instance and task;
	// TerminateSession: session.
	ssmSAR = "Actions, resources, and condition keys for AWS Systems Manager: https://docs.aws.amazon.com/service-authorization/latest/reference/list_awssystemsmanager.html"
	// OpenDataChannel: session (an ssm ARN).
	ssmMessagesSAR = "Actions, resources, and condition keys for Amazon Message Gateway Service: https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonmessagegatewayservice.html"
)

// resourceTypes is, for every action the policy grants, the ARN formats of
// the resource types the action supports; none means the action supports
// no resource type and IAM authorizes it on "*" only.
var resourceTypes = []struct {
	action  string
	formats []string
	source  string
}{
	{"sagemaker:CreateComputeQuota", []string{"arn:${Partition}:sagemaker:${Region}:${Account}:cluster/${ClusterId}", "arn:${Partition}:sagemaker:${Region}:${Account}:compute-quota/${ComputeQuotaId}"}, sageMakerSAR},
	{"sagemaker:DescribeCluster", []string{"arn:${Partition}:sagemaker:${Region}:${Account}:cluster/${ClusterId}"}, sageMakerSAR},
	{"sagemaker:DescribeComputeQuota", []string{"arn:${Partition}:sagemaker:${Region}:${Account}:compute-quota/${ComputeQuotaId}"}, sageMakerSAR},
	{"sagemaker:UpdateComputeQuota", []string{"arn:${Partition}:sagemaker:${Region}:${Account}:compute-quota/${ComputeQuotaId}"}, sageMakerSAR},
	{"sagemaker:ListComputeQuotas", []string{}, sageMakerSAR},
	{"sagemaker:DeleteComputeQuota", []string{"arn:${Partition}:sagemaker:${Region}:${Account}:compute-quota/${ComputeQuotaId}"}, sageMakerSAR},
	{"sagemaker:AddTags", []string{"arn:${Partition}:sagemaker:${Region}:${Account}:cluster/${ClusterId}", "arn:${Partition}:sagemaker:${Region}:${Account}:cluster-scheduler-config/${ClusterSchedulerConfigId}", "arn:${Partition}:sagemaker:${Region}:${Account}:compute-quota/${ComputeQuotaId}", "arn:${Partition}:sagemaker:${Region}:${Account}:domain/${DomainId}"}, sageMakerSAR},  // and 50-odd more; the types the portal tags
	{"sagemaker:ListTags", []string{"arn:${Partition}:sagemaker:${Region}:${Account}:cluster/${ClusterId}", "arn:${Partition}:sagemaker:${Region}:${Account}:cluster-scheduler-config/${ClusterSchedulerConfigId}", "arn:${Partition}:sagemaker:${Region}:${Account}:compute-quota/${ComputeQuotaId}", "arn:${Partition}:sagemaker:${Region}:${Account}:domain/${DomainId}"}, sageMakerSAR}, // and 50-odd more; the types the portal tags
	{"identitystore:GetUserId", []string{"arn:${Partition}:identitystore::${Account}:identitystore/${IdentityStoreId}", "arn:${Partition}:identitystore:::user/${UserId}"}, identityStoreSAR},
	{"identitystore:GetGroupId", []string{"arn:${Partition}:identitystore:::group/${GroupId}", "arn:${Partition}:identitystore::${Account}:identitystore/${IdentityStoreId}"}, identityStoreSAR},
	{"identitystore:ListGroupMembershipsForMember", []string{"arn:${Partition}:identitystore:::membership/*", "arn:${Partition}:identitystore::${Account}:identitystore/${IdentityStoreId}", "arn:${Partition}:identitystore:::user/${UserId}"}, identityStoreSAR},
	// ListGroupMemberships is authorized on AllGroupMemberships (membership/*), Group and Identitystore.
	{"identitystore:ListGroupMemberships", []string{"arn:${Partition}:identitystore:::membership/*", "arn:${Partition}:identitystore:::group/${GroupId}", "arn:${Partition}:identitystore::${Account}:identitystore/${IdentityStoreId}"}, identityStoreSAR},
	{"identitystore:DescribeGroup", []string{"arn:${Partition}:identitystore:::group/${GroupId}", "arn:${Partition}:identitystore::${Account}:identitystore/${IdentityStoreId}"}, identityStoreSAR},
	{"datazone:ListEnvironments", []string{}, dataZoneSAR},
	{"datazone:ListConnections", []string{}, dataZoneSAR},
	{"datazone:GetConnection", []string{}, dataZoneSAR},
	{"datazone:CreateConnection", []string{}, dataZoneSAR},
	{"datazone:UpdateConnection", []string{}, dataZoneSAR},
	{"datazone:DeleteConnection", []string{}, dataZoneSAR},
	{"sagemaker:CreateDomain", []string{"arn:${Partition}:sagemaker:${Region}:${Account}:domain/${DomainId}"}, sageMakerSAR},
	{"sagemaker:DescribeDomain", []string{"arn:${Partition}:sagemaker:${Region}:${Account}:domain/${DomainId}"}, sageMakerSAR},
	{"sagemaker:ListDomains", []string{}, sageMakerSAR},
	{"sagemaker:UpdateDomain", []string{"arn:${Partition}:sagemaker:${Region}:${Account}:domain/${DomainId}"}, sageMakerSAR},
	{"sagemaker:DeleteDomain", []string{"arn:${Partition}:sagemaker:${Region}:${Account}:domain/${DomainId}"}, sageMakerSAR},
	{"sso:CreateManagedApplicationInstance", []string{}, identityCenterSAR},
	{"sso:DeleteManagedApplicationInstance", []string{}, identityCenterSAR},
	{"sso:DescribeRegisteredRegions", []string{}, identityCenterSAR},
	{"sso:CreateApplicationAssignment", []string{"arn:${Partition}:sso::${AccountId}:application/${InstanceId}/${ApplicationId}"}, identityCenterSAR},
	{"sso:DescribeApplicationAssignment", []string{"arn:${Partition}:sso::${AccountId}:application/${InstanceId}/${ApplicationId}"}, identityCenterSAR},
	{"sso:DeleteApplicationAssignment", []string{"arn:${Partition}:sso::${AccountId}:application/${InstanceId}/${ApplicationId}"}, identityCenterSAR},
	{"eks:CreateAccessEntry", []string{"arn:${Partition}:eks:${Region}:${Account}:cluster/${ClusterName}"}, eksSAR},
	{"eks:DescribeAccessEntry", []string{"arn:${Partition}:eks:${Region}:${Account}:access-entry/${ClusterName}/${IamIdentityType}/${IamIdentityAccountID}/${IamIdentityName}/${UUID}"}, eksSAR},
	{"eks:DescribeAddon", []string{"arn:${Partition}:eks:${Region}:${Account}:addon/${ClusterName}/${AddonName}/${UUID}"}, eksSAR},
	{"eks:DescribeCluster", []string{"arn:${Partition}:eks:${Region}:${Account}:cluster/${ClusterName}"}, eksSAR},
	{"eks:UpdateAccessEntry", []string{"arn:${Partition}:eks:${Region}:${Account}:access-entry/${ClusterName}/${IamIdentityType}/${IamIdentityAccountID}/${IamIdentityName}/${UUID}"}, eksSAR},
	{"eks:DeleteAccessEntry", []string{"arn:${Partition}:eks:${Region}:${Account}:access-entry/${ClusterName}/${IamIdentityType}/${IamIdentityAccountID}/${IamIdentityName}/${UUID}"}, eksSAR},
	{"eks:AssociateAccessPolicy", []string{"arn:${Partition}:eks:${Region}:${Account}:access-entry/${ClusterName}/${IamIdentityType}/${IamIdentityAccountID}/${IamIdentityName}/${UUID}"}, eksSAR},
	{"eks:DisassociateAccessPolicy", []string{"arn:${Partition}:eks:${Region}:${Account}:access-entry/${ClusterName}/${IamIdentityType}/${IamIdentityAccountID}/${IamIdentityName}/${UUID}"}, eksSAR},
	{"eks:ListAssociatedAccessPolicies", []string{"arn:${Partition}:eks:${Region}:${Account}:access-entry/${ClusterName}/${IamIdentityType}/${IamIdentityAccountID}/${IamIdentityName}/${UUID}"}, eksSAR},
	{"eks:CreatePodIdentityAssociation", []string{"arn:${Partition}:eks:${Region}:${Account}:cluster/${ClusterName}"}, eksSAR},
	{"eks:DescribePodIdentityAssociation", []string{"arn:${Partition}:eks:${Region}:${Account}:podidentityassociation/${ClusterName}/${UUID}"}, eksSAR},
	{"eks:UpdatePodIdentityAssociation", []string{"arn:${Partition}:eks:${Region}:${Account}:podidentityassociation/${ClusterName}/${UUID}"}, eksSAR},
	{"eks:DeletePodIdentityAssociation", []string{"arn:${Partition}:eks:${Region}:${Account}:podidentityassociation/${ClusterName}/${UUID}"}, eksSAR},
	{"eks:ListPodIdentityAssociations", []string{"arn:${Partition}:eks:${Region}:${Account}:cluster/${ClusterName}"}, eksSAR},
	{"eks:TagResource", []string{"arn:${Partition}:eks:${Region}:${Account}:access-entry/${ClusterName}/${IamIdentityType}/${IamIdentityAccountID}/${IamIdentityName}/${UUID}", "arn:${Partition}:eks:${Region}:${Account}:cluster/${ClusterName}", "arn:${Partition}:eks:${Region}:${Account}:podidentityassociation/${ClusterName}/${UUID}"}, eksSAR}, // and more; the types the portal tags
	{"iam:PassRole", []string{"arn:${Partition}:iam::${Account}:role/${RoleNameWithPath}"}, iamSAR},
	{"iam:SimulatePrincipalPolicy", []string{"arn:${Partition}:iam::${Account}:group/${GroupNameWithPath}", "arn:${Partition}:iam::${Account}:role/${RoleNameWithPath}", "arn:${Partition}:iam::${Account}:user/${UserNameWithPath}"}, iamSAR},
	{"sagemaker:CreateClusterSchedulerConfig", []string{"arn:${Partition}:sagemaker:${Region}:${Account}:cluster/${ClusterId}", "arn:${Partition}:sagemaker:${Region}:${Account}:cluster-scheduler-config/${ClusterSchedulerConfigId}"}, sageMakerSAR},
	{"sagemaker:DescribeClusterSchedulerConfig", []string{"arn:${Partition}:sagemaker:${Region}:${Account}:cluster-scheduler-config/${ClusterSchedulerConfigId}"}, sageMakerSAR},
	{"sagemaker:UpdateClusterSchedulerConfig", []string{"arn:${Partition}:sagemaker:${Region}:${Account}:cluster-scheduler-config/${ClusterSchedulerConfigId}"}, sageMakerSAR},
	{"sagemaker:ListClusterSchedulerConfigs", []string{}, sageMakerSAR},
	{"aps:QueryMetrics", []string{"arn:${Partition}:aps:${Region}:${Account}:workspace/${WorkspaceId}"}, apsSAR},
	{"kms:CreateGrant", []string{"arn:${Partition}:kms:${Region}:${Account}:key/${KeyId}"}, kmsSAR},
	{"kms:DescribeKey", []string{"arn:${Partition}:kms:${Region}:${Account}:key/${KeyId}"}, kmsSAR},
	{"ec2:DescribeVpcEndpoints", []string{}, ec2SAR},
	{"sagemaker:ListClusterNodes", []string{"arn:${Partition}:sagemaker:${Region}:${Account}:cluster/${ClusterId}"}, sageMakerSAR},
	{"ssm:StartSession", []string{"arn:${Partition}:ssm:${Region}:${Account}:document/${DocumentName}", "arn:${Partition}:ssm:${Region}:${Account}:managed-instance/${InstanceId}",
		"arn:${Partition}:ec2:${Region}:${Account}:instance/${InstanceId}", "arn:${Partition}:ecs:${Region}:${Account}:task/${ClusterName}/${TaskId}"}, ssmSAR},
	{"ssm:TerminateSession", []string{"arn:${Partition}:ssm:${Region}:${Account}:session/${SessionId}"}, ssmSAR},
	{"ssmmessages:OpenDataChannel", []string{"arn:${Partition}:ssm:${Region}:${Account}:session/${SessionId}"}, ssmMessagesSAR},
}

// supports reports whether the policy resource r (an ARN pattern) can name
// a resource of the ARN format f: same service, a region and account where
// f has them (none where it has none, "aws" where f says aws), and the
// resource type f starts with.
func supports(f, r string) bool {
	fp, rp := strings.SplitN(f, ":", 6), strings.SplitN(r, ":", 6)
	if len(fp) != 6 || len(rp) != 6 || fp[2] != rp[2] {
		return false
	}
	for i := 3; i <= 4; i++ { // region, account
		switch {
		case fp[i] == "" && rp[i] != "", fp[i] != "" && rp[i] == "":
			return false
		case fp[i] != "" && !strings.HasPrefix(fp[i], "${") && fp[i] != rp[i]:
			return false
		}
	}
	kind := fp[5]
	if i := strings.Index(kind, "${"); i >= 0 {
		kind = kind[:i]
	}
	return strings.HasPrefix(rp[5], kind)
}

func TestSupportsMatchesResourceTypes(t *testing.T) {
	for _, tc := range []struct {
		f, r string
		want bool
	}{
		{"arn:${Partition}:sagemaker:${Region}:${Account}:cluster/${ClusterId}", "arn:aws:sagemaker:us-east-1:111122223333:cluster/*", true},
		{"arn:${Partition}:sagemaker:${Region}:${Account}:cluster/${ClusterId}", "arn:aws:sagemaker:us-east-1:111122223333:cluster-scheduler-config/*", false},
		{"arn:${Partition}:sagemaker:${Region}:${Account}:cluster-scheduler-config/${Id}", "arn:aws:sagemaker:us-east-1:111122223333:cluster/*", false},
		{"arn:${Partition}:sso::${AccountId}:application/${InstanceId}/${ApplicationId}", "arn:aws:sso:::instance/*", false},
		{"arn:${Partition}:iam::${Account}:role/${RoleNameWithPath}", "arn:aws:iam::111122223333:role/hyperpod-teams/*", true},
		{"arn:${Partition}:identitystore:::group/${GroupId}", "arn:aws:identitystore::111122223333:identitystore/*", false},
		{"arn:${Partition}:eks::aws:cluster-access-policy/${Name}", "arn:aws:eks::aws:cluster-access-policy/*", true},
	} {
		if got := supports(tc.f, tc.r); got != tc.want {
			t.Errorf("supports(%s, %s) = %t", tc.f, tc.r, got)
		}
	}
}

// iamPolicyFor runs `portal iam-policy` with args and parses its policy.
func iamPolicyFor(t *testing.T, args ...string) (policyDoc, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := run(context.Background(), append([]string{"iam-policy"}, args...), func(string) string { return "" }, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	var doc policyDoc
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	return doc, errOut.String()
}

func writeSettings(t *testing.T, yaml string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "aws.yaml")
	if err := os.WriteFile(f, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestIAMPolicyScopesEveryActionToResourceTypesItSupports fails when an
// action sits in a statement none of whose resources is of a type the
// action supports (IAM would never match it), or when an action that
// supports no resource type is given anything but "*".
func TestIAMPolicyScopesEveryActionToResourceTypesItSupports(t *testing.T) {
	settings := writeSettings(t, "region: us-east-1\naccount_id: \"111122223333\"\nidentity_store_id: d-1234567890\nteam_role_prefix: /hyperpod-teams/\n"+
		"studio:\n  shared_domain_id: d-abc123def456\n  kms_key_id: 1234abcd-12ab-34cd-56ef-1234567890ab\n")
	amp := "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-abc"
	for _, args := range [][]string{{"--aws-settings", settings, "--prometheus-url", amp}, {"--account", "111122223333", "--region", "us-east-1"}, {"--prometheus-url", amp}} {
		doc, _ := iamPolicyFor(t, args...)
		for _, st := range doc.Statement {
			for _, a := range st.Action {
				i := slices.IndexFunc(resourceTypes, func(r struct {
					action  string
					formats []string
					source  string
				}) bool {
					return r.action == a
				})
				if i < 0 {
					t.Errorf("%v: %s has no row in resourceTypes: add one from its Service Authorization Reference page", args, a)
					continue
				}
				row := resourceTypes[i]
				if slices.Equal(st.Resource, []string{"*"}) {
					continue
				}
				if len(row.formats) == 0 {
					t.Errorf("%v: statement %s scopes %s to %v, but it supports no resource type: only \"*\" matches it (%s)", args, st.Sid, a, st.Resource, row.source)
					continue
				}
				if !slices.ContainsFunc(st.Resource, func(r string) bool {
					return slices.ContainsFunc(row.formats, func(f string) bool { return supports(f, r) })
				}) {
					t.Errorf("%v: statement %s scopes %s to %v, none of a type it supports %v (%s)", args, st.Sid, a, st.Resource, row.formats, row.source)
				}
			}
		}
	}
	for _, row := range resourceTypes {
		if !strings.Contains(row.source, "https://docs.aws.amazon.com/service-authorization/latest/reference/") {
			t.Errorf("row %s names no Service Authorization Reference page", row.action)
		}
	}
}

func TestIAMPolicyCoversEveryActionAndNarrowsResources(t *testing.T) {
	doc, note := iamPolicyFor(t, "--account", "111122223333", "--region", "us-east-1")
	var all []string
	for _, st := range doc.Statement {
		all = append(all, st.Action...)
		for _, r := range st.Resource {
			if strings.ContainsAny(r, "{}%") || strings.Contains(r, "::us-east-1") || strings.Contains(r, ":*:") {
				t.Errorf("statement %s: resource %q is not filled in for the account", st.Sid, r)
			}
			if r == "*" && st.Sid != "NoResourceTypes" {
				t.Errorf("statement %s is not narrowed: %v", st.Sid, st.Resource)
			}
		}
	}
	for _, a := range awsprov.Actions {
		if !slices.Contains(all, a) {
			t.Errorf("policy lacks %s", a)
		}
	}
	if len(all) != len(awsprov.Actions) {
		t.Errorf("policy has %d actions, the steps use %d", len(all), len(awsprov.Actions))
	}
	for _, st := range doc.Statement {
		if slices.Contains(st.Action, "iam:PassRole") && st.Condition["StringEquals"]["iam:PassedToService"] == nil {
			t.Errorf("iam:PassRole without an iam:PassedToService condition: %+v", st)
		}
		if strings.HasPrefix(st.Sid, "Unscoped") {
			t.Errorf("statement %s: a service without a resource scope in serviceScopes", st.Sid)
		}
	}
	if !strings.Contains(note, "team_role_prefix") {
		t.Errorf("without team_role_prefix the command does not say PassRole is on every role: %q", note)
	}
	var out bytes.Buffer
	for _, bad := range [][]string{{"iam-policy", "--account", "1"}, {"iam-policy", "--account", "123", "--region", "us-east-1"}, {"iam-policy", "--account", "111122223333", "--region", "Mars"}} {
		if err := run(context.Background(), bad, func(string) string { return "" }, &out, &out); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}

func statementWith(doc policyDoc, action string) *statement {
	for i, st := range doc.Statement {
		if slices.Contains(st.Action, action) {
			return &doc.Statement[i]
		}
	}
	return nil
}

// TestIAMPolicyScopesTheSlurmSessions: the Slurm transport may start
// sessions only with AWS-StartNonInteractiveCommand and only on HyperPod
// nodes, on the settings' cluster's nodes when cluster_arn is set; it ends
// and opens only sessions; and it gets no Run Command.
func TestIAMPolicyScopesTheSlurmSessions(t *testing.T) {
	withCluster := writeSettings(t, "region: us-east-1\naccount_id: \"111122223333\"\nidentity_store_id: d-1234567890\n"+
		"cluster_arn: arn:aws:sagemaker:us-east-1:111122223333:cluster/a1b2c3d4e5f6\nstudio:\n  shared_domain_id: d-abc123def456\n")
	for _, tc := range []struct {
		args  []string
		nodes string
	}{
		{[]string{"--aws-settings", withCluster}, "arn:aws:ssm:us-east-1:111122223333:managed-instance/sagemaker-cluster:a1b2c3d4e5f6_*"},
		{[]string{"--account", "111122223333", "--region", "us-east-1"}, "arn:aws:ssm:us-east-1:111122223333:managed-instance/sagemaker-cluster:*"},
	} {
		doc, _ := iamPolicyFor(t, tc.args...)
		st := statementWith(doc, "ssm:StartSession")
		want := []string{
			"arn:aws:ssm:us-east-1::document/AWS-StartNonInteractiveCommand", tc.nodes,
			"arn:aws:ssm:us-east-1:111122223333:session/*",
		}
		if st == nil || !slices.Equal(st.Resource, want) {
			t.Errorf("%v: ssm:StartSession on %+v, want %v", tc.args, st, want)
		}
		if st := statementWith(doc, "ssmmessages:OpenDataChannel"); st == nil || !slices.Equal(st.Resource, []string{"arn:aws:ssm:us-east-1:111122223333:session/*"}) {
			t.Errorf("%v: ssmmessages:OpenDataChannel on %+v", tc.args, st)
		}
		for _, a := range []string{"ssm:SendCommand", "ssm:GetCommandInvocation", "ssm:*"} {
			if st := statementWith(doc, a); st != nil {
				t.Errorf("%v: %s granted: %+v", tc.args, a, st)
			}
		}
	}
}

func TestIAMPolicyFromTheSettings(t *testing.T) {
	settings := writeSettings(t, "region: us-gov-west-1\naccount_id: \"111122223333\"\nidentity_store_id: d-1234567890\nteam_role_prefix: /hyperpod-teams/\n"+
		"studio:\n  shared_domain_id: d-abc123def456\n  kms_key_id: 1234abcd-12ab-34cd-56ef-1234567890ab\n")
	doc, note := iamPolicyFor(t, "--aws-settings", settings)
	if note != "" {
		t.Errorf("unexpected note %q", note)
	}
	// The partition comes from the region.
	for _, st := range doc.Statement {
		for _, r := range st.Resource {
			if r != "*" && !strings.HasPrefix(r, "arn:aws-us-gov:") {
				t.Errorf("statement %s: %s is not in the aws-us-gov partition", st.Sid, r)
			}
		}
	}
	// The scheduler config page's calls reach the scheduler config.
	if st := statementWith(doc, "sagemaker:UpdateClusterSchedulerConfig"); st == nil || !slices.Contains(st.Resource, "arn:aws-us-gov:sagemaker:us-gov-west-1:111122223333:cluster-scheduler-config/*") {
		t.Errorf("scheduler config not granted: %+v", st)
	}
	// Managed application instances support no resource type, nor does the
	// readiness page's read of the VPC endpoints.
	for _, a := range []string{"sso:CreateManagedApplicationInstance", "sso:DeleteManagedApplicationInstance", "ec2:DescribeVpcEndpoints"} {
		if st := statementWith(doc, a); st == nil || !slices.Equal(st.Resource, []string{"*"}) {
			t.Errorf("%s is not granted on *: %+v", a, st)
		}
	}
	// PassRole and the simulation: the team roles only.
	for _, a := range []string{"iam:PassRole", "iam:SimulatePrincipalPolicy"} {
		if st := statementWith(doc, a); st == nil || !slices.Equal(st.Resource, []string{"arn:aws-us-gov:iam::111122223333:role/hyperpod-teams/*"}) {
			t.Errorf("%s is not limited to the team roles: %+v", a, st)
		}
	}
	// The KMS key, by its ARN.
	if st := statementWith(doc, "kms:CreateGrant"); st == nil || !slices.Contains(st.Action, "kms:DescribeKey") ||
		!slices.Equal(st.Resource, []string{"arn:aws-us-gov:kms:us-gov-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"}) {
		t.Errorf("KMS key not granted: %+v", st)
	}
	// AssociateAccessPolicy: the settings' policies (the defaults here), never cluster admin.
	st := statementWith(doc, "eks:AssociateAccessPolicy")
	if st == nil || len(st.Action) != 1 {
		t.Fatalf("eks:AssociateAccessPolicy has no statement of its own: %+v", st)
	}
	var got []string
	vals, _ := st.Condition["ArnLike"]["eks:policyArn"].([]any)
	for _, v := range vals {
		got = append(got, v.(string))
	}
	// No viewer role is configured, so not the viewer policy either.
	want := []string{
		"arn:aws-us-gov:eks::aws:cluster-access-policy/AmazonSagemakerHyperpodInferencePolicy",
		"arn:aws-us-gov:eks::aws:cluster-access-policy/AmazonSagemakerHyperpodSpacePolicy",
		"arn:aws-us-gov:eks::aws:cluster-access-policy/AmazonSagemakerHyperpodSpaceTemplatePolicy",
		"arn:aws-us-gov:eks::aws:cluster-access-policy/AmazonSagemakerHyperpodTrainingPolicy",
		"arn:aws-us-gov:eks::aws:cluster-access-policy/AmazonSagemakerHyperpodUserClusterPolicy",
	}
	if !slices.Equal(got, want) {
		t.Errorf("eks:policyArn = %v, want %v", st.Condition, want)
	}
	// Without the settings' KMS key, no KMS statement.
	doc, _ = iamPolicyFor(t, "--account", "111122223333", "--region", "us-east-1")
	if st := statementWith(doc, "kms:CreateGrant"); st != nil {
		t.Errorf("KMS granted without a key: %+v", st)
	}
	// Cluster admin in the settings is refused.
	admin := writeSettings(t, "region: us-east-1\naccount_id: \"111122223333\"\nstudio:\n  shared_domain_id: d-abc123def456\naccess:\n  viewer_policies: [AmazonEKSClusterAdminPolicy]\n")
	var out bytes.Buffer
	if err := run(context.Background(), []string{"iam-policy", "--aws-settings", admin}, func(string) string { return "" }, &out, &out); err == nil || !strings.Contains(err.Error(), "cluster admin") {
		t.Errorf("cluster admin in the settings: %v", err)
	}
	// Flags that contradict the settings are refused.
	if err := run(context.Background(), []string{"iam-policy", "--aws-settings", settings, "--region", "us-east-1"}, func(string) string { return "" }, &out, &out); err == nil {
		t.Error("--region other than the settings' accepted")
	}
}

// TestIAMPolicyGrantsPrometheusQueriesOnTheWorkspace: with an Amazon
// Managed Service for Prometheus workspace configured (by flag or by the
// portal's own environment), the policy grants every action the client's
// queries need (prom.Actions) on that workspace, in the workspace's
// region; an unsigned Prometheus adds nothing.
func TestIAMPolicyGrantsPrometheusQueriesOnTheWorkspace(t *testing.T) {
	ws := "https://aps-workspaces.eu-west-1.amazonaws.com/workspaces/ws-0123abcd-4567-89ef-0123-456789abcdef/api/v1/query"
	want := []string{"arn:aws:aps:eu-west-1:111122223333:workspace/ws-0123abcd-4567-89ef-0123-456789abcdef"}
	base := []string{"--account", "111122223333", "--region", "us-east-1"}
	env := func(k string) string {
		if k == "PORTAL_PROMETHEUS_URL" {
			return ws
		}
		return ""
	}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), append([]string{"iam-policy"}, base...), env, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	var fromEnv policyDoc
	if err := json.Unmarshal(out.Bytes(), &fromEnv); err != nil {
		t.Fatal(err)
	}
	fromFlag, _ := iamPolicyFor(t, append(base, "--prometheus-url", ws)...)
	for name, doc := range map[string]policyDoc{"environment": fromEnv, "flag": fromFlag} {
		for _, a := range prom.Actions() {
			if st := statementWith(doc, a); st == nil || !slices.Equal(st.Resource, want) {
				t.Errorf("%s: %s not granted on %v: %+v", name, a, want, st)
			}
		}
		if st := statementWith(doc, "aps:QueryMetrics"); st == nil {
			t.Errorf("%s: aps:QueryMetrics not granted", name)
		}
	}
	// A proxy signed for a region: the account's workspaces in that region.
	doc, _ := iamPolicyFor(t, append(base, "--prometheus-url", "https://amp-proxy.internal", "--prometheus-sigv4-region", "us-west-2")...)
	if st := statementWith(doc, "aps:QueryMetrics"); st == nil || !slices.Equal(st.Resource, []string{"arn:aws:aps:us-west-2:111122223333:workspace/*"}) {
		t.Errorf("signed proxy: %+v", st)
	}
	// A plain, unsigned Prometheus needs no IAM permission.
	for _, args := range [][]string{base, append(base, "--prometheus-url", "http://prometheus.monitoring:9090")} {
		doc, _ := iamPolicyFor(t, args...)
		for _, st := range doc.Statement {
			for _, a := range st.Action {
				if strings.HasPrefix(a, "aps:") {
					t.Errorf("%v: %s granted without a workspace", args, a)
				}
			}
		}
	}
	if err := run(context.Background(), append([]string{"iam-policy", "--prometheus-sigv4-region", "us-west-2"}, base...), func(string) string { return "" }, &out, &out); err == nil {
		t.Error("--prometheus-sigv4-region without a URL accepted")
	}
}
