package e2e_test

import (
	"context"
	"net/http/httptest"
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
			sim, err := simulated.New(simulated.Options{APIKey: "k"})
			if err != nil {
				t.Fatal(err)
			}
			up := httptest.NewServer(sim)
			t.Cleanup(up.Close)
			src := `
upstreams:
  - {name: anthropic, kind: anthropic, base_url: "` + up.URL + `/v1", api_key: k, models: [claude-fast]}
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
