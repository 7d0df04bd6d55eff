package convert

import (
	"encoding/json"
)

// FormatTool is the tool a JSON-output request is given on wires with no
// structured output of their own (Anthropic, Bedrock): the model is made
// to call it, and its input comes back to the client as the answer text.
const FormatTool = "json_response"

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
