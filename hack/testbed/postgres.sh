#!/usr/bin/env bash
# PostgreSQL for the store suite's PostgreSQL pass (make test), from
# Debian's postgresql package (hack/deps.sh installs it when missing).
#
#   hack/testbed/postgres.sh up STATE_DIR    initdb in STATE_DIR/postgres, start it on a
#                                            free 127.0.0.1 port, write STATE_DIR/postgres.env
#   hack/testbed/postgres.sh down STATE_DIR  stop it (idempotent)
#
# postgres.env holds PORTAL_TEST_POSTGRES_URL, a superuser URL (the tests
# create one database per test). The server listens on 127.0.0.1 only, with
# its unix socket inside STATE_DIR, trust authentication for that address
# only, and settings for throwaway data (fsync off, no full-page writes):
# it is a test database, torn down with the test bed.
#
# postgres refuses to run as root. Run as root (make test in a container),
# the server runs as the user `nobody` (present on every Debian system),
# through runuser (util-linux); STATE_DIR/postgres is chowned to it, so
# STATE_DIR's parents must be traversable by others (the default 0755).
set -euo pipefail

log() { printf 'postgres.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[[ $# -eq 2 && -n "$2" ]] || { echo "usage: $0 up|down STATE_DIR" >&2; exit 2; }
cmd=$1
mkdir -p "$2"
STATE="$(cd "$2" && pwd -P)"
DATA="$STATE/postgres"
PIDFILE="$STATE/postgres.pid"

bindir() {
	local d
	d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
	[[ -n "$d" && -x "$d/initdb" ]] || die "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb); run: make deps"
	echo "$d"
}

# as_pg runs a command as the server's user: nobody when we are root.
as_pg() {
	if [[ $EUID -eq 0 ]]; then
		runuser -u nobody -- "$@"
	else
		"$@"
	fi
}

# port_in_use, pick_port (PORT, USED_PORTS).
source "$(dirname "${BASH_SOURCE[0]}")/ports.sh"

up() {
	local bin port i opts
	bin="$(bindir)"
	if [[ -f "$PIDFILE" ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
		die "already running in $STATE (pid $(cat "$PIDFILE")); run: $0 down $STATE"
	fi
	rm -rf "$DATA" "$STATE/postgres.env"
	mkdir -p "$DATA" "$STATE/logs"
	if [[ $EUID -eq 0 ]]; then
		chown nobody: "$DATA"
		as_pg test -w "$DATA" || die "user nobody cannot write $DATA (are the parents of $STATE traversable by others?)"
	fi
	chmod 700 "$DATA"
	as_pg "$bin/initdb" -D "$DATA/data" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 --no-sync >"$STATE/logs/postgres-initdb.log" 2>&1 ||
		{ cat "$STATE/logs/postgres-initdb.log" >&2; die "initdb failed"; }
	# Only 127.0.0.1 (TCP) and the socket in DATA: trust is safe for those.
	cat >"$DATA/data/pg_hba.conf" <<EOF
local all all trust
host all all 127.0.0.1/32 trust
EOF
	pick_port
	port=$PORT
	# The server log goes to a file nobody may write: create it first.
	touch "$STATE/logs/postgres.log"
	[[ $EUID -eq 0 ]] && chown nobody: "$STATE/logs/postgres.log"
	opts=(-c listen_addresses=127.0.0.1 -c "port=$port" -c "unix_socket_directories=$DATA"
		-c fsync=off -c synchronous_commit=off -c full_page_writes=off
		-c max_connections=300 -c shared_buffers=64MB)
	as_pg "$bin/pg_ctl" -D "$DATA/data" -l "$STATE/logs/postgres.log" -w -t 60 start -o "${opts[*]}" >/dev/null ||
		{ tail -20 "$STATE/logs/postgres.log" >&2; die "postgres did not start"; }
	head -1 "$DATA/data/postmaster.pid" >"$PIDFILE"
	echo "PORTAL_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable" >"$STATE/postgres.env.tmp"
	mv -f "$STATE/postgres.env.tmp" "$STATE/postgres.env"
	log "up on 127.0.0.1:$port (data $DATA/data, pid $(cat "$PIDFILE"))"
}

down() {
	local bin
	rm -f "$STATE/postgres.env"
	if [[ -f "$DATA/data/postmaster.pid" ]]; then
		bin="$(bindir)"
		as_pg "$bin/pg_ctl" -D "$DATA/data" -m immediate -w stop >/dev/null 2>&1 || true
	fi
	if [[ -f "$PIDFILE" ]]; then
		pid="$(cat "$PIDFILE")"
		if kill -0 "$pid" 2>/dev/null; then
			kill -KILL "$pid" 2>/dev/null || true
		fi
		rm -f "$PIDFILE"
	fi
	rm -rf "$DATA"
}

case "$cmd" in
up) up ;;
down) down ;;
*) die "unknown command $cmd (up|down)" ;;
esac
