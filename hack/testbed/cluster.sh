#!/usr/bin/env bash
# The scheduling cluster of the test bed: a second, separate API server on
# which a real kube-scheduler, a real Kueue controller manager and kwok (the
# simulated kubelets) run, so that tests can watch Kueue admit, borrow and
# preempt. It is separate from kube.sh's API server on purpose: the tests of
# that one write Workload statuses themselves, which a running Kueue would
# overwrite.
#
#   cluster.sh build           build kube-scheduler, kueue (+ kueuehooks) and kwok once
#                              into ~/.cache/hyperpod-portal/testbed/bin/cluster-<hash>/
#   cluster.sh prewarm         compile Kueue's packages into the Go build cache (no link,
#                              nothing cached here); make test runs it beside lint
#   cluster.sh up STATE_DIR    start etcd, kube-apiserver (with a front proxy for Kueue's
#                              visibility API), kube-controller-manager (with the Job
#                              controller) via kube.sh in STATE_DIR/sched, then
#                              kube-scheduler, Kueue and kwok on it; write STATE_DIR/cluster.env
#   cluster.sh down STATE_DIR  stop them (by pid) and remove the data directory
#
# STATE_DIR/cluster.env holds KEY=VALUE lines for the tests:
#   PORTAL_TEST_SCHED_KUBECONFIG  admin kubeconfig of the scheduling cluster
#   PORTAL_TEST_SCHED_KWOK_LABEL  label (key=value) that makes a Node kwok's
#
# Versions (all from the Go module proxy; nothing else is downloaded):
#   kube-scheduler v1.35.4  hack/kubebin, the same k8s.io/kubernetes as kube-apiserver
#   Kueue v0.17.0           hack/kueue; the same version as the CRDs kube.sh applies
#                           (hack/kubebin pins sigs.k8s.io/kueue too: bump both together)
#   kwok v0.8.0             hack/kwok
# Why Kueue v0.17.0: it is the newest Kueue the module proxy serves here
# (`go list -m -versions sigs.k8s.io/kueue` lists only v0.17.0). HyperPod's
# task governance add-on v1.6.0-eksbuild.1 packages Kueue v0.19.2, and older
# add-on versions older Kueues
# (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-operate-console-ui-governance-upgrade.html);
# v0.17 serves kueue.x-k8s.io/v1beta2 as v0.19 does, which is what the portal
# applies.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
LOG_NAME=cluster.sh
# kube.sh's helpers: start, stop, ours, wait_ok, http_ok, pick_port, gobuild, now, since.
# shellcheck source=kube.sh
source "$HERE/kube.sh"

readonly CLUSTER_BUILD_VERSION="cluster.sh-build-1"
readonly KUEUE_VERSION="v0.17.0"
readonly KWOK_VERSION="v0.8.0"
# Nodes with this label are kwok's (kwok's own convention, type=kwok).
readonly KWOK_LABEL="type=kwok"
# Started in this order on top of kube.sh's components; stopped in reverse.
readonly CLUSTER_COMPONENTS=(kube-scheduler kueue kwok)

cluster_hash() {
	{
		printf '%s\n%s\n%s\n' "$CLUSTER_BUILD_VERSION" "$KUBE_LDFLAGS" "$(go env GOVERSION GOOS GOARCH)"
		cat "$REPO"/hack/kubebin/go.mod "$REPO"/hack/kubebin/go.sum \
			"$REPO"/hack/kueue/go.mod "$REPO"/hack/kueue/go.sum "$REPO"/hack/kueue/kueuehooks/*.go \
			"$REPO"/hack/kwok/go.mod "$REPO"/hack/kwok/go.sum
	} | sha256sum | cut -c1-16
}

cluster_dir() { printf '%s/bin/cluster-%s\n' "$CACHE_ROOT" "$(cluster_hash)"; }

cluster_build() {
	command -v go >/dev/null || die "go is not on PATH"
	command -v flock >/dev/null || die "flock is needed (util-linux)"
	locked_build cluster "$(cluster_dir)" build_cluster "kube-scheduler $KUBE_VERSION, Kueue $KUEUE_VERSION and kwok $KWOK_VERSION"
}

# cluster_prewarm: compile every package of Kueue and kueuehooks into the Go
# build cache, with gobuild's flags (go list -export compiles what go build
# would, to the same build IDs, and links nothing), so that the build later
# only links them. make test runs it in its second lane, beside lint: Kueue
# is built on the Kubernetes v0.35.4 libraries (hack/kueue), which lint's graph
# (v0.37.2) does not compile, and which kube.sh's build, later in the first
# lane, then finds compiled. Nothing to do when the cluster's binaries are
# cached.
cluster_prewarm() {
	command -v go >/dev/null || die "go is not on PATH"
	local dir t
	dir=$(cluster_dir)
	if [[ -f $dir/.complete ]]; then
		log "binaries up to date ($dir): nothing to prewarm"
		return 0
	fi
	t=$(now)
	gonested hack/kueue list -trimpath -export -deps -f '{{if .Error}}{{.Error}}{{end}}' sigs.k8s.io/kueue/cmd/kueue ./kueuehooks ||
		die "compiling Kueue's packages failed"
	log "Kueue's packages compiled in $(since "$t")"
}

# build_cluster TMP: the scheduling cluster's binaries and data files, into TMP.
build_cluster() {
	local tmp=$1 t
	t=$(now)
	gobuild hack/kueue -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION" -o "$tmp/" \
		sigs.k8s.io/kueue/cmd/kueue ./kueuehooks || {
		rm -rf "$tmp"
		die "building kueue failed"
	}
	log "  kueue, kueuehooks built in $(since "$t")"

	t=$(now)
	gobuild hack/kwok -ldflags "-s -w" -o "$tmp/" sigs.k8s.io/kwok/cmd/kwok || {
		rm -rf "$tmp"
		die "building kwok failed"
	}
	log "  kwok built in $(since "$t")"

	# Last: kube.sh's build of kube-apiserver (same module) has compiled most
	# of its packages by then.
	t=$(now)
	gobuild hack/kubebin -ldflags "$KUBE_LDFLAGS" -o "$tmp/" k8s.io/kubernetes/cmd/kube-scheduler || {
		rm -rf "$tmp"
		die "building kube-scheduler failed"
	}
	log "  kube-scheduler built in $(since "$t")"

	# Data files of exactly the versions pinned (and checksummed) in go.sum:
	# Kueue's webhook configurations (kueuehooks rewrites them to loopback
	# URLs) and kwok's stages: node-initialize (the node is Ready with the
	# allocatable it was created with) and the general pod lifecycle (Running
	# after pod-ready's delay, Succeeded after pod-complete's delay for pods
	# owned by a Job, both read from the pod's annotations
	# pod-ready.stage.kwok.x-k8s.io/delay and pod-complete.stage.kwok.x-k8s.io/delay;
	# deleted pods are removed by pod-delete).
	local kueue_dir kwok_dir
	kueue_dir=$(moddir hack/kueue "sigs.k8s.io/kueue@$KUEUE_VERSION") || die "no module sigs.k8s.io/kueue@$KUEUE_VERSION"
	kwok_dir=$(moddir hack/kwok "sigs.k8s.io/kwok@$KWOK_VERSION") || die "no module sigs.k8s.io/kwok@$KWOK_VERSION"
	install -m 0644 "$kueue_dir/config/components/webhook/manifests.yaml" "$tmp/kueue-webhooks.yaml"
	mkdir -p "$tmp/kwok-stages"
	install -m 0644 "$kwok_dir/kustomize/stage/node/fast/node-initialize.yaml" \
		"$kwok_dir"/kustomize/stage/pod/general/pod-*.yaml "$tmp/kwok-stages/"

	"$tmp/kube-scheduler" --version >&2
}

# kueue_config FILE HEALTH METRICS WEBHOOK CERTDIR VISIBILITY: Kueue's configuration
# (config.kueue.x-k8s.io/v1beta2, apis/config/v1beta2/configuration_types.go
# of sigs.k8s.io/kueue v0.17.0). Loopback everywhere; the rest follows what
# AWS documents of HyperPod's task governance add-on, and Kueue's defaults
# where AWS says nothing.
kueue_config() {
	local file=$1 health=$2 metrics=$3 webhook=$4 certdir=$5 visibility=$6
	cat >"$file" <<EOF
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health:
  healthProbeBindAddress: 127.0.0.1:$health
metrics:
  bindAddress: 127.0.0.1:$metrics
webhook:
  host: 127.0.0.1
  port: $webhook
  certDir: $certdir
leaderElection:
  leaderElect: false
# The visibility API server (pending workloads and their positions, served
# through the aggregation layer): on loopback, not its default 0.0.0.0:8082
# (apis/config/v1beta2 VisibilityServerConfiguration; pkg/visibility/server.go
# applies bindAddress and bindPort).
visibilityServer:
  bindAddress: 127.0.0.1
  bindPort: $visibility
# No Service and no rotator: cluster.sh makes a certificate for 127.0.0.1 and
# kueuehooks puts it in the webhook configurations' caBundle.
internalCertManagement:
  enable: false
clientConnection:
  qps: 50
  burst: 100
# HyperPod's task governance queues jobs that carry kueue.x-k8s.io/queue-name
# (the portal's platform reference: jobs pick a queue with that label); AWS
# documents no change to Kueue's default, false: jobs without it are not managed.
manageJobsWithoutQueueName: false
# batch/job: the only job API this test bed serves. (HyperPod's own job kinds,
# HyperPodPyTorchJob and Kubeflow's PyTorchJob, need CRDs and operators that do
# not run here.)
integrations:
  frameworks:
  - batch/job
# HyperPod's cluster policy: "FairShare ... When enabled, entities borrow idle
# compute based on their assigned FairShareWeight ... Default is Enabled"
# (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_SchedulerConfig.html).
# Present means enabled in v1beta2; the strategies are Kueue's defaults.
fairSharing:
  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]
# Not set: waitForPodsReady. AWS: task governance implements gang scheduling
# with it only once an admin activates it
# (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-operate-console-ui-governance-tasks-gang-scheduling.html).
# Preemption itself is per ClusterQueue (spec.preemption), which the portal
# and the tests' fixture write.
EOF
}

cluster_up() {
	local state
	state=$(state_dir_arg "$@")
	local sched="$state/sched" name pid
	for name in "${CLUSTER_COMPONENTS[@]}"; do
		pid=$(cat "$sched/$name.pid" 2>/dev/null || true)
		if [[ -n $pid ]] && ours "$pid" "$sched"; then
			die "$name is already running (pid $pid) for $state; run: $0 down $state"
		fi
	done
	cluster_build
	local bin
	bin=$(cluster_dir)
	local t0
	t0=$(now)
	rm -f "$state/cluster.env" "$state/cluster.env.tmp"
	mkdir -p "$sched/logs"

	UP_STATE=$state
	trap 'log "up failed; stopping the scheduling cluster"; cluster_down "$UP_STATE"' EXIT
	# Its own etcd and API server; the Job controller creates the pods of the
	# Jobs Kueue admits, and the pod GC removes pods left on deleted nodes.
	# The front proxy lets the API server pass users on to Kueue's
	# visibility API (an aggregated API server).
	PORTAL_TESTBED_KCM_EXTRA_CONTROLLERS=job-controller,pod-garbage-collector-controller PORTAL_TESTBED_FRONT_PROXY=1 \
		bash "$HERE/kube.sh" up "$sched"
	local kubeconfig="$sched/kubeconfig"

	local sched_port health metrics webhook kwok_port visibility
	pick_port
	sched_port=$PORT
	pick_port
	health=$PORT
	pick_port
	metrics=$PORT
	pick_port
	webhook=$PORT
	pick_port
	kwok_port=$PORT
	pick_port
	visibility=$PORT
	log "starting in $sched (kube-scheduler :$sched_port, Kueue webhooks :$webhook, kwok :$kwok_port)"

	start kube-scheduler "$sched" "$bin/kube-scheduler" \
		--kubeconfig="$kubeconfig" \
		--bind-address=127.0.0.1 \
		--secure-port="$sched_port" \
		--cert-dir="$sched/data/scheduler-certs" \
		--leader-elect=false \
		--profiling=false
	wait_ok "kube-scheduler healthy" kube-scheduler "$sched" http_ok "https://127.0.0.1:$sched_port/healthz" ok -k

	# Kueue's serving certificate: self-signed for IP 127.0.0.1 (the URL the
	# webhook configurations name); it is also the caBundle.
	local certs="$sched/data/kueue-certs"
	mkdir -p "$certs"
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
		-addext subjectAltName=IP:127.0.0.1 \
		-keyout "$certs/tls.key" -out "$certs/tls.crt" 2>/dev/null || die "openssl could not make Kueue's certificate"
	# Kueue v0.17.0 reads its metrics serving certificate from a fixed path
	# when its internal certificate management is off (cmd/kueue/main.go:
	# metricsCertPath "/etc/kueue/metrics/certs") and exits without one. Any
	# certificate does (nothing scrapes it here); test beds share it.
	local mcerts=/etc/kueue/metrics/certs
	if [[ ! -s $mcerts/tls.crt || ! -s $mcerts/tls.key ]]; then
		{ mkdir -p "$mcerts" &&
			install -m 0600 "$certs/tls.key" "$mcerts/tls.key.$$" && mv -f "$mcerts/tls.key.$$" "$mcerts/tls.key" &&
			install -m 0644 "$certs/tls.crt" "$mcerts/tls.crt.$$" && mv -f "$mcerts/tls.crt.$$" "$mcerts/tls.crt"; } ||
			die "cannot write Kueue's metrics certificate to $mcerts (Kueue needs it there)"
	fi
	visibility_cert
	kueue_config "$sched/kueue-config.yaml" "$health" "$metrics" "$webhook" "$certs" "$visibility"
	# VisibilityOnDemand is on (Kueue's default since v0.9,
	# pkg/features/kube_features.go), its server on loopback (kueue_config).
	start kueue "$sched" "$bin/kueue" \
		--config="$sched/kueue-config.yaml" \
		--kubeconfig="$kubeconfig" \
		--zap-log-level=info
	wait_ok "Kueue ready" kueue "$sched" http_ok "http://127.0.0.1:$health/readyz" ok
	local t
	t=$(now)
	"$bin/kueuehooks" -timeout "${WAIT_S}s" "$kubeconfig" "$bin/kueue-webhooks.yaml" \
		"https://127.0.0.1:$webhook" "$certs/tls.crt" >"$sched/logs/kueuehooks.log" 2>&1 || {
		tail_log "$sched/logs/kueuehooks.log"
		tail_log "$sched/logs/kueue.log"
		die "Kueue's webhooks are not reachable from the API server"
	}
	log "  Kueue webhooks answer the API server in $(since "$t")"
	t=$(now)
	visibility_register "$sched" "$visibility"
	log "  Kueue's visibility API answers through the API server in $(since "$t")"

	local stages
	stages=$(printf '%s,' "$bin"/kwok-stages/*.yaml)
	start kwok "$sched" "$bin/kwok" \
		--kubeconfig="$kubeconfig" \
		--manage-nodes-with-label-selector="$KWOK_LABEL" \
		--server-address="127.0.0.1:$kwok_port" \
		--config="${stages%,}"
	wait_ok "kwok healthy" kwok "$sched" http_ok "http://127.0.0.1:$kwok_port/healthz" ok

	printf 'PORTAL_TEST_SCHED_KUBECONFIG=%s\nPORTAL_TEST_SCHED_KWOK_LABEL=%s\n' \
		"$kubeconfig" "$KWOK_LABEL" >"$state/cluster.env.tmp"
	mv "$state/cluster.env.tmp" "$state/cluster.env"
	trap - EXIT
	log "up in $(since "$t0"); env: $state/cluster.env; logs: $sched/logs/"
}

# Kueue v0.17.0 reads its visibility server's certificate from a fixed path
# when its internal certificate management is off (pkg/visibility/server.go:
# certDir "/visibility", tls.crt and tls.key) and cannot start without one.
# Test beds share it: made once, self-signed for the name the aggregation
# layer checks (<service>.<namespace>.svc, k8s.io/kube-aggregator@v0.35.4
# pkg/apiserver/handler_proxy.go updateAPIService's ServerName) and 127.0.0.1; it is
# also the APIService's caBundle.
readonly VISIBILITY_CERTS=/visibility
visibility_cert() {
	local d=$VISIBILITY_CERTS
	[[ -s $d/tls.crt && -s $d/tls.key ]] && return 0
	{ mkdir -p "$d" &&
		openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj /CN=visibility-server.kueue-system.svc \
			-addext "subjectAltName=DNS:visibility-server.kueue-system.svc,IP:127.0.0.1" \
			-keyout "$d/tls.key.$$" -out "$d/tls.crt.$$" 2>/dev/null &&
		chmod 0600 "$d/tls.key.$$" && chmod 0644 "$d/tls.crt.$$" &&
		mv -f "$d/tls.key.$$" "$d/tls.key" && mv -f "$d/tls.crt.$$" "$d/tls.crt"; } ||
		die "cannot write Kueue's visibility certificate to $d (Kueue needs it there)"
}

# visibility_register SCHED PORT: Kueue's own visibility manifests
# (config/components/visibility of sigs.k8s.io/kueue v0.17.0: Service
# kueue-system/visibility-server and the APIServices v1beta2 and v1beta1 of
# visibility.kueue.x-k8s.io), with the Service an ExternalName for
# 127.0.0.1 (the aggregation layer resolves an ExternalName Service to that
# host and the APIService's port: k8s.io/apiserver@v0.35.4
# pkg/util/proxy/proxy.go ResolveCluster; Endpoints and EndpointSlices may
# not name a loopback address: k8s.io/kubernetes@v1.35.4
# pkg/apis/core/validation/validation.go ValidateEndpointIP) and the
# certificate as caBundle where Kueue's manifest skips verification. Waits
# until the API server serves the group.
visibility_register() {
	local sched=$1 port=$2
	local kubeconfig="$sched/kubeconfig" ca="$sched/data/apiserver-certs/apiserver.crt" server token bundle v
	server=$(awk '/server:/ {print $2; exit}' "$kubeconfig")
	token=$(awk '/token:/ {print $2; exit}' "$kubeconfig")
	bundle=$(base64 -w0 <"$VISIBILITY_CERTS/tls.crt")
	post() {
		local path=$1 body=$2 code
		code=$(curl -sS -o "$sched/logs/visibility-post.json" -w '%{http_code}' --max-time 10 --cacert "$ca" \
			-H "Authorization: Bearer $token" -H 'Content-Type: application/json' -X POST --data "$body" "$server$path") || return 1
		[[ $code == 201 || $code == 409 ]] || {
			cat "$sched/logs/visibility-post.json" >&2
			return 1
		}
	}
	post /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"kueue-system"}}' &&
		post /api/v1/namespaces/kueue-system/services '{"apiVersion":"v1","kind":"Service","metadata":{"name":"visibility-server","namespace":"kueue-system"},"spec":{"type":"ExternalName","externalName":"127.0.0.1"}}' ||
		die "cannot create Kueue's visibility Service"
	for v in v1beta2 v1beta1; do
		post /apis/apiregistration.k8s.io/v1/apiservices "{\"apiVersion\":\"apiregistration.k8s.io/v1\",\"kind\":\"APIService\",\"metadata\":{\"name\":\"$v.visibility.kueue.x-k8s.io\"},\"spec\":{\"group\":\"visibility.kueue.x-k8s.io\",\"version\":\"$v\",\"groupPriorityMinimum\":100,\"versionPriority\":100,\"caBundle\":\"$bundle\",\"service\":{\"name\":\"visibility-server\",\"namespace\":\"kueue-system\",\"port\":$port}}}" ||
			die "cannot create Kueue's visibility APIService $v"
	done
	wait_ok "Kueue's visibility API served" kueue "$sched" http_ok "$server/apis/visibility.kueue.x-k8s.io/v1beta2" '"localqueues/pendingworkloads"' \
		--cacert "$ca" -H "Authorization: Bearer $token"
}

cluster_down() {
	[[ $# -eq 1 && -n $1 ]] || usage
	if [[ ! -d $1 ]]; then
		log "nothing to stop: $1 does not exist"
		return 0
	fi
	local state i
	state=$(cd "$1" && pwd -P)
	rm -f "$state/cluster.env" "$state/cluster.env.tmp"
	[[ -d $state/sched ]] || return 0
	for ((i = ${#CLUSTER_COMPONENTS[@]} - 1; i >= 0; i--)); do
		stop "${CLUSTER_COMPONENTS[i]}" "$state/sched"
	done
	bash "$HERE/kube.sh" down "$state/sched"
}

usage() {
	sed -n '9,18s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
	exit 2
}

case "${1:-}" in
build)
	shift
	[[ $# -eq 0 ]] || usage
	cluster_build
	;;
prewarm)
	shift
	[[ $# -eq 0 ]] || usage
	cluster_prewarm
	;;
up)
	shift
	cluster_up "$@"
	;;
down)
	shift
	cluster_down "$@"
	;;
*) usage ;;
esac
