#!/usr/bin/env bash
# Start the whole test bed (Kubernetes API + Dex + PostgreSQL + the scheduling
# cluster + Slurm) for STATE_DIR and write STATE_DIR/testbed.env = kube.env +
# dex.env + prometheus.env + postgres.env + tools.env + cluster.env + slurm.env
# (KEY=VALUE lines, no quotes). The scheduling cluster (cluster.sh: a second API server with
# kube-scheduler, Kueue and kwok) starts too; PORTAL_TESTBED_SCHED=0 leaves it
# out (a lighter test bed by hand; make test needs it). Prometheus is only
# built here: each test that needs it starts its own from
# PORTAL_TEST_PROMETHEUS_BIN (see prometheus.sh); helm and kubectl (tools.sh)
# are only built too.
#
#   hack/testbed/up.sh STATE_DIR
#
# Builds first (kube then cluster, dex, prometheus and tools builds run concurrently; all are
# cached, so a second run builds nothing). On failure everything started is stopped again.
# Stop with hack/testbed/down.sh STATE_DIR.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
KUBE="$HERE/kube.sh"
DEX="$HERE/dex.sh"
PROM="$HERE/prometheus.sh"
TOOLS="$HERE/tools.sh"
PG="$HERE/postgres.sh"
CLUSTER="$HERE/cluster.sh"
SLURM="$HERE/slurm.sh"

log() { printf 'up.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[[ $# -eq 1 && -n "$1" ]] || { echo "usage: $0 STATE_DIR" >&2; exit 2; }
[[ -f "$KUBE" ]] || die "$KUBE is missing (the Kubernetes part of the test bed); cannot start the test bed without it"
[[ -f "$DEX" ]] || die "$DEX is missing"
[[ -f "$PROM" ]] || die "$PROM is missing"
[[ -f "$TOOLS" ]] || die "$TOOLS is missing"
[[ -f "$PG" ]] || die "$PG is missing"
[[ -f "$CLUSTER" ]] || die "$CLUSTER is missing"
[[ -f "$SLURM" ]] || die "$SLURM is missing"
mkdir -p "$1"
STATE="$(cd "$1" && pwd -P)"

# Refuse to start over a running test bed (and do not tear it down either).
for pidfile in "$STATE"/*.pid; do
	[[ -f "$pidfile" ]] || continue
	pid="$(cat "$pidfile" 2>/dev/null || true)"
	if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
		die "test bed already running in $STATE ($(basename "$pidfile") = $pid); run: $HERE/down.sh $STATE"
	fi
done

t0=$SECONDS
rm -f "$STATE/testbed.env" "$STATE/testbed.env.tmp"
mkdir -p "$STATE/logs"

# --- build (concurrently) ---------------------------------------------------
log "building (kube then cluster, dex, prometheus and tools in parallel; build logs also in $STATE/logs/build-*.log)"
# cluster.sh builds kube-scheduler from kube.sh's module: after kube.sh, it
# reuses the packages that build compiled instead of compiling them twice at once.
# The scheduling cluster is part of the test bed; PORTAL_TESTBED_SCHED=0
# leaves it out (docs/testing.md has its cold build time).
SCHED=${PORTAL_TESTBED_SCHED:-1}
{ bash "$KUBE" build && { [[ $SCHED != 1 ]] || bash "$CLUSTER" build; }; } > >(tee "$STATE/logs/build-kube.log" >&2) 2>&1 &
kube_build=$!
bash "$DEX" build > >(tee "$STATE/logs/build-dex.log" >&2) 2>&1 &
dex_build=$!
bash "$PROM" build > >(tee "$STATE/logs/build-prometheus.log" >&2) 2>&1 &
prom_build=$!
bash "$TOOLS" build > >(tee "$STATE/logs/build-tools.log" >&2) 2>&1 &
tools_build=$!
fail=0
wait "$kube_build" || { log "kube.sh or cluster.sh build failed (see $STATE/logs/build-kube.log)"; fail=1; }
wait "$dex_build" || { log "dex.sh build failed (see $STATE/logs/build-dex.log)"; fail=1; }
wait "$prom_build" || { log "prometheus.sh build failed (see $STATE/logs/build-prometheus.log)"; fail=1; }
wait "$tools_build" || { log "tools.sh build failed (see $STATE/logs/build-tools.log)"; fail=1; }
((fail == 0)) || die "build failed"
log "builds done in $((SECONDS - t0))s"

# --- start ------------------------------------------------------------------
trap 'log "up failed; stopping the test bed"; bash "$HERE/down.sh" "$STATE" || true' EXIT
bash "$KUBE" up "$STATE"
bash "$DEX" up "$STATE"
bash "$PROM" env "$STATE"
bash "$PG" up "$STATE"
bash "$TOOLS" env "$STATE"
ENVS=(kube.env dex.env prometheus.env postgres.env tools.env)
if [[ $SCHED == 1 ]]; then
	bash "$CLUSTER" up "$STATE"
	ENVS+=(cluster.env)
fi
# Slurm (slurm.sh: munge, MariaDB, slurmdbd, slurmctld, slurmd from Debian's
# packages; nothing to build). PORTAL_TESTBED_SLURM=0 leaves it out.
if [[ ${PORTAL_TESTBED_SLURM:-1} == 1 ]]; then
	bash "$SLURM" up "$STATE"
	ENVS+=(slurm.env)
fi

for f in "${ENVS[@]}"; do
	[[ -s "$STATE/$f" ]] || die "$STATE/$f was not written"
done
for f in "${ENVS[@]}"; do
	cat "$STATE/$f"
	# Guard against a file without a trailing newline.
	[[ -z "$(tail -c1 "$STATE/$f")" ]] || echo
done >"$STATE/testbed.env.tmp"
mv -f "$STATE/testbed.env.tmp" "$STATE/testbed.env"
trap - EXIT
log "test bed up in $((SECONDS - t0))s: $STATE/testbed.env"
