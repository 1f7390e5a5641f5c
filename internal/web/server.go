package web

import (
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyperpod-governance/portal/internal/auth"
	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/signing"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// LeaderStatus is what /readyz says of the leader election.
type LeaderStatus interface {
	Identity() string // this process
	Leader() string   // the leader last observed, "" before any
	IsLeader() bool
	Lock() string // what the election runs on
}

// Options configures the HTTP layer. cmd/portal builds it from the validated
// Config; tests build it directly.
type Options struct {
	// TrustedProxies are the peers whose X-Forwarded-For header names the
	// client (c.RealIP, logged as remote_ip); nil trusts nobody's.
	TrustedProxies []*net.IPNet
	DB             *store.DB
	OIDC           *auth.Client
	Mapping        auth.Mapping
	Logger         *slog.Logger
	BaseURL        *url.URL
	Version        string

	// Groups, when set, is where a user's groups come from at login (IAM
	// Identity Center's identity store, cached): they replace the groups in
	// the token before Mapping resolves them. GroupsUser says which claim is
	// the user's name there (default email).
	Groups     auth.GroupSource
	GroupsUser auth.UserAttribute

	// SeparateOps: /readyz and /metrics are served by OpsHandler on their
	// own listener, not by Handler (which the Ingress routes).
	SeparateOps bool

	SessionKey         []byte
	SessionIdleTimeout time.Duration
	SessionLifetime    time.Duration

	// GroupsRecheckInterval is how long the groups confirmed at login or at
	// the last re-check are trusted for reads (default
	// DefaultGroupsRecheckInterval); state-changing requests re-check at
	// once. See recheck.go.
	GroupsRecheckInterval time.Duration

	// LoginRateLimit is how many requests to /login and /auth/callback
	// together one client address (c.RealIP, so X-Forwarded-For counts
	// only from TrustedProxies) may make per minute, also the burst
	// allowed at once (default DefaultLoginRateLimit).
	LoginRateLimit int

	// APITokenMaxLifetime is the longest lifetime a person may give an
	// API token (default workflow.DefaultTokenMaxLifetime, 90 days).
	APITokenMaxLifetime time.Duration
	// APIRateLimit is how many API requests one token may make per minute,
	// also the burst allowed at once (default DefaultAPIRateLimit).
	APIRateLimit int
	// Machines verifies the machine identities' tokens of the identity
	// provider (auth.MachineVerifier; nil: none is accepted). The groups
	// file (Mapping.Machines) names the machines and their groups.
	Machines *auth.MachineVerifier

	// DevIdP, when set, is the built-in development identity provider,
	// mounted under /dev-idp/. Every page then shows a banner.
	DevIdP http.Handler

	// Registry receives the HTTP metrics; /metrics serves it.
	Registry *prometheus.Registry

	// Leader, when set, is this process's view of the leader election
	// (*leader.Status): /readyz names the leader and this process.
	Leader LeaderStatus

	// Cluster is how plans are built for this cluster; DryRun says that no
	// cluster is configured, so plans are recorded but not applied.
	Cluster provision.ClusterSettings
	DryRun  bool
	// SlurmTransport says a Slurm transport is configured: Slurm
	// connections' jobs run through it even when DryRun (a portal for a
	// HyperPod Slurm cluster has no Kubernetes cluster; see dryRunFor).
	SlurmTransport bool
	// Live compares a plan with the cluster (nil in dry-run mode), so the
	// approval page shows what each object would create or change, and
	// reads the plan's namespace: one that exists and that neither the
	// portal nor HyperPod created is approved only when adopted.
	Live interface {
		Drift(ctx context.Context, p provision.Plan) ([]workflow.DriftItem, error)
		CheckNamespace(ctx context.Context, p provision.Plan) (provision.NamespaceCheck, error)
	}

	// OnLogin, when set, is told of each sign-in once its groups are
	// recorded (cmd/portal: the review scheduler checks whether an owner of
	// a live contract left the team's owners group). Its failure is logged;
	// the sign-in goes on.
	OnLogin func(ctx context.Context, email string) error
	// KnownOwners are emails accepted as contract owners even before they
	// have logged in (the dev provider's demo users).
	KnownOwners []string

	// BodyLimit caps request bodies, e.g. "1M".
	BodyLimit string

	Now func() time.Time
	// SchedulerCalls says that the provisioning worker makes the cluster's
	// task-governance scheduler config calls: the admins' /admin/scheduler
	// page queues a job that reconciles it. False: the job records the
	// calls it would make (a dry run), and the page says so.
	SchedulerCalls bool
	// ClusterCheck reads what the cluster serves and holds: the readiness
	// page (/admin/cluster) and the inventory's "Refresh from cluster".
	// Nil: nothing is read (every check unknown, no refresh).
	ClusterCheck ClusterChecker
	// ClusterCanRefresh: ClusterCheck has a source to read the inventory
	// from (a cluster or SageMaker), so the refresh is offered.
	ClusterCanRefresh bool
	// AWSPreview, when set, looks up what each AWS call of a plan would do
	// before approval (read-only); nil leaves the plan uncompared.
	AWSPreview provision.AWSPreviewer
	// LifecycleCheck, when set, simulates the contract's project and
	// access roles for the cluster lifecycle actions at approval, which is
	// refused while one is allowed.
	LifecycleCheck provision.ClusterLifecycleChecker
	// Quotas tags a compute quota made outside the portal as a
	// connection's when an admin adopts it (POST /connections/:id/adopt-quota);
	// nil without real AWS calls, and the page offers no adoption.
	Quotas provision.QuotaAdopter
	// Utilization is how busy each namespace's allocated GPUs are, from
	// Prometheus (--prometheus-url). Nil when not configured
	// (usage.Configured): usage pages then show allocation only and say so.
	Utilization usage.Utilization
	// RateCard prices usage (--rate-card); nil: pages show usage without
	// money and say why, and no month is closed.
	RateCard *usage.RateCard
	// Workloads reads a team's waiting Kueue Workloads for the member's
	// page; nil without a cluster (the page says so).
	Workloads WorkloadReader
	// NotifyChannels are the channels notices are delivered on (inapp,
	// and email and webhook when configured), for the admins' page of
	// failing deliveries.
	NotifyChannels []string
	// Signer is the installation's signing key: evidence bundles are
	// signed with it and EvidenceKeyPath publishes its public half. Nil:
	// New loads it (LoadSigner), making it on the installation's first
	// start.
	Signer *signing.Signer
}

// Server is the portal's HTTP handler and the session manager behind it.
type Server struct {
	opts     Options
	echo     *echo.Echo
	sessions *scs.SessionManager
	pages    pageCache // cachePage
	// teamHourReads counts teamHours' reads (for tests).
	teamHourReads atomic.Int64
	store         *store.SessionStore
	tls           bool

	// loginSeal seals the login-state cookie, tokenSeal the provider's
	// tokens kept in the session; both under keys derived from SessionKey.
	loginSeal, tokenSeal sealer
	recheckGate          recheckGate

	// planTexts caches each contract version's plan YAML and hash (see
	// planview.go).
	planTexts planTextCache

	// monthCache keeps the month-to-date chargeback per cost input
	// version and hour (see monthcache.go).
	monthCache monthCache

	// knownOwners are the lower-case names accepted as contract owners
	// without a login: mapped group names and Options.KnownOwners.
	knownOwners map[string]bool

	// decideHooks let tests interleave other requests with a decision.
	// Nil outside tests.
	decideHooks decideHooks
}

// decideHooks are the points of decide where a test can run other requests:
// loaded, after the connection and the facts its permission check uses
// were read but before the request body is; checked, after every check of
// the handler passed, just before the store records the decision. Whatever
// changed meanwhile must be caught inside the store's transaction.
type decideHooks struct {
	loaded, checked func()
}

func init() {
	// Session values are gob-encoded by scs.
	gob.Register(sessionUser{})
}

// New builds the server. It does not listen; use Handler with an http.Server.
func New(o Options) (*Server, error) {
	if o.DB == nil || o.OIDC == nil || o.Logger == nil || o.BaseURL == nil {
		return nil, errors.New("web: DB, OIDC, Logger and BaseURL are required")
	}
	if o.Groups != nil && o.GroupsUser != "" && !o.GroupsUser.Valid() {
		return nil, fmt.Errorf("web: GroupsUser %q is not one of %v", o.GroupsUser, auth.UserAttributes)
	}
	o = o.withDefaults()
	st, err := o.DB.Sessions(o.SessionKey)
	if err != nil {
		return nil, err
	}
	if o.Signer == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		o.Signer, _, err = LoadSigner(ctx, o.DB, o.SessionKey, o.Now())
		cancel()
		if err != nil {
			return nil, err
		}
	}
	s := &Server{opts: o, store: st, tls: o.BaseURL.Scheme == "https",
		loginSeal: newSealer(o.SessionKey, "login state cookie"), tokenSeal: newSealer(o.SessionKey, "session tokens")}
	s.pages.views = newPageCacheViews()
	o.Registry.MustRegister(s.pages.views, prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "portal_api_read_uses_lost_total",
		Help: "API reads whose token.use event was not recorded: their batch's transaction failed after the read was answered (store.DB.QueueTokenUse).",
	}, func() float64 { return float64(o.DB.LostAPIUses()) }))
	s.knownOwners = knownOwnersOf(o)

	sm := scs.New()
	sm.Store = st
	sm.Codec = sessionCodec{}
	sm.IdleTimeout = o.SessionIdleTimeout
	// The idle timeout makes scs commit every session on every request,
	// only to move its expiry; the store writes that at most once per
	// refresh (a tenth of the idle timeout: 3 minutes at the default 30),
	// so a page view is not a database write (issue 15; docs/security.md,
	// Sign-in and sessions). Each such write moves the data version, and
	// so re-renders every cached page of every session: capped at a
	// minute, as it was, every active user did that once a minute.
	st.SetRefreshGranularity(o.SessionIdleTimeout / 10)
	sm.Lifetime = o.SessionLifetime
	sm.Cookie.Name = "portal_session"
	sm.Cookie.HttpOnly = true
	sm.Cookie.SameSite = http.SameSiteLaxMode // Lax: the IdP's redirect back is a top-level GET
	sm.Cookie.Secure = s.tls
	sm.Cookie.Path = "/"
	sm.Cookie.Persist = false // a browser session cookie; the server enforces both timeouts
	sm.ErrorFunc = func(w http.ResponseWriter, r *http.Request, err error) {
		o.Logger.ErrorContext(r.Context(), "session store failed", "err", err, "path", r.URL.Path)
		http.Error(w, "The portal could not load your session. Please try again.", http.StatusServiceUnavailable)
	}
	s.sessions = sm

	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleError
	e.IPExtractor = ipExtractor(o.TrustedProxies)
	s.echo = e
	s.routes()
	return s, nil
}

// withDefaults is o with every unset setting at its default.
func (o Options) withDefaults() Options {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.BodyLimit == "" {
		o.BodyLimit = "1M"
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	if o.SessionIdleTimeout <= 0 {
		o.SessionIdleTimeout = 30 * time.Minute
	}
	if o.SessionLifetime <= 0 {
		o.SessionLifetime = 12 * time.Hour
	}
	if o.GroupsRecheckInterval <= 0 {
		o.GroupsRecheckInterval = DefaultGroupsRecheckInterval
	}
	if o.LoginRateLimit <= 0 {
		o.LoginRateLimit = DefaultLoginRateLimit
	}
	if o.APITokenMaxLifetime < 24*time.Hour {
		o.APITokenMaxLifetime = workflow.DefaultTokenMaxLifetime
	}
	if o.APIRateLimit <= 0 {
		o.APIRateLimit = DefaultAPIRateLimit
	}
	return o
}

// knownOwnersOf is the set of addresses and groups (lower-cased) the
// identity mapping names: known owners, role groups and team groups.
func knownOwnersOf(o Options) map[string]bool {
	known := map[string]bool{}
	for _, e := range o.KnownOwners {
		known[strings.ToLower(e)] = true
	}
	for _, gs := range o.Mapping.Roles {
		for _, g := range gs {
			known[strings.ToLower(g)] = true
		}
	}
	for _, tg := range o.Mapping.Teams {
		for _, g := range append(slices.Clone(tg.Owners), tg.Members...) {
			known[strings.ToLower(g)] = true
		}
	}

	return known
}

// ipExtractor believes X-Forwarded-For only from the configured proxies:
// echo's default would take it from anyone, so any client could write the
// address the logs record. Loopback, link-local and private peers are not
// trusted by default either (echo trusts them unless told not to).
func ipExtractor(trusted []*net.IPNet) echo.IPExtractor {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, n := range trusted {
		opts = append(opts, echo.TrustIPRange(n))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

// Handler returns the portal's root HTTP handler.
func (s *Server) Handler() http.Handler { return s.echo }

// CleanupSessions deletes expired sessions every interval until ctx ends.
func (s *Server) CleanupSessions(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n, err := s.store.DeleteExpired(ctx, s.opts.Now())
			if err != nil && ctx.Err() == nil {
				s.opts.Logger.Error("session cleanup failed", "err", err)
			} else if n > 0 {
				s.opts.Logger.Info("expired sessions removed", "count", n)
			}
		}
	}
}

// isAnonymousPath reports paths that need no session: assets, probes,
// metrics and the development IdP (which keeps its own state).
func isAnonymousPath(p string) bool {
	return strings.HasPrefix(p, "/static/") || strings.HasPrefix(p, "/dev-idp/") ||
		p == "/healthz" || p == "/readyz" || p == "/metrics" || p == "/favicon.ico"
}
