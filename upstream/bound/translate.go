package bound

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/tollgate-dev/tollgate/tokenizer"
	"github.com/tollgate-dev/tollgate/upstream/convert"
)

// Translation is how one request reaches an upstream that speaks another
// wire than its client, and how its answer comes back.
type Translation struct {
	// Client and Upstream are the two wires.
	Client, Upstream convert.Wire
	// FormatTool is the tool a JSON-output request was forced to call on
	// a wire without structured output (convert.FormatTool), or "".
	FormatTool string
	// ClientModel is the model the client asked for (an alias, maybe): the
	// answer names it.
	ClientModel string
	// IncludeUsage: an OpenAI client asked for the usage chunk.
	IncludeUsage bool
	chat         *convert.Chat
	writer       Writer
	model        *Model
}

// Writer is an upstream that takes requests of another wire than the
// client's: the wire it speaks for a model, and how it writes a request in
// it.
type Writer interface {
	Wire(model string) convert.Wire
	Encode(c *convert.Chat, m *Model) ([]byte, error)
}

// toolPromptTokens bounds what a provider adds to the prompt when tools
// are offered (Anthropic's tool system prompt is up to 346 tokens on
// Claude 4; Gemini's and Bedrock's are not published): the same margin for
// all.
const toolPromptTokens = 400

// translate prepares r for an upstream of another wire: the same reading,
// written out in the upstream's wire. Its bound is the reading's input
// count for m (what the translation writes is the same text, less what it
// leaves out), plus what the wire adds for tools; its output the cap
// written into it. What the other wire cannot carry is refused, never
// dropped where it changes the answer or the bill.
func (r *Request) translate(m *Model, up Upstream) (*Prepared, error) {
	w, ok := up.(Writer)
	var cw convert.Wire
	switch r.Endpoint {
	case Chat:
		cw = convert.OpenAI
	case Messages:
		cw = convert.Anthropic
	}
	if !ok || cw == 0 {
		return nil, badRequest("model", "%s is served by an upstream that cannot take %s requests", m.Name, r.Endpoint)
	}
	if err := r.passed(&Model{}); err != nil { // nothing unread passes into another wire
		return nil, err
	}
	if err := r.read.refused(m); err != nil {
		return nil, err
	}
	if m.Embedding {
		return nil, badRequest("model", "%s is an embedding model", m.Name)
	}
	var c *convert.Chat
	var capField string
	var err error
	if cw == convert.OpenAI {
		c, capField, err = r.read.(*chatRequest).canonical(m)
	} else {
		c, capField, err = r.read.(*messagesRequest).canonical()
	}
	if err != nil {
		return nil, err
	}
	in, _, err := r.read.input(m)
	if err != nil {
		return nil, err
	}
	wire := w.Wire(m.Name)
	p := &Prepared{req: r, Choices: 1, ClientWantsUsage: true, CapField: capField,
		InputTokens: scale(in+resultMessages(c, m), m.TokenRatio)}
	if (len(c.Tools) > 0 || c.Format != nil) && wire != convert.OpenAI && cw != convert.Anthropic {
		p.InputTokens += toolPromptTokens // (a Messages request's count has Anthropic's own)
	}
	if c.MaxTokens < 1 || c.MaxTokens > m.MaxOutputTokens {
		return nil, badRequest(capField, "must be between 1 and %d", m.MaxOutputTokens)
	}
	clientModel := c.Model
	c.Model = m.Name
	t := &Translation{Client: cw, Upstream: wire, ClientModel: clientModel, chat: c, writer: w, model: m}
	if c.Format != nil && (wire == convert.Anthropic || wire == convert.Converse) {
		t.FormatTool = convert.FormatTool
	}
	if cw == convert.OpenAI && c.Stream {
		opts := r.read.(*chatRequest).StreamOptions
		t.IncludeUsage = opts != nil && opts.IncludeUsage != nil && *opts.IncludeUsage
	}
	p.Translation = t
	if err := p.encode(c.MaxTokens); err != nil {
		return nil, err
	}
	return p, nil
}

// resultMessages bounds what a translation adds by writing each tool
// result as a message of its own (OpenAI's wire does; Anthropic's puts all
// of a turn's in one message, as the reading counted them): a message's
// overhead and role for each.
func resultMessages(c *convert.Chat, m *Model) int64 {
	var n int64
	for _, msg := range c.Messages {
		for _, p := range msg.Parts {
			if p.Kind == convert.Result {
				n++
			}
		}
	}
	return n * (tokenizer.TokensPerMessage + m.Counter.Count("tool"))
}

// encode writes the translation's request with an output cap of limit.
func (p *Prepared) encode(limit int64) error {
	t := p.Translation
	t.chat.MaxTokens = limit
	body, err := t.writer.Encode(t.chat, t.model)
	if err != nil {
		if ce, ok := err.(*convert.Error); ok {
			return badRequest(ce.Param, "%s", ce.Message)
		}
		return fmt.Errorf("bound: writing the %s request: %w", t.Upstream, err)
	}
	p.Body, p.OutputCap, p.MaxOutputTokens = body, limit, limit
	return nil
}

// canonical is a chat as the canonical conversation, and its cap's field.
// What changes the answer or the bill and has no equivalent on other wires
// (several choices, log probabilities, audio, predictions, hosted search,
// legacy functions) is refused; penalties, seeds and metadata are left
// out.
func (c *chatRequest) canonical(m *Model) (*convert.Chat, string, error) {
	out := &convert.Chat{Model: c.Model, Stream: c.Stream, User: deref(c.User)}
	if c.N != nil && *c.N != 1 {
		return nil, "", badRequest("n", "must be 1 for this model: its provider generates one choice a request")
	}
	for _, f := range [...]struct {
		name string
		v    jsontext.Value
	}{{"logprobs", c.Logprobs}, {"top_logprobs", c.TopLogprobs}, {"audio", c.Audio}, {"web_search_options", c.WebSearchOptions},
		{"function_call", c.FunctionCall}} {
		if present(f.v) && string(f.v) != "false" {
			return nil, "", badRequest(f.name, "is not supported for this model: its provider has no equivalent")
		}
	}
	for _, f := range [...]struct {
		name string
		set  bool
	}{{"prediction", c.Prediction != nil}, {"functions", len(c.Functions) > 0}, {"best_of", c.BestOf != nil}} {
		if f.set {
			return nil, "", badRequest(f.name, "is not supported for this model: its provider has no equivalent")
		}
	}
	for _, x := range c.Modalities {
		if x != "text" {
			return nil, "", badRequest("modalities", "modalities %q is not supported for this model", x)
		}
	}
	capField := "max_completion_tokens"
	out.MaxTokens = m.DefaultOutputTokens
	switch {
	case c.MaxTokens != nil && c.MaxCompletionTokens != nil:
		return nil, "", badRequest("max_tokens", "set max_tokens or max_completion_tokens, not both")
	case c.MaxTokens != nil:
		capField, out.MaxTokens = "max_tokens", *c.MaxTokens
	case c.MaxCompletionTokens != nil:
		out.MaxTokens = *c.MaxCompletionTokens
	}
	var err error
	if out.Temperature, err = number("temperature", c.Temperature); err != nil {
		return nil, "", err
	}
	if out.TopP, err = number("top_p", c.TopP); err != nil {
		return nil, "", err
	}
	if out.Stop, err = strs("stop", c.Stop); err != nil {
		return nil, "", err
	}
	if f := c.ResponseFormat; f != nil {
		if out.Format, err = f.canonical(); err != nil {
			return nil, "", err
		}
	}
	if err := c.canonicalTools(out); err != nil {
		return nil, "", err
	}
	names := map[string]string{} // tool call id → tool name
	for i := range c.Messages {
		if err := c.Messages[i].canonical(out, "messages["+strconv.Itoa(i)+"]", names); err != nil {
			return nil, "", err
		}
	}
	return out, capField, nil
}

func (f *responseFormat) canonical() (*convert.Format, error) {
	switch f.Type {
	case "", "text":
		return nil, nil
	case "json_object":
		return &convert.Format{}, nil
	case "json_schema":
		var s struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			Schema      jsontext.Value `json:"schema"`
			Strict      bool           `json:"strict"`
		}
		if err := json.Unmarshal(f.JSONSchema, &s, strict); err != nil || s.Schema.Kind() != '{' {
			return nil, badRequest("response_format.json_schema.schema", "must be an object")
		}
		return &convert.Format{Name: s.Name, Schema: []byte(s.Schema), Strict: s.Strict}, nil
	}
	return nil, badRequest("response_format.type", "response_format.type %q is not supported", f.Type)
}

func (c *chatRequest) canonicalTools(out *convert.Chat) error {
	for i, t := range c.Tools {
		if t.Type != "function" {
			return badRequest("tools["+strconv.Itoa(i)+"].type", "only function tools are supported for this model")
		}
		var fn struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			Parameters  jsontext.Value `json:"parameters"`
			Strict      jsontext.Value `json:"strict"`
		}
		if err := json.Unmarshal(t.Function, &fn, strict); err != nil {
			return readError(err).under("tools[" + strconv.Itoa(i) + "].function")
		}
		params := fn.Parameters
		if len(params) == 0 {
			params = jsontext.Value(`{"type":"object","properties":{}}`)
		}
		out.Tools = append(out.Tools, convert.Tool{Name: fn.Name, Description: fn.Description, Parameters: []byte(params)})
	}
	switch tc := c.ToolChoice; tc.Kind() {
	case '"':
		if err := json.Unmarshal(tc, &out.ToolChoice); err != nil {
			return badRequest("tool_choice", "must be a string or an object")
		}
	case '{':
		var named struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := json.Unmarshal(tc, &named, strict); err != nil {
			return readError(err).under("tool_choice")
		}
		out.ToolChoice, out.ToolName = "tool", named.Function.Name
	}
	if p := c.ParallelToolCalls; p.Kind() == 't' || p.Kind() == 'f' {
		b := p.Kind() == 't'
		out.ParallelTools = &b
	}
	return nil
}

func (msg *chatMessage) canonical(out *convert.Chat, at string, names map[string]string) error {
	parts, err := msg.Content.canonical(at + ".content")
	if err != nil {
		return err
	}
	switch msg.Role {
	case "system", "developer":
		out.System = append(out.System, parts...)
	case "user":
		out.Messages = append(out.Messages, convert.Message{Role: "user", Parts: parts})
	case "assistant":
		if msg.Refusal != nil && *msg.Refusal != "" {
			parts = append(parts, convert.Part{Kind: convert.Refusal, Text: *msg.Refusal})
		}
		for j, raw := range msg.ToolCalls {
			var tc struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			}
			if err := json.Unmarshal(raw, &tc, strict); err != nil {
				return readError(err).under(at + ".tool_calls[" + strconv.Itoa(j) + "]")
			}
			args := strings.TrimSpace(tc.Function.Arguments)
			if args != "" && !jsontext.Value(args).IsValid() {
				return badRequest(at+".tool_calls", "a tool call's arguments are not JSON")
			}
			names[tc.ID] = tc.Function.Name
			parts = append(parts, convert.Part{Kind: convert.Call, Call: &convert.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: []byte(tc.Function.Arguments)}})
		}
		out.Messages = append(out.Messages, convert.Message{Role: "assistant", Parts: parts})
	case "tool":
		res := &convert.ToolResult{ID: msg.ToolCallID, Name: names[msg.ToolCallID], Parts: parts}
		out.Messages = append(out.Messages, convert.Message{Role: "tool", Parts: []convert.Part{{Kind: convert.Result, Result: res}}})
	default:
		return badRequest(at+".role", "role %q is not supported for this model", msg.Role)
	}
	return nil
}

func (c *chatContent) canonical(at string) ([]convert.Part, error) {
	if c.list == nil {
		if c.text == "" {
			return nil, nil
		}
		return []convert.Part{{Kind: convert.Text, Text: c.text}}, nil
	}
	var parts []convert.Part
	for i := range c.list {
		p := &c.list[i]
		param := at + "[" + strconv.Itoa(i) + "]"
		if err := p.only(param); err != nil {
			return nil, err
		}
		switch p.Type {
		case "text":
			parts = append(parts, convert.Part{Kind: convert.Text, Text: *p.Text})
		case "refusal":
			parts = append(parts, convert.Part{Kind: convert.Refusal, Text: *p.Refusal})
		case "image_url":
			parts = append(parts, convert.Part{Kind: convert.Image, Media: dataURL(p.ImageURL.URL, p.ImageURL.Detail)})
		case "file":
			md := dataURL(p.File.FileData, "")
			if md.Data == "" {
				return nil, badRequest(param+".file", "only inline files (file_data) can be sent to this model")
			}
			md.Name = p.File.Filename
			parts = append(parts, convert.Part{Kind: convert.Document, Media: md})
		default:
			return nil, badRequest(param+".type", "content part type %q is not supported for this model", p.Type)
		}
	}
	return parts, nil
}

// dataURL reads "data:<type>;base64,<data>" into inline media, anything
// else as a URL.
func dataURL(u, detail string) *convert.Media {
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		meta, data, _ := strings.Cut(rest, ",")
		mediaType, _, _ := strings.Cut(meta, ";")
		return &convert.Media{MediaType: mediaType, Data: data, Detail: detail}
	}
	return &convert.Media{URL: u, Detail: detail}
}

// canonical is a Messages request as the canonical conversation, and its
// cap's field. Server tools and extended thinking are refused on other
// wires.
func (r *messagesRequest) canonical() (*convert.Chat, string, error) {
	if r.MaxTokens == nil {
		return nil, "", badRequest("max_tokens", "is required")
	}
	_, _, user := r.head()
	out := &convert.Chat{Model: r.Model, Stream: r.Stream, MaxTokens: *r.MaxTokens, User: user}
	if r.Thinking != nil && r.Thinking.Type != "disabled" {
		return nil, "", badRequest("thinking", "extended thinking is not supported for this model")
	}
	if r.Speed != nil && *r.Speed != "standard" {
		return nil, "", badRequest("speed", "fast mode is Anthropic's, and is not supported for this model")
	}
	if r.InferenceGeo != nil && *r.InferenceGeo != "global" {
		return nil, "", badRequest("inference_geo", "inference_geo is Anthropic's, and is not supported for this model")
	}
	if r.OutputFormat != nil || r.outputConfigFormat() != nil {
		return nil, "", badRequest("output_config", "structured output is not yet translated for this model; ask for it in a tool's input schema")
	}
	var err error
	if out.Temperature, err = number("temperature", r.Temperature); err != nil {
		return nil, "", err
	}
	if out.TopP, err = number("top_p", r.TopP); err != nil {
		return nil, "", err
	}
	if out.Stop, err = strs("stop_sequences", r.StopSequences); err != nil {
		return nil, "", err
	}
	if r.System.set {
		parts, err := r.System.canonical("system", nil)
		if err != nil {
			return nil, "", err
		}
		out.System = parts
	}
	for i, t := range r.Tools {
		if t.Type != "" && t.Type != "custom" {
			return nil, "", badRequest("tools["+strconv.Itoa(i)+"].type", "tool type %q runs at Anthropic and is not supported for this model", t.Type)
		}
		out.Tools = append(out.Tools, convert.Tool{Name: t.Name, Description: deref(t.Description), Parameters: []byte(t.InputSchema)})
	}
	if tc := r.ToolChoice; present(tc) {
		var choice struct {
			Type                   string `json:"type"`
			Name                   string `json:"name"`
			DisableParallelToolUse *bool  `json:"disable_parallel_tool_use"`
		}
		if err := json.Unmarshal(tc, &choice, strict); err != nil {
			return nil, "", readError(err).under("tool_choice")
		}
		out.ToolChoice = map[string]string{"auto": "auto", "any": "required", "none": "none", "tool": "tool"}[choice.Type]
		if choice.Type == "tool" {
			out.ToolName = choice.Name
		}
		if choice.DisableParallelToolUse != nil {
			p := !*choice.DisableParallelToolUse
			out.ParallelTools = &p
		}
	}
	names := map[string]string{}
	for i := range r.Messages {
		msg := &r.Messages[i]
		at := "messages[" + strconv.Itoa(i) + "]"
		if msg.Role != "user" && msg.Role != "assistant" {
			return nil, "", badRequest(at+".role", "role must be user or assistant for this model, got %q", msg.Role)
		}
		var results []convert.Part
		parts, err := msg.Content.canonical(at+".content", func(p convert.Part) { results = append(results, p) })
		if err != nil {
			return nil, "", err
		}
		for _, p := range parts {
			if p.Kind == convert.Call {
				names[p.Call.ID] = p.Call.Name
			}
		}
		for _, res := range results {
			res.Result.Name = names[res.Result.ID]
		}
		if len(results) > 0 {
			out.Messages = append(out.Messages, convert.Message{Role: "tool", Parts: results})
		}
		if len(parts) > 0 || len(results) == 0 {
			out.Messages = append(out.Messages, convert.Message{Role: msg.Role, Parts: parts})
		}
	}
	return out, "max_tokens", nil
}

// canonical is content as canonical parts; tool results go to result
// (nil: none are taken, as in a system prompt).
func (b *blocks) canonical(at string, result func(convert.Part)) ([]convert.Part, error) {
	if b.list == nil {
		if b.text == "" {
			return nil, nil
		}
		return []convert.Part{{Kind: convert.Text, Text: b.text}}, nil
	}
	var parts []convert.Part
	for i := range b.list {
		blk := &b.list[i]
		param := at + "[" + strconv.Itoa(i) + "]"
		switch blk.Type {
		case "text":
			parts = append(parts, convert.Part{Kind: convert.Text, Text: deref(blk.Text)})
		case "image", "document":
			md, err := blk.Source.canonical(param)
			if err != nil {
				return nil, err
			}
			switch {
			case blk.Type == "image":
				parts = append(parts, convert.Part{Kind: convert.Image, Media: md})
			case md.MediaType == "text/plain":
				// A text document is its text on every wire (its title
				// and context with it).
				for _, t := range []string{deref(blk.Title), deref(blk.Context), md.Data} {
					if t != "" {
						parts = append(parts, convert.Part{Kind: convert.Text, Text: t})
					}
				}
			default:
				md.Name = deref(blk.Title)
				parts = append(parts, convert.Part{Kind: convert.Document, Media: md})
			}
		case "tool_use":
			if result == nil {
				break
			}
			parts = append(parts, convert.Part{Kind: convert.Call, Call: &convert.ToolCall{ID: blk.ID, Name: blk.Name, Arguments: []byte(blk.Input)}})
		case "tool_result":
			if result == nil {
				break
			}
			res := &convert.ToolResult{ID: blk.ToolUseID, IsError: string(blk.IsError) == "true"}
			inner, err := blk.Content.canonical(param+".content", nil)
			if err != nil {
				return nil, err
			}
			for j, p := range inner {
				if p.Kind != convert.Text {
					// The other wires' tool results carry text only:
					// refused, not dropped.
					return nil, badRequest(param+".content["+strconv.Itoa(j)+"]", "a tool result's non-text block cannot be sent to this model (text only)")
				}
			}
			res.Parts = inner
			result(convert.Part{Kind: convert.Result, Result: res})
		case "thinking":
			parts = append(parts, convert.Part{Kind: convert.Thinking, Text: deref(blk.Thinking), Signature: blk.Signature})
		case "redacted_thinking":
			// Encrypted thinking is Anthropic's alone: no other model reads it.
		default:
			return nil, badRequest(param+".type", "content block type %q is not supported for this model", blk.Type)
		}
	}
	return parts, nil
}

func (s *source) canonical(at string) (*convert.Media, error) {
	if s == nil {
		return nil, badRequest(at+".source", "is required")
	}
	switch s.Type {
	case "base64":
		return &convert.Media{MediaType: s.MediaType, Data: s.Data}, nil
	case "url":
		return &convert.Media{URL: s.URL}, nil
	case "text":
		return &convert.Media{MediaType: "text/plain", Data: s.Data}, nil
	}
	return nil, badRequest(at+".source.type", "source type %q is not supported for this model", s.Type)
}

// number reads a free field that translation carries: a number, or null.
func number(name string, v jsontext.Value) (*float64, error) {
	if !present(v) {
		return nil, nil
	}
	var f float64
	if err := json.Unmarshal(v, &f); err != nil {
		return nil, badRequest(name, "must be a number")
	}
	return &f, nil
}

// strs reads a free field of stop sequences: a string or strings.
func strs(name string, v jsontext.Value) ([]string, error) {
	switch v.Kind() {
	case 0, 'n':
		return nil, nil
	case '"':
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, badRequest(name, "must be a string or an array of strings")
		}
		return []string{s}, nil
	}
	var list []string
	if err := json.Unmarshal(v, &list); err != nil {
		return nil, badRequest(name, "must be a string or an array of strings")
	}
	return list, nil
}
