#!/usr/bin/env bash
# Two portal replicas on one database and the test bed's kube-apiserver,
# N connections (default 100) approved while both run, kill -9 of the
# leader: prints the measured handover (kill to the other's /metrics saying
# it leads) and how many jobs the survivor resumed. The checks are those of
# cmd/portal TestTwoReplicas (every job exactly once, audit chain verifies).
#
#   bench/replicas.sh                      # SQLite file shared by the two processes
#   PORTAL_TEST_REPLICAS_DB=postgres://... bench/replicas.sh
#
# Starts the Kubernetes part of the test bed unless PORTAL_TEST_KUBECONFIG is
# set (PORTAL_TESTBED_CACHE as for make test).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-100}
if [[ -z "${PORTAL_TEST_KUBECONFIG:-}" ]]; then
	state=$(mktemp -d)
	trap 'bash hack/testbed/kube.sh down "$state" >/dev/null 2>&1 || true; rm -rf "$state"' EXIT
	bash hack/testbed/kube.sh up "$state"
	set -a
	# shellcheck disable=SC1091
	source "$state/kube.env"
	set +a
fi
PORTAL_REPLICAS_N=$N go test -count=1 -run '^TestTwoReplicas$' -v -timeout 20m ./cmd/portal |
	grep -E 'replicas:|resumed|^(--- |ok|FAIL)|_test.go'
