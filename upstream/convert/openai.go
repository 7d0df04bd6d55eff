package convert

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
