#!/usr/bin/env bash
# Measures the figures quoted in closing notes: binary size, start-up time
# to the first 200 on /readyz, and resident memory after a login through the
# built-in identity provider. Loopback only; bounded; stops what it starts.
#   bash bench/startup.sh [runs]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
make -s build >/dev/null
size=$(stat -c %s bin/portal)
awk -v s="$size" 'BEGIN { printf "binary: bin/portal %.1f MiB (%d bytes)\n", s/1048576, s }'

work=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

port_free() { ! (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null; }
total=0
for i in $(seq 1 "$runs"); do
  port=$((20000 + RANDOM % 20000)); while ! port_free $port; do port=$((port + 1)); done
  rm -rf "$work/data"; mkdir -p "$work/data"
  start=$(date +%s%N)
  # --demo-usage as make run: the demo seed runs in the background, as it always did here.
  ./bin/portal serve --dev --demo-usage --listen 127.0.0.1:$port --db "$work/data/portal.db" \
    --session-key-file "$work/data/session.key" >"$work/out.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 500); do
    if curl -fs -o /dev/null "http://127.0.0.1:$port/readyz"; then break; fi
    sleep 0.01
  done
  end=$(date +%s%N)
  ms=$(( (end - start) / 1000000 ))
  total=$((total + ms))
  echo "run $i: first 200 on /readyz after ${ms} ms (fresh database, migrations included)"
  if [ "$i" -lt "$runs" ]; then kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; fi
done
echo "mean start-up to first 200: $((total / runs)) ms over $runs runs"

# Log in as owner.red through the dev IdP with curl, then read RSS.
b=http://127.0.0.1:$port jar=$work/jar
loginpage=$(curl -fsL -c "$jar" -b "$jar" "$b/login")
id=$(grep -o 'name="authRequestID" value="[^"]*"' <<<"$loginpage" | head -1 | sed 's/.*value="//;s/"$//')
home=$(curl -fsL -c "$jar" -b "$jar" -d "authRequestID=$id&username=owner.red" "$b/dev-idp/login")
grep -q 'owner.red@example.test' <<<"$home" || { echo "login failed"; exit 1; }
for _ in $(seq 1 50); do curl -fs -o /dev/null -b "$jar" "$b/teams/red"; done
rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
hwm=$(awk '/VmHWM/ {print $2}' /proc/$pid/status)
echo "after login and 50 page views: RSS $((rss / 1024)) MiB (peak $((hwm / 1024)) MiB)"
