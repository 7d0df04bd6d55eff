package e2e_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// Anthropic bills a prompt cache write by its TTL: 1.25 × input for five
// minutes, 2 × for an hour, reported apart in usage.cache_creation. The
// gateway reserves an hour's writes at the hour's rate when the request
// asks for one, and settles each part at its own rate; a model with no
// one-hour price refuses ttl "1h" rather than charge it at the
// five-minute rate.

// Claude Sonnet 4.5's published rates, in µ$ per 1M tokens, as Anthropic
// lists them: the rule the recorded spend is checked against.
var sonnetRule = struct{ input, read, write5m, write1h, output int64 }{3_000_000, 300_000, 3_750_000, 6_000_000, 15_000_000}

// ruleCost is what u costs by the published rule, each kind rounded up to
// the micro-dollar.
func ruleCost(u budget.Usage) int64 {
	up := func(tokens, rate int64) int64 { return (tokens*rate + 999_999) / 1_000_000 }
	plain := u.InputTokens - u.CachedInputTokens - u.CacheWriteTokens
	return up(plain, sonnetRule.input) + up(u.CachedInputTokens, sonnetRule.read) +
		up(u.CacheWriteTokens-u.CacheWrite1hTokens, sonnetRule.write5m) + up(u.CacheWrite1hTokens, sonnetRule.write1h) +
		up(u.OutputTokens, sonnetRule.output)
}

func TestCacheWritesAreChargedByTheirTTL(t *testing.T) {
	for _, store := range chargeStores {
		t.Run(store, func(t *testing.T) {
			sim, upURL := simulatedUpstream(t, simulated.Options{APIKey: "k"})
			// claude-sonnet-4-5 is priced by the catalogue (its one-hour
			// write rate included); claude-own by the config, without one.
			src := `
upstreams:
  - {name: anthropic, kind: anthropic, base_url: "` + upURL + `/v1", api_key: k, models: [claude-sonnet-4-5, claude-own]}
models:
  claude-own: {input: "$3", cached_input: "$0.30", cache_write: "$3.75", output: "$15", max_output_tokens: 8000}
orgs:
  - id: acme
    teams:
      - id: ml
        limits: [{name: usd-month, kind: budget, unit: usd, amount: "$1", period: month}]
        keys: [{id: k1, hash: "` + policy.HashKey(testKey) + `"}]
`
			r := serveOn(t, store, src)
			var clients []anthropic.Client
			for _, u := range r.urls {
				clients = append(clients, anthropic.NewClient(option.WithBaseURL(u+"/"), option.WithAPIKey(testKey), option.WithMaxRetries(0)))
			}
			hour := anthropic.CacheControlEphemeralParam{TTL: anthropic.CacheControlEphemeralTTLTTL1h}
			five := anthropic.CacheControlEphemeralParam{TTL: anthropic.CacheControlEphemeralTTLTTL5m}
			manual := strings.Repeat("The gateway reserves before it forwards and settles after. ", 300) // ~3,000 tokens
			notes := strings.Repeat("Every budget is a hard ceiling, on one machine or fifty. ", 150)
			ask := func(model, system string, sysCache anthropic.CacheControlEphemeralParam, user string, userCache *anthropic.CacheControlEphemeralParam) anthropic.MessageNewParams {
				block := anthropic.TextBlockParam{Text: user}
				if userCache != nil {
					block.CacheControl = *userCache
				}
				return anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 200,
					System:   []anthropic.TextBlockParam{{Text: system, CacheControl: sysCache}},
					Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.ContentBlockParamUnion{OfText: &block})}}
			}
			steps := []struct {
				params anthropic.MessageNewParams
				stream bool
				want   func(u anthropic.Usage) bool
			}{
				// The manual written for an hour, then read.
				{ask("claude-sonnet-4-5", manual, hour, "Summarise.", nil), false,
					func(u anthropic.Usage) bool {
						return u.CacheCreation.Ephemeral1hInputTokens > 3000 && u.CacheReadInputTokens == 0
					}},
				{ask("claude-sonnet-4-5", manual, hour, "Summarise again.", nil), false,
					func(u anthropic.Usage) bool { return u.CacheReadInputTokens > 3000 && u.CacheCreationInputTokens == 0 }},
				// Read for an hour's prefix, notes written for five minutes.
				{ask("claude-sonnet-4-5", manual, hour, notes, &five), false,
					func(u anthropic.Usage) bool {
						return u.CacheReadInputTokens > 3000 && u.CacheCreation.Ephemeral5mInputTokens > 1000 && u.CacheCreation.Ephemeral1hInputTokens == 0
					}},
				// A stream whose message_start reports an hour's write.
				{ask("claude-sonnet-4-5", notes+manual, hour, "Go on.", nil), true,
					func(u anthropic.Usage) bool { return u.CacheCreation.Ephemeral1hInputTokens > 4000 }},
			}
			for i, s := range steps {
				c := clients[i%len(clients)]
				var usage anthropic.Usage
				if s.stream {
					st := c.Messages.NewStreaming(context.Background(), s.params)
					var msg anthropic.Message
					for st.Next() {
						if err := msg.Accumulate(st.Current()); err != nil {
							t.Fatal(err)
						}
					}
					if err := st.Err(); err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					usage = msg.Usage
				} else {
					msg, err := c.Messages.New(context.Background(), s.params)
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					usage = msg.Usage
				}
				if !s.want(usage) {
					t.Fatalf("step %d: the upstream's usage %+v is not the case the step is for", i, usage)
				}
			}
			// A model with no one-hour rate refuses ttl "1h", naming it.
			_, err := clients[0].Messages.New(context.Background(), ask("claude-own", manual, hour, "Hi.", nil))
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Error(), "cache_control.ttl") {
				t.Fatalf("an hour's write on a model with no price for it: %v", err)
			}
			got := r.settled(t, len(steps))
			var recorded, rule int64
			var w1h, w5m, read int64
			for _, e := range got {
				if e.Usage.Estimated || e.Cost > e.Reserved {
					t.Errorf("entry %+v: want its reported usage, within its reservation", e)
				}
				recorded += int64(e.Cost)
				rule += ruleCost(e.Usage)
				w1h += e.Usage.CacheWrite1hTokens
				w5m += e.Usage.CacheWriteTokens - e.Usage.CacheWrite1hTokens
				read += e.Usage.CachedInputTokens
			}
			billed := sim.Stats().Usage["claude-sonnet-4-5"]
			if w1h != billed.CacheWrite1hTokens || w5m != billed.CacheWrite5mTokens || read != billed.CacheReadTokens {
				t.Errorf("ledger: 1h %d 5m %d read %d; the upstream billed 1h %d 5m %d read %d",
					w1h, w5m, read, billed.CacheWrite1hTokens, billed.CacheWrite5mTokens, billed.CacheReadTokens)
			}
			if recorded != rule {
				t.Errorf("recorded %d µ$, the published rule on the reported usage %d", recorded, rule)
			}
			t.Logf("%s: 1h writes %d, 5m writes %d, reads %d tokens; recorded %d µ$ = the rule", store, w1h, w5m, read, recorded)
		})
	}
}
