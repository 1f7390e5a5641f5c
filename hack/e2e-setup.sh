#!/usr/bin/env bash
# Prepare what the browser (playwright-go) tests need, without any CDN download:
#   - Debian's Chromium headless shell at /usr/bin/chromium-headless-shell (apt package
#     chromium-headless-shell), installed only if missing. It is the browser Playwright
#     itself runs for headless tests since v1.49 (microsoft/playwright#33566: "a separate
#     chromium headless shell build for headless operation"; the full browser's new
#     headless mode "is slightly slower on average"). Here, on the same e2e tests and the
#     same Chromium 156: TestOwnerRequestsAdminApproves 27.5 s and 0.51 CPU-minutes
#     against 37.9 s and 0.84 with /usr/bin/chromium (process accounting, 2026-12-06),
#     and the same screenshots within a few bytes;
#   - the Playwright driver (playwright-core from the npm registry, integrity-checked),
#     unpacked so that <driver dir>/package/cli.js and <driver dir>/node exist.
# Idempotent; the second run does nothing. Prints the driver directory on stdout.
#
# Use it from Go with:
#   playwright.Run(&playwright.RunOptions{DriverDirectory: dir, SkipInstallBrowsers: true})
#   pw.Chromium.Launch(playwright.BrowserTypeLaunchOptions{ExecutablePath: playwright.String("/usr/bin/chromium-headless-shell"), ...})
# Never call playwright.Install(): it downloads from a CDN this machine cannot reach.
set -euo pipefail

PW_VERSION="${PLAYWRIGHT_CORE_VERSION:-1.52.0}" # matches playwright-go v0.5200.1
CHROMIUM="/usr/bin/chromium-headless-shell"
# In the user's cache (as Go's build cache is), so that every clone shares one driver.
DRIVER_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/hyperpod-portal/playwright/driver-$PW_VERSION"

log() { printf 'e2e-setup: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

start=$SECONDS

# --- Chromium -------------------------------------------------------------
# One apt at a time (hack/deps.sh takes the same lock; make test runs the two in
# different lanes).
exec 8>"${TMPDIR:-/tmp}/hyperpod-portal-apt.lock"
flock 8
if [[ -x "$CHROMIUM" ]]; then
	log "chromium headless shell present: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM")"
else
	log "installing chromium-headless-shell from Debian (apt-get update + install)"
	if [[ $EUID -ne 0 ]]; then
		command -v sudo >/dev/null || die "$CHROMIUM missing and not root; install the 'chromium-headless-shell' package"
		SUDO=sudo
	else
		SUDO=
	fi
	$SUDO apt-get update >&2
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends chromium-headless-shell >&2
	[[ -x "$CHROMIUM" ]] || die "apt installed chromium-headless-shell but $CHROMIUM is missing"
	log "installed: $("$CHROMIUM" --version 2>/dev/null || true)"
fi

exec 8>&-

# --- Node -----------------------------------------------------------------
NODE="$(command -v node || true)"
[[ -n "$NODE" ]] || die "node not found (the Playwright driver runs on the system node; apt-get install nodejs)"
NODE="$(readlink -f "$NODE")"
command -v npm >/dev/null || die "npm not found (apt-get install npm)"

# --- Playwright driver ------------------------------------------------------
marker="$DRIVER_DIR/.complete"
if [[ -f "$marker" && -f "$DRIVER_DIR/package/cli.js" ]]; then
	log "playwright-core $PW_VERSION driver present (nothing to fetch)"
else
	log "fetching playwright-core@$PW_VERSION from the npm registry"
	mkdir -p "$(dirname "$DRIVER_DIR")"
	tmp="$(mktemp -d "$DRIVER_DIR.tmp.XXXXXX")"
	chmod 0755 "$tmp"
	trap 'rm -rf "$tmp"' EXIT
	want="$(npm view "playwright-core@$PW_VERSION" dist.integrity)"
	[[ "$want" == sha512-* ]] || die "unexpected integrity from npm view: '$want'"
	(cd "$tmp" && npm pack --silent "playwright-core@$PW_VERSION" >/dev/null)
	tarball="$tmp/playwright-core-$PW_VERSION.tgz"
	[[ -f "$tarball" ]] || die "npm pack did not produce $tarball"
	got="sha512-$("$NODE" -e 'process.stdout.write(require("crypto").createHash("sha512").update(require("fs").readFileSync(process.argv[1])).digest("base64"))' "$tarball")"
	[[ "$got" == "$want" ]] || die "integrity mismatch for $tarball: got $got, want $want"
	log "integrity ok ($want)"
	tar -xzf "$tarball" -C "$tmp"
	[[ -f "$tmp/package/cli.js" ]] || die "tarball has no package/cli.js"
	rm -f "$tarball"
	touch "$tmp/.complete"
	rm -rf "$DRIVER_DIR"
	mv -T "$tmp" "$DRIVER_DIR"
	trap - EXIT
fi
# (Re)point <dir>/node at the system node; cheap, and follows a node upgrade.
if [[ "$(readlink "$DRIVER_DIR/node" 2>/dev/null || true)" != "$NODE" ]]; then
	ln -sfn "$NODE" "$DRIVER_DIR/node"
fi

log "ready in $((SECONDS - start))s (node $("$NODE" --version))"
echo "$DRIVER_DIR"
