package slurmssm

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/hyperpod-governance/portal/internal/slurm"
)

// Controller is the slurm.Runner of a portal that reaches its HyperPod Slurm
// cluster over Session Manager: each Run goes through a Transport to the
// controller group's one running node, found with ListClusterNodes
// (ControllerTarget) at the first Run and kept. A session the service
// refuses as TargetNotConnected (the node was replaced, as HyperPod does
// with a failed instance) forgets the target, so that the next Run finds
// the new node; the failed Run itself is not retried (the provisioning job
// and the drift checker retry on their own schedules).
type Controller struct {
	Sessions   SessionAPI
	Nodes      NodesAPI
	ClusterARN string
	Group      string
	SlurmBin   string
	Timeout    time.Duration

	mu     sync.Mutex
	target string
}

var _ slurm.Runner = (*Controller)(nil)

// Run implements slurm.Runner.
func (c *Controller) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	target, err := c.resolve(ctx)
	if err != nil {
		return nil, err
	}
	out, err := Transport{API: c.Sessions, Target: target, SlurmBin: c.SlurmBin, Timeout: c.Timeout}.Run(ctx, name, args...)
	var gone *types.TargetNotConnected
	if errors.As(err, &gone) {
		c.mu.Lock()
		if c.target == target {
			c.target = ""
		}
		c.mu.Unlock()
	}
	return out, err
}

// resolve is the kept target, or the one ControllerTarget finds now.
func (c *Controller) resolve(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.target != "" {
		return c.target, nil
	}
	t, err := ControllerTarget(ctx, c.Nodes, c.ClusterARN, c.Group)
	if err != nil {
		return "", err
	}
	c.target = t
	return t, nil
}
