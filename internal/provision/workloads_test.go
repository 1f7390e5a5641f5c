package provision

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestPositionsSayWhyUnknown: when Kueue's visibility API refuses, is not
// served or does not answer, each pending workload of that LocalQueue
// says why its position is unknown (the review found the failure silent:
// the page showed no position and no reason); the API server's own
// message (which names the portal's identity) is not repeated.
func TestPositionsSayWhyUnknown(t *testing.T) {
	gr := schema.GroupResource{Group: "visibility.kueue.x-k8s.io", Resource: "localqueues"}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"forbidden", apierrors.NewForbidden(gr, "team-lq", errorString(`User "system:serviceaccount:portal:portal" cannot get`)), "may not read Kueue's visibility API"},
		{"not served", apierrors.NewNotFound(gr, "team-lq"), "knows no LocalQueue red/team-lq, or is not served"},
		{"unavailable", apierrors.NewServiceUnavailable("the aggregated API server is down"), "did not answer (ServiceUnavailable)"},
		{"timeout", apierrors.NewTimeoutError("slow", 1), "did not answer (Timeout)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			client := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
			client.PrependReactor("get", "localqueues", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, c.err
			})
			r := &ClusterReader{Client: client}
			pending := []PendingWorkload{
				{Namespace: "red", Name: "a", Queue: "team-lq"},
				{Namespace: "red", Name: "b", Queue: "team-lq"},
				{Namespace: "red", Name: "no-queue"},
			}
			r.positions(context.Background(), pending)
			for _, p := range pending[:2] {
				if p.Position != 0 || !strings.Contains(p.PositionUnknown, c.want) {
					t.Errorf("%s: position %d, %q; want 0 and %q", p.Name, p.Position, p.PositionUnknown, c.want)
				}
				if strings.Contains(p.PositionUnknown, "serviceaccount") {
					t.Errorf("%s: the API server's message leaks: %q", p.Name, p.PositionUnknown)
				}
			}
			if pending[2].PositionUnknown != "" {
				t.Errorf("a workload naming no queue got a reason: %q", pending[2].PositionUnknown)
			}
		})
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }
