package provision

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// metricsSample is an API server's exposition of the check metric: the
// portal's policy under two bindings and actions, an evaluation error,
// another policy, a label value with escapes, and the lines around it.
const metricsSample = `# HELP apiserver_validating_admission_policy_check_total [BETA] Validation admission policy check total, labeled by policy and further identified by binding and enforcement action taken.
# TYPE apiserver_validating_admission_policy_check_total counter
apiserver_validating_admission_policy_check_total{enforcement_action="warn",error_type="no_error",policy="hyperpod-portal-contract",policy_binding="hyperpod-portal-contract-warn"} 7
apiserver_validating_admission_policy_check_total{enforcement_action="deny",error_type="no_error",policy="hyperpod-portal-contract",policy_binding="hyperpod-portal-contract-deny"} 3
apiserver_validating_admission_policy_check_total{enforcement_action="deny",error_type="invalid_error",policy="hyperpod-portal-contract",policy_binding="hyperpod-portal-contract-deny"} 2
apiserver_validating_admission_policy_check_total{enforcement_action="audit",error_type="no_error",policy="hyperpod-portal-contract",policy_binding="hyperpod-portal-contract-audit"} 1
apiserver_validating_admission_policy_check_total{enforcement_action="warn",error_type="no_error",policy="other \"quoted\" policy",policy_binding="x"} 100
apiserver_validating_admission_policy_check_total{enforcement_action="deny",error_type="no_error",policy="hyperpod-portal-chart",policy_binding="y"} 50
apiserver_validating_admission_policy_check_duration_seconds_count{enforcement_action="warn",error_type="no_error",policy="hyperpod-portal-contract",policy_binding="hyperpod-portal-contract-warn"} 7
apiserver_request_total{code="200"} 1e+06
`

// The counts are the portal's policy's failed validations by action, the
// other policies' and the other metrics' samples left out (the oracle: the
// sample's lines, summed by hand).
func TestParseAdmissionCounts(t *testing.T) {
	got, err := parseAdmissionCounts(metricsSample, NameAdmissionPolicy)
	if err != nil {
		t.Fatal(err)
	}
	if want := (AdmissionCounts{Warn: 7, Deny: 5, Audit: 1, Errors: 2}); got != want {
		t.Errorf("counts %+v, want %+v", got, want)
	}
	if got, _ := parseAdmissionCounts(metricsSample, `other "quoted" policy`); got.Warn != 100 {
		t.Errorf("escaped label value: %+v", got)
	}
	if _, err := parseAdmissionCounts(metricAdmissionCheck+`{policy="x} 1`, "x"); err == nil {
		t.Error("an unterminated label parsed")
	}
}

// fakeAPIServer serves Kueue's ConfigMap (when config is not "") and
// /metrics (with status metricsCode), as the API server does.
func fakeAPIServer(t *testing.T, config string, metricsCode int) *ClusterReader {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics":
			if metricsCode != http.StatusOK {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(metricsCode)
				_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": metricsCode,
					"message": `forbidden: User "portal" cannot get path "/metrics"`})
				return
			}
			_, _ = w.Write([]byte(metricsSample))
		case "/api/v1/namespaces/" + KueueConfigNamespace + "/configmaps/" + KueueConfigMapName:
			w.Header().Set("Content-Type", "application/json")
			if config == "" {
				w.WriteHeader(http.StatusNotFound)
				_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404})
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"kind": "ConfigMap", "apiVersion": "v1",
				"metadata": map[string]any{"name": KueueConfigMapName, "namespace": KueueConfigNamespace},
				"data":     map[string]any{KueueConfigKey: config}})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	r, err := NewClusterReader(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// What Kueue's configuration means for rule 1: with jobs without a queue
// name unmanaged (set so, or Kueue's default when the ConfigMap is not
// there), rule 1 is what keeps them in the queue, so anything but deny
// mode is a warning; with them managed, the check is fine in any mode.
func TestKueueConfigCheck(t *testing.T) {
	ctx := t.Context()
	managed := "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nmanageJobsWithoutQueueName: true\n"
	unmanaged := "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nmanageJobsWithoutQueueName: false\n"
	for _, tc := range []struct {
		name, config string
		mode         AdmissionMode
		status       CheckStatus
		says         []string
	}{
		{"managed, warn", managed, AdmissionWarn, CheckOK, []string{"manageJobsWithoutQueueName true", "suspends a job without kueue.x-k8s.io/queue-name", "Kueue's default managedJobsNamespaceSelector"}},
		{"managed with a selector", managed + "managedJobsNamespaceSelector:\n  matchLabels:\n    team: red\n", AdmissionWarn, CheckOK, []string{"team=red"}},
		{"unmanaged, warn", unmanaged, AdmissionWarn, CheckWarning, []string{"leaves manageJobsWithoutQueueName false", "start at once", "Rule 1", "in warn mode it only warns"}},
		{"unmanaged, audit", unmanaged, AdmissionAudit, CheckWarning, []string{"audit log"}},
		{"unmanaged, deny", unmanaged, AdmissionDeny, CheckOK, []string{"in deny mode it refuses them"}},
		{"not there", "", AdmissionWarn, CheckWarning, []string{"not at kueue-system/kueue-manager-config", "default is assumed"}},
		{"not there, deny", "", AdmissionDeny, CheckOK, []string{"default is assumed", "in deny mode it refuses them"}},
		{"unreadable", "manageJobsWithoutQueueName: [", AdmissionWarn, CheckUnknown, []string{"kueue-manager-config"}},
	} {
		c := kueueConfigCheck(ctx, ReadinessSources{Kube: fakeAPIServer(t, tc.config, http.StatusOK), AdmissionMode: tc.mode})
		if c.Status != tc.status {
			t.Errorf("%s: status %s, want %s: %s", tc.name, c.Status, tc.status, c.Detail)
		}
		for _, s := range tc.says {
			if !strings.Contains(c.Detail, s) {
				t.Errorf("%s: the detail does not say %q: %s", tc.name, s, c.Detail)
			}
		}
		if (c.Status == CheckWarning) != (c.Todo != "") {
			t.Errorf("%s: status %s with todo %q", tc.name, c.Status, c.Todo)
		}
	}
	if c := kueueConfigCheck(ctx, ReadinessSources{}); c.Status != CheckUnknown {
		t.Errorf("no cluster: %+v", c)
	}
}

// The counts check reads /metrics through the portal's client and shows
// the mode and the counts; the readiness carries them for the page. A
// forbidden read says what to grant.
func TestAdmissionCountsCheck(t *testing.T) {
	ctx := t.Context()
	r := CheckReadiness(ctx, ReadinessSources{Kube: fakeAPIServer(t, "", http.StatusOK), AdmissionMode: AdmissionDeny})
	c, ok := r.Check(CheckAdmissionCounts)
	if !ok {
		t.Fatal("no counts check")
	}
	if r.AdmissionMode != AdmissionDeny || r.AdmissionCounts == nil || *r.AdmissionCounts != (AdmissionCounts{Warn: 7, Deny: 5, Audit: 1, Errors: 2}) {
		t.Errorf("readiness mode %s, counts %+v", r.AdmissionMode, r.AdmissionCounts)
	}
	for _, s := range []string{"Mode deny", "7 warnings, 5 denials and 1 audit records", "2 of them are expressions that failed"} {
		if !strings.Contains(c.Detail, s) {
			t.Errorf("the detail does not say %q: %s", s, c.Detail)
		}
	}
	if c.Status != CheckWarning || c.Todo == "" {
		t.Errorf("evaluation errors: %+v, want a warning with a todo", c)
	}

	r = CheckReadiness(ctx, ReadinessSources{Kube: fakeAPIServer(t, "", http.StatusForbidden)})
	c, _ = r.Check(CheckAdmissionCounts)
	if c.Status != CheckUnknown || !strings.Contains(c.Todo, "/metrics") || r.AdmissionCounts != nil || r.AdmissionMode != AdmissionWarn {
		t.Errorf("forbidden: %+v, counts %+v, mode %s", c, r.AdmissionCounts, r.AdmissionMode)
	}
	if c := admissionCountsCheck(ctx, ReadinessSources{}, &Readiness{}); c.Status != CheckUnknown {
		t.Errorf("no cluster: %+v", c)
	}
}
