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
	Model           string          `json:"model"`
	Instructions    string          `json:"instructions"`
	Input           json.RawMessage `json:"input"`
	MaxOutputTokens int64           `json:"max_output_tokens"`
	Stream          bool            `json:"stream"`
}

// responsesPrompt counts a Responses API input as the chat format does.
func (s *Server) responsesPrompt(req *responsesRequest) int64 {
	c := s.counter(req.Model)
	n := int64(3)
	if req.Instructions != "" {
		n += 3 + c.Count("system") + c.Count(req.Instructions)
	}
	var text string
	if json.Unmarshal(req.Input, &text) == nil {
		return n + 3 + c.Count("user") + c.Count(text)
	}
	var items []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(req.Input, &items)
	for _, it := range items {
		n += 3 + c.Count(it.Role)
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
	return n
}

// responses answers OpenAI's Responses API.
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
	n, finish := s.replyTokens(seed, req.MaxOutputTokens)
	s.bill(req.Model, prompt, n)
	status := map[string]string{"stop": "completed", "length": "incomplete"}[finish]
	text := reply(seed, n)
	id, msgID := fmt.Sprintf("resp_sim%016x", seed), fmt.Sprintf("msg_sim%016x", seed)
	usage := map[string]any{"input_tokens": prompt, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": n, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": prompt + n}
	response := func(st string, out []any, u any) map[string]any {
		return map[string]any{"id": id, "object": "response", "created_at": time.Now().Unix(), "status": st, "model": req.Model,
			"output": out, "usage": u, "error": nil, "incomplete_details": nil, "instructions": nil, "metadata": map[string]any{},
			"parallel_tool_calls": true, "temperature": 1, "tool_choice": "auto", "tools": []any{}, "top_p": 1}
	}
	message := map[string]any{"type": "message", "id": msgID, "status": "completed", "role": "assistant",
		"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
	if !req.Stream {
		s.record(req.Model, prompt, n)
		s.delivered(req.Model, n)
		writeJSON(w, http.StatusOK, response(status, []any{message}, usage))
		return
	}
	sendEvent := s.eventWriter(w, r)
	seq := 0
	send := func(v map[string]any) bool {
		v["sequence_number"] = seq
		seq++
		return sendEvent(v["type"].(string), v)
	}

	if !send(map[string]any{"type": "response.created", "response": response("in_progress", []any{}, nil)}) {
		return
	}
	words := strings.Fields(text)
	for j := 0; j < len(words); j += 2 {
		piece := " " + strings.Join(words[j:min(j+2, len(words))], " ")
		if !send(map[string]any{"type": "response.output_text.delta", "item_id": msgID, "output_index": 0, "content_index": 0, "delta": piece}) {
			return
		}
		s.delivered(req.Model, int64(min(2, len(words)-j)))
	}
	s.record(req.Model, prompt, n)
	send(map[string]any{"type": "response." + status, "response": response(status, []any{message}, usage)})
}
