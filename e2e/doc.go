// Package e2e holds browser tests of whole user journeys: the real portal
// binary (`portal serve --dev`) driven through headless Debian Chromium by
// playwright-go, with the Playwright driver installed from npm by
// hack/e2e-setup.sh (never playwright.Install(), which downloads from a CDN).
//
// Run them with `make test` or `make e2e`; without PORTAL_E2E_DRIVER_DIR they
// skip with a message naming `make test`. Screenshots go to
// $PORTAL_E2E_ARTIFACTS (e2e/artifacts, gitignored). Nothing imports this
// package, and it imports no portal package: it sees only what a user sees.
package e2e
