package convert

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// ReadReply reads a whole answer in wire w. formatTool is the tool a
// JSON-output request was forced to call (FormatTool), or "": its call
// comes back as the answer's text.
func ReadReply(w Wire, body []byte, formatTool string) (*Reply, error) {
	if !gjson.ValidBytes(body) {
		return nil, fmt.Errorf("convert: the %s answer is not JSON", w)
	}
	r := gjson.ParseBytes(body)
	var rep *Reply
	switch w {
	case OpenAI:
		rep = openAIReply(r)
	case Anthropic:
		rep = anthropicReply(r)
	case Gemini:
		rep = geminiReply(r)
	case Converse:
		rep = converseReply(r)
	default:
		return nil, fmt.Errorf("convert: unknown wire %d", w)
	}
	if formatTool != "" {
		rep.unwrapFormat(formatTool)
	}
	return rep, nil
}

// usageOf reads a usage object found in an answer or an event (ReadUsage);
// one that is missing or unusable is reported as none.
func usageOf(w Wire, v gjson.Result) Usage {
	if !v.IsObject() {
		return Usage{}
	}
	u, err := ReadUsage(w, []byte(v.Raw))
	if err != nil {
		return Usage{}
	}
	return u
}

// unwrapFormat turns the forced call of the format tool into the answer's
// text: the JSON the client asked for.
func (rep *Reply) unwrapFormat(tool string) {
	for i, p := range rep.Parts {
		if p.Kind == Call && p.Call.Name == tool {
			rep.Parts[i] = Part{Kind: Text, Text: argsText(p.Call.Arguments)}
			if rep.Stop == StopTool {
				rep.Stop = StopEnd
			}
		}
	}
}

func openAIReply(answer gjson.Result) *Reply {
	r := membersOf(answer)
	ch := r.Get("choices.0")
	rep := &Reply{ID: r.Get("id").String(), Model: r.Get("model").String(), Usage: usageOf(OpenAI, r.Get("usage"))}
	msg := ch.Get("message")
	if t := msg.Get("content"); t.Type == gjson.String {
		rep.Parts = append(rep.Parts, Part{Kind: Text, Text: t.String()})
	}
	if t := msg.Get("refusal"); t.Type == gjson.String && t.String() != "" {
		rep.Parts = append(rep.Parts, Part{Kind: Refusal, Text: t.String()})
	}
	for _, tc := range msg.Get("tool_calls").Array() {
		rep.Parts = append(rep.Parts, Part{Kind: Call, Call: &ToolCall{ID: tc.Get("id").String(), Name: tc.Get("function.name").String(),
			Arguments: json.RawMessage(tc.Get("function.arguments").String())}})
	}
	rep.Stop = map[string]Stop{"stop": StopEnd, "length": StopLength, "tool_calls": StopTool, "function_call": StopTool,
		"content_filter": StopFilter}[ch.Get("finish_reason").String()]
	return rep
}

func anthropicReply(answer gjson.Result) *Reply {
	r := membersOf(answer)
	rep := &Reply{ID: r.Get("id").String(), Model: r.Get("model").String(), Usage: usageOf(Anthropic, r.Get("usage")),
		StopSequence: r.Get("stop_sequence").String()}
	for _, b := range r.Get("content").Array() {
		switch b.Get("type").String() {
		case "text":
			rep.Parts = append(rep.Parts, Part{Kind: Text, Text: b.Get("text").String()})
		case "tool_use":
			rep.Parts = append(rep.Parts, Part{Kind: Call, Call: &ToolCall{ID: b.Get("id").String(), Name: b.Get("name").String(), Arguments: object(json.RawMessage(b.Get("input").Raw))}})
		case "thinking":
			rep.Parts = append(rep.Parts, Part{Kind: Thinking, Text: b.Get("thinking").String(), Signature: b.Get("signature").String()})
		}
	}
	rep.Stop = anthropicStop(r.Get("stop_reason").String())
	return rep
}

func anthropicStop(s string) Stop {
	return map[string]Stop{"end_turn": StopEnd, "max_tokens": StopLength, "tool_use": StopTool, "stop_sequence": StopSequence,
		"refusal": StopFilter, "pause_turn": StopEnd}[s]
}

func geminiReply(r gjson.Result) *Reply {
	cand := r.Get("candidates.0")
	rep := &Reply{ID: r.Get("responseId").String(), Model: r.Get("modelVersion").String(), Usage: usageOf(Gemini, r.Get("usageMetadata"))}
	calls := 0
	for _, p := range cand.Get("content.parts").Array() {
		switch {
		case p.Get("functionCall").Exists():
			rep.Parts = append(rep.Parts, Part{Kind: Call, Call: geminiCall(p.Get("functionCall"), calls)})
			calls++
		case p.Get("thought").Bool():
			rep.Parts = append(rep.Parts, Part{Kind: Thinking, Text: p.Get("text").String()})
		case p.Get("text").Exists():
			rep.Parts = append(rep.Parts, Part{Kind: Text, Text: p.Get("text").String()})
		}
	}
	rep.Stop = geminiStop(cand.Get("finishReason").String(), calls > 0)
	return rep
}

func geminiCall(fc gjson.Result, i int) *ToolCall {
	id := fc.Get("id").String()
	if id == "" {
		id = geminiCallPrefix + strconv.Itoa(i)
	}
	return &ToolCall{ID: id, Name: fc.Get("name").String(), Arguments: object(json.RawMessage(fc.Get("args").Raw))}
}

func geminiStop(reason string, called bool) Stop {
	switch reason {
	case "":
		return ""
	case "STOP":
		if called {
			return StopTool
		}
		return StopEnd
	case "MAX_TOKENS":
		return StopLength
	}
	return StopFilter // SAFETY, RECITATION, BLOCKLIST, PROHIBITED_CONTENT, SPII, OTHER…
}

func converseReply(r gjson.Result) *Reply {
	rep := &Reply{Usage: usageOf(Converse, r.Get("usage"))}
	for _, b := range r.Get("output.message.content").Array() {
		switch {
		case b.Get("text").Exists():
			rep.Parts = append(rep.Parts, Part{Kind: Text, Text: b.Get("text").String()})
		case b.Get("toolUse").Exists():
			tu := b.Get("toolUse")
			rep.Parts = append(rep.Parts, Part{Kind: Call, Call: &ToolCall{ID: tu.Get("toolUseId").String(), Name: tu.Get("name").String(), Arguments: object(json.RawMessage(tu.Get("input").Raw))}})
		case b.Get("reasoningContent").Exists():
			rep.Parts = append(rep.Parts, Part{Kind: Thinking, Text: b.Get("reasoningContent.reasoningText.text").String()})
		}
	}
	rep.Stop = converseStop(r.Get("stopReason").String())
	return rep
}

func converseStop(s string) Stop {
	return map[string]Stop{"end_turn": StopEnd, "max_tokens": StopLength, "tool_use": StopTool, "stop_sequence": StopSequence,
		"guardrail_intervened": StopFilter, "content_filtered": StopFilter}[s]
}

// WriteReply writes rep as a whole answer in the client's wire w, for a
// request of model.
func WriteReply(w Wire, rep *Reply, model string) ([]byte, error) {
	switch w {
	case OpenAI:
		return openAIReplyBody(rep, model)
	case Anthropic:
		return anthropicReplyBody(rep, model)
	}
	return nil, fmt.Errorf("convert: no client speaks %s", w)
}

// OpenAIFinish is a stop as Chat Completions' finish_reason.
func OpenAIFinish(s Stop) string {
	return map[Stop]string{StopEnd: "stop", StopLength: "length", StopTool: "tool_calls", StopSequence: "stop", StopFilter: "content_filter"}[s]
}

// AnthropicStop is a stop as Messages' stop_reason.
func AnthropicStop(s Stop) string {
	return map[Stop]string{StopEnd: "end_turn", StopLength: "max_tokens", StopTool: "tool_use", StopSequence: "stop_sequence", StopFilter: "refusal"}[s]
}

func openAIReplyBody(rep *Reply, model string) ([]byte, error) {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	var calls []map[string]any
	text, refusal := "", ""
	for _, p := range rep.Parts {
		switch p.Kind {
		case Text:
			text += p.Text
		case Refusal:
			refusal += p.Text
		case Call:
			calls = append(calls, map[string]any{"id": p.Call.ID, "type": "function", "function": map[string]any{"name": p.Call.Name, "arguments": argsText(p.Call.Arguments)}})
		}
	}
	if text != "" || len(calls) == 0 {
		msg["content"] = text
	}
	if refusal != "" {
		msg["refusal"] = refusal
	}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
	}
	finish := OpenAIFinish(rep.Stop)
	if finish == "" {
		finish = "stop"
	}
	return marshal(map[string]any{"id": openAIID(rep.ID), "object": "chat.completion", "created": time.Now().Unix(), "model": model,
		"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
		"usage":   openAIUsageBody(rep.Usage)})
}

func openAIID(id string) string {
	switch {
	case id == "":
		return "chatcmpl-tollgate"
	case strings.HasPrefix(id, "chatcmpl-"):
		return id
	}
	return "chatcmpl-" + id
}

func openAIUsageBody(u Usage) map[string]any {
	return map[string]any{"prompt_tokens": u.Input, "completion_tokens": u.Output, "total_tokens": u.Input + u.Output,
		"prompt_tokens_details":     map[string]any{"cached_tokens": u.CachedInput, "audio_tokens": u.InputAudio},
		"completion_tokens_details": map[string]any{"reasoning_tokens": u.Reasoning, "audio_tokens": u.OutputAudio}}
}

func anthropicReplyBody(rep *Reply, model string) ([]byte, error) {
	content := []map[string]any{}
	for _, p := range rep.Parts {
		switch p.Kind {
		case Text, Refusal:
			content = append(content, map[string]any{"type": "text", "text": p.Text})
		case Call:
			content = append(content, map[string]any{"type": "tool_use", "id": toolUseID(p.Call.ID), "name": p.Call.Name, "input": object(p.Call.Arguments)})
		}
	}
	stop := AnthropicStop(rep.Stop)
	if stop == "" {
		stop = "end_turn"
	}
	var seq any
	if rep.StopSequence != "" {
		seq = rep.StopSequence
	}
	return marshal(map[string]any{"id": anthropicID(rep.ID), "type": "message", "role": "assistant", "model": model, "content": content,
		"stop_reason": stop, "stop_sequence": seq, "usage": anthropicUsageBody(rep.Usage)})
}

func anthropicID(id string) string {
	switch {
	case id == "":
		return "msg_tollgate"
	case strings.HasPrefix(id, "msg_"):
		return id
	}
	return "msg_" + id
}

// toolUseID is an id Anthropic's SDKs accept for a tool use.
func toolUseID(id string) string {
	if id == "" {
		return "toolu_tollgate"
	}
	return id
}

func anthropicUsageBody(u Usage) map[string]any {
	return map[string]any{"input_tokens": u.Input - u.CachedInput - u.CacheWrite, "output_tokens": u.Output,
		"cache_creation_input_tokens": u.CacheWrite, "cache_read_input_tokens": u.CachedInput}
}
