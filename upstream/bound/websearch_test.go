package bound_test

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/upstream/bound"
	"github.com/tollgate-dev/tollgate/upstream/convert"
)

const searchBody = `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"what happened today?"}],"tools":[%s]}`

func searchRequest(tools string) string { return strings.Replace(searchBody, "%s", tools, 1) }

// Anthropic's web search is refused on a model its operator has not
// priced it for, and bounded on one that is: each search's fee, and the
// input each sampling after a search reads again — the prompt, the
// results so far, the output before it.
func TestWebSearchIsBoundedOrRefused(t *testing.T) {
	m := model(t, "o200k_base")
	tool := `{"type":"web_search_20250305","name":"web_search","max_uses":3}`
	_, err := prepare(t, m, bound.Messages, searchRequest(tool))
	refusal(t, err, "tools[0].type")

	m.WebSearch = bound.WebSearch{MaxUses: 5, ResultTokens: 2000}
	plain, err := prepare(t, m, bound.Messages, searchRequest(`{"name":"f","input_schema":{"type":"object"}}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := prepare(t, m, bound.Messages, searchRequest(tool))
	if err != nil {
		t.Fatal(err)
	}
	if p.WebSearches != 3 {
		t.Fatalf("WebSearches = %d, want the tool's max_uses 3", p.WebSearches)
	}
	if string(p.Body) != searchRequest(tool) {
		t.Fatalf("a tool with max_uses is forwarded as sent; got %s", p.Body)
	}
	// The prompt is read 4 times, 2,000 tokens of results after each of 3
	// searches are read 3+2+1 times, and the output 3 times.
	prompt := p.InputTokens - (2000*6 + 3*100)
	if prompt/4*4 != prompt || prompt/4 < plain.InputTokens-1300 {
		t.Fatalf("InputTokens = %d: not 4 × a prompt + 12,300 (the prompt alone with a custom tool: %d)", p.InputTokens, plain.InputTokens)
	}
	price := budget.Price{Input: 3_000_000, Output: 15_000_000, WebSearch: 10_000}
	c, _, err := p.Cost(price, 0)
	if err != nil {
		t.Fatal(err)
	}
	tokens, _ := price.Cost(budget.Usage{InputTokens: p.InputTokens, OutputTokens: 100})
	if c != tokens+30_000 {
		t.Fatalf("Cost = %d, want the tokens' %d + 3 searches at 10,000", c, tokens)
	}
	if _, _, err := p.Cost(budget.Price{Input: 3_000_000, Output: 15_000_000}, 0); err == nil {
		t.Fatal("a search without a price was bounded")
	} else {
		refusal(t, err, "tools")
	}

	// Without max_uses the provider sets no limit: the gateway writes the
	// model's.
	p, err = prepare(t, m, bound.Messages, searchRequest(`{"type":"web_search_20250305","name":"web_search"}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.WebSearches != 5 || !strings.Contains(string(p.Body), `{"type":"web_search_20250305","name":"web_search","max_uses":5}`) {
		t.Fatalf("WebSearches %d, body %s: want max_uses 5 written", p.WebSearches, p.Body)
	}

	for _, tc := range []struct{ tools, param string }{
		{`{"type":"web_search_20250305","name":"web_search","max_uses":6}`, "tools[0].max_uses"},
		{`{"type":"web_search_20250305","name":"web_search","max_uses":0}`, "tools[0].max_uses"},
		{`{"type":"web_search_20250305","name":"web_search","max_uses":3},{"type":"web_search_20260209","name":"s2","max_uses":3}`, "tools"},
		{`{"type":"web_search_20250305","name":"web_search","Max_Uses":1}`, "tools[0].Max_Uses"},
		{`{"type":"web_search_20250305","name":"web_search","max_uses":1,"max_uses":9}`, "tools[0].max_uses"},
		{`{"type":"web_fetch_20250910","name":"web_fetch","max_uses":1}`, "tools[0].type"},
	} {
		_, err := prepare(t, m, bound.Messages, searchRequest(tc.tools))
		refusal(t, err, tc.param)
	}
}

// Searches are charged as the provider reports them
// (server_tool_use.web_search_requests), and at the request's most where
// its usage leaves them out.
func TestWebSearchesAreCharged(t *testing.T) {
	m := model(t, "o200k_base")
	m.WebSearch = bound.WebSearch{MaxUses: 5, ResultTokens: 2000}
	p, err := prepare(t, m, bound.Messages, searchRequest(`{"type":"web_search_20250305","name":"web_search","max_uses":4}`))
	if err != nil {
		t.Fatal(err)
	}
	price := budget.Price{Input: 3_000_000, Output: 15_000_000, WebSearch: 10_000}
	all := convert.HasInput | convert.HasOutput | convert.HasCachedInput | convert.HasCacheWrite | convert.HasCacheWrite1h | convert.HasReasoning | convert.HasInputAudio | convert.HasOutputAudio
	got := p.Charge(convert.Usage{Input: 9000, Output: 50, WebSearches: 2, Has: all | convert.HasWebSearches}, price)
	if got.WebSearches != 2 || got.Estimated {
		t.Fatalf("reported 2 searches, charged %+v", got)
	}
	got = p.Charge(convert.Usage{Input: 9000, Output: 50, Has: all}, price)
	if got.WebSearches != 4 || len(got.Unreported) != 1 || got.Unreported[0] != "web_searches" {
		t.Fatalf("searches left out: charged %+v, want the request's 4, named", got)
	}
	if r := p.Reserved(); r.WebSearches != 4 {
		t.Fatalf("Reserved %+v, want its 4 searches", r)
	}
	c, _ := price.Cost(budget.Usage{InputTokens: 9000, OutputTokens: 50, WebSearches: 2})
	if want := budget.Money(27_000 + 750 + 20_000); c != want {
		t.Fatalf("Cost = %d, want %d", c, want)
	}
}

const responsesSearchBody = `{"model":"m","max_output_tokens":100,"input":"what happened today?","tools":[%s]%s}`

func responsesSearch(tools, rest string) string {
	return strings.Replace(strings.Replace(responsesSearchBody, "%s", tools, 1), "%s", rest, 1)
}

// OpenAI's web search (a Responses tool) is refused on a model its
// operator has not priced it for, and bounded on one that is as
// Anthropic's: the request's max_tool_calls — its limit on every hosted
// tool's calls — is the most searches, and is written where it is not
// sent; each search's fee and the input its loop reads again are
// reserved.
func TestOpenAIWebSearchIsBoundedOrRefused(t *testing.T) {
	m := model(t, "o200k_base")
	tool := `{"type":"web_search","search_context_size":"high","filters":{"allowed_domains":["example.com"]}}`
	_, err := prepare(t, m, bound.Responses, responsesSearch(tool, `,"max_tool_calls":3`))
	refusal(t, err, "tools[0].type")

	m.WebSearch = bound.WebSearch{MaxUses: 5, ResultTokens: 2000}
	plain, err := prepare(t, m, bound.Responses, responsesSearch(`{"type":"function","name":"f","parameters":{"type":"object"}}`, ""))
	if err != nil {
		t.Fatal(err)
	}
	p, err := prepare(t, m, bound.Responses, responsesSearch(tool, `,"max_tool_calls":3`))
	if err != nil {
		t.Fatal(err)
	}
	if p.WebSearches != 3 || string(p.Body) != responsesSearch(tool, `,"max_tool_calls":3`) {
		t.Fatalf("WebSearches %d, body %s: want max_tool_calls 3, forwarded as sent", p.WebSearches, p.Body)
	}
	prompt := p.InputTokens - (2000*6 + 3*100)
	if prompt/4*4 != prompt || prompt/4 < plain.InputTokens-100 {
		t.Fatalf("InputTokens = %d: not 4 × a prompt + 12,300 (the prompt alone with a function: %d)", p.InputTokens, plain.InputTokens)
	}
	price := budget.Price{Input: 2_500_000, Output: 10_000_000, WebSearch: 10_000}
	c, _, err := p.Cost(price, 0)
	if err != nil {
		t.Fatal(err)
	}
	if tokens, _ := price.Cost(budget.Usage{InputTokens: p.InputTokens, OutputTokens: 100}); c != tokens+30_000 {
		t.Fatalf("Cost = %d, want the tokens' %d + 3 searches at 10,000", c, tokens)
	}

	// Without max_tool_calls the provider sets no limit: the gateway
	// writes the model's, for a search in a turn's additional tools too.
	for _, body := range []string{
		responsesSearch(`{"type":"web_search_preview"}`, ""),
		`{"model":"m","input":[{"role":"user","content":"hi"},{"type":"additional_tools","tools":[{"type":"web_search_2025_08_26"}]}]}`,
	} {
		p, err = prepare(t, m, bound.Responses, body)
		if err != nil {
			t.Fatal(err)
		}
		if p.WebSearches != 5 || !strings.HasSuffix(string(p.Body), `,"max_tool_calls":5}`) {
			t.Fatalf("WebSearches %d, body %s: want max_tool_calls 5 written", p.WebSearches, p.Body)
		}
	}
	// A request without a search keeps its max_tool_calls and runs none.
	if p, err = prepare(t, m, bound.Responses, responsesSearch(`{"type":"function","name":"f"}`, `,"max_tool_calls":50`)); err != nil || p.WebSearches != 0 {
		t.Fatalf("no search: %v, %+v", err, p)
	}

	for _, tc := range []struct{ tools, rest, param string }{
		{tool, `,"max_tool_calls":6`, "max_tool_calls"},
		{tool, `,"max_tool_calls":0`, "max_tool_calls"},
		{tool, `,"max_tool_calls":1,"max_tool_calls":9`, "max_tool_calls"},
		{tool, `,"Max_Tool_Calls":1`, "Max_Tool_Calls"},
		{tool, `,"max_tool_calls":2.5`, "max_tool_calls"},
		{`{"type":"web_search","search_context_size":"high","search_context_size":"low"}`, `,"max_tool_calls":1`, "tools[0].search_context_size"},
		{`{"type":"web_search","max_uses":3}`, `,"max_tool_calls":1`, "tools[0].max_uses"},
		{`{"type":"file_search","vector_store_ids":["v"]}`, "", "tools[0].type"},
		{`{"type":"namespace","name":"n","tools":[{"type":"web_search"}]}`, "", "tools[0].tools[0].type"},
	} {
		_, err := prepare(t, m, bound.Responses, responsesSearch(tc.tools, tc.rest))
		refusal(t, err, tc.param)
	}
}
