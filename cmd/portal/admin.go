package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// auditCmd runs `portal audit verify`: it walks the hash chain and names the
// first broken row.
func auditCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "verify" {
		return errors.New("usage: portal audit verify [--db FILE]")
	}
	cfg, err := parseConfig("audit verify", args[1:], getenv, stderr)
	if err != nil {
		return err
	}
	db, err := openMigrated(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	n, brk, err := db.VerifyAudit(ctx)
	if err != nil {
		return err
	}
	if brk != nil {
		return fmt.Errorf("audit chain BROKEN at event %d (%s); %d events before it verified", brk.ID, brk.Reason, n)
	}
	fmt.Fprintf(stdout, "audit chain OK: %d events verified\n", n)
	return nil
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
// validation as the form, on behalf of an existing portal user.
func contractCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	const usage = "usage: portal contract import FILE --as EMAIL [--db FILE]"
	if len(args) < 2 || args[0] != "import" || strings.HasPrefix(args[1], "-") {
		return errors.New(usage)
	}
	file, rest := args[1], args[2:]
	var as string
	var flags []string
	for i := 0; i < len(rest); i++ {
		switch a := rest[i]; {
		case a == "--as" || a == "-as":
			if i+1 >= len(rest) {
				return errors.New("--as needs an email: " + usage)
			}
			as, i = rest[i+1], i+1
		case strings.HasPrefix(a, "--as="):
			as = strings.TrimPrefix(a, "--as=")
		default:
			flags = append(flags, a)
		}
	}
	if as == "" {
		return errors.New("--as EMAIL is required: the draft is filed on behalf of that portal user. " + usage)
	}
	cfg, err := parseConfig("contract import", flags, getenv, stderr)
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	data := raw
	if !strings.HasPrefix(strings.TrimSpace(string(raw)), "{") {
		if data, err = yaml.YAMLToJSON(raw); err != nil {
			return fmt.Errorf("%s: not valid YAML or JSON: %w", file, err)
		}
	}
	c, err := workflow.DecodeContract(data)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
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
	env := db.ValidationEnv(ctx, time.Now(), 0, nil)
	if env.TeamRolePrefix, err = teamRolePrefix(cfg); err != nil {
		return err
	}
	if fe := c.Validate(env); len(fe) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "%s: %d problem(s), nothing was imported:", file, len(fe))
		for _, e := range fe {
			fmt.Fprintf(&b, "\n  %s: %s", e.Field, e.Message)
		}
		return errors.New(b.String())
	}
	conn, err := db.CreateConnection(ctx, c, store.Actor{ID: user.ID, Email: user.Email}, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "imported %s as draft connection #%d for team %s (version 1, hash %s)\n", file, conn.ID, conn.Team, c.Hash())
	return nil
}
