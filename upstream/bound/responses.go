package bound

import (
	"strconv"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tollgate-dev/tollgate/tokenizer"
)

// responsesRequest is an OpenAI Responses body (see chatRequest for the
// tags).
type responsesRequest struct {
	unknown
	Model           string          `json:"model" bound:"bounded"`
	Input           responsesInput  `json:"input" bound:"bounded"`
	Instructions    *string         `json:"instructions" bound:"bounded"`
	MaxOutputTokens *int64          `json:"max_output_tokens" bound:"bounded"`
	Stream          bool            `json:"stream" bound:"bounded"`
	Tools           []responsesTool `json:"tools" bound:"bounded"`
	Text            *responsesText  `json:"text" bound:"bounded"`
	ServiceTier     *string         `json:"service_tier" bound:"bounded"`
	User            *string         `json:"user" bound:"free"`
	// A stored conversation's or prompt's input lives at the provider, and
	// a background response is answered later, outside the gateway.
	PreviousResponseID jsontext.Value `json:"previous_response_id" bound:"refused"`
	Conversation       jsontext.Value `json:"conversation" bound:"refused"`
	Prompt             jsontext.Value `json:"prompt" bound:"refused"`
	Background         jsontext.Value `json:"background" bound:"refused"`

	ToolChoice           jsontext.Value `json:"tool_choice" bound:"free"`
	ParallelToolCalls    jsontext.Value `json:"parallel_tool_calls" bound:"free"`
	MaxToolCalls         *int64         `json:"max_tool_calls" bound:"bounded"`
	Reasoning            jsontext.Value `json:"reasoning" bound:"free"`
	Temperature          jsontext.Value `json:"temperature" bound:"free"`
	TopP                 jsontext.Value `json:"top_p" bound:"free"`
	TopLogprobs          jsontext.Value `json:"top_logprobs" bound:"free"`
	Truncation           jsontext.Value `json:"truncation" bound:"free"`
	Store                jsontext.Value `json:"store" bound:"free"`
	Metadata             jsontext.Value `json:"metadata" bound:"free"`
	Include              jsontext.Value `json:"include" bound:"free"`
	PromptCacheKey       jsontext.Value `json:"prompt_cache_key" bound:"free"`
	PromptCacheRetention jsontext.Value `json:"prompt_cache_retention" bound:"free"`
	SafetyIdentifier     jsontext.Value `json:"safety_identifier" bound:"free"`
	StreamOptions        jsontext.Value `json:"stream_options" bound:"free"`
	ClientMetadata       jsontext.Value `json:"client_metadata" bound:"free"`
}

// responsesInput is a string (one user message) or input items.
type responsesInput struct{ textOr[responsesItem] }

// responsesItem is one input item; its type says which fields it has.
type responsesItem struct {
	Type   string `json:"type"`
	ID     string `json:"id"`
	Status string `json:"status"`
	// message (type "message", or none)
	Role    string           `json:"role"`
	Content responsesContent `json:"content"`
	// function_call, custom_tool_call
	CallID    string  `json:"call_id"`
	Name      string  `json:"name"`
	Arguments *string `json:"arguments"`
	Input     *string `json:"input"`
	// function_call_output, custom_tool_call_output
	Output responsesContent `json:"output"`
	// reasoning
	Summary          []responsesPart `json:"summary"`
	EncryptedContent *string         `json:"encrypted_content"`
	// additional_tools: tools a turn adds, counted and checked as the
	// request's own
	Tools []responsesTool `json:"tools"`
}

// responsesContent is a message's content, or a tool's output: a string,
// or parts.
type responsesContent struct{ textOr[responsesPart] }

// responsesPart is one content part of the Responses API (or a reasoning
// summary's part).
type responsesPart struct {
	Type string  `json:"type"`
	Text *string `json:"text"`
	// output_text's, kept in a conversation's history
	Annotations jsontext.Value `json:"annotations"`
	Logprobs    jsontext.Value `json:"logprobs"`
	// input_image
	ImageURL *string `json:"image_url"`
	Detail   string  `json:"detail"`
	// input_file (and input_image by file id)
	FileID   *string `json:"file_id"`
	FileData *string `json:"file_data"`
	FileURL  *string `json:"file_url"`
	Filename *string `json:"filename"`
	// refusal
	Refusal *string `json:"refusal"`
}

// responsesTool is a tool definition, counted as its JSON text: a
// function, a custom tool, a namespace of such tools (which Codex groups
// its tools in), or the web search on a model that prices it. A tool of
// another type runs at the provider (code, files, images, a search the
// model has no price for) and is refused, wherever it is.
type responsesTool struct {
	Type        string           `json:"type"`
	Name        string           `json:"name"`
	Description *string          `json:"description"`
	Parameters  jsontext.Value   `json:"parameters"`
	Strict      jsontext.Value   `json:"strict"`
	Format      jsontext.Value   `json:"format"`
	Tools       []namespacedTool `json:"tools"` // a namespace's
	// the web search's
	SearchContextSize jsontext.Value `json:"search_context_size"`
	UserLocation      jsontext.Value `json:"user_location"`
	Filters           jsontext.Value `json:"filters"`
	ExternalWebAccess jsontext.Value `json:"external_web_access"`

	text string // the definition's JSON text
}

// namespacedTool is a tool of a namespace: a function or a custom tool (a
// namespace in a namespace is refused, and read no further than its type).
type namespacedTool struct{ responsesTool }

func (t *namespacedTool) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	type plain responsesTool
	text, typ, err := readTool(d, (*plain)(&t.responsesTool), func(typ string) bool { return typ == "function" || typ == "custom" })
	t.Type, t.text = typ, text
	return err
}

func (t *responsesTool) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	type plain responsesTool
	text, typ, err := readTool(d, (*plain)(t), func(typ string) bool {
		return typ == "function" || typ == "custom" || typ == "namespace" || openAISearchTool(typ)
	})
	t.Type, t.text = typ, text
	return err
}

// check refuses a tool that runs at the provider, in a namespace too, but
// the web search on a model that prices it.
func (t *responsesTool) check(at string, m *Model) error {
	switch {
	case t.Type == "function", t.Type == "custom":
		return nil
	case t.Type == "namespace":
		for i := range t.Tools {
			inner := &t.Tools[i]
			param := at + ".tools[" + strconv.Itoa(i) + "]"
			switch inner.Type {
			case "function", "custom":
			case "namespace":
				return badRequest(param+".type", "a namespace holds functions and custom tools, not another namespace")
			default:
				return badRequest(param+".type", "a namespace holds functions and custom tools, not %q", inner.Type)
			}
		}
		return nil
	case openAISearchTool(t.Type) && m.WebSearch.MaxUses > 0:
		return nil
	case openAISearchTool(t.Type):
		return badRequest(at+".type", "%q is OpenAI's web search, billed per call with its results read as input, and the model %s has no web search bound: its operator can price it (models.%s.web_search)", t.Type, m.Name, m.Name)
	}
	return badRequest(at+".type", "hosted tool %q bills by its own rules; the gateway cannot bound it", t.Type)
}

// toolTexts checks tools and returns their texts, as counted.
func toolTexts(tools []responsesTool, at string, m *Model) ([]string, error) {
	texts := make([]string, 0, len(tools))
	for i := range tools {
		if err := tools[i].check(at+"["+strconv.Itoa(i)+"]", m); err != nil {
			return nil, err
		}
		texts = append(texts, tools[i].text)
	}
	return texts, nil
}

type responsesText struct {
	Format    *responsesFormat `json:"format"`
	Verbosity jsontext.Value   `json:"verbosity"`
}

type responsesFormat struct {
	Type        string         `json:"type"`
	Name        string         `json:"name"`
	Description *string        `json:"description"`
	Schema      jsontext.Value `json:"schema"`
	Strict      jsontext.Value `json:"strict"`
}

func init() { register[responsesRequest]() }

func (r *responsesRequest) head() (string, bool, string) { return r.Model, r.Stream, deref(r.User) }

// input counts the instructions, the input (a string or items) and the
// tools, as a chat.
func (r *responsesRequest) input(m *Model) (int64, int64, error) {
	var msgs []tokenizer.ChatMessage
	if r.Instructions != nil && *r.Instructions != "" {
		msgs = append(msgs, tokenizer.ChatMessage{Role: "system", Texts: []string{*r.Instructions}})
	}
	if !r.Input.set {
		return 0, 0, badRequest("input", "is required")
	}
	if r.Input.list == nil {
		msgs = append(msgs, tokenizer.ChatMessage{Role: "user", Texts: []string{r.Input.text}})
	}
	var audio int64
	for i := range r.Input.list {
		it := &r.Input.list[i]
		at := "input[" + strconv.Itoa(i) + "]"
		cm, err := it.count(m, at)
		if err != nil {
			return 0, 0, err
		}
		msgs = append(msgs, cm)
		audio += cm.AudioTokens
	}
	tools, err := toolTexts(r.Tools, "tools", m)
	if err != nil {
		return 0, 0, err
	}
	for i := range r.Input.list {
		if it := &r.Input.list[i]; it.Type == "additional_tools" {
			more, err := toolTexts(it.Tools, "input["+strconv.Itoa(i)+"].tools", m)
			if err != nil {
				return 0, 0, err
			}
			tools = append(tools, more...)
		}
	}
	if r.Text != nil && r.Text.Format != nil {
		f := r.Text.Format
		if f.Type == "json_schema" {
			tools = append(tools, f.Name+" "+deref(f.Description)+" "+compact(f.Schema))
		} else if err := onlyFields("text.format", f.Type, []field{{"name", f.Name != ""}, {"description", f.Description != nil},
			{"schema", len(f.Schema) > 0}, {"strict", len(f.Strict) > 0}}); err != nil {
			return 0, 0, err // a schema is read only for json_schema
		}
	}
	return m.Counter.Chat(msgs, tools), audio, nil
}

// count is one input item as a chat message.
func (it *responsesItem) count(m *Model, at string) (tokenizer.ChatMessage, error) {
	cm := tokenizer.ChatMessage{Role: it.Role}
	typ := it.Type
	if typ == "" {
		typ = "message"
	}
	if allowed, ok := itemFields[typ]; ok {
		if err := onlyFields(at, typ, it.fields(), allowed...); err != nil {
			return cm, err
		}
	}
	switch typ {
	case "message":
		if it.Role == "" {
			return cm, badRequest(at+".role", "is required")
		}
		err := it.Content.count(&cm, m, at+".content")
		return cm, err
	case "function_call":
		cm.Role, cm.Extra = "assistant", []string{it.Name, deref(it.Arguments), it.CallID}
	case "custom_tool_call":
		cm.Role, cm.Extra = "assistant", []string{it.Name, deref(it.Input), it.CallID}
	case "function_call_output", "custom_tool_call_output":
		cm.Role, cm.Extra = "tool", []string{it.CallID}
		err := it.Output.count(&cm, m, at+".output")
		return cm, err
	case "additional_tools":
		cm.Role = "developer" // its tools are counted with the request's
	case "reasoning":
		// A reasoning item sent back is read as input. Its encrypted
		// content is reasoning text the gateway cannot read: a byte of it
		// is counted as a token, more than the text it holds could be
		// unless that was compressed more than fivefold (docs/bounds.md).
		cm.Role = "assistant"
		for _, s := range it.Summary {
			cm.Texts = append(cm.Texts, deref(s.Text))
		}
		if it.EncryptedContent != nil {
			cm.ImageTokens += int64(len(*it.EncryptedContent))
		}
		return cm, it.Content.count(&cm, m, at+".content")
	default:
		return cm, badRequest(at+".type", "input item type %q is not one the gateway can bound", it.Type)
	}
	return cm, nil
}

// count adds content to cm: a string, or parts.
func (c *responsesContent) count(cm *tokenizer.ChatMessage, m *Model, at string) error {
	if c.list == nil {
		if c.text != "" {
			cm.Texts = append(cm.Texts, c.text)
		}
		return nil
	}
	for i := range c.list {
		p := &c.list[i]
		param := at + "[" + strconv.Itoa(i) + "]"
		if allowed, ok := partFields[p.Type]; ok {
			if err := onlyFields(param, p.Type, p.fields(), allowed...); err != nil {
				return err
			}
		}
		switch p.Type {
		case "input_text", "output_text", "summary_text", "reasoning_text":
			if p.Text == nil {
				return badRequest(param+".text", "is required")
			}
			cm.Texts = append(cm.Texts, *p.Text)
		case "refusal":
			cm.Texts = append(cm.Texts, deref(p.Refusal))
		case "input_image":
			n, err := m.image(p.Detail, param)
			if err != nil {
				return err
			}
			cm.ImageTokens += n
		case "input_file":
			if sources := btoi(p.FileData != nil) + btoi(p.FileID != nil) + btoi(p.FileURL != nil); sources != 1 {
				return badRequest(param, "%s: a file is given by one of file_data, file_id and file_url", param)
			}
			n, err := m.file(deref(p.FileData), deref(p.FileID), param)
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

func (r *responsesRequest) output(m *Model, p *Prepared) error {
	if err := p.capOutput(m, "max_output_tokens", r.MaxOutputTokens, m.DefaultOutputTokens, false); err != nil {
		return err
	}
	p.Choices, p.ClientWantsUsage = 1, true // its streams always carry usage
	return r.searches(m, p)
}

func (r *responsesRequest) refused(*Model) error {
	for _, f := range [...]struct {
		name string
		v    jsontext.Value
	}{{"previous_response_id", r.PreviousResponseID}, {"conversation", r.Conversation}, {"prompt", r.Prompt}} {
		if present(f.v) {
			return badRequest(f.name, "the gateway cannot bound the input of a stored conversation or prompt; send the input itself")
		}
	}
	if present(r.Background) && string(r.Background) != "false" {
		return badRequest("background", "a background response is answered later, outside the gateway, which then cannot settle it")
	}
	return serviceTier(r.ServiceTier)
}
