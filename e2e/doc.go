// Package e2e holds browser tests of whole user journeys: the real portal
// binary (`portal serve --dev`) driven through headless Debian Chromium by
// playwright-go, with the Playwright driver installed from npm by
// hack/e2e-setup.sh (never playwright.Install(), which downloads from a CDN).
//
// Run them with `make test` or `make e2e`; without PORTAL_E2E_DRIVER_DIR they
// skip with a message naming `make test`. Screenshots go to
// $PORTAL_E2E_ARTIFACTS (e2e/artifacts, gitignored). Nothing imports this
// package, and it imports no portal package: it sees only what a user sees.
//
// Each test runs its own portal (its own database and port) and its own
// browser, so the tests run in parallel (t.Parallel; go test's -parallel,
// by default one per core): the longest, the usage and preemption journey
// on the simulated cluster, spends most of its three minutes waiting for
// jobs to run, and the others run meanwhile. A portal that calls the local
// AWS endpoints gets their credentials in its own environment
// (startPortalEnv with awstest.Env), never through t.Setenv, which a
// parallel test may not call.
package e2e
