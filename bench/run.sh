#!/usr/bin/env bash
# Load benchmark: the same simulated upstream behind (a) a bare
# httputil.ReverseProxy and (b) Tollgate with budgets enforced, under wrk at
# 1 and 32 connections, JSON and SSE. Prints RPS, p50/p99 latency and the
# proxy's CPU time per request, and Tollgate's ratios to the bare proxy.
#
#   bench/run.sh            # 10 s per run
#   DURATION=30 bench/run.sh
#
# Needs wrk (apt-get install wrk). Everything listens on 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10}
command -v wrk >/dev/null || { echo "bench: wrk is not installed (apt-get install wrk)"; exit 1; }

bin=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$bin"' EXIT
go build -o "$bin/tollgate" ./cmd/tollgate
go build -o "$bin/bareproxy" ./bench/bareproxy

UP=127.0.0.1:18090 BARE=127.0.0.1:18081 TG=127.0.0.1:18082
"$bin/tollgate" mock-upstream --listen $UP --reply-tokens 50 >/dev/null &
"$bin/bareproxy" --listen $BARE --upstream http://$UP 2>/dev/null &
bare_pid=$!
BENCH_LISTEN=$TG BENCH_UPSTREAM=http://$UP/v1 "$bin/tollgate" serve --config bench/tollgate.yaml 2>/dev/null &
tg_pid=$!
for addr in $UP $BARE $TG; do
  for _ in $(seq 50); do curl -s -o /dev/null "http://$addr/" && break; sleep 0.1; done
done

json='{"model":"gpt-4o-mini","max_tokens":50,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Summarise the plot of Hamlet in three sentences."}]}'
sse=${json/\"max_tokens\"/\"stream\":true,\"max_tokens\"}
tick=$(getconf CLK_TCK)

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# run NAME PID ADDR KEY BODY CONNS → "rps p50_ms p99_ms cpu_us_per_req"
run() {
  local pid=$2 addr=$3 key=$4 body=$5 conns=$6 threads=1
  [ "$conns" -gt 1 ] && threads=2
  BENCH_KEY=$key BENCH_BODY=$body wrk -t1 -c"$conns" -d2s -s bench/post.lua "http://$addr/v1/chat/completions" >/dev/null # warm up
  local before after out
  before=$(cpu_ticks "$pid")
  out=$(BENCH_KEY=$key BENCH_BODY=$body wrk -t$threads -c"$conns" -d"${DURATION}s" --latency -s bench/post.lua "http://$addr/v1/chat/completions")
  after=$(cpu_ticks "$pid")
  if echo "$out" | grep -q "Non-2xx"; then echo "bench: non-2xx responses from $1:"; echo "$out"; exit 1; fi
  local reqs rps p50 p99
  reqs=$(echo "$out" | awk '/requests in/ {print $1}')
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  p50=$(echo "$out" | awk '$1=="50%" {print $2}')
  p99=$(echo "$out" | awk '$1=="99%" {print $2}')
  echo "$rps $(to_ms "$p50") $(to_ms "$p99") $(awk -v t=$((after - before)) -v hz="$tick" -v n="$reqs" 'BEGIN {printf "%.1f", t / hz * 1e6 / n}')"
}
to_ms() { awk -v v="$1" 'BEGIN { if (v ~ /us$/) { sub(/us/, "", v); v /= 1000 } else if (v ~ /ms$/) { sub(/ms/, "", v) } else if (v ~ /s$/) { sub(/s/, "", v); v *= 1000 }; printf "%.3f", v }'; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); go $(go env GOVERSION); ${DURATION}s per run"
printf '%-6s %-5s | %10s %9s %9s %9s | %10s %9s %9s %9s | %7s %8s %8s %7s\n' mode conns "bare rps" "p50 ms" "p99 ms" "cpu us/r" "tg rps" "p50 ms" "p99 ms" "cpu us/r" "rps x" "p50 +ms" "p99 +ms" "cpu x"
for mode in json sse; do
  body=$json; [ $mode = sse ] && body=$sse
  for conns in 1 32; do
    read -r brps bp50 bp99 bcpu <<<"$(run bare $bare_pid $BARE '' "$body" $conns)"
    read -r trps tp50 tp99 tcpu <<<"$(run tollgate $tg_pid $TG tg-bench-key "$body" $conns)"
    awk -v m=$mode -v c=$conns -v br="$brps" -v b5="$bp50" -v b9="$bp99" -v bc="$bcpu" -v tr="$trps" -v t5="$tp50" -v t9="$tp99" -v tc="$tcpu" 'BEGIN {
      printf "%-6s %-5s | %10.0f %9.3f %9.3f %9.1f | %10.0f %9.3f %9.3f %9.1f | %7.2f %8.3f %8.3f %7.2f\n", m, c, br, b5, b9, bc, tr, t5, t9, tc, tr/br, t5-b5, t9-b9, tc/bc }'
  done
done
