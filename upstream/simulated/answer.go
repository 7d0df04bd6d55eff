package simulated

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/tollgate-dev/tollgate/tokenizer"
)

// An answer is what the simulated model says, as a real one would to the
// same request: a call of a tool it was offered (until a tool's result
// comes back), JSON that satisfies the schema it was given, or text.
type answer struct {
	text   string
	call   *toolCall
	finish string // "stop", "length" or "tool"
	tokens int64  // output tokens generated (and billed)
}

type toolCall struct {
	id, name string
	args     string // a JSON object
}

// tool is a tool offered, in any wire: its name and its parameters' schema.
type tool struct {
	Name   string
	Schema json.RawMessage
}

// ask is what a request asks of its answer: its tools, and a format.
type ask struct {
	tools  []tool
	mode   string // "auto", "none", "any", or "tool" (name)
	name   string
	result bool            // the conversation ends with a tool's result
	schema json.RawMessage // a JSON schema the answer must satisfy
	json   bool            // any JSON object
}

// answer decides what the model says, within limit output tokens.
func (s *Server) answer(c *tokenizer.Counter, seed uint64, limit int64, ch ask) answer {
	if len(ch.tools) > 0 && ch.mode != "none" && !ch.result {
		t := ch.tools[0]
		if ch.mode == "tool" {
			for _, x := range ch.tools {
				if x.Name == ch.name {
					t = x
				}
			}
		}
		args, _ := json.Marshal(sample(t.Schema, seed, 0))
		n := 3 + c.Count(t.Name) + c.Count(string(args))
		if s.opts.Fault == IgnoreMaxTokens || limit <= 0 || n <= limit {
			return answer{call: &toolCall{id: fmt.Sprintf("call_sim%016x", seed), name: t.Name, args: string(args)}, finish: "tool", tokens: n}
		}
	}
	if ch.schema != nil || ch.json {
		v := any(map[string]any{"answer": strings.TrimSpace(reply(seed, 8))})
		if ch.schema != nil {
			v = sample(ch.schema, seed, 0)
		}
		b, _ := json.Marshal(v)
		if n := c.Count(string(b)); s.opts.Fault == IgnoreMaxTokens || limit <= 0 || n <= limit {
			return answer{text: string(b), finish: "stop", tokens: n}
		}
	}
	n, finish := s.replyTokens(seed, limit)
	return answer{text: reply(seed, n), finish: finish, tokens: n}
}

// sample is a value that satisfies schema: every property of an object
// (required or not), one item of an array (or minItems), an enum's first
// value, a const, the first branch of anyOf/oneOf, all of allOf merged.
func sample(raw json.RawMessage, seed uint64, depth int) any {
	var s map[string]any
	if json.Unmarshal(raw, &s) != nil || depth > 8 {
		return nil
	}
	return sampleOf(s, s, seed, depth)
}

func sampleOf(root, s map[string]any, seed uint64, depth int) any {
	if depth > 8 {
		return nil
	}
	if ref, ok := s["$ref"].(string); ok {
		s = resolve(root, ref)
	}
	if v, ok := s["const"]; ok {
		return v
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		if alts, ok := s[key].([]any); ok && len(alts) > 0 {
			if m, ok := alts[0].(map[string]any); ok {
				return sampleOf(root, m, seed, depth+1)
			}
		}
	}
	if all, ok := s["allOf"].([]any); ok {
		merged := map[string]any{}
		for _, a := range all {
			if m, ok := sampleOf(root, asMap(a), seed, depth+1).(map[string]any); ok {
				for k, v := range m {
					merged[k] = v
				}
			}
		}
		return merged
	}
	typ, _ := s["type"].(string)
	if types, ok := s["type"].([]any); ok && len(types) > 0 {
		typ, _ = types[0].(string)
	}
	switch typ {
	case "object", "":
		props := asMap(s["properties"])
		if typ == "" && len(props) == 0 {
			return strings.TrimSpace(reply(seed, 2))
		}
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := map[string]any{}
		for i, k := range keys {
			out[k] = sampleOf(root, asMap(props[k]), seed+uint64(i)+1, depth+1)
		}
		return out
	case "array":
		n := 1
		if m, ok := s["minItems"].(float64); ok && int(m) > n {
			n = int(m)
		}
		out := make([]any, n)
		for i := range out {
			out[i] = sampleOf(root, asMap(s["items"]), seed+uint64(i), depth+1)
		}
		return out
	}
	return scalarOf(s, typ, seed)
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// resolve follows a local reference ("#/$defs/x", "#/definitions/x").
func resolve(root map[string]any, ref string) map[string]any {
	cur := root
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		cur = asMap(cur[part])
	}
	return cur
}

// pieces cuts s into pieces of about n bytes, as a stream carries it.
func pieces(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

// scalarOf is a sample value of a string, number or boolean schema s.
func scalarOf(s map[string]any, typ string, seed uint64) any {
	switch typ {
	case "string":
		switch s["format"] {
		case "date":
			return "2026-11-15"
		case "date-time":
			return "2026-11-15T12:00:00Z"
		case "email":
			return "sim@example.com"
		}
		return strings.TrimSpace(reply(seed, 2))
	case "integer":
		if m, ok := s["minimum"].(float64); ok {
			return int64(m)
		}
		return int64(seed % 10)
	case "number":
		if m, ok := s["minimum"].(float64); ok {
			return m
		}
		return 1.5
	case "boolean":
		return seed%2 == 0
	}
	return nil
}
