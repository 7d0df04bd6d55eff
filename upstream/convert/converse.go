package convert

import (
	"fmt"
	"strings"
)

// ToConverse writes c as a Bedrock Converse request (the model goes in the
// URL). Media must be inline. A JSON-output request becomes a forced call
// of FormatTool, as on Anthropic.
func ToConverse(c *Chat) ([]byte, error) {
	body := map[string]any{}
	if len(c.System) > 0 {
		body["system"] = []map[string]any{{"text": Texts(c.System)}}
	}
	msgs := turns{key: "content"}
	for i, m := range c.Messages {
		blocks, err := converseBlocks(m.Parts, fmt.Sprintf("messages[%d]", i))
		if err != nil {
			return nil, err
		}
		role := m.Role
		if role == "tool" {
			role = "user"
		}
		if len(blocks) > 0 {
			msgs.add(role, blocks)
		}
	}
	body["messages"] = msgs.list
	inf := map[string]any{"maxTokens": c.MaxTokens}
	setSampling(inf, c, "temperature", "topP", "stopSequences")
	body["inferenceConfig"] = inf
	tools := make([]map[string]any, 0, len(c.Tools)+1)
	for _, t := range c.Tools {
		tools = append(tools, map[string]any{"toolSpec": map[string]any{"name": t.Name, "description": nameOr(t.Description, t.Name), "inputSchema": map[string]any{"json": t.Parameters}}})
	}
	var choice map[string]any
	switch c.ToolChoice {
	case "auto":
		choice = map[string]any{"auto": map[string]any{}}
	case "required":
		choice = map[string]any{"any": map[string]any{}}
	case "tool":
		choice = map[string]any{"tool": map[string]any{"name": c.ToolName}}
	case "none":
		tools = tools[:0] // Converse has no "none": offer no tool
	}
	if f := c.Format; f != nil {
		tools = append(tools, map[string]any{"toolSpec": map[string]any{"name": FormatTool, "description": "Answer with the response, as this tool's input.",
			"inputSchema": map[string]any{"json": formatSchema(f)}}})
		choice = map[string]any{"tool": map[string]any{"name": FormatTool}}
	}
	if len(tools) > 0 {
		cfg := map[string]any{"tools": tools}
		if choice != nil {
			cfg["toolChoice"] = choice
		}
		body["toolConfig"] = cfg
	}
	return marshal(body)
}

func converseBlocks(parts []Part, param string) ([]map[string]any, error) {
	var out []map[string]any
	for _, p := range parts {
		switch p.Kind {
		case Text, Refusal:
			if p.Text != "" {
				out = append(out, map[string]any{"text": p.Text})
			}
		case Image:
			if p.Media.Data == "" {
				return nil, errorf(param, "this model takes images inline (base64), not by URL")
			}
			out = append(out, map[string]any{"image": map[string]any{"format": strings.TrimPrefix(p.Media.MediaType, "image/"),
				"source": map[string]any{"bytes": p.Media.Data}}})
		case Document:
			if p.Media.Data == "" {
				return nil, errorf(param, "this model takes documents inline (base64), not by URL")
			}
			format := strings.TrimPrefix(p.Media.MediaType, "application/")
			if p.Media.MediaType == "text/plain" {
				format = "txt"
			}
			out = append(out, map[string]any{"document": map[string]any{"format": format, "name": documentName(p.Media.Name),
				"source": map[string]any{"bytes": p.Media.Data}}})
		case Call:
			out = append(out, map[string]any{"toolUse": map[string]any{"toolUseId": p.Call.ID, "name": p.Call.Name, "input": object(p.Call.Arguments)}})
		case Result:
			status := "success"
			if p.Result.IsError {
				status = "error"
			}
			out = append(out, map[string]any{"toolResult": map[string]any{"toolUseId": p.Result.ID, "status": status,
				"content": []map[string]any{{"text": resultText(p.Result)}}}})
		}
	}
	return out, nil
}

// documentName is a document name Bedrock accepts: letters, digits,
// spaces, hyphens, parentheses and brackets.
func documentName(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == ' ', r == '-', r == '(', r == ')', r == '[', r == ']':
			return r
		}
		return '-'
	}, s)
	return nameOr(strings.TrimSpace(s), "document")
}
