package upstream

import (
	"encoding/json"
	"fmt"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/tokenizer"
)

type responsesItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	CallID    string          `json:"call_id"`
	Output    json.RawMessage `json:"output"`
}

// responsesInput counts a Responses API request: instructions, input (a
// string or a list of items) and tools. A request that continues a stored
// conversation (previous_response_id, conversation) is refused: its input
// lives at the provider and cannot be bounded here.
func (r *Request) responsesInput(m *Model) (int64, error) {
	for _, key := range []string{"previous_response_id", "conversation", "prompt"} {
		if raw, ok := r.fields.get(key); ok && !isNull(raw) {
			return 0, badRequest(key, "the gateway cannot bound the input of a stored conversation or prompt; send the input itself")
		}
	}
	var msgs []tokenizer.ChatMessage
	var instructions string
	if err := r.str("instructions", &instructions); err != nil {
		return 0, err
	}
	if instructions != "" {
		msgs = append(msgs, tokenizer.ChatMessage{Role: "system", Texts: []string{instructions}})
	}
	raw, ok := r.fields.get("input")
	if !ok || isNull(raw) {
		return 0, badRequest("input", "is required")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		msgs = append(msgs, tokenizer.ChatMessage{Role: "user", Texts: []string{s}})
	} else {
		var items []responsesItem
		if err := json.Unmarshal(raw, &items); err != nil {
			return 0, badRequest("input", "must be a string or an array of input items")
		}
		for i, it := range items {
			param := fmt.Sprintf("input[%d]", i)
			cm := tokenizer.ChatMessage{Role: it.Role}
			switch it.Type {
			case "", "message":
				if it.Role == "" {
					return 0, badRequest(param+".role", "is required")
				}
				if err := addContent(&cm, m, it.Content, func() string { return param + ".content" }); err != nil {
					return 0, err
				}
			case "function_call":
				cm.Role, cm.Extra = "assistant", []string{it.Name, it.Arguments, it.CallID}
			case "function_call_output":
				cm.Role = "tool"
				var out string
				if json.Unmarshal(it.Output, &out) != nil {
					out = string(compact(it.Output))
				}
				cm.Extra = []string{it.CallID, out}
			case "reasoning":
				cm.Role, cm.Extra = "assistant", []string{string(compact(it.Content))}
			default:
				return 0, badRequest(param+".type", "input item type %q cannot be estimated by the gateway", it.Type)
			}
			msgs = append(msgs, cm)
		}
	}
	var tools []string
	if raw, ok := r.fields.get("tools"); ok && !isNull(raw) {
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return 0, badRequest("tools", "must be an array")
		}
		for _, t := range list {
			if typ := gjson.GetBytes(t, "type").String(); typ != "" && typ != "function" {
				return 0, badRequest("tools", "hosted tool %q bills by its own rules; the gateway cannot bound it", typ)
			}
			tools = append(tools, string(compact(t)))
		}
	}
	if raw, ok := r.fields.get("text"); ok && gjson.GetBytes(raw, "format.type").String() == "json_schema" {
		tools = append(tools, string(compact(raw)))
	}
	return m.Counter.Chat(msgs, tools), nil
}

// responsesUsage is the Responses API's usage block (input_tokens includes
// the cached ones, output_tokens the reasoning ones).
type responsesUsage struct {
	InputTokens        *int64 `json:"input_tokens"`
	OutputTokens       *int64 `json:"output_tokens"`
	InputTokensDetails *struct {
		CachedTokens *int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokensDetails *struct {
		ReasoningTokens *int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

func (ru *responsesUsage) usage() (budget.Usage, error) {
	if ru == nil || ru.InputTokens == nil || ru.OutputTokens == nil {
		return budget.Usage{}, errNoUsage
	}
	u := budget.Usage{InputTokens: *ru.InputTokens, OutputTokens: *ru.OutputTokens}
	if d := ru.InputTokensDetails; d != nil {
		u.CachedInputTokens = val(d.CachedTokens)
	}
	if d := ru.OutputTokensDetails; d != nil {
		u.ReasoningTokens = val(d.ReasoningTokens)
	}
	return u, u.Validate()
}

func responsesUsageAt(data []byte, path string) (budget.Usage, bool) {
	raw := gjson.GetBytes(data, path)
	if !raw.IsObject() {
		return budget.Usage{}, false
	}
	return responsesUsageOf(raw.Raw)
}

// responsesUsageOf decodes a Responses usage object.
func responsesUsageOf(raw string) (budget.Usage, bool) {
	var ru responsesUsage
	if err := json.Unmarshal([]byte(raw), &ru); err != nil {
		return budget.Usage{}, false
	}
	u, err := ru.usage()
	return u, err == nil
}

// UsageFromResponsesJSON extracts the usage of a non-streaming Responses
// API response.
func UsageFromResponsesJSON(body []byte) (budget.Usage, bool) {
	raw, ok := usageObject(body)
	if !ok {
		return budget.Usage{}, false
	}
	return responsesUsageOf(raw.raw)
}
