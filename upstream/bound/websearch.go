package bound

import (
	"strconv"
	"strings"
)

// WebSearch is what lets a model's requests use the provider's web
// search — Anthropic's server tool (web_search_*), OpenAI's Responses
// tool (web_search, web_search_preview) — which the provider runs in a
// loop of its own: each search is billed a fee (budget.Price.WebSearch),
// and its results are read into the context — input the request's text
// does not show. The zero value refuses the tool.
type WebSearch struct {
	// MaxUses is the most searches one request may run: a tool's
	// max_uses (Anthropic) or the request's max_tool_calls (OpenAI) may
	// not pass it, and a request without one is sent with it.
	MaxUses int64
	// ResultTokens bounds the input one search's results add. The
	// provider sets no limit on them: it is the operator's figure
	// (models.<name>.web_search.result_tokens), and the bound is a proof
	// only as far as it holds.
	ResultTokens int64
}

// webSearchTool reports whether an Anthropic tool type is the web search.
func webSearchTool(t string) bool { return strings.HasPrefix(t, "web_search_") }

// openAISearchTool reports whether a Responses tool type is the web
// search: web_search and web_search_preview, and their dated versions.
func openAISearchTool(t string) bool {
	return t == "web_search" || t == "web_search_preview" ||
		strings.HasPrefix(t, "web_search_20") || strings.HasPrefix(t, "web_search_preview_20")
}

// searches sets the most web searches r may run at m — its web search
// tools' max_uses together — and writes max_uses into a tool that has
// none. A request with no web search tool runs none.
func (r *messagesRequest) searches(m *Model, p *Prepared) error {
	var total int64
	edited := false
	texts := make([]string, len(r.Tools))
	for i := range r.Tools {
		t := &r.Tools[i]
		texts[i] = t.text
		if !webSearchTool(t.Type) {
			continue
		}
		at := "tools[" + strconv.Itoa(i) + "].max_uses"
		uses := m.WebSearch.MaxUses
		switch {
		case t.MaxUses == nil:
			// Written into the tool: the provider's own default is no limit.
			texts[i] = t.text[:len(t.text)-1] + `,"max_uses":` + strconv.FormatInt(uses, 10) + "}"
			edited = true
		case *t.MaxUses < 1 || *t.MaxUses > uses:
			return badRequest(at, "must be between 1 and %d (models.%s.web_search.max_uses)", uses, m.Name)
		default:
			uses = *t.MaxUses
		}
		total += uses
	}
	if total > m.WebSearch.MaxUses {
		return badRequest("tools", "the web search tools may run %d searches together; the gateway bounds a request of %s at %d", total, m.Name, m.WebSearch.MaxUses)
	}
	p.WebSearches = total
	if edited {
		p.set("tools", []byte("["+strings.Join(texts, ",")+"]"))
	}
	return nil
}

// searches sets the most web searches r may run at m. OpenAI bounds them
// with max_tool_calls, the request's limit on all its hosted tools' calls
// (the web search is the one the gateway lets through): it may not pass
// m's, and a request with a web search and without it is sent with m's.
func (r *responsesRequest) searches(m *Model, p *Prepared) error {
	search := false
	for _, tools := range r.toolLists() {
		for i := range tools {
			search = search || openAISearchTool(tools[i].Type)
		}
	}
	if !search {
		return nil
	}
	uses := m.WebSearch.MaxUses
	switch {
	case r.MaxToolCalls == nil:
		p.set("max_tool_calls", strconv.AppendInt(nil, uses, 10))
	case *r.MaxToolCalls < 1 || *r.MaxToolCalls > uses:
		return badRequest("max_tool_calls", "must be between 1 and %d with a web search tool (models.%s.web_search.max_uses)", uses, m.Name)
	default:
		uses = *r.MaxToolCalls
	}
	p.WebSearches = uses
	return nil
}

// toolLists are r's tools and those its input items add.
func (r *responsesRequest) toolLists() [][]responsesTool {
	lists := [][]responsesTool{r.Tools}
	for i := range r.Input.list {
		if it := &r.Input.list[i]; it.Type == "additional_tools" {
			lists = append(lists, it.Tools)
		}
	}
	return lists
}

// searchInput is the most input a request whose prompt is bounded at
// prompt tokens, and its output at out, bills when it may run n searches
// of m's: the provider samples once more after each search, and every
// sampling reads the whole context again — the prompt, the results so
// far and what was generated before it. So n searches bill at most
// (n+1) × prompt + ResultTokens × n(n+1)/2 + n × out.
func searchInput(m *Model, prompt, out, n int64) int64 {
	if n == 0 {
		return prompt
	}
	return (n+1)*prompt + m.WebSearch.ResultTokens*n*(n+1)/2 + n*out
}
