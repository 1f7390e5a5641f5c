// Package prom reads GPU utilization from Prometheus over its HTTP API
// (PromQL: /api/v1/query and /api/v1/query_range), optionally signing each
// request with AWS Signature Version 4 for Amazon Managed Service for
// Prometheus, where the HyperPod observability add-on writes its metrics.
//
// The metric is the NVIDIA DCGM exporter's DCGM_FI_DEV_GPU_UTIL, a gauge
// per GPU in percent (0-100). With its Kubernetes pod mapping on, the
// exporter labels each GPU's series with the pod, namespace and container
// that the kubelet assigned the GPU to (dcgm-exporter source,
// internal/pkg/transformation/const.go: podAttribute "pod",
// namespaceAttribute "namespace", containerAttribute "container"); a GPU
// assigned to no pod carries no namespace. A Prometheus that scrapes the
// exporter with honor_labels false (the exporter's Helm chart default,
// deployment/values.yaml serviceMonitor.honorLabels: false) and also attaches
// its own namespace target label renames the exporter's to
// exported_namespace: Config.NamespaceLabel names the label to group by.
//
// Client implements usage.Utilization. It imports nothing of the portal but
// internal/usage.
package prom

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/hyperpod-governance/portal/internal/usage"
)

// Metric is the DCGM exporter's GPU utilization gauge (percent, 0-100).
const Metric = "DCGM_FI_DEV_GPU_UTIL"

// SigV4Service is the signing name of Amazon Managed Service for Prometheus:
// its query endpoints "must be signed with SigV4", and the AWS guide's
// example signs with `awscurl --service aps` against
// https://aps-workspaces.<Region>.amazonaws.com/workspaces/<Workspace-id>/api/v1/query
// (docs.aws.amazon.com/prometheus/latest/userguide/AMP-compatible-APIs.html).
const SigV4Service = "aps"

// IAMActions maps each HTTP API operation this client calls (the path below
// /api/v1) to the IAM action Amazon Managed Service for Prometheus
// authorizes it as. QueryMetrics covers both "/workspaces/<id>/api/v1/query"
// and ".../api/v1/query_range" (AMP user guide, QueryMetrics:
// https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-APIReference-QueryMetrics.html),
// on the workspace resource arn:${Partition}:aps:${Region}:${Account}:workspace/${WorkspaceId}
// (Service Authorization Reference for aps:
// https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonmanagedserviceforprometheus.html).
// `portal iam-policy` grants what this map names, and do refuses an
// operation missing from it, so a new call cannot ship without its
// permission.
var IAMActions = map[string]string{
	"query":       "aps:QueryMetrics",
	"query_range": "aps:QueryMetrics",
}

// Actions returns the distinct IAM actions of IAMActions, sorted.
func Actions() []string {
	var out []string
	for _, a := range IAMActions {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	sort.Strings(out)
	return out
}

// ampWorkspaceRE is the path of a workspace's query endpoint base.
var ampWorkspaceRE = regexp.MustCompile(`^/workspaces/([A-Za-z0-9-]+)$`)

// AMPWorkspaceID returns the workspace id of an Amazon Managed Service for
// Prometheus URL (path /workspaces/<id>, after NormalizeURL), or "".
func AMPWorkspaceID(u *url.URL) string {
	if m := ampWorkspaceRE.FindStringSubmatch(u.Path); m != nil {
		return m[1]
	}
	return ""
}

// MaxPoints is the most steps one range query may ask for: Prometheus
// refuses more than 11,000 points per series ("exceeded maximum resolution
// of 11,000 points per timeseries", web/api/v1/api.go).
const MaxPoints = 11000

// DefaultNamespaceLabel is the label the DCGM exporter puts a GPU's pod
// namespace in.
const DefaultNamespaceLabel = "namespace"

// ampHostRE matches an Amazon Managed Service for Prometheus workspace
// endpoint host; its second part is the region.
var ampHostRE = regexp.MustCompile(`^aps-workspaces\.([a-z]{2}(?:-[a-z]+)+-\d+)\.amazonaws\.com(?:\.cn)?$`)

// labelNameRE is a Prometheus label name (the classic, unquoted form).
var labelNameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// ValidLabelName reports whether s is a Prometheus label name.
func ValidLabelName(s string) bool { return labelNameRE.MatchString(s) }

// namespaceRE is a Kubernetes namespace name (an RFC 1123 DNS label). Only
// such names are put into a query, so a name can never change its meaning.
var namespaceRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// Config says where Prometheus is and how to reach it.
type Config struct {
	// URL is the server's base URL, below which /api/v1/query is served:
	// http://prometheus.monitoring:9090, or an AMP workspace's
	// https://aps-workspaces.<region>.amazonaws.com/workspaces/<id>.
	URL string
	// SigV4Region turns on SigV4 signing for that region (service "aps").
	// Empty: unsigned requests, unless URL is an AMP workspace endpoint
	// (see AMPRegion), whose region is then used.
	SigV4Region string
	// Credentials sign requests when SigV4 is on (the SDK's default chain
	// in cmd/portal: in the cluster, the portal's Pod Identity).
	Credentials aws.CredentialsProvider
	// NamespaceLabel is the label holding the GPU's pod namespace (default
	// "namespace"; "exported_namespace" when the scrape renamed it).
	NamespaceLabel string
	// HTTPClient defaults to one with a 30 s timeout.
	HTTPClient *http.Client
	// Now is the signing clock (default time.Now).
	Now func() time.Time
}

// Client queries one Prometheus.
type Client struct {
	base   *url.URL
	region string // SigV4 signing region; "" = unsigned
	creds  aws.CredentialsProvider
	label  string
	http   *http.Client
	now    func() time.Time
	signer *v4.Signer
}

var _ usage.Utilization = (*Client)(nil)

// NormalizeURL trims what users commonly paste after the base URL (a
// trailing slash, or the AWS console's ".../api/v1/query" endpoint) and
// checks that the rest is an absolute http(s) URL without query or fragment.
func NormalizeURL(raw string) (*url.URL, error) {
	s := strings.TrimSpace(raw)
	for _, suf := range []string{"/api/v1/query_range", "/api/v1/query", "/api/v1", "/"} {
		s = strings.TrimSuffix(s, suf)
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("%q is not an absolute http(s) URL such as http://prometheus.monitoring:9090 or https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-…", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("%q must not have a query, fragment or user info", raw)
	}
	return u, nil
}

// AMPRegion returns the region of an Amazon Managed Service for Prometheus
// workspace URL (host aps-workspaces.<region>.amazonaws.com), or "".
func AMPRegion(u *url.URL) string {
	if m := ampHostRE.FindStringSubmatch(strings.ToLower(u.Hostname())); m != nil {
		return m[1]
	}
	return ""
}

// New checks cfg and returns a client. It makes no request.
func New(cfg Config) (*Client, error) {
	u, err := NormalizeURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	c := &Client{base: u, region: cfg.SigV4Region, creds: cfg.Credentials, label: cfg.NamespaceLabel, http: cfg.HTTPClient, now: cfg.Now}
	if c.region == "" {
		c.region = AMPRegion(u)
	}
	if c.label == "" {
		c.label = DefaultNamespaceLabel
	}
	if !labelNameRE.MatchString(c.label) {
		return nil, fmt.Errorf("namespace label %q is not a Prometheus label name", c.label)
	}
	if c.region != "" {
		if c.creds == nil {
			return nil, errors.New("SigV4 signing needs AWS credentials")
		}
		c.signer = v4.NewSigner()
	}
	if c.http == nil {
		c.http = &http.Client{Timeout: 30 * time.Second}
	}
	if c.now == nil {
		c.now = time.Now
	}
	return c, nil
}

// SigV4Region is the region requests are signed for, "" when unsigned.
func (c *Client) SigV4Region() string { return c.region }

// URL is the base URL queries go below.
func (c *Client) URL() string { return c.base.String() }

// Sample is one value of an instant query's result.
type Sample struct {
	Labels map[string]string
	At     time.Time
	Value  float64
}

// Series is one series of a range query's result.
type Series struct {
	Labels map[string]string
	Points []usage.Point // Percent holds the raw value
}

// Error is an error answer of the API ({"status":"error","errorType":...}).
type Error struct {
	Status    int    // HTTP status
	Type      string // errorType: bad_data, timeout, execution, ...
	Message   string // error
	Operation string // "query" or "query_range"
}

func (e *Error) Error() string {
	return fmt.Sprintf("prometheus %s: %s (%s, HTTP %d)", e.Operation, e.Message, e.Type, e.Status)
}

// apiResponse is the API's envelope.
type apiResponse struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Warnings  []string        `json:"warnings"`
}

type queryData struct {
	ResultType string          `json:"resultType"`
	Result     json.RawMessage `json:"result"`
}

// sampleValue is [<unix seconds>, "<value>"].
type sampleValue [2]json.RawMessage

func (v sampleValue) parse() (time.Time, float64, error) {
	var ts float64
	if err := json.Unmarshal(v[0], &ts); err != nil {
		return time.Time{}, 0, fmt.Errorf("sample time %s: %w", v[0], err)
	}
	var s string
	if err := json.Unmarshal(v[1], &s); err != nil {
		return time.Time{}, 0, fmt.Errorf("sample value %s: %w", v[1], err)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("sample value %q: %w", s, err)
	}
	// Times are seconds with millisecond precision.
	at := time.UnixMilli(int64(math.Round(ts * 1000))).UTC()
	return at, f, nil
}

// Query runs an instant query at time at (/api/v1/query) and returns its
// vector result.
func (c *Client) Query(ctx context.Context, q string, at time.Time) ([]Sample, error) {
	form := url.Values{"query": {q}, "time": {formatTime(at)}}
	d, err := c.do(ctx, "query", form)
	if err != nil {
		return nil, err
	}
	if d.ResultType != "vector" {
		return nil, fmt.Errorf("prometheus query: result type %q, want vector", d.ResultType)
	}
	var res []struct {
		Metric map[string]string `json:"metric"`
		Value  sampleValue       `json:"value"`
	}
	if err := json.Unmarshal(d.Result, &res); err != nil {
		return nil, fmt.Errorf("prometheus query: decoding the result: %w", err)
	}
	out := make([]Sample, 0, len(res))
	for _, r := range res {
		t, v, err := r.Value.parse()
		if err != nil {
			return nil, fmt.Errorf("prometheus query: %w", err)
		}
		out = append(out, Sample{Labels: r.Metric, At: t, Value: v})
	}
	return out, nil
}

// QueryRange runs a range query (/api/v1/query_range) evaluated at start,
// start+step, ... up to end inclusive, and returns its matrix result.
func (c *Client) QueryRange(ctx context.Context, q string, start, end time.Time, step time.Duration) ([]Series, error) {
	if step <= 0 || end.Before(start) {
		return nil, fmt.Errorf("prometheus query_range: bad range %s..%s step %s", start, end, step)
	}
	form := url.Values{"query": {q}, "start": {formatTime(start)}, "end": {formatTime(end)},
		"step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}}
	d, err := c.do(ctx, "query_range", form)
	if err != nil {
		return nil, err
	}
	if d.ResultType != "matrix" {
		return nil, fmt.Errorf("prometheus query_range: result type %q, want matrix", d.ResultType)
	}
	var res []struct {
		Metric map[string]string `json:"metric"`
		Values []sampleValue     `json:"values"`
	}
	if err := json.Unmarshal(d.Result, &res); err != nil {
		return nil, fmt.Errorf("prometheus query_range: decoding the result: %w", err)
	}
	out := make([]Series, 0, len(res))
	for _, r := range res {
		s := Series{Labels: r.Metric, Points: make([]usage.Point, 0, len(r.Values))}
		for _, v := range r.Values {
			t, f, err := v.parse()
			if err != nil {
				return nil, fmt.Errorf("prometheus query_range: %w", err)
			}
			s.Points = append(s.Points, usage.Point{At: t, Percent: f})
		}
		out = append(out, s)
	}
	return out, nil
}

func formatTime(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', -1, 64)
}

// maxResponse caps a response body (a year of hourly points for a few
// hundred namespaces is well under it).
const maxResponse = 64 << 20

// do POSTs form to /api/v1/<op> (form-encoded, as the AMP guide's example
// does, so the query never travels in a URL that SigV4 would have to
// canonicalise) and returns the data of a successful answer.
func (c *Client) do(ctx context.Context, op string, form url.Values) (queryData, error) {
	if _, ok := IAMActions[op]; !ok {
		return queryData{}, fmt.Errorf("prometheus %s: no IAM action is known for this operation (add it to prom.IAMActions)", op)
	}
	body := []byte(form.Encode())
	u := c.base.JoinPath("api", "v1", op)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return queryData{}, fmt.Errorf("prometheus %s: %w", op, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if c.signer != nil {
		creds, err := c.creds.Retrieve(ctx)
		if err != nil {
			return queryData{}, fmt.Errorf("prometheus %s: AWS credentials for SigV4: %w", op, err)
		}
		sum := sha256.Sum256(body)
		if err := c.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), SigV4Service, c.region, c.now()); err != nil {
			return queryData{}, fmt.Errorf("prometheus %s: signing: %w", op, err)
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return queryData{}, fmt.Errorf("prometheus %s: %w", op, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return queryData{}, fmt.Errorf("prometheus %s: reading the answer: %w", op, err)
	}
	if len(raw) > maxResponse {
		return queryData{}, fmt.Errorf("prometheus %s: answer larger than %d bytes", op, maxResponse)
	}
	var env apiResponse
	if err := json.Unmarshal(raw, &env); err != nil || env.Status == "" {
		// Not the API's JSON: a proxy's or AWS's own error page, say.
		return queryData{}, fmt.Errorf("prometheus %s: HTTP %d, not a Prometheus API answer: %s", op, resp.StatusCode, snippet(raw))
	}
	if env.Status != "success" {
		return queryData{}, &Error{Status: resp.StatusCode, Type: env.ErrorType, Message: env.Error, Operation: op}
	}
	if resp.StatusCode != http.StatusOK {
		return queryData{}, fmt.Errorf("prometheus %s: HTTP %d with status success", op, resp.StatusCode)
	}
	var d queryData
	if err := json.Unmarshal(env.Data, &d); err != nil {
		return queryData{}, fmt.Errorf("prometheus %s: decoding data: %w", op, err)
	}
	return d, nil
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return strconv.Quote(s)
}

// UtilizationQuery is the PromQL for the mean utilization of the GPUs
// allocated to namespaces during the step window ending at each evaluation
// time: the sum of every sample of every matching GPU in the window over
// their count. Each sample stands for one scrape interval of one GPU, so this
// is the GPU-time-weighted mean: a GPU held for ten minutes of an hour weighs
// a sixth of one held all hour (an avg of per-GPU avg_over_time would weigh
// them equally), and GPUs assigned to no pod (no namespace label) never
// dilute it. A single sample per step (a plain avg by) would miss
// everything between steps. selector is the label matcher, e.g.
// namespace="team-red" or namespace!="".
func UtilizationQuery(label, selector string, step time.Duration) string {
	w := promDuration(step)
	return fmt.Sprintf("sum by (%[1]s) (sum_over_time(%[2]s{%[3]s}[%[4]s])) / sum by (%[1]s) (count_over_time(%[2]s{%[3]s}[%[4]s]))",
		label, Metric, selector, w)
}

// promDuration writes d in PromQL's duration syntax, in milliseconds
// (PromQL accepts "3600000ms").
func promDuration(d time.Duration) string {
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}

// steps checks [from, to) and step and returns how many steps it holds.
func steps(from, to time.Time, step time.Duration) (int, error) {
	switch {
	case step < time.Second || step%time.Millisecond != 0:
		return 0, fmt.Errorf("utilization: step %s must be a whole number of milliseconds, at least 1s", step)
	case !to.After(from):
		return 0, fmt.Errorf("utilization: empty range %s to %s", from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	n := (to.Sub(from) + step - 1) / step
	if n > MaxPoints {
		return 0, fmt.Errorf("utilization: %d steps of %s from %s to %s; at most %d per query (use a longer step)",
			n, step, from.Format(time.RFC3339), to.Format(time.RFC3339), MaxPoints)
	}
	return int(n), nil
}

// utilization runs the range query for [from, to): step k is evaluated at
// its end t = from+(k+1)*step, where the range selector [step] covers the
// samples in (t-step, t] (left-open, right-closed: Prometheus
// docs/querying/basics.md, "Range Vector Selectors"), and its Point is dated
// at its start t-step. Steps tile the range without overlap or gap.
func (c *Client) utilization(ctx context.Context, selector string, from, to time.Time, step time.Duration) (map[string][]usage.Point, error) {
	n, err := steps(from, to, step)
	if err != nil {
		return nil, err
	}
	from = from.Truncate(time.Millisecond)
	series, err := c.QueryRange(ctx, UtilizationQuery(c.label, selector, step), from.Add(step), from.Add(time.Duration(n)*step), step)
	if err != nil {
		return nil, err
	}
	out := map[string][]usage.Point{}
	for _, s := range series {
		ns := s.Labels[c.label]
		if ns == "" {
			continue
		}
		pts := make([]usage.Point, 0, len(s.Points))
		for _, p := range s.Points {
			if math.IsNaN(p.Percent) || math.IsInf(p.Percent, 0) {
				continue
			}
			pts = append(pts, usage.Point{At: p.At.Add(-step).UTC(), Percent: p.Percent})
		}
		sort.Slice(pts, func(i, j int) bool { return pts[i].At.Before(pts[j].At) })
		out[ns] = pts
	}
	return out, nil
}

// NamespaceUtilization implements usage.Utilization.
func (c *Client) NamespaceUtilization(ctx context.Context, namespace string, from, to time.Time, step time.Duration) ([]usage.Point, error) {
	if !namespaceRE.MatchString(namespace) {
		return nil, fmt.Errorf("utilization: %q is not a Kubernetes namespace name", namespace)
	}
	m, err := c.utilization(ctx, fmt.Sprintf("%s=%q", c.label, namespace), from, to, step)
	if err != nil {
		return nil, err
	}
	return m[namespace], nil
}

// NamespacesUtilization implements usage.Utilization.
func (c *Client) NamespacesUtilization(ctx context.Context, from, to time.Time, step time.Duration) (map[string][]usage.Point, error) {
	return c.utilization(ctx, c.label+`!=""`, from, to, step)
}
