package convert

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ToGemini writes c as a generateContent request (the model goes in the
// URL). Images and documents must be inline: Gemini fetches no URL but its
// own files. A tool result is a functionResponse keyed by the tool's name;
// its text is the response's "result" (or the object itself when the text
// is a JSON object).
func ToGemini(c *Chat) ([]byte, error) {
	body := map[string]any{}
	if len(c.System) > 0 {
		body["systemInstruction"] = map[string]any{"parts": []map[string]any{{"text": Texts(c.System)}}}
	}
	contents := turns{key: "parts"}
	for i, m := range c.Messages {
		parts, err := geminiParts(m.Parts, fmt.Sprintf("messages[%d]", i))
		if err != nil {
			return nil, err
		}
		if len(parts) == 0 {
			continue
		}
		role := "user"
		if m.Role == "assistant" {
			role = "model"
		}
		contents.add(role, parts)
	}
	body["contents"] = contents.list
	if len(c.Tools) > 0 {
		decls := make([]map[string]any, len(c.Tools))
		for i, t := range c.Tools {
			decls[i] = map[string]any{"name": t.Name, "description": t.Description, "parametersJsonSchema": t.Parameters}
		}
		body["tools"] = []map[string]any{{"functionDeclarations": decls}}
		mode := map[string]string{"auto": "AUTO", "none": "NONE", "required": "ANY", "tool": "ANY"}[c.ToolChoice]
		if mode != "" {
			cfg := map[string]any{"mode": mode}
			if c.ToolChoice == "tool" {
				cfg["allowedFunctionNames"] = []string{c.ToolName}
			}
			body["toolConfig"] = map[string]any{"functionCallingConfig": cfg}
		}
	}
	gen := map[string]any{"maxOutputTokens": c.MaxTokens}
	setSampling(gen, c, "temperature", "topP", "stopSequences")
	if f := c.Format; f != nil {
		gen["responseMimeType"] = "application/json"
		if f.Schema != nil {
			gen["responseJsonSchema"] = f.Schema
		}
	}
	body["generationConfig"] = gen
	return marshal(body)
}

func geminiParts(parts []Part, param string) ([]map[string]any, error) {
	var out []map[string]any
	for _, p := range parts {
		switch p.Kind {
		case Text, Refusal:
			if p.Text != "" {
				out = append(out, map[string]any{"text": p.Text})
			}
		case Image, Document:
			if p.Media.Data == "" {
				return nil, errorf(param, "this model takes images and documents inline (base64), not by URL")
			}
			out = append(out, map[string]any{"inlineData": map[string]any{"mimeType": p.Media.MediaType, "data": p.Media.Data}})
		case Call:
			// Gemini matches a result to its call by name and order: the
			// ids of other wires are not sent.
			out = append(out, map[string]any{"functionCall": map[string]any{"name": p.Call.Name, "args": object(p.Call.Arguments)}})
		case Result:
			if p.Result.Name == "" {
				return nil, errorf(param, "a tool result answers no tool call of this conversation (tool_call_id %q)", p.Result.ID)
			}
			out = append(out, map[string]any{"functionResponse": map[string]any{"name": p.Result.Name, "response": resultObject(p.Result)}})
		}
	}
	return out, nil
}

// geminiCallPrefix starts the ids the gateway makes up for Gemini's calls
// that come without one.
const geminiCallPrefix = "call_gemini_"

// resultObject is a tool result as an object: the text when it is a JSON
// object, else {"result": text} ({"error": text} for a failure).
func resultObject(r *ToolResult) json.RawMessage {
	text := resultText(r)
	if t := strings.TrimSpace(text); strings.HasPrefix(t, "{") && json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	key := "result"
	if r.IsError {
		key = "error"
	}
	b, _ := marshal(map[string]string{key: text})
	return b
}
