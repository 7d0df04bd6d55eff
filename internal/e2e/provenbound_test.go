package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// inputKinds are the kinds of text whose token counts differ most between
// tokenizers, about 6 KB each.
var inputKinds = []struct{ kind, text string }{
	{"prose", strings.Repeat("A hard ceiling is hard: the gateway reserves what a request can cost before it forwards it, and settles what the upstream reported after. ", 44)},
	{"code", strings.Repeat("func (b *Budget) Reserve(ctx context.Context, n int64) (Lease, error) {\n\tif n > b.left { return Lease{}, ErrOver }\n\tb.left -= n\n}\n", 48)},
	{"CJK", strings.Repeat("予算は月ごとに決められ、チームごとに報告される。上限は厳しい。", 66)},
	{"digits", strings.Repeat("3141592653 5897932384 6264338327 ", 180)},
	{"punctuation", strings.Repeat("!?;:.,-=+*&^%$#@~|<>/()[]{} ", 214)},
}

// What the default bound and the calibrated opt-in reserve for each kind
// of input, on each provider whose tokenizer is not public: the default
// (a text's UTF-8 bytes, digits included) is a proof — never below what
// the simulated upstream bills, whose tokenizer makes no token of less
// than a byte — and costs a reservation several times the bill on prose;
// token_ratio: 1.35 reserves close to the bill, and holds only while the
// model's tokenizer stays within 1.35 × BPE (the simulated Claude counts
// 1.2 ×, the simulated Gemini 1.1 × but every digit a token, which the
// calibrated count adds on Gemini models). Output is capped at one token,
// so the reservation is the input's. On the embedded store and on Redis.
func TestTheDefaultBoundIsAProof(t *testing.T) {
	for _, store := range chargeStores {
		t.Run(store, func(t *testing.T) {
			_, upURL := simulatedUpstream(t, simulated.Options{APIKey: "k"})
			src := `
upstreams:
  - {name: anthropic, kind: anthropic, base_url: "` + upURL + `/v1", api_key: k, models: [claude-sonnet-4-5, claude-haiku-4-5]}
  - {name: gemini, kind: gemini, base_url: "` + upURL + `/v1beta", api_key: k, models: [gemini-2.5-flash, gemini-2.5-flash-lite]}
models:
  claude-haiku-4-5: {token_ratio: 1.35}
  gemini-2.5-flash-lite: {token_ratio: 1.35}
orgs:
  - id: acme
    teams:
      - id: ml
        limits: [{name: usd-month, kind: budget, unit: usd, amount: "$10", period: month}]
        keys: [{id: k1, hash: "` + policy.HashKey(testKey) + `"}]
`
			r := serveOn(t, store, src)
			pairs := []struct{ provider, route, proven, calibrated string }{
				{"Claude", "/v1/messages", "claude-sonnet-4-5", "claude-haiku-4-5"},
				{"Gemini", "/v1/chat/completions", "gemini-2.5-flash", "gemini-2.5-flash-lite"},
			}
			n := 0
			var table strings.Builder
			for _, p := range pairs {
				for _, in := range inputKinds {
					ratios := map[string]float64{}
					for _, model := range []string{p.proven, p.calibrated} {
						text, _ := json.Marshal(in.text)
						status, body := callAs(t, testKey, http.MethodPost, r.urls[0]+p.route,
							`{"model":"`+model+`","max_tokens":1,"messages":[{"role":"user","content":`+string(text)+`}]}`)
						if status != http.StatusOK {
							t.Fatalf("%s, %s: %d %s", model, in.kind, status, body)
						}
						n++
						e := r.settled(t, n)[n-1]
						if e.Usage.Estimated || e.Cost <= 0 {
							t.Fatalf("%s, %s: settled %+v", model, in.kind, e)
						}
						ratios[model] = float64(e.Reserved) / float64(e.Cost)
						if model == p.proven && e.Cost > e.Reserved {
							t.Errorf("%s, %s (the proven bound): charged %d µ$ past its reservation of %d", model, in.kind, e.Cost, e.Reserved)
						}
						if model == p.calibrated && e.Cost > e.Reserved {
							t.Logf("%s, %s (calibrated): charged %d µ$ past its reservation of %d", model, in.kind, e.Cost, e.Reserved)
						}
						checkRule(t, e, model)
					}
					if in.kind == "prose" && ratios[p.calibrated] >= ratios[p.proven] {
						t.Errorf("%s prose: the calibrated bound reserves %.2f × the bill, no less than the proof's %.2f ×", p.provider, ratios[p.calibrated], ratios[p.proven])
					}
					fmt.Fprintf(&table, "\n  %-6s %-11s proven %.2f ×, calibrated %.2f ×", p.provider, in.kind, ratios[p.proven], ratios[p.calibrated])
				}
			}
			t.Logf("%s: reserved ÷ charged, by provider and input kind:%s", store, table.String())
		})
	}
}

// checkRule fails unless e was charged its model's catalogue rates (µ$
// a million tokens, input and output) on its reported usage: the
// published rule, rounded up, at sizes with no cache and no tier.
func checkRule(t *testing.T, e budget.Entry, model string) {
	t.Helper()
	r := map[string][2]int64{"claude-sonnet-4-5": {3_000_000, 15_000_000}, "claude-haiku-4-5": {1_000_000, 5_000_000},
		"gemini-2.5-flash": {300_000, 2_500_000}, "gemini-2.5-flash-lite": {100_000, 400_000}}[model]
	up := func(tokens, rate int64) int64 { return (tokens*rate + 999_999) / 1_000_000 }
	if want := up(e.Usage.InputTokens, r[0]) + up(e.Usage.OutputTokens, r[1]); int64(e.Cost) != want {
		t.Errorf("%s: charged %d µ$ for %+v; the rule gives %d", model, e.Cost, e.Usage, want)
	}
}
