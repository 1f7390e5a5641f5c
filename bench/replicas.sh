#!/usr/bin/env bash
# Two portal replicas on one database, the test bed's kube-apiserver and
# the local AWS test endpoints, N connections (default 100) filed and
# approved through both replicas' web pages, kill -9 of the leader while it
# holds a job: prints the measured handover (kill to the other's /metrics
# saying it leads) and how many jobs the survivor resumed. The checks are
# those of cmd/portal TestTwoReplicas (every job exactly once, one namespace
# and one of each AWS resource per connection, audit chain verifies).
#
#   bench/replicas.sh                      # on the test bed's PostgreSQL
#   PORTAL_REPLICAS_N=20 bench/replicas.sh # fewer connections (N= works too)
#   PORTAL_TEST_REPLICAS_DB=/tmp/p.db bench/replicas.sh  # a SQLite file shared by the two
#
# Starts the Kubernetes part of the test bed unless PORTAL_TEST_KUBECONFIG is
# set, and PostgreSQL unless PORTAL_TEST_POSTGRES_URL or
# PORTAL_TEST_REPLICAS_DB is set (PORTAL_TESTBED_CACHE as for make test).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-${PORTAL_REPLICAS_N:-100}}
state=$(mktemp -d)
chmod 0755 "$state" # postgres.sh may run the server as another user
trap 'bash hack/testbed/kube.sh down "$state" >/dev/null 2>&1 || true; bash hack/testbed/postgres.sh down "$state" >/dev/null 2>&1 || true; rm -rf "$state"' EXIT
if [[ -z "${PORTAL_TEST_KUBECONFIG:-}" ]]; then
	bash hack/testbed/kube.sh up "$state"
	set -a
	# shellcheck disable=SC1091
	source "$state/kube.env"
	set +a
fi
if [[ -z "${PORTAL_TEST_POSTGRES_URL:-}" && -z "${PORTAL_TEST_REPLICAS_DB:-}" ]]; then
	bash hack/testbed/postgres.sh up "$state"
	set -a
	# shellcheck disable=SC1091
	source "$state/postgres.env"
	set +a
fi
PORTAL_REPLICAS_N=$N go test -count=1 -run '^TestTwoReplicas$' -v -timeout 20m ./cmd/portal |
	grep -E 'replicas:|resumed|^(--- |ok|FAIL)|_test.go'
