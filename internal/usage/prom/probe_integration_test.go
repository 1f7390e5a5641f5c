package prom

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestProbeFindsTheNamespaceLabel: a real Prometheus scrapes the fixture
// exporter twice, once as is and once attaching its own namespace target
// label (with honor_labels at its default false, the exporter's namespace
// becomes exported_namespace). The probe finds the teams' namespaces under
// the configured label in the first case; in the second it warns, naming
// the label to configure, and configured with that label it finds them.
func TestProbeFindsTheNamespaceLabel(t *testing.T) {
	teams := []string{"team-red", "team-blue", "team-green"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	probe := func(base, label string) Probe {
		t.Helper()
		c, err := New(Config{URL: base, NamespaceLabel: label})
		if err != nil {
			t.Fatal(err)
		}
		for {
			p, err := c.Probe(ctx, teams, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if p.Series > 0 {
				return p
			}
			if ctx.Err() != nil {
				t.Fatal("the fixture's series never appeared")
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	exp, _ := fixtureExporter(t)
	plain := startPrometheus(t, strings.TrimPrefix(exp.URL, "http://"))
	p := probe(plain, "")
	if !slices.Equal(p.Found, []string{"team-blue", "team-red"}) || !p.OK(teams) || p.Warning(teams) != "" {
		t.Errorf("exporter's own labels: %+v, warning %q", p, p.Warning(teams))
	}

	relabelled := startPrometheusLabelling(t, strings.TrimPrefix(exp.URL, "http://"), "gpu-monitoring")
	p = probe(relabelled, "")
	w := p.Warning(teams)
	if p.OK(teams) || len(p.Found) != 0 || !strings.Contains(w, "--prometheus-namespace-label=exported_namespace") ||
		!strings.Contains(w, `no team namespace in label "namespace"`) || !strings.Contains(w, "team-blue, team-red") {
		t.Errorf("scraper's namespace label: %+v, warning %q", p, w)
	}
	if p = probe(relabelled, ExportedNamespaceLabel); !slices.Equal(p.Found, []string{"team-blue", "team-red"}) || p.Warning(teams) != "" {
		t.Errorf("configured exported_namespace: %+v, warning %q", p, p.Warning(teams))
	}

	// No team of the portal's among the values: the warning lists what
	// the label holds.
	c, err := New(Config{URL: relabelled})
	if err != nil {
		t.Fatal(err)
	}
	gold := []string{"team-gold"}
	if p, err = c.Probe(ctx, gold, time.Now()); err != nil {
		t.Fatal(err)
	}
	if w := p.Warning(gold); !strings.Contains(w, "gpu-monitoring") || !strings.Contains(w, "set --prometheus-namespace-label to the label") {
		t.Errorf("no team anywhere: %q", w)
	}
}
