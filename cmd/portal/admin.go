package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/hyperpod-governance/portal/internal/auth"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// auditCmd runs `portal audit verify [--head HASH]`, which walks the hash
// chain and names the first broken row, and `portal audit head`, which
// prints the chain's head to be kept where the database's writers cannot
// change it.
func auditCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	const usage = "usage: portal audit verify [--head HASH] [--db FILE] | portal audit head [--db FILE]"
	if len(args) == 0 || (args[0] != "verify" && args[0] != "head") {
		return errors.New(usage)
	}
	var head string
	var flags []string
	for i := 1; i < len(args); i++ {
		switch a := args[i]; {
		case args[0] == "verify" && (a == "--head" || a == "-head"):
			if i+1 >= len(args) {
				return errors.New("--head needs the hash `portal audit head` printed: " + usage)
			}
			head, i = args[i+1], i+1
		case args[0] == "verify" && strings.HasPrefix(a, "--head="):
			head = strings.TrimPrefix(a, "--head=")
		default:
			flags = append(flags, a)
		}
	}
	head = strings.ToLower(strings.TrimSpace(head))
	if head != "" && !isSHA256Hex(head) {
		return fmt.Errorf("--head: %q is not a SHA-256 hash (64 hex digits, as `portal audit head` prints)", head)
	}
	cfg, err := parseConfig("audit "+args[0], flags, getenv, stderr)
	if err != nil {
		return err
	}
	// Read-only, never migrated: what is checked is the database as it is
	// (store.OpenReadOnly fails on a missing path or a database without
	// the portal's schema).
	db, err := store.OpenReadOnly(ctx, cfg.DB)
	if err != nil {
		return err
	}
	defer db.Close()
	if args[0] == "head" {
		h, err := db.AuditHead(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "audit head: %d events, newest #%d, hash %s\n", h.Count, h.ID, h.Hash)
		return nil
	}
	n, brk, err := db.VerifyAudit(ctx)
	if err != nil {
		return err
	}
	if brk != nil {
		return fmt.Errorf("audit chain BROKEN at event %d (%s); %d events before it verified", brk.ID, brk.Reason, n)
	}
	if n == 0 {
		// A portal that ever served has events (its first sign-in);
		// "0 events verified" proves nothing and most often means the
		// wrong database.
		return fmt.Errorf("audit trail of %s is empty: nothing to verify (is --db the portal's database?)", store.RedactDSN(cfg.DB))
	}
	if head != "" {
		return verifyPublishedHead(ctx, db, head, n, stdout)
	}
	fmt.Fprintf(stdout, "audit chain OK: %d events verified (give --head HASH from `portal audit head` to detect removed newest events)\n", n)
	return nil
}

// verifyPublishedHead checks that head, a hash `portal audit head` printed
// and someone published, is in the trail whose n events verified.
func verifyPublishedHead(ctx context.Context, db *store.DB, head string, n int, stdout io.Writer) error {
	// The chain verifies, so it is intact up to its newest event; what
	// it cannot show is that events after that were removed. The
	// published head must be one of its events.
	at, err := db.AuditHeadAt(ctx, head)
	if errors.Is(err, store.ErrNotFound) {
		now, err := db.AuditHead(ctx)
		if err != nil {
			return err
		}
		// The chain hashes neither the row ids nor a key (docs/contracts.md,
		// "What verification cannot show"), so a trail that verifies
		// without the published head was either cut short or rewritten
		// from some event on with every later hash recomputed.
		return fmt.Errorf("audit chain TRUNCATED OR REWRITTEN: the published head %s is not in the trail. The trail verifies up to its newest event #%d (hash %s, %d events), so either the events after #%d up to the published head were removed, or events were altered and every later hash recomputed (or this is another portal's database)",
			head, now.ID, now.Hash, now.Count, now.ID)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "audit chain OK: %d events verified; the published head is event #%d (%d events then), %d appended since\n", n, at.ID, at.Count, n-at.Count)
	return nil
}

func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

// logAuditHeads logs the chain's head at start and then, checking every
// tick, the head at every store.AuditHeadLogEvery-th event, until ctx ends.
func logAuditHeads(ctx context.Context, db *store.DB, logger *slog.Logger, tick <-chan time.Time) {
	// last: the head the milestones are counted from (the head at start,
	// then the last milestone logged). Without the start's head they are
	// counted from the chain's beginning (no events, none counted).
	last, err := db.AuditHead(ctx)
	if err != nil {
		logger.Error("audit head", "err", err)
		last = store.AuditHead{}
	} else {
		logger.Info("audit chain head", "events", last.Count, "event_id", last.ID, "hash", last.Hash)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
		heads, err := db.AuditHeadsEvery(ctx, last, store.AuditHeadLogEvery)
		if err != nil {
			if ctx.Err() == nil {
				logger.Error("audit head", "err", err)
			}
			continue
		}
		for _, h := range heads {
			logger.Info("audit chain head", "events", h.Count, "event_id", h.ID, "hash", h.Hash)
			last = h
		}
	}
}

func openMigrated(ctx context.Context, cfg Config) (*store.DB, error) {
	db, err := store.Open(ctx, cfg.DB)
	if err != nil {
		return nil, err
	}
	if _, err := db.Migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// contractCmd runs `portal contract import FILE --as EMAIL`: it reads a
// contract exported as JSON or YAML and creates a draft with the same
// validation as the form, on behalf of an existing portal user; and
// `portal contract apply` (apply.go), which talks to a portal's API.
func contractCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "apply" {
		return applyCmd(ctx, args[1:], getenv, stdout)
	}
	file, as, flags, err := importArgs(args)
	if err != nil {
		return err
	}
	cfg, err := parseConfig("contract import", flags, getenv, stderr)
	if err != nil {
		return err
	}
	c, err := readContractFile(file)
	if err != nil {
		return err
	}
	db, err := openMigrated(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	user, err := db.UserByEmail(ctx, as)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("--as %s: no portal user with that email has signed in yet", as)
	}
	if err != nil {
		return err
	}
	// The same authorization as the form: the user's roles and teams as the
	// groups file maps the groups recorded at their last login.
	var mapping auth.Mapping
	switch {
	case cfg.GroupsFile != "":
		if mapping, err = auth.LoadMapping(cfg.GroupsFile); err != nil {
			return err
		}
	case cfg.Dev:
		mapping = auth.DevMapping()
	default:
		return errors.New("--groups-file: required, to check that --as " + as + " may file a request for the contract's team (or --dev for the demo groups). " + importUsage)
	}
	roles, ms := mapping.Resolve(user.Groups)
	p := workflow.NewPrincipal(user.ID, user.Subject, user.Email, user.Name, roles, ms)
	if d := workflow.Decide(p, workflow.ActionCreateRequest, workflow.Object{Team: c.Team}); !d.Allowed {
		return fmt.Errorf("--as %s may not file a request for team %q (%s; groups at their last login on %s: %s): nothing was imported",
			as, c.Team, d.Reason, user.LastLogin.UTC().Format(time.RFC3339), groupList(user.Groups))
	}
	cluster, err := loadCluster(cfg)
	if err != nil {
		return err
	}
	env := db.ValidationEnv(ctx, time.Now(), 0, nil)
	env.InstanceTypes = cluster.AllowedInstanceTypes()
	env.ReservedNamespaces = cluster.ReservedNamespaces
	if env.TeamRolePrefix, err = teamRolePrefix(cfg); err != nil {
		return err
	}
	fe := c.Validate(env)
	if down := env.Unavailable(); down != nil {
		return fmt.Errorf("%s: the checks against other connections could not run, nothing was imported: %w", file, down)
	}
	if len(fe) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "%s: %d problem(s), nothing was imported:", file, len(fe))
		for _, e := range fe {
			fmt.Fprintf(&b, "\n  %s: %s", e.Field, e.Message)
		}
		return errors.New(b.String())
	}
	conn, err := db.CreateConnection(ctx, c, workflow.Actor{ID: user.ID, Email: user.Email}, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "imported %s as draft connection #%d for team %s (version 1, hash %s)\n", file, conn.ID, conn.Team, c.Hash())
	return nil
}

func groupList(gs []string) string {
	if len(gs) == 0 {
		return "none"
	}
	return strings.Join(gs, ", ")
}

const importUsage = "usage: portal contract import FILE --as EMAIL [--db FILE] [--groups-file FILE | --dev] [--cluster-settings FILE]"

// importArgs splits contract import's arguments: the file, --as, and the
// flags parseConfig reads.
func importArgs(args []string) (file, as string, flags []string, err error) {
	if len(args) < 2 || args[0] != "import" || strings.HasPrefix(args[1], "-") {
		return "", "", nil, errors.New(importUsage + "\n" + applyUsage)
	}
	file = args[1]
	rest := args[2:]
	for i := 0; i < len(rest); i++ {
		switch a := rest[i]; {
		case a == "--as" || a == "-as":
			if i+1 >= len(rest) {
				return "", "", nil, errors.New("--as needs an email: " + importUsage)
			}
			as, i = rest[i+1], i+1
		case strings.HasPrefix(a, "--as="):
			as = strings.TrimPrefix(a, "--as=")
		default:
			flags = append(flags, a)
		}
	}
	if as == "" {
		return "", "", nil, errors.New("--as EMAIL is required: the draft is filed on behalf of that portal user. " + importUsage)
	}
	return file, as, flags, nil
}

// readContractFile reads an exported contract, JSON or YAML.
func readContractFile(file string) (workflow.Contract, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return workflow.Contract{}, err
	}
	data := raw
	if !strings.HasPrefix(strings.TrimSpace(string(raw)), "{") {
		if data, err = yaml.YAMLToJSON(raw); err != nil {
			return workflow.Contract{}, fmt.Errorf("%s: not valid YAML or JSON: %w", file, err)
		}
	}
	c, err := workflow.DecodeContract(data)
	if err != nil {
		return workflow.Contract{}, fmt.Errorf("%s: %w", file, err)
	}
	return c, nil
}
