#!/usr/bin/env bash
# A real Slurm for the test bed (issue 36), from Debian 12's packages
# (hack/deps.sh installs them when missing): munge, MariaDB for the
# accounting database, slurmdbd, slurmctld and one slurmd, on loopback,
# with eight GPUs declared as generic resources. No real devices: gres.conf
# names eight character devices made in the run's directory with /dev/null's
# numbers (slurmd 22.05 drops a GPU without File=, "Removing file-less GPU",
# and warns about a File= that is not a character or block device).
#
#   hack/testbed/slurm.sh up STATE_DIR    start it, write STATE_DIR/slurm.env
#   hack/testbed/slurm.sh down STATE_DIR  stop it (idempotent)
#
# slurm.env:
#   PORTAL_TEST_SLURM_CONF   the slurm.conf every Slurm command reads (SLURM_CONF=)
#   PORTAL_TEST_SLURM_USERS  the local accounts the tests submit as
#                            (lane:team:user,...; testenv.SlurmUsers)
#   PORTAL_TEST_SLURM_NODE   the node, PORTAL_TEST_SLURM_PARTITION its partition
#   PORTAL_TEST_SLURM_GPUS   the GPUs the node declares
#   PORTAL_TEST_SLURM_BIN    the directory of the serialising sacctmgr
#                            (sacctmgr_wrapper), and PATH with it first
#   PORTAL_TEST_SLURM_SACCTMGR_LOCK  the lock its writes take
#
# The accounting storage enforces associations, limits, QoS and safe
# (AccountingStorageEnforce): a job needs an association, and a group TRES
# limit on gres/gpu keeps a job over it pending with reason AssocGrpGRES.
# Priority is multifactor and preemption between QoS is on (preempt/qos),
# as the contract's scheduling terms need. Everything (keys, database,
# state, spool, logs) lives in STATE_DIR/slurm, every daemon listens on
# 127.0.0.1 on free ports, and everything stops with the test bed. The
# daemons run as root, with --force for munged (it otherwise refuses root).
#
# The users are local accounts (useradd, no home, no shell) created once on
# the machine and kept: jobs run as them (sbatch through runuser), as on a
# HyperPod cluster where Studio's users map to POSIX users. Each package
# whose tests use them has a lane of its own (two red, two blue): Slurm's
# user records are global (a default account, coordinators), and two
# packages' tests run at once, so a shared user let one package's
# revocation or default-account change land in another's assertions.
set -euo pipefail

log() { printf 'slurm.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[[ $# -eq 2 && -n "$2" ]] || { echo "usage: $0 up|down STATE_DIR" >&2; exit 2; }
cmd=$1
mkdir -p "$2"
STATE="$(cd "$2" && pwd -P)"
DIR="$STATE/slurm"
# The lock every sacctmgr write takes (sacctmgr_wrapper).
SACCTMGR_LOCK="$DIR/sacctmgr.lock"
ENV="$STATE/slurm.env"

CLUSTER=testbed
NODE=hp-gpu-1
PARTITION=gpu
GPUS=8
# The packages whose tests submit as these users (the lane is the
# package directory's name; testenv.SlurmUsers picks its own).
LANES=(slurm slurmusage slurmprov provision)
USERS=()
for lane in "${LANES[@]}"; do
	for tu in red:1 red:2 blue:1 blue:2; do
		USERS+=("$lane:${tu%:*}:hp-$lane-${tu%:*}-${tu#*:}")
	done
done

# port_in_use, pick_port (PORT, USED_PORTS).
source "$(dirname "${BASH_SOURCE[0]}")/ports.sh"

# wait_for DESCRIPTION SECONDS COMMAND...: until COMMAND succeeds.
wait_for() {
	local what=$1 secs=$2 i
	shift 2
	for ((i = 0; i < secs * 10; i++)); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	die "$what did not come up in ${secs}s (logs in $DIR/log)"
}

need() {
	local c
	for c in munged mungekey mariadbd mariadb-install-db mariadb slurmdbd slurmctld slurmd sacctmgr sbatch sinfo scontrol; do
		command -v "$c" >/dev/null 2>&1 || [[ -x /usr/sbin/$c ]] || die "$c is not installed; run: make deps (hack/deps.sh installs Debian's slurm and mariadb packages)"
	done
}

users() {
	local pair u
	# One useradd at a time across concurrent test beds.
	exec 9>/tmp/.hyperpod-portal-slurm-users.lock
	flock 9
	for pair in "${USERS[@]}"; do
		u=${pair##*:}
		id -u "$u" >/dev/null 2>&1 || useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$u"
	done
	exec 9>&-
}

# sacctmgr_wrapper writes DIR/bin/sacctmgr, which the tests find first on
# PATH (slurm.env): it runs every sacctmgr that writes (anything but show,
# list and dump) under one lock, so that the test bed's packages, which
# administer the one slurmdbd at once, write one after another, as a single
# administrator would. Slurm 22.05's slurmdbd (Debian 12's, here) reloads
# its whole user cache inside the transaction that adds an account
# (as_mysql_add_assocs, "We need to refresh the assoc_mgr_user_list"), from
# that transaction's view of the database: a user another session added
# meanwhile drops out of the cache while staying in the database. slurmdbd
# then treats that user as unknown ("couldn't get information for this
# user", is_user_any_coord), and with PrivateData=jobs, sacct shows them
# none of their own jobs. SchedMD removed the reload in 23.02.5 (commit
# 4b177b58d0, bug 16344); HyperPod's Slurm is 24.11
# (docs/platform-reference.md). Without the lock, 2026-12-05: one session
# adding and deleting accounts and another adding a user and running sacct
# as them, 40 rounds each, lost the user 9 and 10 times; with it, 0 and 0.
# It was make test's Slurm flake (ci38, ci45, ci50): a lane's user had no
# jobs in sacct, or a coordinator was missing after apply.
sacctmgr_wrapper() {
	local real
	real="$(command -v sacctmgr)"
	mkdir -p "$DIR/bin"
	cat >"$DIR/bin/sacctmgr" <<EOF
#!/bin/sh
# hack/testbed/slurm.sh (sacctmgr_wrapper): writes one at a time.
for a in "\$@"; do
	case "\$a" in
	-*) ;;
	show | list | dump) exec "$real" "\$@" ;;
	*) break ;;
	esac
done
exec flock "$SACCTMGR_LOCK" "$real" "\$@"
EOF
	chmod 755 "$DIR/bin" "$DIR/bin/sacctmgr"
}

up() {
	[[ $EUID -eq 0 ]] || die "the test bed's Slurm runs its daemons as root (make test runs as root here)"
	need
	[[ -f "$DIR/slurmctld.pid" ]] && alive "$(cat "$DIR/slurmctld.pid")" && die "already running in $DIR; run: $0 down $STATE"
	rm -rf "$DIR" "$ENV"
	mkdir -p "$DIR"/{munge,mysql,state,spool,log,dev}
	chmod 755 "$DIR"
	users
	local sock="$DIR/munge/munge.socket.2" dbport dbdport ctlport slurmdport cpus i
	PATH="$PATH:/usr/sbin"

	# munge: its own key and socket.
	mungekey --create --keyfile="$DIR/munge/munge.key"
	munged --force --socket="$sock" --key-file="$DIR/munge/munge.key" --log-file="$DIR/log/munged.log" \
		--pid-file="$DIR/munge/munged.pid" --seed-file="$DIR/munge/munged.seed"
	wait_for munged 10 test -S "$sock"

	# MariaDB: the accounting database, on 127.0.0.1 only.
	pick_port
	dbport=$PORT
	mariadb-install-db --no-defaults --datadir="$DIR/mysql/data" --user=root --auth-root-authentication-method=normal \
		--skip-test-db >"$DIR/log/mariadb-install.log" 2>&1 || { tail -20 "$DIR/log/mariadb-install.log" >&2; die "mariadb-install-db failed"; }
	setsid mariadbd --no-defaults --datadir="$DIR/mysql/data" --user=root --bind-address=127.0.0.1 --port="$dbport" \
		--socket="$DIR/mysql/mysqld.sock" --pid-file="$DIR/mysql/mysqld.pid" --log-error="$DIR/log/mariadb.log" \
		--skip-name-resolve --innodb-buffer-pool-size=64M --innodb-flush-log-at-trx-commit=0 --innodb-lock-wait-timeout=900 \
		</dev/null >/dev/null 2>&1 &
	wait_for MariaDB 60 mariadb --no-defaults -S "$DIR/mysql/mysqld.sock" -uroot -e 'SELECT 1'
	mariadb --no-defaults -S "$DIR/mysql/mysqld.sock" -uroot -e \
		"CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm-testbed'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"

	pick_port
	dbdport=$PORT
	pick_port
	ctlport=$PORT
	pick_port
	slurmdport=$PORT
	cpus=$(nproc)
	cat >"$DIR/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$sock
DbdHost=$(hostname -s)
DbdAddr=127.0.0.1
DbdPort=$dbdport
SlurmUser=root
PidFile=$DIR/slurmdbd.pid
LogFile=$DIR/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$dbport
StorageUser=slurm
StoragePass=slurm-testbed
StorageLoc=slurm_acct_db
PrivateData=jobs
EOF
	chmod 600 "$DIR/slurmdbd.conf"
	# AccountingStoragePass names the munge socket for the connections to
	# slurmdbd (slurm.conf(5): "...this can instead be used to specify the
	# munge socket to use"); AuthInfo's socket= serves the others.
	# PrivateData=jobs here and in slurmdbd.conf: a member sees only their
	# own jobs (squeue, scontrol) and job records (sacct, where the account's
	# coordinators see its records), as the portal's readiness page asks of
	# a cluster whose Studio users run as their own OS users (slurm.conf(5),
	# slurmdbd.conf(5) PrivateData; internal/provision slurmVisibilityCheck).
	cat >"$DIR/slurm.conf" <<EOF
ClusterName=$CLUSTER
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=$ctlport
SlurmdPort=$slurmdport
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$sock
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=$(hostname -s)
AccountingStoragePort=$dbdport
AccountingStoragePass=$sock
AccountingStorageEnforce=associations,limits,qos,safe
AccountingStorageTRES=gres/gpu
PrivateData=jobs
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
PriorityType=priority/multifactor
PreemptType=preempt/qos
PreemptMode=REQUEUE
NodeName=$NODE NodeHostname=$(hostname -s) NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=1000 Gres=gpu:$GPUS State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
	for ((i = 0; i < GPUS; i++)); do
		mknod "$DIR/dev/gpu$i" c 1 3
	done
	cat >"$DIR/gres.conf" <<EOF
AutoDetect=off
NodeName=$NODE Name=gpu File=$DIR/dev/gpu[0-$((GPUS - 1))]
EOF
	export SLURM_CONF="$DIR/slurm.conf"
	sacctmgr_wrapper

	slurmdbd
	wait_for slurmdbd 30 sacctmgr -n list cluster
	sacctmgr -i add cluster "$CLUSTER" >/dev/null
	slurmctld
	wait_for slurmctld 30 scontrol ping
	slurmd -N "$NODE"
	wait_for "slurmd ($NODE idle)" 30 bash -c "sinfo -h -n $NODE -o %T | grep -qx idle"

	{
		echo "PORTAL_TEST_SLURM_CONF=$DIR/slurm.conf"
		echo "PORTAL_TEST_SLURM_USERS=$(IFS=,; echo "${USERS[*]}")"
		echo "PORTAL_TEST_SLURM_NODE=$NODE"
		echo "PORTAL_TEST_SLURM_PARTITION=$PARTITION"
		echo "PORTAL_TEST_SLURM_GPUS=$GPUS"
		# The serialising sacctmgr (sacctmgr_wrapper) first; $PATH is
		# expanded by whoever sources the file.
		echo "PORTAL_TEST_SLURM_BIN=$DIR/bin"
		echo "PORTAL_TEST_SLURM_SACCTMGR_LOCK=$SACCTMGR_LOCK"
		echo "PATH=\"$DIR/bin:\$PATH\""
	} >"$ENV.tmp"
	mv -f "$ENV.tmp" "$ENV"
	log "up: cluster $CLUSTER, node $NODE ($GPUS GPUs), slurmctld 127.0.0.1:$ctlport, slurmdbd :$dbdport, MariaDB :$dbport; SLURM_CONF=$DIR/slurm.conf"
}

# alive PID: running, not a zombie (the daemons fork away from this
# script; where PID 1 does not reap, a dead one stays a zombie).
alive() {
	local st
	st="$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" || return 1
	[[ -n "$st" && "$st" != Z ]]
}

# stop PIDFILE: TERM, then KILL after 2 s (the state is thrown away).
stop() {
	local pid i
	[[ -f "$1" ]] || return 0
	pid="$(cat "$1" 2>/dev/null || true)"
	if [[ -n "$pid" ]] && alive "$pid"; then
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < 20; i++)); do
			alive "$pid" || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$1"
}

down() {
	rm -f "$ENV"
	[[ -d "$DIR" ]] || return 0
	# Jobs first, then the daemons, the database and munge last; then
	# whatever still runs with this run's SLURM_CONF in its environment
	# (job steps and their processes outlive slurmd), and nothing of
	# another test bed's Slurm.
	if [[ -f "$DIR/slurm.conf" ]] && [[ -f "$DIR/slurmctld.pid" ]]; then
		SLURM_CONF="$DIR/slurm.conf" timeout 10 scancel --quiet --state=PENDING,RUNNING,SUSPENDED --full -u root 2>/dev/null || true
		for pair in "${USERS[@]}"; do
			SLURM_CONF="$DIR/slurm.conf" timeout 10 scancel --quiet --full -u "${pair##*:}" 2>/dev/null || true
		done
	fi
	stop "$DIR/slurmd.pid"
	stop "$DIR/slurmctld.pid"
	stop "$DIR/slurmdbd.pid"
	stop "$DIR/mysql/mysqld.pid"
	stop "$DIR/munge/munged.pid"
	local p
	for p in /proc/[0-9]*; do
		grep -qzx "SLURM_CONF=$DIR/slurm.conf" "$p/environ" 2>/dev/null && kill -KILL "${p#/proc/}" 2>/dev/null || true
	done
	rm -rf "$DIR"
}

case "$cmd" in
up) up ;;
down) down ;;
*) die "unknown command $cmd (up|down)" ;;
esac
