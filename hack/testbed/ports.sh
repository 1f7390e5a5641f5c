# Free loopback ports for the test bed's servers; sourced by kube.sh,
# postgres.sh and slurm.sh (each defines die). Not run on its own.

USED_PORTS=()
PORT=

port_in_use() {
	if command -v ss >/dev/null 2>&1; then
		# Any TCP socket (listening, connected, TIME-WAIT) on that local port.
		[[ -n $(ss -Htan "( sport = :$1 )" 2>/dev/null) ]]
	else
		# bash alone: is something listening?
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
	fi
}

# pick_port sets PORT to a free loopback port in 20000-31999, below Linux's
# default ephemeral range (32768-60999) so outgoing connections never take
# it, and never one this script picked before (USED_PORTS: several picked
# before any server binds).
pick_port() {
	local i p
	for ((i = 0; i < 500; i++)); do
		p=$((20000 + (RANDOM * 32768 + RANDOM) % 12000))
		[[ " ${USED_PORTS[*]-} " == *" $p "* ]] && continue
		port_in_use "$p" && continue
		USED_PORTS+=("$p")
		PORT=$p
		return 0
	done
	die "found no free port"
}
