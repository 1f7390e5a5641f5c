package web

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// WorkloadReader reads a team's waiting Kueue Workloads from the cluster
// (provision.ClusterReader); nil without a cluster.
type WorkloadReader interface {
	PendingWorkloads(ctx context.Context, namespaces []string) ([]provision.PendingWorkload, error)
}

var _ WorkloadReader = (*provision.ClusterReader)(nil)

// submitPage is the member's page: for each live connection of the team,
// where its work runs (namespace, queue, the priority classes it may use)
// and how to submit (kubectl and the HyperPod CLI), then the team's
// waiting workloads with the reason Kueue gives, read live.
func (s *Server) submitPage(c echo.Context) error {
	team := c.Param("team")
	if _, err := authorize(c, workflow.ActionViewTeam, workflow.Object{Team: team}); err != nil {
		return err
	}
	ctx := c.Request().Context()
	rows, _, err := s.opts.DB.ListConnections(ctx, store.ListFilter{Team: team}, 0, pageSize)
	if err != nil {
		return err
	}
	v := views.Submit{Team: team, SignalsURL: "/teams/" + team + "/signals"}
	var namespaces []string
	ids := []int64{} // of v.Connections, in order (never nil: nil asks for every connection's)
	for _, conn := range rows {
		if !conn.State.Live() || conn.ApprovedVersion == 0 {
			continue
		}
		approved, err := s.opts.DB.Version(ctx, conn.ID, conn.ApprovedVersion)
		if err != nil {
			return err
		}
		sc, ns, ok := s.submitConn(conn, approved)
		if !ok {
			continue
		}
		v.Connections = append(v.Connections, sc)
		ids = append(ids, conn.ID)
		for _, n := range ns {
			if !slices.Contains(namespaces, n) {
				namespaces = append(namespaces, n)
			}
		}
	}
	// The exceptions in effect of every connection shown, in one query.
	xs, err := s.opts.DB.ExceptionsInEffect(ctx, ids)
	if err != nil {
		return err
	}
	for i, id := range ids {
		v.Connections[i].Exceptions = exceptionRows(xs[id], s.opts.Cluster.KueuePriorityClass)
	}
	switch {
	case s.opts.Workloads == nil:
		v.PendingState = views.PendingNoCluster
	case len(namespaces) == 0:
		v.PendingState = views.PendingNoNamespace
	default:
		markLive(ctx) // the cluster, now
		pending, err := s.opts.Workloads.PendingWorkloads(ctx, namespaces)
		if err != nil {
			// The cluster's error may name internals; log it, say it simply.
			s.opts.Logger.ErrorContext(ctx, "read pending workloads", "team", team, "err", err)
			v.PendingState = views.PendingReadFailed
			break
		}
		v.PendingState = views.PendingRead
		now := s.opts.Now()
		for _, p := range pending {
			r := views.PendingRow{Namespace: p.Namespace, Name: p.Name, Queue: p.Queue, PriorityClass: p.PriorityClass,
				Waiting: age(now.Sub(p.Created)), Reason: p.Reason, Message: p.Message}
			r.QueueWaiting, r.PositionUnknown = queuePlace(p.Position, p.QueueWaiting), p.PositionUnknown
			if p.Condition == "" {
				r.Reason, r.Message = "Not yet considered", "Kueue has not written a condition on this workload yet (its queue may not exist, or Kueue has not run)."
			}
			v.Pending = append(v.Pending, r)
		}
	}
	return render(c, http.StatusOK, views.SubmitPage(s.page(c, "Submit work · team "+team), v))
}

// submitConn is one live connection's part of the member's page, from the
// plan of its approved version, so the names match what is provisioned;
// it also returns the namespaces to read workloads from.
func (s *Server) submitConn(conn store.Connection, approved store.Version) (views.SubmitConn, []string, bool) {
	a := s.accessView(conn, approved)
	if a == nil {
		return views.SubmitConn{}, nil, false
	}
	c := approved.Contract
	sc := views.SubmitConn{ID: conn.ID, Href: fmt.Sprintf("/connections/%d", conn.ID), Cluster: c.ClusterName, Access: *a}
	for _, pc := range c.Scheduling.PriorityClasses {
		sc.PriorityClasses = append(sc.PriorityClasses, views.Choice{Value: s.opts.Cluster.KueuePriorityClass(pc), Label: pc})
	}
	priority := s.opts.Cluster.KueuePriorityClass(s.opts.Cluster.TrainingClass(c.Scheduling.PriorityClasses))
	instance := "ml.p5.48xlarge"
	if len(c.Scheduling.Guaranteed) > 0 {
		instance = c.Scheduling.Guaranteed[0].InstanceType
	}
	// What the contract lets the team run, a snippet per approved kind.
	// The HyperPod CLI's PyTorch job (`hyp create hyp-pytorch-job`) takes
	// --queue-name and --priority, which its template turns into the labels
	// kueue.x-k8s.io/queue-name and kueue.x-k8s.io/priority-class verbatim
	// (aws/sagemaker-hyperpod-cli README.md "Create Pytorch job through
	// create command"; hyperpod-pytorch-job-template/.../v1_1/model.py,
	// `{"kueue.x-k8s.io/priority-class": self.priority}`), so --priority
	// takes the Kueue class name ("training-priority").
	sc.Runs = runTypes(c, runTarget{namespace: a.Namespace, queue: a.LocalQueue, priority: priority, instance: instance})
	return sc, []string{a.Namespace}, true
}

// queuePlace says where a workload waits, in Kueue's figures: its
// position in the LocalQueue (from 1) of the queue's pending workloads, or
// what of the two is known.
func queuePlace(position, waiting int32) string {
	switch {
	case position > 0 && waiting > 0:
		return fmt.Sprintf("%d of %d waiting in this queue", position, waiting)
	case position > 0:
		return fmt.Sprintf("number %d in this queue", position)
	case waiting > 0:
		return fmt.Sprintf("%d waiting in this queue (position unknown)", waiting)
	}
	return ""
}
