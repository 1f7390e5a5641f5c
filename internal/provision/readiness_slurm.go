package provision

import (
	"context"
	"strings"
	"time"
)

// SlurmRunner runs one Slurm command: internal/slurm's Runner (Local, or
// slurmssm's Session Manager transport), restated here because provision
// imports workflow and awsprov only (imports_test.go).
type SlurmRunner interface {
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// CheckSlurmController is the readiness check of a Slurm cluster's
// transport: can the portal run Slurm's commands on the controller.
const CheckSlurmController = "Slurm controller reachable"

// slurmControllerCheck runs `scontrol ping` through r (for a HyperPod
// cluster, slurmssm's Session Manager transport): it fails when the
// command cannot be run (IAM, the node's Systems Manager connection,
// Session Manager preferences) or when slurmctld is not UP.
func slurmControllerCheck(ctx context.Context, r SlurmRunner) Check {
	ch := Check{Name: CheckSlurmController}
	ctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	out, err := r.Run(ctx, "scontrol", "ping")
	text := strings.TrimSpace(string(out))
	switch {
	case err != nil:
		ch.Status, ch.Detail = CheckFailing, sentenceOf(err.Error())
		ch.Todo = "Let the portal's role start Session Manager sessions on the controller node (portal iam-policy: ssm:StartSession, ssm:TerminateSession, ssmmessages:OpenDataChannel), check that the node is InService and connected to Systems Manager, and that Session Manager neither requires KMS encryption nor runs sessions as a user who is not a Slurm administrator."
	case !strings.Contains(text, " is UP"):
		ch.Status, ch.Detail = CheckFailing, sentenceOf("scontrol ping: "+text)
		ch.Todo = "Start slurmctld on the controller node: accounting changes and holds need it."
	default:
		ch.Status, ch.Detail = CheckOK, sentenceOf(text)
	}
	return ch
}
