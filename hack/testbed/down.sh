#!/usr/bin/env bash
# Stop the test bed started by hack/testbed/up.sh STATE_DIR (Slurm, PostgreSQL,
# Dex, the scheduling cluster, then the Kubernetes parts). Idempotent: succeeds when nothing runs or STATE_DIR
# does not exist. Logs under STATE_DIR/logs are kept.
#
#   hack/testbed/down.sh STATE_DIR
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"

log() { printf 'down.sh: %s\n' "$*" >&2; }

[[ $# -eq 1 && -n "$1" ]] || { echo "usage: $0 STATE_DIR" >&2; exit 2; }
if [[ ! -d "$1" ]]; then
	log "nothing to stop: $1 does not exist"
	exit 0
fi
STATE="$(cd "$1" && pwd -P)"

# Try every part even if one fails; report failure at the end.
fail=0
rm -f "$STATE/testbed.env" "$STATE/testbed.env.tmp" "$STATE/prometheus.env" "$STATE/prometheus.env.tmp" "$STATE/tools.env" "$STATE/tools.env.tmp" "$STATE/cluster.env" "$STATE/cluster.env.tmp"
if [[ -f "$HERE/slurm.sh" ]]; then
	bash "$HERE/slurm.sh" down "$STATE" || fail=1
fi
if [[ -f "$HERE/postgres.sh" ]]; then
	bash "$HERE/postgres.sh" down "$STATE" || fail=1
fi
if [[ -f "$HERE/dex.sh" ]]; then
	bash "$HERE/dex.sh" down "$STATE" || fail=1
fi
if [[ -f "$HERE/cluster.sh" ]]; then
	bash "$HERE/cluster.sh" down "$STATE" || fail=1
fi
if [[ -f "$HERE/kube.sh" ]]; then
	bash "$HERE/kube.sh" down "$STATE" || fail=1
else
	log "$HERE/kube.sh is missing; skipping the Kubernetes part"
fi
((fail == 0)) || { log "error: some parts did not stop cleanly"; exit 1; }
log "down: $STATE"
