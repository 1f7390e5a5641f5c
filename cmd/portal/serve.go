package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/rest"

	"github.com/hyperpod-governance/portal/internal/auth"
	"github.com/hyperpod-governance/portal/internal/collect"
	"github.com/hyperpod-governance/portal/internal/collect/slurmusage"
	"github.com/hyperpod-governance/portal/internal/devidp"
	"github.com/hyperpod-governance/portal/internal/leader"
	"github.com/hyperpod-governance/portal/internal/notify"
	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/review"
	"github.com/hyperpod-governance/portal/internal/signing"
	"github.com/hyperpod-governance/portal/internal/slurm"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/usage/prom"
	"github.com/hyperpod-governance/portal/internal/web"
)

// serve runs the portal until ctx ends: it opens and migrates the store,
// binds the listeners, loads the identity and the cluster's settings,
// assembles the parts, then serves HTTP while the background work runs, and
// shuts down in order (listeners, then the work, then the store).
func serve(ctx context.Context, cfg Config, logger *slog.Logger, stdout io.Writer) error {
	db, err := openStore(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer db.Close()
	ls, err := listen(cfg)
	if err != nil {
		return err
	}
	defer ls.close()
	id, err := loadIdentity(cfg, ls.base)
	if err != nil {
		return err
	}
	// The installation's signing key: made on the first start, shared by
	// every replica (web.LoadSigner).
	signer, created, err := web.LoadSigner(ctx, db, id.sessionKey, time.Now())
	if err != nil {
		return err
	}
	id.signer = signer
	logger.Info("evidence signing key", "key_id", signer.KeyID(), "made_now", created)
	rates, err := loadRateCard(cfg.RateCardFile)
	if err != nil {
		return err
	}
	if cfg.Dev {
		if err := seedDev(ctx, db); err != nil {
			return err
		}
	}
	p, err := assemble(ctx, cfg, db, id, ls.base, rates, logger)
	if err != nil {
		return err
	}
	srv, err := newWebServer(cfg, db, ls, id, rates, p, logger)
	if err != nil {
		return err
	}
	stopWork := startWork(ctx, cfg, db, srv, p, rates, logger)
	return serveUntilDone(ctx, cfg, ls, srv, stopWork, logger, stdout)
}

// openStore opens the database named by --db and migrates it.
func openStore(ctx context.Context, cfg Config, logger *slog.Logger) (*store.DB, error) {
	db, err := store.Open(ctx, cfg.DB)
	if err != nil {
		return nil, err
	}
	st, err := db.Migrate(ctx)
	if err != nil {
		db.Close()
		return nil, err
	}
	logger.Info("database ready", "db", store.RedactDSN(cfg.DB), "schema_version", st.Current)
	return db, nil
}

// listeners are the bound sockets and the portal's public base URL.
type listeners struct {
	ln, ops net.Listener // ops: the operations listener, or nil
	base    string
	baseURL *url.URL
}

// listen binds --listen and, when set, --ops-listen (/metrics, /readyz: a
// port the Ingress does not route; issue 32 item 6), and settles the base
// URL (--dev without --base-url derives it from the bound address).
func listen(cfg Config) (*listeners, error) {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", cfg.Listen, err)
	}
	ls := &listeners{ln: ln, base: cfg.BaseURL}
	if cfg.OpsListen != "" {
		if ls.ops, err = net.Listen("tcp", cfg.OpsListen); err != nil {
			ls.close()
			return nil, fmt.Errorf("--ops-listen %s: %w", cfg.OpsListen, err)
		}
	}
	if ls.base == "" { // --dev only (validated)
		ls.base = "http://" + ln.Addr().String()
	}
	if ls.baseURL, err = url.Parse(ls.base); err != nil {
		ls.close()
		return nil, fmt.Errorf("--base-url: %w", err)
	}
	return ls, nil
}

func (ls *listeners) close() {
	ls.ln.Close()
	if ls.ops != nil {
		ls.ops.Close()
	}
}

// identity is how users sign in: the OIDC client's settings, the groups
// mapping, the session key, and in --dev the built-in provider.
type identity struct {
	oidc        auth.OIDCConfig
	mapping     auth.Mapping
	sessionKey  []byte
	signer      *signing.Signer
	devHandler  http.Handler // --dev only
	knownOwners []string     // --dev only: the demo users
}

func loadIdentity(cfg Config, base string) (identity, error) {
	var id identity
	var err error
	if id.sessionKey, err = loadSessionKey(cfg); err != nil {
		return id, err
	}
	id.mapping = auth.DevMapping()
	if cfg.GroupsFile != "" {
		if id.mapping, err = auth.LoadMapping(cfg.GroupsFile); err != nil {
			return id, err
		}
	}
	redirect := base + "/auth/callback"
	id.oidc = auth.OIDCConfig{
		Issuer: cfg.OIDCIssuer, ClientID: cfg.OIDCClientID, RedirectURL: redirect,
		Scopes: cfg.OIDCScopes, GroupsClaim: cfg.OIDCGroupsClaim,
	}
	if !cfg.Dev {
		id.oidc.ClientSecret, err = readSecretFile("oidc-client-secret-file", cfg.OIDCClientSecretFile)
		return id, err
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return id, err
	}
	id.oidc.Issuer = base + "/dev-idp"
	id.oidc.ClientID = "portal-dev"
	// The dev provider issues refresh tokens for offline_access; the
	// group re-checks use them (see internal/web/recheck.go).
	if !slices.Contains(id.oidc.Scopes, "offline_access") {
		id.oidc.Scopes = append(slices.Clone(id.oidc.Scopes), "offline_access")
	}
	id.oidc.ClientSecret = hex.EncodeToString(secret)
	id.devHandler, err = devidp.New(devidp.Config{
		Issuer: id.oidc.Issuer, ClientID: id.oidc.ClientID, ClientSecret: id.oidc.ClientSecret,
		RedirectURIs:           []string{redirect},
		PostLogoutRedirectURIs: []string{base + "/signed-out"},
		Users:                  devidp.DemoUsers(),
		StylesheetURL:          "/static/app.css?v=" + version,
	})
	if err != nil {
		return id, fmt.Errorf("development identity provider: %w", err)
	}
	for _, u := range devidp.DemoUsers() {
		id.knownOwners = append(id.knownOwners, u.Email)
	}
	return id, nil
}

// parts are the portal's working pieces, assembled from the settings before
// anything runs: what reads and writes the cluster and AWS, the worker, the
// loops the leader runs and the sources the pages read.
type parts struct {
	kube      *rest.Config // nil: dry run
	cluster   provision.ClusterSettings
	side      awsSide
	applier   *provision.Applier // nil without a cluster
	worker    *provision.Worker
	checker   *provision.ClusterChecker
	groups    auth.GroupSource // nil: groups come from the sign-in token
	util      usage.Utilization
	notifier  *notify.Worker
	channels  []string
	reviews   *review.Scheduler
	elector   leader.Elector
	collector *collect.Collector // nil without a cluster
	// slurmUsage reads the Slurm teams' usage; nil without a Slurm
	// transport (--slurm-conf or --slurm-controller-group).
	slurmUsage *slurmusage.Reader
	drift      *provision.DriftChecker // nil without a cluster
}

func assemble(ctx context.Context, cfg Config, db *store.DB, id identity, base string, rates *usage.RateCard, logger *slog.Logger) (*parts, error) {
	p := &parts{}
	var err error
	if p.kube, err = kubeConfig(cfg.Kubeconfig); err != nil {
		return nil, err
	}
	if p.cluster, err = loadCluster(cfg); err != nil {
		return nil, err
	}
	if p.side, err = loadAWS(ctx, cfg, id.mapping, p.kube == nil, logger); err != nil {
		return nil, err
	}
	p.cluster.AWS = p.side.Settings
	if cfg.SlurmConf != "" {
		// The local transport: the Slurm client commands on this machine
		// (the other, Session Manager's, loadAWS makes).
		p.side.Slurm = slurm.Local{Conf: cfg.SlurmConf}
	}
	if err := p.cluster.Check(); err != nil {
		return nil, err
	}
	if cfg.Dev && cfg.DemoReviews {
		if n, err := seedDemoReviews(ctx, db, p.cluster, time.Now()); err != nil {
			return nil, fmt.Errorf("demo reviews: %w", err)
		} else if n > 0 {
			logger.Info("demo reviews seeded", "reviews", n)
		}
	}
	if err := p.assembleProvisioning(ctx, cfg, db, logger); err != nil {
		return nil, err
	}
	if p.groups, err = identityStoreGroups(ctx, cfg); err != nil {
		return nil, err
	}
	if p.groups != nil {
		logger.Info("users' groups come from the IAM Identity Center identity store",
			"identity_store_id", cfg.IdentityStoreID, "user_attribute", cfg.IdentityStoreUserAttribute,
			"cache_ttl", cfg.IdentityStoreCacheTTL.String())
	}
	if p.util, err = utilizationSource(ctx, cfg, logger); err != nil {
		return nil, err
	}
	if p.notifier, p.channels, err = notifyWorker(cfg.Notify, db, id.mapping, base, logger); err != nil {
		return nil, err
	}
	// Recipients are confirmed at delivery: in the directory when groups
	// come from it, otherwise by groups confirmed within a session's
	// lifetime (issue 32 item 1).
	if p.groups != nil {
		p.notifier.Directory = p.groups
	}
	p.notifier.MaxGroupsAge = cfg.SessionLifetime
	if p.reviews, err = newReviewScheduler(ctx, db, cfg, id.mapping, rates, p.cluster, p.kube, logger.With("component", "reviews")); err != nil {
		return nil, err
	}
	if p.elector, err = newElector(cfg, p.kube, db, logger); err != nil {
		return nil, err
	}
	if p.side.Slurm != nil {
		p.slurmUsage = newSlurmUsageReader(p.side.Slurm, db, p.cluster, cfg, logger)
		// A drained or down Slurm node the reader writes wakes the
		// capacity trigger too.
		p.slurmUsage.InventoryChanged = p.reviews.Wake
	}
	if p.kube != nil {
		if p.collector, err = newUsageCollector(p.kube, db, p.cluster, cfg, logger); err != nil {
			return nil, err
		}
		// Both run on the elected process: a capacity change the
		// collector writes wakes the review scheduler's capacity trigger.
		p.collector.InventoryChanged = p.reviews.Wake
	}
	p.oneInventorySource()
	// Drift: the cluster's (and AWS's) with a cluster, Slurm's accounting
	// with a Slurm transport, which a portal for a Slurm cluster has
	// without a cluster.
	if p.kube != nil || p.side.Slurm != nil {
		p.drift = newDriftChecker(db, p.applier, p.side.drifter(), p.cluster, logger)
		p.drift.Slurm = p.side.Slurm
	}
	return p, nil
}

// oneInventorySource keeps one writer per cluster's observed inventory:
// when the EKS collector keeps a cluster's (its nodes are the Kubernetes
// ones), the Slurm usage reader does not keep the same cluster's.
func (p *parts) oneInventorySource() {
	if p.collector != nil && p.slurmUsage != nil && p.slurmUsage.InventoryCluster == p.collector.InventoryCluster {
		p.slurmUsage.InventoryCluster = ""
	}
}

// assembleProvisioning makes the applier, the worker (with its AWS runner
// and the admins' scheduler config jobs) and the cluster checker.
func (p *parts) assembleProvisioning(ctx context.Context, cfg Config, db *store.DB, logger *slog.Logger) error {
	var err error
	if p.kube != nil {
		if p.applier, err = provision.NewApplier(p.kube); err != nil {
			return err
		}
	}
	p.worker = newWorker(db, p.applier, p.cluster, logger)
	if p.side.Slurm != nil {
		p.worker.Slurm = p.side.Slurm
	}
	if p.side.Runner != nil {
		p.worker.AWS = p.side.Runner
	}
	// The admins' scheduler config reconciles are jobs this worker runs:
	// dry runs (the calls recorded, none made) without real AWS calls.
	p.worker.Scheduler = &provision.SchedulerJobs{
		Spec: p.cluster.SchedulerSpec, API: p.side.scheduler(),
		Poll: awsprov.PollConfig{Interval: cfg.AWSPollInterval, Timeout: cfg.AWSPollTimeout},
	}
	if p.checker, err = clusterChecker(p.kube, p.side, p.cluster.AdmissionMode); err != nil {
		return err
	}
	if p.side.Slurm != nil {
		p.checker.Sources.SlurmPartitions = slurmPartitionUses(db) // "Slurm partitions"
	}
	// The admin's "Refresh from cluster" of a Slurm cluster reads its nodes.
	p.checker.Sources.SlurmPartitionTypes = p.cluster.Slurm.PartitionInstanceTypes
	// The Slurm GPU check compares the nodes' GPUs with these figures.
	p.checker.Sources.Accelerators = p.cluster.WithDefaults().Accelerators
	if reader := p.checker.Sources.Kube; reader != nil {
		// Every provisioning job first checks that the cluster serves the
		// API versions its plan applies (Kueue v1beta2 above all).
		p.worker.Preflight = reader.RequireServed
	}
	logReadiness(ctx, p.checker, logger)
	return nil
}

// newWebServer builds the HTTP layer on the assembled parts.
func newWebServer(cfg Config, db *store.DB, ls *listeners, id identity, rates *usage.RateCard, p *parts, logger *slog.Logger) (*web.Server, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), p.elector.Status())
	return web.New(web.Options{
		TrustedProxies: cfg.TrustedProxies,
		DB:             db, OIDC: auth.NewClient(id.oidc), Mapping: id.mapping, Logger: logger,
		BaseURL: ls.baseURL, Version: version, SessionKey: id.sessionKey, Signer: id.signer,
		SessionIdleTimeout: cfg.SessionIdleTimeout, SessionLifetime: cfg.SessionLifetime, SeparateOps: ls.ops != nil,
		GroupsRecheckInterval: cfg.GroupsRecheckInterval, LoginRateLimit: cfg.LoginRateLimit,
		APITokenMaxLifetime: time.Duration(cfg.APITokenMaxDays) * 24 * time.Hour, APIRateLimit: cfg.APIRateLimit,
		Machines: machineVerifier(cfg, id.mapping, logger),
		DevIdP:   id.devHandler, Registry: reg, KnownOwners: id.knownOwners,
		Cluster: p.cluster, DryRun: p.kube == nil, SlurmTransport: p.side.Slurm != nil, Live: liveOrNil(p.applier),
		SchedulerCalls: p.side.Runner != nil,
		AWSPreview:     p.side.preview(), Quotas: p.side.quotas(), LifecycleCheck: p.side.lifecycleCheck(),
		ClusterCheck: p.checker, ClusterCanRefresh: p.checker.CanRead(),
		Groups: p.groups, GroupsUser: auth.UserAttribute(cfg.IdentityStoreUserAttribute),
		Utilization:    p.util,
		RateCard:       rates,
		Workloads:      workloadsOrNil(p.checker.Sources.Kube),
		NotifyChannels: p.channels,
		Leader:         p.elector.Status(),
		OnLogin:        func(ctx context.Context, email string) error { return p.reviews.OwnerSignedIn(ctx, email, time.Now()) },
	})
}

// startWork starts the background work and returns the function that stops
// it and waits for it. On every replica: session cleanup, the audit head
// log, daily publication and checkpoint, the provisioning worker (each job
// is leased to one worker at a time, renewed by a heartbeat:
// internal/provision), the demo usage seed, and the election; the singletons run on the elected leader
// only, started when this process becomes it and stopped when it stops
// being it.
func startWork(ctx context.Context, cfg Config, db *store.DB, srv *web.Server, p *parts, rates *usage.RateCard, logger *slog.Logger) (stop func()) {
	workCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	start := func(f func()) { wg.Add(1); go func() { defer wg.Done(); f() }() }
	start(func() { srv.CleanupSessions(workCtx, 10*time.Minute) })
	start(func() { everyMinute(workCtx, func(c <-chan time.Time) { logAuditHeads(workCtx, db, logger, c) }) })
	// Once a UTC day, the chain's head goes out by mail and webhook,
	// signed; any replica may, the day's row lets one (auditpublish.go).
	start(func() {
		everyMinute(workCtx, func(c <-chan time.Time) { publishAuditHeads(workCtx, db, srv.Signer(), logger, c, time.Now) })
	})
	// The audit page's shared checkpoint moves on here, not on page
	// views (a GET writes nothing); any replica may, it only moves forward.
	start(func() {
		everyMinute(workCtx, func(c <-chan time.Time) { advanceAuditCheckpoint(workCtx, db, logger, c) })
	})
	start(func() {
		if err := p.worker.Run(workCtx); err != nil && workCtx.Err() == nil {
			logger.Error("provisioner stopped", "err", err)
		}
	})
	if cfg.DemoUsage {
		// In the background: under load the seed takes seconds, and the
		// portal need not wait for it (the pages fill in when it is done).
		start(func() {
			if n, err := seedDemoUsage(workCtx, db, time.Now()); err != nil && workCtx.Err() == nil {
				logger.Error("demo usage seed failed", "err", err)
			} else if n > 0 {
				logger.Info("demo usage seeded", "rows", n)
			}
		})
	}
	switch {
	case p.kube == nil && p.side.Slurm != nil:
		logger.Info("no --kubeconfig: Slurm connections are provisioned through the Slurm transport; EKS connections' plans are recorded and nothing is applied")
	case p.kube == nil:
		logger.Info("provisioner in dry-run mode: no --kubeconfig, plans are recorded and nothing is applied")
	}
	if pr, ok := p.util.(prom.Prober); ok {
		go probeUtilization(ctx, pr, db, logger)
	}
	singletons := leaderLoops(cfg, db, srv, p, newMonthCloser(db, rates, p.cluster, logger), logger)
	start(func() { p.elector.Run(workCtx, singletons) })
	return func() { cancel(); wg.Wait() }
}

// leaderLoops returns what the elected leader runs until its context ends.
func leaderLoops(cfg Config, db *store.DB, srv *web.Server, p *parts, closer *monthCloser, logger *slog.Logger) func(context.Context) {
	signals := srv.Signals(logger.With("component", "signals"))
	return func(ctx context.Context) {
		var swg sync.WaitGroup
		start := func(f func()) { swg.Add(1); go func() { defer swg.Done(); f() }() }
		// Notices leave the outbox: in-app, and by email and webhook
		// when configured (internal/notify).
		start(func() { p.notifier.Run(ctx, 5*time.Second) })
		// Last month's statements are frozen once it has ended (cost.go).
		start(func() { closer.Run(ctx) })
		if p.drift != nil {
			start(func() { p.drift.Run(ctx) })
		}
		if p.collector != nil {
			start(func() {
				if err := p.collector.Run(ctx); err != nil && ctx.Err() == nil {
					logger.Error("usage collector stopped", "err", err)
				}
			})
		}
		// The Slurm teams' usage, from the accounting database, whenever
		// a Slurm transport is configured.
		if p.slurmUsage != nil {
			start(func() {
				if err := p.slurmUsage.Run(ctx); err != nil && ctx.Err() == nil {
					logger.Error("Slurm usage reader stopped", "err", err)
				}
			})
		}
		// The signals loop reads stored usage rows (a cluster's or the
		// demo seed's), and GPU utilization from Prometheus when
		// --prometheus-url is set, so it runs in dry-run mode too.
		start(func() { signals.Run(ctx, 10*time.Minute, time.Now) })
		// Contract end dates: owners told ahead, a hold proposed once passed.
		start(func() { endDateHolds(ctx, db, time.Hour, time.Now, logger.With("component", "end-dates")) })
		// Exceptions: reverted at their end, through a reapply job.
		start(func() { exceptionSweep(ctx, db, 15*time.Second, time.Now, logger.With("component", "exceptions")) })
		// The review scheduler, in dry-run mode too.
		start(func() { p.reviews.Run(ctx, cfg.ReviewInterval, time.Now) })
		swg.Wait()
	}
}

// everyMinute runs f with a minute ticker, stopped when f returns.
func everyMinute(ctx context.Context, f func(<-chan time.Time)) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	f(t.C)
}

// advanceAuditCheckpoint verifies what was appended to the audit chain
// since the shared checkpoint, at each tick, and logs a break.
func advanceAuditCheckpoint(ctx context.Context, db *store.DB, logger *slog.Logger, tick <-chan time.Time) {
	for {
		if _, brk, err := db.VerifyAuditSinceCheckpoint(ctx, time.Now()); err != nil && ctx.Err() == nil {
			logger.Error("audit chain check", "err", err)
		} else if brk != nil {
			logger.Error("audit chain BROKEN", "event_id", brk.ID, "reason", brk.Reason)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
	}
}

// opsHandler is the operations listener's handler: the server's
// (/healthz, /readyz, /metrics) and, with --ops-pprof, Go's profiles under
// /debug/pprof/ (net/http/pprof; make bench's bench/pages reads them).
func opsHandler(h http.Handler, withPprof bool) http.Handler {
	if !withPprof {
		return h
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/", h)
	return mux
}

// serveUntilDone serves the portal (and the operations endpoints) until ctx
// ends or a listener fails, then shuts the servers down within
// --shutdown-timeout and stops the background work.
func serveUntilDone(ctx context.Context, cfg Config, ls *listeners, srv *web.Server, stopWork func(), logger *slog.Logger, stdout io.Writer) error {
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	serveErr := make(chan error, 2)
	go func() { serveErr <- hs.Serve(ls.ln) }()
	var ops *http.Server
	if ls.ops != nil {
		ops = &http.Server{Handler: opsHandler(srv.OpsHandler(), cfg.OpsPprof), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
			WriteTimeout: 60 * time.Second, MaxHeaderBytes: 64 << 10, ErrorLog: hs.ErrorLog}
		go func() { serveErr <- ops.Serve(ls.ops) }()
		paths := "/metrics /readyz /healthz"
		if cfg.OpsPprof {
			paths += " /debug/pprof/"
		}
		logger.Info("operations endpoints listening", "listen", ls.ops.Addr().String(), "paths", paths)
	}
	logger.Info("portal listening", "url", ls.base, "listen", ls.ln.Addr().String(), "dev", cfg.Dev, "version", version)
	if cfg.Dev {
		fmt.Fprintf(stdout, "\nHyperPod governance portal (development mode) is ready: open %s/\n"+
			"Sign in with the built-in identity provider as owner.red, member.red, owner.blue, admin, reviewer or finance.\n"+
			"Data: %s. Stop with Ctrl-C.\n\n", ls.base, store.RedactDSN(cfg.DB))
	}

	var runErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down", "timeout", cfg.ShutdownTimeout.String())
	case err := <-serveErr:
		runErr = fmt.Errorf("http server: %w", err)
	}
	shCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(shCtx); err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("http shutdown: %w", err))
	}
	if ops != nil {
		if err := ops.Shutdown(shCtx); err != nil {
			runErr = errors.Join(runErr, fmt.Errorf("operations listener shutdown: %w", err))
		}
	}
	stopWork()
	logger.Info("stopped")
	return runErr
}

// machineVerifier verifies the machine identities' tokens of the portal's
// identity provider for --machine-audiences (nil without any: none is
// accepted).
func machineVerifier(cfg Config, m auth.Mapping, logger *slog.Logger) *auth.MachineVerifier {
	if len(cfg.MachineAudiences) == 0 {
		if len(m.Machines) > 0 {
			logger.Warn("the groups file names machine identities but --machine-audiences is empty: no machine token is accepted", "machines", len(m.Machines))
		}
		return nil
	}
	return auth.NewMachineVerifier(cfg.OIDCIssuer, cfg.MachineAudiences, nil, time.Now)
}
