package web

import (
	"fmt"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Job failures are stored with the full text of the Kubernetes (client-go)
// or AWS error: resource names, ARNs, account ids, request ids, RBAC
// subjects. Admins see it; owners and members see only the step and the
// kind of failure (publicFailure).

// seesFullErrors reports whether the signed-in user may read raw error
// text: admins only.
func seesFullErrors(c echo.Context) bool {
	p, ok := principal(c)
	return ok && workflow.Decide(p, workflow.ActionViewFullErrors, workflow.Object{}).Allowed
}

// failureKinds classify an error's text, first match wins. Network
// failures come before "timeout" and "not found" ("i/o timeout", "no such
// host"). The phrases are those of client-go's StatusError messages and
// of the AWS SDK's "api error <Code>: ..." text.
var failureKinds = []struct {
	needles []string
	kind    string
}{
	{[]string{"accessdenied", "access denied", "forbidden", "unauthorized", "not authorized", "unrecognizedclient", "expiredtoken", "invalidclienttokenid"}, "permission denied"},
	{[]string{"throttl", "too many requests", "rate exceeded", "toomanyrequests"}, "rate limited by the service"},
	{[]string{"quotaexceeded", "limitexceeded", "exceeded quota", "exceeds quota"}, "a service limit was reached"},
	{[]string{"connection refused", "no such host", "i/o timeout", "connection reset", "eof", "tls handshake", "serviceunavailable", "service unavailable", "internalserver", "internal error"}, "the service could not be reached or failed"},
	{[]string{"deadline exceeded", "timeout", "timed out"}, "timed out"},
	{[]string{"already exists", "conflict", "resourceinuse", "has been modified", "alreadyexists"}, "conflict with an existing resource"},
	{[]string{"notfound", "not found", "does not exist", "nosuch"}, "a resource it needs was not found"},
	{[]string{"validation", "invalid", "bad request", "badrequest"}, "the request was refused as invalid"},
	{[]string{"the worker stopped", "interrupted"}, "the worker was interrupted"},
}

// failureKind names the kind of failure errText describes, in words that
// carry none of its details.
func failureKind(errText string) string {
	t := strings.ToLower(errText)
	for _, k := range failureKinds {
		for _, n := range k.needles {
			if strings.Contains(t, n) {
				return k.kind
			}
		}
	}
	return "an error"
}

// publicFailure is what owners and members read instead of errText: the
// step (when known) and the kind of failure.
func publicFailure(step, errText string) string {
	where := "The job"
	if step != "" {
		where = fmt.Sprintf("The step %q", step)
	}
	return where + " failed: " + failureKind(errText) + ". The platform team sees the full error."
}
