package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/hyperpod-governance/portal/internal/support/testenv"
)

// portal is a running `portal serve --dev` process.
type portal struct {
	URL string
	DB  string // the portal's database file
	cmd *exec.Cmd
	out *testenv.Buffer
}

var (
	buildOnce sync.Once
	binPath   string
	binTemp   string // the temporary directory binPath is in, removed by TestMain ("": none)
	buildErr  error
)

// TestMain stops the shared browser and its driver (browser), and removes
// the portal binary portalBinary built in a temporary directory, with the
// directory: every make test left one behind (140 MB; 23 of them, 3.2 GB,
// had filled this machine's temporary directory by 2026-12-05). The one
// built in PORTAL_TEST_BIN_DIR (make test) stays, for the next run.
func TestMain(m *testing.M) {
	code := m.Run()
	if sharedBrowser != nil {
		_ = sharedBrowser.Close()
	}
	if sharedPW != nil {
		_ = sharedPW.Stop()
	}
	if binTemp != "" {
		_ = os.RemoveAll(binTemp)
	}
	os.Exit(code)
}

// portalBinary builds cmd/portal once per test run.
func portalBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if os.Getenv("PORTAL_TEST_BIN_DIR") == "" {
			if binTemp, buildErr = os.MkdirTemp("", "portal-e2e-bin"); buildErr != nil {
				return
			}
		}
		binPath = testenv.BinPath("portal-e2e", binTemp)
		buildErr = testenv.GoBuild(binPath, "./cmd/portal", "-s -w")
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// startPortal runs the real binary in dev mode on a free loopback port with
// its own data directory, and stops it (SIGTERM) when the test ends.
func startPortal(t *testing.T, extra ...string) *portal {
	t.Helper()
	return startPortalEnv(t, nil, extra...)
}

// startPortalEnv is startPortal with env (KEY=value) added to the portal
// process's environment, for a test that runs in parallel (t.Setenv would
// refuse it).
func startPortalEnv(t *testing.T, env []string, extra ...string) *portal {
	t.Helper()
	bin := portalBinary(t)
	dir := t.TempDir()
	args := append([]string{"serve", "--dev", "--listen", "127.0.0.1:0",
		"--db", filepath.Join(dir, "portal.db"), "--session-key-file", filepath.Join(dir, "session.key")}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	s := testenv.StartServe(t, cmd)
	return &portal{URL: s.URL, DB: filepath.Join(dir, "portal.db"), cmd: cmd, out: s.Out}
}

// One Playwright driver and one browser serve every test of the package
// (each test opens its own contexts, with their own cookies: newPage):
// started by the first test that asks, stopped by TestMain. A driver and a
// browser a test cost about 3 CPU-seconds each time on this machine, for
// 14 tests.
var (
	browserOnce   sync.Once
	sharedPW      *playwright.Playwright
	sharedBrowser playwright.Browser
	browserErr    error
)

// browser is the package's Chromium (Debian's headless shell) run through
// the npm-installed driver, started on first use.
func browser(t *testing.T) playwright.Browser {
	t.Helper()
	driverDir := testenv.Require(t, "PORTAL_E2E_DRIVER_DIR")
	browserOnce.Do(func() { sharedPW, sharedBrowser, browserErr = startBrowser(driverDir) })
	if browserErr != nil {
		t.Fatal(browserErr)
	}
	return sharedBrowser
}

// startBrowser starts the Playwright driver in driverDir and Chromium
// (PORTAL_E2E_CHROMIUM, or Debian's headless shell, as hack/e2e-setup.sh
// installs it: the browser Playwright runs for headless tests; that script
// says why).
func startBrowser(driverDir string) (*playwright.Playwright, playwright.Browser, error) {
	chromium := os.Getenv("PORTAL_E2E_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium-headless-shell"
	}
	pw, err := playwright.Run(&playwright.RunOptions{DriverDirectory: driverDir, SkipInstallBrowsers: true, Verbose: false})
	if err != nil {
		return nil, nil, fmt.Errorf("start the Playwright driver in %s: %w", driverDir, err)
	}
	b, err := pw.Chromium.Launch(playwright.BrowserTypeLaunchOptions{
		ExecutablePath: playwright.String(chromium),
		Headless:       playwright.Bool(true),
		Args: []string{"--disable-gpu", "--disable-sync", "--disable-background-networking",
			"--disable-component-update", "--no-first-run", "--disable-dev-shm-usage"},
	})
	if err != nil {
		_ = pw.Stop()
		return nil, nil, fmt.Errorf("launch %s: %w", chromium, err)
	}
	return pw, b, nil
}

// newPage opens a fresh browser context (its own cookies) and page, and
// fails the test on any console error or CSP violation the page reports.
func newPage(t *testing.T, b playwright.Browser) playwright.Page {
	t.Helper()
	bc, err := b.NewContext(playwright.BrowserNewContextOptions{
		Viewport: &playwright.Size{Width: 1280, Height: 800},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bc.Close() })
	pg, err := bc.NewPage()
	if err != nil {
		t.Fatal(err)
	}
	pg.SetDefaultTimeout(10000)
	pg.On("console", func(m playwright.ConsoleMessage) {
		// Expected 4xx pages are asserted by status; anything else the
		// browser reports as an error (CSP violations, script errors) fails.
		if m.Type() == "error" && !expectedStatusRE.MatchString(m.Text()) {
			t.Errorf("browser console error on %s: %s", pg.URL(), m.Text())
		}
	})
	return pg
}

// screenshot writes a full-page PNG into the artifacts folder.
// settled waits until a page that followed a job live is done with it:
// static/progress.js reloads the page once the job is finished, and a
// screenshot taken while it reloads never completes, so this waits for the
// reloaded page (or one whose job was finished when it loaded).
func settled(t *testing.T, pg playwright.Page, what string) {
	t.Helper()
	wait := playwright.Float(30000)
	// Locators, not an evaluated function: the portal's CSP forbids eval.
	mustOK(t, pg.Locator("html:not([data-progress-polling])").WaitFor(playwright.LocatorWaitForOptions{
		State: playwright.WaitForSelectorStateAttached, Timeout: wait}), what+": reloaded")
	mustOK(t, pg.WaitForLoadState(playwright.PageWaitForLoadStateOptions{State: playwright.LoadStateLoad, Timeout: wait}), what+": loaded")
	mustOK(t, pg.Locator(`#progress[data-refresh-url]:not([data-refresh-url=""])`).WaitFor(playwright.LocatorWaitForOptions{
		State: playwright.WaitForSelectorStateDetached, Timeout: wait}), what+": no job followed")
}

func screenshot(t *testing.T, pg playwright.Page, name string) {
	t.Helper()
	dir := os.Getenv("PORTAL_E2E_ARTIFACTS")
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := pg.Screenshot(playwright.PageScreenshotOptions{
		Path: playwright.String(filepath.Join(dir, name+".png")), FullPage: playwright.Bool(true),
		// A full-page capture of a long page is the slowest thing these
		// tests ask Chromium for; on a loaded 2-core machine it took over
		// the 10 s default (13b-dry-run-progress, page settled, nothing
		// reloading). The same bound as settled's waits.
		Timeout: playwright.Float(30000),
	}); err != nil {
		t.Errorf("screenshot %s: %v", name, err)
	}
}

func text(t *testing.T, pg playwright.Page, testID string) string {
	t.Helper()
	s, err := pg.GetByTestId(testID).TextContent()
	if err != nil {
		t.Fatalf("read [data-testid=%s] on %s: %v", testID, pg.URL(), err)
	}
	return strings.Join(strings.Fields(s), " ")
}

// count is how many elements loc matches now; the test fails when the
// browser cannot tell (a count of 0 read through an error proves nothing).
func count(t *testing.T, loc playwright.Locator, what string) int {
	t.Helper()
	n, err := loc.Count()
	mustOK(t, err, "count "+what)
	return n
}

// clickTo clicks loc and waits until the navigation it starts has finished:
// the next document has fired its load event and its URL matches url (a
// glob). Waiting for the load event that follows the click, not only for the
// URL, also covers a navigation back to the same URL (a form posted and
// answered by a redirect to the page it came from), where WaitForURL alone
// would return at once with the old page; a click that navigates nowhere
// fails. (WaitForFunction cannot be used: the portal's CSP forbids the eval
// it polls with.)
func clickTo(t *testing.T, pg playwright.Page, loc playwright.Locator, url, what string) {
	t.Helper()
	_, err := pg.ExpectEvent("load", func() error { return loc.Click() })
	mustOK(t, err, what+": click and wait for the next page to load (the page is at "+pg.URL()+")")
	mustOK(t, pg.WaitForURL(url), what+": reach "+url)
}

func mustOK(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

var expectedStatusRE = regexp.MustCompile(`^Failed to load resource: the server responded with a status of (40[349]|422) `)

var _ = context.Background
