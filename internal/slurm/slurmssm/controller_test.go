package slurmssm

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/ssm/types"
)

// nodes answers ListClusterNodes with one running controller, whose id the
// test changes, and counts the calls.
type nodes struct {
	id    string
	calls int
}

func (n *nodes) ListClusterNodes(context.Context, *sagemaker.ListClusterNodesInput, ...func(*sagemaker.Options)) (*sagemaker.ListClusterNodesOutput, error) {
	n.calls++
	return &sagemaker.ListClusterNodesOutput{ClusterNodeSummaries: []smtypes.ClusterNodeSummary{{
		InstanceGroupName: aws.String("controller"), InstanceId: aws.String(n.id),
		InstanceStatus: &smtypes.ClusterInstanceStatusDetails{Status: smtypes.ClusterInstanceStatusRunning},
	}}}, nil
}

// refusing refuses every session as the service does for a node that is
// not connected, and records the targets asked for.
type refusing struct{ targets []string }

func (r *refusing) StartSession(_ context.Context, in *ssm.StartSessionInput, _ ...func(*ssm.Options)) (*ssm.StartSessionOutput, error) {
	r.targets = append(r.targets, aws.ToString(in.Target))
	return nil, &types.TargetNotConnected{Message: aws.String(aws.ToString(in.Target) + " is not connected.")}
}

func (r *refusing) TerminateSession(context.Context, *ssm.TerminateSessionInput, ...func(*ssm.Options)) (*ssm.TerminateSessionOutput, error) {
	return &ssm.TerminateSessionOutput{}, nil
}

// TestControllerFindsTheNodeAgain: the target is looked up once and kept;
// a session refused as TargetNotConnected (the node replaced) forgets it,
// and the next Run goes to the node ListClusterNodes names then.
func TestControllerFindsTheNodeAgain(t *testing.T) {
	n := &nodes{id: "i-0123456789abcdef0"}
	s := &refusing{}
	c := &Controller{Sessions: s, Nodes: n, ClusterARN: "arn:aws:sagemaker:us-east-1:111122223333:cluster/a1b2c3d4e5f6", Group: "controller"}
	if _, err := c.Run(t.Context(), "sinfo"); err == nil || !strings.Contains(err.Error(), "TargetNotConnected") {
		t.Fatalf("Run = %v, want the service's TargetNotConnected", err)
	}
	n.id = "i-0fedcba9876543210"
	if _, err := c.Run(t.Context(), "sinfo"); err == nil {
		t.Fatal("Run to a refusing service succeeded")
	}
	want := []string{"sagemaker-cluster:a1b2c3d4e5f6_controller-i-0123456789abcdef0", "sagemaker-cluster:a1b2c3d4e5f6_controller-i-0fedcba9876543210"}
	if strings.Join(s.targets, " ") != strings.Join(want, " ") || n.calls != 2 {
		t.Errorf("sessions to %v after %d lookups; want %v after 2", s.targets, n.calls, want)
	}
	// A target kept (no refusal since) is not looked up again.
	c.target = want[1]
	if got, err := c.resolve(t.Context()); err != nil || got != want[1] || n.calls != 2 {
		t.Errorf("resolve = %q, %v after %d lookups; want the kept target", got, err, n.calls)
	}
}
