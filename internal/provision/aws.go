package provision

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// AWS step actions: the plan's AWS calls (awsprov.Call) made by the
// worker's AWS runner.
const (
	// ActionAWSEnsure creates or updates the call's resource.
	ActionAWSEnsure StepAction = "aws-ensure"
	// ActionAWSRemove deletes it (or keeps it, when the call says so).
	ActionAWSRemove StepAction = "aws-remove"
)

// AWSRunner makes AWS calls; *awsprov.Runner is one.
type AWSRunner interface {
	Ensure(ctx context.Context, c awsprov.Call) (awsprov.Result, error)
	Remove(ctx context.Context, c awsprov.Call) (awsprov.Result, error)
}

// AWSRecorder is a JobStore that also keeps what AWS steps did: the worker
// records each AWS step's resource (its ids and ARN, for the connection
// page and for whoever cleans up by hand), at now, when its store is one.
// Like every JobStore method, it fails when owner no longer holds the job's
// lease.
type AWSRecorder interface {
	RecordAWSResource(ctx context.Context, jobID int64, owner string, r workflow.AWSRecord, now time.Time) error
}

func awsSteps(calls []awsprov.Call, phase awsprov.Phase) []Step {
	var out []Step
	for i := range calls {
		if calls[i].Phase == phase {
			out = append(out, awsStep(ActionAWSEnsure, &calls[i]))
		}
	}
	return out
}

func awsStep(a StepAction, c *awsprov.Call) Step {
	detail := c.Summary()
	if a == ActionAWSRemove {
		detail = "remove " + detail
		if c.KeepOnRevoke {
			detail = "keep " + c.Summary() + " (settings: studio.on_revoke keep)"
		}
	}
	return Step{Action: a, AWS: c, Detail: detail}
}

// runAWS makes an AWS step's call and says what it did. Errors the call
// cannot recover from by retrying (awsprov.IsPermanent) are marked
// permanent, so the job stops with the service's message.
func (w *Worker) runAWS(ctx context.Context, st Step) (Outcome, string, *workflow.AWSRecord, error) {
	if w.AWS == nil {
		return Failed, "", nil, permanent(fmt.Errorf("provision: step %s: AWS provisioning is not configured in this portal (see --aws-mode)", st.Name()))
	}
	run := w.AWS.Ensure
	if st.Action == ActionAWSRemove {
		run = w.AWS.Remove
	}
	res, err := run(ctx, *st.AWS)
	if err != nil {
		if awsprov.IsPermanent(err) {
			err = permanent(err)
		}
		return Failed, "", nil, err
	}
	var d []string
	if res.ID != "" && res.ID != st.AWS.Name {
		d = append(d, "id "+res.ID)
	}
	if res.ARN != "" {
		d = append(d, res.ARN)
	}
	if res.Version > 0 {
		d = append(d, fmt.Sprintf("version %d", res.Version))
	}
	rec := &workflow.AWSRecord{Kind: string(st.AWS.Kind), Name: st.AWS.Name, ResourceID: res.ID, ARN: res.ARN, Version: int(res.Version), Action: string(res.Action)}
	return Outcome(res.Action), strings.Join(d, ", "), rec, nil
}

// SchedulerClasses are the cluster's priority classes as HyperPod task
// governance weights (0-100): proportional to their Kueue values, the
// highest getting 100, so that the order and the ratios survive.
func (s ClusterSettings) SchedulerClasses() []awsprov.SchedulerPriorityClass {
	s = s.withDefaults()
	var top int32
	for _, pc := range s.PriorityClasses {
		top = max(top, pc.Value)
	}
	out := make([]awsprov.SchedulerPriorityClass, len(s.PriorityClasses))
	for i, pc := range s.PriorityClasses {
		w := 0
		if top > 0 && pc.Value > 0 {
			w = max(1, int((int64(pc.Value)*100+int64(top)/2)/int64(top)))
		}
		out[i] = awsprov.SchedulerPriorityClass{Name: pc.Name, Weight: w}
	}
	return out
}

// SchedulerSpec is the cluster scheduler config the settings want: the
// priority classes as weights (SchedulerClasses) and fair share, for the
// settings' cluster. The error says why there is none (AWS off, no
// cluster_arn, invalid classes), in words for the admins' page.
func (s ClusterSettings) SchedulerSpec() (awsprov.SchedulerSpec, error) {
	a := s.AWS.WithDefaults()
	switch {
	case !a.Enabled:
		return awsprov.SchedulerSpec{}, errors.New("the AWS side of provisioning is not configured (--aws-settings), so the portal does not manage the cluster's scheduler config")
	case a.ClusterARN == "":
		return awsprov.SchedulerSpec{}, errors.New("the AWS settings name no cluster: set cluster_arn to the HyperPod cluster's ARN")
	}
	spec, err := awsprov.SchedulerSpecFor(a.ClusterARN, s.SchedulerClasses(), *a.FairShare)
	if err != nil {
		return spec, fmt.Errorf("the cluster settings give no valid scheduler config: %w", err)
	}
	return spec, nil
}
