#!/usr/bin/env bash
# Load-independent cost of one request in the proxy process: instructions
# it executes per JSON request (valgrind --tool=callgrind, CGO_ENABLED=0),
# for the bare httputil.ReverseProxy and for Tollgate on the embedded
# store, on the Redis store with budget leases and on the Redis store
# reserving every request exactly (bench/tollgate.yaml's limits), and on the
# embedded store for an OpenAI chat request translated for Claude. Each
# proxy runs under callgrind with instrumentation off; after a warm-up,
# instructions are counted over N requests sent one after another on one
# connection (one curl, N URLs), then over an idle window as long, and the idle
# count (clock-driven loops: lease flushes, sweeper, snapshots, which
# valgrind's ~50x slowdown makes weigh far more per request than at full
# speed) is subtracted: (I(requests) - I(idle)) / N; "without GC" is the
# same less the garbage collector's instructions, and "gc cycles" how
# many collections the window held (GODEBUG=gctrace=1). Tollgate's heap
# (server.gc_percent 400) is collected about every 3,000 requests, each
# collection some 30M instructions here: a window of 1,000 holds one or
# none, and the count moves by ~10k a request between runs of the same
# code. Compare Tollgate's JSON rows over N=10000. The runtime's own
# clock-driven work while requests run (sysmon, netpoll, the scheduler's
# locks and work stealing) grows with the window's wall time, which the
# idle window does not take out: a window of 10,000 requests that took 59 s
# instead of 40 s (a busier host) counted ~1.7k more a request, one of 93 s
# ~4.3k more; the "seconds" column shows it. Run nothing else meanwhile,
# and compare runs of like seconds. redis-server is not
# counted here (bench/redis-callgrind.sh counts it). cpu.rdtscp=off: the Go
# runtime reads the clock with RDTSCP where the CPU has it, an instruction
# valgrind 3.19 does not know (the process dies of SIGILL at start).
#
#   bench/gateway-callgrind.sh        # N=1000 after 300 warm-up requests
#   ROWS="bare embedded" bench/gateway-callgrind.sh   # some rows only
#   (embedded-all-headers and embedded-all-headers-sse: server.limit_headers: all)
#   ROWS="bare-sse translated-sse" bench/gateway-callgrind.sh  # a stream from Claude, to OpenAI's wire
#   KEEP=/tmp/cg bench/gateway-callgrind.sh           # keep each row's profile there
#   MAX_TOKENS=256 bench/gateway-callgrind.sh         # a cap above the 50-token reply
#   PROVIDER_HEADERS=no bench/gateway-callgrind.sh    # answers without the providers' request
#                       # ids, organisation and rate limits (the simulator before 5a4716a)
#   CHUNK_DELAY=5ms N=300 WARM=100 ROWS="bare-sse embedded-sse" bench/gateway-callgrind.sh
#                       # stream chunks 5 ms apart, as a model's tokens come: each
#                       # arrives alone, one read each. Without a delay, how many
#                       # chunks one read brings depends on how fast the proxy
#                       # runs (under valgrind, slowly), and SSE counts move by
#                       # a few percent from run to run.
#
# Needs valgrind, curl and redis-server. Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-1000} WARM=${WARM:-300}
dir=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null; [ -f "$dir/redis.pid" ] && kill $(cat "$dir/redis.pid"); wait 2>/dev/null; rm -rf "$dir"' EXIT
CGO_ENABLED=0 go build -o "$dir/tollgate" ./cmd/tollgate
CGO_ENABLED=0 go build -o "$dir/bareproxy" ./bench/bareproxy
UP=127.0.0.1:18190 PX=127.0.0.1:18191 RPORT=18479
redis-server --port $RPORT --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" --daemonize yes --pidfile "$dir/redis.pid" >/dev/null
redis_store() { printf 'store:\n  kind: redis\n  redis:\n    addrs: ["127.0.0.1:%s"]\n    prefix: %s\n%b' $RPORT "$1" "$2"; cat bench/tollgate.yaml; }
redis_store exact "    exact: true\n" >"$dir/exact.yaml"
redis_store leased "" >"$dir/leased.yaml"
# The embedded store with every limit header on allowed responses too
# (server.limit_headers: all): the X- duplicates' cost, side by side.
{ printf 'server:\n  limit_headers: all\n'; cat bench/tollgate.yaml; } >"$dir/all-headers.yaml"
sim=(--chunk-delay "${CHUNK_DELAY:-0s}")
[ "${PROVIDER_HEADERS:-yes}" = no ] && sim+=(--no-provider-headers)
"$dir/tollgate" mock-upstream --listen $UP --reply-tokens 50 "${sim[@]}" >/dev/null &
body() { printf '{"model":"%s",%s"max_tokens":'"${MAX_TOKENS:-50}"',"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Summarise the plot of Hamlet in three sentences."}]}' "$1" "${2:-}"; }
json=$(body gpt-4o-mini)

# send KEY COUNT: COUNT requests one after another on one connection;
# prints how many answered 200.
send() {
  local auth=()
  [ -n "$1" ] && auth=(-H "Authorization: Bearer $1")
  awk -v u="http://$PX/v1/chat/completions" -v n="$2" 'BEGIN {for (i = 0; i < n; i++) printf "url = \"%s\"\n", u}' >"$dir/urls"
  curl -s -K "$dir/urls" -X POST -H 'Content-Type: application/json' "${auth[@]}" -d "$json" -w '\n%{http_code}\n' 2>/dev/null | grep -c '^200$' || true
}

total() { awk '/^summary:|^totals:/ {print $2; exit}' "$1"; }

# gc FILE: the instructions of FILE spent in the garbage collector (marking,
# sweeping, scanning). How many GC cycles fall in a window of 1,000
# requests varies from run to run by more than the request path's own work,
# so the table shows the count without them too.
gc() {
  callgrind_annotate --auto=no --threshold=100 "$1" 2>/dev/null | awk '
    /PROGRAM TOTALS/ {next}
    /^ *[0-9,]+ \(/ && /mgcmark|mgcsweep|mgc\.go|tryDeferToSpanScan|scanObject|typePointers|greentea|mgcwork|mspanset|gcDrain|markBits|findObject|mgcpacer|mbitmap/ {
      v = $1; gsub(",", "", v); s += v }
    END {print s + 0}'
}

# count NAME KEY CMD...: runs CMD (the proxy, on $PX) under callgrind and
# prints its instructions per request.
count() {
  local name=$1 key=$2; shift 2
  rm -f "$dir"/cg.out*
  BENCH_LISTEN=$PX BENCH_UPSTREAM=http://$UP/v1 GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off,gctrace=1 GOMAXPROCS=1 \
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$dir/cg.out" "$@" >/dev/null 2>"$dir/gctrace" &
  local pid=$!
  for _ in $(seq 600); do curl -s -o /dev/null "http://$PX/" && break; sleep 0.5; done
  send "$key" "$WARM" >/dev/null
  callgrind_control -i on "$pid" >/dev/null 2>&1
  callgrind_control -z "$pid" >/dev/null 2>&1
  local t0 t1 n gc0 gc1
  gc0=$(grep -c '^gc [0-9]* @' "$dir/gctrace" || true)
  t0=$(date +%s.%N)
  n=$(send "$key" "$N")
  t1=$(date +%s.%N)
  callgrind_control -d "$pid" >/dev/null 2>&1
  gc1=$(grep -c '^gc [0-9]* @' "$dir/gctrace" || true)
  if [ "$n" != "$N" ]; then echo "bench: $name answered $n of $N requests with 200" >&2; exit 1; fi
  sleep "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')"
  callgrind_control -d "$pid" >/dev/null 2>&1
  kill -9 "$pid"; wait "$pid" 2>/dev/null || true
  local busy idle bf idlef
  bf=$(ls "$dir"/cg.out.* | sort -t. -k3 -n | sed -n 1p)
  idlef=$(ls "$dir"/cg.out.* | sort -t. -k3 -n | sed -n 2p)
  busy=$(total "$bf") idle=$(total "$idlef")
  if [ -n "${KEEP:-}" ]; then cp "$bf" "$KEEP/$name.callgrind"; fi # for callgrind_annotate
  awk -v busy="$busy" -v idle="$idle" -v bgc="$(gc "$bf")" -v igc="$(gc "$idlef")" -v n="$n" -v s="$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" -v cycles=$((gc1 - gc0)) 'BEGIN {
    printf "%.0f %d %.0f %.0f %.1f %.0f %d\n", (busy - idle) / n, n, busy / n, idle / n, s, (busy - bgc - idle + igc) / n, cycles }'
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(go version | cut -d' ' -f3); N=$N after $WARM; provider headers: ${PROVIDER_HEADERS:-yes}; chunk delay: ${CHUNK_DELAY:-0s}"
printf '%-26s %12s %8s %14s %14s %8s %8s %14s %8s %10s\n' proxy "instr/req" requests "busy/req" "idle/req" seconds "x bare" "without GC" "x bare" "gc cycles"
bare="" bare_ngc="" bare_sse="" bare_sse_ngc=""
for p in ${ROWS:-bare embedded embedded-all-headers redis-leased redis-exact translated bare-sse embedded-sse embedded-all-headers-sse}; do
  json=$(body gpt-4o-mini)
  case $p in
    bare) r=$(count $p "" "$dir/bareproxy" --listen $PX --upstream http://$UP) ;;
    embedded) r=$(count $p tg-bench-key "$dir/tollgate" serve --config bench/tollgate.yaml) ;;
    embedded-all-headers) r=$(count $p tg-bench-key "$dir/tollgate" serve --config "$dir/all-headers.yaml") ;;
    # The same request streamed: 27 chunks of text, one of usage and
    # [DONE]. Its rows compare with bare-sse.
    bare-sse) json=$(body gpt-4o-mini '"stream":true,') r=$(count $p "" "$dir/bareproxy" --listen $PX --upstream http://$UP) ;;
    embedded-sse) json=$(body gpt-4o-mini '"stream":true,') r=$(count $p tg-bench-key "$dir/tollgate" serve --config bench/tollgate.yaml) ;;
    embedded-all-headers-sse) json=$(body gpt-4o-mini '"stream":true,') r=$(count $p tg-bench-key "$dir/tollgate" serve --config "$dir/all-headers.yaml") ;;
    redis-leased) r=$(count $p tg-bench-key "$dir/tollgate" serve --config "$dir/leased.yaml") ;;
    redis-exact) r=$(count $p tg-bench-key "$dir/tollgate" serve --config "$dir/exact.yaml") ;;
    # An OpenAI chat request for Claude, embedded store: translated to
    # Anthropic's Messages and its answer back to OpenAI's format.
    translated) json=$(body claude-sonnet-4-5) r=$(count $p tg-bench-key "$dir/tollgate" serve --config bench/tollgate.yaml) ;;
    # The same streamed: Anthropic's events read and written as OpenAI's
    # chunks. Not in the default rows (its ratio to bare-sse compares
    # different streams: Anthropic's events against OpenAI's chunks).
    translated-sse) json=$(body claude-sonnet-4-5 '"stream":true,') r=$(count $p tg-bench-key "$dir/tollgate" serve --config bench/tollgate.yaml) ;;
    *) echo "bench: no row $p" >&2; exit 1 ;;
  esac
  read -r per n busy idle secs ngc cycles <<<"$r"
  if [ "${p%-sse}" != "$p" ]; then
    bare_sse=${bare_sse:-$per} bare_sse_ngc=${bare_sse_ngc:-$ngc}
    base=$bare_sse base_ngc=$bare_sse_ngc
  else
    bare=${bare:-$per} bare_ngc=${bare_ngc:-$ngc}
    base=$bare base_ngc=$bare_ngc
  fi
  awk -v p="$p" -v per="$per" -v n="$n" -v busy="$busy" -v idle="$idle" -v s="$secs" -v bare="$base" -v ngc="$ngc" -v bngc="$base_ngc" -v cycles="$cycles" 'BEGIN {
    printf "%-26s %12.0f %8d %14.0f %14.0f %8.1f %8.2f %14.0f %8.2f %10d\n", p, per, n, busy, idle, s, per / bare, ngc, ngc / bngc, cycles }'
done
