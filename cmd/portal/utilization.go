package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/usage/prom"
)

// validatePrometheus checks the --prometheus-* flags.
func (c Config) validatePrometheus() []error {
	var errs []error
	if c.PrometheusURL == "" {
		if c.PrometheusSigV4Region != "" {
			errs = append(errs, errors.New("--prometheus-sigv4-region: set without --prometheus-url (nothing to sign)"))
		}
		return errs
	}
	u, err := prom.NormalizeURL(c.PrometheusURL)
	if err != nil {
		errs = append(errs, fmt.Errorf("--prometheus-url: %w", err))
	}
	if c.PrometheusSigV4Region != "" && !regionRE.MatchString(c.PrometheusSigV4Region) {
		errs = append(errs, fmt.Errorf("--prometheus-sigv4-region: %q is not a region name such as us-east-1", c.PrometheusSigV4Region))
	}
	if u != nil && (c.PrometheusSigV4Region != "" || prom.AMPRegion(u) != "") && u.Scheme != "https" && !isLoopbackHost(u.Hostname()) {
		errs = append(errs, fmt.Errorf("--prometheus-url: %q must be https when queries are signed with SigV4 (http only on loopback)", c.PrometheusURL))
	}
	if !prom.ValidLabelName(c.PrometheusNamespaceLabel) {
		errs = append(errs, fmt.Errorf("--prometheus-namespace-label: %q is not a Prometheus label name such as namespace or exported_namespace", c.PrometheusNamespaceLabel))
	}
	return errs
}

// utilizationSource is where pages read GPU utilization from: Prometheus
// when --prometheus-url is set, else an untyped nil (usage.Configured false:
// pages show allocation only and say so). SigV4 credentials come from the
// SDK's default chain (in the cluster, the portal's Pod Identity), loaded
// without calling AWS; the first query is the first call.
func utilizationSource(ctx context.Context, cfg Config, logger *slog.Logger) (usage.Utilization, error) {
	if cfg.PrometheusURL == "" {
		logger.Info("no --prometheus-url: usage pages show allocation only, without GPU utilization")
		return nil, nil
	}
	pc := prom.Config{URL: cfg.PrometheusURL, SigV4Region: cfg.PrometheusSigV4Region, NamespaceLabel: cfg.PrometheusNamespaceLabel}
	u, err := prom.NormalizeURL(cfg.PrometheusURL)
	if err != nil {
		return nil, fmt.Errorf("--prometheus-url: %w", err)
	}
	if region := firstNonEmpty(cfg.PrometheusSigV4Region, prom.AMPRegion(u)); region != "" {
		ac, err := loadAWSConfig(ctx, region)
		if err != nil {
			return nil, fmt.Errorf("--prometheus-url: SigV4: %w", err)
		}
		pc.SigV4Region, pc.Credentials = region, ac.Credentials
	}
	c, err := prom.New(pc)
	if err != nil {
		return nil, fmt.Errorf("--prometheus-url: %w", err)
	}
	logger.Info("GPU utilization from Prometheus", "url", c.URL(), "sigv4_region", c.SigV4Region(), "namespace_label", cfg.PrometheusNamespaceLabel)
	return c, nil
}

// probeUtilization runs the utilization probe once at start (the same
// check /admin/cluster shows): a warning naming the label to configure when
// no series carries a live connection's namespace, since the usage pages
// would otherwise show no utilization without saying why.
func probeUtilization(ctx context.Context, p prom.Prober, db *store.DB, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ch, err := prom.CheckSeries(ctx, p, db.LiveNamespaces, time.Now())
	switch {
	case ch.Status == string(provision.CheckOK):
		logger.Info("utilization probe: "+ch.Detail, "check", ch.Name)
	default:
		logger.Warn("utilization probe: "+ch.Detail, "check", ch.Name, "todo", ch.Todo, "err", err)
	}
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
