// Package awstest runs strict, stateful local endpoints for the AWS services
// the provisioner calls, so that the real aws-sdk-go-v2 clients can be tested
// end to end on a machine without AWS: SageMaker, ssoadmin and identitystore
// speak awsJson1_1 (POST /, X-Amz-Target), EKS and DataZone restJson1 (REST
// paths, errors named by the X-Amzn-ErrorType header), IAM awsQuery (a
// form-encoded POST, XML answers; iam.go), EC2 the EC2 query protocol (the
// same, with EC2's own XML error document; ec2.go), SSM awsJson1_1 for
// StartSession and TerminateSession with Session Manager's WebSocket data
// channel on a second server (ssm.go), which runs the session's command on
// the test bed's Slurm.
//
// Each endpoint checks what it receives the way the service does: the request
// is signed, required members are present, enum members hold one of the
// service's values (taken from the SDK's own types), names match the
// service's patterns, unknown members are refused. It keeps what was created,
// answers with the service's error codes (ResourceNotFound(Exception),
// ConflictException, ValidationException, ThrottlingException,
// AccessDeniedException), counts every call and every resource it creates,
// and injects throttling, 5xx and access denials on demand.
//
// It is test code: only tests (and the e2e run) import it; the portal binary
// never does.
package awstest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/hyperpod-governance/portal/internal/provision/awsprov/sdkhttp"
)

// Test credentials: every endpoint refuses a request not signed with
// AccessKeyID.
const (
	AccessKeyID     = "AKIDPORTALTEST"
	SecretAccessKey = "portal-test-secret"
	Region          = "us-east-1"
	// Account is the account id in the ARNs the endpoints make up.
	Account = "111122223333"
)

// Error is an error answer of a service.
type Error struct {
	Status  int
	Code    string
	Message string
	// Fields are further members of an awsJson1_1 error body, such as an
	// identity store's ResourceType.
	Fields map[string]any
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// Errorf is an error answer with the given HTTP status and code.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// BadRequest is an HTTP 400 error answer.
func BadRequest(code, format string, args ...any) *Error {
	return Errorf(http.StatusBadRequest, code, format, args...)
}

// Validation is a ValidationException.
func Validation(format string, args ...any) *Error {
	return BadRequest("ValidationException", format, args...)
}

// Enum reports whether v is absent or one of values.
func Enum[T ~string](v *string, values []T) bool {
	return v == nil || slices.Contains(values, T(*v))
}

// Core is what every endpoint shares: the lock over its state, call counts,
// fault injection and the httptest server. Service types embed it; every
// exported method locks.
type Core struct {
	tb     testing.TB
	name   string
	srv    *httptest.Server
	json11 bool

	mu sync.Mutex
	// Calls by operation (rejected calls included), and by event: services
	// count "created:<kind>", "updated:<kind>" and "deleted:<kind>".
	calls        map[string]int
	throttleNext int
	failNext     int
	deny         map[string]int // operation -> how many more calls to deny
	log          []string
}

func newCore(tb testing.TB, name string, json11 bool) *Core {
	return &Core{tb: tb, name: name, json11: json11, calls: map[string]int{}, deny: map[string]int{}}
}

// URL is the endpoint's base URL, for the client's BaseEndpoint.
func (c *Core) URL() string { return c.srv.URL }

// Count is how many calls of op were received, or how many times an event
// ("created:<kind>", ...) happened.
func (c *Core) Count(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[op]
}

// Counts is a copy of all counts.
func (c *Core) Counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.calls))
	for k, v := range c.calls {
		out[k] = v
	}
	return out
}

// Throttle answers the next n calls (of any operation) with ThrottlingException.
func (c *Core) Throttle(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.throttleNext = n
}

// Fail answers the next n calls with HTTP 500.
func (c *Core) Fail(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failNext = n
}

// Deny answers the next n calls of op with AccessDeniedException (n < 0:
// every call).
func (c *Core) Deny(op string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deny[op] = n
}

// Log is the operations received, in order, with their outcome.
func (c *Core) Log() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.log)
}

// event counts a created/updated/deleted resource; the caller holds mu.
func (c *Core) event(what, kind string) { c.calls[what+":"+kind]++ }

// handler answers one operation with a response body, or an error.
type handler func(r *http.Request, decode func(any) *Error) (any, *Error)

// admit checks the request's signature and injected faults, and counts the
// call; the caller holds mu.
func (c *Core) admit(op string, r *http.Request) *Error {
	c.calls[op]++
	if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential="+AccessKeyID+"/") {
		return BadRequest("MissingAuthenticationTokenException", "request is not signed with the test credentials")
	}
	if c.throttleNext > 0 {
		c.throttleNext--
		return BadRequest("ThrottlingException", "Rate exceeded")
	}
	if c.failNext > 0 {
		c.failNext--
		return Errorf(http.StatusInternalServerError, "InternalFailure", "We encountered an internal error. Please try again.")
	}
	if n, ok := c.deny[op]; ok && n != 0 {
		c.deny[op] = n - 1
		return Errorf(http.StatusForbidden, "AccessDeniedException",
			"User: arn:aws:sts::%s:assumed-role/portal/test is not authorized to perform: %s:%s because no identity-based policy allows the %s action", Account, c.name, op, op)
	}
	return nil
}

func readBody(r *http.Request) ([]byte, *Error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, BadRequest("SerializationException", "%v", err)
	}
	return body, nil
}

// strictDecoder decodes a JSON body into v, refusing unknown members. An
// empty body decodes as {}.
func strictDecoder(op string, body []byte) func(any) *Error {
	return func(v any) *Error {
		if len(bytes.TrimSpace(body)) == 0 {
			body = []byte("{}")
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			return BadRequest("SerializationException", "%s: %v", op, err)
		}
		return nil
	}
}

// serveJSON11 starts an awsJson1_1 endpoint: POST /, X-Amz-Target:
// prefix.<Operation>, errors as {"__type": code, "message": ...}.
func (c *Core) serveJSON11(prefix string, ops map[string]handler) {
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target := r.Header.Get("X-Amz-Target")
		op, ok := strings.CutPrefix(target, prefix+".")
		res, aerr := func() (any, *Error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			switch {
			case r.Method != http.MethodPost || r.URL.Path != "/":
				return nil, BadRequest("UnknownOperationException", "%s %s", r.Method, r.URL.Path)
			case !ok:
				return nil, BadRequest("UnknownOperationException", "X-Amz-Target %q", target)
			case r.Header.Get("Content-Type") != "application/x-amz-json-1.1":
				return nil, BadRequest("SerializationException", "Content-Type %q", r.Header.Get("Content-Type"))
			}
			if e := c.admit(op, r); e != nil {
				return nil, e
			}
			h, known := ops[op]
			if !known {
				return nil, BadRequest("UnknownOperationException", "operation %q is not served by this test endpoint", op)
			}
			body, e := readBody(r)
			if e != nil {
				return nil, e
			}
			return h(r, strictDecoder(op, body))
		}()
		c.finish(op, aerr)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		if aerr != nil {
			body := map[string]any{"__type": aerr.Code, "message": aerr.Message}
			for k, v := range aerr.Fields {
				body[k] = v
			}
			reply(w, aerr.Status, body)
			return
		}
		reply(w, http.StatusOK, res)
	}))
	c.tb.Cleanup(c.srv.Close)
}

// route is one restJson1 operation: an http.ServeMux pattern ("POST
// /clusters/{name}/access-entries") and the operation's name.
type route struct {
	pattern, op string
	h           handler
}

// serveREST starts a restJson1 endpoint: errors carry their code in the
// X-Amzn-ErrorType header and {"message": ...} in the body.
func (c *Core) serveREST(routes []route) {
	mux := http.NewServeMux()
	for _, rt := range routes {
		mux.HandleFunc(rt.pattern, func(w http.ResponseWriter, r *http.Request) {
			res, aerr := func() (any, *Error) {
				c.mu.Lock()
				defer c.mu.Unlock()
				if e := c.admit(rt.op, r); e != nil {
					return nil, e
				}
				if r.Method != http.MethodGet && r.Method != http.MethodDelete && r.ContentLength > 0 &&
					!strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
					return nil, BadRequest("SerializationException", "Content-Type %q", r.Header.Get("Content-Type"))
				}
				body, e := readBody(r)
				if e != nil {
					return nil, e
				}
				return rt.h(r, strictDecoder(rt.op, body))
			}()
			c.finish(rt.op, aerr)
			w.Header().Set("Content-Type", "application/json")
			if aerr != nil {
				w.Header().Set("X-Amzn-ErrorType", aerr.Code)
				reply(w, aerr.Status, map[string]string{"message": aerr.Message})
				return
			}
			reply(w, http.StatusOK, res)
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		c.finish(r.Method+" "+r.URL.Path, BadRequest("UnknownOperationException", "no route"))
		w.Header().Set("X-Amzn-ErrorType", "UnknownOperationException")
		reply(w, http.StatusNotFound, map[string]string{"message": "no route for " + r.Method + " " + r.URL.Path})
	})
	c.srv = httptest.NewServer(mux)
	c.tb.Cleanup(c.srv.Close)
}

func (c *Core) finish(op string, aerr *Error) {
	line := op + " -> ok"
	if aerr != nil {
		line = fmt.Sprintf("%s -> %d %s: %s", op, aerr.Status, aerr.Code, aerr.Message)
		c.tb.Logf("awstest %s: %s", c.name, line)
	}
	c.mu.Lock()
	c.log = append(c.log, line)
	c.mu.Unlock()
}

// Config is an aws.Config for the endpoints: region, the test credentials,
// and the standard retryer with maxAttempts attempts per call (1: no SDK
// retries) and no backoff, so that retry tests run at once while the SDK
// still decides what is retried (throttling and 5xx are; ConflictException
// and ValidationException are not).
func Config(maxAttempts int) aws.Config {
	return aws.Config{
		HTTPClient:  sdkhttp.Client(), // as the portal's clients have (awsprov.NewClients)
		Region:      Region,
		Credentials: credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(so *retry.StandardOptions) {
				so.MaxAttempts = maxAttempts
				so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
				so.RateLimiter = ratelimit.None
			})
		},
	}
}

// epoch is a time as the services' JSON protocols write it: seconds since
// the epoch, with milliseconds.
func epoch(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }

// window cuts one page out of a listing of n items, the way every endpoint
// here pages: the token is the offset of the page's first item ("" for 0),
// the next token the offset after its last ("" when it is the last page).
// bad is the service's error for a token that is not such an offset.
func window(n, max int, token string, bad func(format string, args ...any) *Error) (start, end int, next string, e *Error) {
	if token != "" {
		s, err := strconv.Atoi(token)
		if err != nil || s < 0 || s > n {
			return 0, 0, "", bad("nextToken %q is not valid", token)
		}
		start = s
	}
	end = min(start+max, n)
	if end < n {
		next = strconv.Itoa(end)
	}
	return start, end, next, nil
}

// maxResults is a request's page size: def when absent, else 1 to limit.
func maxResults(v *int32, def, limit int) (int, *Error) {
	if v == nil {
		return def, nil
	}
	if *v < 1 || int(*v) > limit {
		return 0, Validation("MaxResults %d is not in 1-%d", *v, limit)
	}
	return int(*v), nil
}

// listing answers an awsJson1_1 List call: one window of all (filtered and
// sorted) under key, and NextToken when more follow.
func listing[T any](key string, all []T, max int, token *string) (map[string]any, *Error) {
	start, end, next, e := window(len(all), max, aws.ToString(token), Validation)
	if e != nil {
		return nil, e
	}
	res := map[string]any{key: all[start:end]}
	if next != "" {
		res["NextToken"] = next
	}
	return res, nil
}

// reply writes v as the services do: one JSON document with its
// Content-Length, no trailing newline, not chunked. (A chunked body with a
// newline after the document made the SDK's decoder for big listings fail
// now and then with "use of closed network connection".)
func reply(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"__type":"InternalFailure","message":"test endpoint could not encode its answer"}`)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
