package usage

import (
	"context"
	"time"
)

// Point is one step of a utilization series: how busy, on average, the GPUs
// allocated to a namespace were during the step that starts at At (the
// samples in (At, At+step], as Prometheus's range selectors count them), in
// percent (0-100, the scale of the DCGM exporter's DCGM_FI_DEV_GPU_UTIL). A step in which the
// namespace held no GPU that reported has no Point (a gap, not a zero).
type Point struct {
	At      time.Time
	Percent float64
}

// Utilization says how busy the GPUs allocated to a team really are, as
// opposed to how many it holds (the hourly rows). The portal's source is
// Prometheus (internal/usage/prom) when --prometheus-url is set; without it
// the web layer is handed a nil Utilization, and pages show allocation only
// and say so (see Configured).
//
// Both methods cover [from, to) in steps of step, starting at from: the
// Points' At are from, from+step, ... before to. They fail with a clear
// error for an empty range, a non-positive step, or more steps than one
// query may return.
type Utilization interface {
	// NamespaceUtilization is one namespace's series.
	NamespaceUtilization(ctx context.Context, namespace string, from, to time.Time, step time.Duration) ([]Point, error)
	// NamespacesUtilization is every namespace's series in one query, keyed
	// by namespace (for the cluster overview); namespaces without GPUs that
	// reported are absent.
	NamespacesUtilization(ctx context.Context, from, to time.Time, step time.Duration) (map[string][]Point, error)
}

// Configured reports whether u is a real source. cmd/portal hands the web
// layer an untyped nil when --prometheus-url is unset (never a typed nil
// pointer), so nil means "not configured": pages show allocation only.
func Configured(u Utilization) bool { return u != nil }
