package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// env is a fake environment; tests never read the real one.
type env map[string]string

func (e env) get(k string) string { return e[k] }

// prodFlags is a complete production configuration; tests drop or change
// one setting at a time.
var prodFlags = map[string]string{
	"base-url":                "https://portal.example.com",
	"oidc-issuer":             "https://idp.example.com",
	"oidc-client-id":          "portal",
	"oidc-client-secret-file": "/run/secrets/oidc",
	"groups-file":             "/etc/portal/groups.yaml",
	"session-key-file":        "/run/secrets/session.key",
}

// prod returns prodFlags as arguments, with overrides applied; an empty
// override value drops the flag.
func prod(overrides ...string) []string {
	m := map[string]string{}
	for k, v := range prodFlags {
		m[k] = v
	}
	for i := 0; i+1 < len(overrides); i += 2 {
		m[overrides[i]] = overrides[i+1]
	}
	var args []string
	for k, v := range m {
		if v != "" {
			args = append(args, "--"+k+"="+v)
		}
	}
	slices.Sort(args)
	return args
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name    string
		cmd     string // "serve" when empty
		args    []string
		env     env
		wantErr []string              // substrings; empty means no error
		check   func(c Config) string // returns a complaint, or ""
	}{
		{
			name: "dev defaults",
			args: []string{"--dev"},
			check: func(c Config) string {
				want := Config{
					Listen: "127.0.0.1:8080", DB: "data/portal.db", LogFormat: "text", LogLevel: "info",
					SessionKeyFile: "data/session.key", OIDCGroupsClaim: "groups", Dev: true,
					OIDCScopes:         []string{"openid", "email", "profile", "groups"},
					SessionIdleTimeout: 30 * time.Minute, SessionLifetime: 12 * time.Hour, ShutdownTimeout: 20 * time.Second,
					UsageRetention: 400 * 24 * time.Hour, UsageInterval: time.Minute, ReviewInterval: 10 * time.Minute,
					GroupsRecheckInterval: 5 * time.Minute, LoginRateLimit: 60, APITokenMaxDays: 90, APIRateLimit: 300,
					OnRevoke:                   "lock",
					IdentityStoreUserAttribute: "email", IdentityStoreCacheTTL: 5 * time.Minute,
					AWSEndpoints: map[string]string{}, AWSPollInterval: 5 * time.Second, AWSPollTimeout: 50 * time.Second,
					PrometheusNamespaceLabel: "namespace",
					LeaderElection:           "auto",
				}
				if !reflect.DeepEqual(c, want) {
					return "got " + fmtConfig(c) + ", want " + fmtConfig(want)
				}
				return ""
			},
		},
		{
			name: "production defaults",
			args: prod(),
			check: func(c Config) string {
				switch {
				case c.LogFormat != "json":
					return "LogFormat = " + c.LogFormat + ", want json"
				case c.Dev || c.DevAllowRemote:
					return "Dev or DevAllowRemote set"
				case c.SessionKeyFile != prodFlags["session-key-file"]:
					return "SessionKeyFile = " + c.SessionKeyFile
				}
				return ""
			},
		},
		{
			name: "env used when flag absent",
			args: []string{"--dev"},
			env:  env{"PORTAL_LISTEN": "127.0.0.1:9000", "PORTAL_SESSION_LIFETIME": "2h", "PORTAL_LOG_FORMAT": "json"},
			check: func(c Config) string {
				if c.Listen != "127.0.0.1:9000" || c.SessionLifetime != 2*time.Hour || c.LogFormat != "json" {
					return "got " + fmtConfig(c)
				}
				return ""
			},
		},
		{
			name: "flag wins over env",
			args: []string{"--dev", "--listen", "127.0.0.1:9100", "--db=/tmp/flag.db"},
			env:  env{"PORTAL_LISTEN": "127.0.0.1:9000", "PORTAL_DB": "/tmp/env.db"},
			check: func(c Config) string {
				if c.Listen != "127.0.0.1:9100" || c.DB != "/tmp/flag.db" {
					return "got " + fmtConfig(c)
				}
				return ""
			},
		},
		{
			name: "bare boolean flag does not swallow the next flag",
			args: []string{"--dev", "--listen", "127.0.0.1:0"},
			check: func(c Config) string {
				if !c.Dev || c.Listen != "127.0.0.1:0" {
					return "got " + fmtConfig(c)
				}
				return ""
			},
		},
		{
			name: "boolean from env",
			env:  env{"PORTAL_DEV": "true"},
			check: func(c Config) string {
				if !c.Dev || c.LogFormat != "text" {
					return "got " + fmtConfig(c)
				}
				return ""
			},
		},
		{
			name:    "boolean flag false wins over env true",
			args:    []string{"--dev=false"},
			env:     env{"PORTAL_DEV": "true"},
			wantErr: []string{"--oidc-issuer: required"},
		},
		{
			name:    "bad boolean env value",
			args:    prod(),
			env:     env{"PORTAL_DEV": "maybe"},
			wantErr: []string{`--dev: "maybe" is not true or false`},
		},
		{
			name:    "demo reviews only with --dev",
			args:    append(prod(), "--demo-reviews"),
			wantErr: []string{"--demo-reviews: only with --dev"},
		},
		{
			name:    "demo usage only with --dev",
			args:    append(prod(), "--demo-usage"),
			wantErr: []string{"--demo-usage: only with --dev"},
		},
		{
			name:    "profiles only on the operations listener",
			args:    []string{"--dev", "--ops-pprof"},
			wantErr: []string{"--ops-pprof: needs --ops-listen"},
		},
		{
			name: "profiles on the operations listener",
			args: []string{"--dev", "--ops-pprof", "--ops-listen=127.0.0.1:9090"},
			check: func(c Config) string {
				if !c.OpsPprof || c.OpsListen != "127.0.0.1:9090" {
					return fmt.Sprintf("OpsPprof %v, OpsListen %q", c.OpsPprof, c.OpsListen)
				}
				return ""
			},
		},
		{
			name:    "demo usage never with a cluster",
			args:    []string{"--dev", "--demo-usage", "--kubeconfig=/tmp/kubeconfig"},
			wantErr: []string{"--demo-usage: not with --kubeconfig"},
		},
		{
			name: "demo usage with --dev",
			args: []string{"--dev", "--demo-usage"},
			check: func(c Config) string {
				if !c.DemoUsage {
					return "got " + fmtConfig(c)
				}
				return ""
			},
		},
		{
			name:    "bad boolean flag value",
			args:    []string{"--dev", "--dev-allow-remote=sure"},
			wantErr: []string{`--dev-allow-remote: "sure" is not true or false`},
		},
		{
			name: "bad durations, all reported",
			args: []string{"--dev", "--session-idle-timeout=soon", "--session-lifetime=0", "--shutdown-timeout=-5s"},
			wantErr: []string{
				`--session-idle-timeout: "soon" is not a positive duration`,
				`--session-lifetime: "0" is not a positive duration`,
				`--shutdown-timeout: "-5s" is not a positive duration`,
			},
		},
		{
			name: "bad re-check interval and login rate limit",
			args: []string{"--dev", "--groups-recheck-interval=0", "--login-rate-limit=lots"},
			wantErr: []string{
				`--groups-recheck-interval: "0" is not a positive duration`,
				`--login-rate-limit: "lots" is not a whole number`,
			},
		},
		{
			name: "whole numbers past their bounds",
			args: []string{"--dev", "--login-rate-limit=100001", "--api-rate-limit=10000001"},
			wantErr: []string{
				`--login-rate-limit: "100001" is not a whole number from 1 to 100000`,
				`--api-rate-limit: "10000001" is not a whole number from 1 to 10000000`,
			},
		},
		{
			name: "an API rate limit past the other flags' bound",
			args: []string{"--dev", "--api-rate-limit=10000000"},
			check: func(c Config) string {
				if c.APIRateLimit != 10000000 {
					return fmt.Sprintf("API rate limit %d", c.APIRateLimit)
				}
				return ""
			},
		},
		{
			name: "re-check interval and login rate limit from env",
			args: []string{"--dev"},
			env:  env{"PORTAL_GROUPS_RECHECK_INTERVAL": "1m", "PORTAL_LOGIN_RATE_LIMIT": "10"},
			check: func(c Config) string {
				if c.GroupsRecheckInterval != time.Minute || c.LoginRateLimit != 10 {
					return fmt.Sprintf("interval %v, limit %d", c.GroupsRecheckInterval, c.LoginRateLimit)
				}
				return ""
			},
		},
		{
			name:    "bad duration from env",
			args:    []string{"--dev"},
			env:     env{"PORTAL_SESSION_IDLE_TIMEOUT": "30"},
			wantErr: []string{`--session-idle-timeout: "30"`},
		},
		{
			name:    "idle timeout longer than lifetime",
			args:    []string{"--dev", "--session-idle-timeout=2h", "--session-lifetime=1h"},
			wantErr: []string{"--session-idle-timeout: must not be longer than --session-lifetime"},
		},
		{
			name: "idle timeout equal to lifetime",
			args: []string{"--dev", "--session-idle-timeout=1h", "--session-lifetime=1h"},
		},
		{
			name:    "dev on a non-loopback address",
			args:    []string{"--dev", "--listen=0.0.0.0:8080"},
			wantErr: []string{`--dev: refusing to listen on "0.0.0.0:8080"`},
		},
		{
			name:    "dev on all interfaces (empty host)",
			args:    []string{"--dev", "--listen=:8080"},
			wantErr: []string{"--dev: refusing to listen"},
		},
		{
			name: "dev on a non-loopback address when allowed",
			args: []string{"--dev", "--dev-allow-remote", "--listen=0.0.0.0:8080"},
			check: func(c Config) string {
				if !c.DevAllowRemote {
					return "DevAllowRemote not set"
				}
				return ""
			},
		},
		{
			name:    "dev with a non-loopback base URL",
			args:    []string{"--dev", "--base-url=http://portal.example.com:8080"},
			wantErr: []string{`--dev: refusing --base-url "http://portal.example.com:8080"`, "--dev-allow-remote"},
		},
		{
			name:    "dev with a non-loopback https base URL",
			args:    []string{"--dev", "--base-url=https://10.0.0.5"},
			wantErr: []string{`--dev: refusing --base-url "https://10.0.0.5"`},
		},
		{
			name: "dev with a loopback base URL",
			args: []string{"--dev", "--base-url=http://localhost:8080"},
		},
		{
			name: "dev with a non-loopback base URL when allowed",
			args: []string{"--dev", "--dev-allow-remote", "--base-url=http://portal.example.com:8080"},
		},
		{
			name: "trusted proxies",
			args: []string{"--dev", "--trusted-proxies=10.0.0.0/16, 192.168.1.0/24"},
			check: func(c Config) string {
				if len(c.TrustedProxies) != 2 || c.TrustedProxies[0].String() != "10.0.0.0/16" || c.TrustedProxies[1].String() != "192.168.1.0/24" {
					return fmt.Sprintf("TrustedProxies = %v", c.TrustedProxies)
				}
				return ""
			},
		},
		{
			name:    "trusted proxies that are not CIDRs",
			args:    []string{"--dev", "--trusted-proxies=10.0.0.1,everyone"},
			wantErr: []string{`--trusted-proxies: "10.0.0.1" is not a CIDR`, `--trusted-proxies: "everyone" is not a CIDR`},
		},
		{
			name: "dev on IPv6 loopback",
			args: []string{"--dev", "--listen=[::1]:8080"},
		},
		{
			name: "dev on localhost",
			args: []string{"--dev", "--listen=localhost:8080"},
		},
		{
			name:    "dev with an OIDC issuer",
			args:    []string{"--dev", "--oidc-issuer=https://idp.example.com"},
			wantErr: []string{"--dev uses the built-in identity provider"},
		},
		{
			name:    "machine audiences not with --dev",
			args:    []string{"--dev", "--machine-audiences=portal-pipelines"},
			wantErr: []string{"--machine-audiences: not with --dev"},
		},
		{
			name: "machine audiences, a list from env",
			args: prod(),
			env:  env{"PORTAL_MACHINE_AUDIENCES": " portal-pipelines, ,ci "},
			check: func(c Config) string {
				if !reflect.DeepEqual(c.MachineAudiences, []string{"portal-pipelines", "ci"}) {
					return fmt.Sprintf("MachineAudiences = %q", c.MachineAudiences)
				}
				return ""
			},
		},
		{
			name:    "dev with an OIDC client id from env",
			args:    []string{"--dev"},
			env:     env{"PORTAL_OIDC_CLIENT_ID": "portal"},
			wantErr: []string{"--dev uses the built-in identity provider"},
		},
		{
			name: "production missing everything, all reported",
			wantErr: []string{
				"--base-url: required",
				"--oidc-issuer: required",
				"--oidc-client-id: required",
				"--oidc-client-secret-file: required",
				"--groups-file: required",
				"--session-key-file: required",
			},
		},
		{
			name:    "production http base URL on a public host",
			args:    prod("base-url", "http://portal.example.com"),
			wantErr: []string{"--base-url: \"http://portal.example.com\" uses plain http on a non-loopback host"},
		},
		{
			name: "production http base URL on loopback",
			args: prod("base-url", "http://127.0.0.1:8080"),
		},
		{
			name: "production base URL trailing slash trimmed",
			args: prod("base-url", "https://portal.example.com/"),
			check: func(c Config) string {
				if c.BaseURL != "https://portal.example.com" {
					return "BaseURL = " + c.BaseURL
				}
				return ""
			},
		},
		{
			name:    "base URL not absolute",
			args:    prod("base-url", "portal.example.com"),
			wantErr: []string{"--base-url: \"portal.example.com\" must be an absolute http(s) URL"},
		},
		{
			name:    "unknown revocation mode",
			args:    prod("on-revoke", "shred"),
			wantErr: []string{`--on-revoke: "shred" must be lock or delete`},
		},
		{
			name: "revocation deletes namespaces",
			args: prod("on-revoke", "delete"),
			check: func(c Config) string {
				return map[bool]string{true: "", false: "OnRevoke " + c.OnRevoke}[c.OnRevoke == "delete"]
			},
		},
		{
			name: "cluster settings file",
			args: prod("cluster-settings", " /etc/portal/cluster.yaml "),
			check: func(c Config) string {
				return map[bool]string{true: "", false: "ClusterSettingsFile " + c.ClusterSettingsFile}[c.ClusterSettingsFile == "/etc/portal/cluster.yaml"]
			},
		},
		{
			name:    "base URL with a query",
			args:    prod("base-url", "https://portal.example.com/?x=1"),
			wantErr: []string{"must not have a query or fragment"},
		},
		{
			name:    "http issuer on a public host",
			args:    prod("oidc-issuer", "http://idp.example.com"),
			wantErr: []string{`--oidc-issuer: "http://idp.example.com" must be an https URL`},
		},
		{
			name: "http issuer on loopback",
			args: prod("oidc-issuer", "http://127.0.0.1:5556/dex"),
		},
		{
			name:    "issuer not a URL",
			args:    prod("oidc-issuer", "idp.example.com"),
			wantErr: []string{"--oidc-issuer:"},
		},
		{
			name:    "listen without a port",
			args:    []string{"--dev", "--listen=127.0.0.1"},
			wantErr: []string{`--listen: "127.0.0.1" is not host:port`},
		},
		{
			name:    "bad log format and level",
			args:    []string{"--dev", "--log-format=xml", "--log-level=loud"},
			wantErr: []string{`--log-format: "xml"`, `--log-level: "loud"`},
		},
		{
			name:    "empty db",
			args:    []string{"--dev", "--db="},
			wantErr: []string{"--db: a database is required"},
		},
		{
			name:    "unexpected positional argument",
			args:    []string{"--dev", "extra"},
			wantErr: []string{`unexpected argument "extra"`},
		},
		{
			name: "migrate needs no production settings",
			cmd:  "migrate",
			args: []string{"--db=/tmp/x.db"},
		},
		{
			name: "scopes trimmed, empty ones dropped",
			args: []string{"--dev", "--oidc-scopes= openid , email,,groups "},
			check: func(c Config) string {
				if !slices.Equal(c.OIDCScopes, []string{"openid", "email", "groups"}) {
					return "OIDCScopes = " + strings.Join(c.OIDCScopes, "|")
				}
				return ""
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := tt.cmd
			if cmd == "" {
				cmd = "serve"
			}
			var usage strings.Builder
			c, err := parseConfig(cmd, tt.args, tt.env.get, &usage)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("parseConfig(%q): %v", tt.args, err)
				}
			} else {
				if err == nil {
					t.Fatalf("parseConfig(%q) succeeded with %s, want errors %q", tt.args, fmtConfig(c), tt.wantErr)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error does not contain %q:\n%v", w, err)
					}
				}
			}
			if tt.check != nil {
				if msg := tt.check(c); msg != "" {
					t.Error(msg)
				}
			}
		})
	}
}

// Each production setting is required on its own, and its absence is the
// only complaint.
func TestParseConfigProductionRequiresEach(t *testing.T) {
	for name := range prodFlags {
		t.Run(name, func(t *testing.T) {
			_, err := parseConfig("serve", prod(name, ""), env{}.get, io.Discard)
			if err == nil {
				t.Fatalf("parseConfig without --%s succeeded", name)
			}
			if !strings.HasPrefix(err.Error(), "--"+name+": required") {
				t.Errorf("error = %q, want it to start with --%s: required", err, name)
			}
			if n := len(unwrapAll(err)); n != 1 {
				t.Errorf("got %d errors, want 1:\n%v", n, err)
			}
		})
	}
	if _, err := parseConfig("serve", prod(), env{}.get, io.Discard); err != nil {
		t.Fatalf("complete production config: %v", err)
	}
	// The same settings from the environment alone.
	e := env{}
	for name, v := range prodFlags {
		e["PORTAL_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_"))] = v
	}
	c, err := parseConfig("serve", nil, e.get, io.Discard)
	if err != nil {
		t.Fatalf("production config from env: %v", err)
	}
	if c.OIDCClientSecretFile != prodFlags["oidc-client-secret-file"] || c.BaseURL != prodFlags["base-url"] {
		t.Errorf("config from env = %s", fmtConfig(c))
	}
}

func TestParseConfigMissingAllReportsSix(t *testing.T) {
	_, err := parseConfig("serve", nil, env{}.get, io.Discard)
	if n := len(unwrapAll(err)); n != 6 {
		t.Errorf("got %d errors, want 6 (one per required setting):\n%v", n, err)
	}
}

func TestParseConfigHelp(t *testing.T) {
	var usage strings.Builder
	_, err := parseConfig("serve", []string{"--help"}, env{}.get, &usage)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("error = %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"usage: portal serve", "-session-key-file", "[PORTAL_SESSION_KEY_FILE]", "-dev"} {
		if !strings.Contains(usage.String(), want) {
			t.Errorf("usage does not mention %q:\n%s", want, usage.String())
		}
	}
}

func unwrapAll(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func fmtConfig(c Config) string { return fmt.Sprintf("%+v", c) }

// `make run` passes --demo-usage (the demo pages need the seeded hours now
// that --dev alone writes none), and its arguments are a valid
// configuration.
func TestMakeRunSeedsDemoUsage(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, line := range strings.Split(string(mk), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "./bin/portal" && f[1] == "serve" {
			args = f[2:]
		}
	}
	if args == nil {
		t.Fatal("no ./bin/portal serve line in the Makefile")
	}
	c, err := parseConfig("serve", args, env{}.get, io.Discard)
	if err != nil || !c.Dev || !c.DemoUsage || c.Kubeconfig != "" {
		t.Errorf("make run's %v: dev %v, demo usage %v, kubeconfig %q, %v", args, c.Dev, c.DemoUsage, c.Kubeconfig, err)
	}
}
