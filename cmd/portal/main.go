package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/hyperpod-governance/portal/internal/auth"
	"github.com/hyperpod-governance/portal/internal/collect"
	"github.com/hyperpod-governance/portal/internal/devidp"
	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/web"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "portal:", strings.ReplaceAll(err.Error(), "\n", "\nportal: "))
		}
		os.Exit(1)
	}
}

// run is the whole program; tests call it directly.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve", "migrate":
	case "audit":
		return auditCmd(ctx, args, getenv, stdout, stderr)
	case "contract":
		return contractCmd(ctx, args, getenv, stdout, stderr)
	case "iam-policy":
		return iamPolicyCmd(args, getenv, stdout, stderr)
	case "evidence":
		return evidenceCmd(args, stdout, stderr)
	case "version":
		fmt.Fprintf(stdout, "portal %s (%s, %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return nil
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, "usage: portal [serve|migrate|version] [flags]\n\n  serve    run the portal (default)\n  migrate  apply database migrations and exit\n  audit verify [--head HASH]\n           check the audit trail's hash chain (and that it still reaches a published head)\n  audit head\n           print the chain's head (event count and hash) to keep outside the database\n  contract import FILE --as EMAIL\n           create a draft from an exported contract (JSON or YAML)\n  iam-policy [--aws-settings FILE] [--account ID --region R] [--prometheus-url URL]\n           print the IAM policy the portal's role needs for its AWS steps (and its signed Prometheus queries)\n  evidence verify FILE\n           check a connection's evidence bundle offline (hashes, order, audit chain)\n  version  print the version\n\nportal serve --help lists the flags.")
		return nil
	default:
		return fmt.Errorf("unknown command %q: use serve, migrate, audit, contract, iam-policy, evidence or version", cmd)
	}
	cfg, err := parseConfig(cmd, args, getenv, stderr)
	if err != nil {
		return err
	}
	logger := newLogger(cfg, stderr)
	if cmd == "migrate" {
		return migrate(ctx, cfg, stdout)
	}
	return serve(ctx, cfg, logger, stdout)
}

func newLogger(cfg Config, w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.LogLevel)) // validated already
	opts := &slog.HandlerOptions{Level: lvl}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func migrate(ctx context.Context, cfg Config, stdout io.Writer) error {
	db, err := store.Open(ctx, cfg.DB)
	if err != nil {
		return err
	}
	defer db.Close()
	before, err := db.Status(ctx)
	if err != nil {
		return err
	}
	after, err := db.Migrate(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "database %s: schema version %d -> %d (this binary knows up to %d)\n", store.RedactDSN(cfg.DB), before.Current, after.Current, after.Known)
	return nil
}

func serve(ctx context.Context, cfg Config, logger *slog.Logger, stdout io.Writer) error {
	db, err := store.Open(ctx, cfg.DB)
	if err != nil {
		return err
	}
	defer db.Close()
	st, err := db.Migrate(ctx)
	if err != nil {
		return err
	}
	logger.Info("database ready", "db", store.RedactDSN(cfg.DB), "schema_version", st.Current)

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", cfg.Listen, err)
	}
	defer ln.Close()
	// The operations listener (/metrics, /readyz): a port the Ingress
	// does not route (issue 32 item 6).
	var opsLn net.Listener
	if cfg.OpsListen != "" {
		if opsLn, err = net.Listen("tcp", cfg.OpsListen); err != nil {
			return fmt.Errorf("--ops-listen %s: %w", cfg.OpsListen, err)
		}
		defer opsLn.Close()
	}
	base := cfg.BaseURL
	if base == "" { // --dev only (validated): derive it from the bound address
		base = "http://" + ln.Addr().String()
	}
	baseURL, err := url.Parse(base)
	if err != nil {
		return fmt.Errorf("--base-url: %w", err)
	}

	sessionKey, err := loadSessionKey(cfg)
	if err != nil {
		return err
	}
	mapping := auth.DevMapping()
	if cfg.GroupsFile != "" {
		if mapping, err = auth.LoadMapping(cfg.GroupsFile); err != nil {
			return err
		}
	}
	redirect := base + "/auth/callback"
	oidcCfg := auth.OIDCConfig{
		Issuer: cfg.OIDCIssuer, ClientID: cfg.OIDCClientID, RedirectURL: redirect,
		Scopes: cfg.OIDCScopes, GroupsClaim: cfg.OIDCGroupsClaim,
	}
	var devHandler http.Handler
	if cfg.Dev {
		secret := make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return err
		}
		oidcCfg.Issuer = base + "/dev-idp"
		oidcCfg.ClientID = "portal-dev"
		// The dev provider issues refresh tokens for offline_access; the
		// group re-checks use them (see internal/web/recheck.go).
		if !slices.Contains(oidcCfg.Scopes, "offline_access") {
			oidcCfg.Scopes = append(slices.Clone(oidcCfg.Scopes), "offline_access")
		}
		oidcCfg.ClientSecret = hex.EncodeToString(secret)
		devHandler, err = devidp.New(devidp.Config{
			Issuer: oidcCfg.Issuer, ClientID: oidcCfg.ClientID, ClientSecret: oidcCfg.ClientSecret,
			RedirectURIs:           []string{redirect},
			PostLogoutRedirectURIs: []string{base + "/signed-out"},
			Users:                  devidp.DemoUsers(),
			StylesheetURL:          "/static/app.css?v=" + version,
		})
		if err != nil {
			return fmt.Errorf("development identity provider: %w", err)
		}
	} else {
		if oidcCfg.ClientSecret, err = readSecretFile("oidc-client-secret-file", cfg.OIDCClientSecretFile); err != nil {
			return err
		}
	}

	rates, err := loadRateCard(cfg.RateCardFile)
	if err != nil {
		return err
	}

	var knownOwners []string
	if cfg.Dev {
		for _, u := range devidp.DemoUsers() {
			knownOwners = append(knownOwners, u.Email)
		}
		if err := seedDev(ctx, db); err != nil {
			return err
		}
	}

	kube, err := kubeConfig(cfg.Kubeconfig)
	if err != nil {
		return err
	}
	cluster, err := loadCluster(cfg)
	if err != nil {
		return err
	}
	side, err := loadAWS(ctx, cfg, mapping, kube == nil, logger)
	if err != nil {
		return err
	}
	cluster.AWS = side.Settings
	if err := cluster.Check(); err != nil {
		return err
	}
	if cfg.Dev && cfg.DemoReviews {
		if n, err := seedDemoReviews(ctx, db, cluster, time.Now()); err != nil {
			return fmt.Errorf("demo reviews: %w", err)
		} else if n > 0 {
			logger.Info("demo reviews seeded", "reviews", n)
		}
	}
	var applier *provision.Applier
	if kube != nil {
		if applier, err = provision.NewApplier(kube); err != nil {
			return err
		}
	}
	worker := newWorker(db, applier, cluster, logger)
	if side.Runner != nil {
		worker.AWS = side.Runner
	}
	// The admins' scheduler config reconciles are jobs this worker runs:
	// dry runs (the calls recorded, none made) without real AWS calls.
	worker.Scheduler = &provision.SchedulerJobs{
		Spec: cluster.SchedulerSpec, API: side.scheduler(),
		Poll: awsprov.PollConfig{Interval: cfg.AWSPollInterval, Timeout: cfg.AWSPollTimeout},
	}
	checker, err := clusterChecker(kube, side)
	if err != nil {
		return err
	}
	if reader := checker.Sources.Kube; reader != nil {
		// Every provisioning job first checks that the cluster serves the
		// API versions its plan applies (Kueue v1beta2 above all).
		worker.Preflight = reader.RequireServed
	}
	logReadiness(ctx, checker, logger)

	groups, err := identityStoreGroups(ctx, cfg)
	if err != nil {
		return err
	}
	if groups != nil {
		logger.Info("users' groups come from the IAM Identity Center identity store",
			"identity_store_id", cfg.IdentityStoreID, "user_attribute", cfg.IdentityStoreUserAttribute,
			"cache_ttl", cfg.IdentityStoreCacheTTL.String())
	}

	util, err := utilizationSource(ctx, cfg, logger)
	if err != nil {
		return err
	}
	if p, ok := util.(web.UtilizationProber); ok {
		go probeUtilization(ctx, p, db, logger)
	}

	notifier, channels, err := notifyWorker(cfg.Notify, db, mapping, base, logger)
	if err != nil {
		return err
	}
	// Recipients are confirmed at delivery: in the directory when groups
	// come from it, otherwise by groups confirmed within a session's
	// lifetime (issue 32 item 1).
	if groups != nil {
		notifier.Directory = groups
	}
	notifier.MaxGroupsAge = cfg.SessionLifetime
	reviews, err := newReviewScheduler(ctx, db, cfg, mapping, rates, cluster, kube, logger.With("component", "reviews"))
	if err != nil {
		return err
	}

	elector, err := newElector(cfg, kube, db, logger)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), elector.Status())
	srv, err := web.New(web.Options{
		TrustedProxies: cfg.TrustedProxies,
		DB:             db, OIDC: auth.NewClient(oidcCfg), Mapping: mapping, Logger: logger,
		BaseURL: baseURL, Version: version, SessionKey: sessionKey,
		SessionIdleTimeout: cfg.SessionIdleTimeout, SessionLifetime: cfg.SessionLifetime, SeparateOps: cfg.OpsListen != "",
		GroupsRecheckInterval: cfg.GroupsRecheckInterval, LoginRateLimit: cfg.LoginRateLimit,
		DevIdP: devHandler, Registry: reg, KnownOwners: knownOwners,
		Cluster: cluster, DryRun: kube == nil, Live: liveOrNil(applier),
		SchedulerCalls: side.Runner != nil,
		AWSPreview:     side.preview(), Quotas: side.quotas(), LifecycleCheck: side.lifecycleCheck(),
		ClusterCheck: checker, ClusterCanRefresh: checker.CanRead(),
		Groups: groups, GroupsUser: auth.UserAttribute(cfg.IdentityStoreUserAttribute),
		Utilization:    util,
		RateCard:       rates,
		Workloads:      workloadsOrNil(checker.Sources.Kube),
		NotifyChannels: channels,
		Leader:         elector.Status(),
		OnLogin:        func(ctx context.Context, email string) error { return reviews.OwnerSignedIn(ctx, email, time.Now()) },
	})
	if err != nil {
		return err
	}

	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}

	var collector *collect.Collector
	if kube != nil {
		if collector, err = newUsageCollector(kube, db, cluster, cfg, logger); err != nil {
			return err
		}
	}
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	// On every replica: session cleanup, the audit head log and the
	// provisioning worker (each job is leased to one worker at a time,
	// renewed by a heartbeat: internal/provision).
	wg.Add(1)
	go func() { defer wg.Done(); srv.CleanupSessions(workCtx, 10*time.Minute) }()
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		logAuditHeads(workCtx, db, logger, t.C)
	}()
	// The audit page's shared checkpoint moves on here, not on page
	// views (a GET writes nothing); any replica may, it only moves forward.
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			if _, brk, err := db.VerifyAuditSinceCheckpoint(workCtx, time.Now()); err != nil && workCtx.Err() == nil {
				logger.Error("audit chain check", "err", err)
			} else if brk != nil {
				logger.Error("audit chain BROKEN", "event_id", brk.ID, "reason", brk.Reason)
			}
			select {
			case <-workCtx.Done():
				return
			case <-t.C:
			}
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := worker.Run(workCtx); err != nil && workCtx.Err() == nil {
			logger.Error("provisioner stopped", "err", err)
		}
	}()
	if cfg.DemoUsage {
		// In the background: under load the seed takes seconds, and the
		// portal need not wait for it (the pages fill in when it is done).
		wg.Add(1)
		go func() {
			defer wg.Done()
			if n, err := seedDemoUsage(workCtx, db, time.Now()); err != nil && workCtx.Err() == nil {
				logger.Error("demo usage seed failed", "err", err)
			} else if n > 0 {
				logger.Info("demo usage seeded", "rows", n)
			}
		}()
	}
	if kube == nil {
		logger.Info("provisioner in dry-run mode: no --kubeconfig, plans are recorded and nothing is applied")
	}
	// The singletons run on the elected leader only, started when this
	// process becomes it and stopped when it stops being it.
	closer := newMonthCloser(db, rates, cluster, logger)
	signals := srv.Signals(logger.With("component", "signals"))
	var drift *provision.DriftChecker
	if kube != nil {
		drift = newDriftChecker(db, applier, side.drifter(), cluster, logger)
	}
	singletons := func(ctx context.Context) {
		var swg sync.WaitGroup
		start := func(f func()) { swg.Add(1); go func() { defer swg.Done(); f() }() }
		// Notices leave the outbox: in-app, and by email and webhook
		// when configured (internal/notify).
		start(func() { notifier.Run(ctx, 5*time.Second) })
		// Last month's statements are frozen once it has ended (cost.go).
		start(func() { closer.Run(ctx) })
		if drift != nil {
			start(func() { drift.Run(ctx) })
			start(func() {
				if err := collector.Run(ctx); err != nil && ctx.Err() == nil {
					logger.Error("usage collector stopped", "err", err)
				}
			})
		}
		// The signals loop reads stored usage rows (a cluster's or the
		// demo seed's), and GPU utilization from Prometheus when
		// --prometheus-url is set, so it runs in dry-run mode too.
		start(func() { signals.Run(ctx, 10*time.Minute, time.Now) })
		// Contract end dates: owners told ahead, a hold proposed once passed.
		start(func() { endDateHolds(ctx, db, time.Hour, time.Now, logger.With("component", "end-dates")) })
		// The review scheduler, in dry-run mode too.
		start(func() { reviews.Run(ctx, cfg.ReviewInterval, time.Now) })
		swg.Wait()
	}
	wg.Add(1)
	go func() { defer wg.Done(); elector.Run(workCtx, singletons) }()

	serveErr := make(chan error, 2)
	go func() { serveErr <- hs.Serve(ln) }()
	var ops *http.Server
	if opsLn != nil {
		ops = &http.Server{Handler: srv.OpsHandler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
			WriteTimeout: 60 * time.Second, MaxHeaderBytes: 64 << 10, ErrorLog: hs.ErrorLog}
		go func() { serveErr <- ops.Serve(opsLn) }()
		logger.Info("operations endpoints listening", "listen", opsLn.Addr().String(), "paths", "/metrics /readyz /healthz")
	}
	logger.Info("portal listening", "url", base, "listen", ln.Addr().String(), "dev", cfg.Dev, "version", version)
	if cfg.Dev {
		fmt.Fprintf(stdout, "\nHyperPod governance portal (development mode) is ready: open %s/\n"+
			"Sign in with the built-in identity provider as owner.red, member.red, owner.blue, admin, reviewer or finance.\n"+
			"Data: %s. Stop with Ctrl-C.\n\n", base, store.RedactDSN(cfg.DB))
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
	wg.Wait()
	logger.Info("stopped")
	return runErr
}

// loadSessionKey reads the session key file; in --dev mode it creates one
// (0600) on first start so sessions survive restarts.
func loadSessionKey(cfg Config) ([]byte, error) {
	b, err := os.ReadFile(cfg.SessionKeyFile)
	if errors.Is(err, os.ErrNotExist) && cfg.Dev {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		b = []byte(hex.EncodeToString(key) + "\n")
		if err := os.MkdirAll(filepath.Dir(cfg.SessionKeyFile), 0o750); err != nil {
			return nil, fmt.Errorf("--session-key-file: %w", err)
		}
		if err := os.WriteFile(cfg.SessionKeyFile, b, 0o600); err != nil {
			return nil, fmt.Errorf("--session-key-file: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("--session-key-file: %w", err)
	}
	if err := ownerOnly("session-key-file", cfg.SessionKeyFile); err != nil {
		return nil, err
	}
	key := []byte(strings.TrimSpace(string(b)))
	if n := decodedKeyLen(string(key)); n < 32 {
		return nil, fmt.Errorf("--session-key-file: %s holds %d random bytes (hex or base64 decoded); use at least 32 (e.g. `openssl rand -hex 32`)", cfg.SessionKeyFile, n)
	}
	return key, nil
}

// decodedKeyLen is how many bytes a key file's text stands for: hex first
// (what `openssl rand -hex` writes), then standard or URL base64, padded or
// not. Text that is neither counts as 0, so a passphrase is refused: the
// check is about random bytes, not characters. The key itself stays the
// text, so that sessions survive a restart with the same file.
func decodedKeyLen(s string) int {
	if b, err := hex.DecodeString(s); err == nil {
		return len(b)
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return len(b)
		}
	}
	return 0
}

// ownerOnly refuses a secret file that the group or others may read or
// write: a session key or client secret readable by another account on the
// host (or a Kubernetes secret mounted with the default 0644) is a secret
// no longer. Mount secrets with defaultMode 0400, or as a Kubernetes secret
// volume with fsGroup (see kubeletSecretLayout).
func ownerOnly(flagName, path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("--%s: %w", flagName, err)
	}
	perm := fi.Mode().Perm()
	if perm&0o077 == 0 {
		return nil
	}
	if uid, gid, ok := fileOwner(fi); ok {
		groups, _ := os.Getgroups()
		if kubeletSecretLayout(perm, uid, gid, os.Geteuid(), append(groups, os.Getegid())) {
			return nil
		}
	}
	return fmt.Errorf("--%s: %s has mode %04o, readable by group or others; make it the owner's only (chmod 600; on Kubernetes a secret volume, with fsGroup when the container is not root)", flagName, path, perm)
}

// kubeletSecretLayout reports whether a group-readable secret file is laid
// out as the kubelet lays out a secret volume for a pod that runs as a
// non-root user with an fsGroup: the files belong to root, and their group
// is the fsGroup with read access and nothing else (mode 0440 whatever the
// volume's defaultMode: the kubelet adds 0440 to read-only volumes' files,
// k8s.io/kubernetes pkg/volume/volume_linux.go changeFilePermission). A
// non-root container can read such a secret only through the group, and
// no owner-only layout exists, so a process that is not root and is in
// that group accepts it. Anything else group- or world-accessible is
// refused as before, and so is any such file when the portal runs as its
// owner.
func kubeletSecretLayout(perm os.FileMode, uid, gid, euid int, groups []int) bool {
	return euid != 0 && uid == 0 && uid != euid &&
		perm&^0o440 == 0 && perm&0o040 != 0 &&
		slices.Contains(groups, gid)
}

// seedDev gives a fresh development database a cluster inventory, so that
// the example contract can be approved in `make run`.
func seedDev(ctx context.Context, db *store.DB) error {
	clusters, err := db.Clusters(ctx)
	if err != nil || len(clusters) > 0 {
		return err
	}
	by := workflow.Actor{Email: "dev-seed"}
	for _, r := range []struct {
		typ string
		n   int
	}{{"ml.p5.48xlarge", 8}, {"ml.g5.8xlarge", 16}} {
		if err := db.SetInventory(ctx, "shared-hp", r.typ, r.n, by, time.Now()); err != nil {
			return err
		}
	}
	return nil
}

// demoSeed makes the demo usage the same on every fresh database.
const demoSeed = 12

// seedDemoUsage gives a development database without any usage 60 days of
// hourly demo usage for the demo teams (Source demo: every page showing it
// says "demo data"), so that the usage pages have something to show in
// `make run`. A database with usage rows, demo or measured, is left as it
// is, so restarts neither add nor change any; the seed is one transaction.
// It returns how many hourly rows it wrote.
func seedDemoUsage(ctx context.Context, db *store.DB, now time.Time) (int, error) {
	const cluster = "shared-hp"
	inv, err := db.Inventory(ctx, cluster)
	if err != nil {
		return 0, err
	}
	capacity := map[string]int{}
	for typ, n := range inv {
		capacity[typ] = n * provision.DefaultAccelerators[typ].Accelerators
	}
	// Guarantees as in the example contract (2 × ml.p5.48xlarge), so that
	// approving it in the demo matches the demo's split.
	teams := []usage.DemoTeam{
		{Team: "red", Namespace: "hyperpod-ns-red", Types: []usage.DemoType{{InstanceType: "ml.p5.48xlarge", Guaranteed: 16, Busy: 24}}},
		{Team: "blue", Namespace: "hyperpod-ns-blue", Types: []usage.DemoType{
			{InstanceType: "ml.p5.48xlarge", Guaranteed: 16, Busy: 14}, {InstanceType: "ml.g5.8xlarge", Guaranteed: 0, Busy: 3}}},
	}
	end := usage.HourStart(now)
	d := usage.DemoUsage(teams, cluster, capacity, end.Add(-60*24*time.Hour), end, demoSeed)
	seeded, err := db.SeedUsage(ctx, d.Hours, d.Cluster, []usage.Missing{d.Missing})
	if err != nil || !seeded {
		return 0, err
	}
	return len(d.Hours), nil
}
