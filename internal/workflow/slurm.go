package workflow

import (
	"fmt"
	"strings"
)

// SlurmNotSupported is why a Slurm contract cannot be approved: the portal
// sets up nothing on a Slurm cluster (provision builds no plan for it), so
// an approval would record a connection that nobody creates and a job that
// can only fail. Approval is refused until the Slurm side exists; the admin
// can request changes or reject.
const SlurmNotSupported = "the portal does not set up Slurm connections yet: it would create no Slurm account, user association, limit or Session Manager tag, so a Slurm contract cannot be approved here"

// SlurmStep is one thing a Slurm connection needs on the cluster or in IAM
// that the portal does not do.
type SlurmStep struct {
	What    string // what it is for
	Command string // how an operator does it by hand, with the contract's values
}

// SlurmManualSteps lists, for a Slurm contract, what setting it up by hand
// takes, with the contract's scope filled in. Sources:
//   - Slurm accounting: an association is (cluster, account, user,
//     partition) with its QOS and limits such as GrpTRES; sacctmgr adds and
//     modifies them (https://slurm.schedmd.com/sacctmgr.html,
//     https://slurm.schedmd.com/accounting.html). PrivateData in
//     slurm.conf hides other users' jobs (https://slurm.schedmd.com/slurm.conf.html).
//   - SageMaker HyperPod in Studio with Slurm: tag the IAM role with
//     SSMSessionRunAs = the OS user set up on the Slurm cluster, and turn on
//     Session Manager's Run As support (account-wide); task visibility then
//     follows Slurm's own settings
//     (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-studio-setup-slurm.html,
//     https://docs.aws.amazon.com/systems-manager/latest/userguide/session-preferences-run-as.html).
func SlurmManualSteps(c Contract) []SlurmStep {
	s := c.SlurmScope
	nodes := 0
	var guaranteed []string
	for _, g := range c.Scheduling.Guaranteed {
		nodes += g.Count
		guaranteed = append(guaranteed, g.String())
	}
	limit := "the account's guarantee"
	if nodes > 0 {
		limit = fmt.Sprintf("the guarantee (%s)", strings.Join(guaranteed, ", "))
	}
	return []SlurmStep{
		{"the team's Slurm account", fmt.Sprintf("sacctmgr add account %s", s.Account)},
		{"a user association per team member's OS user, in the contract's partition and QoS",
			fmt.Sprintf("sacctmgr add user <os-user> Account=%s Partition=%s QOS=%s DefaultQOS=%s", s.Account, s.Partition, s.QoS, s.QoS)},
		{"partition and QoS limits matching " + limit,
			fmt.Sprintf("sacctmgr modify account where name=%s set GrpTRES=node=%d (and the partition %s open to the account, QoS %s existing with its limits)", s.Account, nodes, s.Partition, s.QoS)},
		{"Session Manager Run As: the team's roles start sessions as the team's OS user (Run As support turned on in Session Manager preferences)",
			fmt.Sprintf("tag %s and %s with SSMSessionRunAs=<os-user>", c.ProjectRoleARN, c.AccessRoleARN)},
		{"task visibility: team members see only their own jobs", "PrivateData=jobs in slurm.conf"},
	}
}
