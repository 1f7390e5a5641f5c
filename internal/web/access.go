package web

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// accessView tells the team how to use an approved connection, from the
// plan of its approved version, so names always match what is provisioned.
func (s *Server) accessView(conn store.Connection, approved store.Version) *views.Access {
	built, err := s.builtPlan(conn.ID, approved)
	if err != nil {
		return nil
	}
	plan := built.plan
	c := approved.Contract
	a := &views.Access{Namespace: plan.Namespace, Live: conn.State == workflow.StateActive}
	for _, o := range plan.Objects {
		switch o.Kind {
		case "LocalQueue":
			a.LocalQueue = o.Name
		case "ResourceQuota":
			a.Quota = o.Detail
		}
	}
	var guarantee []string
	for _, g := range c.Scheduling.Guaranteed {
		guarantee = append(guarantee, g.String())
	}
	// The label names the Kueue class the cluster has ("training-priority"),
	// not the configured class ("training"): a job naming an unknown class
	// fails to submit.
	priority := s.opts.Cluster.KueuePriorityClass(s.opts.Cluster.TrainingClass(c.Scheduling.PriorityClasses))
	mode, rules := provision.ExplainAdmission(c, s.opts.Cluster, a.LocalQueue)
	a.RulesMode, a.AmendURL = mode, fmt.Sprintf("/connections/%d/edit", conn.ID)
	for _, r := range rules {
		a.Rules = append(a.Rules, views.Rule{Clause: r.Clause, Says: r.Says})
	}
	a.Commands = []views.Snippet{
		{Title: "Connect kubectl (as your team's access role)", Code: fmt.Sprintf(
			"aws eks update-kubeconfig --name %s --region %s \\\n  --role-arn %s --alias %s",
			c.EKSClusterName, c.Region, c.AccessRoleARN, plan.Namespace)},
		{Title: "See your team's work", Code: fmt.Sprintf(
			"kubectl -n %s get jobs,pytorchjobs,workloads.kueue.x-k8s.io,pods", plan.Namespace)},
	}
	// The Job snippet only where the contract approves a type that runs
	// Jobs (training, fine-tuning): the cluster refuses other kinds.
	if !slices.ContainsFunc(provision.ApprovedKinds(c.WorkloadTypes), func(k provision.WorkloadKind) bool { return k.Kind == "Job" }) {
		return a
	}
	a.Commands = append(a.Commands, views.Snippet{
		Title: "Submit a job to your queue (guaranteed: " + strings.Join(guarantee, ", ") + ")", Code: fmt.Sprintf(`kubectl -n %[1]s create -f - <<'EOF'
apiVersion: batch/v1
kind: Job
metadata:
  generateName: train-
  labels:
    kueue.x-k8s.io/queue-name: %[2]s
    kueue.x-k8s.io/priority-class: %[3]s
spec:
  suspend: true   # Kueue admits it when your quota allows
  template:
    spec:
      serviceAccountName: %[4]s
      restartPolicy: Never
      containers:
      - name: main
        image: <your training image>
        resources:
          requests: {nvidia.com/gpu: 1}
          limits: {nvidia.com/gpu: 1}
EOF`, plan.Namespace, a.LocalQueue, priority, serviceAccount(plan))})
	return a
}

func serviceAccount(p provision.Plan) string {
	for _, o := range p.Objects {
		if o.Kind == "ServiceAccount" {
			return o.Name
		}
	}
	return "default"
}
