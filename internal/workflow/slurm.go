package workflow

// SlurmStep is one thing a Slurm connection needs on the cluster or in IAM
// that the portal does not do.
type SlurmStep struct {
	What    string // what it is for
	Command string // how an operator does it by hand, with the contract's values
}

// SlurmManualSteps lists, for a Slurm contract, what the portal does not
// set up itself (the provisioning job makes the team's account, QoS and
// member associations: internal/provision SlurmPlan), with the contract's
// values filled in. Sources:
//   - SageMaker HyperPod in Studio with Slurm: tag the IAM role with
//     SSMSessionRunAs = the OS user set up on the Slurm cluster, and turn on
//     Session Manager's Run As support (account-wide); task visibility then
//     follows Slurm's own settings
//     (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-studio-setup-slurm.html,
//     https://docs.aws.amazon.com/systems-manager/latest/userguide/session-preferences-run-as.html).
//   - PrivateData=jobs in slurm.conf hides other users' jobs from squeue
//     and scontrol, in slurmdbd.conf their records from sacct
//     (https://slurm.schedmd.com/slurm.conf.html,
//     https://slurm.schedmd.com/slurmdbd.conf.html); the readiness page
//     checks both (internal/provision slurmVisibilityCheck).
func SlurmManualSteps(c Contract) []SlurmStep {
	return []SlurmStep{
		{"Session Manager Run As: the team's roles start sessions as the member's OS user (the one the cluster settings' slurm.user_template names; Run As support turned on in Session Manager preferences)",
			"tag " + c.ProjectRoleARN + " and " + c.AccessRoleARN + " with SSMSessionRunAs=<os-user>"},
		{"task visibility: team members see only their own jobs", "PrivateData=jobs in slurm.conf and slurmdbd.conf (the readiness page checks both)"},
	}
}
