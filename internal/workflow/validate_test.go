package workflow

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

var testNow = time.Date(2026, 3, 15, 10, 0, 0, 0, time.UTC)

var knownOwners = map[string]bool{
	"owner.red@example.test":  true,
	"member.red@example.test": true,
	"ops-red@example.test":    true,
}

func testEnv() ValidationEnv {
	return ValidationEnv{
		Now:            testNow,
		OwnerExists:    func(email string) bool { return knownOwners[email] },
		NamespaceTaken: func(ns string) bool { return ns == "blue-shared" },
		InstanceTypes:  testInstanceTypes,
	}
}

// testInstanceTypes stand for the deployment's list (cmd/portal passes the
// SDK's ClusterInstanceType values the cluster settings describe).
var testInstanceTypes = []string{"ml.p5.48xlarge", "ml.g5.8xlarge", "ml.trn1.32xlarge", "ml.c5.xlarge"}

func slurmContract() Contract {
	c := ExampleContract()
	c.Orchestrator = OrchestratorSlurm
	c.EKSClusterName = ""
	c.Namespaces = nil
	c.SlurmScope = SlurmScope{Account: "red", Partition: "gpu", QoS: "normal"}
	return c
}

func unifiedContract() Contract {
	c := ExampleContract()
	c.StudioMode = StudioUnified
	c.UnifiedDomainID = "dzd_abc123example"
	c.UnifiedProjectID = "5rqxbh2u1zmx9j"
	return c
}

const arnPrefix = "arn:aws:iam::111122223333:"

// validationTable: each row changes one thing of a valid contract (the
// example, or the Slurm or Unified Studio variant) and names exactly the
// fields that must get a message; want nil means the change is valid.
var validationTable = []struct {
	name   string
	base   func() Contract // nil: ExampleContract
	env    func(*ValidationEnv)
	change func(*Contract)
	want   []string // exactly these fields, in this order
	msg    string   // part of the first field's message
}{
	{name: "example is valid", change: func(c *Contract) {}},
	{name: "slurm example is valid", base: slurmContract, change: func(c *Contract) {}},
	{name: "unified example is valid", base: unifiedContract, change: func(c *Contract) {}},

	// team
	{name: "team tidied", change: func(c *Contract) { c.Team = " Red " }},
	{name: "team with hyphen", change: func(c *Contract) { c.Team = "search-ranking"; c.Namespaces = []string{"search-ranking"} }},
	{name: "team 40 chars", change: func(c *Contract) { c.Team = strings.Repeat("a", 40); c.Namespaces = []string{"ns"} }},
	{name: "team missing", change: func(c *Contract) { c.Team = "" }, want: []string{"team"}, msg: "required"},
	{name: "team underscore", change: func(c *Contract) { c.Team = "red_team" }, want: []string{"team"}, msg: "lower-case letters"},
	{name: "team leading hyphen", change: func(c *Contract) { c.Team = "-red" }, want: []string{"team"}, msg: "starting and ending"},
	{name: "team 41 chars", change: func(c *Contract) { c.Team = strings.Repeat("a", 41) }, want: []string{"team"}, msg: "at most 40"},

	// business purpose
	{name: "purpose 20 chars", change: func(c *Contract) { c.BusinessPurpose = strings.Repeat("x", 20) }},
	{name: "purpose multi-line", change: func(c *Contract) { c.BusinessPurpose = "Train models\r\nfor search ranking." }},
	{name: "purpose missing", change: func(c *Contract) { c.BusinessPurpose = "   " }, want: []string{"business_purpose"}, msg: "must be revoked"},
	{name: "purpose 19 chars", change: func(c *Contract) { c.BusinessPurpose = strings.Repeat("x", 19) }, want: []string{"business_purpose"}, msg: "too short (19"},
	{name: "purpose too long", change: func(c *Contract) { c.BusinessPurpose = strings.Repeat("x", 2001) }, want: []string{"business_purpose"}, msg: "too long"},
	{name: "purpose control char", change: func(c *Contract) { c.BusinessPurpose = "Train models for \x07search ranking." }, want: []string{"business_purpose"}, msg: "control"},

	// owners
	{name: "owner tidied", change: func(c *Contract) { c.BusinessOwner = " Owner.Red@Example.TEST " }},
	{name: "business owner missing", change: func(c *Contract) { c.BusinessOwner = "" }, want: []string{"business_owner"}, msg: "required"},
	{name: "business owner not email", change: func(c *Contract) { c.BusinessOwner = "owner.red" }, want: []string{"business_owner"}, msg: "not an email"},
	{name: "business owner unknown", change: func(c *Contract) { c.BusinessOwner = "stranger@example.test" }, want: []string{"business_owner"}, msg: "not a portal user"},
	{name: "operations owner missing", change: func(c *Contract) { c.OperationsOwner = "" }, want: []string{"operations_owner"}, msg: "required"},
	{name: "operations owner not email", change: func(c *Contract) { c.OperationsOwner = "a@b" }, want: []string{"operations_owner"}, msg: "not an email"},
	{name: "operations owner unknown", change: func(c *Contract) { c.OperationsOwner = "x@example.test" }, want: []string{"operations_owner"}, msg: "not a portal user"},
	{name: "cost owner missing", change: func(c *Contract) { c.CostOwner = "" }, want: []string{"cost_owner"}, msg: "required"},
	{name: "cost owner not email", change: func(c *Contract) { c.CostOwner = "Olivia <owner.red@example.test>" }, want: []string{"cost_owner"}, msg: "not an email"},
	{name: "cost owner unknown", change: func(c *Contract) { c.CostOwner = "finance@example.test" }, want: []string{"cost_owner"}, msg: "not a portal user"},
	{name: "exception owner missing", change: func(c *Contract) { c.ExceptionOwner = "" }, want: []string{"exception_owner"}, msg: "required"},
	{name: "exception owner not email", change: func(c *Contract) { c.ExceptionOwner = "owner..red@example.test" }, want: []string{"exception_owner"}, msg: "not an email"},
	{name: "exception owner unknown", change: func(c *Contract) { c.ExceptionOwner = "nobody@example.test" }, want: []string{"exception_owner"}, msg: "not a portal user"},
	{name: "owner check skipped without OwnerExists", env: func(e *ValidationEnv) { e.OwnerExists = nil }, change: func(c *Contract) { c.CostOwner = "anyone@example.test" }},

	// studio
	{name: "studio mode tidied", base: unifiedContract, change: func(c *Contract) { c.StudioMode = " Unified-Studio" }},
	{name: "studio mode missing", change: func(c *Contract) { c.StudioMode = "" }, want: []string{"studio_mode"}, msg: "required"},
	{name: "studio mode unknown", change: func(c *Contract) { c.StudioMode = "jupyter" }, want: []string{"studio_mode"}, msg: "unknown studio mode"},
	{name: "unified without domain", base: unifiedContract, change: func(c *Contract) { c.UnifiedDomainID = "" }, want: []string{"unified_domain_id"}, msg: "required for Unified Studio"},
	{name: "unified bad domain", base: unifiedContract, change: func(c *Contract) { c.UnifiedDomainID = "abc123" }, want: []string{"unified_domain_id"}, msg: "dzd_"},
	{name: "unified without project", base: unifiedContract, change: func(c *Contract) { c.UnifiedProjectID = "" }, want: []string{"unified_project_id"}, msg: "required for Unified Studio"},
	{name: "unified bad project", base: unifiedContract, change: func(c *Contract) { c.UnifiedProjectID = "has space" }, want: []string{"unified_project_id"}, msg: "project id"},
	{name: "team domain with domain id", change: func(c *Contract) { c.UnifiedDomainID = "dzd_abc123example" }, want: []string{"unified_domain_id"}, msg: "only for Unified Studio"},
	{name: "team domain with project id", change: func(c *Contract) { c.UnifiedProjectID = "5rqxbh2u1zmx9j" }, want: []string{"unified_project_id"}, msg: "only for Unified Studio"},

	// account and region
	{name: "account 11 digits", change: func(c *Contract) { c.AccountID = "11112222333" }, want: []string{"account_id"}, msg: "12 digits"},
	{name: "account 13 digits", change: func(c *Contract) { c.AccountID = "1111222233334" }, want: []string{"account_id"}, msg: "12 digits"},
	{name: "account letters", change: func(c *Contract) { c.AccountID = "11112222333a" }, want: []string{"account_id"}, msg: "12 digits"},
	{name: "account missing", change: func(c *Contract) { c.AccountID = "" }, want: []string{"account_id"}, msg: "required"},
	{name: "region tidied", change: func(c *Contract) { c.Region = "US-EAST-1 " }},
	{name: "region missing", change: func(c *Contract) { c.Region = "" }, want: []string{"region"}, msg: "required"},
	{name: "region unknown", change: func(c *Contract) { c.Region = "us-east-7" }, want: []string{"region"}, msg: "not an AWS commercial region"},
	{name: "region gov cloud", change: func(c *Contract) { c.Region = "us-gov-west-1" }, want: []string{"region"}, msg: "not an AWS commercial region"},

	// orchestrator
	{name: "orchestrator missing", change: func(c *Contract) { c.Orchestrator = "" }, want: []string{"orchestrator"}, msg: "required"},
	{name: "orchestrator unknown", change: func(c *Contract) { c.Orchestrator = "kubernetes" }, want: []string{"orchestrator"}, msg: "unknown orchestrator"},
	{name: "orchestrator tidied", change: func(c *Contract) { c.Orchestrator = "EKS" }},

	// cluster name
	{name: "cluster name mixed case", change: func(c *Contract) { c.ClusterName = "Shared-HP" }},
	{name: "cluster name missing", change: func(c *Contract) { c.ClusterName = "" }, want: []string{"cluster_name"}, msg: "required"},
	{name: "cluster name underscore", change: func(c *Contract) { c.ClusterName = "shared_hp" }, want: []string{"cluster_name"}, msg: "1-63"},
	{name: "cluster name 64 chars", change: func(c *Contract) { c.ClusterName = strings.Repeat("a", 64) }, want: []string{"cluster_name"}, msg: "1-63"},

	// cluster ARN
	{name: "cluster arn missing", change: func(c *Contract) { c.ClusterARN = "" }, want: []string{"cluster_arn"}, msg: "required"},
	{name: "cluster arn not an arn", change: func(c *Contract) { c.ClusterARN = "shared-hp" }, want: []string{"cluster_arn"}, msg: "must be an ARN"},
	{name: "cluster arn other partition", change: func(c *Contract) { c.ClusterARN = "arn:aws-cn:sagemaker:us-east-1:111122223333:cluster/a1b2c3d4e5f6" }, want: []string{"cluster_arn"}, msg: "aws partition"},
	{name: "cluster arn of eks", change: func(c *Contract) { c.ClusterARN = "arn:aws:eks:us-east-1:111122223333:cluster/shared-hp-eks" }, want: []string{"cluster_arn"}, msg: "not a eks ARN"},
	{name: "cluster arn name not id", change: func(c *Contract) { c.ClusterARN = "arn:aws:sagemaker:us-east-1:111122223333:cluster/shared-hp" }, want: []string{"cluster_arn"}, msg: "12-character id"},
	{name: "cluster arn other resource", change: func(c *Contract) { c.ClusterARN = "arn:aws:sagemaker:us-east-1:111122223333:domain/d-abc" }, want: []string{"cluster_arn"}, msg: "12-character id"},
	{name: "cluster arn other region", change: func(c *Contract) { c.ClusterARN = "arn:aws:sagemaker:us-west-2:111122223333:cluster/a1b2c3d4e5f6" }, want: []string{"cluster_arn"}, msg: "region us-west-2, but the contract's region is us-east-1"},
	{name: "region differs from arn", change: func(c *Contract) { c.Region = "eu-west-1" }, want: []string{"cluster_arn"}, msg: "contract's region is eu-west-1"},
	{name: "cluster arn no region", change: func(c *Contract) { c.ClusterARN = "arn:aws:sagemaker::111122223333:cluster/a1b2c3d4e5f6" }, want: []string{"cluster_arn"}, msg: "has no region"},
	{name: "cluster arn other account", change: func(c *Contract) { c.ClusterARN = "arn:aws:sagemaker:us-east-1:444455556666:cluster/a1b2c3d4e5f6" }, want: []string{"cluster_arn"}, msg: "account 444455556666, but the contract's account is 111122223333"},
	{name: "cluster arn bad account", change: func(c *Contract) { c.ClusterARN = "arn:aws:sagemaker:us-east-1:1111:cluster/a1b2c3d4e5f6" }, want: []string{"cluster_arn"}, msg: "12-digit account"},
	{name: "cluster arn unknown region, contract region bad", change: func(c *Contract) {
		c.Region = "mars-1"
		c.ClusterARN = "arn:aws:sagemaker:mars-2:111122223333:cluster/a1b2c3d4e5f6"
	}, want: []string{"region", "cluster_arn"}, msg: "not an AWS commercial region"},

	// EKS cluster name
	{name: "eks cluster name missing", change: func(c *Contract) { c.EKSClusterName = "" }, want: []string{"eks_cluster_name"}, msg: "required for EKS"},
	{name: "eks cluster name invalid", change: func(c *Contract) { c.EKSClusterName = "shared hp" }, want: []string{"eks_cluster_name"}, msg: "1-100"},
	{name: "eks cluster name on slurm", base: slurmContract, change: func(c *Contract) { c.EKSClusterName = "shared-hp-eks" }, want: []string{"eks_cluster_name"}, msg: "only for EKS"},

	// role ARNs
	{name: "role arn with path", change: func(c *Contract) { c.AccessRoleARN = arnPrefix + "role/teams/red/red-access" }},
	{name: "project role missing", change: func(c *Contract) { c.ProjectRoleARN = "" }, want: []string{"project_role_arn"}, msg: "required"},
	{name: "project role not arn", change: func(c *Contract) { c.ProjectRoleARN = "red-project" }, want: []string{"project_role_arn"}, msg: "IAM role ARN like"},
	{name: "project role is a user", change: func(c *Contract) { c.ProjectRoleARN = arnPrefix + "user/bob" }, want: []string{"project_role_arn"}, msg: "must name an IAM role"},
	{name: "project role assumed-role", change: func(c *Contract) { c.ProjectRoleARN = "arn:aws:sts::111122223333:assumed-role/red/bob" }, want: []string{"project_role_arn"}, msg: "not a sts ARN"},
	{name: "access role missing", change: func(c *Contract) { c.AccessRoleARN = "" }, want: []string{"access_role_arn"}, msg: "required"},
	{name: "access role with region", change: func(c *Contract) { c.AccessRoleARN = "arn:aws:iam:us-east-1:111122223333:role/red-access" }, want: []string{"access_role_arn"}, msg: "IAM is global"},
	{name: "access role other account", change: func(c *Contract) { c.AccessRoleARN = "arn:aws:iam::444455556666:role/red-access" }, want: []string{"access_role_arn"}, msg: "account 444455556666"},
	{name: "access role other partition", change: func(c *Contract) { c.AccessRoleARN = "arn:aws-us-gov:iam::111122223333:role/red-access" }, want: []string{"access_role_arn"}, msg: "aws partition"},
	{name: "access role bad name", change: func(c *Contract) { c.AccessRoleARN = arnPrefix + "role/red access" }, want: []string{"access_role_arn"}, msg: "invalid role name"},
	{name: "access role empty name", change: func(c *Contract) { c.AccessRoleARN = arnPrefix + "role/" }, want: []string{"access_role_arn"}, msg: "invalid role name"},
	{name: "access role bad path", change: func(c *Contract) { c.AccessRoleARN = arnPrefix + "role/teams//red-access" }, want: []string{"access_role_arn"}, msg: "role path"},
	{name: "workload role missing", change: func(c *Contract) { c.WorkloadRoleARN = "" }, want: []string{"workload_role_arn"}, msg: "required"},
	{name: "workload role name too long", change: func(c *Contract) { c.WorkloadRoleARN = arnPrefix + "role/" + strings.Repeat("r", 65) }, want: []string{"workload_role_arn"}, msg: "1-64"},
	{name: "workload role is access role", change: func(c *Contract) { c.WorkloadRoleARN = c.AccessRoleARN }, want: []string{"workload_role_arn"}, msg: "role of its own"},
	{name: "workload role is project role", change: func(c *Contract) { c.WorkloadRoleARN = c.ProjectRoleARN }, want: []string{"workload_role_arn"}, msg: "role of its own"},

	// workloads
	{name: "workload types tidied", change: func(c *Contract) { c.WorkloadTypes = []WorkloadType{" Training", "interactive-spaces"} }},
	{name: "workload types missing", change: func(c *Contract) { c.WorkloadTypes = nil }, want: []string{"workload_types"}, msg: "at least one"},
	{name: "workload type unknown", change: func(c *Contract) { c.WorkloadTypes = []WorkloadType{"training", "gaming"} }, want: []string{"workload_types[1]"}, msg: "unknown workload type \"gaming\""},
	{name: "workload type twice", change: func(c *Contract) { c.WorkloadTypes = []WorkloadType{"training", "Training"} }, want: []string{"workload_types[1]"}, msg: "listed twice"},
	{name: "data classification missing", change: func(c *Contract) { c.DataClassification = "" }, want: []string{"data_classification"}, msg: "required"},
	{name: "data classification unknown", change: func(c *Contract) { c.DataClassification = "secret" }, want: []string{"data_classification"}, msg: "unknown classification"},
	{name: "restricted needs end date", change: func(c *Contract) { c.DataClassification = DataRestricted }, want: []string{"end_date"}, msg: "restricted"},
	{name: "restricted with end date", change: func(c *Contract) { c.DataClassification = DataRestricted; c.EndDate = "2026-12-31" }},

	// namespaces
	{name: "two namespaces", change: func(c *Contract) { c.Namespaces = []string{"hyperpod-ns-red", "red-inference"} }},
	{name: "namespace tidied", change: func(c *Contract) { c.Namespaces = []string{" HyperPod-NS-Red "} }},
	{name: "namespaces missing on eks", change: func(c *Contract) { c.Namespaces = nil }, want: []string{"namespaces"}, msg: "at least one namespace, e.g. hyperpod-ns-red"},
	{name: "namespace with space", change: func(c *Contract) { c.Namespaces = []string{"red team"} }, want: []string{"namespaces[0]"}, msg: "at most 63"},
	{name: "namespace 64 chars", change: func(c *Contract) { c.Namespaces = []string{strings.Repeat("n", 64)} }, want: []string{"namespaces[0]"}, msg: "at most 63"},
	{name: "namespace empty row", change: func(c *Contract) { c.Namespaces = []string{"hyperpod-ns-red", " "} }, want: []string{"namespaces[1]"}, msg: "is empty"},
	{name: "namespace twice", change: func(c *Contract) { c.Namespaces = []string{"hyperpod-ns-red", "Hyperpod-ns-red"} }, want: []string{"namespaces[1]"}, msg: "listed twice"},
	{name: "namespace kube-system", change: func(c *Contract) { c.Namespaces = []string{"kube-system"} }, want: []string{"namespaces[0]"}, msg: "reserved"},
	{name: "namespace default", change: func(c *Contract) { c.Namespaces = []string{"default"} }, want: []string{"namespaces[0]"}, msg: "reserved"},
	{name: "namespace aws-hyperpod", change: func(c *Contract) { c.Namespaces = []string{"aws-hyperpod"} }, want: []string{"namespaces[0]"}, msg: "reserved"},
	{name: "namespace of another team", change: func(c *Contract) { c.Namespaces = []string{"hyperpod-ns-blue"} }, want: []string{"namespaces[0]"}, msg: "namespace of team blue; this team's is hyperpod-ns-red"},
	{name: "namespace beside HyperPod's", change: func(c *Contract) { c.Namespaces = []string{"hyperpod-ns-red", "red-batch"} },
		env: func(e *ValidationEnv) { e.TeamNamespaceOnly = true }, want: []string{"namespaces[1]"}, msg: "HyperPod task governance creates and owns the team namespace hyperpod-ns-red"},
	{name: "namespace taken", change: func(c *Contract) { c.Namespaces = []string{"hyperpod-ns-red", "blue-shared"} }, want: []string{"namespaces[1]"}, msg: "blue-shared is not available: choose another name"},
	{name: "namespace check skipped without NamespaceTaken", env: func(e *ValidationEnv) { e.NamespaceTaken = nil }, change: func(c *Contract) { c.Namespaces = []string{"blue-shared"} }},
	{name: "namespaces on slurm", base: slurmContract, change: func(c *Contract) { c.Namespaces = []string{"hyperpod-ns-red"} }, want: []string{"namespaces"}, msg: "Slurm connection has no namespaces"},

	// slurm scope
	{name: "slurm scope on eks", change: func(c *Contract) { c.SlurmScope = SlurmScope{Account: "red"} }, want: []string{"slurm_scope"}, msg: "only for Slurm"},
	{name: "slurm account missing", base: slurmContract, change: func(c *Contract) { c.SlurmScope.Account = "" }, want: []string{"slurm_scope.account"}, msg: "required for Slurm"},
	{name: "slurm account invalid", base: slurmContract, change: func(c *Contract) { c.SlurmScope.Account = "red:team" }, want: []string{"slurm_scope.account"}, msg: "1-64"},
	{name: "slurm partition missing", base: slurmContract, change: func(c *Contract) { c.SlurmScope.Partition = " " }, want: []string{"slurm_scope.partition"}, msg: "required for Slurm"},
	{name: "slurm partition invalid", base: slurmContract, change: func(c *Contract) { c.SlurmScope.Partition = "gpu partition" }, want: []string{"slurm_scope.partition"}, msg: "1-64"},
	{name: "slurm qos missing", base: slurmContract, change: func(c *Contract) { c.SlurmScope.QoS = "" }, want: []string{"slurm_scope.qos"}, msg: "required for Slurm"},
	{name: "slurm qos invalid", base: slurmContract, change: func(c *Contract) { c.SlurmScope.QoS = ".high" }, want: []string{"slurm_scope.qos"}, msg: "1-64"},
	{name: "slurm everything missing", base: slurmContract, change: func(c *Contract) { c.SlurmScope = SlurmScope{} }, want: []string{"slurm_scope.account", "slurm_scope.partition", "slurm_scope.qos"}, msg: "required for Slurm"},

	// guaranteed capacity
	{name: "capacity tidied", change: func(c *Contract) { c.Scheduling.Guaranteed = []Capacity{{" ML.P5.48XLARGE", 2}, {"ml.g5.8xlarge", 4}} }},
	{name: "capacity configured type", env: func(e *ValidationEnv) { e.InstanceTypes = []string{" ML.P6.96xlarge"} }, change: func(c *Contract) { c.Scheduling.Guaranteed = []Capacity{{"ml.p6.96xlarge", 1}} }},
	{name: "capacity type not in configured list", env: func(e *ValidationEnv) { e.InstanceTypes = []string{"ml.p6.96xlarge"} }, change: func(c *Contract) {}, want: []string{"scheduling.guaranteed[0].instance_type"}, msg: "not an instance type"},
	{name: "capacity max count", change: func(c *Contract) { c.Scheduling.Guaranteed[0].Count = MaxInstanceCount }},
	{name: "capacity missing", change: func(c *Contract) { c.Scheduling.Guaranteed = nil }, want: []string{"scheduling.guaranteed"}, msg: "at least one row"},
	{name: "capacity type unchecked without a configured list", env: func(e *ValidationEnv) { e.InstanceTypes = nil }, change: func(c *Contract) { c.Scheduling.Guaranteed[0].InstanceType = "ml.x9.huge" }},
	{name: "capacity type missing", change: func(c *Contract) { c.Scheduling.Guaranteed[0].InstanceType = "" }, want: []string{"scheduling.guaranteed[0].instance_type"}, msg: "required"},
	{name: "capacity type unknown", change: func(c *Contract) { c.Scheduling.Guaranteed[0].InstanceType = "ml.x9.huge" }, want: []string{"scheduling.guaranteed[0].instance_type"}, msg: "not an instance type"},
	{name: "capacity type without ml", change: func(c *Contract) { c.Scheduling.Guaranteed[0].InstanceType = "p5.48xlarge" }, want: []string{"scheduling.guaranteed[0].instance_type"}, msg: "not an instance type"},
	{name: "capacity type twice", change: func(c *Contract) {
		c.Scheduling.Guaranteed = []Capacity{{"ml.p5.48xlarge", 2}, {"ml.g5.8xlarge", 1}, {"ml.p5.48xlarge", 1}}
	}, want: []string{"scheduling.guaranteed[2].instance_type"}, msg: "listed twice"},
	{name: "capacity count zero", change: func(c *Contract) { c.Scheduling.Guaranteed[0].Count = 0 }, want: []string{"scheduling.guaranteed[0].count"}, msg: "at least 1"},
	{name: "capacity count negative", change: func(c *Contract) { c.Scheduling.Guaranteed[0].Count = -3 }, want: []string{"scheduling.guaranteed[0].count"}, msg: "at least 1"},
	{name: "capacity count huge", change: func(c *Contract) { c.Scheduling.Guaranteed[0].Count = MaxInstanceCount + 1 }, want: []string{"scheduling.guaranteed[0].count"}, msg: "at most"},

	// sharing and borrow limit
	{name: "sharing neither without limit", change: func(c *Contract) { c.Scheduling.Sharing = SharingNeither; c.Scheduling.BorrowLimitPercent = 0 }},
	{name: "sharing lend without limit", change: func(c *Contract) { c.Scheduling.Sharing = SharingLend; c.Scheduling.BorrowLimitPercent = 0 }},
	{name: "sharing borrow limit 1", change: func(c *Contract) { c.Scheduling.Sharing = SharingBorrow; c.Scheduling.BorrowLimitPercent = 1 }},
	{name: "sharing borrow limit 500", change: func(c *Contract) { c.Scheduling.BorrowLimitPercent = 500 }},
	{name: "sharing missing", change: func(c *Contract) { c.Scheduling.Sharing = ""; c.Scheduling.BorrowLimitPercent = 0 }, want: []string{"scheduling.sharing"}, msg: "required"},
	{name: "sharing unknown", change: func(c *Contract) { c.Scheduling.Sharing = "share"; c.Scheduling.BorrowLimitPercent = 0 }, want: []string{"scheduling.sharing"}, msg: "unknown sharing"},
	{name: "borrow limit missing when borrowing", change: func(c *Contract) { c.Scheduling.BorrowLimitPercent = 0 }, want: []string{"scheduling.borrow_limit_percent"}, msg: "required when borrowing"},
	{name: "borrow limit 501", change: func(c *Contract) { c.Scheduling.BorrowLimitPercent = 501 }, want: []string{"scheduling.borrow_limit_percent"}, msg: "between 1 and 500"},
	{name: "borrow limit negative", change: func(c *Contract) { c.Scheduling.Sharing = SharingBorrow; c.Scheduling.BorrowLimitPercent = -5 }, want: []string{"scheduling.borrow_limit_percent"}, msg: "between 1 and 500"},
	{name: "borrow limit without borrowing", change: func(c *Contract) { c.Scheduling.Sharing = SharingLend }, want: []string{"scheduling.borrow_limit_percent"}, msg: "only when the team borrows"},

	// preemption, fair share, priority classes
	{name: "preemption never", change: func(c *Contract) { c.Scheduling.Preemption = PreemptNever }},
	{name: "preemption missing", change: func(c *Contract) { c.Scheduling.Preemption = "" }, want: []string{"scheduling.preemption"}, msg: "required"},
	{name: "preemption unknown", change: func(c *Contract) { c.Scheduling.Preemption = "always" }, want: []string{"scheduling.preemption"}, msg: "unknown preemption"},
	{name: "fair share 0", change: func(c *Contract) { c.Scheduling.FairShareWeight = 0 }},
	{name: "fair share 100", change: func(c *Contract) { c.Scheduling.FairShareWeight = 100 }},
	{name: "fair share negative", change: func(c *Contract) { c.Scheduling.FairShareWeight = -1 }, want: []string{"scheduling.fair_share_weight"}, msg: "between 0 and 100"},
	{name: "fair share 101", change: func(c *Contract) { c.Scheduling.FairShareWeight = 101 }, want: []string{"scheduling.fair_share_weight"}, msg: "between 0 and 100"},
	{name: "priority classes none", change: func(c *Contract) { c.Scheduling.PriorityClasses = nil }},
	{name: "priority class dotted", change: func(c *Contract) { c.Scheduling.PriorityClasses = []string{"high.priority"} }, want: []string{"scheduling.priority_classes[0]"}, msg: "priority class name"},
	{name: "priority class invalid", change: func(c *Contract) { c.Scheduling.PriorityClasses = []string{"training", "high_priority"} }, want: []string{"scheduling.priority_classes[1]"}, msg: "priority class name"},
	{name: "priority class 40", change: func(c *Contract) { c.Scheduling.PriorityClasses = []string{strings.Repeat("p", MaxPriorityClassLen)} }},
	{name: "priority class 41", change: func(c *Contract) { c.Scheduling.PriorityClasses = []string{strings.Repeat("p", MaxPriorityClassLen+1)} }, want: []string{"scheduling.priority_classes[0]"}, msg: "at most 40"},
	{name: "priority class twice", change: func(c *Contract) { c.Scheduling.PriorityClasses = []string{"training", "TRAINING"} }, want: []string{"scheduling.priority_classes[1]"}, msg: "listed twice"},

	// signals
	{name: "signals missing", change: func(c *Contract) { c.Signals = nil }, want: []string{"signals"}, msg: "at least one watched signal"},
	{name: "signal name missing", change: func(c *Contract) { c.Signals[0].Name = "" }, want: []string{"signals[0].name"}, msg: "required"},
	{name: "signal name too long", change: func(c *Contract) { c.Signals[1].Name = strings.Repeat("s", 201) }, want: []string{"signals[1].name"}, msg: "too long"},
	{name: "signal name two lines", change: func(c *Contract) { c.Signals[0].Name = "GPU\nutilization" }, want: []string{"signals[0].name"}, msg: "one line"},
	{name: "signal name twice", change: func(c *Contract) { c.Signals[1].Name = "accelerator UTILIZATION" }, want: []string{"signals[1].name"}, msg: "listed twice"},
	{name: "signal owner missing", change: func(c *Contract) { c.Signals[0].Owner = "" }, want: []string{"signals[0].owner"}, msg: "required"},
	{name: "signal owner not email", change: func(c *Contract) { c.Signals[0].Owner = "on-call" }, want: []string{"signals[0].owner"}, msg: "not an email"},
	{name: "signal owner unknown", change: func(c *Contract) { c.Signals[1].Owner = "pager@example.test" }, want: []string{"signals[1].owner"}, msg: "not a portal user"},
	{name: "signal response missing", change: func(c *Contract) { c.Signals[0].Response = "\n" }, want: []string{"signals[0].response"}, msg: "required"},
	{name: "signal response too long", change: func(c *Contract) { c.Signals[0].Response = strings.Repeat("r", 2001) }, want: []string{"signals[0].response"}, msg: "too long"},

	// review cadence
	{name: "review cadence 7", change: func(c *Contract) { c.ReviewCadenceDays = 7 }},
	{name: "review cadence 365", change: func(c *Contract) { c.ReviewCadenceDays = 365 }},
	{name: "review cadence missing", change: func(c *Contract) { c.ReviewCadenceDays = 0 }, want: []string{"review_cadence_days"}, msg: "required"},
	{name: "review cadence 6", change: func(c *Contract) { c.ReviewCadenceDays = 6 }, want: []string{"review_cadence_days"}, msg: "between 7 and 365"},
	{name: "review cadence 366", change: func(c *Contract) { c.ReviewCadenceDays = 366 }, want: []string{"review_cadence_days"}, msg: "between 7 and 365"},

	// end date and decommission criteria
	{name: "end date tomorrow", change: func(c *Contract) { c.EndDate = "2026-03-16" }},
	{name: "end date instead of criteria", change: func(c *Contract) { c.EndDate = "2027-01-31"; c.DecommissionCriteria = "" }},
	{name: "end date today", change: func(c *Contract) { c.EndDate = "2026-03-15" }, want: []string{"end_date"}, msg: "in the future (after 2026-03-15)"},
	{name: "end date past", change: func(c *Contract) { c.EndDate = "2025-01-01" }, want: []string{"end_date"}, msg: "in the future"},
	{name: "end date bad month", change: func(c *Contract) { c.EndDate = "2026-13-01" }, want: []string{"end_date"}, msg: "YYYY-MM-DD"},
	{name: "end date unpadded", change: func(c *Contract) { c.EndDate = "2026-3-20" }, want: []string{"end_date"}, msg: "YYYY-MM-DD"},
	{name: "end date other format", change: func(c *Contract) { c.EndDate = "31/12/2026" }, want: []string{"end_date"}, msg: "YYYY-MM-DD"},
	{name: "no end date nor criteria", change: func(c *Contract) { c.DecommissionCriteria = " " }, want: []string{"end_date"}, msg: "end date or decommission criteria"},
	{name: "criteria too long", change: func(c *Contract) { c.DecommissionCriteria = strings.Repeat("c", 2001) }, want: []string{"decommission_criteria"}, msg: "too long"},
	{name: "criteria control char", change: func(c *Contract) { c.DecommissionCriteria = "After the \x1b[31mproject\x1b[0m ends." }, want: []string{"decommission_criteria"}, msg: "control"},

	// egress
	{name: "egress none", change: func(c *Contract) { c.EgressAllowances = nil }},
	{name: "egress cidr", change: func(c *Contract) {
		c.EgressAllowances = []Egress{{"10.20.0.0/16", []int{443, 8443}, "Internal model registry."}}
	}},
	{name: "egress ipv6 tidied", change: func(c *Contract) { c.EgressAllowances = []Egress{{"2001:DB8::/32", []int{443}, "Partner network."}} }},
	{name: "egress host /32", change: func(c *Contract) { c.EgressAllowances = []Egress{{"10.0.0.1/32", []int{443}, "Licence server."}} }},
	{name: "egress destination missing", change: func(c *Contract) { c.EgressAllowances[0].Destination = "" }, want: []string{"egress_allowances[0].destination"}, msg: "required"},
	{name: "egress whole internet", change: func(c *Contract) { c.EgressAllowances[0].Destination = "0.0.0.0/0" }, want: []string{"egress_allowances[0].destination"}, msg: "default-deny"},
	{name: "egress host bits", change: func(c *Contract) { c.EgressAllowances[0].Destination = "10.0.0.1/8" }, want: []string{"egress_allowances[0].destination"}, msg: "did you mean 10.0.0.0/8?"},
	{name: "egress bare address", change: func(c *Contract) { c.EgressAllowances[0].Destination = "10.0.0.1" }, want: []string{"egress_allowances[0].destination"}, msg: "10.0.0.1/32"},
	{name: "egress bad prefix", change: func(c *Contract) { c.EgressAllowances[0].Destination = "10.0.0.0/33" }, want: []string{"egress_allowances[0].destination"}, msg: "not a CIDR block"},
	{name: "egress non-canonical ipv6", change: func(c *Contract) { c.EgressAllowances[0].Destination = "2001:0db8::/32" }, want: []string{"egress_allowances[0].destination"}, msg: "write it as 2001:db8::/32"},
	{name: "egress single label", change: func(c *Contract) { c.EgressAllowances[0].Destination = "localhost" }, want: []string{"egress_allowances[0].destination"}, msg: "CIDR block (10.20.0.0/16) or a DNS name"},
	{name: "egress url", change: func(c *Contract) { c.EgressAllowances[0].Destination = "https://s3.amazonaws.com" }, want: []string{"egress_allowances[0].destination"}, msg: "not a CIDR block"},
	{name: "egress bad ip lookalike", change: func(c *Contract) { c.EgressAllowances[0].Destination = "10.0.0.256" }, want: []string{"egress_allowances[0].destination"}, msg: "or a DNS name"},
	{name: "egress destination twice", change: func(c *Contract) {
		c.EgressAllowances = append(c.EgressAllowances, Egress{"S3.us-east-1.amazonaws.com", []int{80}, "Plain HTTP mirror."})
	}, want: []string{"egress_allowances[1].destination"}, msg: "listed twice"},
	{name: "egress ports missing", change: func(c *Contract) { c.EgressAllowances[0].Ports = nil }, want: []string{"egress_allowances[0].ports"}, msg: "at least one port"},
	{name: "egress port zero", change: func(c *Contract) { c.EgressAllowances[0].Ports = []int{0} }, want: []string{"egress_allowances[0].ports[0]"}, msg: "1-65535"},
	{name: "egress port too big", change: func(c *Contract) { c.EgressAllowances[0].Ports = []int{443, 65536} }, want: []string{"egress_allowances[0].ports[1]"}, msg: "1-65535"},
	{name: "egress port twice", change: func(c *Contract) { c.EgressAllowances[0].Ports = []int{443, 443} }, want: []string{"egress_allowances[0].ports[1]"}, msg: "listed twice"},
	{name: "egress reason missing", change: func(c *Contract) { c.EgressAllowances[0].Reason = "" }, want: []string{"egress_allowances[0].reason"}, msg: "required"},
	{name: "egress reason too long", change: func(c *Contract) { c.EgressAllowances[0].Reason = strings.Repeat("r", 2001) }, want: []string{"egress_allowances[0].reason"}, msg: "too long"},
	{name: "egress reason control char", change: func(c *Contract) { c.EgressAllowances[0].Reason = "a\x00b" }, want: []string{"egress_allowances[0].reason"}, msg: "control"},
}

func TestValidate(t *testing.T) {
	for _, tt := range validationTable {
		t.Run(tt.name, func(t *testing.T) {
			base := ExampleContract
			if tt.base != nil {
				base = tt.base
			}
			c := base()
			tt.change(&c)
			env := testEnv()
			if tt.env != nil {
				tt.env(&env)
			}
			errs := c.Validate(env)
			var got []string
			for _, fe := range errs {
				got = append(got, fe.Field)
				if strings.TrimSpace(fe.Message) == "" {
					t.Errorf("%s has an empty message", fe.Field)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Validate() fields = %q, want %q\n%v", got, tt.want, errs)
			}
			if len(tt.want) > 0 {
				if msg := errs.Get(tt.want[0]); !strings.Contains(msg, tt.msg) {
					t.Errorf("message for %s = %q, want it to contain %q", tt.want[0], msg, tt.msg)
				}
			}
		})
	}
}

// TestSystemNamespacesAreRefused: the namespaces of the cluster's own
// components (issue 10 item 14) are refused with a field error, always
// (built in), and so are the settings' extra names and prefixes.
func TestSystemNamespacesAreRefused(t *testing.T) {
	extra := []string{"team-infra", "platform-*", "*"}
	for _, tt := range []struct {
		ns       string
		reserved bool
	}{
		{"kube-system", true}, {"kube-public", true}, {"kube-node-lease", true}, {"kube-anything", true},
		{"kueue-system", true}, {"aws-hyperpod", true}, {"aws-observability", true},
		{"amazon-cloudwatch", true}, {"amazon-guardduty", true}, {"cert-manager", true},
		{"jupyter-k8s-shared", true}, {"jupyter-k8s-system", true}, {"jupyter-k8s-router", true},
		{"default", true}, {"kubeflow", true},
		// the settings' list: a name, and a prefix
		{"team-infra", true}, {"platform-ingress", true}, {"platform-x", true},
		// near misses are the team's to name
		{"kueue-systems", false}, {"my-kube-system", false}, {"certmanager", false},
		{"team-infra-2", false}, {"platform", false}, {"hyperpod-ns-red", false}, {"red-inference", false},
	} {
		t.Run(tt.ns, func(t *testing.T) {
			if got := ReservedNamespace(tt.ns, extra); got != tt.reserved {
				t.Errorf("ReservedNamespace(%q) = %v, want %v", tt.ns, got, tt.reserved)
			}
			c := ExampleContract()
			c.Namespaces = []string{"hyperpod-ns-red", tt.ns}
			env := testEnv()
			env.ReservedNamespaces = extra
			msg := c.Validate(env).Get("namespaces[1]")
			if tt.reserved != strings.Contains(msg, "reserved for the cluster's own components") {
				t.Errorf("namespaces[1] = %q: message %q", tt.ns, msg)
			}
		})
	}
	// The built-in list holds without any settings.
	if !ReservedNamespace("kueue-system", nil) || ReservedNamespace("team-infra", nil) {
		t.Error("the built-in list depends on the settings")
	}
}

// TestValidationTableCoversEveryField keeps the promise of a good and a bad
// value for every field: every field of contractFields has a row that
// blames it.
func TestValidationTableCoversEveryField(t *testing.T) {
	blamed := func(path string) bool {
		for _, row := range validationTable {
			for _, w := range row.want {
				if w == path || strings.HasPrefix(w, path+"[") || strings.HasPrefix(w, path+".") {
					return true
				}
			}
		}
		return false
	}
	for _, f := range contractFields {
		if !blamed(f.Path) {
			t.Errorf("no row of validationTable blames %s", f.Path)
		}
	}
	for part := range partLabels {
		if !blamed(strings.ReplaceAll(part, "[]", "[0]")) && !blamed(part) {
			t.Errorf("no row of validationTable blames %s", part)
		}
	}
}

func TestValidateEmptyContract(t *testing.T) {
	errs := Contract{}.Validate(ValidationEnv{Now: testNow})
	want := []string{
		"team", "business_purpose", "business_owner", "operations_owner", "cost_owner", "exception_owner",
		"studio_mode", "account_id", "region", "orchestrator", "cluster_name", "cluster_arn",
		"project_role_arn", "access_role_arn", "workload_role_arn", "workload_types", "data_classification",
		"scheduling.guaranteed", "scheduling.sharing", "scheduling.preemption", "signals",
		"review_cadence_days", "end_date",
	}
	var got []string
	for _, fe := range errs {
		got = append(got, fe.Field)
	}
	if !slices.Equal(got, want) {
		t.Errorf("fields = %q\nwant     %q", got, want)
	}
}

func TestValidateAsksOwnerExistsOncePerEmail(t *testing.T) {
	asked := map[string]int{}
	env := testEnv()
	env.OwnerExists = func(email string) bool { asked[email]++; return true }
	if errs := ExampleContract().Validate(env); len(errs) != 0 {
		t.Fatalf("Validate() = %v", errs)
	}
	want := map[string]int{"owner.red@example.test": 1, "member.red@example.test": 1}
	if len(asked) != len(want) || asked["owner.red@example.test"] != 1 || asked["member.red@example.test"] != 1 {
		t.Errorf("OwnerExists calls = %v, want %v", asked, want)
	}
}

func TestValidateRefusesRolesOutsideTheTeamRolePrefix(t *testing.T) {
	env := testEnv()
	env.TeamRolePrefix = "/hyperpod-teams/"
	c := ExampleContract()
	errs := c.Validate(env)
	for _, f := range []string{"project_role_arn", "access_role_arn", "workload_role_arn"} {
		if m := errs.Get(f); !strings.Contains(m, "role/hyperpod-teams/") {
			t.Errorf("%s outside the prefix: %q", f, m)
		}
	}
	c.ProjectRoleARN = "arn:aws:iam::111122223333:role/hyperpod-teams/red-project"
	c.AccessRoleARN = "arn:aws:iam::111122223333:role/hyperpod-teams/red-access"
	c.WorkloadRoleARN = "arn:aws:iam::111122223333:role/hyperpod-teams/sub/red-workload"
	if errs := c.Validate(env); len(errs) != 0 {
		t.Errorf("roles under the prefix: %v", errs)
	}
	// A name prefix on the default path.
	env.TeamRolePrefix = "/team-"
	c = ExampleContract()
	c.ProjectRoleARN = "arn:aws:iam::111122223333:role/team-red-project"
	if errs := c.Validate(env); errs.Get("project_role_arn") != "" || errs.Get("access_role_arn") == "" {
		t.Errorf("name prefix: %v", errs)
	}
}

func TestFieldErrors(t *testing.T) {
	var errs FieldErrors
	if errs.Err() != nil {
		t.Errorf("empty FieldErrors.Err() = %v, want nil", errs.Err())
	}
	errs.Add("team", "required")
	errs.Add("team", "second message is dropped")
	errs.Add("region", "unknown")
	if len(errs) != 2 || errs.Get("team") != "required" || errs.Get("region") != "unknown" || errs.Get("account_id") != "" {
		t.Errorf("errs = %#v", errs)
	}
	if got, want := errs.Error(), "contract has 2 problems: team: required; region: unknown"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	var fe FieldErrors
	if err := errs.Err(); !errors.As(err, &fe) || len(fe) != 2 {
		t.Errorf("errors.As(Err(), *FieldErrors) = %v, %v", fe, err)
	}
	one := FieldErrors{{Field: "team", Message: "required"}}
	if got := one.Error(); got != "contract has 1 problem: team: required" {
		t.Errorf("Error() = %q", got)
	}
}

func TestParseARN(t *testing.T) {
	tests := []struct {
		in      string
		want    ARN
		wantErr bool
	}{
		{in: "arn:aws:iam::111122223333:role/a/b", want: ARN{"aws", "iam", "", "111122223333", "role/a/b"}},
		{in: "arn:aws:sagemaker:us-east-1:111122223333:cluster/a1b2c3d4e5f6", want: ARN{"aws", "sagemaker", "us-east-1", "111122223333", "cluster/a1b2c3d4e5f6"}},
		{in: "arn:aws:s3:::bucket:with:colons", want: ARN{"aws", "s3", "", "", "bucket:with:colons"}},
		{in: "", wantErr: true},
		{in: "arn:aws:iam", wantErr: true},
		{in: "urn:aws:iam::1:role/x", wantErr: true},
		{in: "arn::iam::1:role/x", wantErr: true},
		{in: "arn:aws:iam::111122223333:", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseARN(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseARN(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err == nil && got.String() != tt.in {
			t.Errorf("ParseARN(%q).String() = %q", tt.in, got.String())
		}
	}
}

func TestDefaultListsAreClean(t *testing.T) {
	for name, list := range map[string][]string{"Regions": Regions} {
		seen := map[string]bool{}
		for _, v := range list {
			if v != strings.ToLower(strings.TrimSpace(v)) || seen[v] {
				t.Errorf("%s: %q is not lower-case and trimmed, or is listed twice", name, v)
			}
			seen[v] = true
		}
	}
	for _, r := range []string{"us-east-1", "eu-west-1", "ap-southeast-2"} {
		if !slices.Contains(Regions, r) {
			t.Errorf("Regions lacks %s", r)
		}
	}
}
