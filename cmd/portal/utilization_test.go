package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/usage/prom"
)

// TestPrometheusFlags: the --prometheus-* flags are read (flag or env) and
// each bad combination is refused with a message naming the flag.
func TestPrometheusFlags(t *testing.T) {
	for _, tt := range []struct {
		name    string
		args    []string
		env     env
		wantErr string // "" = valid
		url     string
		region  string
		label   string
	}{
		{name: "unset", args: nil, label: "namespace"},
		{name: "plain in-cluster Prometheus", args: []string{"--prometheus-url=http://prometheus.monitoring:9090"},
			url: "http://prometheus.monitoring:9090", label: "namespace"},
		{name: "AMP workspace from env, label renamed",
			env: env{"PORTAL_PROMETHEUS_URL": "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-1/", "PORTAL_PROMETHEUS_NAMESPACE_LABEL": "exported_namespace"},
			url: "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-1/", label: "exported_namespace"},
		{name: "explicit region behind a proxy", args: []string{"--prometheus-url=https://amp-proxy.example.com/workspaces/ws-1", "--prometheus-sigv4-region=eu-west-1"},
			url: "https://amp-proxy.example.com/workspaces/ws-1", region: "eu-west-1", label: "namespace"},
		{name: "signed over loopback http (tests)", args: []string{"--prometheus-url=http://127.0.0.1:9090", "--prometheus-sigv4-region=us-east-1"},
			url: "http://127.0.0.1:9090", region: "us-east-1", label: "namespace"},
		{name: "not a URL", args: []string{"--prometheus-url=prometheus:9090"}, wantErr: "--prometheus-url: \"prometheus:9090\" is not an absolute http(s) URL"},
		{name: "query in URL", args: []string{"--prometheus-url=http://p:9090/?x=1"}, wantErr: "--prometheus-url: \"http://p:9090/?x=1\" must not have a query"},
		{name: "region without URL", args: []string{"--prometheus-sigv4-region=us-east-1"}, wantErr: "--prometheus-sigv4-region: set without --prometheus-url"},
		{name: "bad region", args: []string{"--prometheus-url=https://p.example.com", "--prometheus-sigv4-region=US East"}, wantErr: "--prometheus-sigv4-region: \"US East\" is not a region name"},
		{name: "signed over plain http", args: []string{"--prometheus-url=http://p.example.com", "--prometheus-sigv4-region=us-east-1"}, wantErr: "must be https when queries are signed"},
		{name: "AMP over plain http", args: []string{"--prometheus-url=http://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1"}, wantErr: "must be https when queries are signed"},
		{name: "bad label", args: []string{"--prometheus-url=http://p:9090", "--prometheus-namespace-label=name space"}, wantErr: "--prometheus-namespace-label: \"name space\" is not a Prometheus label name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig("serve", append(prod(), tt.args...), tt.env.get, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.PrometheusURL != tt.url || c.PrometheusSigV4Region != tt.region || c.PrometheusNamespaceLabel != tt.label {
				t.Errorf("got url %q region %q label %q", c.PrometheusURL, c.PrometheusSigV4Region, c.PrometheusNamespaceLabel)
			}
		})
	}
}

// TestUtilizationSourceUnset: without --prometheus-url the web layer gets an
// untyped nil, so usage.Configured says "allocation only".
func TestUtilizationSourceUnset(t *testing.T) {
	u, err := utilizationSource(context.Background(), Config{}, slog.New(slog.DiscardHandler))
	if err != nil || u != nil || usage.Configured(u) {
		t.Fatalf("got %#v, %v; want an untyped nil", u, err)
	}
}

// TestUtilizationSourceSigns: an AMP URL turns signing on for its region
// with the default credential chain's credentials (here from the
// environment); a plain URL sends no Authorization.
func TestUtilizationSourceSigns(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDPORTALTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	logger := slog.New(slog.DiscardHandler)

	amp, err := utilizationSource(context.Background(), Config{PrometheusURL: "https://aps-workspaces.ap-northeast-1.amazonaws.com/workspaces/ws-9", PrometheusNamespaceLabel: "namespace"}, logger)
	if err != nil {
		t.Fatal(err)
	}
	if r := amp.(*prom.Client).SigV4Region(); r != "ap-northeast-1" {
		t.Errorf("AMP URL: signing region %q", r)
	}

	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = append(auth, r.Header.Get("Authorization"))
		io.WriteString(w, `{"status":"success","data":{"resultType":"matrix","result":[]}}`)
	}))
	defer srv.Close()
	from := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for _, cfg := range []Config{
		{PrometheusURL: srv.URL, PrometheusSigV4Region: "eu-central-1", PrometheusNamespaceLabel: "namespace"},
		{PrometheusURL: srv.URL, PrometheusNamespaceLabel: "namespace"},
	} {
		u, err := utilizationSource(context.Background(), cfg, logger)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := u.NamespaceUtilization(context.Background(), "team-red", from, from.Add(time.Hour), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(auth[0], "Credential=AKIDPORTALTEST/") || !strings.Contains(auth[0], "/eu-central-1/aps/aws4_request") {
		t.Errorf("signed request's Authorization %q", auth[0])
	}
	if auth[1] != "" {
		t.Errorf("unsigned request sent Authorization %q", auth[1])
	}
}
