package simulated

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

type responsesRequest struct {
	Model           string            `json:"model"`
	Instructions    string            `json:"instructions"`
	Input           json.RawMessage   `json:"input"`
	MaxOutputTokens int64             `json:"max_output_tokens"`
	MaxToolCalls    *int64            `json:"max_tool_calls"`
	Stream          bool              `json:"stream"`
	Tools           []json.RawMessage `json:"tools"`
	ToolChoice      json.RawMessage   `json:"tool_choice"`
	Text            struct {
		Format struct {
			Type   string          `json:"type"`
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"text"`
}

// responsesItem is one input item: a message, a function call the model
// made earlier, or a function's output.
type responsesItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Name    string          `json:"name"`
	Args    string          `json:"arguments"`
	Output  string          `json:"output"`
	// additional_tools'
	Tools []json.RawMessage `json:"tools"`
}

// items is the request's input as items (a string is one user message).
func (req *responsesRequest) items() []responsesItem {
	var text string
	if json.Unmarshal(req.Input, &text) == nil {
		raw, _ := json.Marshal(text)
		return []responsesItem{{Type: "message", Role: "user", Content: raw}}
	}
	var items []responsesItem
	_ = json.Unmarshal(req.Input, &items)
	return items
}

// ask reads what a Responses request asks of its answer.
func (req *responsesRequest) ask() ask {
	var a ask
	for _, raw := range req.Tools {
		var t struct {
			Type, Name string
			Parameters json.RawMessage
		}
		if json.Unmarshal(raw, &t) == nil && t.Type == "function" {
			a.tools = append(a.tools, tool{Name: t.Name, Schema: t.Parameters})
		}
	}
	var mode string
	var forced struct{ Type, Name string }
	switch {
	case json.Unmarshal(req.ToolChoice, &mode) == nil:
		a.mode = map[string]string{"required": "any"}[mode]
		if a.mode == "" {
			a.mode = mode
		}
	case json.Unmarshal(req.ToolChoice, &forced) == nil && forced.Type == "function":
		a.mode, a.name = "tool", forced.Name
	}
	if items := req.items(); len(items) > 0 {
		a.result = items[len(items)-1].Type == "function_call_output"
	}
	switch f := req.Text.Format; f.Type {
	case "json_schema":
		a.schema = f.Schema
	case "json_object":
		a.json = true
	}
	return a
}

// responsesPrompt counts a Responses API input as the chat format does,
// tools included.
func (s *Server) responsesPrompt(req *responsesRequest) int64 {
	c := s.counter(req.Model)
	n := int64(3)
	if req.Instructions != "" {
		n += 3 + c.Count("system") + c.Count(req.Instructions)
	}
	for _, it := range req.items() {
		n += 3 + c.Count(it.Role) + c.Count(it.Name+it.Args+it.Output)
		var text string
		if json.Unmarshal(it.Content, &text) == nil {
			n += c.Count(text)
			continue
		}
		var parts []struct{ Type, Text string }
		_ = json.Unmarshal(it.Content, &parts)
		for _, p := range parts {
			n += c.Count(p.Text)
		}
	}
	for _, t := range req.Tools {
		n += 7 + c.Count(compact(t))
	}
	if f := req.Text.Format.Schema; f != nil {
		n += c.Count(string(f))
	}
	return n
}

// responses answers OpenAI's Responses API: a message or a function call,
// whole or as the API's full event sequence (created, in_progress, each
// output item added, its content part, its deltas, each done, completed).
func (s *Server) responses(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req responsesRequest
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil || req.Model == "" || len(req.Input) == 0 {
		writeError(w, http.StatusBadRequest, "invalid_request", "model and input are required")
		return
	}
	seed := seedOf(body)
	prompt := s.responsesPrompt(&req)
	search := responsesSearchLoop(&req, prompt, seed)
	calls := search.searches * searchCallTokens // the searches' calls are output too
	limit := req.MaxOutputTokens
	if limit > 0 {
		limit -= calls
	}
	ans := s.answer(s.counter(req.Model), seed, limit, req.ask())
	out := ans.tokens + calls
	s.bill(req.Model, prompt+search.extra, out)
	s.billCalls(req.Model, search.searches)
	s.surcharge(req.Model, responsesSurcharge(body), prompt+search.extra, out)
	rs := &responseStream{s: s, req: &req, ans: ans, prompt: prompt + search.extra, out: out, search: search,
		id: fmt.Sprintf("resp_sim%016x", seed), itemID: fmt.Sprintf("msg_sim%016x", seed), created: time.Now().Unix()}
	if ans.call != nil {
		rs.itemID = fmt.Sprintf("fc_sim%016x", seed)
	}
	if !req.Stream {
		s.record(req.Model, rs.prompt, out)
		s.delivered(req.Model, ans.tokens)
		writeJSON(w, http.StatusOK, rs.response(rs.status(), rs.output(), rs.usage()))
		return
	}
	rs.stream(w, r)
}

// responseStream is one answer of the Responses API.
type responseStream struct {
	s          *Server
	req        *responsesRequest
	ans        answer
	prompt     int64 // the searches' input included
	out        int64 // the answer's output, the searches' calls included
	search     webSearch
	id, itemID string
	created    int64
	seq        int
	send       func(event string, v any) bool
}

func (rs *responseStream) status() string {
	if rs.ans.finish == "length" {
		return "incomplete"
	}
	return "completed"
}

func (rs *responseStream) usage() map[string]any {
	return map[string]any{"input_tokens": rs.prompt, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": rs.out, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": rs.prompt + rs.out}
}

func (rs *responseStream) response(status string, output []any, usage any) map[string]any {
	var incomplete any
	if status == "incomplete" {
		incomplete = map[string]any{"reason": "max_output_tokens"}
	}
	format := map[string]any{"type": "text"}
	if f := rs.req.Text.Format; f.Type != "" {
		format = map[string]any{"type": f.Type, "name": f.Name, "schema": f.Schema, "strict": true}
	}
	tools := rs.req.Tools
	if tools == nil {
		tools = []json.RawMessage{}
	}
	return map[string]any{"id": rs.id, "object": "response", "created_at": rs.created, "status": status, "model": rs.req.Model,
		"output": output, "usage": usage, "error": nil, "incomplete_details": incomplete, "instructions": nilIfEmpty(rs.req.Instructions),
		"max_output_tokens": rs.req.MaxOutputTokens, "metadata": map[string]any{}, "parallel_tool_calls": true, "temperature": 1,
		"tool_choice": "auto", "tools": tools, "top_p": 1, "text": map[string]any{"format": format}, "truncation": "disabled",
		"reasoning": map[string]any{"effort": nil, "summary": nil}, "store": true}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// output is the whole answer's output: the searches' calls, then the
// answer's item.
func (rs *responseStream) output() []any {
	return append(rs.search.items(rs.id), rs.item("completed", true))
}

// item is the answer's output item; whole says it has all its content.
func (rs *responseStream) item(status string, whole bool) map[string]any {
	if c := rs.ans.call; c != nil {
		args := ""
		if whole {
			args = c.args
		}
		return map[string]any{"type": "function_call", "id": rs.itemID, "call_id": c.id, "name": c.name, "arguments": args, "status": status}
	}
	content := []any{}
	if whole {
		content = []any{rs.part(rs.ans.text)}
	}
	return map[string]any{"type": "message", "id": rs.itemID, "status": status, "role": "assistant", "content": content}
}

func (rs *responseStream) part(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
}

func (rs *responseStream) event(typ string, v map[string]any) bool {
	v["type"], v["sequence_number"] = typ, rs.seq
	rs.seq++
	return rs.send(typ, v)
}

// stream sends the answer as the API's event sequence.
func (rs *responseStream) stream(w http.ResponseWriter, r *http.Request) {
	s, model := rs.s, rs.req.Model
	rs.send = s.eventWriter(w, r)
	if !rs.event("response.created", map[string]any{"response": rs.response("in_progress", []any{}, nil)}) ||
		!rs.event("response.in_progress", map[string]any{"response": rs.response("in_progress", []any{}, nil)}) {
		return
	}
	// Each search: its item added, in progress, searching, completed,
	// done (the events OpenAI sends for a web_search_call).
	searches := rs.search.items(rs.id)
	for i, it := range searches {
		item := it.(map[string]any)
		added := map[string]any{"type": "web_search_call", "id": item["id"], "status": "in_progress", "action": map[string]any{"type": "search"}}
		if !rs.event("response.output_item.added", map[string]any{"output_index": i, "item": added}) {
			return
		}
		for _, step := range []string{"in_progress", "searching", "completed"} {
			if !rs.event("response.web_search_call."+step, map[string]any{"output_index": i, "item_id": item["id"]}) {
				return
			}
		}
		if !rs.event("response.output_item.done", map[string]any{"output_index": i, "item": item}) {
			return
		}
	}
	at := len(searches)
	if !rs.event("response.output_item.added", map[string]any{"output_index": at, "item": rs.item("in_progress", false)}) {
		return
	}
	with := func(kv ...any) map[string]any {
		m := map[string]any{"item_id": rs.itemID, "output_index": at}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	if c := rs.ans.call; c != nil {
		for _, p := range pieces(c.args, 12) {
			if !rs.event("response.function_call_arguments.delta", with("delta", p)) {
				return
			}
		}
		s.delivered(model, rs.ans.tokens)
		rs.event("response.function_call_arguments.done", with("arguments", c.args, "name", c.name))
	} else {
		rs.event("response.content_part.added", with("content_index", 0, "part", rs.part("")))
		var sent []string
		var n int64
		if !s.streamWords(r, model, rs.ans.text, rs.ans.tokens/2, &n, func(piece string, _ bool) bool {
			if strings.HasPrefix(rs.ans.text, " ") || len(sent) > 0 {
				piece = " " + piece
			}
			sent = append(sent, piece)
			return rs.event("response.output_text.delta", with("content_index", 0, "delta", piece, "logprobs", []any{}))
		}) {
			return
		}
		text := strings.Join(sent, "")
		rs.event("response.output_text.done", with("content_index", 0, "text", text, "logprobs", []any{}))
		rs.event("response.content_part.done", with("content_index", 0, "part", rs.part(text)))
	}
	rs.event("response.output_item.done", map[string]any{"output_index": at, "item": rs.item("completed", true)})
	status := rs.status()
	var usage any
	if s.opts.Fault != DropUsage {
		s.record(model, rs.prompt, rs.out)
		usage = rs.usage()
	}
	rs.event("response."+status, map[string]any{"response": rs.response(status, rs.output(), usage)})
}
