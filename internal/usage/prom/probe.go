package prom

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ProbeWindow is how far back the probe looks for GPU series.
const ProbeWindow = time.Hour

// ExportedNamespaceLabel is where the exporter's namespace label ends up
// when the scraper attaches a namespace target label of its own and does
// not honor the scraped labels: Prometheus renames the scraped label
// "exported_<name>" ("If honor_labels is set to "false", label conflicts
// are resolved by renaming conflicting labels in the scraped data to
// "exported_<original-label>"", https://prometheus.io/docs/prometheus/latest/configuration/configuration/#scrape_config).
const ExportedNamespaceLabel = "exported_namespace"

// Probe is what one query found about the utilization series: whether the
// configured namespace label carries any team namespace.
type Probe struct {
	Label  string // the configured namespace label
	Series int    // groups of the metric in the window (0: no series at all)
	// Found are the team namespaces under Label; Elsewhere the team
	// namespaces under the other candidate label, keyed by it.
	Found     []string
	Elsewhere map[string][]string
	// Values are a few values Label holds that are no team's namespace.
	Values []string
}

// OK reports whether the configured label carries a team namespace (or
// there is no team to look for).
func (p Probe) OK(teams []string) bool { return len(teams) == 0 || len(p.Found) > 0 }

// Warning says what is wrong and which label to configure; "" when OK.
func (p Probe) Warning(teams []string) string {
	if p.OK(teams) {
		return ""
	}
	for _, l := range []string{ExportedNamespaceLabel, DefaultNamespaceLabel} {
		if ns := p.Elsewhere[l]; l != p.Label && len(ns) > 0 {
			return fmt.Sprintf("GPU utilization will show nothing: the %s series carry no team namespace in label %q, but %d in %q (%s): set --prometheus-namespace-label=%s",
				Metric, p.Label, len(ns), l, strings.Join(ns, ", "), l)
		}
	}
	if p.Series == 0 {
		return fmt.Sprintf("GPU utilization will show nothing: Prometheus has no %s series in the last %s; check that the DCGM exporter is scraped (HyperPod's observability add-on collects it)", Metric, ProbeWindow)
	}
	return fmt.Sprintf("GPU utilization will show nothing: the %s series carry no team namespace in label %q (it holds %s): set --prometheus-namespace-label to the label holding each GPU's pod namespace (%s when the scraper adds its own namespace label)",
		Metric, p.Label, orNone(p.Values), ExportedNamespaceLabel)
}

func orNone(v []string) string {
	if len(v) == 0 {
		return "no value"
	}
	return strings.Join(v, ", ")
}

// Probe runs one instant query at at, grouping the metric's series of the
// last ProbeWindow by the configured label and the two candidates
// (namespace, exported_namespace), and compares their values with teams,
// the team namespaces the portal provisions.
func (c *Client) Probe(ctx context.Context, teams []string, at time.Time) (Probe, error) {
	labels := []string{c.label}
	for _, l := range []string{DefaultNamespaceLabel, ExportedNamespaceLabel} {
		if !slices.Contains(labels, l) {
			labels = append(labels, l)
		}
	}
	q := fmt.Sprintf("count by (%s) (last_over_time(%s[%ds]))", strings.Join(labels, ", "), Metric, int(ProbeWindow.Seconds()))
	samples, err := c.Query(ctx, q, at)
	if err != nil {
		return Probe{}, err
	}
	p := Probe{Label: c.label, Series: len(samples), Elsewhere: map[string][]string{}}
	for _, s := range samples {
		for _, l := range labels {
			v := s.Labels[l]
			switch {
			case v == "":
			case !slices.Contains(teams, v):
				if l == c.label && !slices.Contains(p.Values, v) && len(p.Values) < 5 {
					p.Values = append(p.Values, v)
				}
			case l == c.label:
				if !slices.Contains(p.Found, v) {
					p.Found = append(p.Found, v)
				}
			default:
				if !slices.Contains(p.Elsewhere[l], v) {
					p.Elsewhere[l] = append(p.Elsewhere[l], v)
				}
			}
		}
	}
	slices.Sort(p.Found)
	slices.Sort(p.Values)
	for _, v := range p.Elsewhere {
		slices.Sort(v)
	}
	return p, nil
}

// Prober is a utilization source that can say whether its series carry
// the team namespaces (*Client).
type Prober interface {
	Probe(ctx context.Context, teams []string, at time.Time) (Probe, error)
}

// Check is the readiness check of the utilization series, in the
// readiness page's words: Status is "ok", "failing" or "unknown" (the
// values of provision.CheckStatus, which this package may not import).
type Check struct {
	Name, Status, Detail, Todo string
}

// CheckName names the check.
const CheckName = "GPU utilization series (Prometheus)"

// CheckSeries probes p for the live connections' namespaces (teams reads
// them) at now: one query. /admin/cluster shows it and the portal logs it
// at start, so that usage pages without utilization say why. The error,
// when there is one, is for the log: the check says what to do.
func CheckSeries(ctx context.Context, p Prober, teams func(context.Context) ([]string, error), now time.Time) (Check, error) {
	ch := Check{Name: CheckName}
	live, err := teams(ctx)
	if err != nil {
		ch.Status, ch.Detail = "unknown", "The team namespaces could not be read."
		return ch, err
	}
	res, err := p.Probe(ctx, live, now)
	switch {
	case err != nil:
		ch.Status, ch.Detail, ch.Todo = "unknown", "The probe query failed.", "Check --prometheus-url and the portal's permission to query it (the log has the error)."
	case len(live) == 0:
		ch.Status, ch.Detail = "ok", "No live connection yet: nothing to look for."
	case res.OK(live):
		ch.Status, ch.Detail = "ok", fmt.Sprintf("Series of the last hour carry team namespaces in label %q: %s.", res.Label, strings.Join(res.Found, ", "))
	default:
		ch.Status, ch.Detail, ch.Todo = "failing", res.Warning(live), "Restart the portal with the label named above."
	}
	return ch, err
}
