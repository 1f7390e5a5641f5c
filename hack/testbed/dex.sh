#!/usr/bin/env bash
# Dex v2.45.1 test identity provider for the portal's OIDC tests.
#
#   hack/testbed/dex.sh build            build dex (+ testbedutil) once into ~/.cache/hyperpod-portal/testbed/bin
#   hack/testbed/dex.sh up STATE_DIR     start dex on a free loopback port, write STATE_DIR/dex.env
#   hack/testbed/dex.sh down STATE_DIR   stop it (idempotent)
#
# Needs only Go (module proxy) and a fresh Debian: no curl, htpasswd, python or jq.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
DEX_MOD="$REPO/hack/dex"
# Same cache root (and override) as kube.sh.
BIN_ROOT="${PORTAL_TESTBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hyperpod-portal/testbed}/bin"
# Dex v2.45.1 is pinned in hack/dex/go.mod as v0.0.0-20260303133905-11d2eeb52b42.
CLIENT_ID="portal-test"
TEST_PASSWORD="test-password-1"
READY_TIMEOUT_SECS="${DEX_READY_TIMEOUT_SECS:-30}"

log() { printf 'dex.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

sha256_of() { cat "$@" | sha256sum | cut -c1-64; }

gosum_hash() { sha256sum "$DEX_MOD/go.sum" | cut -c1-64; }
dex_dir() { echo "$BIN_ROOT/dex-$(gosum_hash)"; }
dex_bin() { echo "$(dex_dir)/dex"; }
# testbedutil also depends on its own source, so key it on both.
util_bin() { echo "$BIN_ROOT/testbedutil-$(sha256_of "$DEX_MOD/go.sum" "$DEX_MOD/testbedutil/main.go" | cut -c1-32)/testbedutil"; }

# go_build_cached OUT PKG [extra go build flags...]: build PKG into OUT unless OUT exists.
# Builds into a temp dir next to OUT and renames it, so an interrupted or
# concurrent build never leaves a half-written binary in the cache.
go_build_cached() {
	local out="$1" pkg="$2" dir tmp start
	shift 2
	dir="$(dirname "$out")"
	if [[ -x "$out" ]]; then
		log "cached: $out (nothing to build)"
		return 0
	fi
	mkdir -p "$BIN_ROOT"
	tmp="$(mktemp -d "$dir.tmp.XXXXXX")"
	chmod 0755 "$tmp"
	start=$SECONDS
	log "building $pkg -> $out"
	# Only the nested module's own go.mod/go.sum (readonly: a stale go.sum is
	# an error, never silently rewritten); static binary.
	if ! (cd "$DEX_MOD" && GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $*" -o "$tmp/$(basename "$out")" "$pkg"); then
		rm -rf "$tmp"
		die "go build $pkg failed"
	fi
	if ! mv -T "$tmp" "$dir" 2>/dev/null; then
		# Someone else finished the same build first; theirs is identical.
		rm -rf "$tmp"
	fi
	log "built $(basename "$out") in $((SECONDS - start))s"
}

cmd_build() {
	local start=$SECONDS
	command -v go >/dev/null || die "go is not on PATH"
	command -v flock >/dev/null || die "flock is needed (util-linux)"
	mkdir -p "$BIN_ROOT"
	# Serialise builds of this cache between concurrent callers.
	exec 9>"$BIN_ROOT/.dex-build.lock"
	flock 9
	go_build_cached "$(dex_bin)" github.com/dexidp/dex/cmd/dex "-X main.version=v2.45.1"
	go_build_cached "$(util_bin)" ./testbedutil
	exec 9>&-
	log "build done in $((SECONDS - start))s: $(dex_bin)"
}

pid_alive() { [[ -n "${1:-}" ]] && kill -0 "$1" 2>/dev/null; }

# is_our_dex PID STATE: the pid is still the dex serving STATE's config
# (guards against pid reuse and against stopping another state dir's dex).
is_our_dex() {
	local pid="$1" state="$2" cmdline
	cmdline="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)"
	[[ "$cmdline" == *"/dex serve $state/dex-config.yaml "* ]]
}

running() { pid_alive "$1" && is_our_dex "$1" "$2"; }

abs_state_dir() {
	[[ -n "${1:-}" ]] || die "usage: $0 $2 STATE_DIR"
	mkdir -p "$1"
	(cd "$1" && pwd -P)
}

cmd_up() {
	local state pidfile dex util ports dex_port portal_port issuer redirect secret hash logf start
	state="$(abs_state_dir "${1:-}" up)"
	pidfile="$state/dex.pid"
	if [[ -f "$pidfile" ]] && running "$(cat "$pidfile")" "$state"; then
		die "dex already running in $state (pid $(cat "$pidfile")); run '$0 down $state' first"
	fi
	cmd_build
	dex="$(dex_bin)"
	util="$(util_bin)"
	start=$SECONDS

	rm -f "$state/dex.env" "$state/dex.env.tmp"
	mkdir -p "$state/logs"
	logf="$state/logs/dex.log"
	mapfile -t ports < <("$util" freeport 2)
	dex_port="${ports[0]}"
	portal_port="${ports[1]}"
	issuer="http://127.0.0.1:$dex_port/dex"
	redirect="http://127.0.0.1:$portal_port/auth/callback"

	secret="$("$util" secret 32)"
	(umask 077 && printf '%s' "$secret" >"$state/dex-client-secret")
	chmod 0600 "$state/dex-client-secret"
	hash="$("$util" bcrypt "$TEST_PASSWORD")"

	# Static users: email|username|userID|groups (YAML flow list).
	local users=(
		"owner.red@example.test|owner.red|u-owner-red|[team-red-owners]"
		"member.red@example.test|member.red|u-member-red|[team-red-members]"
		"owner.blue@example.test|owner.blue|u-owner-blue|[team-blue-owners]"
		"admin@example.test|admin|u-admin|[platform-admins]"
		"reviewer@example.test|reviewer|u-reviewer|[governance-reviewers]"
		"finance@example.test|finance|u-finance|[finance]"
		"nogroup@example.test|nogroup|u-nogroup|[]"
	)
	# The config holds the client secret: create it 0600 before writing.
	rm -f "$state/dex-config.yaml.tmp"
	(umask 077 && : >"$state/dex-config.yaml.tmp")
	{
		cat <<YAML
# Generated by hack/testbed/dex.sh up; do not edit.
issuer: $issuer
storage:
  type: memory
web:
  http: 127.0.0.1:$dex_port
logger:
  level: info
  format: text
oauth2:
  skipApprovalScreen: true
  responseTypes: [code]
enablePasswordDB: true
staticClients:
  - id: $CLIENT_ID
    name: Portal test
    secret: $secret
    redirectURIs:
      - $redirect
# Dex v2.45 has no RP-initiated logout (no end_session_endpoint,
# no postLogoutRedirectURIs), so none is configured.
staticPasswords:
YAML
		local u email name id groups
		for u in "${users[@]}"; do
			IFS='|' read -r email name id groups <<<"$u"
			cat <<YAML
  - email: $email
    hash: "$hash"
    username: $name
    userID: $id
    groups: $groups
YAML
		done
	} >>"$state/dex-config.yaml.tmp"
	mv -f "$state/dex-config.yaml.tmp" "$state/dex-config.yaml"

	log "starting dex on 127.0.0.1:$dex_port (log: $logf)"
	nohup "$dex" serve "$state/dex-config.yaml" >>"$logf" 2>&1 </dev/null &
	echo $! >"$pidfile"
	# From here on, any failure stops the dex just started.
	UP_STATE="$state"
	trap 'log "up failed; stopping dex"; cmd_down "$UP_STATE" || true' EXIT

	# Poll discovery in 1 s slices so a dex that exits (bad config, port
	# taken) fails fast instead of after the whole timeout.
	local waited=0
	until "$util" waithttp "$issuer/.well-known/openid-configuration" 1 2>/dev/null; do
		waited=$((waited + 1))
		if ! running "$(cat "$pidfile")" "$state" || ((waited >= READY_TIMEOUT_SECS)); then
			log "dex did not become ready (exited or ${READY_TIMEOUT_SECS}s timeout); last log lines of $logf:"
			tail -n 40 "$logf" >&2 || true
			die "dex failed to start"
		fi
	done

	cat >"$state/dex.env.tmp" <<ENV
PORTAL_TEST_DEX_ISSUER=$issuer
PORTAL_TEST_DEX_CLIENT_ID=$CLIENT_ID
PORTAL_TEST_DEX_CLIENT_SECRET_FILE=$state/dex-client-secret
PORTAL_TEST_DEX_REDIRECT_URL=$redirect
PORTAL_TEST_DEX_PASSWORD=$TEST_PASSWORD
PORTAL_TEST_DEX_BIN=$dex
ENV
	mv -f "$state/dex.env.tmp" "$state/dex.env"
	trap - EXIT
	log "dex up in $((SECONDS - start))s: issuer $issuer, pid $(cat "$pidfile"), env $state/dex.env"
}

cmd_down() {
	local state pidfile pid i
	[[ -n "${1:-}" ]] || die "usage: $0 down STATE_DIR"
	if [[ ! -d "$1" ]]; then
		log "nothing to stop: $1 does not exist"
		return 0
	fi
	state="$(cd "$1" && pwd -P)"
	pidfile="$state/dex.pid"
	rm -f "$state/dex.env" "$state/dex.env.tmp"
	if [[ ! -f "$pidfile" ]]; then
		log "dex not running in $state (no pid file)"
		return 0
	fi
	pid="$(cat "$pidfile")"
	# A dead (or zombie, cmdline empty) pid no longer counts as "ours".
	if running "$pid" "$state"; then
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < 100; i++)); do
			running "$pid" "$state" || break
			sleep 0.1
		done
		if running "$pid" "$state"; then
			log "dex (pid $pid) ignored SIGTERM for 10s; sending SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
			for ((i = 0; i < 50; i++)); do
				running "$pid" "$state" || break
				sleep 0.1
			done
			running "$pid" "$state" && die "dex (pid $pid) does not exit"
		fi
		log "dex (pid $pid) stopped"
	else
		log "dex (pid $pid) already gone"
	fi
	rm -f "$pidfile"
}

case "${1:-}" in
build) cmd_build ;;
up) cmd_up "${2:-}" ;;
down) cmd_down "${2:-}" ;;
*)
	echo "usage: $0 build | up STATE_DIR | down STATE_DIR" >&2
	exit 2
	;;
esac
