package convert

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
)

// FromOpenAI reads a Chat Completions request. Keys are matched exactly
// (gjson): a key the gateway does not read is never mistaken for one it
// does. Parameters that change what is generated or billed and that other
// wires cannot carry (n > 1, logprobs, audio output, predicted output) are
// refused; sampling penalties, seeds and metadata are left out. body is
// JSON the caller has validated (upstream.ParseRequest validates every
// body before it is translated): it is not validated again here.
func FromOpenAI(body []byte) (*Chat, error) {
	r := membersOf(gjson.ParseBytes(body))
	if err := needMessages(r); err != nil {
		return nil, err
	}
	c := &Chat{Model: r.Get("model").String(), Stream: r.Get("stream").Bool(), User: r.Get("user").String()}
	if n := r.Get("n"); n.Exists() && n.Type != gjson.Null && n.Int() != 1 {
		return nil, errorf("n", "n must be 1 for this model: its provider generates one choice a request")
	}
	for _, key := range []string{"logprobs", "top_logprobs", "audio", "prediction", "web_search_options", "functions", "function_call"} {
		if v := r.Get(key); v.Exists() && v.Type != gjson.Null && !(v.Type == gjson.False) {
			return nil, errorf(key, "%s is not supported for this model: its provider has no equivalent", key)
		}
	}
	if m := r.Get("modalities"); m.IsArray() {
		for _, x := range m.Array() {
			if x.String() != "text" {
				return nil, errorf("modalities", "modalities %q is not supported for this model", x.String())
			}
		}
	}
	for _, key := range []string{"max_completion_tokens", "max_tokens"} {
		if v := r.Get(key); v.Exists() && v.Type != gjson.Null {
			c.MaxTokens = v.Int()
		}
	}
	c.Temperature, c.TopP = number(r.Get("temperature")), number(r.Get("top_p"))
	switch stop := r.Get("stop"); {
	case stop.Type == gjson.String:
		c.Stop = []string{stop.String()}
	case stop.IsArray():
		for _, s := range stop.Array() {
			c.Stop = append(c.Stop, s.String())
		}
	}
	if err := c.openAIFormat(r.Get("response_format")); err != nil {
		return nil, err
	}
	if err := c.openAITools(r); err != nil {
		return nil, err
	}
	msgs := r.Get("messages")
	if !msgs.IsArray() {
		return nil, errorf("messages", "messages must be an array")
	}
	names := map[string]string{} // tool call id → tool name
	for i, m := range msgs.Array() {
		if err := c.openAIMessage(m, fmt.Sprintf("messages[%d]", i), names); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func number(v gjson.Result) *float64 {
	if v.Type != gjson.Number {
		return nil
	}
	f := v.Float()
	return &f
}

func (c *Chat) openAIFormat(f gjson.Result) error {
	switch f.Get("type").String() {
	case "", "text":
	case "json_object":
		c.Format = &Format{}
	case "json_schema":
		s := f.Get("json_schema")
		c.Format = &Format{Name: s.Get("name").String(), Schema: json.RawMessage(s.Get("schema").Raw), Strict: s.Get("strict").Bool()}
		if !s.Get("schema").IsObject() {
			return errorf("response_format.json_schema.schema", "response_format.json_schema.schema must be an object")
		}
	default:
		return errorf("response_format.type", "response_format.type %q is not supported", f.Get("type").String())
	}
	return nil
}

func (c *Chat) openAITools(r getter) error {
	for i, t := range r.Get("tools").Array() {
		if t.Get("type").String() != "function" {
			return errorf(fmt.Sprintf("tools[%d].type", i), "only function tools are supported for this model")
		}
		fn := t.Get("function")
		params := json.RawMessage(fn.Get("parameters").Raw)
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		c.Tools = append(c.Tools, Tool{Name: fn.Get("name").String(), Description: fn.Get("description").String(), Parameters: params})
	}
	switch tc := r.Get("tool_choice"); {
	case tc.Type == gjson.String:
		c.ToolChoice = tc.String()
	case tc.IsObject():
		c.ToolChoice, c.ToolName = "tool", tc.Get("function.name").String()
	}
	if p := r.Get("parallel_tool_calls"); p.IsBool() {
		b := p.Bool()
		c.ParallelTools = &b
	}
	return nil
}

func (c *Chat) openAIMessage(m gjson.Result, param string, names map[string]string) error {
	role := m.Get("role").String()
	content := m.Get("content")
	switch role {
	case "system", "developer":
		parts, err := openAIParts(content, param+".content")
		if err != nil {
			return err
		}
		c.System = append(c.System, parts...)
	case "user":
		parts, err := openAIParts(content, param+".content")
		if err != nil {
			return err
		}
		c.Messages = append(c.Messages, Message{Role: "user", Parts: parts})
	case "assistant":
		parts, err := openAIParts(content, param+".content")
		if err != nil {
			return err
		}
		if r := m.Get("refusal"); r.Type == gjson.String && r.String() != "" {
			parts = append(parts, Part{Kind: Refusal, Text: r.String()})
		}
		for _, tc := range m.Get("tool_calls").Array() {
			call := &ToolCall{ID: tc.Get("id").String(), Name: tc.Get("function.name").String(), Arguments: json.RawMessage(tc.Get("function.arguments").String())}
			if t := strings.TrimSpace(string(call.Arguments)); t != "" && !json.Valid([]byte(t)) {
				return errorf(param+".tool_calls", "a tool call's arguments are not JSON")
			}
			names[call.ID] = call.Name
			parts = append(parts, Part{Kind: Call, Call: call})
		}
		c.Messages = append(c.Messages, Message{Role: "assistant", Parts: parts})
	case "tool":
		parts, err := openAIParts(content, param+".content")
		if err != nil {
			return err
		}
		id := m.Get("tool_call_id").String()
		res := &ToolResult{ID: id, Name: names[id], Parts: parts}
		c.Messages = append(c.Messages, Message{Role: "tool", Parts: []Part{{Kind: Result, Result: res}}})
	default:
		return errorf(param+".role", "role %q is not supported for this model", role)
	}
	return nil
}

// openAIParts reads a message's content: a string, null, or parts.
func openAIParts(content gjson.Result, param string) ([]Part, error) {
	switch {
	case content.Type == gjson.String:
		return []Part{{Kind: Text, Text: content.String()}}, nil
	case !content.Exists() || content.Type == gjson.Null:
		return nil, nil
	case !content.IsArray():
		return nil, errorf(param, "content must be a string or an array of parts")
	}
	var parts []Part
	for i, p := range content.Array() {
		switch p.Get("type").String() {
		case "text":
			parts = append(parts, Part{Kind: Text, Text: p.Get("text").String()})
		case "refusal":
			parts = append(parts, Part{Kind: Refusal, Text: p.Get("refusal").String()})
		case "image_url":
			u := p.Get("image_url.url").String()
			if u == "" {
				u = p.Get("image_url").String()
			}
			parts = append(parts, Part{Kind: Image, Media: dataURL(u, p.Get("image_url.detail").String())})
		case "file":
			f := p.Get("file")
			m := dataURL(f.Get("file_data").String(), "")
			if m.Data == "" {
				return nil, errorf(fmt.Sprintf("%s[%d].file", param, i), "only inline files (file_data) can be sent to this model")
			}
			m.Name = f.Get("filename").String()
			parts = append(parts, Part{Kind: Document, Media: m})
		default:
			return nil, errorf(fmt.Sprintf("%s[%d].type", param, i), "content part type %q is not supported for this model", p.Get("type").String())
		}
	}
	return parts, nil
}

// dataURL reads "data:<type>;base64,<data>" into inline media, anything
// else as a URL.
func dataURL(u, detail string) *Media {
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		meta, data, _ := strings.Cut(rest, ",")
		mediaType, _, _ := strings.Cut(meta, ";")
		return &Media{MediaType: mediaType, Data: data, Detail: detail}
	}
	return &Media{URL: u, Detail: detail}
}

// ToOpenAI writes c as a Chat Completions request. capField is where the
// output cap goes (max_completion_tokens, or max_tokens for servers that
// read only that); askUsage adds stream_options.include_usage.
func ToOpenAI(c *Chat, capField string, askUsage bool) ([]byte, error) {
	if capField == "" {
		capField = "max_completion_tokens"
	}
	body := map[string]any{"model": c.Model, capField: c.MaxTokens}
	var msgs []map[string]any
	if len(c.System) > 0 {
		msgs = append(msgs, map[string]any{"role": "system", "content": Texts(c.System)})
	}
	for _, m := range c.Messages {
		switch m.Role {
		case "tool":
			for _, p := range m.Parts {
				if p.Kind == Result {
					msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": p.Result.ID, "content": resultText(p.Result)})
				}
			}
		case "assistant":
			msg := map[string]any{"role": "assistant"}
			var calls []map[string]any
			for _, p := range m.Parts {
				if p.Kind == Call {
					calls = append(calls, map[string]any{"id": p.Call.ID, "type": "function",
						"function": map[string]any{"name": p.Call.Name, "arguments": argsText(p.Call.Arguments)}})
				}
			}
			msg["content"] = nil
			if t := Texts(m.Parts); t != "" || len(calls) == 0 {
				msg["content"] = t
			}
			if len(calls) > 0 {
				msg["tool_calls"] = calls
			}
			msgs = append(msgs, msg)
		default:
			content, err := openAIContent(m.Parts)
			if err != nil {
				return nil, err
			}
			msgs = append(msgs, map[string]any{"role": "user", "content": content})
		}
	}
	body["messages"] = msgs
	if len(c.Tools) > 0 {
		tools := make([]map[string]any, len(c.Tools))
		for i, t := range c.Tools {
			tools[i] = map[string]any{"type": "function", "function": map[string]any{"name": t.Name, "description": t.Description, "parameters": t.Parameters}}
		}
		body["tools"] = tools
	}
	switch c.ToolChoice {
	case "auto", "none", "required":
		body["tool_choice"] = c.ToolChoice
	case "tool":
		body["tool_choice"] = map[string]any{"type": "function", "function": map[string]any{"name": c.ToolName}}
	}
	if c.ParallelTools != nil && len(c.Tools) > 0 {
		body["parallel_tool_calls"] = *c.ParallelTools
	}
	if f := c.Format; f != nil {
		if f.Schema != nil {
			body["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": nameOr(f.Name, "response"), "schema": f.Schema, "strict": f.Strict}}
		} else {
			body["response_format"] = map[string]any{"type": "json_object"}
		}
	}
	setSampling(body, c, "temperature", "top_p", "stop")
	if c.Stream {
		body["stream"] = true
		if askUsage {
			body["stream_options"] = map[string]any{"include_usage": true}
		}
	}
	if c.User != "" {
		body["user"] = c.User
	}
	return marshal(body)
}

func openAIContent(parts []Part) (any, error) {
	if len(parts) == 1 && parts[0].Kind == Text {
		return parts[0].Text, nil
	}
	out := make([]map[string]any, 0, len(parts))
	for _, p := range parts {
		switch p.Kind {
		case Text:
			out = append(out, map[string]any{"type": "text", "text": p.Text})
		case Image:
			img := map[string]any{"url": mediaURL(p.Media)}
			if p.Media.Detail != "" {
				img["detail"] = p.Media.Detail
			}
			out = append(out, map[string]any{"type": "image_url", "image_url": img})
		case Document:
			if p.Media.Data == "" {
				return nil, errorf("", "this model takes documents inline only, not by URL")
			}
			out = append(out, map[string]any{"type": "file", "file": map[string]any{"filename": nameOr(p.Media.Name, "document.pdf"), "file_data": mediaURL(p.Media)}})
		}
	}
	return out, nil
}

func mediaURL(m *Media) string {
	if m.Data != "" {
		return "data:" + m.MediaType + ";base64," + m.Data
	}
	return m.URL
}

func nameOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// resultText is a tool result's text; a result of other parts is their
// JSON-free text only.
func resultText(r *ToolResult) string { return Texts(r.Parts) }

func setSampling(body map[string]any, c *Chat, temperature, topP, stop string) {
	if c.Temperature != nil {
		body[temperature] = *c.Temperature
	}
	if c.TopP != nil {
		body[topP] = *c.TopP
	}
	if len(c.Stop) > 0 {
		body[stop] = c.Stop
	}
}
