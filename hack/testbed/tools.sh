#!/usr/bin/env bash
# Command-line tools the tests call: helm and kubectl (deploy/ chart tests:
# `helm lint`, `helm template | kubectl apply --dry-run=server`).
#
#   hack/testbed/tools.sh build            build helm and kubectl once into ~/.cache/hyperpod-portal/testbed/bin/tools-<hash>/
#   hack/testbed/tools.sh env STATE_DIR    build, then write STATE_DIR/tools.env
#
# Nothing is started. STATE_DIR/tools.env holds:
#   PORTAL_TEST_HELM_BIN     helm v3.22.0 (hack/helm, a nested module pinning helm.sh/helm/v3)
#   PORTAL_TEST_KUBECTL_BIN  kubectl v1.35.4 (hack/kubectl, a nested module pinning the
#                            same k8s.io/kubernetes release kube.sh builds kube-apiserver from)
#
# Built from the Go module proxy only. The cache key is separate from
# kube.sh's: a change here never rebuilds kube-apiserver. Bump hack/kubectl
# with hack/kubebin (same KUBE_VERSION) so that kubectl matches the apiserver.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
HELM_MOD="$REPO/hack/helm"
KUBECTL_MOD="$REPO/hack/kubectl"
# Same cache root (and override) as kube.sh, dex.sh and prometheus.sh.
BIN_ROOT="${PORTAL_TESTBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hyperpod-portal/testbed}/bin"
readonly BUILD_SCRIPT_VERSION="tools.sh-build-1"
readonly HELM_VERSION="v3.22.0"
readonly KUBE_VERSION="v1.35.4"
# helm reports its version from these (helm.sh/helm/v3/internal/version).
readonly HELM_LDFLAGS="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
readonly KUBE_LDFLAGS="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=35"

log() { printf 'tools.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# The cache key: the module files (go.sum pins every dependency), the flags,
# this script's build version and the Go toolchain.
bin_hash() {
	{
		printf '%s\n%s\n%s\n%s\n' "$BUILD_SCRIPT_VERSION" "$HELM_LDFLAGS" "$KUBE_LDFLAGS" "$(go env GOVERSION GOOS GOARCH)"
		cat "$HELM_MOD/go.mod" "$HELM_MOD/go.sum" "$KUBECTL_MOD/go.mod" "$KUBECTL_MOD/go.sum"
	} | sha256sum | cut -c1-16
}
tools_dir() { echo "$BIN_ROOT/tools-$(bin_hash)"; }

# gobuild MODDIR ARGS...: only the nested module's own go.mod/go.sum
# (readonly: a stale go.sum is an error, never silently rewritten); static.
gobuild() {
	local mod=$1
	shift
	(cd "$mod" && GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 go build -trimpath "$@")
}

cmd_build() {
	command -v go >/dev/null || die "go is not on PATH"
	command -v flock >/dev/null || die "flock is needed (util-linux)"
	local dir tmp start
	dir="$(tools_dir)"
	if [[ -f "$dir/.complete" ]]; then
		log "cached: $dir (nothing to build)"
		return 0
	fi
	mkdir -p "$BIN_ROOT"
	# One builder at a time; a second one waits, then finds the cache filled.
	exec 9>"$BIN_ROOT/.tools-build.lock"
	flock 9
	if [[ -f "$dir/.complete" ]]; then
		log "cached: $dir (built by a concurrent run)"
		exec 9>&-
		return 0
	fi
	# Under the lock, any temporary directory is a leftover of a killed build.
	rm -rf "$BIN_ROOT"/tools-*.tmp.*
	tmp="$(mktemp -d "$dir.tmp.XXXXXX")"
	chmod 0755 "$tmp"
	start=$SECONDS
	log "building helm $HELM_VERSION and kubectl $KUBE_VERSION -> $dir (cold: a few minutes)"
	gobuild "$HELM_MOD" -ldflags "$HELM_LDFLAGS" -o "$tmp/helm" helm.sh/helm/v3/cmd/helm || {
		rm -rf "$tmp"
		die "go build helm failed"
	}
	log "  helm built in $((SECONDS - start))s"
	gobuild "$KUBECTL_MOD" -ldflags "$KUBE_LDFLAGS" -o "$tmp/kubectl" k8s.io/kubernetes/cmd/kubectl || {
		rm -rf "$tmp"
		die "go build kubectl failed"
	}
	"$tmp/helm" version --short >&2
	"$tmp/kubectl" version --client >&2
	date -u +%FT%TZ >"$tmp/.complete"
	rm -rf "$dir"
	mv -T "$tmp" "$dir"
	exec 9>&-
	log "built helm and kubectl in $((SECONDS - start))s: $dir"
	# Keep only the current build; other scripts' directories are not ours.
	local old
	for old in "$BIN_ROOT"/tools-*/; do
		old=${old%/}
		[[ -d $old && $old != "$dir" && $old != *.tmp.* ]] || continue
		log "removing stale cache $old"
		rm -rf "$old"
	done
}

cmd_env() {
	[[ -n "${1:-}" ]] || die "usage: $0 env STATE_DIR"
	mkdir -p "$1"
	local state dir
	state="$(cd "$1" && pwd -P)"
	cmd_build
	dir="$(tools_dir)"
	printf 'PORTAL_TEST_HELM_BIN=%s\nPORTAL_TEST_KUBECTL_BIN=%s\n' "$dir/helm" "$dir/kubectl" >"$state/tools.env.tmp"
	mv -f "$state/tools.env.tmp" "$state/tools.env"
	log "env: $state/tools.env"
}

case "${1:-}" in
build) cmd_build ;;
env) cmd_env "${2:-}" ;;
*)
	echo "usage: $0 build | env STATE_DIR" >&2
	exit 2
	;;
esac
