#!/usr/bin/env bash
# Kubernetes part of the test bed that `make test` starts.
#
#   kube.sh build            build etcd, kube-apiserver, kube-controller-manager
#                            and applycrds once into ~/.cache/hyperpod-portal/testbed/bin/kube-<hash>/
#   kube.sh up STATE_DIR     start them on free loopback ports, apply the Kueue
#                            CRDs, write STATE_DIR/kube.env
#   kube.sh down STATE_DIR   stop them (by pid) and remove the data directory
#
# STATE_DIR/kube.env holds KEY=VALUE lines for the tests:
#   PORTAL_TEST_KUBECONFIG      admin kubeconfig (system:masters)
#   PORTAL_TEST_KUBE_TOKENS_DIR one file per test user, named after the user,
#                               holding that user's bearer token
#
# Everything is built from the Go module proxy (hack/kubebin, hack/etcd are
# nested modules); nothing else is downloaded. Needs: go, openssl, curl,
# coreutils; `ss` (iproute2) is used when present.
#
# Do not name variables ETCD_*: etcd reads those from the environment as flags.
set -euo pipefail

readonly BUILD_SCRIPT_VERSION="kube.sh-build-3"
# Kubernetes v1.35: the release Kueue v0.17.0 is built on (its go.mod: the
# v0.35 libraries), so Kueue's types are the API server's. With v1.37.2 here
# (until 2026-12-06), Kueue's restore of a preempted Job's pod template failed
# on every preemption ("restore info: Job.batch ... spec.template: field is
# immutable", ci78's Kueue log): Kueue's v0.35 Job type drops the fields v1.37
# added to the pod spec, and the update that sends the template back changed
# it. HyperPod runs on EKS Kubernetes 1.28 to 1.33 or 1.34 as AWS documents it
# (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-prerequisites.html,
# "Kubernetes version support"); v1.35 is the newest whose API server Kueue
# v0.17.0 speaks without that skew. v1.35.4 is the newest v1.35 the Go module
# proxy serves. Like every version HyperPod runs, it lacks v1.37's fallback for
# an admission policy's ConfigMap parameters that its informer has not seen
# (kubernetes/kubernetes#134423): internal/support/hpcluster's DeleteAtCleanup
# says what that means for the tests, and docs/provisioning.md for clusters.
readonly KUBE_VERSION="v1.35.4"
readonly KUBE_LDFLAGS="-s -w -X k8s.io/component-base/version.gitVersion=${KUBE_VERSION} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=35"
# validatingadmissionpolicy-status-controller type-checks the plans'
# ValidatingAdmissionPolicy (status.typeChecking), as on any real cluster
# (k8s.io/kubernetes cmd/kube-controller-manager/names
# ValidatingAdmissionPolicyStatusController).
# PORTAL_TESTBED_KCM_EXTRA_CONTROLLERS adds to these (cluster.sh's scheduling
# cluster adds job-controller and pod-garbage-collector-controller).
readonly KCM_CONTROLLERS="namespace-controller,serviceaccount-controller,serviceaccount-token-controller,resourcequota-controller,garbage-collector-controller,clusterrole-aggregation-controller,validatingadmissionpolicy-status-controller${PORTAL_TESTBED_KCM_EXTRA_CONTROLLERS:+,$PORTAL_TESTBED_KCM_EXTRA_CONTROLLERS}"
# PORTAL_TESTBED_FRONT_PROXY=1 configures the API server's front proxy (the
# requestheader client CA and the proxy client certificate), which the
# aggregation layer needs to pass a user on to an extension API server
# (cluster.sh's scheduling cluster: Kueue's visibility API). Off by default.
# name:groups of the token users written to the tokens directory.
readonly TEST_USERS=(
	"viewer-red:team-red-viewers"
	"submitter-red:team-red-submitters"
	"viewer-blue:team-blue-viewers"
)
# Components in start order; down stops them in reverse.
readonly COMPONENTS=(etcd kube-apiserver kube-controller-manager)

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
readonly REPO
readonly CACHE_ROOT="${PORTAL_TESTBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hyperpod-portal/testbed}"
# Seconds to wait for each component; raise on very slow machines.
readonly WAIT_S="${PORTAL_TESTBED_KUBE_TIMEOUT:-90}"

LOG_NAME=${LOG_NAME:-kube.sh}
log() { printf '%s: %s\n' "$LOG_NAME" "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1fs", b - a }'; }

usage() {
	sed -n '2,9s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
	exit 2
}

# ---------------------------------------------------------------- build ---

# bin_hash prints the cache key: the module sums (which pin every dependency),
# the module files and wrapper sources, this script's build version and the Go
# toolchain.
bin_hash() {
	{
		printf '%s\n%s\n%s\n' "$BUILD_SCRIPT_VERSION" "$KUBE_LDFLAGS" "$(go env GOVERSION GOOS GOARCH)"
		cat "$REPO/hack/kubebin/go.sum" "$REPO/hack/etcd/go.sum" \
			"$REPO/hack/kubebin/go.mod" "$REPO/hack/etcd/go.mod" \
			"$REPO/hack/etcd/main.go" "$REPO"/hack/kubebin/applycrds/*.go
	} | sha256sum | cut -c1-16
}

# Other test-bed scripts keep their own <name>-<hash> directories next to ours.
bin_dir() { printf '%s/bin/kube-%s\n' "$CACHE_ROOT" "$(bin_hash)"; }

# Build environment: the nested modules' own go.mod/go.sum only (readonly:
# a stale go.sum is an error, never silently rewritten), static binaries.
# gobuild DIR ARGS: go build in DIR; gonested DIR CMD ARGS: any go command in
# DIR with the same environment (cluster.sh's prewarm compiles with it, to the
# build IDs gobuild then finds).
gonested() {
	local dir=$1
	shift
	(cd "$REPO/$dir" && GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 go "$@")
}
gobuild() {
	local dir=$1
	shift
	gonested "$dir" build -p "$BUILD_JOBS" -trimpath "$@"
}

cmd_build() {
	command -v go >/dev/null || die "go is not on PATH"
	# One job per core, at most 4: with -p 2 the peak was 2.7 GB (a single
	# compile or link of kube-apiserver), total about 3 GB.
	locked_build kube "$(bin_dir)" build_kube \
		"etcd v3.7.3, kube-apiserver and kube-controller-manager $KUBE_VERSION, applycrds (cold: several minutes)"
}

# build_kube TMP: the kube binaries and the Kueue CRDs, into TMP.
build_kube() {
	local tmp=$1 t
	t=$(now)
	gobuild hack/etcd -ldflags "-s -w" -o "$tmp/etcd" . || {
		rm -rf "$tmp"
		die "building etcd failed"
	}
	log "  etcd built in $(since "$t")"

	t=$(now)
	gobuild hack/kubebin -ldflags "$KUBE_LDFLAGS" -o "$tmp/" \
		k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager ./applycrds || {
		rm -rf "$tmp"
		die "building kube-apiserver/kube-controller-manager/applycrds failed"
	}
	log "  kube-apiserver, kube-controller-manager, applycrds built in $(since "$t")"

	# The Kueue CRDs of exactly the version pinned (and checksummed) in
	# hack/kubebin/go.sum.
	local kueue_version kueue_dir
	kueue_version=$(cd "$REPO/hack/kubebin" && GOWORK=off GOFLAGS=-mod=readonly go list -m -f '{{.Version}}' sigs.k8s.io/kueue)
	kueue_dir=$(moddir hack/kubebin "sigs.k8s.io/kueue@$kueue_version") || die "no module sigs.k8s.io/kueue@$kueue_version"
	[[ -d $kueue_dir/config/components/crd/bases ]] || die "no config/components/crd/bases in $kueue_dir"
	mkdir -p "$tmp/kueue-crds"
	install -m 0644 "$kueue_dir"/config/components/crd/bases/*.yaml "$tmp/kueue-crds/"
	printf '%s\n' "$kueue_version" >"$tmp/kueue-crds/VERSION"

	"$tmp/kube-apiserver" --version >&2
	"$tmp/etcd" --version >&2
}

# moddir MODULE_DIR MODULE: where the go.sum-verified module sits in the module cache.
moddir() {
	(cd "$REPO/$1" && GOWORK=off GOFLAGS=-mod=readonly go mod download "$2" &&
		GOWORK=off GOFLAGS=-mod=readonly go list -m -f '{{.Dir}}' "$2")
}

# locked_build NAME DIR BUILDER WHAT: fills the cache directory DIR (named
# NAME-<hash> under $CACHE_ROOT/bin) once, by calling BUILDER with a
# temporary directory, then marks it complete and moves it into place.
# One builder per NAME at a time (flock); a second one waits, then finds the
# cache filled. Afterwards only the current NAME-* directory is kept (old
# ones are hundreds of MB); other scripts' directories are not ours to touch.
locked_build() {
	local name=$1 dir=$2 builder=$3 what=$4 lock
	if [[ -f $dir/.complete ]]; then
		log "binaries up to date, reused cache $dir"
		return 0
	fi
	mkdir -p "$CACHE_ROOT/bin"
	exec {lock}>"$CACHE_ROOT/bin/.$name-build.lock"
	flock "$lock"
	if [[ -f $dir/.complete ]]; then
		log "binaries up to date, reused cache $dir (built by a concurrent run)"
		exec {lock}>&-
		return 0
	fi
	local cores
	cores=$(nproc 2>/dev/null || echo 2)
	BUILD_JOBS=${PORTAL_TESTBED_BUILD_JOBS:-$((cores < 4 ? cores : 4))}
	# Under the lock, any temporary directory is a leftover of a killed build.
	rm -rf "$CACHE_ROOT/bin/$name"-*.tmp.*
	local tmp="$dir.tmp.$$" t0
	mkdir -p "$tmp"
	t0=$(now)
	log "building $what into $dir (-p $BUILD_JOBS)"
	"$builder" "$tmp"
	date -u +%FT%TZ >"$tmp/.complete"
	rm -rf "$dir"
	mv "$tmp" "$dir"
	exec {lock}>&-
	log "built in $(since "$t0"): $(du -sh "$dir" | cut -f1) in $dir"
	local old
	for old in "$CACHE_ROOT/bin/$name"-*/; do
		old=${old%/}
		[[ -d $old && $old != "$dir" && $old != *.tmp.* ]] || continue
		log "removing stale cache $old"
		rm -rf "$old"
	done
}

# ------------------------------------------------------------------- up ---

# port_in_use, pick_port (PORT, USED_PORTS).
source "$(dirname "${BASH_SOURCE[0]}")/ports.sh"

# ours PID STATE: the process exists, is not a zombie, and its command line
# names the state directory (so a recycled pid is never touched).
ours() {
	local pid=$1 state=$2 stat
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	[[ ${stat%% *} != Z ]] || return 1
	tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$state/"
}

# start NAME STATE BIN ARGS...: start detached (own session, stdin from
# /dev/null, output to the log) so that it outlives this script.
start() {
	local name=$1 state=$2
	shift 2
	local logf="$state/logs/$name.log"
	: >"$logf"
	(
		# etcd would read any ETCD_* variable as a flag.
		while read -r v; do unset "$v"; done < <(compgen -e | grep '^ETCD_' || true)
		exec setsid "$@" </dev/null >>"$logf" 2>&1
	) &
	local pid=$! i exe bin
	printf '%s\n' "$pid" >"$state/$name.pid"
	# Until the subshell has exec'd the binary (bash, then setsid, then it),
	# its command line is not yet ours: wait for that. An early exit (exe
	# unreadable: gone or a zombie) is left to wait_ok to report.
	# /proc/PID/exe is the resolved path, so compare it with the binary's
	# resolved path (a cache directory reached through a symbolic link).
	bin=$(readlink -f -- "$1")
	for ((i = 0; i < 200; i++)); do
		exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 0
		[[ $exe == "$bin" ]] && return 0
		sleep 0.05
	done
	die "$name (pid $pid) did not start within 10s"
}

tail_log() {
	local f=$1
	[[ -f $f ]] || return 0
	log "---- last 40 lines of $f ----"
	tail -n 40 "$f" >&2 || true
	log "---- end of $f ----"
}

# wait_ok WHAT NAME STATE CHECK-COMMAND...: poll until the command succeeds,
# component NAME exits, or WAIT_S passes.
wait_ok() {
	local what=$1 name=$2 state=$3
	shift 3
	local t0 deadline pid
	t0=$(now)
	deadline=$((SECONDS + WAIT_S))
	pid=$(cat "$state/$name.pid")
	until "$@" >/dev/null 2>&1; do
		if ! ours "$pid" "$state"; then
			tail_log "$state/logs/$name.log"
			die "$name (pid $pid) exited before becoming ready; log: $state/logs/$name.log"
		fi
		if ((SECONDS >= deadline)); then
			tail_log "$state/logs/$name.log"
			die "$what: not within ${WAIT_S}s; log: $state/logs/$name.log"
		fi
		sleep 0.2
	done
	log "  $what in $(since "$t0")"
}

http_ok() {
	# http_ok URL EXPECTED-BODY [curl args]
	local url=$1 want=$2 body
	shift 2
	# -f: an error status never passes (a 404 Status names the object too, and
	# a failing /readyz lists its passing checks as "ok"). -A: kube-apiserver
	# pretty-prints JSON for a "curl" user agent.
	body=$(curl -fsS --max-time 5 -A kube.sh "$@" "$url") && [[ $body == *"$want"* ]]
}

state_dir_arg() {
	[[ $# -eq 1 && -n $1 ]] || usage
	mkdir -p "$1"
	(cd "$1" && pwd -P)
}

cmd_up() {
	local state
	state=$(state_dir_arg "$@")
	local name pid
	for name in "${COMPONENTS[@]}"; do
		pid=$(cat "$state/$name.pid" 2>/dev/null || true)
		if [[ -n $pid ]] && ours "$pid" "$state"; then
			die "$name is already running (pid $pid) for $state; run: $0 down $state"
		fi
	done
	cmd_build
	local bin
	bin=$(bin_dir)
	command -v openssl >/dev/null || die "openssl is needed (apt-get install openssl)"
	command -v curl >/dev/null || die "curl is needed (apt-get install curl)"

	local t0
	t0=$(now)
	# On any failure below: show why, and stop whatever was started.
	UP_STATE=$state
	trap 'log "up failed; stopping what was started"; stop_all "$UP_STATE"' EXIT

	local data="$state/data"
	rm -rf "$data" "$state/kube.env" "$state/kubeconfig" "$state/tokens"
	mkdir -p "$data/etcd" "$data/pki" "$state/logs" "$state/tokens"
	chmod 0700 "$data" "$data/etcd" "$state/tokens"

	# Service-account key pair and bearer tokens.
	openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$data/pki/sa.key" 2>/dev/null
	openssl pkey -in "$data/pki/sa.key" -pubout -out "$data/pki/sa.pub"
	local admin_token entry user groups tok
	admin_token=$(openssl rand -hex 24)
	{
		printf '%s,admin,admin,"system:masters"\n' "$admin_token"
		for entry in "${TEST_USERS[@]}"; do
			user=${entry%%:*}
			groups=${entry#*:}
			tok=$(openssl rand -hex 24)
			printf '%s' "$tok" >"$state/tokens/$user"
			printf '%s,%s,%s,"%s"\n' "$tok" "$user" "$user" "$groups"
		done
	} >"$data/pki/tokens.csv"
	chmod 0600 "$data/pki/tokens.csv" "$state/tokens"/*

	local etcd_client etcd_peer api_port kcm_port
	pick_port
	etcd_client=$PORT
	pick_port
	etcd_peer=$PORT
	pick_port
	api_port=$PORT
	pick_port
	kcm_port=$PORT
	log "starting in $state (etcd :$etcd_client, kube-apiserver :$api_port, kube-controller-manager :$kcm_port)"

	start etcd "$state" "$bin/etcd" \
		--name=testbed \
		--data-dir="$data/etcd" \
		--listen-client-urls="http://127.0.0.1:$etcd_client" \
		--advertise-client-urls="http://127.0.0.1:$etcd_client" \
		--listen-peer-urls="http://127.0.0.1:$etcd_peer" \
		--initial-advertise-peer-urls="http://127.0.0.1:$etcd_peer" \
		--initial-cluster="testbed=http://127.0.0.1:$etcd_peer" \
		--initial-cluster-state=new \
		--unsafe-no-fsync \
		--log-level=warn
	wait_ok "etcd healthy" etcd "$state" http_ok "http://127.0.0.1:$etcd_client/health" '"health":"true"'

	# The aggregation layer's front proxy (the --requestheader-* and
	# --proxy-client-* flags of
	# https://kubernetes.io/docs/tasks/extend-kubernetes/configure-aggregation-layer/,
	# with a CA of its own as that page asks, not the serving one): a CA
	# the extension API server trusts for the X-Remote-* headers, and the
	# client certificate (CN front-proxy-client) the API server presents.
	local front_proxy=()
	if [[ ${PORTAL_TESTBED_FRONT_PROXY:-} == 1 ]]; then
		local fp="$data/pki/front-proxy"
		mkdir -p "$fp"
		openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=front-proxy-ca \
			-keyout "$fp/ca.key" -out "$fp/ca.crt" 2>/dev/null || die "openssl could not make the front-proxy CA"
		openssl req -newkey rsa:2048 -nodes -subj /CN=front-proxy-client \
			-keyout "$fp/client.key" -out "$fp/client.csr" 2>/dev/null &&
			openssl x509 -req -in "$fp/client.csr" -CA "$fp/ca.crt" -CAkey "$fp/ca.key" -CAcreateserial \
				-days 2 -extfile <(printf 'extendedKeyUsage=clientAuth\n') -out "$fp/client.crt" 2>/dev/null ||
			die "openssl could not make the front-proxy client certificate"
		front_proxy=(
			--requestheader-client-ca-file="$fp/ca.crt"
			--requestheader-allowed-names=front-proxy-client
			--requestheader-username-headers=X-Remote-User
			--requestheader-group-headers=X-Remote-Group
			--requestheader-extra-headers-prefix=X-Remote-Extra-
			--proxy-client-cert-file="$fp/client.crt"
			--proxy-client-key-file="$fp/client.key"
		)
	fi

	start kube-apiserver "$state" "$bin/kube-apiserver" \
		--etcd-servers="http://127.0.0.1:$etcd_client" \
		--bind-address=127.0.0.1 \
		--advertise-address=127.0.0.1 \
		--secure-port="$api_port" \
		--cert-dir="$data/apiserver-certs" \
		--token-auth-file="$data/pki/tokens.csv" \
		--authorization-mode=RBAC \
		--service-account-issuer=https://kubernetes.default.svc.cluster.local \
		--service-account-key-file="$data/pki/sa.pub" \
		--service-account-signing-key-file="$data/pki/sa.key" \
		--service-cluster-ip-range=10.96.0.0/24 \
		--endpoint-reconciler-type=none \
		--enable-priority-and-fairness=false \
		"${front_proxy[@]}" \
		--profiling=false
	wait_ok "kube-apiserver ready" kube-apiserver "$state" http_ok "https://127.0.0.1:$api_port/readyz" ok \
		-k -H "Authorization: Bearer $admin_token"

	# The self-signed serving certificate (with its CA) is the kubeconfig's CA.
	local ca="$data/apiserver-certs/apiserver.crt"
	[[ -s $ca ]] || die "kube-apiserver wrote no $ca"
	cat >"$state/kubeconfig.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: testbed
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority-data: $(base64 -w0 <"$ca")
users:
- name: admin
  user:
    token: $admin_token
contexts:
- name: testbed
  context:
    cluster: testbed
    user: admin
current-context: testbed
EOF
	chmod 0600 "$state/kubeconfig.tmp"
	mv "$state/kubeconfig.tmp" "$state/kubeconfig"
	# The CA really verifies the server (what the tests will do).
	http_ok "https://127.0.0.1:$api_port/readyz" ok --cacert "$ca" -H "Authorization: Bearer $admin_token" ||
		die "the apiserver's certificate does not verify with $ca"

	start kube-controller-manager "$state" "$bin/kube-controller-manager" \
		--kubeconfig="$state/kubeconfig" \
		--bind-address=127.0.0.1 \
		--secure-port="$kcm_port" \
		--cert-dir="$data/kcm-certs" \
		--controllers="$KCM_CONTROLLERS" \
		--leader-elect=false \
		--service-account-private-key-file="$data/pki/sa.key" \
		--root-ca-file="$ca" \
		--profiling=false
	wait_ok "kube-controller-manager healthy" kube-controller-manager "$state" http_ok "https://127.0.0.1:$kcm_port/healthz" ok -k
	# The serviceaccount controller works once "default" has its ServiceAccount.
	wait_ok "default ServiceAccount created" kube-controller-manager "$state" http_ok \
		"https://127.0.0.1:$api_port/api/v1/namespaces/default/serviceaccounts/default" '"name":"default"' \
		--cacert "$ca" -H "Authorization: Bearer $admin_token"

	local t
	t=$(now)
	"$bin/applycrds" -timeout "${WAIT_S}s" "$state/kubeconfig" "$bin/kueue-crds" >"$state/logs/applycrds.log" 2>&1 || {
		tail_log "$state/logs/applycrds.log"
		die "applying the Kueue CRDs failed"
	}
	log "  Kueue $(cat "$bin/kueue-crds/VERSION") CRDs established in $(since "$t")"

	# Written last: its presence means the test bed is ready.
	printf 'PORTAL_TEST_KUBECONFIG=%s\nPORTAL_TEST_KUBE_TOKENS_DIR=%s\n' \
		"$state/kubeconfig" "$state/tokens" >"$state/kube.env.tmp"
	mv "$state/kube.env.tmp" "$state/kube.env"
	trap - EXIT
	log "up in $(since "$t0"); env: $state/kube.env; logs: $state/logs/"
}

# ----------------------------------------------------------------- down ---

# stop NAME STATE: SIGTERM, wait up to 15 s, then SIGKILL and wait again.
stop() {
	local name=$1 state=$2 pid i
	pid=$(cat "$state/$name.pid" 2>/dev/null || true)
	if [[ -z $pid ]]; then
		return 0
	fi
	if ours "$pid" "$state"; then
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < 150; i++)); do
			ours "$pid" "$state" || break
			sleep 0.1
		done
		if ours "$pid" "$state"; then
			log "$name (pid $pid) ignored SIGTERM for 15s; killing"
			kill -KILL "$pid" 2>/dev/null || true
			for ((i = 0; i < 100; i++)); do
				ours "$pid" "$state" || break
				sleep 0.1
			done
			ours "$pid" "$state" && die "$name (pid $pid) does not exit"
		fi
		log "stopped $name (pid $pid)"
	fi
	rm -f "$state/$name.pid"
}

stop_all() {
	local state=$1 i
	for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do
		stop "${COMPONENTS[i]}" "$state"
	done
	rm -rf "$state/data" "$state/kube.env" "$state/kube.env.tmp" "$state/kubeconfig" "$state/kubeconfig.tmp" "$state/tokens"
}

cmd_down() {
	[[ $# -eq 1 && -n $1 ]] || usage
	if [[ ! -d $1 ]]; then
		log "nothing to stop: $1 does not exist"
		return 0
	fi
	local state
	state=$(cd "$1" && pwd -P)
	stop_all "$state"
	log "down: $state (logs kept in $state/logs/)"
}

# Sourced (by cluster.sh, for its start/stop/port helpers): define only.
[[ ${BASH_SOURCE[0]} == "$0" ]] || return 0

case "${1:-}" in
build)
	shift
	[[ $# -eq 0 ]] || usage
	cmd_build
	;;
up)
	shift
	cmd_up "$@"
	;;
down)
	shift
	cmd_down "$@"
	;;
*) usage ;;
esac
