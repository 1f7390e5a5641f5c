// Command pages is the page benchmark of `make bench` (issue 15): the real
// `portal serve --dev` on a database seeded like a large installation
// (internal/support/benchseed: 10,000 connections across 1,000 teams, 1,000,000
// audit events), the pages of ../shared/docs/performance.md's pages row
// (benchseed.Seeded.Pages: the six the issue names and the finance page)
// loaded with wrk
// (`wrk -t2 -c64 --latency`, keep-alive, signed in through the built-in
// identity provider), each next to a bare echo handler in this process
// that serves the very bytes and Content-Type the portal served for that
// page. A second portal runs on a second database that differs only in
// its audit trail: 1,000 events asked for, in fact the about 30,000 the
// seeding's commands append. Each page is loaded in the order large,
// small, bare echo, small, large, so that whatever else the machine does
// meanwhile weighs on both sides of every comparison alike. On SQLite
// and on PostgreSQL (fresh databases on PORTAL_TEST_POSTGRES_URL's
// server, dropped at the end).
//
// Rows recorded through internal/support/benchtable, per engine and page (a
// portal's figure is the mean of its two runs, its p99 the worse one):
//   - req/s at 1,000,000 audit events, baseline bare echo's req/s: at
//     least 0.5×;
//   - p99 in ms, bare echo's p99 shown for reference: less than 20 ms;
//   - mean latency (wrk's Latency Avg) at 1,000,000 audit events, baseline
//     the same at 1,000: at most 1.2×;
//
// and per engine the portal process's peak RSS (VmHWM, reset once its
// start-up work is done, see settle) after every page at 1,000,000
// events: less than 150 MiB. The targets are those of
// ../shared/docs/performance.md, each a constant below.
//
// A page that is not a 200 showing the seeded data, or any non-2xx answer
// during a wrk run, fails the run.
//
// Before a page's measured runs, each portal serves it for -warmup (1 s,
// unrecorded, logged): the figures are of warm pages (see warm).
//
// Each run's log line also gives the page cache's renders and hits, the
// host's steal time and the portal's CPU time per request (steadier than
// req/s from run to run); a run whose p99 is at or over -explain-over ms
// (by default the p99 target: a run that misses it) is explained from the
// portal's log (explain.go).
//
//	go run ./bench/pages -bin bin/portal -duration 5s
//
// To compare two builds of the portal in one run, interleaved as above
// (the small trail's portal runs the second build; -audit as the small
// trail, so that both databases are alike):
//
//	go run ./bench/pages -bin bin/portal-before -bin-small bin/portal -only api-list -audit 30000
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, to create and drop the benchmark's database
	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/review"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/support/benchseed"
	"github.com/hyperpod-governance/portal/internal/support/benchtable"
	"github.com/hyperpod-governance/portal/internal/support/testenv"
)

type config struct {
	bin         string
	binSmall    string // the small trail's portal binary ("": bin), to compare two builds in one run
	duration    time.Duration
	engines     []string
	connections int
	teams       int
	audit       int
	auditSmall  int
	threads     int
	conns       int
	dump        string
	explainOver float64         // ms
	warmup      time.Duration   // an unrecorded wrk run of each page before its measured ones
	profile     string          // a directory for the large portal's CPU and heap profiles ("": none)
	only        map[string]bool // the pages to measure (nil: every page, and the table's rows)
}

// measures reports whether the run measures the page named name.
func (c config) measures(name string) bool { return c.only == nil || c.only[name] }

func main() {
	var cfg config
	var engines string
	flag.StringVar(&cfg.bin, "bin", "bin/portal", "the portal binary (make build)")
	flag.StringVar(&cfg.binSmall, "bin-small", "", "another portal binary for the small trail's portal, to compare two builds in one run, interleaved (with -only, and -audit as -audit-small so that both trails are alike; the log's \"at N audit events\" lines are then the two builds)")
	flag.DurationVar(&cfg.duration, "duration", 5*time.Second, "length of each wrk run (wrk -d)")
	flag.StringVar(&engines, "engines", "sqlite,postgres", "engines to measure; postgres needs PORTAL_TEST_POSTGRES_URL")
	flag.IntVar(&cfg.connections, "connections", 10000, "seeded connections")
	flag.IntVar(&cfg.teams, "teams", 1000, "seeded teams")
	flag.IntVar(&cfg.audit, "audit", 1000000, "seeded audit events (the large trail)")
	flag.IntVar(&cfg.auditSmall, "audit-small", 1000, "seeded audit events of the comparison database")
	flag.IntVar(&cfg.threads, "threads", 2, "wrk -t")
	flag.IntVar(&cfg.conns, "c", 64, "wrk -c")
	flag.DurationVar(&cfg.warmup, "warmup", time.Second, "an unrecorded wrk run of each page on each portal before its measured runs (0: none)")
	flag.StringVar(&cfg.dump, "dump", "", "write each page's body into this directory")
	flag.StringVar(&cfg.profile, "profile", "", "write the large portal's CPU profile of each page's last run, and its heap at the end, into this directory (go tool pprof)")
	var only string
	flag.StringVar(&only, "only", "", "measure only these pages (comma-separated names, e.g. api,finance), to chase one figure: the run prints them and records no table row")
	flag.Float64Var(&cfg.explainOver, "explain-over", p99Target, "explain each portal run whose p99 is at or over this many ms from the portal's log (0: every run)")
	flag.Parse()
	cfg.engines = strings.Split(engines, ",")
	if only != "" {
		cfg.only = map[string]bool{}
		for _, n := range strings.Split(only, ",") {
			cfg.only[strings.TrimSpace(n)] = true
		}
	}
	log.SetFlags(log.Ltime)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		log.Printf("FAILED: %v", err)
		os.Exit(1)
	}
}

// logger lets benchtable.Record log through the log package.
type logger struct{}

func (logger) Logf(format string, args ...any) { log.Printf(format, args...) }

// measured is one engine and trail size: each page's wrk figures, the
// bare echo's for the same bytes, and the portal's peak RSS.
type measured struct {
	portal, bare map[string]wrkResult
	hwmKiB       int64
	audit        int // audit events seeded (at least those asked for: the seeding commands append their own)
}

func run(ctx context.Context, cfg config) error {
	if _, err := exec.LookPath("wrk"); err != nil {
		return errors.New("wrk is not installed (Debian: apt-get install wrk; make deps does)")
	}
	bin, err := portalBinary("-bin", cfg.bin)
	if err != nil {
		return err
	}
	binSmall := bin
	if cfg.binSmall != "" {
		if cfg.only == nil {
			return errors.New("-bin-small is for chasing a figure: it needs -only (no table row is recorded from two builds)")
		}
		if binSmall, err = portalBinary("-bin-small", cfg.binSmall); err != nil {
			return err
		}
	}
	rateCard, err := filepath.Abs("hack/demo-rate-card.json")
	if err != nil {
		return err
	}
	if _, err := os.Stat(rateCard); err != nil {
		return fmt.Errorf("run from the repository's root: %w", err)
	}
	for name := range cfg.only {
		if !slices.ContainsFunc((benchseed.Seeded{}).Pages(), func(p benchseed.Page) bool { return p.Name == name }) {
			return fmt.Errorf("-only: no page named %q", name)
		}
	}
	start := time.Now()
	for _, eng := range cfg.engines {
		if eng != "sqlite" && eng != "postgres" {
			return fmt.Errorf("-engines: unknown engine %q", eng)
		}
		large, small, err := measure(ctx, cfg, eng, bin, binSmall, rateCard)
		if err != nil {
			return fmt.Errorf("%s: %w", eng, err)
		}
		if cfg.only != nil {
			continue // a partial run: its figures are in the log, not the table
		}
		if err := record(cfg, eng, large, small); err != nil {
			return err
		}
	}
	log.Printf("pages: done in %s", time.Since(start).Round(time.Second))
	return nil
}

func record(cfg config, eng string, large, small measured) error {
	for _, p := range (benchseed.Seeded{}).Pages() {
		l, b, s := large.portal[p.Name], large.bare[p.Name], small.portal[p.Name]
		if p.Token {
			// The API's row (performance.md): req/s next to bare echo's, the
			// only target it has; its p99 and means are in the log.
			if err := benchtable.Record(logger{}, benchtable.Row{Figure: "api/" + eng + "/GET " + p.Path + " req/s", Value: l.RPS, Unit: "req/s",
				Baseline: b.RPS, BaselineName: "bare echo", Kind: benchtable.RatioAtLeast, Limit: apiRPSTarget}); err != nil {
				return err
			}
			continue
		}
		fig := "pages/" + eng + "/" + p.Name
		for _, r := range []benchtable.Row{
			{Figure: fig + " req/s", Value: l.RPS, Unit: "req/s", Baseline: b.RPS, BaselineName: "bare echo", Kind: benchtable.RatioAtLeast, Limit: rpsTarget},
			{Figure: fig + " p99", Value: ms(l.P99), Unit: "ms", Baseline: ms(b.P99), BaselineName: "bare echo", Kind: benchtable.Below, Limit: p99Target},
			{Figure: fmt.Sprintf("%s mean latency, %s vs %s audit events", fig, count(large.audit), count(small.audit)), Value: ms(l.Mean), Unit: "ms",
				Baseline: ms(s.Mean), BaselineName: "at " + count(small.audit), Kind: benchtable.RatioAtMost, Limit: meanTarget},
		} {
			if err := benchtable.Record(logger{}, r); err != nil {
				return err
			}
		}
	}
	return benchtable.Record(logger{}, benchtable.Row{Figure: "pages/" + eng + " portal peak RSS (VmHWM)",
		Value: float64(large.hwmKiB) / 1024, Unit: "MiB", Kind: benchtable.Below, Limit: rssTarget})
}

// The page targets of ../shared/docs/performance.md: req/s at least
// rpsTarget× bare echo's, p99 less than p99Target ms, the mean at 1,000,000 audit
// events at most meanTarget× the small trail's, the portal's peak RSS less
// than rssTarget MiB; the API's list at least apiRPSTarget× bare echo's req/s.
const (
	rpsTarget    = 0.5
	apiRPSTarget = 0.5
	p99Target    = 20
	meanTarget   = 1.2
	rssTarget    = 150
)

// count is n as the table names it: 1M, 1k.
func count(n int) string {
	switch {
	case n >= 1000000 && n%1000000 == 0:
		return fmt.Sprintf("%dM", n/1000000)
	case n >= 1000000:
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	case n >= 1000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return strconv.Itoa(n)
}

// target is one seeded database with its portal running, signed in, its
// start-up work settled and every page checked.
type target struct {
	p        *testenv.Serve
	pages    map[string]benchseed.Page // by name (the paths hold seeded ids)
	sessions map[string]*benchseed.Session
	bodies   map[string][]byte
	types    map[string]string
	audit    int
	ops      string    // the portal's operations listener: /metrics and /debug/pprof/
	dir      string    // the portal's directory: its log (portalLog)
	started  time.Time // about when its process started (gctrace's times count from it)
	close    func()    // stops the portal, drops the database
}

// measure seeds two databases of engine, one with the large trail and
// one with the small, starts a portal on each and loads every page on
// both, interleaved: large, small, bare echo (the large portal's bytes),
// small, large. Shared noise of the machine (another process, a slower
// minute) then falls on both sides of each comparison alike; the large
// and small figures are the means of their two runs (p99: the worse of
// the two).
func measure(ctx context.Context, cfg config, engine, bin, binSmall, rateCard string) (large, small measured, err error) {
	lt, err := prepare(ctx, cfg, engine, cfg.audit, bin, rateCard)
	if err != nil {
		return large, small, fmt.Errorf("at %d audit events: %w", cfg.audit, err)
	}
	defer lt.close()
	st, err := prepare(ctx, cfg, engine, cfg.auditSmall, binSmall, rateCard)
	if err != nil {
		return large, small, fmt.Errorf("at %d audit events: %w", cfg.auditSmall, err)
	}
	defer st.close()
	// The peak RSS is counted from here on: the start-up work of a
	// portal on a database like this one (the leader closes last month's
	// statements, the signals loop runs) is over, as on an installation
	// that has been up for a while.
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", lt.p.Cmd.Process.Pid), []byte("5"), 0); err != nil {
		return large, small, fmt.Errorf("reset the portal's peak RSS: %w", err)
	}
	logRSS(lt.p.Cmd.Process.Pid, engine+": the portal's peak RSS counted from here")
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	for _, pg := range lt.pages {
		body, ct := lt.bodies[pg.Name], lt.types[pg.Name]
		e.GET(pg.Path, func(c echo.Context) error { return c.Blob(http.StatusOK, ct, body) })
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return large, small, err
	}
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	bareURL := "http://" + ln.Addr().String()

	large = measured{portal: map[string]wrkResult{}, bare: map[string]wrkResult{}, audit: lt.audit}
	small = measured{portal: map[string]wrkResult{}, audit: st.audit}
	for _, named := range (benchseed.Seeded{}).Pages() {
		if !cfg.measures(named.Name) {
			continue
		}
		pg := lt.pages[named.Name]
		for _, t := range []*target{lt, st} {
			if cfg.dump != "" {
				if err := os.MkdirAll(cfg.dump, 0o755); err != nil {
					return large, small, err
				}
				if err := os.WriteFile(filepath.Join(cfg.dump, fmt.Sprintf("%s-%d-%s.html", engine, t.audit, pg.Name)), t.bodies[pg.Name], 0o644); err != nil {
					return large, small, err
				}
			}
		}
		header := lt.sessions[pg.Reader()].Header
		for _, t := range []*target{lt, st} {
			if err := warm(ctx, cfg, t, pg.Name); err != nil {
				return large, small, err
			}
		}
		l1, err := load(ctx, cfg, lt, pg.Name)
		if err != nil {
			return large, small, err
		}
		s1, err := load(ctx, cfg, st, pg.Name)
		if err != nil {
			return large, small, err
		}
		b, err := runWrk(ctx, cfg, bareURL+pg.Path, header)
		if err != nil {
			return large, small, fmt.Errorf("%s, bare echo: %w", pg.Name, err)
		}
		s2, err := load(ctx, cfg, st, pg.Name)
		if err != nil {
			return large, small, err
		}
		stopProfile := profileCPU(cfg, lt, engine+"-"+pg.Name)
		l2, err := load(ctx, cfg, lt, pg.Name)
		if perr := stopProfile(); err == nil {
			err = perr
		}
		if err != nil {
			return large, small, err
		}
		l, s := both(l1, l2), both(s1, s2)
		large.portal[pg.Name], large.bare[pg.Name], small.portal[pg.Name] = l, b, s
		log.Printf("%s %s (%d KiB): portal at %s audit events %.0f req/s, mean %.2f ms, p99 %.2f ms; at %s: %.0f req/s, mean %.2f ms, p99 %.2f ms; bare echo %.0f req/s, mean %.2f ms, p99 %.2f ms",
			engine, pg.Name, len(lt.bodies[pg.Name])/1024, count(lt.audit), l.RPS, ms(l.Mean), ms(l.P99), count(st.audit), s.RPS, ms(s.Mean), ms(s.P99), b.RPS, ms(b.Mean), ms(b.P99))
		logRSS(lt.p.Cmd.Process.Pid, engine+" "+pg.Name+": the portal after it")
	}
	if large.hwmKiB, err = vmHWM(lt.p.Cmd.Process.Pid); err != nil {
		return large, small, err
	}
	if err := profileHeap(cfg, lt, engine); err != nil {
		return large, small, err
	}
	for _, t := range []*target{lt, st} {
		select {
		case <-t.p.Exited:
			return large, small, fmt.Errorf("portal serve ended during the run:\n%s%s", t.p.Out.String(), logTail(t.p.Cmd.Dir))
		default:
		}
	}
	return large, small, nil
}

// both is two runs of one page as one figure: the means of their req/s
// and mean latencies, and the worse of their p99s.
func both(a, b wrkResult) wrkResult {
	return wrkResult{RPS: (a.RPS + b.RPS) / 2, Mean: (a.Mean + b.Mean) / 2, P99: max(a.P99, b.P99), Requests: a.Requests + b.Requests}
}

// warm loads the page name of t for cfg.warmup, unrecorded except in the
// log: the measured runs are of a portal whose page is warm, as on an
// installation where people keep reading it. What a cold page costs (its
// first render, while every other view of it waits for that render) is in
// the log line, and it weighs on the measured runs only when the data
// version moves during them, as it does in use.
func warm(ctx context.Context, cfg config, t *target, name string) error {
	if cfg.warmup <= 0 {
		return nil
	}
	pg := t.pages[name]
	views0, err := readCacheViews(t.ops)
	if err != nil {
		return err
	}
	w := cfg
	w.duration = cfg.warmup
	r, err := runWrk(ctx, w, t.p.URL+pg.Path, t.sessions[pg.Reader()].Header)
	if err != nil {
		return fmt.Errorf("%s, warm-up: %w", pg.Name, err)
	}
	views1, err := readCacheViews(t.ops)
	if err != nil {
		return err
	}
	log.Printf("  %s at %s audit events, warm-up (not recorded): %d requests, mean %.2f ms, p99 %.2f ms; %s", pg.Name, count(t.audit), r.Requests, ms(r.Mean), ms(r.P99), views0.since(views1))
	return nil
}

// load runs wrk on the page name of t.
func load(ctx context.Context, cfg config, t *target, name string) (wrkResult, error) {
	pg := t.pages[name]
	from := time.Now()
	cpu0, err := readHostCPU()
	if err != nil {
		return wrkResult{}, err
	}
	views0, err := readCacheViews(t.ops)
	if err != nil {
		return wrkResult{}, err
	}
	pid := t.p.Cmd.Process.Pid
	used0, err := cpuTime(pid)
	if err != nil {
		return wrkResult{}, err
	}
	r, err := runWrk(ctx, cfg, t.p.URL+pg.Path, t.sessions[pg.Reader()].Header)
	if err != nil {
		return r, fmt.Errorf("%s: %w", pg.Name, err)
	}
	to := time.Now()
	cpu1, err := readHostCPU()
	if err != nil {
		return r, err
	}
	views1, err := readCacheViews(t.ops)
	if err != nil {
		return r, err
	}
	used1, err := cpuTime(pid)
	if err != nil {
		return r, err
	}
	if r.Requests == 0 {
		// Not one answer within the run: req/s is 0, and the page's
		// time is at least that of one GET with nothing else running.
		t0 := time.Now()
		code, _, _, err := t.sessions[pg.Reader()].Get(t.p.URL, pg.Path)
		if err != nil || code != http.StatusOK {
			return r, fmt.Errorf("%s: GET %s after the wrk run: %d, %v", pg.Name, pg.Path, code, err)
		}
		r.Mean = time.Since(t0)
		r.P99 = r.Mean
		log.Printf("%s: NO request completed within the %s wrk run: req/s 0; mean and p99 are one unloaded GET's time (%s), a lower bound",
			pg.Name, cfg.duration, r.Mean.Round(time.Millisecond))
	}
	log.Printf("  %s at %s audit events, one run: %d requests, %.0f req/s, mean %.2f ms, p99 %.2f ms; %s; %s; %s", pg.Name, count(t.audit), r.Requests, r.RPS, ms(r.Mean), ms(r.P99), views0.since(views1), cpu0.since(cpu1), perRequest(used1-used0, r.Requests))
	if ms(r.P99) >= cfg.explainOver {
		explain(os.Stdout, t.dir, t.started, from, to)
	}
	return r, nil
}

// prepare seeds a fresh database of engine with audit events and starts
// the portal on it, signed in, settled and checked.
func prepare(ctx context.Context, cfg config, engine string, audit int, bin, rateCard string) (t *target, err error) {
	t = &target{}
	var undo []func()
	t.close = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	defer func() {
		if err != nil {
			t.close()
		}
	}()
	dir, err := os.MkdirTemp("", "portal-pagebench-")
	if err != nil {
		return t, err
	}
	undo = append(undo, func() { os.RemoveAll(dir) })
	dsn := filepath.Join(dir, "portal.db")
	if engine == "postgres" {
		base := os.Getenv("PORTAL_TEST_POSTGRES_URL")
		if base == "" {
			return t, errors.New("PORTAL_TEST_POSTGRES_URL is not set: start the test bed (bench/run.sh does), or pass -engines sqlite")
		}
		var drop func() error
		if dsn, drop, err = testenv.NewPostgresDB(base, "portal_pagebench", false); err != nil {
			return t, err
		}
		undo = append(undo, func() {
			if err := drop(); err != nil {
				log.Printf("drop the benchmark's database: %v", err)
			}
		})
	}
	t0 := time.Now()
	db, err := store.OpenMigrated(ctx, dsn)
	if err != nil {
		return t, err
	}
	db.Close()
	seeded, err := benchseed.Seed(ctx, dsn, benchseed.Scale{
		Connections: cfg.connections, Teams: cfg.teams, AuditEvents: audit, UsageDays: 30, Now: time.Now(), Logf: log.Printf})
	if err != nil {
		return t, err
	}
	t.audit = seeded.AuditEvents
	log.Printf("%s: seeded %d connections, %d teams, %d audit events (%d asked for; the commands that made the connections appended their own) in %s",
		engine, cfg.connections, cfg.teams, seeded.AuditEvents, audit, time.Since(t0).Round(10*time.Millisecond))

	t.dir, t.started = dir, time.Now()
	if t.p, t.ops, err = startPortal(bin, dir, dsn, rateCard); err != nil {
		return t, err
	}
	undo = append(undo, func() {
		if err := t.p.Terminate(); err != nil {
			log.Print(err)
		}
	})
	pages := seeded.Pages()
	t.pages = map[string]benchseed.Page{}
	for _, pg := range pages {
		t.pages[pg.Name] = pg
	}
	if t.sessions, err = benchseed.SignInAll(t.p.URL, pages); err != nil {
		return t, err
	}
	if err := settle(ctx, dsn, t.p.Cmd.Process.Pid); err != nil {
		return t, err
	}
	t.bodies, t.types, err = benchseed.Check(t.p.URL, t.sessions, pages)
	return t, err
}

// settle waits until the portal's start-up work is done: the leader has
// closed last month's statements (one cost.statement per team, then
// cost.month_closed; the seeded usage reaches into last month), the
// review scheduler has made its first tick (a minute after the start; the
// next comes --review-interval, 10 minutes, later: at 10,000 connections a
// tick takes about a second of CPU, which a page run it fell into measured
// as a stall of up to 100 ms), and the process has been idle since: less
// than idleCPU of CPU time in each of 3 seconds running.
func settle(ctx context.Context, dsn string, pid int) error {
	db, err := store.Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	t0 := time.Now()
	lastCPU, idle := time.Duration(-1), 0
	started := false // the month is closed and the review scheduler has ticked: once true, always
	for idle < 3 {
		if time.Since(t0) > 5*time.Minute {
			return errors.New("the portal's start-up work did not settle within 5 minutes (no month closed, no review tick, or the process kept busy)")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		cpu, err := cpuTime(pid)
		if err != nil {
			return err
		}
		busy := lastCPU < 0 || cpu-lastCPU >= idleCPU
		lastCPU = cpu
		if busy {
			idle = 0
			continue
		}
		if !started {
			if started, err = startupDone(ctx, db); err != nil {
				return err
			}
		}
		if started {
			idle++
		}
	}
	log.Printf("the portal's start-up work settled after %s", time.Since(t0).Round(time.Second))
	return nil
}

// startupDone says whether the leader has closed last month and the
// review scheduler has made its first tick (its singletons row).
func startupDone(ctx context.Context, db *store.DB) (bool, error) {
	closed, err := db.AuditEvents(ctx, store.AuditFilter{Action: "cost.month_closed"}, 0, 1)
	if err != nil || len(closed) == 0 {
		return false, err
	}
	_, _, err = db.SingletonHolder(ctx, review.SingletonName)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// portalBinary is the absolute path of the portal binary that flag names,
// which must exist.
func portalBinary(flag, path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(abs); err != nil {
		return "", fmt.Errorf("%s %s: %w (make build)", flag, path, err)
	}
	return abs, nil
}

// idleCPU is the CPU time a second of an idle portal stays under.
const idleCPU = 50 * time.Millisecond

// perRequest is the portal's CPU time over a run (cpuTime's, to 10 ms)
// per request answered: steadier from run to run than req/s, which moves
// with whatever else the machine does, so a change to the portal's cost
// shows in one run.
func perRequest(used time.Duration, requests int64) string {
	if requests == 0 {
		return "portal CPU n/a (no request answered)"
	}
	return fmt.Sprintf("portal CPU %.0f µs a request (%.2f s)", float64(used.Microseconds())/float64(requests), used.Seconds())
}

// cpuTime is the CPU time (user and system) process pid has used:
// /proc/PID/stat's utime and stime, in clock ticks of 1/100 s (USER_HZ,
// proc(5)).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields counted from 3 start after its closing one.
	rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// runWrk loads url for cfg.duration and fails on any non-2xx answer. A
// request still unanswered after 30 s counts as a timeout (wrk --timeout),
// and a run may end with no request answered (Requests 0).
func runWrk(ctx context.Context, cfg config, url, header string) (wrkResult, error) {
	secs := max(1, int(cfg.duration.Round(time.Second)/time.Second))
	cmd := exec.CommandContext(ctx, "wrk", "-t"+strconv.Itoa(cfg.threads), "-c"+strconv.Itoa(cfg.conns),
		"-d"+strconv.Itoa(secs)+"s", "--timeout", "30s", "--latency", "-H", header, url)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return wrkResult{}, fmt.Errorf("wrk %s: %v\n%s", url, err, out)
	}
	r, err := parseWrk(string(out))
	if err != nil {
		return r, err
	}
	if r.Non2xx > 0 {
		return r, fmt.Errorf("wrk %s: %d of %d answers were not 2xx:\n%s", url, r.Non2xx, r.Requests, out)
	}
	if r.Errors != "" {
		log.Printf("wrk %s: socket errors: %s", url, r.Errors)
	}
	return r, nil
}

// vmHWM is a process's peak resident set size in KiB (/proc/PID/status).
func vmHWM(pid int) (int64, error) { return procKiB(pid, "VmHWM:") }

// logRSS logs where a process's memory stands: which page moved the peak,
// and how much of it is mapped files' pages (RssFile: the portal binary's
// own, 70 MiB of a 146 MB binary in make bench) rather than the process's
// anonymous memory.
func logRSS(pid int, what string) {
	var parts []string
	for _, k := range []string{"VmHWM:", "VmRSS:", "RssAnon:", "RssFile:", "RssShmem:"} {
		v, err := procKiB(pid, k)
		if err != nil {
			log.Printf("%s: %v", what, err)
			return
		}
		parts = append(parts, fmt.Sprintf("%s %d MiB", strings.TrimSuffix(k, ":"), v/1024))
	}
	log.Printf("%s: %s", what, strings.Join(parts, ", "))
}

// procKiB is one of /proc/PID/status's sizes (VmHWM:, VmRSS:, RssAnon:...) in KiB.
func procKiB(pid int, key string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no %s", pid, key)
}

// startPortal starts `portal serve --dev` on dsn (testenv.LaunchServe: the
// tests' way of starting it and waiting for its ready line). Its stderr,
// the request log (a line a request: hundreds of megabytes over the
// runs), goes to portal.log in dir, as a deployed portal's goes to a file
// its runtime keeps, never to a buffer of this process: growing one
// stalled the reading of the pipe, and with it the portal's requests,
// for up to a second and a half (the p99s of 187 ms to 1.5 s of earlier
// tables).
func startPortal(bin, dir, dsn, rateCard string) (p *testenv.Serve, ops string, err error) {
	// The operations listener, as the Helm chart runs it (/metrics off
	// the page listener), with Go's profiles for -profile.
	if ops, err = freeAddr(); err != nil {
		return nil, "", err
	}
	// --api-rate-limit at its most (10,000,000 a minute and as the burst):
	// the API row measures the API's own cost, not the per-token limit (300
	// a minute by default), which 64 clients would meet in a fraction of a
	// second. A portal's API runs (warm-up and two of 5 s) make far fewer
	// requests than the burst; 100,000, the most before, was met within
	// the second run once the portal answered 12,000 a second.
	cmd := exec.Command(bin, "serve", "--dev", "--listen", "127.0.0.1:0", "--ops-listen", ops, "--ops-pprof",
		"--db", dsn, "--rate-card", rateCard, "--api-rate-limit", "10000000")
	cmd.Dir = dir
	// A GC line a collection in the log, for explain.
	cmd.Env = append(os.Environ(), "GODEBUG=gctrace=1")
	logFile, err := os.Create(filepath.Join(dir, portalLog))
	if err != nil {
		return nil, "", err
	}
	defer logFile.Close() // the child has its own descriptor
	cmd.Stderr = logFile
	if p, err = testenv.LaunchServe(cmd, 2*time.Minute); err != nil {
		return nil, "", fmt.Errorf("%w\n%s", err, logTail(dir))
	}
	return p, "http://" + ops, nil
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// profileCPU starts a CPU profile of t's portal for cfg.duration (a
// measured run's length) into cfg.profile/name-cpu.pprof, when -profile is
// set; the function it returns waits for it.
func profileCPU(cfg config, t *target, name string) func() error {
	if cfg.profile == "" {
		return func() error { return nil }
	}
	secs := max(1, int(cfg.duration.Round(time.Second)/time.Second))
	done := make(chan error, 1)
	go func() {
		done <- fetchTo(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", t.ops, secs), filepath.Join(cfg.profile, name+"-cpu.pprof"))
	}()
	return func() error { return <-done }
}

// profileHeap writes t's portal's heap profile into
// cfg.profile/name-heap.pprof, when -profile is set.
func profileHeap(cfg config, t *target, name string) error {
	if cfg.profile == "" {
		return nil
	}
	return fetchTo(t.ops+"/debug/pprof/heap", filepath.Join(cfg.profile, name+"-heap.pprof"))
}

// fetchTo writes the body of GET url into file.
func fetchTo(url, file string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	log.Printf("profile: %s", file)
	return f.Close()
}

// portalLog is the portal's log in its directory (startPortal).
const portalLog = "portal.log"

// logTail is the last 4 KiB of the portal's log in dir, for an error
// message.
func logTail(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, portalLog))
	if err != nil {
		return err.Error()
	}
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return "the portal's log ends:\n" + string(b)
}
