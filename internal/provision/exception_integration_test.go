package provision_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// excJob is a suspended Job (no pods) labelled with the team's LocalQueue
// and the Kueue priority class class.
func excJob(queue, class string) *batchv1.Job {
	suspend := true
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "exc-", Labels: map[string]string{
			provision.KueueQueueLabel: queue, provision.KueuePriorityClassLabel: class}},
		Spec: batchv1.JobSpec{Suspend: &suspend, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "train", Image: "busybox"}},
		}}},
	}
}

// waitAdmits creates the Job until the API server admits it (want) or
// refuses it under rule 2 (!want): the parameter object reaches the
// admission plugin's informer a moment after it is written.
func waitAdmits(ctx context.Context, t *testing.T, c *kubernetes.Clientset, ns, queue, class string, want bool) {
	t.Helper()
	for {
		_, err := c.BatchV1().Jobs(ns).Create(ctx, excJob(queue, class), metav1.CreateOptions{})
		switch {
		case want && err == nil:
			return
		case !want && apierrors.IsForbidden(err) && strings.Contains(err.Error(), class+" is not one the contract allows"):
			return
		case ctx.Err() != nil:
			t.Fatalf("namespace %s: a job of class %s was never %s (last: %v)", ns, class, map[bool]string{true: "admitted", false: "refused"}[want], err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestExceptionExpiresIntegration: on the test bed's API server, in deny
// mode, a job labelled with a priority class the contract does not allow
// is refused; an admin's exception for that class (recorded through the
// store, applied by the worker's reapply job as a parameter change) lets
// it in; at the end (a day on the bed's clock) the sweep records the
// revert with its reapply job; the worker applying it dies after its last
// step, before recording the job done: the cluster refuses the job again
// at once, the sweep records nothing yet, and once another worker takes
// the job over and completes it the sweep records the revert exactly once
// in the audit trail.
func TestExceptionExpiresIntegration(t *testing.T) {
	b := newWBed(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	s := b.settings
	s.AdmissionMode = provision.AdmissionDeny
	b.useSettings(s)
	b.plans = provision.PlansWithExceptions(b.plans, b.db.ExceptionsInEffect, s)
	b.setInventory(ctx, 1)
	tn := b.approve(ctx, "wexc"+wintRandom(t), b.plans)
	w := b.worker("w1")
	b.runOnce(ctx, w)
	if st := b.state(ctx, tn.conn.ID); st != workflow.StateActive {
		t.Fatalf("state after provisioning = %s", st)
	}
	b.settleQuota(ctx, tn)
	kube, err := kubernetes.NewForConfig(b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns, queue := tn.plan.Namespace, provision.LocalQueueName(tn.plan.Namespace)
	class := s.KueuePriorityClass("experiment") // not in the example contract's classes
	waitAdmits(ctx, t, kube, ns, queue, class, false)

	admin := workflow.NewPrincipal(b.admin.ID, "admin", b.admin.Email, "Admin", []workflow.Role{workflow.RoleAdmin}, nil)
	x, err := b.db.GrantException(ctx, tn.conn.ID, admin, workflow.ExceptionRequest{PriorityClass: "experiment", Days: 1, Reason: "integration test"},
		s.PriorityClassNames(), s.ExceptionMaxDaysOrDefault(), b.clock.Now())
	if err != nil || x.JobID == 0 {
		t.Fatalf("grant = %+v, %v", x, err)
	}
	b.runOnce(ctx, w)
	if j := b.job(ctx, x.JobID); j.State != workflow.JobSucceeded || j.Kind != workflow.JobReapply {
		t.Fatalf("grant's job = %s %s: %s", j.Kind, j.State, j.LastError)
	}
	if _, err := b.db.SweepExceptions(ctx, b.clock.Now()); err != nil {
		t.Fatal(err)
	}
	waitAdmits(ctx, t, kube, ns, queue, class, true)

	// The end: the sweep records the intent and queues the revert's job.
	b.clock.Add(24 * time.Hour)
	rep, err := b.db.SweepExceptions(ctx, b.clock.Now())
	if err != nil || rep.Expired != 1 {
		t.Fatalf("sweep at the end = %+v, %v", rep, err)
	}
	xs, err := b.db.Exceptions(ctx, tn.conn.ID)
	if err != nil || len(xs) != 1 || xs[0].State != workflow.ExceptionReverting || xs[0].JobID == 0 {
		t.Fatalf("after the end: %+v, %v", xs, err)
	}
	revertJob := xs[0].JobID

	// The worker dies after applying the revert's last step, before it
	// records the job done.
	plan, err := b.plans(ctx, tn.conn.ID, tn.conn.ApprovedVersion)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Exceptions) != 0 {
		t.Fatalf("the revert's plan still carries %+v", plan.Exceptions)
	}
	last := len(provision.ReapplySteps(plan)) - 1
	dying := b.worker("dying")
	dying.AfterStep = func(seq int) error {
		if seq == last {
			return errWorkerDied
		}
		return nil
	}
	if did, err := dying.RunOnce(ctx); !did || !errors.Is(err, errWorkerDied) {
		t.Fatalf("RunOnce = %v, %v; want the crash", did, err)
	}
	if j := b.job(ctx, revertJob); j.State != workflow.JobRunning || j.LeaseOwner != "dying" {
		t.Fatalf("revert's job after the crash = %+v", j)
	}
	waitAdmits(ctx, t, kube, ns, queue, class, false)
	if rep, err := b.db.SweepExceptions(ctx, b.clock.Now()); err != nil || rep.Reverted != 0 {
		t.Fatalf("sweep while the job is unfinished = %+v, %v", rep, err)
	}

	// Another worker takes the job over when the lease expires.
	b.clock.Add(time.Minute)
	b.runOnce(ctx, b.worker("next"))
	if j := b.job(ctx, revertJob); j.State != workflow.JobSucceeded || j.Attempts != 2 {
		t.Fatalf("revert's job = %+v", j)
	}
	for range 3 {
		if _, err := b.db.SweepExceptions(ctx, b.clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if xs, _ := b.db.Exceptions(ctx, tn.conn.ID); xs[0].State != workflow.ExceptionReverted {
		t.Fatalf("after the job: %+v", xs[0])
	}
	counts := map[string]int{}
	for _, a := range auditActions(b.auditOf(ctx, tn.conn.ID)) {
		counts[a]++
	}
	if counts["exception.grant"] != 1 || counts["exception.applied"] != 1 || counts["exception.expire"] != 1 || counts["exception.reverted"] != 1 {
		t.Errorf("audit counts = %v; want one each of grant, applied, expire, reverted", counts)
	}
	waitAdmits(ctx, t, kube, ns, queue, class, false)
	b.verifyAudit(ctx)
}
