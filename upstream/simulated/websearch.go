package simulated

import (
	"encoding/json"
	"fmt"
	"strings"
)

// SearchResultTokens is what one simulated web search's results add to
// a Messages request's input; searchCallTokens what its call (the
// server_tool_use block) adds to the output.
const (
	SearchResultTokens = 1800
	searchCallTokens   = 12
)

// webSearch is what Anthropic's web search did for one request: the
// searches it ran and the input they billed beyond the prompt.
type webSearch struct {
	// offered says the request has a web search tool.
	offered  bool
	searches int64
	// extra is the input of the samplings after each search: each reads
	// the prompt again, every result so far and every call before it.
	extra int64
}

// searchLoop runs req's web searches as Anthropic's server-side loop
// does: some of the tool's max_uses (read as encoding/json reads it: the
// last of a name sent twice, any case) — without max_uses there is no
// limit, and it runs ten —, each one more sampling of the whole context.
// The calls come out of the output the request allows.
func searchLoop(req *messagesRequest, prompt int64, seed uint64) webSearch {
	var most int64
	for _, raw := range req.Tools {
		var t struct {
			Type    string `json:"type"`
			MaxUses *int64 `json:"max_uses"`
		}
		if json.Unmarshal(raw, &t) != nil || !strings.HasPrefix(t.Type, "web_search_") {
			continue
		}
		if t.MaxUses == nil {
			most += 10
		} else {
			most += max(*t.MaxUses, 0)
		}
	}
	if most == 0 {
		return webSearch{}
	}
	return runSearches(most, prompt, req.MaxTokens, seed)
}

// runSearches is a search loop of at most most searches (some of them,
// by seed) on a prompt of prompt tokens, each call taken from an output
// of at most maxOut tokens.
func runSearches(most, prompt, maxOut int64, seed uint64) webSearch {
	ws := webSearch{offered: true}
	if most <= 0 {
		return ws
	}
	n := 1 + int64(seed%uint64(most))
	if maxOut > 0 {
		n = min(n, (maxOut-1)/searchCallTokens)
	}
	for i := int64(1); i <= n; i++ {
		ws.extra += prompt + i*(SearchResultTokens+searchCallTokens)
	}
	ws.searches = max(n, 0)
	return ws
}

// responsesSearchLoop runs a Responses request's web searches as OpenAI's
// loop does: where the request (or a turn's additional tools) has a web
// search tool, some of its max_tool_calls — read as encoding/json reads
// it —, ten where it sets none (the API's own limit is none).
func responsesSearchLoop(req *responsesRequest, prompt int64, seed uint64) webSearch {
	tools := req.Tools
	for _, it := range req.items() {
		tools = append(tools, it.Tools...)
	}
	for _, raw := range tools {
		var t struct{ Type string }
		if json.Unmarshal(raw, &t) != nil || !(t.Type == "web_search" || strings.HasPrefix(t.Type, "web_search_")) {
			continue
		}
		most := int64(10)
		if req.MaxToolCalls != nil {
			most = *req.MaxToolCalls
		}
		return runSearches(most, prompt, req.MaxOutputTokens, seed)
	}
	return webSearch{}
}

// items are the searches' output items, each a web_search_call, as the
// Responses API puts them before the answer.
func (ws webSearch) items(id string) []any {
	var out []any
	for i := range ws.searches {
		out = append(out, map[string]any{"type": "web_search_call", "id": fmt.Sprintf("ws_%s_%d", id, i), "status": "completed",
			"action": map[string]any{"type": "search", "query": fmt.Sprintf("query %d", i)}})
	}
	return out
}

// blocks are the search's content blocks, each call followed by its
// results, as Anthropic puts them before the answer.
func (ws webSearch) blocks(id string) []any {
	var out []any
	for i := range ws.searches {
		call := fmt.Sprintf("srvtoolu_%s_%d", id, i)
		out = append(out,
			map[string]any{"type": "server_tool_use", "id": call, "name": "web_search", "input": map[string]any{"query": fmt.Sprintf("query %d", i)}},
			map[string]any{"type": "web_search_tool_result", "tool_use_id": call, "content": []any{map[string]any{
				"type": "web_search_result", "url": fmt.Sprintf("https://example.com/%d", i), "title": "Result", "encrypted_content": "RXhhbXBsZQ==", "page_age": nil}}})
	}
	return out
}

// usage adds the searches to a usage: the input they billed, and their
// count where the request could search.
func (ws webSearch) usage(u map[string]any) map[string]any {
	if !ws.offered {
		return u
	}
	u["input_tokens"] = u["input_tokens"].(int64) + ws.extra
	u["server_tool_use"] = map[string]any{"web_search_requests": ws.searches}
	return u
}
