package web

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/support/benchseed"
	"github.com/hyperpod-governance/portal/internal/support/benchtable"
	"github.com/hyperpod-governance/portal/internal/support/testenv"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// seedScale fills the database dsn names like a large installation
// (internal/support/benchseed, the seeding `make bench`'s wrk harness uses too):
// 10,000 connections across 1,000 teams made through the portal's
// commands, with real contract versions and capacity, open reviews, 30
// days of every team's usage, and auditEvents audit events, or the
// commands' own (about 30,000) when that is more.
func seedScale(b testing.TB, dsn string, auditEvents int) benchseed.Seeded {
	b.Helper()
	sc := benchseed.Large(time.Now())
	sc.AuditEvents = auditEvents
	t0 := time.Now()
	seeded, err := benchseed.Seed(context.Background(), dsn, sc)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded in %s: %d audit events (%d asked for)", time.Since(t0).Round(10*time.Millisecond), seeded.AuditEvents, auditEvents)
	return seeded
}

type latencies []time.Duration

func (l latencies) pct(p float64) time.Duration {
	s := append(latencies(nil), l...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(float64(len(s)-1)*p)]
}

func (l latencies) mean() time.Duration {
	var t time.Duration
	for _, d := range l {
		t += d
	}
	return t / time.Duration(len(l))
}

func timeGets(b *testing.B, c *http.Client, url string, n int) latencies {
	out := make(latencies, 0, n)
	for range n {
		start := time.Now()
		resp, err := c.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("GET %s = %d", url, resp.StatusCode)
		}
		out = append(out, time.Since(start))
	}
	return out
}

// scalePages are the pages of make bench (benchseed's: the six of issue
// 15 and the finance page), then two more views of the connection list.
func scalePages(s benchseed.Seeded) []benchseed.Page {
	return append(s.Pages(),
		benchseed.Page{Name: "list_team_filter", Path: "/connections?team=" + s.UsageTeam + "&state=active"},
		benchseed.Page{Name: "list_deep_page", Path: "/connections?before=200"})
}

// BenchmarkPagesAtScale measures the pages of make bench (dashboard,
// connection list, connection detail, audit, team usage, review queue as
// an admin who also reviews; the finance page as the finance user) over HTTP, at 10,000 connections / 1,000 teams and 1,000 or
// 1,000,000 audit events, next to a bare echo handler that returns the same
// bytes, on SQLite and, when PORTAL_TEST_POSTGRES_URL names a server (the
// test bed's, see hack/testbed/postgres.sh), on PostgreSQL: the same pages,
// the same scale, each with its ratio to bare echo. It reports mean and p99
// for both and their ratio, and records the mean-time ratio to bare echo
// (the CPU cost of a page next to echo writing its bytes) and the 1M/1k
// ratio in the bench table (internal/support/benchtable). -pages-audit picks the
// audit scales (default both).
//
//	go test -run XXX -bench PagesAtScale -benchtime 300x ./internal/web/
func BenchmarkPagesAtScale(b *testing.B) {
	engines := []struct {
		name string
		dsn  func() string
	}{
		{"sqlite", func() string { return b.TempDir() + "/portal.db" }},
		{"postgres", func() string { return benchPostgresDSN(b) }},
	}
	for _, eng := range engines {
		b.Run(eng.name, func(b *testing.B) {
			means := map[string]map[int]time.Duration{}
			rows := map[string]benchtable.Row{}
			for _, events := range pagesAuditScales() {
				b.Run(fmt.Sprintf("audit=%d", events), func(b *testing.B) {
					dsn := eng.dsn()
					if dsn == "" {
						b.Skip("PORTAL_TEST_POSTGRES_URL is not set: start the test bed (make test does; or hack/testbed/up.sh DIR and source DIR/testbed.env)")
					}
					t := &testing.T{}
					h := newHarnessOn(t, dsn, false)
					seeded := seedScale(b, dsn, events)
					// An admin who also reviews (the review queue is the
					// reviewers' page; the dashboard then shows every card).
					admin := h.signIn("revadmin")
					// The finance page is the finance role's alone.
					finance := h.signIn("finance")
					for _, page := range scalePages(seeded) {
						b.Run(page.Name, func(b *testing.B) {
							client := admin.c
							if page.User == "finance" {
								client = finance.c
							}
							resp, body := h.get(client, page.Path)
							if resp.StatusCode != 200 || !strings.Contains(body, page.Want) {
								b.Fatalf("%s = %d, want 200 showing %q", page.Path, resp.StatusCode, page.Want)
							}
							bare := echo.New()
							bare.GET("/*", func(c echo.Context) error { return c.HTML(200, body) })
							bs := httptest.NewServer(bare)
							defer bs.Close()
							b.ResetTimer()
							portal := timeGets(b, client, h.base+page.Path, b.N)
							b.StopTimer()
							plain := timeGets(b, bs.Client(), bs.URL+page.Path, b.N)
							ratio := float64(portal.mean()) / float64(plain.mean())
							b.ReportMetric(float64(portal.mean().Microseconds())/1000, "mean-ms")
							b.ReportMetric(float64(portal.pct(0.99).Microseconds())/1000, "p99-ms")
							b.ReportMetric(float64(plain.mean().Microseconds())/1000, "bare-mean-ms")
							b.ReportMetric(float64(plain.pct(0.99).Microseconds())/1000, "bare-p99-ms")
							b.ReportMetric(ratio, "ratio")
							b.ReportMetric(float64(len(body))/1024, "page-KiB")
							if means[page.Name] == nil {
								means[page.Name] = map[int]time.Duration{}
							}
							means[page.Name][events] = portal.mean()
							// Serial requests: the time of one page next to
							// the time of bare echo writing its bytes (the
							// wrk harness of bench/ measures throughput).
							// The last run of a sub-benchmark (the one with
							// the largest b.N) is the row recorded.
							rows[fmt.Sprintf("%s/%d", page.Name, events)] = benchtable.Row{Figure: fmt.Sprintf("pages/%s/%s (audit %d) mean time, serial", eng.name, page.Name, events),
								Value: float64(portal.mean().Microseconds()) / 1000, Unit: "ms", Baseline: float64(plain.mean().Microseconds()) / 1000,
								BaselineName: "bare echo", Kind: benchtable.RatioAtMost, Limit: 4}
						})
					}
				})
			}
			for _, events := range pagesAuditScales() {
				for _, page := range scalePages(benchseed.Seeded{}) {
					if r, ok := rows[fmt.Sprintf("%s/%d", page.Name, events)]; ok {
						benchtable.Record(b, r)
					}
				}
			}
			for _, page := range scalePages(benchseed.Seeded{}) {
				small, big := means[page.Name][1000], means[page.Name][1000000]
				if small == 0 || big == 0 {
					continue
				}
				b.Logf("%s: 1M/1k audit events = %.2f", page.Name, float64(big)/float64(small))
				benchtable.Record(b, benchtable.Row{Figure: fmt.Sprintf("pages/%s/%s mean time at 1M audit events", eng.name, page.Name),
					Value: float64(big.Microseconds()) / 1000, Unit: "ms", Baseline: float64(small.Microseconds()) / 1000,
					BaselineName: "at 1k", Kind: benchtable.RatioAtMost, Limit: 1.2})
			}
		})
	}
}

var pagesAudit = flag.String("pages-audit", "1000,1000000", "BenchmarkPagesAtScale: the audit event counts to seed, comma-separated")

func pagesAuditScales() []int {
	var out []int
	for _, f := range strings.Split(*pagesAudit, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			panic("-pages-audit: " + f + " is not a positive count")
		}
		out = append(out, n)
	}
	return out
}

// benchPostgresDSN returns the URL of a new database on the server
// PORTAL_TEST_POSTGRES_URL names (dropped when the benchmark ends), or ""
// when it names none.
func benchPostgresDSN(b *testing.B) string {
	if os.Getenv("PORTAL_TEST_POSTGRES_URL") == "" {
		return ""
	}
	return testenv.PostgresDB(b, "portal_bench", false)
}

// largeContract is a valid contract near the caps: free text at its cap
// in two-byte characters, every list of rows full.
func largeContract() workflow.Contract {
	c := workflow.ExampleContract()
	c.BusinessPurpose = strings.Repeat("é", workflow.MaxTextLen)
	c.DecommissionCriteria = strings.Repeat("é", workflow.MaxTextLen)
	c.Signals = nil
	for i := range workflow.MaxSignals {
		c.Signals = append(c.Signals, workflow.Signal{Name: fmt.Sprintf("signal %d", i), Owner: "owner.red@example.test", Response: strings.Repeat("é", workflow.MaxRowTextLen)})
	}
	c.EgressAllowances = nil
	for i := range workflow.MaxEgressRows {
		e := workflow.Egress{Destination: fmt.Sprintf("host-%d.example.com", i), Reason: strings.Repeat("é", workflow.MaxRowTextLen)}
		for p := range workflow.MaxPortsPerEgress {
			e.Ports = append(e.Ports, 8000+p)
		}
		c.EgressAllowances = append(c.EgressAllowances, e)
	}
	return c
}

// seedVersions inserts connection id with n versions of c (each a little
// different), straight into the tables: the store keeps at most
// workflow.MaxVersions, and the benchmark goes past it to show the page
// does not depend on it.
func seedVersions(tb testing.TB, h *harness, id int64, n int, c workflow.Contract) {
	tb.Helper()
	stmts := []string{fmt.Sprintf(`INSERT INTO connections (id, team, state, cluster_name, purpose, current_version, requester_id, created_at, updated_at)
		SELECT %d, 'red', 'draft', 'shared-hp', 'Large contract', %d, id, '2026-01-01T00:00:00.000000000Z', '2026-01-01T00:00:00.000000000Z' FROM users WHERE email = 'owner.red@example.test'`, id, n)}
	for v := 1; v <= n; v++ {
		c.ReviewCadenceDays = 7 + v%300
		body := strings.ReplaceAll(string(c.Canonical()), "'", "''")
		stmts = append(stmts, fmt.Sprintf(`INSERT INTO contract_versions (connection_id, version, body, hash, namespaces, author_id, created_at)
			SELECT %d, %d, '%s', '%s', 'hyperpod-ns-red', requester_id, created_at FROM connections WHERE id = %d`, id, v, body, c.Hash(), id))
	}
	if err := h.db.ExecForTest(context.Background(), stmts...); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkDetailPage serves the detail page of a connection with 1, 50
// and 200 versions of a contract near the size caps, as an admin (who gets
// every part of the page). The page loads the history's metadata and two
// contracts, so time and allocations stay flat as versions grow.
//
//	go test -run x -bench DetailPage -benchmem ./internal/web
func BenchmarkDetailPage(b *testing.B) {
	t := &testing.T{}
	h := newHarness(t, false)
	h.signIn("owner.red") // the requester
	admin := h.signIn("admin")
	c := largeContract()
	if fe := c.Validate(workflow.ValidationEnv{Now: time.Now()}); len(fe) > 0 {
		b.Fatalf("the large contract is invalid: %v", fe)
	}
	b.Logf("contract body: %d bytes", len(c.Canonical()))
	for i, n := range []int{1, 50, 200} {
		id := int64(100 + i)
		seedVersions(b, h, id, n, c)
		b.Run(fmt.Sprintf("versions=%d", n), func(b *testing.B) {
			url := fmt.Sprintf("%s/connections/%d", h.base, id)
			for b.Loop() {
				resp, err := admin.c.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("GET %s = %d", url, resp.StatusCode)
				}
			}
		})
	}
}
