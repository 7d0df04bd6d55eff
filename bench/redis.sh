#!/usr/bin/env bash
# Redis store throughput: reserve+settle pairs per second at 1 and 64
# concurrent callers (go test -bench, its own redis-server), next to
# redis-benchmark of a plain EVALSHA ("return 1") on a server started the
# same way, in the same run. Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v redis-benchmark >/dev/null || { echo "bench: redis-benchmark is not installed (apt-get install redis-tools)"; exit 1; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(redis-server --version | cut -d' ' -f1-3)"
echo "== Tollgate reserve (5 limits) + settle, one pair per op"
go test -run XXX -bench ReserveSettle -benchtime 5s -cpu 1,64 ./budget/redisstore/ | grep -E '^Benchmark' |
  awk '{ printf "%-28s %10s ns/pair  %8.0f pairs/s  %8.0f Redis calls/s\n", $1, $3, 1e9/$3, 2e9/$3 }'

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
dir=$(mktemp -d)
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" --daemonize yes --pidfile "$dir/pid" >/dev/null
trap 'kill $(cat "$dir/pid") 2>/dev/null; rm -rf "$dir"' EXIT
sleep 0.3
sha=$(redis-cli -p "$port" SCRIPT LOAD "return 1")
echo "== redis-benchmark EVALSHA (return 1), same machine"
for c in 1 64; do
  printf 'clients=%-3s ' "$c"
  redis-benchmark -p "$port" -c "$c" -n 200000 -q EVALSHA "$sha" 0 | tr '\r' '\n' | grep -E 'requests per second' | tail -1
done
