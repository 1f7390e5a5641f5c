package prom

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/hyperpod-governance/portal/internal/usage"
)

const (
	testKeyID  = "AKIDEXAMPLE"
	testSecret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
	testToken  = "session-token-example"
)

// authRE is the shape of a SigV4 Authorization header.
var authRE = regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$`)

// verifySigV4 checks r's signature the way the service would: it rebuilds
// the canonical request from what arrived (method, path, query, the signed
// headers, the body's hash), the string to sign and the signing key from the
// secret, independently of the SDK's signer (AWS SigV4 specification,
// "Create a canonical request" / "Create a string to sign" / "Calculate the
// signature"). It returns the region and service of the credential scope.
func verifySigV4(r *http.Request, body []byte, secret string) (region, service string, err error) {
	m := authRE.FindStringSubmatch(r.Header.Get("Authorization"))
	if m == nil {
		return "", "", fmt.Errorf("authorization header %q is not SigV4", r.Header.Get("Authorization"))
	}
	keyID, date, region, service, signedHeaders, sig := m[1], m[2], m[3], m[4], m[5], m[6]
	if keyID != testKeyID {
		return "", "", fmt.Errorf("access key %q", keyID)
	}
	amzDate := r.Header.Get("X-Amz-Date")
	if !strings.HasPrefix(amzDate, date+"T") || len(amzDate) != len("20060102T150405Z") {
		return "", "", fmt.Errorf("X-Amz-Date %q does not match the scope's date %s", amzDate, date)
	}
	hs := strings.Split(signedHeaders, ";")
	if !slices.IsSorted(hs) || !slices.Contains(hs, "host") || !slices.Contains(hs, "x-amz-date") {
		return "", "", fmt.Errorf("SignedHeaders %q must be sorted and include host and x-amz-date", signedHeaders)
	}
	if r.Header.Get("X-Amz-Security-Token") != "" && !slices.Contains(hs, "x-amz-security-token") {
		return "", "", errors.New("the session token is sent but not signed")
	}
	var canonHeaders strings.Builder
	for _, h := range hs {
		var v string
		switch h {
		case "host":
			v = r.Host
		case "content-length":
			v = strconv.FormatInt(r.ContentLength, 10)
		default:
			v = strings.Join(r.Header.Values(h), ",")
		}
		canonHeaders.WriteString(h + ":" + strings.Join(strings.Fields(v), " ") + "\n")
	}
	payload := sha256.Sum256(body)
	q := r.URL.Query()
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var canonQuery []string
	for _, k := range keys {
		for _, v := range q[k] {
			canonQuery = append(canonQuery, awsEscape(k)+"="+awsEscape(v))
		}
	}
	canonical := strings.Join([]string{
		r.Method,
		r.URL.EscapedPath(),
		strings.Join(canonQuery, "&"),
		canonHeaders.String(),
		signedHeaders,
		hex.EncodeToString(payload[:]),
	}, "\n")
	crHash := sha256.Sum256([]byte(canonical))
	scope := date + "/" + region + "/" + service + "/aws4_request"
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(crHash[:])
	mac := func(key []byte, s string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(s))
		return h.Sum(nil)
	}
	k := mac(mac(mac(mac([]byte("AWS4"+secret), date), region), service), "aws4_request")
	want := hex.EncodeToString(mac(k, toSign))
	if !hmac.Equal([]byte(want), []byte(sig)) {
		return "", "", fmt.Errorf("signature mismatch: got %s, recomputed %s over canonical request:\n%s", sig, want, canonical)
	}
	return region, service, nil
}

func awsEscape(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}

// ampActions is AMP's own table of its Prometheus-compatible query APIs
// and the IAM action each needs, written here independently of IAMActions:
// QueryMetrics (api/v1/query, api/v1/query_range), GetSeries (api/v1/series),
// GetLabels (api/v1/labels, api/v1/label/<name>/values) and GetMetricMetadata
// (api/v1/metadata), from the AMP user guide's "Prometheus-compatible APIs"
// pages (https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-APIReference-QueryMetrics.html
// and its siblings AMP-APIReference-GetSeries/GetLabels/GetMetricMetadata).
var ampActions = map[string]string{
	"query":       "aps:QueryMetrics",
	"query_range": "aps:QueryMetrics",
	"series":      "aps:GetSeries",
	"labels":      "aps:GetLabels",
	"metadata":    "aps:GetMetricMetadata",
}

// fakeProm answers the API's two endpoints with canned results and records
// each request's form.
type fakeProm struct {
	t      *testing.T
	secret string // when set, every request must carry a valid signature
	region string // the region it must be signed for
	answer func(op string, form url.Values) (int, string)
	// allowed, when not nil, is the caller's IAM policy: a signed request
	// whose action (ampActions) it lacks is denied, as AMP does.
	allowed []string

	mu    sync.Mutex
	forms []url.Values
	paths []string
}

func (f *fakeProm) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		f.t.Errorf("reading body: %v", err)
	}
	if f.secret != "" {
		region, service, err := verifySigV4(r, body, f.secret)
		if err != nil {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, `{"message":%q}`, err.Error())
			return
		}
		if region != f.region || service != "aps" {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, `{"message":"credential scope %s/%s, want %s/aps"}`, region, service, f.region)
			return
		}
		if f.allowed != nil {
			action, ok := ampActions[r.URL.Path[strings.Index(r.URL.Path, "/api/v1/")+len("/api/v1/"):]]
			if !ok || !slices.Contains(f.allowed, action) {
				w.WriteHeader(http.StatusForbidden)
				fmt.Fprintf(w, `{"message":"User is not authorized to perform: %s"}`, action)
				return
			}
		}
	}
	form, err := url.ParseQuery(string(body))
	if err != nil || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" || r.Method != http.MethodPost {
		f.t.Errorf("want a form POST, got %s %q (%v)", r.Method, r.Header.Get("Content-Type"), err)
	}
	f.mu.Lock()
	f.forms = append(f.forms, form)
	f.paths = append(f.paths, r.URL.Path)
	f.mu.Unlock()
	op := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	code, js := f.answer(op, form)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	io.WriteString(w, js)
}

var t0 = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

func unix(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

// TestSigV4SignsForAPS: with a region, every query is signed for service
// "aps" in that region with the configured credentials (session token
// included), and the fake service's independent recomputation of the
// signature accepts it. A request signed for another service, region or
// body is refused, and the client reports the 403.
func TestSigV4SignsForAPS(t *testing.T) {
	fp := &fakeProm{t: t, secret: testSecret, region: "us-west-2", answer: func(op string, form url.Values) (int, string) {
		return 200, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"namespace":"team-red"},"value":[` + unix(t0) + `,"42.5"]}]}}`
	}}
	srv := httptest.NewServer(fp)
	defer srv.Close()

	var gotAuth string
	c, err := New(Config{
		URL: srv.URL + "/workspaces/ws-1234/", SigV4Region: "us-west-2",
		Credentials: credentials.NewStaticCredentialsProvider(testKeyID, testSecret, testToken),
		Now:         func() time.Time { return t0 },
		HTTPClient: &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			gotAuth = r.Header.Get("Authorization")
			return http.DefaultTransport.RoundTrip(r)
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Query(context.Background(), `avg by (namespace) (DCGM_FI_DEV_GPU_UTIL{namespace="team-red"})`, t0)
	if err != nil {
		t.Fatalf("signed query refused: %v", err)
	}
	if len(s) != 1 || s[0].Value != 42.5 || s[0].Labels["namespace"] != "team-red" || !s[0].At.Equal(t0) {
		t.Fatalf("samples %+v", s)
	}
	if want := "Credential=" + testKeyID + "/20261130/us-west-2/aps/aws4_request"; !strings.Contains(gotAuth, want) {
		t.Errorf("Authorization %q lacks %q", gotAuth, want)
	}
	if fp.paths[0] != "/workspaces/ws-1234/api/v1/query" {
		t.Errorf("path %q", fp.paths[0])
	}

	// The same credentials signing for the wrong region are refused by the
	// verifier: the check is not vacuous.
	bad, err := New(Config{URL: srv.URL + "/workspaces/ws-1234", SigV4Region: "eu-west-1",
		Credentials: credentials.NewStaticCredentialsProvider(testKeyID, testSecret, "")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.Query(context.Background(), "up", t0)
	if err == nil || !strings.Contains(err.Error(), "HTTP 403") {
		t.Fatalf("wrong region: err %v, want the 403", err)
	}
	// And a wrong secret is refused too.
	wrong, _ := New(Config{URL: srv.URL, SigV4Region: "us-west-2",
		Credentials: credentials.NewStaticCredentialsProvider(testKeyID, "not-the-secret", "")})
	if _, err := wrong.Query(context.Background(), "up", t0); err == nil || !strings.Contains(err.Error(), "signature mismatch") {
		t.Fatalf("wrong secret: err %v, want a signature mismatch", err)
	}
}

// TestSigV4FromAMPURL: an AMP workspace URL turns signing on for its region
// without --prometheus-sigv4-region; any other URL is unsigned.
func TestSigV4FromAMPURL(t *testing.T) {
	creds := credentials.NewStaticCredentialsProvider(testKeyID, testSecret, "")
	for in, want := range map[string]string{
		"https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-abc/api/v1/query": "us-east-1",
		"https://aps-workspaces.ap-southeast-2.amazonaws.com/workspaces/ws-abc":         "ap-southeast-2",
		"https://aps-workspaces.cn-north-1.amazonaws.com.cn/workspaces/ws-abc":          "cn-north-1",
		"http://prometheus.monitoring:9090":                                             "",
		"https://aps-workspaces.example.com/workspaces/ws-abc":                          "",
	} {
		c, err := New(Config{URL: in, Credentials: creds})
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if c.SigV4Region() != want {
			t.Errorf("%s: region %q, want %q", in, c.SigV4Region(), want)
		}
	}
	c, _ := New(Config{URL: "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-abc/api/v1/query"})
	if c != nil {
		t.Error("SigV4 without credentials must be refused")
	}
	u, _ := New(Config{URL: "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-abc/api/v1/query", Credentials: creds})
	if u.URL() != "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-abc" {
		t.Errorf("base URL %q", u.URL())
	}
	for _, bad := range []string{"", "prometheus:9090", "ftp://x", "http://x/?q=1", "http://u:p@x/"} {
		if _, err := New(Config{URL: bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := New(Config{URL: "http://x", NamespaceLabel: `namespace"}`}); err == nil {
		t.Error("a namespace label that is not a label name was accepted")
	}
}

// TestUnsignedHasNoAuthorization: without a region nothing is signed (no
// credentials leave the portal for a plain Prometheus).
func TestUnsignedHasNoAuthorization(t *testing.T) {
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = append(auth, r.Header.Get("Authorization")+r.Header.Get("X-Amz-Date"))
		io.WriteString(w, `{"status":"success","data":{"resultType":"vector","result":[]}}`)
	}))
	defer srv.Close()
	c, err := New(Config{URL: srv.URL, Credentials: credentials.NewStaticCredentialsProvider(testKeyID, testSecret, "")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Query(context.Background(), "up", t0); err != nil {
		t.Fatal(err)
	}
	if auth[0] != "" {
		t.Errorf("unsigned client sent %q", auth[0])
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestAPIErrors: the API's error envelope becomes *Error with its type and
// message; an answer that is not the API's JSON names the HTTP status.
func TestAPIErrors(t *testing.T) {
	fp := &fakeProm{t: t, answer: func(op string, form url.Values) (int, string) {
		if form.Get("query") == "html" {
			return 502, `<html>Bad Gateway</html>`
		}
		return 400, `{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:5: parse error"}`
	}}
	srv := httptest.NewServer(fp)
	defer srv.Close()
	c, _ := New(Config{URL: srv.URL})
	_, err := c.Query(context.Background(), "sum(", t0)
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Type != "bad_data" || apiErr.Status != 400 || !strings.Contains(apiErr.Message, "parse error") || apiErr.Operation != "query" {
		t.Fatalf("err %#v", err)
	}
	_, err = c.QueryRange(context.Background(), "html", t0, t0.Add(time.Hour), time.Minute)
	if err == nil || !strings.Contains(err.Error(), "HTTP 502") || !strings.Contains(err.Error(), "Bad Gateway") {
		t.Fatalf("err %v", err)
	}
}

// TestNamespaceUtilizationRange: [from, to) at step asks Prometheus for the
// windows ending at from+step ... from+n*step (n = ceil((to-from)/step)),
// and dates each point at its window's start; NaN points (no samples) are
// dropped; the namespace is matched exactly.
func TestNamespaceUtilizationRange(t *testing.T) {
	from := t0.Add(30 * time.Minute)
	to := from.Add(3*time.Hour + time.Minute) // 4 steps: the last one partly outside
	fp := &fakeProm{t: t, answer: func(op string, form url.Values) (int, string) {
		if op != "query_range" {
			t.Errorf("op %s", op)
		}
		h := func(i int) string { return unix(from.Add(time.Duration(i) * time.Hour)) }
		return 200, `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"namespace":"team-red"},"values":[[` +
			h(2) + `,"50"],[` + h(1) + `,"25.5"],[` + h(3) + `,"NaN"],[` + h(4) + `,"100"]]}]}}`
	}}
	srv := httptest.NewServer(fp)
	defer srv.Close()
	c, _ := New(Config{URL: srv.URL})
	pts, err := c.NamespaceUtilization(context.Background(), "team-red", from, to, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f := fp.forms[0]
	if f.Get("start") != unix(from.Add(time.Hour)) || f.Get("end") != unix(from.Add(4*time.Hour)) || f.Get("step") != "3600" {
		t.Errorf("range start=%s end=%s step=%s", f.Get("start"), f.Get("end"), f.Get("step"))
	}
	wantQ := `sum by (namespace) (sum_over_time(DCGM_FI_DEV_GPU_UTIL{namespace="team-red"}[3600000ms])) / sum by (namespace) (count_over_time(DCGM_FI_DEV_GPU_UTIL{namespace="team-red"}[3600000ms]))`
	if f.Get("query") != wantQ {
		t.Errorf("query\n got %s\nwant %s", f.Get("query"), wantQ)
	}
	want := []usage.Point{{At: from, Percent: 25.5}, {At: from.Add(time.Hour), Percent: 50}, {At: from.Add(3 * time.Hour), Percent: 100}}
	if !slices.Equal(pts, want) {
		t.Errorf("points %v, want %v", pts, want)
	}

	for _, bad := range []struct {
		ns       string
		from, to time.Time
		step     time.Duration
		want     string
	}{
		{`team-red"} or vector(1) #`, from, to, time.Hour, "not a Kubernetes namespace"},
		{"team-red", to, from, time.Hour, "empty range"},
		{"team-red", from, from, time.Hour, "empty range"},
		{"team-red", from, to, 0, "at least 1s"},
		{"team-red", from, from.Add(365 * 24 * time.Hour), time.Minute, "at most 11000"},
	} {
		if _, err := c.NamespaceUtilization(context.Background(), bad.ns, bad.from, bad.to, bad.step); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q %s..%s %s: err %v, want %q", bad.ns, bad.from, bad.to, bad.step, err, bad.want)
		}
	}
	if len(fp.forms) != 1 {
		t.Errorf("bad arguments reached Prometheus: %d requests", len(fp.forms))
	}
}

// TestNamespacesUtilizationLabel: the all-namespaces query groups by the
// configured label and keys the result by it.
func TestNamespacesUtilizationLabel(t *testing.T) {
	fp := &fakeProm{t: t, answer: func(op string, form url.Values) (int, string) {
		return 200, `{"status":"success","data":{"resultType":"matrix","result":[` +
			`{"metric":{"exported_namespace":"team-red"},"values":[[` + unix(t0.Add(time.Hour)) + `,"10"]]},` +
			`{"metric":{"exported_namespace":"team-blue"},"values":[[` + unix(t0.Add(time.Hour)) + `,"90"]]}]}}`
	}}
	srv := httptest.NewServer(fp)
	defer srv.Close()
	c, _ := New(Config{URL: srv.URL, NamespaceLabel: "exported_namespace"})
	m, err := c.NamespacesUtilization(context.Background(), t0, t0.Add(time.Hour), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fp.forms[0].Get("query"), `sum by (exported_namespace) (sum_over_time(DCGM_FI_DEV_GPU_UTIL{exported_namespace!=""}[3600000ms]))`) {
		t.Errorf("query %s", fp.forms[0].Get("query"))
	}
	if len(m) != 2 || m["team-red"][0] != (usage.Point{At: t0, Percent: 10}) || m["team-blue"][0] != (usage.Point{At: t0, Percent: 90}) {
		t.Errorf("result %v", m)
	}
}

// TestIAMActionsAreWhatAMPAuthorizes: a role granted exactly Actions() (what
// `portal iam-policy` grants) can run every query the client makes against
// a workspace that authorizes each path as AMP does; without them it is
// denied; and an operation without a known IAM action is refused before
// any request is sent.
func TestIAMActionsAreWhatAMPAuthorizes(t *testing.T) {
	answer := func(op string, form url.Values) (int, string) {
		if op == "query" {
			return 200, `{"status":"success","data":{"resultType":"vector","result":[]}}`
		}
		return 200, `{"status":"success","data":{"resultType":"matrix","result":[]}}`
	}
	for _, tc := range []struct {
		allowed []string
		ok      bool
	}{{Actions(), true}, {[]string{"aps:GetSeries", "aps:GetLabels"}, false}} {
		fp := &fakeProm{t: t, secret: testSecret, region: "us-east-1", answer: answer, allowed: tc.allowed}
		srv := httptest.NewServer(fp)
		c, err := New(Config{URL: srv.URL + "/workspaces/ws-1", SigV4Region: "us-east-1",
			Credentials: credentials.NewStaticCredentialsProvider(testKeyID, testSecret, "")})
		if err != nil {
			t.Fatal(err)
		}
		_, err1 := c.Query(context.Background(), "up", t0)
		_, err2 := c.QueryRange(context.Background(), "up", t0, t0.Add(time.Hour), time.Hour)
		_, err3 := c.NamespacesUtilization(context.Background(), t0, t0.Add(time.Hour), time.Hour)
		for _, err := range []error{err1, err2, err3} {
			if (err == nil) != tc.ok {
				t.Errorf("allowed %v: err %v", tc.allowed, err)
			}
		}
		srv.Close()
	}
	if got := Actions(); !slices.Equal(got, []string{"aps:QueryMetrics"}) {
		t.Errorf("Actions() = %v", got)
	}
	c, _ := New(Config{URL: "http://127.0.0.1:1"})
	if _, err := c.do(context.Background(), "series", url.Values{}); err == nil || !strings.Contains(err.Error(), "no IAM action") {
		t.Errorf("an unmapped operation: %v", err)
	}
}
