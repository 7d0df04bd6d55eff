package convert

import (
	"encoding/json"
	"fmt"

	"github.com/tidwall/gjson"
)

// FormatTool is the tool a JSON-output request is given on wires with no
// structured output of their own (Anthropic, Bedrock): the model is made
// to call it, and its input comes back to the client as the answer text.
const FormatTool = "json_response"

// FromAnthropic reads a Messages request. Server tools (web search, code
// execution) and extended thinking are refused on other wires. body is
// JSON the caller has validated, as for FromOpenAI.
func FromAnthropic(body []byte) (*Chat, error) {
	r := membersOf(gjson.ParseBytes(body))
	if err := needMessages(r); err != nil {
		return nil, err
	}
	c := &Chat{Model: r.Get("model").String(), Stream: r.Get("stream").Bool(), MaxTokens: r.Get("max_tokens").Int(),
		User: r.Get("metadata.user_id").String()}
	if t := r.Get("thinking"); t.Exists() && t.Get("type").String() == "enabled" {
		return nil, errorf("thinking", "extended thinking is not supported for this model")
	}
	c.Temperature, c.TopP = number(r.Get("temperature")), number(r.Get("top_p"))
	for _, s := range r.Get("stop_sequences").Array() {
		c.Stop = append(c.Stop, s.String())
	}
	sys := r.Get("system")
	switch {
	case sys.Type == gjson.String:
		c.System = []Part{{Kind: Text, Text: sys.String()}}
	case sys.IsArray():
		for _, b := range sys.Array() {
			c.System = append(c.System, Part{Kind: Text, Text: b.Get("text").String()})
		}
	}
	for i, t := range r.Get("tools").Array() {
		if typ := t.Get("type").String(); typ != "" && typ != "custom" {
			return nil, errorf(fmt.Sprintf("tools[%d].type", i), "tool type %q runs at Anthropic and is not supported for this model", typ)
		}
		c.Tools = append(c.Tools, Tool{Name: t.Get("name").String(), Description: t.Get("description").String(), Parameters: json.RawMessage(t.Get("input_schema").Raw)})
	}
	switch tc := r.Get("tool_choice"); tc.Get("type").String() {
	case "auto":
		c.ToolChoice = "auto"
	case "any":
		c.ToolChoice = "required"
	case "none":
		c.ToolChoice = "none"
	case "tool":
		c.ToolChoice, c.ToolName = "tool", tc.Get("name").String()
	}
	if d := r.Get("tool_choice.disable_parallel_tool_use"); d.IsBool() {
		p := !d.Bool()
		c.ParallelTools = &p
	}
	names := map[string]string{}
	for i, m := range r.Get("messages").Array() {
		if err := c.anthropicMessage(m, fmt.Sprintf("messages[%d]", i), names); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *Chat) anthropicMessage(m gjson.Result, param string, names map[string]string) error {
	role := m.Get("role").String()
	if role != "user" && role != "assistant" {
		return errorf(param+".role", "role must be user or assistant, got %q", role)
	}
	content := m.Get("content")
	if content.Type == gjson.String {
		c.Messages = append(c.Messages, Message{Role: role, Parts: []Part{{Kind: Text, Text: content.String()}}})
		return nil
	}
	var parts, results []Part
	for i, b := range content.Array() {
		bp := fmt.Sprintf("%s.content[%d]", param, i)
		switch b.Get("type").String() {
		case "text":
			parts = append(parts, Part{Kind: Text, Text: b.Get("text").String()})
		case "image", "document":
			m, err := anthropicSource(b.Get("source"), bp)
			if err != nil {
				return err
			}
			kind := Image
			if b.Get("type").String() == "document" {
				kind, m.Name = Document, b.Get("title").String()
			}
			parts = append(parts, Part{Kind: kind, Media: m})
		case "tool_use":
			call := &ToolCall{ID: b.Get("id").String(), Name: b.Get("name").String(), Arguments: object(json.RawMessage(b.Get("input").Raw))}
			names[call.ID] = call.Name
			parts = append(parts, Part{Kind: Call, Call: call})
		case "tool_result":
			id := b.Get("tool_use_id").String()
			res := &ToolResult{ID: id, Name: names[id], IsError: b.Get("is_error").Bool()}
			switch rc := b.Get("content"); {
			case rc.Type == gjson.String:
				res.Parts = []Part{{Kind: Text, Text: rc.String()}}
			case rc.IsArray():
				for j, x := range rc.Array() {
					if typ := x.Get("type").String(); typ != "text" {
						// The other wires' tool results carry text only:
						// refused, not dropped.
						return errorf(fmt.Sprintf("%s.content[%d]", bp, j), "a tool result's %s block cannot be sent to this model (text only)", typ)
					}
					res.Parts = append(res.Parts, Part{Kind: Text, Text: x.Get("text").String()})
				}
			}
			results = append(results, Part{Kind: Result, Result: res})
		case "thinking":
			parts = append(parts, Part{Kind: Thinking, Text: b.Get("thinking").String(), Signature: b.Get("signature").String()})
		case "redacted_thinking":
			// Encrypted thinking is Anthropic's alone: no other model reads it.
		default:
			return errorf(bp+".type", "content block type %q is not supported for this model", b.Get("type").String())
		}
	}
	if len(results) > 0 {
		c.Messages = append(c.Messages, Message{Role: "tool", Parts: results})
	}
	if len(parts) > 0 || len(results) == 0 {
		c.Messages = append(c.Messages, Message{Role: role, Parts: parts})
	}
	return nil
}

func anthropicSource(s gjson.Result, param string) (*Media, error) {
	switch s.Get("type").String() {
	case "base64":
		return &Media{MediaType: s.Get("media_type").String(), Data: s.Get("data").String()}, nil
	case "url":
		return &Media{URL: s.Get("url").String()}, nil
	case "text":
		return &Media{MediaType: "text/plain", Data: s.Get("data").String()}, nil
	}
	return nil, errorf(param+".source.type", "source type %q is not supported for this model", s.Get("type").String())
}

// ToAnthropic writes c as a Messages request. A JSON-output request
// becomes a forced call of FormatTool, whose input answers it.
func ToAnthropic(c *Chat, extra map[string]any) ([]byte, error) {
	body := map[string]any{"max_tokens": c.MaxTokens}
	if c.Model != "" {
		body["model"] = c.Model
	}
	for k, v := range extra {
		body[k] = v
	}
	if len(c.System) > 0 {
		body["system"] = []map[string]any{{"type": "text", "text": Texts(c.System)}}
	}
	msgs := turns{key: "content"}
	for _, m := range c.Messages {
		blocks, err := anthropicBlocks(m.Parts)
		if err != nil {
			return nil, err
		}
		role := m.Role
		if role == "tool" {
			role = "user" // results ride in a user turn
		}
		if len(blocks) > 0 {
			msgs.add(role, blocks)
		}
	}
	body["messages"] = msgs.list
	tools := make([]map[string]any, 0, len(c.Tools)+1)
	for _, t := range c.Tools {
		tools = append(tools, map[string]any{"name": t.Name, "description": t.Description, "input_schema": t.Parameters})
	}
	choice := map[string]any{}
	switch c.ToolChoice {
	case "auto":
		choice["type"] = "auto"
	case "required":
		choice["type"] = "any"
	case "none":
		choice["type"] = "none"
	case "tool":
		choice["type"], choice["name"] = "tool", c.ToolName
	}
	if f := c.Format; f != nil {
		tools = append(tools, map[string]any{"name": FormatTool, "description": "Answer with the response, as this tool's input.",
			"input_schema": formatSchema(f)})
		choice = map[string]any{"type": "tool", "name": FormatTool}
	}
	if len(tools) > 0 {
		body["tools"] = tools
	}
	if c.ParallelTools != nil && !*c.ParallelTools && len(choice) > 0 {
		choice["disable_parallel_tool_use"] = true
	}
	if len(choice) > 0 && (len(tools) > 0 || choice["type"] == "none") {
		body["tool_choice"] = choice
	}
	setSampling(body, c, "temperature", "top_p", "stop_sequences")
	if c.Stream {
		body["stream"] = true
	}
	if c.User != "" {
		body["metadata"] = map[string]any{"user_id": c.User}
	}
	return marshal(body)
}

// formatSchema is the schema a format tool takes: the client's, or any
// object.
func formatSchema(f *Format) json.RawMessage {
	if f.Schema != nil {
		return f.Schema
	}
	return json.RawMessage(`{"type":"object"}`)
}

func anthropicBlocks(parts []Part) ([]map[string]any, error) {
	var out []map[string]any
	for _, p := range parts {
		switch p.Kind {
		case Text:
			if p.Text != "" {
				out = append(out, map[string]any{"type": "text", "text": p.Text})
			}
		case Refusal:
			out = append(out, map[string]any{"type": "text", "text": p.Text})
		case Image, Document:
			typ := "image"
			if p.Kind == Document {
				typ = "document"
			}
			src := map[string]any{"type": "url", "url": p.Media.URL}
			if p.Media.Data != "" {
				src = map[string]any{"type": "base64", "media_type": p.Media.MediaType, "data": p.Media.Data}
			}
			out = append(out, map[string]any{"type": typ, "source": src})
		case Call:
			out = append(out, map[string]any{"type": "tool_use", "id": p.Call.ID, "name": p.Call.Name, "input": object(p.Call.Arguments)})
		case Result:
			b := map[string]any{"type": "tool_result", "tool_use_id": p.Result.ID, "content": resultText(p.Result)}
			if p.Result.IsError {
				b["is_error"] = true
			}
			out = append(out, b)
		case Thinking:
			if p.Signature != "" {
				out = append(out, map[string]any{"type": "thinking", "thinking": p.Text, "signature": p.Signature})
			}
		}
	}
	return out, nil
}
