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
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
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
		fmt.Fprintln(stdout, "usage: portal [serve|migrate|version] [flags]\n\n  serve    run the portal (default)\n  migrate  apply database migrations and exit\n  audit verify [--head HASH]\n           check the audit trail's hash chain (and that it still reaches a published head)\n  audit head\n           print the chain's head (event count and hash) to keep outside the database\n  contract import FILE --as EMAIL\n           create a draft from an exported contract (JSON or YAML)\n  contract apply FILE|DIR... --server URL --token-file FILE [--dry-run]\n           make a portal's requests match contract files, over its API (file, change, submit; idempotent)\n  iam-policy [--aws-settings FILE] [--account ID --region R] [--prometheus-url URL]\n           print the IAM policy the portal's role needs for its AWS steps (and its signed Prometheus queries)\n  evidence verify [--key-file KEY.json | --key BASE64] [--audit-head ID:HASH] FILE\n           check a connection's evidence bundle offline (hashes, order, audit chain; the signature against the portal's published key)\n  version  print the version\n\nportal serve --help lists the flags.")
		return nil
	default:
		return fmt.Errorf("unknown command %q: use serve, migrate, audit, contract, iam-policy, evidence or version", cmd)
	}
	cfg, err := parseConfig(cmd, args, getenv, stderr)
	if err != nil {
		return err
	}
	if cmd == "migrate" {
		return migrate(ctx, cfg, stdout)
	}
	logs := newLogBuffer(stderr)
	defer logs.Close()
	return serve(ctx, cfg, newLogger(cfg, logs), stdout)
}

// newLogger is serve's logger, writing through w (a logBuffer, flushed
// after every warning or error).
func newLogger(cfg Config, w *logBuffer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.LogLevel)) // validated already
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if cfg.LogFormat == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(flushAbove{h, w, slog.LevelWarn})
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
