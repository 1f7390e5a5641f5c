#!/usr/bin/env bash
# Installs the few Debian packages the test bed's scripts call, and the CA
# bundle make image puts in the image, only when missing (a full Debian 12
# install has them; slim images may not). Idempotent.
set -euo pipefail
# One apt at a time: make test runs this and e2e-setup.sh in two lanes, and a
# second apt-get would fail on dpkg's lock. The lock is held from the check
# to the end of the install, so a second caller sees what the first installed.
exec 8>"${TMPDIR:-/tmp}/hyperpod-portal-apt.lock"
flock 8
need=()
# wrk: the HTTP load generator of make bench's page benchmark (bench/pages).
for pair in curl:curl openssl:openssl flock:util-linux setsid:util-linux ss:iproute2 git:git runuser:util-linux wrk:wrk; do
	cmd=${pair%%:*} pkg=${pair#*:}
	command -v "$cmd" >/dev/null 2>&1 || need+=("$pkg")
done
# make image copies Debian's CA bundle into the image (internal/support/image).
[[ -f /etc/ssl/certs/ca-certificates.crt ]] || need+=(ca-certificates)
# PostgreSQL for the store suite's second pass (hack/testbed/postgres.sh):
# Debian's server package puts initdb, pg_ctl and postgres under
# /usr/lib/postgresql/<major>/bin, not on PATH.
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need+=(postgresql)
# Slurm for the test bed (hack/testbed/slurm.sh): Debian 12's Slurm 22.05,
# munge, and MariaDB for the accounting database. Their packages would start
# system services; the test bed starts its own.
for pair in slurmctld:slurmctld slurmd:slurmd slurmdbd:slurmdbd sacctmgr:slurm-client munged:munge mariadbd:mariadb-server; do
	cmd=${pair%%:*} pkg=${pair#*:}
	command -v "$cmd" >/dev/null 2>&1 || [[ -x /usr/sbin/$cmd ]] || need+=("$pkg")
done
if [[ ${#need[@]} -gt 0 ]]; then
	mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
	echo "deps: installing ${need[*]} (apt)" >&2
	SUDO=; [[ $EUID -ne 0 ]] && SUDO=sudo
	# No service starts during the install (invoke-rc.d's policy-rc.d
	# protocol: exit 101 = action forbidden), unless a policy is in place.
	policy=
	if [[ ! -e /usr/sbin/policy-rc.d ]]; then
		policy=/usr/sbin/policy-rc.d
		printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
		$SUDO chmod 755 "$policy"
		trap '$SUDO rm -f "$policy"' EXIT
	fi
	$SUDO apt-get update >&2
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${need[@]}" >&2
fi
