package web

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestJobErrorsAreReducedForNonAdmins: a job that failed on a Kubernetes
// or AWS error shows owners and members only the step and the kind of
// failure, on the connection page, the progress fragment and the page's
// history; admins keep the full text.
func TestJobErrorsAreReducedForNonAdmins(t *testing.T) {
	for _, tc := range []struct {
		name, errText, kind string
		secrets             []string
	}{
		{"client-go forbidden",
			`namespaces "hyperpod-ns-red" is forbidden: User "system:serviceaccount:portal:portal-sa" cannot create resource "namespaces" in API group "" at the cluster scope`,
			"permission denied", []string{"system:serviceaccount", "portal-sa", "API group"}},
		{"AWS access denied",
			`operation error SageMaker: CreateDomain, https response error StatusCode: 400, RequestID: 0f3c9a1e-5b7d-4c11-9e2a-7f1d2c3b4a59, api error AccessDeniedException: User: arn:aws:sts::123456789012:assumed-role/portal-provisioner/i-0abc is not authorized to perform: sagemaker:CreateDomain`,
			"permission denied", []string{"123456789012", "RequestID", "assumed-role", "portal-provisioner"}},
		{"AWS validation",
			`operation error IAM: CreateRole, https response error StatusCode: 400, RequestID: 9d2f, api error ValidationError: 1 validation error detected: Value at 'roleName' failed to satisfy constraint`,
			"the request was refused as invalid", []string{"roleName", "RequestID", "CreateRole"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, false)
			ctx := context.Background()
			owner, member, admin := h.signIn("owner.red"), h.signIn("member.red"), h.signIn("admin")
			approvedConnection(t, h, owner, admin)
			now := time.Now()
			job, ok, err := h.db.ClaimJob(ctx, "w1", now, time.Minute)
			if err != nil || !ok {
				t.Fatalf("claim: %v %v", ok, err)
			}
			if err := h.db.StepFailed(ctx, job.ID, "w1", 0, "team-namespace", tc.errText, now); err != nil {
				t.Fatal(err)
			}
			if err := h.db.FailJob(ctx, job.ID, "w1", "step 1 (team-namespace): "+tc.errText, now); err != nil {
				t.Fatal(err)
			}
			for _, path := range []string{"/connections/1", "/connections/1/progress"} {
				for name, s := range map[string]session{"owner.red": owner, "member.red": member} {
					_, body := h.get(s.c, path)
					if !strings.Contains(body, tc.kind) || !strings.Contains(body, "team-namespace") {
						t.Errorf("%s %s: no step and kind (%q) of the failure", name, path, tc.kind)
					}
					for _, sec := range tc.secrets {
						if strings.Contains(body, sec) {
							t.Errorf("%s %s shows the error's %q", name, path, sec)
						}
					}
				}
				_, body := h.get(admin.c, path)
				if !strings.Contains(body, tc.secrets[0]) {
					t.Errorf("admin %s: the full error is missing", path)
				}
			}
		})
	}
}

func TestFailureKind(t *testing.T) {
	for text, want := range map[string]string{
		`Get "https://10.0.0.1/api": dial tcp 10.0.0.1:443: i/o timeout`:                      "the service could not be reached or failed",
		`context deadline exceeded`:                                                           "timed out",
		`api error ThrottlingException: Rate exceeded`:                                        "rate limited by the service",
		`api error ResourceNotFound: Domain d-123 not found`:                                  "a resource it needs was not found",
		`Operation cannot be fulfilled on clusterqueues "x": the object has been modified`:    "conflict with an existing resource",
		`api error ResourceLimitExceeded: The account-level service limit 'x' is 2 Instances`: "a service limit was reached",
		`something odd`: "an error",
	} {
		if got := failureKind(text); got != want {
			t.Errorf("failureKind(%q) = %q, want %q", text, got, want)
		}
	}
}
