package awsprov

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

func planTarget() Target {
	return Target{ConnectionID: 7, Namespace: "hyperpod-ns-red", ServiceAccount: "red-workloads",
		StudioGroup: "studio-red", SubmitterGroup: "team-red-submitters", ViewerGroup: "team-red-viewers"}
}

func planSettings() Settings {
	s := DevSettings()
	s.ComputeQuota = true
	s.TeamGroups = map[string][]string{"red": {"team-red-members", "team-red-owners"}}
	return s
}

func kinds(calls []Call) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = string(c.Kind) + " " + c.Name
	}
	return out
}

func TestPlanForTeamDomain(t *testing.T) {
	c := workflow.ExampleContract()
	calls, warnings, err := PlanFor(c, planTarget(), planSettings())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"compute-quota red-quota",
		"studio-domain red-studio",
		"studio-assignment team-red-members",
		"studio-assignment team-red-owners",
		"access-entry " + c.ProjectRoleARN,
		"access-entry " + c.AccessRoleARN,
		"pod-identity hyperpod-ns-red/red-workloads",
	}
	if got := kinds(calls); !slices.Equal(got, want) {
		t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(warnings) != 0 {
		t.Errorf("warnings = %q", warnings)
	}
	if calls[0].Phase != Guardrail || slices.ContainsFunc(calls[1:], func(c Call) bool { return c.Phase != Access }) {
		t.Error("only the compute quota goes before the Kubernetes objects")
	}
	q := calls[0].Quota
	if aws.ToString(q.ClusterArn) != c.ClusterARN || aws.ToInt32(q.ComputeQuotaConfig.ComputeQuotaResources[0].Count) != 2 {
		t.Errorf("quota = %+v", q)
	}
	d := calls[1].Domain
	if d.ExecutionRoleARN != c.ProjectRoleARN || d.VpcID != "vpc-0a1b2c3d4e5f60718" || len(d.SubnetIDs) != 2 || d.Tags[TagConnection] != "7" || !calls[1].KeepOnRevoke {
		t.Errorf("domain = %+v keep=%t", d, calls[1].KeepOnRevoke)
	}
	a := calls[2].Assignment
	if a.Domain != d || a.IdentityStoreID != "d-1234567890" || a.Group != "team-red-members" {
		t.Errorf("assignment = %+v", a)
	}
	studio := calls[4].AccessEntry
	if studio.ClusterName != "shared-hp-eks" || !slices.Equal(studio.KubernetesGroups, []string{"studio-red"}) {
		t.Errorf("studio access entry = %+v", studio)
	}
	// AWS's Studio setup: user-cluster on the cluster, training, inference
	// and space in the team namespace, space templates in
	// jupyter-k8s-shared.
	scopes := map[string][]string{}
	for _, p := range studio.Policies {
		scopes[p.PolicyARN] = p.Namespaces
	}
	wantScopes := map[string][]string{
		"arn:aws:eks::aws:cluster-access-policy/AmazonSagemakerHyperpodUserClusterPolicy":   nil,
		"arn:aws:eks::aws:cluster-access-policy/AmazonSagemakerHyperpodTrainingPolicy":      {"hyperpod-ns-red"},
		"arn:aws:eks::aws:cluster-access-policy/AmazonSagemakerHyperpodInferencePolicy":     {"hyperpod-ns-red"},
		"arn:aws:eks::aws:cluster-access-policy/AmazonSagemakerHyperpodSpacePolicy":         {"hyperpod-ns-red"},
		"arn:aws:eks::aws:cluster-access-policy/AmazonSagemakerHyperpodSpaceTemplatePolicy": {"jupyter-k8s-shared"},
	}
	if len(scopes) != len(wantScopes) {
		t.Errorf("studio policies %v, want %v", scopes, wantScopes)
	}
	for arn, ns := range wantScopes {
		if got, ok := scopes[arn]; !ok || !slices.Equal(got, ns) {
			t.Errorf("studio policy %s scoped to %v (present %t), want %v", arn, got, ok, ns)
		}
	}
	for _, p := range calls[5].AccessEntry.Policies {
		if !strings.HasPrefix(p.PolicyARN, "arn:aws:eks::aws:cluster-access-policy/AmazonSagemakerHyperpod") || !slices.Equal(p.Namespaces, []string{"hyperpod-ns-red"}) {
			t.Errorf("access role: policy %+v is not a HyperPod policy scoped to the team namespace", p)
		}
	}
	// The plan page explains each grant.
	grants := calls[4].Grants()
	if len(grants) != 5 || grants[0].Policy != PolicyHyperPodUserCluster || grants[0].Scope != "cluster" ||
		!strings.Contains(grants[0].Allows, "ClusterQueues") || !strings.Contains(grants[0].Allows, "whole cluster") {
		t.Errorf("grants = %+v", grants)
	}
	if g := grants[1]; g.Policy != PolicyHyperPodTraining || g.Scope != "namespace hyperpod-ns-red" || !strings.Contains(g.Allows, "bare pods") || !strings.Contains(g.Allows, "in hyperpod-ns-red only") {
		t.Errorf("training grant = %+v", g)
	}
	// The default submitter policies: training, inference and space (the
	// provision plan keeps those of the approved workload types).
	if sub := calls[5].AccessEntry; !slices.Equal(sub.KubernetesGroups, []string{"team-red-submitters"}) || len(sub.Policies) != 3 {
		t.Errorf("submitter access entry = %+v", sub)
	}
	if p := calls[6].PodIdentity; p.RoleARN != c.WorkloadRoleARN || p.Namespace != "hyperpod-ns-red" || p.ServiceAccount != "red-workloads" {
		t.Errorf("pod identity = %+v", p)
	}
	// The summary shows the key fields an approver needs.
	if s := calls[0].Summary(); !strings.Contains(s, "ml.p5.48xlarge×2") || !strings.Contains(s, "LendAndBorrow (borrow up to 50%)") {
		t.Errorf("quota summary = %s", s)
	}
}

func TestPlanForVariants(t *testing.T) {
	t.Run("disabled", func(t *testing.T) {
		calls, _, err := PlanFor(workflow.ExampleContract(), planTarget(), Settings{})
		if err != nil || calls != nil {
			t.Errorf("disabled settings planned %v, %v", calls, err)
		}
	})
	t.Run("portal-managed queues: no compute quota", func(t *testing.T) {
		s := planSettings()
		s.ComputeQuota = false
		calls, _, _ := PlanFor(workflow.ExampleContract(), planTarget(), s)
		if slices.ContainsFunc(calls, func(c Call) bool { return c.Kind == KindComputeQuota }) {
			t.Error("compute quota planned although the portal manages the ClusterQueue")
		}
	})
	t.Run("unified studio", func(t *testing.T) {
		c := workflow.ExampleContract()
		c.StudioMode, c.UnifiedDomainID, c.UnifiedProjectID = workflow.StudioUnified, "dzd_abc123", "proj1"
		calls, _, err := PlanFor(c, planTarget(), planSettings())
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(calls, func(c Call) bool { return c.Kind == KindDataZone })
		if i < 0 || slices.ContainsFunc(calls, func(c Call) bool { return c.Kind == KindDomain || c.Kind == KindAssignment }) {
			t.Fatalf("calls = %q", kinds(calls))
		}
		dz := calls[i].DataZone
		if dz.DomainID != "dzd_abc123" || dz.ProjectID != "proj1" || dz.ClusterName != "shared-hp" || dz.Name != "hyperpod-shared-hp" {
			t.Errorf("datazone = %+v", dz)
		}
	})
	t.Run("shared domain", func(t *testing.T) {
		s := planSettings()
		s.Studio.SharedDomainID = "d-shared123456"
		calls, warnings, err := PlanFor(workflow.ExampleContract(), planTarget(), s)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(calls, func(c Call) bool { return c.Kind == KindDomain }) {
			t.Error("a team domain is planned although a shared one is configured")
		}
		if a := calls[1].Assignment; a == nil || a.SharedDomainID != "d-shared123456" || a.Domain != nil {
			t.Errorf("assignment = %+v", calls[1])
		}
		if len(warnings) != 1 || !strings.Contains(warnings[0], "task visibility") {
			t.Errorf("warnings = %q", warnings)
		}
	})
	t.Run("viewer role and no groups", func(t *testing.T) {
		s := planSettings()
		s.TeamGroups = nil
		s.Access.ViewerRoleARNFormat = "arn:aws:iam::111122223333:role/%s-viewer"
		calls, warnings, err := PlanFor(workflow.ExampleContract(), planTarget(), s)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(calls, func(c Call) bool { return c.Name == "arn:aws:iam::111122223333:role/red-viewer" })
		if i < 0 || calls[i].AccessEntry.Policies[0].PolicyARN != "arn:aws:eks::aws:cluster-access-policy/"+PolicyEKSView || calls[i].AccessEntry.KubernetesGroups[0] != "team-red-viewers" {
			t.Fatalf("viewer entry missing or wrong: %q", kinds(calls))
		}
		if len(warnings) != 1 || !strings.Contains(warnings[0], "nobody is assigned") {
			t.Errorf("warnings = %q", warnings)
		}
	})
	for name, mutate := range map[string]func(*workflow.Contract){
		"other region":  func(c *workflow.Contract) { c.Region = "eu-west-1" },
		"other account": func(c *workflow.Contract) { c.AccountID = "999988887777" },
		"other cluster": func(c *workflow.Contract) {
			c.ClusterARN = "arn:aws:sagemaker:us-east-1:111122223333:cluster/zzzzzzzzzzzz"
		},
		"no EKS cluster":  func(c *workflow.Contract) { c.EKSClusterName = "" },
		"borrow only":     func(c *workflow.Contract) { c.Scheduling.Sharing = workflow.SharingBorrow },
		"no project role": func(c *workflow.Contract) { c.ProjectRoleARN = "" },
	} {
		t.Run("refused: "+name, func(t *testing.T) {
			c := workflow.ExampleContract()
			mutate(&c)
			if calls, _, err := PlanFor(c, planTarget(), planSettings()); err == nil {
				t.Errorf("planned %q, want an error", kinds(calls))
			}
		})
	}
}

func TestRevocationOrder(t *testing.T) {
	calls, _, err := PlanFor(workflow.ExampleContract(), planTarget(), planSettings())
	if err != nil {
		t.Fatal(err)
	}
	first, last := RevocationOrder(calls)
	var got []string
	for _, c := range append(first, last...) {
		got = append(got, string(c.Kind))
	}
	want := []string{"pod-identity", "access-entry", "access-entry", "compute-quota", "studio-assignment", "studio-assignment", "studio-domain"}
	if !slices.Equal(got, want) {
		t.Errorf("revocation order %q, want %q", got, want)
	}
	if len(first) != 3 {
		t.Errorf("%d calls before the Kubernetes steps, want pod identity and both access entries", len(first))
	}
}

func TestSettingsCheck(t *testing.T) {
	if err := DevSettings().WithDefaults().Check(); err != nil {
		t.Fatalf("dev settings: %v", err)
	}
	bad, err := ParseSettings([]byte("studio:\n  vpc_id: vpc-1\n  subnet_ids: [subnet-12345678]\n  on_revoke: burn\nidentity_store_id: nope\naccess:\n  studio_policies: [\"bad policy\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = bad.WithDefaults().Check()
	for _, want := range []string{"on_revoke", "identity_store_id", "bad policy"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %s", err, want)
		}
	}
	if _, err := ParseSettings([]byte("studio:\n  vpcid: vpc-1\n")); err == nil || !strings.Contains(err.Error(), "vpcid") {
		t.Errorf("unknown key: %v", err)
	}
	s, err := ParseSettings([]byte("identity_store_id: d-1234567890\nstudio:\n  shared_domain_id: d-abc123def456\n"))
	if err == nil {
		err = s.WithDefaults().Check()
	}
	if err != nil || !s.Enabled {
		t.Errorf("shared-domain settings: %+v, %v", s, err)
	}
}

func TestPlanForAccessScopesFromSettings(t *testing.T) {
	s := planSettings()
	s.Access.SubmitterPolicies = []AccessGrant{
		{Policy: PolicyHyperPodTraining, Scope: AccessScopeNamespace, Namespaces: []string{TeamNamespace, "shared-data"}},
		{Policy: PolicyEKSView, Scope: AccessScopeCluster},
	}
	c := workflow.ExampleContract()
	calls, _, err := PlanFor(c, planTarget(), s)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(calls, func(x Call) bool { return x.Name == c.AccessRoleARN })
	got := calls[i].AccessEntry.Policies
	if len(got) != 2 || !slices.Equal(got[0].Namespaces, []string{"hyperpod-ns-red", "shared-data"}) || got[1].Namespaces != nil {
		t.Errorf("policies = %+v", got)
	}
	if f := calls[i].Summary(); !strings.Contains(f, "AmazonSagemakerHyperpodTrainingPolicy (namespace hyperpod-ns-red, shared-data), AmazonEKSViewPolicy (cluster)") {
		t.Errorf("summary does not show the scopes: %s", f)
	}
}

func TestPartitionComesFromTheRegion(t *testing.T) {
	for region, want := range map[string]string{"us-east-1": "aws", "eu-west-1": "aws", "us-gov-west-1": "aws-us-gov", "cn-north-1": "aws-cn", "cn-northwest-1": "aws-cn"} {
		if got := Partition(region); got != want {
			t.Errorf("Partition(%s) = %s, want %s", region, got, want)
		}
	}
	if got := AccessPolicyARN("us-gov-west-1", PolicyEKSView); got != "arn:aws-us-gov:eks::aws:cluster-access-policy/AmazonEKSViewPolicy" {
		t.Errorf("GovCloud access policy ARN = %s", got)
	}
	if got := AccessPolicyARN("cn-north-1", PolicyEKSView); got != "arn:aws-cn:eks::aws:cluster-access-policy/AmazonEKSViewPolicy" {
		t.Errorf("China access policy ARN = %s", got)
	}
}

func TestPlanForRefusesRolesOutsideTheTeamRolePrefix(t *testing.T) {
	s := planSettings()
	s.TeamRolePrefix = "/hyperpod-teams/"
	c := workflow.ExampleContract()
	if _, _, err := PlanFor(c, planTarget(), s); err == nil || !strings.Contains(err.Error(), "role/hyperpod-teams/") {
		t.Errorf("roles outside the prefix planned: %v", err)
	}
	c.ProjectRoleARN = "arn:aws:iam::111122223333:role/hyperpod-teams/red-project"
	c.AccessRoleARN = "arn:aws:iam::111122223333:role/hyperpod-teams/red-access"
	c.WorkloadRoleARN = "arn:aws:iam::111122223333:role/hyperpod-teams/red-workload"
	if _, _, err := PlanFor(c, planTarget(), s); err != nil {
		t.Errorf("roles under the prefix refused: %v", err)
	}
	c.WorkloadRoleARN = "arn:aws:iam::111122223333:role/hyperpod-teams-evil/red-workload"
	if _, _, err := PlanFor(c, planTarget(), s); err == nil {
		t.Error("a role whose path only starts like the prefix was planned")
	}
}

func TestSettingsAccessScopesAreStrict(t *testing.T) {
	good := "identity_store_id: d-1234567890\nstudio:\n  shared_domain_id: d-abc123def456\naccess:\n" +
		"  studio_policies:\n    - AmazonSagemakerHyperpodTrainingPolicy\n" +
		"    - {policy: AmazonSagemakerHyperpodUserClusterPolicy, scope: cluster}\n" +
		"    - {policy: AmazonSagemakerHyperpodSpaceTemplatePolicy, scope: namespace, namespaces: [jupyter-k8s-shared, $team]}\n"
	s, err := ParseSettings([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WithDefaults().Check(); err != nil {
		t.Fatalf("good scopes refused: %v", err)
	}
	want := []AccessGrant{
		{Policy: PolicyHyperPodTraining, Scope: AccessScopeNamespace, Namespaces: []string{TeamNamespace}},
		{Policy: PolicyHyperPodUserCluster, Scope: AccessScopeCluster},
		{Policy: PolicyHyperPodSpaceTemplate, Scope: AccessScopeNamespace, Namespaces: []string{SpaceTemplateNamespace, TeamNamespace}},
	}
	if got := s.Access.StudioPolicies; len(got) != 3 || got[0].Policy != want[0].Policy || !slices.Equal(got[0].Namespaces, want[0].Namespaces) ||
		got[1].Scope != "cluster" || !slices.Equal(got[2].Namespaces, want[2].Namespaces) {
		t.Errorf("parsed %+v, want %+v", got, want)
	}
	// The defaults follow AWS's Studio setup.
	d := DevSettings().WithDefaults().Access.StudioPolicies
	if len(d) != 5 || d[0].Policy != PolicyHyperPodUserCluster || d[0].Scope != AccessScopeCluster || d[0].Namespaces != nil ||
		d[4].Policy != PolicyHyperPodSpaceTemplate || !slices.Equal(d[4].Namespaces, []string{"jupyter-k8s-shared"}) {
		t.Errorf("default studio policies = %+v", d)
	}

	for name, tc := range map[string]struct{ yaml, want string }{
		"cluster with namespaces":  {"{policy: AmazonEKSViewPolicy, scope: cluster, namespaces: [a]}", "scope cluster takes no namespaces"},
		"namespace without any":    {"{policy: AmazonEKSViewPolicy, scope: namespace}", "scope namespace needs namespaces"},
		"unknown scope":            {"{policy: AmazonEKSViewPolicy, scope: everywhere}", `scope "everywhere" is not cluster or namespace`},
		"missing scope":            {"{policy: AmazonEKSViewPolicy}", `scope "" is not`},
		"bad namespace":            {"{policy: AmazonEKSViewPolicy, scope: namespace, namespaces: [Team_A]}", `"Team_A" is not a Kubernetes namespace`},
		"bad policy name":          {"{policy: arn:aws:eks::aws:cluster-access-policy/X, scope: cluster}", "is not an EKS access policy name"},
		"namespace listed twice":   {"{policy: AmazonEKSViewPolicy, scope: namespace, namespaces: [$team, $team]}", "listed twice"},
		"policy listed twice":      {"AmazonEKSViewPolicy\n    - AmazonEKSViewPolicy", "AmazonEKSViewPolicy is listed twice"},
		"unknown key in the grant": {"{policy: AmazonEKSViewPolicy, scope: cluster, namespace: [a]}", "namespace"},
	} {
		s, err := ParseSettings([]byte("identity_store_id: d-1234567890\nstudio:\n  shared_domain_id: d-abc123def456\naccess:\n  viewer_policies:\n    - " + tc.yaml + "\n"))
		if err == nil {
			err = s.WithDefaults().Check()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
	}
}

func TestSettingsRolePrefixKMSAndPartition(t *testing.T) {
	base := func() Settings { return DevSettings().WithDefaults() }
	for name, tc := range map[string]struct {
		mutate func(*Settings)
		want   string // "" accepted
	}{
		"role path":              {func(s *Settings) { s.TeamRolePrefix = "/hyperpod-teams/" }, ""},
		"name prefix":            {func(s *Settings) { s.TeamRolePrefix = "/hyperpod-team-" }, ""},
		"prefix without slash":   {func(s *Settings) { s.TeamRolePrefix = "hyperpod-teams/" }, "team_role_prefix"},
		"prefix with a wildcard": {func(s *Settings) { s.TeamRolePrefix = "/teams/*" }, "team_role_prefix"},
		"kms key id":             {func(s *Settings) { s.Studio.KmsKeyID = "1234abcd-12ab-34cd-56ef-1234567890ab" }, ""},
		"kms key arn": {func(s *Settings) {
			s.Studio.KmsKeyID = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
		}, ""},
		"kms alias": {func(s *Settings) { s.Studio.KmsKeyID = "alias/studio" }, "studio.kms_key_id"},
		"kms key elsewhere": {func(s *Settings) {
			s.Studio.KmsKeyID = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
		}, "region us-east-1"},
		"kms key other account": {func(s *Settings) {
			s.Studio.KmsKeyID = "arn:aws:kms:us-east-1:999988887777:key/1234abcd-12ab-34cd-56ef-1234567890ab"
		}, "account 111122223333"},
		"cluster in another partition": {func(s *Settings) {
			s.Region, s.ClusterARN = "us-gov-west-1", "arn:aws:sagemaker:us-gov-west-1:111122223333:cluster/a1b2c3d4e5f6"
		}, "partition aws-us-gov"},
		"govcloud cluster": {func(s *Settings) {
			s.Region, s.ClusterARN = "us-gov-west-1", "arn:aws-us-gov:sagemaker:us-gov-west-1:111122223333:cluster/a1b2c3d4e5f6"
		}, ""},
		"viewer role in another partition": {func(s *Settings) { s.Access.ViewerRoleARNFormat = "arn:aws-cn:iam::111122223333:role/%s-viewer" }, "partition aws-cn"},
		"viewer format not a role":         {func(s *Settings) { s.Access.ViewerRoleARNFormat = "arn:aws:iam::111122223333:user/%s" }, "viewer_role_arn_format"},
	} {
		s := base()
		tc.mutate(&s)
		err := s.Check()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
	}
	if got, err := KMSKeyARN("us-gov-west-1", "111122223333", "mrk-1234abcd12ab34cd56ef1234567890ab"); err != nil || got != "arn:aws-us-gov:kms:us-gov-west-1:111122223333:key/mrk-1234abcd12ab34cd56ef1234567890ab" {
		t.Errorf("KMSKeyARN = %s, %v", got, err)
	}
}
