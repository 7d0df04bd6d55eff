package e2e_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// Gemini's tokenizer makes every digit a token; BPE groups three in one.
// A prompt of 202,000 digits counted as BPE × 1.35 was bounded at ~91k
// tokens, billed ≥ 202k and crossed the 200k price tier: 4.4 × its
// reservation. By default a Gemini model's text is bounded by its bytes,
// a proof, which counts every digit; a calibrated token_ratio counts
// digits one by one on top of the BPE count (digit_tokens, on for
// Gemini), so its reservation holds too; and with digit_tokens: false
// besides, the calibrated count alone shows what that prevents: the same
// prompt charged past its reservation, an overrun.
func TestAGeminiPromptOfDigitsIsBoundedByItsDigits(t *testing.T) {
	for _, store := range chargeStores {
		t.Run(store, func(t *testing.T) {
			sim, upURL := simulatedUpstream(t, simulated.Options{APIKey: "k"})
			src := `
upstreams:
  - {name: gemini, kind: gemini, base_url: "` + upURL + `/v1beta", api_key: k, models: [gemini-2.5-pro, gemini-2.5-flash, gemini-2.5-flash-lite]}
models:
  gemini-2.5-flash: {token_ratio: 1.35}
  gemini-2.5-flash-lite: {token_ratio: 1.35, digit_tokens: false}
orgs:
  - id: acme
    teams:
      - id: ml
        limits: [{name: usd-month, kind: budget, unit: usd, amount: "$10", period: month}]
        keys: [{id: k1, hash: "` + policy.HashKey(testKey) + `"}]
`
			r := serveOn(t, store, src)

			digits := strings.Repeat("3141592653", 20_200)
			for _, model := range []string{"gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite"} {
				status, body := callAs(t, testKey, http.MethodPost, r.urls[0]+"/v1/chat/completions",
					`{"model":"`+model+`","max_tokens":10,"messages":[{"role":"user","content":"`+digits+`"}]}`)
				if status != 200 {
					t.Fatalf("%s: %d %s", model, status, body)
				}
			}
			got := r.settled(t, 3)
			byModel := map[string]budget.Entry{}
			for _, e := range got {
				byModel[e.Model] = e
			}
			billed := sim.Stats().Usage
			pro, flash, lite := byModel["gemini-2.5-pro"], byModel["gemini-2.5-flash"], byModel["gemini-2.5-flash-lite"]
			if pro.Usage.Estimated || pro.Usage.InputTokens != billed["gemini-2.5-pro"].BilledPromptTokens || pro.Usage.InputTokens < 202_000 {
				t.Fatalf("gemini-2.5-pro settled at %+v; the upstream billed %d prompt tokens", pro.Usage, billed["gemini-2.5-pro"].BilledPromptTokens)
			}
			// Past 200k input tokens the whole request bills at the tier:
			// $2.50 in, $15 out per 1M.
			if want := (pro.Usage.InputTokens*2_500_000+999_999)/1_000_000 + pro.Usage.OutputTokens*15; int64(pro.Cost) != want {
				t.Errorf("gemini-2.5-pro charged %d µ$, the tier's rule gives %d", pro.Cost, want)
			}
			if pro.Cost > pro.Reserved {
				t.Errorf("gemini-2.5-pro (bounded by its bytes) charged %d µ$ past its reservation of %d", pro.Cost, pro.Reserved)
			}
			if flash.Usage.InputTokens != billed["gemini-2.5-flash"].BilledPromptTokens || flash.Cost > flash.Reserved {
				t.Errorf("gemini-2.5-flash (token_ratio: 1.35, digits one by one) charged %d µ$ past its reservation of %d", flash.Cost, flash.Reserved)
			}
			if lite.Usage.InputTokens != billed["gemini-2.5-flash-lite"].BilledPromptTokens || lite.Cost <= lite.Reserved {
				t.Errorf("gemini-2.5-flash-lite (token_ratio: 1.35, digit_tokens: false) charged %d µ$ of %d reserved for %d tokens: want the calibrated count to fall short",
					lite.Cost, lite.Reserved, lite.Usage.InputTokens)
			}
			t.Logf("%s: 202,000 digits billed as %d tokens; charged/reserved µ$: proven %d/%d, calibrated with digits %d/%d, calibrated without digits %d/%d (%.1f×)",
				store, pro.Usage.InputTokens, pro.Cost, pro.Reserved, flash.Cost, flash.Reserved, lite.Cost, lite.Reserved, float64(lite.Cost)/float64(lite.Reserved))
		})
	}
}
