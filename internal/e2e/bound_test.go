package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/app"
	"github.com/tollgate-dev/tollgate/internal/testkit"
	"github.com/tollgate-dev/tollgate/internal/testkit/apptest"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// boundRig is a gateway in front of the simulated upstream (which reads a
// body as a Go server does: the last of a name sent twice, at any depth,
// names without regard to case, and bills hosted tools per call, dearer
// tiers and modes, rejected predictions), with whole-µ$ prices per token
// so what the upstream bills is exact.
type boundRig struct {
	app     *app.App
	handler http.Handler
	sim     *simulated.Server
	mu      sync.Mutex
	entries []budget.Entry
}

// toolFee is what the upstream bills for one hosted or server tool call
// (a search, a result, a fetch): $10 per thousand, as web search is.
const toolFee = 10_000

// prices are µ$ per input and output token of each model in boundConfig.
var prices = map[string][2]int64{"test-model": {1, 2}, "gpt-4o": {2, 8}, "gpt-4o-mini": {1, 1},
	"text-embedding-3-small": {1, 0}, "gpt-3.5-turbo-instruct": {1, 2}, claude: {3, 15}, "gemini-2.5-flash": {1, 2}}

const boundConfig = `
upstreams:
  - {name: sim, base_url: "${UPSTREAM}", api_key: k, models: [test-model, gpt-4o, gpt-4o-mini, text-embedding-3-small, gpt-3.5-turbo-instruct]}
  - {name: claude, kind: anthropic, base_url: "${UPSTREAM}", api_key: k, models: [` + claude + `]}
  - {name: gemini, kind: gemini, base_url: "${UPSTREAM}beta", api_key: k, models: [gemini-2.5-flash]}
models:
  gemini-2.5-flash: {input: "$1", output: "$2", reasoning: "$2", max_output_tokens: 65535}
  test-model: {encoding: o200k_base, input: "$1", output: "$2", max_output_tokens: 1000, default_output_tokens: 100, image_tokens: 1445,
      web_search: {price: "$0.01", max_uses: 3, result_tokens: 2000}}
  gpt-4o:     {encoding: o200k_base, input: "$2", output: "$8", max_output_tokens: 16384}
  gpt-4o-mini: {encoding: o200k_base, input: "$1", output: "$1", max_output_tokens: 16384}
  text-embedding-3-small: {encoding: o200k_base, input: "$1", embedding: true}
  gpt-3.5-turbo-instruct: {encoding: o200k_base, input: "$1", output: "$2", max_output_tokens: 4096}
  ` + claude + `: {encoding: o200k_base, input: "$3", cached_input: "$0.30", cache_write: "$3.75", cache_write_1h: "$6", output: "$15", max_output_tokens: 64000,
      web_search: {price: "$0.01", max_uses: 4, result_tokens: 2000}, fast_mode: 6, inference_geo_us: 1.1}
orgs:
  - id: acme
    teams:
      - id: ml
        # A request of more than 200k tokens is refused (too large for the
        # bucket): the simulated upstream would take minutes generating one.
        limits: [{name: usd-month, kind: budget, unit: usd, amount: "$1000000", period: month},
                 {name: size, kind: rate, unit: tokens, amount: 200000, window: 1ms}]
        keys: [{id: k1, hash: "${KEY_HASH}"}]
`

func newBoundRig(t testing.TB) *boundRig { return newBoundRigOn(t, "", simulated.Options{}) }

// newBoundRigOn is the rig on the Redis at redisAddr ("": the embedded
// store), the upstream simulated with opts.
func newBoundRigOn(t testing.TB, redisAddr string, opts simulated.Options) *boundRig {
	t.Helper()
	opts.APIKey = "k"
	sim, err := simulated.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(sim)
	t.Cleanup(up.Close)
	src := boundConfig
	if redisAddr != "" {
		src = "store:\n  kind: redis\n  redis:\n    addrs:\n      - ${REDIS}\n    spool_path: ${SPOOL}\n    timeout: 3s\n    settle_timeout: 3s\n" + src
	}
	a := apptest.New(t, src, map[string]string{"UPSTREAM": up.URL + "/v1", "KEY_HASH": policy.HashKey(testKey),
		"REDIS": redisAddr, "SPOOL": filepath.Join(t.TempDir(), "spool.jsonl")})
	stop := a.Background(context.Background())
	t.Cleanup(func() { stop(); a.Close() })
	r := &boundRig{app: a, handler: a.Handler(), sim: sim}
	a.Gateway().OnSettle(func(e budget.Entry) { r.mu.Lock(); r.entries = append(r.entries, e); r.mu.Unlock() })
	return r
}

var boundRoutes = []string{"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/messages", "/v1/responses"}

// billed is what the upstream has billed so far, in µ$.
// billedSince is what a simulated upstream billed between two readings
// of its usage (one request's worth), in µ$: every prompt token at its
// model's input price, every generated one at its output price, every
// server-tool call at toolFee — and Claude's prompt cache ($3 input) by
// Anthropic's rule: reads at 0.1 ×, five-minute writes at 1.25 ×,
// one-hour writes at 2 ×, each part rounded up.
func billedSince(before, after map[string]simulated.Reported) int64 {
	var n int64
	for model, a := range after {
		b, p := before[model], prices[model]
		n += (a.BilledPromptTokens-b.BilledPromptTokens)*p[0] + (a.BilledCompletionTokens-b.BilledCompletionTokens)*p[1] +
			(a.BilledToolCalls-b.BilledToolCalls)*toolFee
		read, w5, w1h := a.CacheReadTokens-b.CacheReadTokens, a.CacheWrite5mTokens-b.CacheWrite5mTokens, a.CacheWrite1hTokens-b.CacheWrite1hTokens
		n += (read*30+99)/100 - read*3 + (w5*375+99)/100 - w5*3 + w1h*3
	}
	return n
}

// check sends body to route with the client's headers h and holds the
// bound: whatever the upstream billed for it is at most what the gateway
// reserved, and a request the gateway did not admit cost nothing. It
// returns the answer.
func (r *boundRig) check(t testing.TB, route string, body []byte, h http.Header) *httptest.ResponseRecorder {
	t.Helper()
	before := r.sim.Stats().Usage
	r.mu.Lock()
	r.entries = r.entries[:0]
	r.mu.Unlock()
	req := httptest.NewRequest(http.MethodPost, route, bytes.NewReader(body))
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	r.handler.ServeHTTP(w, req)
	// A settlement may finish after the response (on Redis it does).
	testkit.WaitFor(10*time.Second, func() bool { return r.app.Gateway().Settling() == 0 })
	cost := billedSince(before, r.sim.Stats().Usage)
	r.mu.Lock()
	defer r.mu.Unlock()
	var reserved int64
	admitted := false
	for _, e := range r.entries {
		if e.ReservationID != "" {
			admitted, reserved = true, reserved+int64(e.Reserved)
		}
	}
	if cost > 0 && !admitted {
		t.Fatalf("%s %s: the upstream billed %d µ$ for a request the gateway did not reserve (status %d)", route, short(body), cost, w.Code)
	}
	if cost > reserved {
		t.Fatalf("%s %s: the upstream billed %d µ$, the gateway reserved %d", route, short(body), cost, reserved)
	}
	if w.Code >= 400 && w.Code != 429 {
		var eb errorBody
		if json.Unmarshal(w.Body.Bytes(), &eb) != nil && !strings.Contains(w.Body.String(), `"type":"error"`) {
			t.Fatalf("%s %s: status %d without an error body: %s", route, body, w.Code, w.Body)
		}
	}
	return w
}

// short is body, cut to a length a failure can print.
func short(body []byte) string {
	if len(body) > 600 {
		return string(body[:300]) + fmt.Sprintf(" … (%d bytes) … ", len(body)) + string(body[len(body)-200:])
	}
	return string(body)
}

// seeds are valid bodies of every route, with the fields that multiply cost.
var seeds = [][2]string{
	{"/v1/chat/completions", `{"model":"test-model","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello there"}],"max_tokens":50,"n":2}`},
	{"/v1/chat/completions", `{"model":"test-model","stream":true,"stream_options":{"include_usage":false},"messages":[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"https://x/a.png","detail":"high"}}]}]}`},
	{"/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/a.png"}},{"type":"image_url","image_url":{"url":"https://x/b.png","detail":"low"}}]}],"max_completion_tokens":20}`},
	{"/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"weather?"}],"tools":[{"type":"function","function":{"name":"get_weather","description":"Get the weather.","parameters":{"type":"object","properties":{"city":{"type":"string","description":"The city."}}}}}],"max_tokens":30}`},
	{"/v1/completions", `{"model":"gpt-3.5-turbo-instruct","prompt":["one","two","three"],"max_tokens":20,"n":2,"best_of":3}`},
	{"/v1/completions", `{"model":"gpt-3.5-turbo-instruct","prompt":[[1,2,3],[4,5]],"stream":true}`},
	{"/v1/embeddings", `{"model":"text-embedding-3-small","input":["a","b","c"]}`},
	{"/v1/messages", `{"model":"` + claude + `","max_tokens":40,"system":"terse","messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}],"tools":[{"name":"f","description":"d","input_schema":{"type":"object"}}]}`},
	{"/v1/messages", `{"model":"` + claude + `","max_tokens":40,"stream":true,"messages":[{"role":"user","content":"stream to me"}]}`},
	{"/v1/responses", `{"model":"test-model","input":"hello","max_output_tokens":30}`},
	{"/v1/messages", `{"model":"` + claude + `","max_tokens":80,"messages":[{"role":"user","content":"what is new?"}],"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":3}]}`},
	{"/v1/responses", `{"model":"test-model","input":"what is new?","max_output_tokens":80,"tools":[{"type":"web_search","search_context_size":"low"}],"max_tool_calls":2}`},
	{"/v1/chat/completions", `{"model":"gemini-2.5-flash","max_tokens":20,"messages":[{"role":"user","content":"sum 1234567890 and 2718281828"}]}`},
	// A manual cached for an hour, then a note for five minutes: long
	// enough for the provider to cache (1,024 tokens).
	{"/v1/messages", `{"model":"` + claude + `","max_tokens":60,"system":[{"type":"text","text":"` + strings.Repeat("Reserve first, settle after. ", 300) +
		`","cache_control":{"type":"ephemeral","ttl":"1h"}}],"messages":[{"role":"user","content":[{"type":"text","text":"` + strings.Repeat("a note ", 400) +
		`","cache_control":{"type":"ephemeral"}},{"type":"text","text":"go"}]}]}`},
}

// mutate returns a variant of a JSON body an attacker might send: keys in
// another case (Unicode folds included), duplicated keys at any depth (the
// later one dearer), escaped names, multipliers, more images and prompts,
// streams switched on, hosted tools, and fields that bill but that the
// gateway may not know.
func mutate(rng *rand.Rand, body string) string {
	var v any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		return body
	}
	for range 1 + rng.IntN(3) {
		v = mutateValue(rng, v, 0)
	}
	out, _ := json.Marshal(v)
	s := string(out)
	if rng.IntN(4) == 0 { // spell a name with escapes, which decode to the same key
		s = strings.Replace(s, `"n":`, `"\u006e":`, 1)
		s = strings.Replace(s, `"stream":`, `"\u0073tream":`, 1)
	}
	if rng.IntN(3) == 0 {
		s = duplicate(rng, s)
	}
	return s
}

// dearer are values a duplicate of a name carries: a dearer detail, a
// hosted tool, a dearer tier, a larger cap, a longer text.
var dearer = []string{`"high"`, `"web_search"`, `"web_search_20250305"`, `"priority"`, `4000`, `128`,
	`"` + strings.Repeat("a longer prediction than the first ", 40) + `"`}

// memberName matches a member's name in a body: `"name":`.
var memberName = regexp.MustCompile(`"([A-Za-z_]+)":`)

// duplicate sends one of the body's names twice, the second time with a
// dearer value — as an upstream that keeps the last of two reads it.
func duplicate(rng *rand.Rand, s string) string {
	switch rng.IntN(4) {
	case 0: // an image's detail, low then high
		return strings.Replace(s, `"url":"https://x/`, `"detail":"low","detail":"high","url":"https://x/`, 1)
	case 1: // a tool's type, a function then a hosted tool
		return strings.Replace(s, `"type":"function"`, `"type":"function","type":"`+[]string{"web_search", "web_search_20250305", "code_interpreter"}[rng.IntN(3)]+`"`, 1)
	}
	at := memberName.FindAllStringSubmatchIndex(s, -1)
	if len(at) == 0 {
		return s
	}
	m := at[rng.IntN(len(at))]
	name := s[m[2]:m[3]]
	end := valueEnd(s, m[1])
	if end < 0 {
		return s
	}
	return s[:end] + `,"` + name + `":` + dearer[rng.IntN(len(dearer))] + s[end:]
}

// valueEnd is where the JSON value that starts at i (after a name's colon)
// ends, or -1.
func valueEnd(s string, i int) int {
	dec := json.NewDecoder(strings.NewReader(s[i:]))
	var v json.RawMessage
	if dec.Decode(&v) != nil {
		return -1
	}
	return i + int(dec.InputOffset())
}

// paid are fields that make an upstream bill beyond the tokens: hosted
// search, a dearer tier or mode, a pinned region, per-result plugins.
var paid = []struct {
	name  string
	value any
}{
	{"web_search_options", map[string]any{}},
	{"service_tier", "priority"},
	{"speed", "fast"},
	{"inference_geo", "us"},
	{"plugins", []any{map[string]any{"id": "web"}}},
	{"search_parameters", map[string]any{"mode": "on"}},
	{"tools", []any{map[string]any{"type": "web_search"}}},
	{"tools", []any{map[string]any{"type": "web_search_preview", "search_context_size": "high"}}},
	{"tools", []any{map[string]any{"type": "web_search_20250305", "name": "web_search"}}},
	{"tools", []any{map[string]any{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}}},
	{"tools", []any{map[string]any{"type": "web_search_20260209", "name": "web_search", "max_uses": 2}, map[string]any{"type": "web_search_20250305", "name": "s2", "max_uses": 2}}},
	{"prediction", map[string]any{"type": "content", "content": strings.Repeat("predicted text ", 200)}},
	{"mcp_servers", []any{map[string]any{"type": "url", "url": "https://mcp.test", "name": "m"}}},
}

// betaValues are the anthropic-beta headers a case is sent with (by its route
// byte): none, free ones, one that bills a multiple, one nobody knows.
var betaValues = []string{"", "prompt-caching-2024-07-31", "fast-mode-2026-02-01", "fast-mode-2026-02-01, prompt-caching-2024-07-31",
	"context-1m-2025-08-07", "no-such-beta-2026-12-01", "extended-cache-ttl-2025-04-11"}

func betaHeader(i int) http.Header {
	if b := betaValues[i%len(betaValues)]; b != "" {
		return http.Header{"Anthropic-Beta": {b}}
	}
	return nil
}

var folds = []func(string) string{
	strings.ToUpper,
	func(k string) string { return strings.ToUpper(k[:1]) + k[1:] },
	func(k string) string { return strings.Replace(k, "s", "ſ", 1) },      // long s folds to s
	func(k string) string { return strings.Replace(k, "k", "\u212a", 1) }, // Kelvin sign folds to k
	func(k string) string { return k + "\x00" },                           // not a fold: a name no server reads
}

var multipliers = map[string]func(*rand.Rand) any{
	"n":                     func(r *rand.Rand) any { return 1 + r.IntN(8) },
	"best_of":               func(r *rand.Rand) any { return 1 + r.IntN(8) },
	"max_tokens":            func(r *rand.Rand) any { return 1 + r.IntN(2000) },
	"max_uses":              func(r *rand.Rand) any { return r.IntN(9) },
	"max_tool_calls":        func(r *rand.Rand) any { return r.IntN(9) },
	"max_completion_tokens": func(r *rand.Rand) any { return 1 + r.IntN(2000) },
	"max_output_tokens":     func(r *rand.Rand) any { return 1 + r.IntN(2000) },
	"stream":                func(r *rand.Rand) any { return r.IntN(2) == 0 },
	"stream_options":        func(r *rand.Rand) any { return map[string]any{"include_usage": r.IntN(2) == 0} },
	"prompt": func(r *rand.Rand) any {
		ps := make([]any, 1+r.IntN(40))
		for i := range ps {
			ps[i] = fmt.Sprintf("prompt %d", i)
		}
		return ps
	},
}

func mutateValue(rng *rand.Rand, v any, depth int) any {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		switch op := rng.IntN(7); {
		case op == 0 && len(keys) > 0: // a key in another case, beside or instead of its own
			k := keys[rng.IntN(len(keys))]
			x[folds[rng.IntN(len(folds))](k)] = x[k]
			if rng.IntN(2) == 0 {
				delete(x, k)
			}
		case op == 1 && depth == 0: // a multiplier, in its own name or a folded one
			names := []string{"n", "best_of", "max_tokens", "max_completion_tokens", "max_output_tokens", "max_tool_calls", "stream", "stream_options", "prompt"}
			name := names[rng.IntN(len(names))]
			val := multipliers[name](rng)
			if rng.IntN(2) == 0 {
				name = folds[rng.IntN(len(folds)-1)](name)
			}
			x[name] = val
		case op == 2 && len(keys) > 0: // go deeper
			k := keys[rng.IntN(len(keys))]
			x[k] = mutateValue(rng, x[k], depth+1)
		case op == 4 && depth == 0: // a field that bills beyond the tokens
			f := paid[rng.IntN(len(paid))]
			x[f.name] = f.value
		case op == 6 && (x["content"] != nil || x["text"] != nil): // a run of digits, which some tokenizers split one by one
			run := strings.Repeat("9081726354", 400)[:1+rng.IntN(4000)]
			if _, ok := x["text"].(string); ok {
				x["text"] = run
			} else {
				x["content"] = run
			}
		case op == 5 && x["text"] != nil: // a cache breakpoint, for five minutes or an hour
			x["cache_control"] = map[string]any{"type": "ephemeral", "ttl": []string{"5m", "1h"}[rng.IntN(2)]}
		case op == 3: // more images
			if c, ok := x["content"].([]any); ok {
				for range 1 + rng.IntN(20) {
					c = append(c, map[string]any{"type": "image_url", "image_url": map[string]any{"url": "https://x/i.png"}})
				}
				x["content"] = c
			}
		}
		return x
	case []any:
		if len(x) == 0 {
			return x
		}
		i := rng.IntN(len(x))
		if rng.IntN(3) == 0 {
			x = append(x, x[i]) // one more element: a message, a prompt, a part
		}
		x[i] = mutateValue(rng, x[i], depth+1)
		return x
	}
	return v
}

// For bodies generated and mutated from valid ones, every admitted
// request's billed cost at the (case-insensitive) upstream is within its
// reservation, and nothing refused costs anything.
func TestPropertyBilledWithinReservation(t *testing.T) {
	r := newBoundRig(t)
	rng := rand.New(rand.NewPCG(12, 34))
	admitted := 0
	n := 1500
	if testing.Short() {
		n = 200
	}
	for i := range n {
		seed := seeds[i%len(seeds)]
		body := seed[1]
		if i >= len(seeds) {
			body = mutate(rng, body)
		}
		if r.check(t, seed[0], []byte(body), betaHeader(rng.IntN(len(betaValues)))).Code == http.StatusOK {
			admitted++
		}
	}
	searches, openAI := r.sim.Stats().Usage[claude].BilledToolCalls, r.sim.Stats().Usage["test-model"].BilledToolCalls
	if admitted < n/10 || searches == 0 || openAI == 0 {
		t.Fatalf("only %d of %d bodies admitted, %d web searches run on Claude and %d on OpenAI's wire: the property says little", admitted, n, searches, openAI)
	}
	t.Logf("%d of %d mutated bodies admitted (web searches run: %d on Claude, %d on OpenAI's wire), every one within its reservation", admitted, n, searches, openAI)
}

// FuzzGatewayBound is the same property under go test -fuzz, on any bytes.
func FuzzGatewayBound(f *testing.F) {
	for i, s := range seeds {
		f.Add(uint8(slices.Index(boundRoutes, s[0])), []byte(s[1]))
		f.Add(uint8(slices.Index(boundRoutes, s[0])), []byte(mutate(rand.New(rand.NewPCG(uint64(i), 1)), s[1])))
	}
	r := newBoundRig(f)
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		// The route byte picks the route, and its high part the betas.
		r.check(t, boundRoutes[int(route)%len(boundRoutes)], body, betaHeader(int(route)/len(boundRoutes)))
	})
}
