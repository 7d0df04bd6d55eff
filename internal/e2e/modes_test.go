package e2e_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// Anthropic's fast mode (speed "fast", with its beta) bills 6 × the
// price, US-only inference (inference_geo "us") 1.1 ×, and both 6.6 ×.
// A model whose operator set the multiples (fast_mode, inference_geo_us)
// is reserved and settled at them: the recorded spend is the published
// rule — the list rates times the multiple, rounded up — on the reported
// usage, and within the simulated upstream's bill by its rounding.
func TestModesAreChargedAtTheirMultiple(t *testing.T) {
	for _, store := range chargeStores {
		t.Run(store, func(t *testing.T) {
			sim, upURL := simulatedUpstream(t, simulated.Options{APIKey: "k"})
			src := `
upstreams:
  - {name: anthropic, kind: anthropic, base_url: "` + upURL + `/v1", api_key: k, models: [claude-fast]}
models:
  claude-fast: {input: "$3", output: "$15", max_output_tokens: 8000, fast_mode: 6, inference_geo_us: 1.1}
orgs:
  - id: acme
    teams:
      - id: ml
        limits: [{name: usd-month, kind: budget, unit: usd, amount: "$10", period: month}]
        keys: [{id: k1, hash: "` + policy.HashKey(testKey) + `"}]
`
			r := serveOn(t, store, src)
			c := anthropic.NewClient(option.WithBaseURL(r.urls[0]+"/"), option.WithAPIKey(testKey), option.WithMaxRetries(0))
			steps := []struct {
				opts     []option.RequestOption
				perMille int64
			}{
				{nil, 1000},
				{[]option.RequestOption{option.WithJSONSet("speed", "fast"), option.WithHeader("anthropic-beta", "fast-mode-2026-02-01")}, 6000},
				{[]option.RequestOption{option.WithJSONSet("inference_geo", "us")}, 1100},
				{[]option.RequestOption{option.WithJSONSet("speed", "fast"), option.WithJSONSet("inference_geo", "us"), option.WithHeader("anthropic-beta", "fast-mode-2026-02-01")}, 6600},
			}
			before := sim.Stats().Usage["claude-fast"]
			var rule, recorded int64
			for i, s := range steps {
				params := anthropic.MessageNewParams{Model: "claude-fast", MaxTokens: 200,
					Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Tell me about budgets, please."))}}
				if _, err := c.Messages.New(context.Background(), params, s.opts...); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				e := r.settled(t, i+1)[i]
				up := func(tokens, rate int64) int64 { return (tokens*rate*s.perMille/1000 + 999_999) / 1_000_000 }
				want := up(e.Usage.InputTokens, 3_000_000) + up(e.Usage.OutputTokens, 15_000_000)
				if int64(e.Cost) != want || e.Cost > e.Reserved || e.Usage.Estimated {
					t.Errorf("step %d (%d‰): charged %d µ$ of %d reserved for %+v; the rule gives %d", i, s.perMille, e.Cost, e.Reserved, e.Usage, want)
				}
				rule += want
				recorded += int64(e.Cost)
			}
			after := sim.Stats().Usage["claude-fast"]
			billed := (after.BilledPromptTokens-before.BilledPromptTokens)*3 + (after.BilledCompletionTokens-before.BilledCompletionTokens)*15
			// The simulated upstream bills a multiple's extra tokens rounded
			// up, a token per part at most: 18 µ$ a request.
			if recorded != rule || billed < recorded || billed-recorded > 18*int64(len(steps)) {
				t.Errorf("recorded %d µ$, the rule %d, the upstream billed %d", recorded, rule, billed)
			}
			t.Logf("%s: recorded %d µ$ = the rule; the upstream billed %d", store, recorded, billed)
		})
	}
}

// A model whose operator did not set the multiples refuses the modes that
// bill them — the field, the beta alone, the pinned region — with 400
// naming what was sent, before anything is reserved or forwarded.
func TestModesWithoutTheirMultipleAreRefused(t *testing.T) {
	sim, upURL := simulatedUpstream(t, simulated.Options{APIKey: "k"})
	src := `
upstreams:
  - {name: anthropic, kind: anthropic, base_url: "` + upURL + `/v1", api_key: k, models: [claude-plain]}
models:
  claude-plain: {input: "$3", output: "$15", max_output_tokens: 8000}
orgs:
  - id: acme
    teams:
      - id: ml
        limits: [{name: usd-month, kind: budget, unit: usd, amount: "$10", period: month}]
        keys: [{id: k1, hash: "` + policy.HashKey(testKey) + `"}]
`
	msgs := `"model":"claude-plain","max_tokens":50,"messages":[{"role":"user","content":"hello"}]`
	for _, tc := range []struct{ desc, body, beta, field string }{
		{"fast mode without its beta", `{` + msgs + `,"speed":"fast"}`, "", "speed"},
		{"fast mode with its beta", `{` + msgs + `,"speed":"fast"}`, "fast-mode-2026-02-01", "anthropic-beta"},
		{"fast mode's beta alone", `{` + msgs + `}`, "fast-mode-2026-02-01", "anthropic-beta"},
		{"a pinned region", `{` + msgs + `,"inference_geo":"us"}`, "", "inference_geo"},
	} {
		for _, store := range chargeStores {
			t.Run(tc.desc+"/"+store, func(t *testing.T) {
				r := serveOn(t, store, src)
				req, _ := http.NewRequest(http.MethodPost, r.urls[0]+"/v1/messages", strings.NewReader(tc.body))
				req.Header.Set("x-api-key", testKey)
				if tc.beta != "" {
					req.Header.Set("anthropic-beta", tc.beta)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), tc.field) {
					t.Fatalf("status %d, want 400 naming %s: %s", resp.StatusCode, tc.field, body)
				}
				if n := sim.Stats().Requests; n != 0 {
					t.Fatalf("the upstream was called %d times", n)
				}
				r.mu.Lock()
				defer r.mu.Unlock()
				if len(r.entries) != 0 {
					t.Fatalf("a refusal left ledger entries: %+v", r.entries)
				}
			})
		}
	}
}

// Anthropic bills the speed a request ran at: a fast request its model
// runs at standard speed (fast mode gone or full) reports usage.speed
// "standard" and is billed standard rates. It is reserved at the fast
// multiple and charged at standard, the rule on what the usage reports —
// in whole answers and in streams, on the embedded store and on Redis.
func TestAFastRequestServedAtStandardSpeedIsChargedStandard(t *testing.T) {
	for _, store := range chargeStores {
		t.Run(store, func(t *testing.T) {
			sim, upURL := simulatedUpstream(t, simulated.Options{APIKey: "k", StandardSpeed: true})
			src := `
upstreams:
  - {name: anthropic, kind: anthropic, base_url: "` + upURL + `/v1", api_key: k, models: [claude-fast]}
models:
  claude-fast: {input: "$3", output: "$15", max_output_tokens: 8000, fast_mode: 6, inference_geo_us: 1.1}
orgs:
  - id: acme
    teams:
      - id: ml
        limits: [{name: usd-month, kind: budget, unit: usd, amount: "$10", period: month}]
        keys: [{id: k1, hash: "` + policy.HashKey(testKey) + `"}]
`
			r := serveOn(t, store, src)
			c := anthropic.NewClient(option.WithBaseURL(r.urls[0]+"/"), option.WithAPIKey(testKey), option.WithMaxRetries(0))
			fast := []option.RequestOption{option.WithJSONSet("speed", "fast"), option.WithHeader("anthropic-beta", "fast-mode-2026-02-01")}
			params := anthropic.MessageNewParams{Model: "claude-fast", MaxTokens: 200,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Tell me about budgets, please."))}}
			msg, err := c.Messages.New(context.Background(), params, fast...)
			if err != nil || msg.Usage.Speed != "standard" {
				t.Fatalf("%v, usage %+v", err, msg.Usage)
			}
			st := c.Messages.NewStreaming(context.Background(), params, append(fast, option.WithJSONSet("inference_geo", "us"))...)
			for st.Next() {
			}
			if err := st.Err(); err != nil {
				t.Fatal(err)
			}
			rule := func(tokens, rate int64) int64 { return (tokens*rate + 999_999) / 1_000_000 }
			// One answer ran at standard speed in the global region (1×), the
			// stream at standard speed in the US (1.1×); settlements on Redis
			// may come in either order.
			var recorded int64
			found := map[int64]bool{}
			for _, e := range r.settled(t, 2) {
				matched := false
				for _, perMille := range []int64{1000, 1100} {
					want := rule(e.Usage.InputTokens, 3_000_000*perMille/1000) + rule(e.Usage.OutputTokens, 15_000_000*perMille/1000)
					if int64(e.Cost) == want && !found[perMille] {
						found[perMille], matched = true, true
						break
					}
				}
				if !matched || e.Usage.Estimated || e.Cost*5 > e.Reserved {
					t.Errorf("charged %d µ$ (reserved %d at the fast multiple) for %+v: not the standard speed's rule", e.Cost, e.Reserved, e.Usage)
				}
				recorded += int64(e.Cost)
			}
			billed := sim.Stats().Usage["claude-fast"]
			truth := billed.BilledPromptTokens*3 + billed.BilledCompletionTokens*15
			// The simulated upstream bills the region's extra tokens rounded
			// up: 18 µ$ a request at most.
			if truth < recorded || truth-recorded > 18*2 {
				t.Errorf("recorded %d µ$; the upstream billed %d", recorded, truth)
			}
			t.Logf("%s: a fast request run at standard speed: recorded %d µ$, the upstream billed %d", store, recorded, truth)
		})
	}
}
