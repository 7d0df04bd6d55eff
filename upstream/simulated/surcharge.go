package simulated

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"strings"

	"github.com/tollgate-dev/tollgate/tokenizer"
)

// A surcharge is what a provider bills for a request beyond its tokens at
// the model's list price — hosted tools per call, a dearer tier or mode,
// predicted output it rejected —, read from the body as the provider reads
// it: with encoding/json, which keeps the last of a name sent twice, at
// any depth, and matches names without regard to case. A gateway that
// reads a body otherwise (the first of two names, names exactly, fields it
// does not know skipped) bounds one request and is billed for another;
// against this server, the property tests see the difference.
type surcharge struct {
	// calls are hosted or server tool calls, each billed per call
	// (Reported.BilledToolCalls): one a tool the request offers, at least.
	calls int64
	// multiplier scales the tokens' price: a priority tier, Anthropic's
	// fast mode, a pinned region.
	multiplier float64
	// rejected are predicted output tokens the model did not use, which
	// OpenAI bills as output.
	rejected int64
	// speed and geo are what an Anthropic answer reports it ran at
	// (usage.speed, usage.inference_geo); "" standard and global.
	speed, geo string
}

// chatSurcharge is an OpenAI-compatible chat's: web search options, a
// hosted tool, a dearer service tier, a prediction (all of it rejected),
// and the extras of the OpenAI-compatible providers that bill per result
// (OpenRouter's web plugin, xAI's live search).
func chatSurcharge(body []byte, c *tokenizer.Counter) surcharge {
	var req struct {
		ServiceTier      string          `json:"service_tier"`
		WebSearchOptions json.RawMessage `json:"web_search_options"`
		Tools            []struct {
			Type string `json:"type"`
		} `json:"tools"`
		Prediction struct {
			Content json.RawMessage `json:"content"`
		} `json:"prediction"`
		Plugins []struct {
			ID         string `json:"id"`
			MaxResults int64  `json:"max_results"`
		} `json:"plugins"`
		SearchParameters *struct {
			Mode             string `json:"mode"`
			MaxSearchResults int64  `json:"max_search_results"`
		} `json:"search_parameters"`
	}
	_ = json.Unmarshal(body, &req)
	sc := surcharge{multiplier: tierMultiplier(req.ServiceTier)}
	if present(req.WebSearchOptions) {
		sc.calls++
	}
	for _, t := range req.Tools {
		if t.Type != "function" && t.Type != "custom" && t.Type != "" {
			sc.calls++
		}
	}
	for _, p := range req.Plugins {
		if p.ID == "web" {
			sc.calls += max(p.MaxResults, 5) // billed per result
		}
	}
	if sp := req.SearchParameters; sp != nil && sp.Mode != "off" {
		sc.calls += max(sp.MaxSearchResults, 20) // billed per source
	}
	var text string
	if json.Unmarshal(req.Prediction.Content, &text) == nil {
		sc.rejected = c.Count(text)
	} else {
		var parts []struct{ Text string }
		_ = json.Unmarshal(req.Prediction.Content, &parts)
		for _, p := range parts {
			sc.rejected += c.Count(p.Text)
		}
	}
	return sc
}

// responsesSurcharge is a Responses request's: each hosted tool it offers
// (namespaced ones too) called once — but the web search, whose loop
// bills its calls (responsesSearchLoop) —, and a dearer service tier.
func responsesSurcharge(body []byte) surcharge {
	type tool struct {
		Type  string `json:"type"`
		Tools []struct {
			Type string `json:"type"`
		} `json:"tools"`
	}
	var req struct {
		ServiceTier string `json:"service_tier"`
		Tools       []tool `json:"tools"`
	}
	_ = json.Unmarshal(body, &req)
	sc := surcharge{multiplier: tierMultiplier(req.ServiceTier)}
	for _, t := range req.Tools {
		switch {
		case t.Type == "function", t.Type == "custom", t.Type == "web_search", strings.HasPrefix(t.Type, "web_search_"):
		case t.Type == "namespace":
			for _, inner := range t.Tools {
				if inner.Type != "function" && inner.Type != "custom" {
					sc.calls++
				}
			}
		default:
			sc.calls++
		}
	}
	return sc
}

// messagesSurcharge is a Messages request's: each server tool but the
// web search (web fetch, code execution) called once, MCP servers, fast mode (six
// times the price, with its beta) and a US-only region (1.1 times).
func messagesSurcharge(body []byte, h http.Header, standard bool) surcharge {
	var req struct {
		Speed        string          `json:"speed"`
		InferenceGeo string          `json:"inference_geo"`
		MCPServers   json.RawMessage `json:"mcp_servers"`
		Tools        []struct {
			Type string `json:"type"`
		} `json:"tools"`
	}
	_ = json.Unmarshal(body, &req)
	sc := surcharge{multiplier: 1}
	for _, t := range req.Tools {
		// (web search runs in a loop of its own: searchLoop)
		for _, server := range []string{"web_fetch_", "code_execution_", "tool_search_", "advisor_"} {
			if strings.HasPrefix(t.Type, server) {
				sc.calls++
			}
		}
	}
	if present(req.MCPServers) && string(req.MCPServers) != "[]" {
		sc.calls++
	}
	if req.Speed == "fast" && strings.Contains(h.Get("Anthropic-Beta"), "fast-mode") && !standard {
		sc.multiplier = 6
		sc.speed = "fast"
	}
	if strings.EqualFold(req.InferenceGeo, "us") {
		sc.multiplier *= 1.1
		sc.geo = "us"
	}
	return sc
}

// tierMultiplier is what an OpenAI service tier costs over the standard
// one: priority (and its alias fast) twice.
func tierMultiplier(tier string) float64 {
	switch tier {
	case "priority", "fast", "scale":
		return 2
	}
	return 1
}

func present(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// billCalls bills n tool calls billed per call.
func (s *Server) billCalls(model string, n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.stats.Usage[model]
	r.BilledToolCalls += n
	s.stats.Usage[model] = r
}

// surcharge bills what sc adds to a request of model that billed prompt
// and completion tokens at list price.
func (s *Server) surcharge(model string, sc surcharge, prompt, completion int64) {
	if sc.calls == 0 && sc.multiplier <= 1 {
		return
	}
	extra := func(n int64) int64 { return int64(math.Ceil(float64(n) * (sc.multiplier - 1))) }
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.stats.Usage[model]
	r.BilledToolCalls += sc.calls
	if sc.multiplier > 1 {
		r.BilledPromptTokens += extra(prompt)
		r.BilledCompletionTokens += extra(completion)
	}
	s.stats.Usage[model] = r
}

// compact is raw's JSON without white space: a provider renders a tool or
// a call from its parsed JSON, so white space in its text costs nothing.
func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}
