#!/usr/bin/env bash
# Load-independent Redis cost of one gateway request: instructions
# redis-server executes (valgrind --tool=callgrind) per reserve+settle pair
# of bench/tollgate.yaml's limits (BenchmarkRedisCost, and
# BenchmarkRedisCostLeased with budget leases), beside one trivial
# EVALSHA ("return 1", sent one at a time by redis-benchmark -c 1 -P 1).
# Each figure is (I(N2) - I(N1)) / (N2 - N1) over two fresh servers, so
# start-up and warm-up cancel out.
#
#   bench/redis-callgrind.sh          # N1=500, N2=2500
#
# Needs valgrind and redis-tools. Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
N1=${N1:-500} N2=${N2:-2500}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go test -c -o "$dir/redisstore.test" ./budget/redisstore/

# instructions PORT-FILE-PREFIX CMD...: runs CMD against a fresh
# redis-server under callgrind and prints the instructions it executed.
instructions() {
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" \
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" >/dev/null 2>&1 &
  local pid=$!
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
  PORT=$port "$@" >/dev/null
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  wait "$pid" 2>/dev/null || true
  awk '/^summary:|^totals:/ {print $2; exit}' "$dir/cg.out"
}
pairs() { TOLLGATE_BENCH_REDIS=127.0.0.1:$PORT "$dir/redisstore.test" -test.run XXX -test.bench "RedisCost$2\$" -test.benchtime "${1}x"; }
trivial() {
  local sha; sha=$(redis-cli -p "$PORT" SCRIPT LOAD "return 1")
  redis-benchmark -p "$PORT" -c 1 -P 1 -n "$1" -q EVALSHA "$sha" 0
}
export -f pairs trivial; export dir

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(redis-server --version | cut -d' ' -f1-3)"
t1=$(instructions bash -c "trivial $N1") t2=$(instructions bash -c "trivial $N2")
echo "redis-server instructions per trivial EVALSHA: $(( (t2 - t1) / (N2 - N1) ))"
# BenchmarkRedisCost runs N pairs and then N trivial scripts (and one of each first).
for mode in "" Leased; do
  p1=$(instructions bash -c "pairs $N1 $mode") p2=$(instructions bash -c "pairs $N2 $mode")
  awk -v p1="$p1" -v p2="$p2" -v t1="$t1" -v t2="$t2" -v n=$((N2 - N1)) -v mode="${mode:-exact}" 'BEGIN {
    t = (t2 - t1) / n; p = (p2 - p1) / n - t
    printf "redis-server instructions per reserve+settle pair, %s: %.0f (%.2fx the trivial EVALSHA)\n", mode, p, p / t }'
done
