package workflow

// ExampleContract is a complete, valid contract for team red on the shared
// EKS cluster, already normalized: the form's example hints, and a starting
// point for tests in every package. Its owners are the dev identity
// provider's demo users. It has decommission criteria instead of an end date
// so that it stays valid whatever the date; set EndDate where a test needs
// one.
func ExampleContract() Contract {
	return Contract{
		Team:            "red",
		BusinessPurpose: "Fine-tune and serve the red team's product-search ranking models on shared GPUs instead of a cluster of our own.",
		BusinessOwner:   "owner.red@example.test",
		OperationsOwner: "member.red@example.test",
		CostOwner:       "owner.red@example.test",
		ExceptionOwner:  "owner.red@example.test",

		StudioMode: StudioTeamDomain,

		AccountID:      "111122223333",
		Region:         "us-east-1",
		Orchestrator:   OrchestratorEKS,
		ClusterName:    "shared-hp",
		ClusterARN:     "arn:aws:sagemaker:us-east-1:111122223333:cluster/a1b2c3d4e5f6",
		EKSClusterName: "shared-hp-eks",

		ProjectRoleARN:  "arn:aws:iam::111122223333:role/red-project",
		AccessRoleARN:   "arn:aws:iam::111122223333:role/red-access",
		WorkloadRoleARN: "arn:aws:iam::111122223333:role/red-workload",

		WorkloadTypes:      []WorkloadType{WorkloadFineTuning, WorkloadInference, WorkloadTraining},
		DataClassification: DataInternal,

		Namespaces: []string{"hyperpod-ns-red"},

		Scheduling: Scheduling{
			Guaranteed:         []Capacity{{InstanceType: "ml.p5.48xlarge", Count: 2}},
			Sharing:            SharingLendAndBorrow,
			BorrowLimitPercent: 50,
			Preemption:         PreemptLowerPriority,
			FairShareWeight:    50,
			PriorityClasses:    []string{"inference", "training"},
		},

		Signals: []Signal{
			{
				Name:     "Accelerator utilization",
				Owner:    "member.red@example.test",
				Response: "Below 40% for 7 days: propose a smaller guarantee at the next review.",
			},
			{
				Name:     "Pending and preempted tasks",
				Owner:    "member.red@example.test",
				Response: "Tasks pending for more than 4 hours: ask the exception owner for a temporary priority change.",
			},
		},
		ReviewCadenceDays:    90,
		DecommissionCriteria: "When the ranking models move to the managed inference platform, or after 30 days without a task.",

		EgressAllowances: []Egress{
			{
				Destination: "s3.us-east-1.amazonaws.com",
				Ports:       []int{443},
				Reason:      "Training data and model artifacts in the team's S3 buckets.",
			},
		},
	}
}

// ExampleContractFor is ExampleContract for another team: its own name,
// namespace and roles (a team's roles are its own), the same cluster.
func ExampleContractFor(team string) Contract {
	c := ExampleContract()
	if team == "" || team == c.Team {
		return c
	}
	c.Team, c.Namespaces = team, []string{"hyperpod-ns-" + team}
	c.ProjectRoleARN = "arn:aws:iam::111122223333:role/" + team + "-project"
	c.AccessRoleARN = "arn:aws:iam::111122223333:role/" + team + "-access"
	c.WorkloadRoleARN = "arn:aws:iam::111122223333:role/" + team + "-workload"
	return c
}
