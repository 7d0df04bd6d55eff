package bound

import (
	"strconv"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/tollgate-dev/tollgate/tokenizer"
)

// chatRequest is an OpenAI Chat Completions body: every field the gateway
// knows. Each field's `bound` tag says what it does to the bill, and
// docs/bounds.md lists them (TestBoundsDocListsEveryField):
//
//   - bounded: the bound reads it (its text is counted, it caps or
//     multiplies the output, it selects a price);
//   - free: the provider bills nothing for it (sampling, logging, caching
//     keys), so it passes as sent;
//   - refused: it bills what the bound cannot compute; refused where it is
//     set, with the field's name.
//
// A field that is not here is refused unless the upstream's pass_fields
// lets it through.
type chatRequest struct {
	unknown
	Model               string           `json:"model" bound:"bounded"`
	Messages            []chatMessage    `json:"messages" bound:"bounded"`
	MaxTokens           *int64           `json:"max_tokens" bound:"bounded"`
	MaxCompletionTokens *int64           `json:"max_completion_tokens" bound:"bounded"`
	N                   *int64           `json:"n" bound:"bounded"`
	BestOf              *int64           `json:"best_of" bound:"bounded"`
	Stream              bool             `json:"stream" bound:"bounded"`
	StreamOptions       *streamOptions   `json:"stream_options" bound:"bounded"`
	Tools               []chatTool       `json:"tools" bound:"bounded"`
	Functions           []jsontext.Value `json:"functions" bound:"bounded"`
	ResponseFormat      *responseFormat  `json:"response_format" bound:"bounded"`
	Prediction          *prediction      `json:"prediction" bound:"bounded"`
	Audio               jsontext.Value   `json:"audio" bound:"bounded"`
	Modalities          []string         `json:"modalities" bound:"bounded"`
	ServiceTier         *string          `json:"service_tier" bound:"bounded"`
	WebSearchOptions    jsontext.Value   `json:"web_search_options" bound:"refused"`
	User                *string          `json:"user" bound:"free"`

	ToolChoice           jsontext.Value `json:"tool_choice" bound:"free"`
	FunctionCall         jsontext.Value `json:"function_call" bound:"free"`
	ParallelToolCalls    jsontext.Value `json:"parallel_tool_calls" bound:"free"`
	Temperature          jsontext.Value `json:"temperature" bound:"free"`
	TopP                 jsontext.Value `json:"top_p" bound:"free"`
	PresencePenalty      jsontext.Value `json:"presence_penalty" bound:"free"`
	FrequencyPenalty     jsontext.Value `json:"frequency_penalty" bound:"free"`
	LogitBias            jsontext.Value `json:"logit_bias" bound:"free"`
	Logprobs             jsontext.Value `json:"logprobs" bound:"free"`
	TopLogprobs          jsontext.Value `json:"top_logprobs" bound:"free"`
	Seed                 jsontext.Value `json:"seed" bound:"free"`
	Stop                 jsontext.Value `json:"stop" bound:"free"`
	Metadata             jsontext.Value `json:"metadata" bound:"free"`
	Store                jsontext.Value `json:"store" bound:"free"`
	ReasoningEffort      jsontext.Value `json:"reasoning_effort" bound:"free"`
	Verbosity            jsontext.Value `json:"verbosity" bound:"free"`
	PromptCacheKey       jsontext.Value `json:"prompt_cache_key" bound:"free"`
	PromptCacheRetention jsontext.Value `json:"prompt_cache_retention" bound:"free"`
	SafetyIdentifier     jsontext.Value `json:"safety_identifier" bound:"free"`
}

// chatMessage is one message of a chat. The tool calls of an assistant's
// turn are counted as their JSON text, whatever is in them.
type chatMessage struct {
	Role         string           `json:"role"`
	Content      chatContent      `json:"content"`
	Name         string           `json:"name"`
	ToolCalls    []jsontext.Value `json:"tool_calls"`
	FunctionCall jsontext.Value   `json:"function_call"`
	ToolCallID   string           `json:"tool_call_id"`
	Refusal      *string          `json:"refusal"`
	// Audio is a reference to audio the upstream keeps from an earlier
	// answer, which the gateway cannot count: refused when set.
	Audio jsontext.Value `json:"audio"`
	// Annotations are an earlier answer's citations, sent back with it:
	// counted as their text.
	Annotations jsontext.Value `json:"annotations"`
}

// chatContent is a message's content: a string, or parts.
type chatContent struct{ textOr[chatPart] }

// chatPart is one content part; which fields it may have is its type's.
type chatPart struct {
	Type       string      `json:"type"`
	Text       *string     `json:"text"`
	ImageURL   *imageURL   `json:"image_url"`
	InputAudio *inputAudio `json:"input_audio"`
	File       *chatFile   `json:"file"`
	Refusal    *string     `json:"refusal"`
}

// imageURL is chat's image: {"url", "detail"}, or (as some servers take
// it) the URL alone.
type imageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail"`
}

func (u *imageURL) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	if d.PeekKind() == '"' {
		return json.UnmarshalDecode(d, &u.URL)
	}
	type plain imageURL
	return json.UnmarshalDecode(d, (*plain)(u))
}

type inputAudio struct {
	Data   string `json:"data"`
	Format string `json:"format"`
}

type chatFile struct {
	FileData string `json:"file_data"`
	FileID   string `json:"file_id"`
	Filename string `json:"filename"`
}

// chatTool is a tool definition, counted as its JSON text; its type says
// whether it runs at the client (function, custom) or the provider.
type chatTool struct {
	Type     string         `json:"type"`
	Function jsontext.Value `json:"function"`
	Custom   jsontext.Value `json:"custom"`

	text string // the definition's JSON text
}

func (t *chatTool) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	type plain chatTool
	text, typ, err := readTool(d, (*plain)(t), func(typ string) bool { return typ == "function" || typ == "custom" })
	t.Type, t.text = typ, text
	return err
}

type streamOptions struct {
	IncludeUsage       *bool          `json:"include_usage"`
	IncludeObfuscation jsontext.Value `json:"include_obfuscation"`
}

// responseFormat asks for JSON output; a schema is shown to the model, and
// its text is counted.
type responseFormat struct {
	Type       string         `json:"type"`
	JSONSchema jsontext.Value `json:"json_schema"`
}

// prediction is a predicted output: its rejected tokens bill as output on
// top of the cap, so the whole prediction is added to the output bound.
type prediction struct {
	Type    string      `json:"type"`
	Content chatContent `json:"content"`
}

func init() { register[chatRequest]() }

// input counts a chat's prompt: its messages with their parts, the tool
// definitions and a response schema. audio is the part that is audio.
func (c *chatRequest) input(m *Model) (tokens, audio int64, err error) {
	if len(c.Messages) == 0 {
		return 0, 0, badRequest("messages", "is required and must not be empty")
	}
	counted := make([]tokenizer.ChatMessage, len(c.Messages))
	// One text a message, the common case, from one array.
	texts := make([]string, len(c.Messages))
	for i := range c.Messages {
		msg := &c.Messages[i]
		// A path is made for an error, not for every message.
		at := func() string { return "messages[" + strconv.Itoa(i) + "]" }
		if msg.Role == "" {
			return 0, 0, badRequest(at()+".role", "is required")
		}
		if len(msg.Audio) > 0 && msg.Audio.Kind() != 'n' {
			return 0, 0, badRequest(at()+".audio", "refers to audio the upstream keeps, which the gateway cannot count")
		}
		cm := tokenizer.ChatMessage{Role: msg.Role, Name: msg.Name, Texts: texts[i : i : i+1]}
		if err := msg.Content.count(&cm, m, func() string { return at() + ".content" }); err != nil {
			return 0, 0, err
		}
		for _, tc := range msg.ToolCalls {
			cm.Extra = append(cm.Extra, compact(tc))
		}
		if len(msg.FunctionCall) > 0 && msg.FunctionCall.Kind() != 'n' {
			cm.Extra = append(cm.Extra, compact(msg.FunctionCall))
		}
		if msg.ToolCallID != "" {
			cm.Extra = append(cm.Extra, msg.ToolCallID)
		}
		if msg.Refusal != nil {
			cm.Extra = append(cm.Extra, *msg.Refusal)
		}
		if present(msg.Annotations) {
			cm.Extra = append(cm.Extra, compact(msg.Annotations))
		}
		counted[i] = cm
		audio += cm.AudioTokens
	}
	var tools []string
	for i, t := range c.Tools {
		if t.Type != "function" && t.Type != "custom" {
			return 0, 0, badRequest("tools["+strconv.Itoa(i)+"].type", "tool type %q is not one the gateway can bound (function, custom)", t.Type)
		}
		// The tool's own JSON text, which bounds the API's rendering of it
		// (tokenizer.TestToolsCountIsAnUpperBound).
		tools = append(tools, t.text)
	}
	for _, f := range c.Functions {
		tools = append(tools, compact(f))
	}
	if f := c.ResponseFormat; f != nil && len(f.JSONSchema) > 0 {
		tools = append(tools, compact(f.JSONSchema))
	}
	return m.Counter.Chat(counted, tools), audio, nil
}

// count adds a message's content to cm: a string, or parts. Only parts the
// gateway can bound are taken: text, images, input audio, inline PDFs. at
// makes the content's path, for a part's.
func (c *chatContent) count(cm *tokenizer.ChatMessage, m *Model, at func() string) error {
	if c.list == nil {
		if c.text != "" {
			cm.Texts = append(cm.Texts, c.text)
		}
		return nil
	}
	for i := range c.list {
		p := &c.list[i]
		param := at() + "[" + strconv.Itoa(i) + "]"
		if err := p.only(param); err != nil {
			return err
		}
		switch p.Type {
		case "text":
			cm.Texts = append(cm.Texts, *p.Text)
		case "refusal":
			cm.Texts = append(cm.Texts, *p.Refusal)
		case "image_url":
			n, err := m.image(p.ImageURL.Detail, param)
			if err != nil {
				return err
			}
			cm.ImageTokens += n
		case "input_audio":
			n, err := m.audio(p.InputAudio.Format, p.InputAudio.Data, param)
			if err != nil {
				return err
			}
			cm.AudioTokens += n
		case "file":
			if p.File.FileData != "" && p.File.FileID != "" {
				return badRequest(param, "%s: a file is given by file_data or file_id, not both", param)
			}
			n, err := m.file(p.File.FileData, p.File.FileID, param)
			if err != nil {
				return err
			}
			cm.ImageTokens += n
		default:
			return badRequest(param+".type", "content part type %q is not one the gateway can bound", p.Type)
		}
	}
	return nil
}

// only refuses a part whose fields are not its type's: one field holds
// its content, the one named as its type.
func (p *chatPart) only(param string) error {
	fields := [...]struct {
		name string
		set  bool
	}{{"text", p.Text != nil}, {"image_url", p.ImageURL != nil}, {"input_audio", p.InputAudio != nil},
		{"file", p.File != nil}, {"refusal", p.Refusal != nil}}
	known := false
	for _, f := range fields {
		if f.name == p.Type {
			if !f.set {
				return badRequest(param+"."+f.name, "is required for a part of type %q", p.Type)
			}
			known = true
		}
	}
	if !known {
		return badRequest(param+".type", "content part type %q is not one the gateway can bound", p.Type)
	}
	for _, f := range fields {
		if f.set && f.name != p.Type {
			return badRequest(param+"."+f.name, "is not a field of a part of type %q", p.Type)
		}
	}
	return nil
}

// output is the chat's output bound: its cap (written into the body where
// the client set none), its choices and its prediction.
func (c *chatRequest) output(m *Model, p *Prepared) error {
	key, cap := "max_completion_tokens", c.MaxCompletionTokens
	if c.MaxTokens != nil {
		if c.MaxCompletionTokens != nil {
			return badRequest("max_tokens", "set max_tokens or max_completion_tokens, not both")
		}
		key, cap = "max_tokens", c.MaxTokens
	}
	moved := false
	if m.CapField == "max_tokens" && key == "max_completion_tokens" {
		// The server reads max_tokens only: the cap moves there.
		p.del(key)
		key, moved = "max_tokens", cap != nil
	}
	if err := p.capOutput(m, key, cap, m.DefaultOutputTokens, moved); err != nil {
		return err
	}
	choices, err := choicesOf(c.N, c.BestOf, 1)
	if err != nil {
		return err
	}
	p.Choices = choices
	if c.Prediction != nil {
		if c.Prediction.Type != "content" {
			return badRequest("prediction.type", "must be %q", "content")
		}
		var cm tokenizer.ChatMessage
		if err := c.Prediction.Content.count(&cm, m, func() string { return "prediction.content" }); err != nil {
			return err
		}
		for _, t := range cm.Texts {
			p.Predicted += m.Counter.Count(t)
		}
	}
	if c.Stream {
		p.askUsage(m, c.StreamOptions)
	}
	p.AudioOutput = c.asksAudio()
	return nil
}

func (c *chatRequest) head() (string, bool, string) { return c.Model, c.Stream, deref(c.User) }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// refused refuses what a chat asks for that bills beyond the price table:
// a dearer service tier, audio output the model has no price for, hosted
// web search.
func (c *chatRequest) refused(m *Model) error {
	if err := serviceTier(c.ServiceTier); err != nil {
		return err
	}
	if c.asksAudio() && !m.AudioOutput {
		return badRequest("audio", "audio output is billed at audio token prices, which the model %s has none of (set models.%s.output_audio); ask for text", m.Name, m.Name)
	}
	if len(c.WebSearchOptions) > 0 && c.WebSearchOptions.Kind() != 'n' {
		return badRequest("web_search_options", "bills per search, which the gateway cannot bound")
	}
	return nil
}

// asksAudio reports whether the chat asks for audio output.
func (c *chatRequest) asksAudio() bool {
	if len(c.Audio) > 0 && c.Audio.Kind() != 'n' {
		return true
	}
	for _, x := range c.Modalities {
		if x == "audio" {
			return true
		}
	}
	return false
}

// serviceTier refuses a tier that bills above the model's list price.
func serviceTier(tier *string) error {
	if tier == nil {
		return nil
	}
	switch *tier {
	case "auto", "default", "flex", "standard_only":
		return nil
	}
	return badRequest("service_tier", "service_tier %q bills above the model's list price; the gateway prices standard processing only", *tier)
}
