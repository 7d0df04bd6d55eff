package e2e_test

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// OpenAI's web search (a Responses tool) bills per call — $10 per 1,000 —
// and reads each search's results into the context as input. An operator
// who prices it (models.<name>.web_search) lets it through: the gateway
// reserves each call's fee and the input its loop may read, at the
// request's max_tool_calls (written where the request has none), and
// settles the web_search_call items the answer holds, which OpenAI's
// usage does not count. A model without the price refuses the tool.

// openAISearchConfig serves gpt-4.1 (catalogue-priced: $2 in, $8 out a
// million) with web search priced, and gpt-4o-mini without it.
func openAISearchConfig(upstream, ceiling string) string {
	return `
upstreams:
  - {name: openai, base_url: "` + upstream + `/v1", api_key: k, models: [gpt-4.1, gpt-4o-mini]}
models:
  gpt-4.1:
    web_search: {price: "$0.01", max_uses: 5, result_tokens: 2000}
orgs:
  - id: acme
    teams:
      - id: ml
        limits: [{name: usd-month, kind: budget, unit: usd, amount: "` + ceiling + `", period: month}]
        keys: [{id: k1, hash: "` + policy.HashKey(testKey) + `"}]
`
}

// openAISearchTruth is what the simulated upstream billed gpt-4.1 by
// OpenAI's rule: its tokens at the model's rates, its calls at the fee.
func openAISearchTruth(sim *simulated.Server) int64 {
	b := sim.Stats().Usage["gpt-4.1"]
	return b.BilledPromptTokens*2 + b.BilledCompletionTokens*8 + b.BilledToolCalls*searchFee
}

func openAISearching(model string, calls int64, text string) responses.ResponseNewParams {
	p := responses.ResponseNewParams{Model: model, MaxOutputTokens: param.NewOpt[int64](300),
		Input: responses.ResponseNewParamsInputUnion{OfString: param.NewOpt(text)},
		Tools: []responses.ToolUnionParam{{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}}}}
	if calls > 0 {
		p.MaxToolCalls = param.NewOpt(calls)
	}
	return p
}

func TestOpenAIWebSearchesAreChargedAsBilled(t *testing.T) {
	for _, store := range chargeStores {
		t.Run(store, func(t *testing.T) {
			sim, upURL := simulatedUpstream(t, simulated.Options{APIKey: "k"})
			r := serveOn(t, store, openAISearchConfig(upURL, "$100"))
			var clients []openai.Client
			for _, u := range r.urls {
				clients = append(clients, openai.NewClient(option.WithBaseURL(u+"/v1/"), option.WithAPIKey(testKey), option.WithMaxRetries(0)))
			}
			var searches int64
			steps := []struct {
				calls  int64
				stream bool
			}{{3, false}, {0, false}, {5, true}, {1, true}, {2, false}, {0, true}}
			for i, s := range steps {
				c := clients[i%len(clients)]
				params := openAISearching("gpt-4.1", s.calls, fmt.Sprintf("What changed in the news today, story %d?", i))
				var resp *responses.Response
				if s.stream {
					st := c.Responses.NewStreaming(ctx, params)
					for st.Next() {
						if ev := st.Current(); ev.Type == "response.completed" {
							r := ev.Response
							resp = &r
						}
					}
					if err := st.Err(); err != nil || resp == nil {
						t.Fatalf("step %d: %v, completed %v", i, err, resp != nil)
					}
				} else {
					var err error
					if resp, err = c.Responses.New(ctx, params); err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
				}
				var n int64
				for _, it := range resp.Output {
					if it.Type == "web_search_call" {
						n++
					}
				}
				if limit := max(s.calls, 0); n < 1 || limit > 0 && n > limit || limit == 0 && n > 5 {
					t.Fatalf("step %d: %d searches for max_tool_calls %d (none: the gateway's 5)", i, n, s.calls)
				}
				if resp.OutputText() == "" {
					t.Fatalf("step %d: no answer after the searches", i)
				}
				searches += n
			}
			// A model whose operator has not priced the search refuses it.
			_, err := clients[0].Responses.New(ctx, openAISearching("gpt-4o-mini", 2, "Search."))
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "tools[0].type" {
				t.Fatalf("a search on a model with no search price: %v", err)
			}
			var recorded, rule, charged int64
			for _, e := range r.settled(t, len(steps)) {
				if e.Usage.Estimated || e.Cost > e.Reserved || len(e.Usage.Unreported) > 0 {
					t.Errorf("entry %+v: want its reported usage, within its reservation", e)
				}
				recorded += int64(e.Cost)
				rule += e.Usage.InputTokens*2 + e.Usage.OutputTokens*8 + e.Usage.WebSearches*searchFee
				charged += e.Usage.WebSearches
			}
			if truth := openAISearchTruth(sim); recorded != rule || recorded != truth || charged != searches {
				t.Errorf("recorded %d µ$ for %d searches; the rule on the reported usage %d, the upstream billed %d for %d searches",
					recorded, charged, rule, truth, searches)
			}
			t.Logf("%s: %d searches; recorded %d µ$ = the upstream's bill", store, searches, recorded)
		})
	}
}

// Parallel searching requests against a small ceiling: the ceiling holds,
// and what was recorded is what the upstream billed.
func TestOpenAIWebSearchesKeepTheCeiling(t *testing.T) {
	for _, store := range chargeStores {
		t.Run(store, func(t *testing.T) {
			sim, upURL := simulatedUpstream(t, simulated.Options{APIKey: "k"})
			const ceiling = 300_000
			r := serveOn(t, store, openAISearchConfig(upURL, "$0.30"))
			var (
				wg              sync.WaitGroup
				mu              sync.Mutex
				served, refused int
			)
			for i := range 24 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := openai.NewClient(option.WithBaseURL(r.urls[i%len(r.urls)]+"/v1/"), option.WithAPIKey(testKey), option.WithMaxRetries(0))
					_, err := c.Responses.New(ctx, openAISearching("gpt-4.1", 5, fmt.Sprintf("Find everything about topic %d.", i)))
					var apiErr *openai.Error
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
			truth := openAISearchTruth(sim)
			if served == 0 || refused == 0 || recorded != truth || truth > ceiling {
				t.Fatalf("%d served, %d refused; recorded %d µ$, the upstream billed %d, the ceiling %d", served, refused, recorded, truth, ceiling)
			}
			t.Logf("%s: %d served, %d refused; billed %d µ$ of a %d ceiling, all recorded", store, served, refused, truth, ceiling)
		})
	}
}
