#!/usr/bin/env bash
# Load benchmark: the same simulated upstream behind (a) a bare
# httputil.ReverseProxy and Tollgate with budgets enforced on (b) the
# embedded store, (c) the Redis store reserving every request exactly and
# (d) the Redis store with budget leases, under wrk at 1 and 32
# connections, JSON and SSE, interleaved. Prints RPS, p50/p99 latency, the
# proxy's CPU time per request and Redis's, and each one's RPS ratio to the
# bare proxy and to the embedded store.
#
#   bench/run.sh            # 10 s per run
#   DURATION=30 bench/run.sh
#   MODES=sse CONNS=32 ROUNDS=5 EMBEDDED_ONLY=1 bench/run.sh
#                           # one cell, bare and embedded back to back five
#                           # times: the ratio's spread and median on a noisy box
#
# Needs wrk (apt-get install wrk) and redis-server. Everything listens on
# 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10}
command -v wrk >/dev/null || { echo "bench: wrk is not installed (apt-get install wrk)"; exit 1; }

bin=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$bin"' EXIT
go build -o "$bin/tollgate" ./cmd/tollgate
go build -o "$bin/bareproxy" ./bench/bareproxy

UP=127.0.0.1:18090 BARE=127.0.0.1:18081 TG=127.0.0.1:18082 TGR=127.0.0.1:18083 TGL=127.0.0.1:18084 RPORT=18379
redis-server --port $RPORT --bind 127.0.0.1 --save "" --appendonly no --dir "$bin" --daemonize yes --pidfile "$bin/redis.pid" >/dev/null
trap 'kill $(jobs -p) 2>/dev/null; kill $(cat "$bin/redis.pid") 2>/dev/null; wait 2>/dev/null; rm -rf "$bin"' EXIT
redis_store() { printf 'store:\n  kind: redis\n  redis:\n    addrs: ["127.0.0.1:%s"]\n    prefix: %s\n%b' $RPORT "$1" "$2"; cat bench/tollgate.yaml; }
redis_store exact "    exact: true\n" >"$bin/exact.yaml"
redis_store leased "" >"$bin/leased.yaml"
"$bin/tollgate" mock-upstream --listen $UP --reply-tokens 50 >/dev/null &
"$bin/bareproxy" --listen $BARE --upstream http://$UP 2>/dev/null &
bare_pid=$!
BENCH_LISTEN=$TG BENCH_UPSTREAM=http://$UP/v1 "$bin/tollgate" serve --config bench/tollgate.yaml 2>/dev/null &
tg_pid=$!
BENCH_LISTEN=$TGR BENCH_UPSTREAM=http://$UP/v1 "$bin/tollgate" serve --config "$bin/exact.yaml" 2>/dev/null &
tgr_pid=$!
BENCH_LISTEN=$TGL BENCH_UPSTREAM=http://$UP/v1 "$bin/tollgate" serve --config "$bin/leased.yaml" 2>/dev/null &
tgl_pid=$!
for addr in $UP $BARE $TG $TGR $TGL; do
  for _ in $(seq 50); do curl -s -o /dev/null "http://$addr/" && break; sleep 0.1; done
  curl -s -o /dev/null "http://$addr/" || { echo "bench: nothing answers on $addr"; exit 1; }
done
redis_pid=$(cat "$bin/redis.pid")

json='{"model":"gpt-4o-mini","max_tokens":50,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Summarise the plot of Hamlet in three sentences."}]}'
sse=${json/\"max_tokens\"/\"stream\":true,\"max_tokens\"}
tick=$(getconf CLK_TCK)

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# run NAME PID ADDR KEY BODY CONNS → "rps p50_ms p99_ms cpu_us_per_req redis_cpu_us_per_req"
run() {
  local pid=$2 addr=$3 key=$4 body=$5 conns=$6 threads=1
  [ "$conns" -gt 1 ] && threads=2
  BENCH_KEY=$key BENCH_BODY=$body wrk -t1 -c"$conns" -d2s -s bench/post.lua "http://$addr/v1/chat/completions" >/dev/null # warm up
  local before after rbefore rafter out
  before=$(cpu_ticks "$pid") rbefore=$(cpu_ticks "$redis_pid")
  out=$(BENCH_KEY=$key BENCH_BODY=$body wrk -t$threads -c"$conns" -d"${DURATION}s" --latency -s bench/post.lua "http://$addr/v1/chat/completions")
  after=$(cpu_ticks "$pid") rafter=$(cpu_ticks "$redis_pid")
  if echo "$out" | grep -q "Non-2xx"; then echo "bench: non-2xx responses from $1:"; echo "$out"; exit 1; fi
  local reqs rps p50 p99
  reqs=$(echo "$out" | awk '/requests in/ {print $1}')
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  p50=$(echo "$out" | awk '$1=="50%" {print $2}')
  p99=$(echo "$out" | awk '$1=="99%" {print $2}')
  echo "$rps $(to_ms "$p50") $(to_ms "$p99") $(awk -v t=$((after - before)) -v r=$((rafter - rbefore)) -v hz="$tick" -v n="$reqs" 'BEGIN {printf "%.1f %.1f", t / hz * 1e6 / n, r / hz * 1e6 / n}')"
}
to_ms() { awk -v v="$1" 'BEGIN { if (v ~ /us$/) { sub(/us/, "", v); v /= 1000 } else if (v ~ /ms$/) { sub(/ms/, "", v) } else if (v ~ /s$/) { sub(/s/, "", v); v *= 1000 }; printf "%.3f", v }'; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); go $(go env GOVERSION); $(redis-server --version | cut -d' ' -f1-3); ${DURATION}s per run"
printf '%-5s %-5s %-16s | %9s %8s %8s %9s %10s | %7s %7s\n' mode conns proxy rps "p50 ms" "p99 ms" "cpu us/r" "redis us/r" "x bare" "x embed"
ratios=""
for mode in ${MODES:-json sse}; do
  body=$json; [ $mode = sse ] && body=$sse
  for conns in ${CONNS:-1 32}; do
    for round in $(seq "${ROUNDS:-1}"); do
      read -r brps bp50 bp99 bcpu _ <<<"$(run bare $bare_pid $BARE '' "$body" $conns)"
      read -r erps ep50 ep99 ecpu _ <<<"$(run embedded $tg_pid $TG tg-bench-key "$body" $conns)"
      row() { awk -v m=$mode -v c=$conns -v p="$1" -v r="$2" -v a="$3" -v b="$4" -v u="$5" -v d="$6" -v br="$brps" -v er="$erps" 'BEGIN {
        printf "%-5s %-5s %-16s | %9.0f %8.3f %8.3f %9.1f %10s | %7.2f %7.2f\n", m, c, p, r, a, b, u, d, r/br, r/er }'; }
      row "bare proxy" "$brps" "$bp50" "$bp99" "$bcpu" "-"
      row "tollgate embed" "$erps" "$ep50" "$ep99" "$ecpu" "-"
      ratios="$ratios $mode/$conns:$(awk -v e="$erps" -v b="$brps" 'BEGIN {printf "%.3f", e/b}')"
      [ -n "${EMBEDDED_ONLY:-}" ] && continue
      read -r xrps xp50 xp99 xcpu xred <<<"$(run redis-exact $tgr_pid $TGR tg-bench-key "$body" $conns)"
      read -r lrps lp50 lp99 lcpu lred <<<"$(run redis-leased $tgl_pid $TGL tg-bench-key "$body" $conns)"
      row "tollgate redis" "$xrps" "$xp50" "$xp99" "$xcpu" "$xred"
      row "tollgate leased" "$lrps" "$lp50" "$lp99" "$lcpu" "$lred"
    done
  done
done
# With ROUNDS > 1: each cell's embedded/bare RPS ratios, round by round
# (each round runs the pair back to back), and their median.
if [ "${ROUNDS:-1}" -gt 1 ]; then
  echo "embedded / bare, by round, and the median:"
  for cell in $(echo $ratios | tr ' ' '\n' | cut -d: -f1 | sort -u); do
    vals=$(echo $ratios | tr ' ' '\n' | awk -F: -v c="$cell" '$1 == c {print $2}')
    median=$(echo "$vals" | sort -n | awk '{v[NR] = $1} END {print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}')
    printf '%-8s %s  median %.2f\n' "$cell" "$(echo $vals)" "$median"
  done
fi
