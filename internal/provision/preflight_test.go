package provision_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// servedBy is a ClusterReader whose discovery serves the core group and the
// given group/versions.
func servedBy(gvs ...string) *provision.ClusterReader {
	var res []*metav1.APIResourceList
	for _, gv := range gvs {
		res = append(res, &metav1.APIResourceList{GroupVersion: gv})
	}
	return &provision.ClusterReader{Discovery: &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{Resources: res}}}
}

// A cluster whose Kueue is older than the plans' fails the job at once,
// before any object is applied, naming the add-on version needed; a
// cluster that serves every version of the plan runs it.
func TestWorkerPreflightRefusesUnservedAPIVersions(t *testing.T) {
	old := servedBy("v1", "rbac.authorization.k8s.io/v1", "networking.k8s.io/v1", "admissionregistration.k8s.io/v1", "kueue.x-k8s.io/v1beta1")
	b := newBed(t)
	cluster := &fakeCluster{}
	w := b.worker("w1", cluster)
	w.Preflight = old.RequireServed
	b.runOnce(w)
	j := b.jobNow(b.job.ID)
	if j.State != workflow.JobFailed || j.Attempts != 1 {
		t.Errorf("job = %s after %d attempts, want failed at once", j.State, j.Attempts)
	}
	for _, want := range []string{"does not serve kueue.x-k8s.io/v1beta2 (it serves only v1beta1)", "amazon-sagemaker-hyperpod-taskgovernance", provision.KueueAddonVersion} {
		if !strings.Contains(j.LastError, want) {
			t.Errorf("the job's error lacks %q: %s", want, j.LastError)
		}
	}
	if len(cluster.calls) != 0 {
		t.Errorf("%d objects applied before the preflight failed", len(cluster.calls))
	}
	if s := b.state(b.conn.ID); s != workflow.StateApproved {
		t.Errorf("connection %s, want back to approved", s)
	}

	b2 := newBed(t)
	w2 := b2.worker("w1", &fakeCluster{})
	w2.Preflight = servedBy("v1", "rbac.authorization.k8s.io/v1", "networking.k8s.io/v1", "admissionregistration.k8s.io/v1", "kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2").RequireServed
	b2.runOnce(w2)
	if j := b2.jobNow(b2.job.ID); j.State != workflow.JobSucceeded {
		t.Errorf("with every version served: job %s (%s)", j.State, j.LastError)
	}
}
