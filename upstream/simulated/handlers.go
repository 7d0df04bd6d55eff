package simulated

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/tokenizer"
)

type request struct {
	// audio is the audio part of the prompt, in tokens (set by chat).
	audio int64
	// surcharge is what the provider bills beyond the tokens (set by chat).
	surcharge           surcharge
	Model               string            `json:"model"`
	Messages            []json.RawMessage `json:"messages"`
	Tools               []json.RawMessage `json:"tools"`
	Prompt              json.RawMessage   `json:"prompt"`
	Input               json.RawMessage   `json:"input"`
	MaxTokens           int64             `json:"max_tokens"`
	MaxCompletionTokens int64             `json:"max_completion_tokens"`
	N                   int64             `json:"n"`
	BestOf              int64             `json:"best_of"`
	Stream              bool              `json:"stream"`
	StreamOptions       struct {
		IncludeUsage       bool  `json:"include_usage"`
		IncludeObfuscation *bool `json:"include_obfuscation"`
	} `json:"stream_options"`
	// ReasoningEffort makes a chat model think first: hidden reasoning
	// tokens, billed and reported as output, never sent.
	ReasoningEffort string          `json:"reasoning_effort"`
	Dimensions      int             `json:"dimensions"`
	EncodingFormat  string          `json:"encoding_format"`
	ToolChoice      json.RawMessage `json:"tool_choice"`
	ResponseFormat  struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
}

// ask reads what a chat request asks of its answer.
func (req *request) ask() ask {
	var a ask
	for _, raw := range req.Tools {
		var t struct {
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if json.Unmarshal(raw, &t) == nil {
			a.tools = append(a.tools, tool{Name: t.Function.Name, Schema: t.Function.Parameters})
		}
	}
	var mode string
	var named struct {
		Function struct{ Name string } `json:"function"`
	}
	switch {
	case json.Unmarshal(req.ToolChoice, &mode) == nil:
		a.mode = map[string]string{"required": "any"}[mode]
		if a.mode == "" {
			a.mode = mode
		}
	case json.Unmarshal(req.ToolChoice, &named) == nil && named.Function.Name != "":
		a.mode, a.name = "tool", named.Function.Name
	}
	if n := len(req.Messages); n > 0 {
		var last message
		_ = json.Unmarshal(req.Messages[n-1], &last)
		a.result = last.Role == "tool"
	}
	switch req.ResponseFormat.Type {
	case "json_schema":
		a.schema = req.ResponseFormat.JSONSchema.Schema
	case "json_object":
		a.json = true
	}
	return a
}

func (s *Server) decode(w http.ResponseWriter, r *http.Request) (*request, []byte, bool) {
	body, err := io.ReadAll(r.Body)
	var req request
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil || req.Model == "" {
		writeError(w, http.StatusBadRequest, "invalid_request", "could not parse the request body")
		return nil, nil, false
	}
	if req.N == 0 {
		req.N = 1
	}
	return &req, body, true
}

type message struct {
	Role    string          `json:"role"`
	Name    string          `json:"name"`
	Content json.RawMessage `json:"content"`
}

// chatPrompt counts the prompt as the API does: the cookbook's per-message
// overheads, and tools in the compact rendering the cookbook describes.
func chatPrompt(c *tokenizer.Counter, req *request) (n, audio int64) {
	n = 3
	for _, raw := range req.Messages {
		var m message
		_ = json.Unmarshal(raw, &m)
		n += 3 + c.Count(m.Role)
		if m.Name != "" {
			n += 1 + c.Count(m.Name)
		}
		var text string
		if json.Unmarshal(m.Content, &text) == nil {
			n += c.Count(text)
			continue
		}
		var parts []struct {
			Type     string          `json:"type"`
			Text     string          `json:"text"`
			ImageURL json.RawMessage `json:"image_url"`
			File     struct {
				FileData string `json:"file_data"`
			} `json:"file"`
			InputAudio struct {
				Data   string `json:"data"`
				Format string `json:"format"`
			} `json:"input_audio"`
		}
		_ = json.Unmarshal(m.Content, &parts)
		for _, p := range parts {
			switch p.Type {
			case "text":
				n += c.Count(p.Text)
			case "input_audio":
				a := audioTokens(p.InputAudio.Format, p.InputAudio.Data)
				n += a
				audio += a
			case "file":
				_, b64, _ := strings.Cut(p.File.FileData, ";base64,")
				n += openAIPDFPage * pdfPageCount(b64)
			case "image_url":
				var img struct{ URL, Detail string }
				if json.Unmarshal(p.ImageURL, &img) != nil {
					_ = json.Unmarshal(p.ImageURL, &img.URL)
				}
				n += openAIImageTokens(req.Model, img.URL, img.Detail)
			}
		}
	}
	for _, raw := range req.Tools {
		var t struct {
			Function struct {
				Name        string `json:"name"`
				Description string `json:"description"`
				Parameters  struct {
					Properties map[string]struct {
						Type        string   `json:"type"`
						Description string   `json:"description"`
						Enum        []string `json:"enum"`
					} `json:"properties"`
				} `json:"parameters"`
			} `json:"function"`
		}
		_ = json.Unmarshal(raw, &t)
		f := t.Function
		n += 7 + c.Count(f.Name+":"+strings.TrimSuffix(f.Description, ".")) + 12
		if len(f.Parameters.Properties) > 0 {
			n += 3
		}
		for k, p := range f.Parameters.Properties {
			n += 3 + c.Count(k+":"+p.Type+":"+strings.TrimSuffix(p.Description, "."))
			for _, e := range p.Enum {
				n += 3 + c.Count(e)
			}
		}
	}
	return n, audio
}

func promptTokens(c *tokenizer.Counter, raw json.RawMessage) int64 {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return c.Count(s)
	}
	var list []json.RawMessage
	_ = json.Unmarshal(raw, &list)
	var n int64
	for _, item := range list {
		var toks []int64
		switch {
		case json.Unmarshal(item, &s) == nil:
			n += c.Count(s)
		case json.Unmarshal(item, &toks) == nil:
			n += int64(len(toks))
		default:
			n++
		}
	}
	return n
}

type usage struct {
	PromptTokens      int64          `json:"prompt_tokens"`
	CompletionTokens  int64          `json:"completion_tokens"`
	TotalTokens       int64          `json:"total_tokens"`
	Details           *inputDetails  `json:"prompt_tokens_details,omitempty"`
	CompletionDetails *outputDetails `json:"completion_tokens_details,omitempty"`
}

// outputDetails is the reasoning part of the output, as OpenAI reports it.
type outputDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// reasoningTokens is what a reasoning model thinks before it answers,
// within the output cap it shares with the answer (0: none): 64 tokens,
// or half a smaller cap.
func reasoningTokens(limit int64) int64 {
	if limit > 0 && limit < 128 {
		return limit / 2
	}
	return 64
}

// reportedUsage is u as the server reports it: without completion_tokens
// under PartialUsage.
func (s *Server) reportedUsage(u usage) any {
	if s.opts.Fault != PartialUsage {
		return u
	}
	return map[string]any{"prompt_tokens": u.PromptTokens, "total_tokens": u.TotalTokens}
}

// inputDetails is the audio part of a prompt, as OpenAI reports it.
type inputDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
	AudioTokens  int64 `json:"audio_tokens"`
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	req, body, ok := s.decode(w, r)
	if !ok {
		return
	}
	limit := req.MaxCompletionTokens
	if limit == 0 || s.opts.Dialect != "" {
		limit = req.MaxTokens // the dialects ignore max_completion_tokens
	}
	if s.opts.Dialect == "mistral" && req.StreamOptions.IncludeUsage {
		writeError(w, http.StatusUnprocessableEntity, "invalid_request", "stream_options: Extra inputs are not permitted")
		return
	}
	prompt, audio := chatPrompt(s.counter(req.Model), req)
	req.audio = audio
	req.surcharge = chatSurcharge(body, s.counter(req.Model))
	s.generate(w, r, req, seedOf(body), prompt, limit, true)
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	req, body, ok := s.decode(w, r)
	if !ok {
		return
	}
	limit := req.MaxTokens
	if limit == 0 {
		limit = 16
	}
	// Every prompt gets its own n choices; best_of are generated (and
	// billed) and the best n returned.
	prompts := int64(1)
	var list []json.RawMessage
	if json.Unmarshal(req.Prompt, &list) == nil && len(list) > 0 {
		var tok int64
		if json.Unmarshal(list[0], &tok) != nil { // not one tokenized prompt
			prompts = int64(len(list))
		}
	}
	req.BestOf = max(req.BestOf, req.N) * prompts
	req.N *= prompts
	s.generate(w, r, req, seedOf(body), promptTokens(s.counter(req.Model), req.Prompt), limit, false)
}

// generate answers chat (or legacy completions) with req.N deterministic
// choices, streamed or not.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, req *request, seed uint64, prompt, limit int64, chat bool) {
	g := generation{req: req, seed: seed, chat: chat, created: time.Now().Unix(), choices: make([]choice, req.N)}
	var completion, thought int64
	a := req.ask()
	think := int64(0)
	if chat && req.ReasoningEffort != "" {
		think = reasoningTokens(limit)
		if limit > 0 {
			limit -= think
		}
	}
	for i := range max(req.N, req.BestOf) {
		c := choice{}
		thought += think // each choice thinks first, unseen
		if chat {
			ans := s.answer(s.counter(req.Model), seed+uint64(i), limit, a)
			c = choice{text: ans.text, finish: ans.finish, tokens: ans.tokens, call: ans.call}
			if c.finish == "tool" {
				c.finish = "tool_calls"
			}
		} else {
			n, finish := s.replyTokens(seed+uint64(i), limit)
			c = choice{text: reply(seed+uint64(i), n), finish: finish, tokens: n}
		}
		if i < int64(len(g.choices)) {
			g.choices[i] = c
		}
		completion += c.tokens // best_of bills every candidate generated
	}
	completion += req.surcharge.rejected // the prediction's rejected tokens bill as output
	completion += thought
	g.usage = usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
	if thought > 0 {
		g.usage.CompletionDetails = &outputDetails{ReasoningTokens: thought}
	}
	if req.audio > 0 {
		g.usage.Details = &inputDetails{AudioTokens: req.audio}
	}
	s.bill(req.Model, prompt, completion)
	s.surcharge(req.Model, req.surcharge, prompt, completion)
	s.billAudio(req.Model, req.audio)
	g.object, g.chunkObject, g.prefix = "text_completion", "text_completion", "cmpl"
	if chat {
		g.object, g.chunkObject, g.prefix = "chat.completion", "chat.completion.chunk", "chatcmpl"
	}
	if !req.Stream {
		s.writeCompletion(w, &g)
		return
	}
	s.streamCompletion(w, r, &g)
}

// choice is one generated answer of a completion.
type choice struct {
	text   string
	finish string
	tokens int64
	call   *toolCall
}

// generation is one completion, generated, on its way to the client.
type generation struct {
	req                         *request
	seed                        uint64
	chat                        bool
	created                     int64
	choices                     []choice
	usage                       usage
	object, chunkObject, prefix string
	chunks                      uint64 // chunks sent, for their obfuscation
}

// writeCompletion answers a completion in one JSON body, its fields in
// the order OpenAI writes them.
func (s *Server) writeCompletion(w http.ResponseWriter, g *generation) {
	out := make([]any, len(g.choices))
	for i, c := range g.choices {
		ch := object().set("index", i)
		if g.chat {
			msg := object().set("role", "assistant").set("content", c.text).set("refusal", nil).set("annotations", []any{})
			if c.call != nil {
				msg.set("content", nil)
				msg.set("tool_calls", []any{object().set("id", c.call.id).set("type", "function").
					set("function", object().set("name", c.call.name).set("arguments", c.call.args))})
			}
			ch.set("message", msg)
		} else {
			ch.set("text", c.text)
		}
		out[i] = ch.set("logprobs", nil).set("finish_reason", c.finish)
	}
	s.record(g.req.Model, g.usage.PromptTokens, g.usage.CompletionTokens)
	s.delivered(g.req.Model, g.usage.CompletionTokens)
	writeJSON(w, http.StatusOK, object().set("id", id(g.prefix, g.seed)).set("object", g.object).
		set("created", g.created).set("model", g.req.Model).set("choices", out).set("usage", s.reportedUsage(g.usage)).
		set("service_tier", "default").set("system_fingerprint", "fp_simulated"))
}

// chunk is one streamed chunk of choice i of g, as OpenAI writes it:
// "usage": null on every chunk of a stream that asked for usage, and an
// "obfuscation" string of random length on every delta chunk unless
// stream_options.include_obfuscation is false.
func (g *generation) chunk(i int, text string, finish any, first bool) *fields {
	c := object().set("index", i)
	if g.chat {
		delta := object()
		if first {
			delta.set("role", "assistant")
		}
		if text != "" || first {
			delta.set("content", text)
		}
		if first {
			delta.set("refusal", nil)
		}
		c.set("delta", delta)
	} else {
		c.set("text", text)
	}
	c.set("logprobs", nil).set("finish_reason", finish)
	ch := g.head().set("choices", []any{c})
	if g.req.StreamOptions.IncludeUsage {
		ch.set("usage", nil)
	}
	if o := g.req.StreamOptions.IncludeObfuscation; o == nil || *o {
		g.chunks++
		ch.set("obfuscation", obfuscation(g.seed+g.chunks))
	}
	return ch
}

// head is the first fields of every chunk of g.
func (g *generation) head() *fields {
	return object().set("id", id(g.prefix, g.seed)).set("object", g.chunkObject).set("created", g.created).
		set("model", g.req.Model).set("service_tier", "default").set("system_fingerprint", "fp_simulated")
}

// obfuscation is 1 to 16 random characters.
func obfuscation(seed uint64) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	x := seed*0x9E3779B97F4A7C15 + 1
	b := make([]byte, 1+x%16)
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = alphabet[x%uint64(len(alphabet))]
	}
	return string(b)
}

// fields is a JSON object that keeps its keys in the order they were
// first set — as a real server writes its structs, not sorted as Go
// writes a map.
type fields struct {
	keys []string
	vals []any
}

func object() *fields { return &fields{} }

// set sets key to v, in its place if it is set already.
func (f *fields) set(key string, v any) *fields {
	for i, k := range f.keys {
		if k == key {
			f.vals[i] = v
			return f
		}
	}
	f.keys, f.vals = append(f.keys, key), append(f.vals, v)
	return f
}

// MarshalJSON writes the fields in order.
func (f *fields) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, k := range f.keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, k)
		b = append(b, ':')
		v, err := json.Marshal(f.vals[i])
		if err != nil {
			return nil, err
		}
		b = append(b, v...)
	}
	return append(b, '}'), nil
}

// streamCompletion answers a completion as server-sent events, with the
// faults the server was told to make.
func (s *Server) streamCompletion(w http.ResponseWriter, r *http.Request, g *generation) {
	sendEvent := s.eventWriter(w, r)
	send := func(v any) bool { return sendEvent("", v) }
	var half int64 // half the visible output: a faulty stream breaks there
	for _, c := range g.choices {
		half += c.tokens
	}
	half /= 2
	var sent int64
	for i, c := range g.choices {
		if g.chat && !send(g.chunk(i, "", nil, true)) {
			return
		}
		if c.call != nil {
			if !s.streamCall(send, g, i, c) {
				return
			}
			continue
		}
		if !s.streamWords(r, g.req.Model, c.text, half, &sent, func(piece string, _ bool) bool {
			return send(g.chunk(i, " "+piece, nil, false))
		}) {
			return // cut: no finish, no usage, no [DONE]
		}
		last := g.chunk(i, "", c.finish, false)
		if i == len(g.choices)-1 && s.opts.Fault != DropUsage {
			switch s.opts.Dialect {
			case "mistral":
				last.set("usage", g.usage)
			case "groq":
				last.set("x_groq", object().set("id", "req_sim").set("usage", g.usage))
			}
			if s.opts.Dialect != "" {
				s.record(g.req.Model, g.usage.PromptTokens, g.usage.CompletionTokens)
			}
		}
		if !send(last) {
			return
		}
	}
	usageChunk := g.head().set("choices", []any{}).set("usage", s.reportedUsage(g.usage))
	if g.req.StreamOptions.IncludeUsage && s.opts.Fault != DropUsage && s.opts.Dialect == "" {
		s.record(g.req.Model, g.usage.PromptTokens, g.usage.CompletionTokens)
		if !send(usageChunk) {
			return
		}
		if s.opts.Fault == DoubleUsage && !send(usageChunk) {
			return
		}
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) {
	req, body, ok := s.decode(w, r)
	if !ok {
		return
	}
	c := s.counter(req.Model)
	var inputs []json.RawMessage
	if len(req.Input) > 0 && req.Input[0] == '[' {
		_ = json.Unmarshal(req.Input, &inputs)
		var tok int64
		if len(inputs) > 0 && json.Unmarshal(inputs[0], &tok) == nil {
			inputs = []json.RawMessage{req.Input} // one input given as token ids
		}
	} else {
		inputs = []json.RawMessage{req.Input}
	}
	dims := req.Dimensions
	if dims <= 0 {
		dims = s.opts.Dimensions
	}
	seed := seedOf(body)
	data := make([]map[string]any, len(inputs))
	var prompt int64
	for i, in := range inputs {
		prompt += promptTokens(c, in)
		vec := make([]float32, dims)
		for j := range vec {
			vec[j] = float32(math.Sin(float64(seed%1000+uint64(i*dims+j)))) / float32(math.Sqrt(float64(dims)))
		}
		var emb any = vec
		if req.EncodingFormat == "base64" {
			b := make([]byte, 4*dims)
			for j, f := range vec {
				binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(f))
			}
			emb = base64.StdEncoding.EncodeToString(b)
		}
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": emb}
	}
	s.record(req.Model, prompt, 0)
	s.bill(req.Model, prompt, 0)
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data, "model": req.Model,
		"usage": map[string]int64{"prompt_tokens": prompt, "total_tokens": prompt}})
}

// streamCall streams choice i's tool call as OpenAI does: its id and name,
// then its arguments in pieces, then the finish.
func (s *Server) streamCall(send func(any) bool, g *generation, i int, c choice) bool {
	call := func(fn *fields, id string) *fields {
		tc := object().set("index", 0)
		if id != "" {
			tc.set("id", id).set("type", "function")
		}
		tc.set("function", fn)
		ch := g.chunk(i, "", nil, false)
		ch.vals[slices.Index(ch.keys, "choices")].([]any)[0].(*fields).set("delta", object().set("tool_calls", []any{tc}))
		return ch
	}
	if !send(call(object().set("name", c.call.name).set("arguments", ""), c.call.id)) {
		return false
	}
	for _, p := range pieces(c.call.args, 12) {
		if !send(call(object().set("arguments", p), "")) {
			return false
		}
	}
	s.delivered(g.req.Model, c.tokens)
	return send(g.chunk(i, "", c.finish, false))
}
