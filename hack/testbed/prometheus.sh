#!/usr/bin/env bash
# Prometheus 3.16.0 for the portal's utilization tests (internal/usage/prom).
#
#   hack/testbed/prometheus.sh build            build prometheus once into ~/.cache/hyperpod-portal/testbed/bin
#   hack/testbed/prometheus.sh env STATE_DIR    build, then write STATE_DIR/prometheus.env
#
# Unlike kube.sh and dex.sh nothing is started here: each integration test
# starts its own Prometheus (free loopback port, temporary TSDB, a scrape
# config pointing at the test's fixture exporter) from the binary named by
# PORTAL_TEST_PROMETHEUS_BIN in prometheus.env, and stops it when it ends.
#
# Built from the Go module proxy only (hack/prometheus is a nested module that
# pins github.com/prometheus/prometheus v0.316.0 = Prometheus 3.16.0).
# - Build tag remove_all_sd drops the optional service discoveries (AWS,
#   Azure, GCE, Kubernetes, ...; static, file and http discovery stay), a
#   documented Prometheus build option (its README, "Service discovery
#   plugins"), which keeps the cold build small.
# - Not builtinassets: the web UI's assets need npm; the HTTP API (all the
#   portal uses) works without them.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
PROM_MOD="$REPO/hack/prometheus"
# Same cache root (and override) as kube.sh and dex.sh.
BIN_ROOT="${PORTAL_TESTBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hyperpod-portal/testbed}/bin"
readonly PROM_VERSION="3.16.0"
readonly BUILD_TAGS="remove_all_sd"
readonly LDFLAGS="-s -w -X github.com/prometheus/common/version.Version=$PROM_VERSION -X github.com/prometheus/common/version.Branch=release -X github.com/prometheus/common/version.Revision=v0.316.0"

log() { printf 'prometheus.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# The cache key: the module files (go.sum pins every dependency), the build
# tags and flags, and the Go toolchain.
bin_hash() {
	{
		printf '%s\n%s\n%s\n' "$BUILD_TAGS" "$LDFLAGS" "$(go env GOVERSION GOOS GOARCH)"
		cat "$PROM_MOD/go.mod" "$PROM_MOD/go.sum"
	} | sha256sum | cut -c1-16
}
prom_dir() { echo "$BIN_ROOT/prometheus-$(bin_hash)"; }
prom_bin() { echo "$(prom_dir)/prometheus"; }

cmd_build() {
	command -v go >/dev/null || die "go is not on PATH"
	command -v flock >/dev/null || die "flock is needed (util-linux)"
	local dir out tmp start
	dir="$(prom_dir)"
	out="$(prom_bin)"
	if [[ -x "$out" ]]; then
		log "cached: $out (nothing to build)"
		return 0
	fi
	mkdir -p "$BIN_ROOT"
	# One builder at a time; a second one waits, then finds the cache filled.
	exec 9>"$BIN_ROOT/.prometheus-build.lock"
	flock 9
	if [[ -x "$out" ]]; then
		log "cached: $out (built by a concurrent run)"
		exec 9>&-
		return 0
	fi
	# Under the lock, any temporary directory is a leftover of a killed build.
	rm -rf "$BIN_ROOT"/prometheus-*.tmp.*
	tmp="$(mktemp -d "$dir.tmp.XXXXXX")"
	chmod 0755 "$tmp"
	start=$SECONDS
	log "building Prometheus $PROM_VERSION (-tags $BUILD_TAGS) -> $out (cold: a few minutes)"
	# Only the nested module's own go.mod/go.sum (readonly: a stale go.sum is
	# an error, never silently rewritten); static binary.
	if ! (cd "$PROM_MOD" && GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 \
		go build -trimpath -tags "$BUILD_TAGS" -ldflags "$LDFLAGS" -o "$tmp/prometheus" \
		github.com/prometheus/prometheus/cmd/prometheus); then
		rm -rf "$tmp"
		die "go build prometheus failed"
	fi
	"$tmp/prometheus" --version >&2
	rm -rf "$dir"
	mv -T "$tmp" "$dir"
	exec 9>&-
	log "built prometheus in $((SECONDS - start))s: $out"
	# Keep only the current build (about 100 MB each); other scripts'
	# directories are not ours to touch.
	local old
	for old in "$BIN_ROOT"/prometheus-*/; do
		old=${old%/}
		[[ -d $old && $old != "$dir" && $old != *.tmp.* ]] || continue
		log "removing stale cache $old"
		rm -rf "$old"
	done
}

cmd_env() {
	[[ -n "${1:-}" ]] || die "usage: $0 env STATE_DIR"
	mkdir -p "$1"
	local state
	state="$(cd "$1" && pwd -P)"
	cmd_build
	printf 'PORTAL_TEST_PROMETHEUS_BIN=%s\n' "$(prom_bin)" >"$state/prometheus.env.tmp"
	mv -f "$state/prometheus.env.tmp" "$state/prometheus.env"
	log "env: $state/prometheus.env"
}

case "${1:-}" in
build) cmd_build ;;
env) cmd_env "${2:-}" ;;
*)
	echo "usage: $0 build | env STATE_DIR" >&2
	exit 2
	;;
esac
