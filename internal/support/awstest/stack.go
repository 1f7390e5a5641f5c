package awstest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Stack is every endpoint the provisioner calls, wired together (SSO
// domains register their application with SSOAdmin) and seeded for a
// cluster: its EKS cluster exists, the groups exist in the identity store,
// and a Unified Studio domain has a project with one environment.
type Stack struct {
	SageMaker     *SageMaker
	SSOAdmin      *SSOAdmin
	IdentityStore *IdentityStore
	EKS           *EKS
	DataZone      *DataZone
	IAM           *IAM
	EC2           *EC2
	// GroupIDs are the identity store ids of the seeded groups, by name.
	GroupIDs map[string]string
}

// Unified Studio fixtures of a Stack.
const (
	UnifiedDomainID      = "dzd_portaltest1"
	UnifiedProjectID     = "proj_portal1"
	UnifiedEnvironmentID = "env_portal1"
)

// NewStack starts the endpoints, closed when tb ends, with eksCluster
// registered and groups in the identity store.
func NewStack(tb testing.TB, eksCluster string, groups ...string) *Stack {
	s := &Stack{
		SageMaker: NewSageMaker(tb), SSOAdmin: NewSSOAdmin(tb), IdentityStore: NewIdentityStore(tb),
		EKS: NewEKS(tb), DataZone: NewDataZone(tb), IAM: NewIAM(tb), EC2: NewEC2(tb), GroupIDs: map[string]string{},
	}
	s.SageMaker.LinkSSOAdmin(s.SSOAdmin)
	s.EKS.AddCluster(eksCluster)
	for _, g := range groups {
		s.GroupIDs[g] = s.IdentityStore.AddGroup(g)
	}
	s.DataZone.AddDomain(UnifiedDomainID)
	s.DataZone.AddProject(UnifiedDomainID, UnifiedProjectID)
	s.DataZone.AddEnvironment(UnifiedDomainID, UnifiedProjectID, UnifiedEnvironmentID, "Tooling")
	return s
}

// Cores are the endpoints' shared parts, for fault injection and counts
// across all of them.
func (s *Stack) Cores() map[string]*Core {
	return map[string]*Core{
		"sagemaker": s.SageMaker.Core, "ssoadmin": s.SSOAdmin.Core, "identitystore": s.IdentityStore.Core,
		"eks": s.EKS.Core, "datazone": s.DataZone.Core, "iam": s.IAM.Core, "ec2": s.EC2.Core,
	}
}

// Flags are the portal's --aws-endpoint-* flags for the stack.
func (s *Stack) Flags() []string {
	var out []string
	for svc, c := range s.Cores() {
		out = append(out, "--aws-endpoint-"+svc+"="+c.URL())
	}
	return out
}

// Creates is how many resources of every kind the endpoints created
// ("created:<kind>" counts), to prove nothing was created twice.
func (s *Stack) Creates() map[string]int {
	out := map[string]int{}
	for _, c := range s.Cores() {
		for k, v := range c.Counts() {
			if len(k) > 8 && k[:8] == "created:" {
				out[k[8:]] += v
			}
		}
	}
	return out
}

// Assignments are every application assignment on the SSO side, as
// "GROUP:<id>", over all applications.
func (s *Stack) Assignments() []string {
	var out []string
	for _, app := range s.SSOAdmin.Applications() {
		out = append(out, s.SSOAdmin.Assignments(app)...)
	}
	return out
}

// PortalSettings writes an --aws-settings file for a portal process that
// provisions against the stack (its identity store, the test cluster's ARN,
// a Studio VPC) into dir, returns its path, and gives the process the
// endpoints' test credentials through the environment (t.Setenv, Env), with
// the instance metadata service off. Pass it with the stack's Flags(). A
// test that runs in parallel uses SettingsFile and passes Env to the child
// process instead: t.Setenv refuses parallel tests.
func (s *Stack) PortalSettings(t testing.TB, dir string) string {
	t.Helper()
	path := s.SettingsFile(t, dir)
	for _, kv := range Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return path
}

// Env is the environment a portal process needs to call the stack's
// endpoints: their test credentials, and the instance metadata service off
// (KEY=value, for exec.Cmd.Env).
func Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + AccessKeyID, "AWS_SECRET_ACCESS_KEY=" + SecretAccessKey, "AWS_EC2_METADATA_DISABLED=true"}
}

// SettingsFile writes PortalSettings' file into dir and returns its path,
// changing nothing in this process's environment.
func (s *Stack) SettingsFile(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "aws.yaml")
	if err := os.WriteFile(path, []byte(`region: us-east-1
account_id: "111122223333"
cluster_arn: arn:aws:sagemaker:us-east-1:111122223333:cluster/a1b2c3d4e5f6
identity_store_id: `+s.IdentityStore.StoreID()+`
studio:
  vpc_id: vpc-0a1b2c3d4e5f60718
  subnet_ids: [subnet-0a1b2c3d4e5f60001]
  security_group_ids: [sg-0a1b2c3d4e5f60718]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
