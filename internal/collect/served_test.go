package collect

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/hyperpod-governance/portal/internal/provision"
)

// On a cluster that does not serve Kueue v1beta2 the collector says so at
// once, before reading anything, instead of its informers timing out as
// "did not sync". (The served case is every integration test's Start on
// the test bed.)
func TestStartNeedsKueueV1beta2Served(t *testing.T) {
	for _, tc := range []struct {
		served []string
		want   string
	}{
		{[]string{"v1", "kueue.x-k8s.io/v1beta1"}, "it serves only v1beta1"},
		{[]string{"v1"}, "it serves no version of it"},
	} {
		kube := fake.NewClientset()
		disc := kube.Discovery().(*fakediscovery.FakeDiscovery)
		for _, gv := range tc.served {
			disc.Resources = append(disc.Resources, &metav1.APIResourceList{GroupVersion: gv})
		}
		c := &Collector{Kube: kube, Cluster: "shared"} // no store: nothing may be read
		_, err := c.Start(t.Context(), c.now())
		if err == nil {
			t.Fatalf("served %v: Start succeeded", tc.served)
		}
		for _, want := range []string{"Kueue v1beta2 is not served", tc.want, provision.KueueAddonVersion} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("served %v: %v lacks %q", tc.served, err, want)
			}
		}
	}
}
