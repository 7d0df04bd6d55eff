package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// Anthropic's web search bills $10 per 1,000 searches, and reads each
// search's results into the context: every sampling after a search bills
// the prompt, the results and the calls so far again as input. An
// operator who prices it (models.<name>.web_search) lets it through: the
// gateway reserves each search's fee and the input its loop may read, at
// the tools' max_uses (written where a tool has none), and settles the
// searches the answer reports (usage.server_tool_use.web_search_requests).
// A model without the price refuses the tool.

// searchConfig serves claude-sonnet-4-5 (catalogue-priced) with web
// search priced, and claude-plain without it, under a ceiling.
func searchConfig(upstream, ceiling string) string {
	return `
upstreams:
  - {name: anthropic, kind: anthropic, base_url: "` + upstream + `/v1", api_key: k, models: [claude-sonnet-4-5, claude-plain]}
models:
  claude-sonnet-4-5:
    web_search: {price: "$0.01", max_uses: 5, result_tokens: 2000}
  claude-plain: {input: "$3", output: "$15", max_output_tokens: 8000}
orgs:
  - id: acme
    teams:
      - id: ml
        limits: [{name: usd-month, kind: budget, unit: usd, amount: "` + ceiling + `", period: month}]
        keys: [{id: k1, hash: "` + policy.HashKey(testKey) + `"}]
`
}

// searchFee is Anthropic's price of one search, in µ$.
const searchFee = 10_000

// searchTruth is what the simulated upstream billed claude-sonnet-4-5 by
// Anthropic's rule (no cache in these requests): its tokens at Sonnet's
// rates and its searches at the fee.
func searchTruth(sim *simulated.Server) int64 {
	b := sim.Stats().Usage["claude-sonnet-4-5"]
	return b.BilledPromptTokens*3 + b.BilledCompletionTokens*15 + b.BilledToolCalls*searchFee
}

func searching(model string, maxUses int64, text string) anthropic.MessageNewParams {
	tool := &anthropic.WebSearchTool20250305Param{}
	if maxUses > 0 {
		tool.MaxUses = anthropic.Int(maxUses)
	}
	return anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 300,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))},
		Tools:    []anthropic.ToolUnionParam{{OfWebSearchTool20250305: tool}}}
}

func TestWebSearchesAreChargedAsBilled(t *testing.T) {
	for _, store := range chargeStores {
		t.Run(store, func(t *testing.T) {
			sim, upURL := simulatedUpstream(t, simulated.Options{APIKey: "k"})
			r := serveOn(t, store, searchConfig(upURL, "$100"))
			var clients []anthropic.Client
			for _, u := range r.urls {
				clients = append(clients, anthropic.NewClient(option.WithBaseURL(u+"/"), option.WithAPIKey(testKey), option.WithMaxRetries(0)))
			}
			var searches int64
			steps := []struct {
				uses   int64
				stream bool
			}{{3, false}, {0, false}, {5, true}, {1, true}, {2, false}, {4, true}}
			for i, s := range steps {
				c := clients[i%len(clients)]
				params := searching("claude-sonnet-4-5", s.uses, fmt.Sprintf("What changed in the news today, story %d?", i))
				var msg anthropic.Message
				if s.stream {
					st := c.Messages.NewStreaming(context.Background(), params)
					for st.Next() {
						if err := msg.Accumulate(st.Current()); err != nil {
							t.Fatal(err)
						}
					}
					if err := st.Err(); err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
				} else {
					m, err := c.Messages.New(context.Background(), params)
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					msg = *m
				}
				n := msg.Usage.ServerToolUse.WebSearchRequests
				if limit := max(s.uses, 0); n < 1 || limit > 0 && n > limit || limit == 0 && n > 5 {
					t.Fatalf("step %d: %d searches for max_uses %d (none: the gateway's 5)", i, n, s.uses)
				}
				if msg.Content[0].Type != "server_tool_use" {
					t.Fatalf("step %d: the answer begins with %q, not the search", i, msg.Content[0].Type)
				}
				searches += n
			}
			// A model whose operator has not priced the search refuses it.
			_, err := clients[0].Messages.New(context.Background(), searching("claude-plain", 2, "Search."))
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Error(), "tools[0].type") {
				t.Fatalf("a search on a model with no search price: %v", err)
			}
			var recorded, rule, charged int64
			for _, e := range r.settled(t, len(steps)) {
				if e.Usage.Estimated || e.Cost > e.Reserved {
					t.Errorf("entry %+v: want its reported usage, within its reservation", e)
				}
				recorded += int64(e.Cost)
				rule += ruleCost(e.Usage) + e.Usage.WebSearches*searchFee
				charged += e.Usage.WebSearches
			}
			if truth := searchTruth(sim); recorded != rule || recorded != truth || charged != searches {
				t.Errorf("recorded %d µ$ for %d searches; the rule on the reported usage %d, the upstream billed %d for %d searches",
					recorded, charged, rule, truth, searches)
			}
			t.Logf("%s: %d searches; recorded %d µ$ = the upstream's bill", store, searches, recorded)
		})
	}
}

// Parallel searching requests against a small ceiling: the ceiling holds,
// and what was recorded is what the upstream billed.
func TestWebSearchesKeepTheCeiling(t *testing.T) {
	for _, store := range chargeStores {
		t.Run(store, func(t *testing.T) {
			sim, upURL := simulatedUpstream(t, simulated.Options{APIKey: "k"})
			const ceiling = 400_000
			r := serveOn(t, store, searchConfig(upURL, "$0.40"))
			var (
				wg              sync.WaitGroup
				mu              sync.Mutex
				served, refused int
			)
			for i := range 24 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := anthropic.NewClient(option.WithBaseURL(r.urls[i%len(r.urls)]+"/"), option.WithAPIKey(testKey), option.WithMaxRetries(0))
					_, err := c.Messages.New(context.Background(), searching("claude-sonnet-4-5", 5, fmt.Sprintf("Find everything about topic %d.", i)))
					var apiErr *anthropic.Error
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						served++
					case errors.As(err, &apiErr) && budgetRefused(apiErr.StatusCode, apiErr.RawJSON()):
						refused++
					default:
						t.Errorf("request %d: %v", i, err)
					}
				}()
			}
			wg.Wait()
			var recorded int64
			for _, e := range r.settled(t, served) {
				recorded += int64(e.Cost)
			}
			truth := searchTruth(sim)
			if served == 0 || refused == 0 || recorded != truth || truth > ceiling {
				t.Fatalf("%d served, %d refused; recorded %d µ$, the upstream billed %d, the ceiling %d", served, refused, recorded, truth, ceiling)
			}
			t.Logf("%s: %d served, %d refused; billed %d µ$ of a %d ceiling, all recorded", store, served, refused, truth, ceiling)
		})
	}
}

var _ = budget.Entry{}
