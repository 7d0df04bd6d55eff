package simulated

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"

	"github.com/tollgate-dev/tollgate/tokenizer"
)

// ClaudeFactor is how the simulated Anthropic upstream models Claude's
// tokenizer, which is not public: 1.2 tokens per BPE token of the same
// text, never more than its bytes (foreignTokens). A calibrated
// token_ratio for Claude (1.35 in the docs' example) must stay above it.
const ClaudeFactor = 1.2

// foreignTokens is how a simulated model whose tokenizer is not public
// counts a text: its BPE count times factor, and never more than its
// UTF-8 bytes, as no byte-level tokenizer makes a token of less than a
// byte (on punctuation or emoji, where a BPE token is a byte or two, the
// cap is what is billed).
func foreignTokens(c *tokenizer.Counter, s string, factor float64) int64 {
	return min(int64(math.Ceil(float64(c.Count(s))*factor)), int64(len(s)))
}

type messagesRequest struct {
	Model     string          `json:"model"`
	MaxTokens int64           `json:"max_tokens"`
	System    json.RawMessage `json:"system"`
	Messages  []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Stream     bool              `json:"stream"`
	Tools      []json.RawMessage `json:"tools"`
	ToolChoice struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tool_choice"`
}

// ask reads what a Messages request asks of its answer.
func (req *messagesRequest) ask() ask {
	a := ask{mode: req.ToolChoice.Type, name: req.ToolChoice.Name}
	for _, raw := range req.Tools {
		var t struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
		}
		if json.Unmarshal(raw, &t) == nil {
			a.tools = append(a.tools, tool{Name: t.Name, Schema: t.InputSchema})
		}
	}
	if n := len(req.Messages); n > 0 {
		a.result = strings.Contains(string(req.Messages[n-1].Content), `"tool_result"`)
	}
	return a
}

// anthropicText is the text of a content field, and what its images cost
// (high: on a high-resolution model).
func anthropicText(raw json.RawMessage, high bool) (string, int64) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, 0
	}
	var blocks []struct {
		Type, Text, Name string
		Input            json.RawMessage
		Content          json.RawMessage
		Source           struct {
			Type      string `json:"type"`
			MediaType string `json:"media_type"`
			Data      string `json:"data"`
		}
	}
	_ = json.Unmarshal(raw, &blocks)
	var b strings.Builder
	var images int64
	for _, x := range blocks {
		b.WriteString(x.Text)
		switch x.Type {
		case "image":
			images += claudeImageTokens(x.Source.Data, high)
		case "document":
			if x.Source.MediaType == "application/pdf" {
				images += claudePDFPage * pdfPageCount(x.Source.Data)
			} else {
				b.WriteString(x.Source.Data)
			}
		case "tool_use":
			b.WriteString(x.Name + compact(x.Input))
		case "tool_result":
			text, img := anthropicText(x.Content, high)
			b.WriteString(text)
			images += img
		}
	}
	return b.String(), images
}

// claudeToolPrompt is the system prompt Anthropic adds to a request with
// tools (Claude 4, tool_choice auto).
const claudeToolPrompt = 346

func anthropicError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}

// messages answers Anthropic's Messages API.
func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req messagesRequest
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil || req.Model == "" || req.MaxTokens <= 0 || len(req.Messages) == 0 {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "model, max_tokens and messages are required")
		return
	}
	if r.Header.Get("Anthropic-Version") == "" {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version header is required")
		return
	}
	prompt := s.claudePrompt(&req)
	cache := s.useCache(&req, prompt)
	seed := seedOf(body)
	search := searchLoop(&req, prompt, seed)
	calls := search.searches * searchCallTokens // the searches' calls are output too
	ans := s.answer(s.counter(req.Model), seed, req.MaxTokens-calls, req.ask())
	n := min(int64(math.Ceil(float64(ans.tokens)*ClaudeFactor)), req.MaxTokens-calls)
	if ans.call == nil {
		n = ans.tokens // text is generated to its token count
	}
	n += calls
	s.bill(req.Model, prompt+search.extra, n)
	s.billCalls(req.Model, search.searches)
	sc := messagesSurcharge(body, r.Header, s.opts.StandardSpeed)
	s.surcharge(req.Model, sc, prompt+search.extra, n)
	m := claudeMessage{speed: cmp.Or(sc.speed, "standard"), geo: cmp.Or(sc.geo, "global"), model: req.Model, id: fmt.Sprintf("msg_sim%016x", seed), text: ans.text, prompt: prompt, cache: cache, output: n, call: ans.call,
		search: search, stop: map[string]string{"stop": "end_turn", "length": "max_tokens", "tool": "tool_use"}[ans.finish]}
	if m.call != nil {
		m.call.id = fmt.Sprintf("toolu_sim%016x", seed)
	}
	if !req.Stream {
		s.record(req.Model, prompt+search.extra, n)
		s.delivered(req.Model, n)
		content := append(search.blocks(m.id), map[string]any{"type": "text", "text": m.text})
		if m.call != nil {
			content[len(content)-1] = map[string]any{"type": "tool_use", "id": m.call.id, "name": m.call.name, "input": json.RawMessage(m.call.args)}
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"id": m.id, "type": "message", "role": "assistant", "model": m.model,
			"content": content, "stop_reason": m.stop, "stop_sequence": nil,
			"usage": m.modes(search.usage(cache.usage(prompt, n))),
		})
		return
	}
	s.streamMessage(w, r, &m)
}

// claudePrompt is what Claude bills req's input as: its texts counted
// by claudeTokens, 3 a message, the tools' prompt, and each image.
func (s *Server) claudePrompt(req *messagesRequest) int64 {
	c := s.counter(req.Model)
	var n int64
	if len(req.System) > 0 {
		text, img := anthropicText(req.System, claudeHighRes(req.Model))
		n = claudeTokens(c, text) + img
	}
	for _, m := range req.Messages {
		text, img := anthropicText(m.Content, claudeHighRes(req.Model))
		n += 3 + claudeTokens(c, text) + img
	}
	if len(req.Tools) > 0 {
		n += claudeToolPrompt
		for _, t := range req.Tools {
			n += claudeTokens(c, compact(t))
		}
	}
	return n
}

// claudeTokens is how the simulated Claude counts a text.
func claudeTokens(c *tokenizer.Counter, s string) int64 {
	return foreignTokens(c, s, ClaudeFactor)
}

// claudeMessage is one generated answer of the Messages API.
type claudeMessage struct {
	model, id, text, stop string
	speed, geo            string // as usage reports them: "standard" or "fast", "global" or "us"
	prompt, output        int64
	cache                 cacheUse
	call                  *toolCall
	search                webSearch
}

// streamMessage answers with Anthropic's event sequence, with the faults
// the server was told to make.
func (s *Server) streamMessage(w http.ResponseWriter, r *http.Request, m *claudeMessage) {
	send := s.eventWriter(w, r)
	if !send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": m.id, "type": "message", "role": "assistant", "model": m.model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": m.modes(m.cache.usage(m.prompt, 1))}}) {
		return
	}
	at := s.streamSearches(send, m)
	if m.call != nil {
		s.streamToolUse(send, m, at)
		return
	}
	send("content_block_start", map[string]any{"type": "content_block_start", "index": at, "content_block": map[string]any{"type": "text", "text": ""}})
	send("ping", map[string]any{"type": "ping"})
	var sent int64
	if !s.streamWords(r, m.model, m.text, m.output/2, &sent, func(piece string, _ bool) bool {
		d := textDelta{Type: "content_block_delta", Index: at}
		d.Delta.Type, d.Delta.Text = "text_delta", " "+piece
		return send("content_block_delta", d)
	}) {
		return
	}
	send("content_block_stop", map[string]any{"type": "content_block_stop", "index": at})
	if s.opts.Fault != DropUsage {
		s.record(m.model, m.prompt+m.search.extra, m.output)
		delta := map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": m.stop, "stop_sequence": nil},
			"usage": m.finalUsage()}
		send("message_delta", delta)
		if s.opts.Fault == DoubleUsage {
			send("message_delta", delta)
		}
	}
	send("message_stop", map[string]any{"type": "message_stop"})
}

// textDelta is a text delta with its fields in the order Anthropic's API
// writes them ({"type":…,"index":…,"delta":{"type":…,"text":…}}), which a
// map would sort: a client that reads the common event by its bytes is
// tested on the bytes it gets.
type textDelta struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
	Delta struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"delta"`
}

// streamToolUse streams a tool_use block as Anthropic does: the block with
// its id and name, its input in partial JSON, then the stop.
func (s *Server) streamToolUse(send func(string, any) bool, m *claudeMessage, at int) {
	send("content_block_start", map[string]any{"type": "content_block_start", "index": at,
		"content_block": map[string]any{"type": "tool_use", "id": m.call.id, "name": m.call.name, "input": map[string]any{}}})
	for _, p := range pieces(m.call.args, 12) {
		if !send("content_block_delta", map[string]any{"type": "content_block_delta", "index": at,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": p}}) {
			return
		}
	}
	s.delivered(m.model, m.output)
	send("content_block_stop", map[string]any{"type": "content_block_stop", "index": at})
	s.record(m.model, m.prompt+m.search.extra, m.output)
	send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": m.stop, "stop_sequence": nil},
		"usage": m.finalUsage()})
	send("message_stop", map[string]any{"type": "message_stop"})
}

// modes adds to u the speed and region the answer ran at, as Anthropic
// reports them (usage.speed, usage.inference_geo).
func (m *claudeMessage) modes(u map[string]any) map[string]any {
	u["speed"], u["inference_geo"] = m.speed, m.geo
	return u
}

// finalUsage is the usage of a stream's message_delta: its output, and —
// where it searched — every figure again, the input now with what the
// searches added, and their count (as Anthropic's API reports them).
func (m *claudeMessage) finalUsage() map[string]any {
	if !m.search.offered {
		return map[string]any{"output_tokens": m.output}
	}
	return m.search.usage(m.cache.usage(m.prompt, m.output))
}

// streamSearches streams the searches' blocks, each call (its input in
// partial JSON) and its results, and returns the index of the next block.
func (s *Server) streamSearches(send func(string, any) bool, m *claudeMessage) int {
	blocks := m.search.blocks(m.id)
	for i, b := range blocks {
		block := b.(map[string]any)
		if block["type"] == "server_tool_use" {
			input, _ := json.Marshal(block["input"])
			block = map[string]any{"type": "server_tool_use", "id": block["id"], "name": block["name"], "input": map[string]any{}}
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": block})
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
		} else {
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": block})
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	return len(blocks)
}
