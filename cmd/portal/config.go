package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Config is everything the portal reads from flags and the environment.
// Each flag has a PORTAL_* variable; a flag given on the command line wins.
type Config struct {
	Listen               string
	OpsListen            string
	OpsPprof             bool
	BaseURL              string
	DB                   string
	OIDCIssuer           string
	OIDCClientID         string
	OIDCClientSecretFile string
	OIDCScopes           []string
	OIDCGroupsClaim      string
	GroupsFile           string
	SessionKeyFile       string
	SessionIdleTimeout   time.Duration
	SessionLifetime      time.Duration
	// GroupsRecheckInterval: how long the groups confirmed at login or the
	// last re-check serve reads; changes always re-check first.
	GroupsRecheckInterval time.Duration
	// LoginRateLimit: requests per minute (and burst) one client address
	// may make to /login and /auth/callback together.
	LoginRateLimit int
	// APITokenMaxDays: the longest lifetime a person may give an API
	// token; APIRateLimit: API requests per minute (and burst) per token.
	APITokenMaxDays int
	APIRateLimit    int
	// MachineAudiences: the client ids (audiences) of the identity
	// provider's tokens for machine identities that the API accepts; none:
	// no machine identity (the groups file's machines section names them).
	MachineAudiences []string
	LogFormat        string
	LogLevel         string
	Dev              bool
	DevAllowRemote   bool
	// DemoReviews (with Dev): seed two demo connections with a due and an
	// overdue review on a database with no connection yet.
	DemoReviews bool
	// DemoUsage (with Dev, never with Kubeconfig): seed 60 days of demo
	// usage on a database with no usage yet.
	DemoUsage bool
	// TrustedProxies are the peers whose X-Forwarded-For is believed
	// (the ingress or load balancer); none by default.
	TrustedProxies  []*net.IPNet
	ShutdownTimeout time.Duration
	UsageRetention  time.Duration
	UsageInterval   time.Duration
	// ReviewInterval is how often the review scheduler ticks.
	ReviewInterval time.Duration
	Kubeconfig     string
	SlurmConf      string
	// SlurmControllerGroup and SlurmBin: the Session Manager transport to
	// the HyperPod Slurm cluster's controller (slurmssm.Controller).
	SlurmControllerGroup string
	SlurmBin             string
	OnRevoke             string // "lock" or "delete": what revocation does with a team namespace
	ClusterSettingsFile  string // YAML: namespace prefix, priority classes, ClusterQueue mode, accelerators, instance types
	// RateCardFile is the JSON rate card that prices usage; empty: usage
	// without money (and with --dev, the demo rate card).
	RateCardFile string

	// Users' groups from IAM Identity Center's identity store at login
	// (off when IdentityStoreID is empty), and the AWS settings it needs.
	IdentityStoreID            string
	IdentityStoreUserAttribute string // email, preferred_username or subject
	IdentityStoreCacheTTL      time.Duration
	// AWS side of provisioning (see aws.go).
	AWSSettingsFile string
	AWSRegion       string
	AWSEndpoints    map[string]string // service -> URL
	AWSPollInterval time.Duration
	AWSPollTimeout  time.Duration

	// GPU utilization from Prometheus (see utilization.go); off when
	// PrometheusURL is empty.
	PrometheusURL            string
	PrometheusSigV4Region    string
	PrometheusNamespaceLabel string

	// Notify: email and webhook delivery of notices (see notify.go).
	Notify NotifyConfig

	// Leader election (internal/leader): who runs the singletons.
	LeaderElection          string // auto, kubernetes or database
	LeaderElectionNamespace string
	LeaderID                string
}

// awsServices are the services with an --aws-endpoint-<service> flag.
var awsServices = []string{"sagemaker", "eks", "ssoadmin", "identitystore", "datazone", "iam", "ec2", "ssm"}

// flagSpec describes one setting: its flag, its environment variable, its
// default and help. docs/configuration.md lists the same.
type flagSpec struct {
	name, env, def, help string
	boolean              bool // takes no value on the command line: --dev
}

// boolFlag keeps a boolean flag's raw text (validated later, like env
// values) while letting it be given without a value.
type boolFlag struct{ s *string }

func (b boolFlag) String() string {
	if b.s == nil {
		return ""
	}
	return *b.s
}
func (b boolFlag) Set(v string) error { *b.s = v; return nil }
func (b boolFlag) IsBoolFlag() bool   { return true }

var specs = []flagSpec{
	{"listen", "PORTAL_LISTEN", "127.0.0.1:8080", "address to listen on (host:port)", false},
	{"ops-listen", "PORTAL_OPS_LISTEN", "", "address of a second listener serving only /metrics, /readyz and /healthz (e.g. :9090); when set, --listen serves neither /metrics nor /readyz", false},
	{"ops-pprof", "PORTAL_OPS_PPROF", "false", "also serve Go's runtime profiles (/debug/pprof/: CPU, heap, goroutines) on --ops-listen, to diagnose a slow or large portal; requires --ops-listen", true},
	{"base-url", "PORTAL_BASE_URL", "", "external URL of the portal, e.g. https://portal.example.com (default in --dev: http://<listen>)", false},
	{"db", "PORTAL_DB", "data/portal.db", "database: a SQLite file path, or a postgres:// URL (PostgreSQL; its password is never logged)", false},
	{"oidc-issuer", "PORTAL_OIDC_ISSUER", "", "OpenID Connect issuer URL (required unless --dev)", false},
	{"oidc-client-id", "PORTAL_OIDC_CLIENT_ID", "", "OIDC client id (required unless --dev)", false},
	{"oidc-client-secret-file", "PORTAL_OIDC_CLIENT_SECRET_FILE", "", "file holding the OIDC client secret (required unless --dev)", false},
	{"oidc-scopes", "PORTAL_OIDC_SCOPES", "openid,email,profile,groups", "comma-separated OIDC scopes to request", false},
	{"oidc-groups-claim", "PORTAL_OIDC_GROUPS_CLAIM", "groups", "claim (ID token or userinfo) that lists the user's groups", false},
	{"groups-file", "PORTAL_GROUPS_FILE", "", "YAML file mapping groups to roles and teams (required unless --dev)", false},
	{"session-key-file", "PORTAL_SESSION_KEY_FILE", "", "file with at least 32 bytes of secret key for session tokens (required unless --dev; --dev creates data/session.key)", false},
	{"session-idle-timeout", "PORTAL_SESSION_IDLE_TIMEOUT", "30m", "sign out after this long without a request", false},
	{"session-lifetime", "PORTAL_SESSION_LIFETIME", "12h", "sign out this long after login, active or not", false},
	{"groups-recheck-interval", "PORTAL_GROUPS_RECHECK_INTERVAL", "5m", "how long a signed-in user's groups are trusted for pages that change nothing before the identity store or provider is asked again (every change asks first)", false},
	{"login-rate-limit", "PORTAL_LOGIN_RATE_LIMIT", "60", "requests per minute one client address may make to /login and /auth/callback (also the burst); more get 429", false},
	{"api-token-max-days", "PORTAL_API_TOKEN_MAX_DAYS", "90", "the longest lifetime, in days, a person may give an API token (/settings/tokens)", false},
	{"api-rate-limit", "PORTAL_API_RATE_LIMIT", "300", "API requests per minute one token may make (also the burst); more get 429", false},
	{"machine-audiences", "PORTAL_MACHINE_AUDIENCES", "", "comma-separated client ids (token audiences) of the --oidc-issuer's tokens that the API accepts from machine identities, each named by its sub claim in the groups file's machines section (docs/api.md); empty: none", false},
	{"log-format", "PORTAL_LOG_FORMAT", "", "text or json (default: text with --dev, json otherwise)", false},
	{"log-level", "PORTAL_LOG_LEVEL", "info", "debug, info, warn or error", false},
	{"dev", "PORTAL_DEV", "false", "development mode: built-in identity provider with demo users, data under ./data", true},
	{"dev-allow-remote", "PORTAL_DEV_ALLOW_REMOTE", "false", "let --dev listen on, or use a --base-url with, a non-loopback address (anyone reaching it can sign in as any demo user)", true},
	{"demo-reviews", "PORTAL_DEMO_REVIEWS", "false", "with --dev, on a database with no connection yet: make two demo connections with a review due today and one overdue, labelled demo data (make run sets it)", true},
	{"demo-usage", "PORTAL_DEMO_USAGE", "false", "with --dev and without --kubeconfig, on a database with no usage yet: seed 60 days of hourly demo usage, labelled demo data (make run sets it)", true},
	{"kubeconfig", "PORTAL_KUBECONFIG", "", "the shared EKS cluster: a kubeconfig file, or in-cluster; empty runs the provisioner in dry-run mode (plans recorded, nothing applied), except for Slurm connections when a Slurm transport is set (a portal for a HyperPod Slurm cluster runs without it)", false},
	{"slurm-conf", "PORTAL_SLURM_CONF", "", "the Slurm cluster's slurm.conf, for a portal running where Slurm's client commands (sacctmgr, ...) work: Slurm connections are provisioned, checked for drift and revoked through them, and the Slurm teams' usage is read with sacct (the local transport; docs/provisioning.md, docs/usage-and-cost.md); empty: a Slurm connection's job fails, saying no Slurm transport is configured", false},
	{"slurm-controller-group", "PORTAL_SLURM_CONTROLLER_GROUP", "", "the HyperPod Slurm cluster's controller instance group (its one node runs slurmctld): Slurm connections are provisioned, checked for drift and revoked, and the Slurm teams' usage is read with sacct, over Session Manager to that node (the AWS transport; needs --aws-settings with cluster_arn; docs/provisioning.md); not with --slurm-conf", false},
	{"slurm-bin", "PORTAL_SLURM_BIN", "", "with --slurm-controller-group: the directory of the Slurm commands on the controller node, when the Session Manager agent's PATH lacks it", false},
	{"on-revoke", "PORTAL_ON_REVOKE", "lock", "what revoking a connection does with its team namespace: lock (keep it, locked) or delete", false},
	{"cluster-settings", "PORTAL_CLUSTER_SETTINGS", "", "YAML file of the shared cluster's settings: namespace prefix, priority classes, ClusterQueue mode, accelerator table, instance types (see docs/configuration.md); empty: the HyperPod task governance defaults", false},
	{"rate-card", "PORTAL_RATE_CARD", "", "JSON rate card: hourly price per instance type, currency, effective-from dates, optional borrowed rate (see docs/usage-and-cost.md); empty: usage is shown without money and no month is closed", false},
	{"usage-retention", "PORTAL_USAGE_RETENTION", "9600h", "how long usage records (hourly rows, pods' intervals, missing periods) are kept; older ones are pruned daily (default 400 days)", false},
	{"usage-interval", "PORTAL_USAGE_INTERVAL", "1m", "how often the usage collector (with --kubeconfig) records what it saw and recomputes the hours it touched", false},
	{"review-interval", "PORTAL_REVIEW_INTERVAL", "10m", "how often the review scheduler opens due and event-driven reviews, flags orphans, syncs the owners groups (with --identity-store-id) and reminds of overdue reviews; one portal process at a time runs it", false},
	{"leader-election", "PORTAL_LEADER_ELECTION", "auto", "how replicas elect the one that runs the background singletons (drift checker, collector, reviews, deliveries...): kubernetes (a Lease in --leader-election-namespace), database (a PostgreSQL advisory lock, or a flock beside the SQLite file), or auto: kubernetes with --kubeconfig, database otherwise", false},
	{"leader-election-namespace", "PORTAL_LEADER_ELECTION_NAMESPACE", "", "namespace of the leader election's Lease (default: the pod's own namespace in a cluster, else default)", false},
	{"leader-id", "PORTAL_LEADER_ID", "", "this process's name in the leader election, unique per replica (default: host name (the pod's name) _ process id)", false},
	{"shutdown-timeout", "PORTAL_SHUTDOWN_TIMEOUT", "20s", "how long SIGTERM waits for requests and workers to finish", false},

	// IAM Identity Center groups at login (and the AWS settings they need).
	{"identity-store-id", "PORTAL_IDENTITY_STORE_ID", "", "IAM Identity Center identity store id (d-xxxxxxxxxx): users' groups are looked up there at login and replace the token's; empty: groups come from the OIDC provider", false},
	{"identity-store-user-attribute", "PORTAL_IDENTITY_STORE_USER_ATTRIBUTE", "email", "claim holding the user's Identity Center userName: email, preferred_username or subject", false},
	{"identity-store-cache-ttl", "PORTAL_IDENTITY_STORE_CACHE_TTL", "5m", "how long a user's identity store groups are reused before asking again", false},
	{"trusted-proxies", "PORTAL_TRUSTED_PROXIES", "", "comma-separated CIDRs of the reverse proxies (ingress, load balancer) whose X-Forwarded-For names the client; empty: the peer address is the client, forwarded headers are ignored", false},
	{"aws-settings", "PORTAL_AWS_SETTINGS", "", "YAML file of the AWS side of provisioning (Studio network, identity store, access policies; see docs/provisioning.md); empty: plans have no AWS steps (with --dev and no --kubeconfig: built-in example settings, dry run)", false},
	{"aws-region", "PORTAL_AWS_REGION", "", "AWS region of the shared cluster (default: the settings file's region, else AWS_REGION)", false},
	{"aws-endpoint-sagemaker", "PORTAL_AWS_ENDPOINT_SAGEMAKER", "", "SageMaker endpoint URL override (a VPC endpoint); empty: the region's default", false},
	{"aws-endpoint-eks", "PORTAL_AWS_ENDPOINT_EKS", "", "EKS endpoint URL override", false},
	{"aws-endpoint-ssoadmin", "PORTAL_AWS_ENDPOINT_SSOADMIN", "", "IAM Identity Center (ssoadmin) endpoint URL override", false},
	{"aws-endpoint-identitystore", "PORTAL_AWS_ENDPOINT_IDENTITYSTORE", "", "Identity Store endpoint URL override", false},
	{"aws-endpoint-datazone", "PORTAL_AWS_ENDPOINT_DATAZONE", "", "DataZone (Unified Studio) endpoint URL override", false},
	{"aws-endpoint-iam", "PORTAL_AWS_ENDPOINT_IAM", "", "IAM endpoint URL override (the plan preview's check of the Studio execution role)", false},
	{"aws-endpoint-ec2", "PORTAL_AWS_ENDPOINT_EC2", "", "EC2 endpoint URL override (the readiness page's VPC endpoints check)", false},
	{"aws-endpoint-ssm", "PORTAL_AWS_ENDPOINT_SSM", "", "Systems Manager endpoint URL override (the Slurm transport's Session Manager sessions)", false},
	{"aws-poll-interval", "PORTAL_AWS_POLL_INTERVAL", "5s", "how often a step polls a resource that is being created (compute quota, domain)", false},
	{"aws-poll-timeout", "PORTAL_AWS_POLL_TIMEOUT", "50s", "how long one step waits for it before the job retries later (must stay under the step timeout, 1m)", false},

	// GPU utilization (DCGM_FI_DEV_GPU_UTIL by namespace) from Prometheus.
	{"prometheus-url", "PORTAL_PROMETHEUS_URL", "", "Prometheus base URL (http://prometheus.monitoring:9090) or Amazon Managed Service for Prometheus workspace URL (https://aps-workspaces.<region>.amazonaws.com/workspaces/<id>) to read GPU utilization from; empty: pages show allocation only", false},
	{"prometheus-sigv4-region", "PORTAL_PROMETHEUS_SIGV4_REGION", "", "sign Prometheus queries with AWS SigV4 (service aps) for this region, with the default AWS credential chain; default: the region of an aps-workspaces URL, unsigned otherwise", false},
	{"prometheus-namespace-label", "PORTAL_PROMETHEUS_NAMESPACE_LABEL", "namespace", "label of DCGM_FI_DEV_GPU_UTIL holding the GPU's pod namespace (exported_namespace when the scrape renamed the exporter's label)", false},
}

// parseConfig reads args (after the subcommand) and env into a Config and
// validates it, returning every problem at once.
func parseConfig(cmd string, args []string, getenv func(string) string, usageOut io.Writer) (Config, error) {
	fs := flag.NewFlagSet("portal "+cmd, flag.ContinueOnError)
	fs.SetOutput(usageOut)
	v := &flagValues{vals: defineFlags(fs, getenv)}
	fs.Usage = func() {
		fmt.Fprintf(usageOut, "usage: portal %s [flags]\n\nEvery flag can also be set with the environment variable in brackets.\n\n", cmd)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected argument %q (flags go after the subcommand: portal %s --flag=value)", fs.Arg(0), cmd)
	}
	c := v.config()
	return c, errors.Join(append(v.errs, c.validate(cmd)...)...)
}

// defineFlags defines every flag of specs on fs, each defaulting to its
// environment variable when set, and returns where their values land.
func defineFlags(fs *flag.FlagSet, getenv func(string) string) map[string]*string {
	vals := map[string]*string{}
	for _, s := range specs {
		def := s.def
		if v := getenv(s.env); v != "" {
			def = v
		}
		if s.boolean {
			v := def
			fs.Var(boolFlag{&v}, s.name, s.help+" ["+s.env+"]")
			vals[s.name] = &v
			continue
		}
		vals[s.name] = fs.String(s.name, def, s.help+" ["+s.env+"]")
	}
	return vals
}

// flagValues reads the parsed flags as typed values, collecting one error
// per flag that does not parse, so that every bad flag is reported at once.
type flagValues struct {
	vals map[string]*string
	errs []error
}

func (v *flagValues) str(name string) string { return strings.TrimSpace(*v.vals[name]) }

func (v *flagValues) dur(name string) time.Duration {
	d, err := time.ParseDuration(*v.vals[name])
	if err != nil || d <= 0 {
		v.errs = append(v.errs, fmt.Errorf("--%s: %q is not a positive duration such as 30m or 12h", name, *v.vals[name]))
	}
	return d
}

// positiveInt is the whole number flag name holds, from 1 to most.
func (v *flagValues) positiveInt(name string, most int) int {
	n, err := strconv.Atoi(strings.TrimSpace(*v.vals[name]))
	if err != nil || n <= 0 || n > most {
		v.errs = append(v.errs, fmt.Errorf("--%s: %q is not a whole number from 1 to %d", name, *v.vals[name], most))
	}
	return n
}

// The bounds of the whole-number flags. A token's API limit may go
// higher than the others: a minute of one token at full speed is more
// than 100,000 requests (make bench's API row, issue 33: 64 clients, one
// token, about 12,000 requests a second, met a limit of 100,000 a minute
// within its second run), and a deployment may trust its pipelines'
// tokens as much.
const (
	maxWholeFlag    = 100000
	maxAPIRateLimit = 10000000
)

func (v *flagValues) boolean(name string) bool {
	b, err := strconv.ParseBool(*v.vals[name])
	if err != nil {
		v.errs = append(v.errs, fmt.Errorf("--%s: %q is not true or false", name, *v.vals[name]))
	}
	return b
}

func (v *flagValues) cidrs(name string) []*net.IPNet {
	var out []*net.IPNet
	for _, f := range strings.Split(*v.vals[name], ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		_, n, err := net.ParseCIDR(f)
		if err != nil {
			v.errs = append(v.errs, fmt.Errorf("--%s: %q is not a CIDR such as 10.0.0.0/16", name, f))
			continue
		}
		out = append(out, n)
	}
	return out
}

// config is the Config the flags say, with the defaults that depend on
// other flags (log format, session key file in --dev).
func (v *flagValues) config() Config {
	c := Config{
		Listen:                v.str("listen"),
		OpsListen:             v.str("ops-listen"),
		OpsPprof:              v.boolean("ops-pprof"),
		BaseURL:               strings.TrimRight(v.str("base-url"), "/"),
		DB:                    v.str("db"),
		OIDCIssuer:            v.str("oidc-issuer"),
		OIDCClientID:          v.str("oidc-client-id"),
		OIDCClientSecretFile:  v.str("oidc-client-secret-file"),
		OIDCGroupsClaim:       v.str("oidc-groups-claim"),
		GroupsFile:            v.str("groups-file"),
		SessionKeyFile:        v.str("session-key-file"),
		SessionIdleTimeout:    v.dur("session-idle-timeout"),
		SessionLifetime:       v.dur("session-lifetime"),
		GroupsRecheckInterval: v.dur("groups-recheck-interval"),
		LoginRateLimit:        v.positiveInt("login-rate-limit", maxWholeFlag),
		APITokenMaxDays:       v.positiveInt("api-token-max-days", maxWholeFlag),
		APIRateLimit:          v.positiveInt("api-rate-limit", maxAPIRateLimit),
		LogFormat:             v.str("log-format"),
		LogLevel:              v.str("log-level"),
		Dev:                   v.boolean("dev"),
		DevAllowRemote:        v.boolean("dev-allow-remote"),
		DemoReviews:           v.boolean("demo-reviews"),
		DemoUsage:             v.boolean("demo-usage"),
		TrustedProxies:        v.cidrs("trusted-proxies"),
		ShutdownTimeout:       v.dur("shutdown-timeout"),
		UsageRetention:        v.dur("usage-retention"),
		UsageInterval:         v.dur("usage-interval"),
		ReviewInterval:        v.dur("review-interval"),
		Kubeconfig:            v.str("kubeconfig"),
		SlurmConf:             v.str("slurm-conf"),
		SlurmControllerGroup:  v.str("slurm-controller-group"),
		SlurmBin:              v.str("slurm-bin"),
		OnRevoke:              v.str("on-revoke"),
		ClusterSettingsFile:   v.str("cluster-settings"),
		RateCardFile:          v.str("rate-card"),

		IdentityStoreID:            v.str("identity-store-id"),
		IdentityStoreUserAttribute: v.str("identity-store-user-attribute"),
		IdentityStoreCacheTTL:      v.dur("identity-store-cache-ttl"),
		AWSSettingsFile:            v.str("aws-settings"),
		AWSRegion:                  v.str("aws-region"),
		AWSEndpoints:               map[string]string{},
		AWSPollInterval:            v.dur("aws-poll-interval"),
		AWSPollTimeout:             v.dur("aws-poll-timeout"),

		PrometheusURL:            v.str("prometheus-url"),
		PrometheusSigV4Region:    v.str("prometheus-sigv4-region"),
		PrometheusNamespaceLabel: v.str("prometheus-namespace-label"),

		Notify: notifyConfig(v.vals, v.boolean),

		LeaderElection:          v.str("leader-election"),
		LeaderElectionNamespace: v.str("leader-election-namespace"),
		LeaderID:                v.str("leader-id"),
	}
	for _, svc := range awsServices {
		if v := strings.TrimRight(strings.TrimSpace(*v.vals["aws-endpoint-"+svc]), "/"); v != "" {
			c.AWSEndpoints[svc] = v
		}
	}
	for _, s := range strings.Split(*v.vals["oidc-scopes"], ",") {
		if s = strings.TrimSpace(s); s != "" {
			c.OIDCScopes = append(c.OIDCScopes, s)
		}
	}
	for _, s := range strings.Split(*v.vals["machine-audiences"], ",") {
		if s = strings.TrimSpace(s); s != "" {
			c.MachineAudiences = append(c.MachineAudiences, s)
		}
	}
	if c.LogFormat == "" {
		c.LogFormat = "json"
		if c.Dev {
			c.LogFormat = "text"
		}
	}
	if c.SessionKeyFile == "" && c.Dev {
		c.SessionKeyFile = "data/session.key"
	}
	return c
}

func (c Config) validate(cmd string) []error {
	var errs []error
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("--log-format: %q must be text or json", c.LogFormat))
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("--log-level: %q must be debug, info, warn or error", c.LogLevel))
	}
	if c.DB == "" {
		errs = append(errs, errors.New("--db: a database is required (a SQLite file path or a postgres:// URL)"))
	}
	switch c.LeaderElection {
	case "auto", "database":
	case "kubernetes":
		if c.Kubeconfig == "" {
			errs = append(errs, errors.New("--leader-election: kubernetes needs --kubeconfig (the cluster holding the Lease)"))
		}
	default:
		errs = append(errs, fmt.Errorf("--leader-election: %q must be auto, kubernetes or database", c.LeaderElection))
	}
	if c.SlurmConf != "" && c.SlurmControllerGroup != "" {
		errs = append(errs, errors.New("--slurm-conf and --slurm-controller-group: choose one Slurm transport (the local commands, or Session Manager to the controller)"))
	}
	if c.SlurmBin != "" && c.SlurmControllerGroup == "" {
		errs = append(errs, errors.New("--slurm-bin: only with --slurm-controller-group (the local transport uses this machine's PATH)"))
	}
	if c.OnRevoke != "lock" && c.OnRevoke != "delete" {
		errs = append(errs, fmt.Errorf("--on-revoke: %q must be lock or delete", c.OnRevoke))
	}
	errs = append(errs, c.validateIdentityStore()...)
	errs = append(errs, c.validatePrometheus()...)
	errs = append(errs, c.Notify.validate()...)
	errs = append(errs, c.validateAWS()...)
	if cmd != "serve" {
		return errs
	}
	return append(errs, c.validateServe()...)
}

func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// readSecretFile reads a secret, trimming surrounding whitespace. The error
// names the file, never the content.
func readSecretFile(flagName, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--%s: %w", flagName, err)
	}
	if err := ownerOnly(flagName, path); err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("--%s: %s is empty", flagName, path)
	}
	return s, nil
}

// validateAWS checks the AWS endpoints and the polling of AWS steps.
func (c Config) validateAWS() []error {
	var errs []error
	for _, svc := range awsServices {
		if v, ok := c.AWSEndpoints[svc]; ok {
			if u, err := url.Parse(v); err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && isLoopbackHost(u.Hostname()))) {
				errs = append(errs, fmt.Errorf("--aws-endpoint-%s: %q must be an https URL (http only on loopback, for test endpoints)", svc, v))
			}
		}
	}
	if c.AWSPollTimeout > 55*time.Second {
		errs = append(errs, fmt.Errorf("--aws-poll-timeout: %s is longer than a step may run (under 1m): a longer wait is the job's retry", c.AWSPollTimeout))
	}
	if c.AWSPollInterval > 0 && c.AWSPollTimeout > 0 && c.AWSPollInterval > c.AWSPollTimeout {
		errs = append(errs, errors.New("--aws-poll-interval: must not be longer than --aws-poll-timeout"))
	}
	return errs
}

// validateServe checks what only serve uses: where it listens, its URL,
// sessions, the demo data, and the identity provider (the built-in one in
// --dev, a real one otherwise).
func (c Config) validateServe() []error {
	var errs []error
	host, port, err := net.SplitHostPort(c.Listen)
	if err != nil {
		errs = append(errs, fmt.Errorf("--listen: %q is not host:port (%v)", c.Listen, err))
	} else if _, err := strconv.Atoi(port); err != nil {
		errs = append(errs, fmt.Errorf("--listen: port %q is not a number", port))
	}
	if c.BaseURL != "" {
		u, err := url.Parse(c.BaseURL)
		switch {
		case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
			errs = append(errs, fmt.Errorf("--base-url: %q must be an absolute http(s) URL such as https://portal.example.com", c.BaseURL))
		case u.RawQuery != "" || u.Fragment != "":
			errs = append(errs, fmt.Errorf("--base-url: %q must not have a query or fragment", c.BaseURL))
		case u.Scheme == "http" && !c.Dev && !isLoopbackHost(u.Hostname()):
			errs = append(errs, fmt.Errorf("--base-url: %q uses plain http on a non-loopback host; session cookies would travel unencrypted. Put TLS in front and use https://", c.BaseURL))
		}
	}
	if c.OpsPprof && c.OpsListen == "" {
		// Never on --listen: the profiles show the process's memory
		// and code paths to whoever reaches them.
		errs = append(errs, errors.New("--ops-pprof: needs --ops-listen (the profiles are served only on the operations listener, never on --listen)"))
	}
	if c.SessionLifetime > 0 && c.SessionIdleTimeout > c.SessionLifetime {
		errs = append(errs, errors.New("--session-idle-timeout: must not be longer than --session-lifetime"))
	}
	if c.DemoReviews && !c.Dev {
		errs = append(errs, errors.New("--demo-reviews: only with --dev (it makes demo connections and reviews)"))
	}
	if c.DemoUsage && !c.Dev {
		errs = append(errs, errors.New("--demo-usage: only with --dev (it writes made-up usage)"))
	}
	if c.DemoUsage && c.Kubeconfig != "" {
		errs = append(errs, errors.New("--demo-usage: not with --kubeconfig: made-up hours would be mixed with the usage measured on the cluster"))
	}
	if c.Dev {
		return append(errs, c.validateDev(host, err == nil)...)
	}
	return append(errs, c.validateProduction()...)
}

// validateDev refuses a --dev portal that others could reach: anyone who
// reaches it could sign in as any demo user.
func (c Config) validateDev(host string, listenOK bool) []error {
	var errs []error
	if listenOK && !isLoopbackHost(host) && !c.DevAllowRemote {
		errs = append(errs, fmt.Errorf("--dev: refusing to listen on %q, which is not a loopback address: anyone who reaches it could sign in as any demo user. Use --listen=127.0.0.1:PORT, or add --dev-allow-remote if you really mean it", c.Listen))
	}
	if c.BaseURL != "" && !c.DevAllowRemote {
		if u, perr := url.Parse(c.BaseURL); perr == nil && u.Host != "" && !isLoopbackHost(u.Hostname()) {
			errs = append(errs, fmt.Errorf("--dev: refusing --base-url %q, which is not a loopback address: anyone who reaches it could sign in as any demo user. Use --base-url=http://127.0.0.1:PORT, or add --dev-allow-remote if you really mean it", c.BaseURL))
		}
	}
	if c.OIDCIssuer != "" || c.OIDCClientID != "" || c.OIDCClientSecretFile != "" {
		errs = append(errs, errors.New("--dev uses the built-in identity provider: drop --oidc-issuer, --oidc-client-id and --oidc-client-secret-file, or drop --dev"))
	}
	if len(c.MachineAudiences) > 0 {
		errs = append(errs, errors.New("--machine-audiences: not with --dev (the built-in identity provider issues no machine tokens)"))
	}
	return errs
}

// validateProduction requires what a real identity provider needs.
func (c Config) validateProduction() []error {
	var errs []error
	if c.BaseURL == "" {
		errs = append(errs, errors.New("--base-url: required (the URL users open; the OIDC redirect URI is <base-url>/auth/callback)"))
	}
	if c.OIDCIssuer == "" {
		errs = append(errs, errors.New("--oidc-issuer: required (or use --dev for the built-in identity provider)"))
	} else if u, err := url.Parse(c.OIDCIssuer); err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && isLoopbackHost(u.Hostname()))) {
		errs = append(errs, fmt.Errorf("--oidc-issuer: %q must be an https URL (http only on loopback)", c.OIDCIssuer))
	}
	if c.OIDCClientID == "" {
		errs = append(errs, errors.New("--oidc-client-id: required"))
	}
	if c.OIDCClientSecretFile == "" {
		errs = append(errs, errors.New("--oidc-client-secret-file: required (a file holding the client secret, e.g. a mounted Kubernetes secret)"))
	}
	if c.GroupsFile == "" {
		errs = append(errs, errors.New("--groups-file: required (YAML mapping groups to roles and teams; see docs/configuration.md)"))
	}
	if c.SessionKeyFile == "" {
		errs = append(errs, errors.New("--session-key-file: required (at least 32 random bytes, e.g. `openssl rand -hex 32 > session.key`)"))
	}
	return errs
}
