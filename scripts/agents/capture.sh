#!/usr/bin/env bash
# capture.sh: record the HTTP requests that real LLM clients send, as test
# fixtures for the gateway's request allow-list.
#
# For each client it installs the client from npm into a private prefix
# (never global), starts `tollgate mock-upstream` and capture-proxy.mjs in
# front of it, runs the client headless against the proxy (in a throw-away
# HOME and working directory, with a timeout), then turns what the proxy
# recorded into fixtures under internal/e2e/testdata/clients/<client>/.
#
#   scripts/agents/capture.sh                    # every client
#   scripts/agents/capture.sh claude-code codex  # some of them
#
# Clients: claude-code codex gemini-cli opencode ai-sdk langchain openai-node
# anthropic-node google-genai.
#
# Environment:
#   CAPTURE_WORK     scratch directory (default /tmp/tollgate-capture): npm
#                    prefixes, sandboxes, raw recordings, logs
#   CAPTURE_PREFIX   where the npm prefixes go (default $CAPTURE_WORK/prefix);
#                    an installed client is reused unless CAPTURE_REINSTALL=1
#   CAPTURE_TIMEOUT  seconds one client run may take (default 150)
#   CAPTURE_FIXTURES where fixtures go (default
#                    <repo>/internal/e2e/testdata/clients); CAPTURE_FIXTURES=
#                    "" skips writing them
#   TOLLGATE_BIN     a built tollgate (default: built to $CAPTURE_WORK/tollgate)
#
# Nothing is sent anywhere but 127.0.0.1: every run has HTTP(S)_PROXY set to
# a closed local port (with NO_PROXY for 127.0.0.1/localhost) so that any
# telemetry, update check or other traffic a client tries on its own fails at
# once instead of leaving the machine, and the clients' own switches for
# telemetry and non-essential traffic are set.
#
# Raw recordings stay in $CAPTURE_WORK/raw/<client>/<NN>-<case>/ with the
# client's stdout/stderr and exit code (run.json); $CAPTURE_WORK/runs.jsonl
# lists every run. Next to this script: fixtures.mjs writes the fixtures
# (and their README) and the analysis ($CAPTURE_WORK/analysis.{json,md});
# scripted-upstream.mjs scripts the first tool call of the Claude Code cases
# whose tool would refuse the simulator's sampled arguments; mcp-server.mjs
# is the MCP server of the MCP cases; sdk/*.mjs are the SDK scripts.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
WORK=${CAPTURE_WORK:-/tmp/tollgate-capture}
PREFIX=${CAPTURE_PREFIX:-$WORK/prefix}
RAW=$WORK/raw
TIMEOUT=${CAPTURE_TIMEOUT:-150}
FIXTURES=${CAPTURE_FIXTURES-$ROOT/internal/e2e/testdata/clients}
UP_ADDR=127.0.0.1:18300
PROXY_ADDR=127.0.0.1:18301
PROXY=http://$PROXY_ADDR
KEY=sk-tollgate-capture-0000
BLACKHOLE=http://127.0.0.1:9 # nothing listens: outside traffic fails fast
PNG_1X1=iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==
NODE=$(command -v node)
export PATH=/usr/local/go/bin:$PATH

ALL_CLIENTS=(claude-code codex gemini-cli opencode ai-sdk langchain openai-node anthropic-node google-genai)
if [ $# -gt 0 ]; then CLIENTS=("$@"); else CLIENTS=("${ALL_CLIENTS[@]}"); fi

mkdir -p "$WORK" "$PREFIX" "$RAW"
LOG=$WORK/capture.log
say() { echo "[capture] $*" | tee -a "$LOG" >&2; }

# ---------------------------------------------------------------- install

# install NAME PKG... installs PKGs into $PREFIX/NAME unless already there,
# and writes their installed versions to $PREFIX/NAME/versions.json.
install() {
  local name=$1
  shift
  local dir=$PREFIX/$name
  mkdir -p "$dir"
  local missing=0 p
  for p in "$@"; do
    local bare=$p
    [[ $bare == @*/*@* ]] && bare=${bare%@*}
    [[ $bare != @* && $bare == *@* ]] && bare=${bare%@*}
    [ -f "$dir/node_modules/$bare/package.json" ] || missing=1
  done
  if [ "$missing" = 1 ] || [ "${CAPTURE_REINSTALL:-0}" = 1 ]; then
    say "npm install --prefix $dir $*"
    (cd "$dir" && npm install --no-fund --no-audit --prefix "$dir" "$@") >"$dir/install.log" 2>&1 ||
      say "npm install for $name failed (see $dir/install.log)"
  fi
  (cd "$dir" && npm ls --prefix "$dir" --depth=0 --json >"$dir/versions.json" 2>/dev/null) || true
}

# ---------------------------------------------------------------- services

UP_PID=
PROXY_PID=

wait_port() { # wait_port HOST:PORT
  local i
  for i in $(seq 1 100); do
    (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

start_upstream() {
  local bin=${TOLLGATE_BIN:-$WORK/tollgate}
  if [ -z "${TOLLGATE_BIN:-}" ]; then
    say "building tollgate"
    if ! (cd "$ROOT" && go build -o "$bin" ./cmd/tollgate) >>"$LOG" 2>&1; then
      # The work tree may be mid-edit: build the last commit instead, from
      # an export (git state is only read).
      say "go build of the work tree failed; building HEAD from git archive"
      rm -rf "$WORK/head-src" && mkdir -p "$WORK/head-src"
      (cd "$ROOT" && git archive HEAD | tar -x -C "$WORK/head-src") &&
        (cd "$WORK/head-src" && go build -o "$bin" ./cmd/tollgate) >>"$LOG" 2>&1 ||
        { [ -x "$bin" ] && say "using the tollgate built earlier at $bin"; } ||
        { say "go build failed"; exit 1; }
    fi
  fi
  "$bin" mock-upstream --listen "$UP_ADDR" --api-key "$KEY" >"$WORK/mock-upstream.log" 2>&1 &
  UP_PID=$!
  wait_port "$UP_ADDR" || { say "mock-upstream did not start"; exit 1; }
  say "mock-upstream pid $UP_PID on $UP_ADDR"
}

# The proxy forwards to NEXT: the simulator, or for a scripted case the
# scripted upstream in front of it.
NEXT=$UP_ADDR
SCRIPTED_ADDR=127.0.0.1:18302
SCRIPTED_PID=

start_proxy() { # start_proxy OUTDIR
  "$NODE" "$HERE/capture-proxy.mjs" --listen "$PROXY_ADDR" --upstream "http://$NEXT" --out "$1" --log "$1/proxy.log" &
  PROXY_PID=$!
  wait_port "$PROXY_ADDR" || say "capture-proxy did not start"
}

stop_proxy() {
  if [ -n "$PROXY_PID" ]; then
    kill "$PROXY_PID" 2>/dev/null
    wait "$PROXY_PID" 2>/dev/null
    PROXY_PID=
  fi
}

# scripted TOOL ARGS: the next runs' first Anthropic turn calls TOOL with
# ARGS (see scripted-upstream.mjs); unscripted goes back to the simulator.
scripted() {
  "$NODE" "$HERE/scripted-upstream.mjs" --listen "$SCRIPTED_ADDR" --upstream "http://$UP_ADDR" --tool "$1" --args "$2" &
  SCRIPTED_PID=$!
  wait_port "$SCRIPTED_ADDR" || say "scripted-upstream did not start"
  NEXT=$SCRIPTED_ADDR
}

unscripted() {
  if [ -n "$SCRIPTED_PID" ]; then kill "$SCRIPTED_PID" 2>/dev/null; wait "$SCRIPTED_PID" 2>/dev/null; SCRIPTED_PID=; fi
  NEXT=$UP_ADDR
}

cleanup() {
  stop_proxy
  unscripted
  if [ -n "$UP_PID" ]; then kill "$UP_PID" 2>/dev/null; wait "$UP_PID" 2>/dev/null; fi
}
trap cleanup EXIT

# ---------------------------------------------------------------- runs

# Each run gets a fresh sandbox: H is its HOME, W its working directory
# (seeded with a small file the prompts ask about). A case's setup function
# may write config into them and fill CASE_ENV with VAR=value pairs.
declare -A SEQ
H=
W=
CASE_ENV=()

new_sandbox() { # new_sandbox CLIENT CASE
  local base=$WORK/sandbox/$1/$2
  rm -rf "$base"
  H=$base/home
  W=$base/work
  mkdir -p "$H" "$W"
  printf 'The secret word is pineapple.\n' >"$W/notes.txt"
  printf '# demo\nA tiny project used to capture client requests.\n' >"$W/README.md"
  CASE_ENV=()
}

# run CLIENT CASE CMD...: runs CMD in the sandbox against the proxy and
# keeps what the proxy recorded in $RAW/CLIENT/NN-CASE.
run() {
  local client=$1 case=$2
  shift 2
  local n=$((${SEQ[$client]:-0} + 1))
  SEQ[$client]=$n
  local out=$RAW/$client/$(printf '%02d' "$n")-$case
  rm -rf "$out"
  mkdir -p "$out"
  start_proxy "$out"
  local started=$(date +%s)
  (
    cd "$W" &&
      env -i PATH="$(dirname "$NODE"):/usr/local/bin:/usr/bin:/bin" HOME="$H" USER=capture LANG=C.UTF-8 TERM=dumb \
        TMPDIR="$H/tmp" \
        HTTP_PROXY=$BLACKHOLE HTTPS_PROXY=$BLACKHOLE http_proxy=$BLACKHOLE https_proxy=$BLACKHOLE \
        NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost \
        "${CASE_ENV[@]}" timeout -k 5 "$TIMEOUT" "$@" </dev/null >"$out/stdout.txt" 2>"$out/stderr.txt"
  )
  local rc=$?
  sleep 0.3 # let a last request in flight be written
  stop_proxy
  local count
  count=$(find "$out" -maxdepth 1 -name '[0-9][0-9][0-9][0-9]-*.json' | wc -l)
  local secs=$(($(date +%s) - started))
  "$NODE" -e 'const [client,c,rc,n,s,cmd]=process.argv.slice(1);const o={client,case:c,exit:+rc,requests:+n,seconds:+s,command:cmd};require("fs").writeFileSync(process.argv[7],JSON.stringify(o,null,2)+"\n");require("fs").appendFileSync(process.argv[8],JSON.stringify(o)+"\n")' \
    "$client" "$case" "$rc" "$count" "$secs" "$*" "$out/run.json" "$WORK/runs.jsonl"
  say "$client/$case: exit $rc, $count request(s), ${secs}s"
}

mkdir_tmp() { mkdir -p "$H/tmp"; }

# ---------------------------------------------------------------- claude-code

claude_env() { # claude_env [nonessential]
  mkdir_tmp
  CASE_ENV=(ANTHROPIC_BASE_URL=$PROXY ANTHROPIC_API_KEY=$KEY
    DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1 DISABLE_AUTOUPDATER=1 DISABLE_BUG_COMMAND=1
    CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY=1 CLAUDE_CODE_DISABLE_TERMINAL_TITLE=1 CLAUDE_CODE_IDE_SKIP_AUTO_INSTALL=1)
  [ "${1:-}" = nonessential ] || CASE_ENV+=(CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1)
}

capture_claude_code() {
  install claude-code @anthropic-ai/claude-code
  local claude=$PREFIX/claude-code/node_modules/.bin/claude
  local c=claude-code

  new_sandbox $c plain; claude_env
  run $c plain "$claude" -p "Say hello in one word."

  new_sandbox $c read-tool; claude_env
  run $c read-tool "$claude" -p "Read the file notes.txt and tell me the secret word." --tools Read --allowedTools Read

  new_sandbox $c model-sonnet; claude_env; CASE_ENV+=(ANTHROPIC_MODEL=claude-sonnet-4-5)
  run $c model-sonnet "$claude" -p "Read notes.txt and tell me the secret word."

  new_sandbox $c model-haiku; claude_env; CASE_ENV+=(ANTHROPIC_MODEL=claude-haiku-4-5 ANTHROPIC_SMALL_FAST_MODEL=claude-haiku-4-5)
  run $c model-haiku "$claude" -p "Say hello in one word."

  new_sandbox $c no-tools; claude_env; CASE_ENV+=(ANTHROPIC_MODEL=claude-sonnet-4-5)
  run $c no-tools "$claude" -p "Say hello in one word." --tools ""

  new_sandbox $c json-schema; claude_env; CASE_ENV+=(ANTHROPIC_MODEL=claude-sonnet-4-5)
  run $c json-schema "$claude" -p "Give the capital of France." --output-format json \
    --json-schema '{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}'

  new_sandbox $c bare; claude_env; CASE_ENV+=(ANTHROPIC_MODEL=claude-sonnet-4-5)
  run $c bare "$claude" --bare -p "Read notes.txt and tell me the secret word." --allowedTools Read

  # WebSearch and WebFetch run as further API calls (WebSearch's carries
  # Anthropic's server-side web_search tool). The simulator's sampled
  # arguments are refused by the tools, so the first turn is scripted.
  new_sandbox $c web-search-tool; claude_env; CASE_ENV+=(ANTHROPIC_MODEL=claude-sonnet-4-5)
  scripted WebSearch '{"query":"population of Paris"}'
  run $c web-search-tool "$claude" -p "Search the web for the population of Paris." --tools WebSearch --allowedTools WebSearch
  unscripted

  new_sandbox $c web-fetch-tool; claude_env; CASE_ENV+=(ANTHROPIC_MODEL=claude-sonnet-4-5)
  scripted WebFetch '{"url":"https://example.com/","prompt":"What is this page about?"}'
  run $c web-fetch-tool "$claude" -p "What is on https://example.com/ ?" --tools WebFetch --allowedTools WebFetch
  unscripted

  # Read of an image: the tool_result then carries an image block.
  new_sandbox $c read-image; claude_env; CASE_ENV+=(ANTHROPIC_MODEL=claude-sonnet-4-5)
  printf '%s' "$PNG_1X1" | base64 -d >"$W/dot.png"
  scripted Read "{\"file_path\":\"$W/dot.png\"}"
  run $c read-image "$claude" -p "Look at dot.png and describe it." --tools Read --allowedTools Read
  unscripted

  # MCP tools (30 of them, from mcp-server.mjs): declared as mcp__capture__*.
  local mcp="{\"mcpServers\":{\"capture\":{\"command\":\"$NODE\",\"args\":[\"$HERE/mcp-server.mjs\"]}}}"
  new_sandbox $c mcp-tools; claude_env; CASE_ENV+=(ANTHROPIC_MODEL=claude-sonnet-4-5 ENABLE_TOOL_SEARCH=false)
  run $c mcp-tools "$claude" -p "Echo hello with the echo tool." --tools Read --mcp-config "$mcp" --strict-mcp-config --allowedTools mcp__capture__echo_00

  # The same with tool search forced on: MCP tools are deferred behind the
  # ToolSearch tool (beta advanced-tool-use-2025-11-20); the first turn is
  # scripted to search, so the next one carries what the search loaded.
  new_sandbox $c mcp-tool-search; claude_env; CASE_ENV+=(ANTHROPIC_MODEL=claude-sonnet-4-5 ENABLE_TOOL_SEARCH=true)
  scripted ToolSearch '{"query":"select:mcp__capture__echo_00","max_results":5}'
  run $c mcp-tool-search "$claude" -p "Echo hello with the echo tool." --mcp-config "$mcp" --strict-mcp-config --allowedTools mcp__capture__echo_00 ToolSearch
  unscripted

  new_sandbox $c effort-low; claude_env
  run $c effort-low "$claude" -p "Say hello in one word." --effort low --tools ""

  # Without CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC (telemetry still off, and
  # anything not sent to the base URL fails at the black-hole proxy): shows
  # the extra calls (title, token counting, ...) a default install sends to
  # the gateway.
  new_sandbox $c nonessential-traffic; claude_env nonessential
  run $c nonessential-traffic "$claude" -p "Read notes.txt and tell me the secret word."
}

# ---------------------------------------------------------------- codex

codex_config() { # codex_config WIRE_API [MODEL]
  mkdir_tmp
  local home=$H/codex-home
  mkdir -p "$home"
  {
    [ -n "${2:-}" ] && echo "model = \"$2\""
    cat <<EOF
model_provider = "tollgate"
check_for_update_on_startup = false

[model_providers.tollgate]
name = "Tollgate capture"
base_url = "$PROXY/v1"
env_key = "TOLLGATE_API_KEY"
wire_api = "$1"

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"
EOF
  } >"$home/config.toml"
  CASE_ENV=(CODEX_HOME=$home TOLLGATE_API_KEY=$KEY)
}

capture_codex() {
  install codex @openai/codex
  local codex=$PREFIX/codex/node_modules/.bin/codex
  local c=codex

  new_sandbox $c plain-gpt-4.1; codex_config responses gpt-4.1
  run $c plain-gpt-4.1 "$codex" exec --skip-git-repo-check "Say hello in one word."

  new_sandbox $c default-model; codex_config responses
  run $c default-model "$codex" exec --skip-git-repo-check "Read notes.txt and tell me the secret word."

  new_sandbox $c reasoning-high; codex_config responses gpt-5.1-codex
  run $c reasoning-high "$codex" exec --skip-git-repo-check -c model_reasoning_effort=high "Read notes.txt and tell me the secret word."

  new_sandbox $c output-schema; codex_config responses gpt-4.1
  printf '%s\n' '{"type":"object","properties":{"word":{"type":"string"}},"required":["word"],"additionalProperties":false}' >"$W/schema.json"
  run $c output-schema "$codex" exec --skip-git-repo-check --output-schema schema.json "What is the secret word in notes.txt?"

  new_sandbox $c image-input; codex_config responses gpt-4.1
  printf '%s' "$PNG_1X1" | base64 -d >"$W/dot.png"
  run $c image-input "$codex" exec --skip-git-repo-check --image=dot.png "Describe this image in one word."

  new_sandbox $c workspace-write; codex_config responses gpt-4.1
  run $c workspace-write "$codex" exec --skip-git-repo-check -s workspace-write "Read notes.txt and tell me the secret word."

  new_sandbox $c web-search-live; codex_config responses gpt-4.1
  run $c web-search-live "$codex" exec --skip-git-repo-check -c web_search=live "Search the web for the population of Paris."

  # The chat-completions wire API: removed from recent Codex releases; kept
  # to record what happens.
  new_sandbox $c wire-chat; codex_config chat gpt-4.1
  run $c wire-chat "$codex" exec --skip-git-repo-check "Say hello in one word."
}

# ---------------------------------------------------------------- gemini-cli

gemini_env() { # gemini_env [CORE_TOOL]
  mkdir_tmp
  mkdir -p "$H/.gemini"
  local core=
  [ -n "${1:-}" ] && core="\"tools\": { \"core\": [\"$1\"] },"
  cat >"$H/.gemini/settings.json" <<EOF
{
  $core
  "security": { "auth": { "selectedType": "gemini-api-key" } },
  "privacy": { "usageStatisticsEnabled": false },
  "telemetry": { "enabled": false },
  "general": { "disableAutoUpdate": true, "disableUpdateNag": true }
}
EOF
  # GOOGLE_GEMINI_BASE_URL alone selects the "gateway" auth type, which this
  # release's non-interactive mode refuses ("Invalid auth method selected"):
  # the settings above pick the API-key auth, which honours the variable too.
  CASE_ENV=(GEMINI_API_KEY=$KEY GOOGLE_GEMINI_BASE_URL=$PROXY GEMINI_CLI_TRUST_WORKSPACE=true NO_COLOR=1)
}

capture_gemini_cli() {
  install gemini-cli @google/gemini-cli
  local gemini=$PREFIX/gemini-cli/node_modules/.bin/gemini
  local c=gemini-cli

  new_sandbox $c plain; gemini_env
  run $c plain "$gemini" -p "Say hello in one word."

  new_sandbox $c read-tool; gemini_env
  run $c read-tool "$gemini" -p "Read the file notes.txt and tell me the secret word." --yolo

  new_sandbox $c model-2.5-flash; gemini_env
  run $c model-2.5-flash "$gemini" -m gemini-2.5-flash -p "Read notes.txt and tell me the secret word."

  # google_web_search runs as a second call that carries the googleSearch
  # tool; with it the only core tool, the simulator calls it.
  new_sandbox $c web-search-tool; gemini_env google_web_search
  run $c web-search-tool "$gemini" -p "Search the web for the population of Paris." --yolo

  new_sandbox $c json-output; gemini_env
  run $c json-output "$gemini" -m gemini-2.5-pro -o json -p "Say hello in one word."
}

# ---------------------------------------------------------------- opencode

opencode_env() { # opencode_env MODEL
  mkdir_tmp
  cat >"$W/opencode.json" <<EOF
{
  "\$schema": "https://opencode.ai/config.json",
  "autoupdate": false,
  "share": "disabled",
  "model": "$1",
  "small_model": "$1",
  "provider": {
    "tollgate": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "Tollgate (OpenAI-compatible)",
      "options": { "baseURL": "$PROXY/v1", "apiKey": "$KEY" },
      "models": { "gpt-4o": { "name": "gpt-4o", "tool_call": true } }
    },
    "openai": {
      "options": { "baseURL": "$PROXY/v1", "apiKey": "$KEY" }
    },
    "anthropic": {
      "options": { "baseURL": "$PROXY/v1", "apiKey": "$KEY" }
    },
    "google": {
      "options": { "baseURL": "$PROXY/v1beta", "apiKey": "$KEY" }
    }
  }
}
EOF
  CASE_ENV=(OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_MODELS_FETCH=1 OPENCODE_DISABLE_LSP_DOWNLOAD=1
    OPENCODE_DISABLE_SHARE=1 OPENAI_API_KEY=$KEY ANTHROPIC_API_KEY=$KEY GOOGLE_GENERATIVE_AI_API_KEY=$KEY)
}

capture_opencode() {
  install opencode opencode-ai
  local opencode=$PREFIX/opencode/node_modules/.bin/opencode
  local c=opencode

  new_sandbox $c openai-compatible; opencode_env tollgate/gpt-4o
  run $c openai-compatible "$opencode" run "Read notes.txt and tell me the secret word."

  new_sandbox $c openai; opencode_env openai/gpt-4.1
  run $c openai "$opencode" run "Read notes.txt and tell me the secret word."

  new_sandbox $c anthropic; opencode_env anthropic/claude-sonnet-4-5
  run $c anthropic "$opencode" run "Read notes.txt and tell me the secret word."

  new_sandbox $c google; opencode_env google/gemini-2.5-flash
  run $c google "$opencode" run "Read notes.txt and tell me the secret word."
}

# ---------------------------------------------------------------- SDKs

SDK_PKGS=(ai @ai-sdk/openai @ai-sdk/anthropic @ai-sdk/google @langchain/openai @langchain/anthropic @langchain/core
  openai @anthropic-ai/sdk @google/genai zod)

# The SDK scripts import their packages, so they run from a copy next to the
# prefix's node_modules. Each script lists its cases (--list) and runs one
# case per call, so that every case is recorded apart.
capture_sdk() { # capture_sdk CLIENT SCRIPT
  install sdk "${SDK_PKGS[@]}"
  local dir=$PREFIX/sdk/run
  mkdir -p "$dir"
  cp "$HERE"/sdk/*.mjs "$dir"/
  local cases
  cases=$(cd "$dir" && "$NODE" "$2" --list) || { say "$1: could not list cases"; return; }
  local k
  for k in $cases; do
    new_sandbox "$1" "$k"
    mkdir_tmp
    CASE_ENV=(CAPTURE_BASE=$PROXY CAPTURE_KEY=$KEY)
    run "$1" "$k" "$NODE" "$dir/$2" "$k"
  done
}

# ---------------------------------------------------------------- main

start_upstream
for client in "${CLIENTS[@]}"; do
  rm -rf "${RAW:?}/$client"
  SEQ[$client]=0
  case $client in
  claude-code) capture_claude_code ;;
  codex) capture_codex ;;
  gemini-cli) capture_gemini_cli ;;
  opencode) capture_opencode ;;
  ai-sdk) capture_sdk ai-sdk ai-sdk.mjs ;;
  langchain) capture_sdk langchain langchain.mjs ;;
  openai-node) capture_sdk openai-node openai-node.mjs ;;
  anthropic-node) capture_sdk anthropic-node anthropic-node.mjs ;;
  google-genai) capture_sdk google-genai google-genai.mjs ;;
  *) say "unknown client $client" ;;
  esac
done
cleanup
trap - EXIT

if [ -n "$FIXTURES" ]; then
  "$NODE" "$HERE/fixtures.mjs" --raw "$RAW" --prefix "$PREFIX" --out "$FIXTURES" --analysis "$WORK/analysis.json" --markdown "$WORK/analysis.md" "${CLIENTS[@]}"
fi
say "done: raw recordings in $RAW${FIXTURES:+, fixtures in $FIXTURES}"
