package bound

import (
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/tollgate-dev/tollgate/tokenizer"
)

// messagesRequest is an Anthropic Messages body (see chatRequest for the
// tags).
type messagesRequest struct {
	unknown
	Model       string             `json:"model" bound:"bounded"`
	Messages    []anthropicMessage `json:"messages" bound:"bounded"`
	System      blocks             `json:"system" bound:"bounded"`
	MaxTokens   *int64             `json:"max_tokens" bound:"bounded"`
	Stream      bool               `json:"stream" bound:"bounded"`
	Tools       []anthropicTool    `json:"tools" bound:"bounded"`
	ServiceTier *string            `json:"service_tier" bound:"bounded"`
	// Thinking's budget is spent within max_tokens.
	Thinking *thinking `json:"thinking" bound:"free"`
	Metadata *struct {
		UserID *string `json:"user_id"`
	} `json:"metadata" bound:"free"`
	// Speed and InferenceGeo bill a multiple of the price (modes).
	Speed        *string        `json:"speed" bound:"bounded"`
	InferenceGeo *string        `json:"inference_geo" bound:"bounded"`
	MCPServers   jsontext.Value `json:"mcp_servers" bound:"refused"`
	Container    jsontext.Value `json:"container" bound:"refused"`

	ToolChoice        jsontext.Value `json:"tool_choice" bound:"free"`
	StopSequences     jsontext.Value `json:"stop_sequences" bound:"free"`
	Temperature       jsontext.Value `json:"temperature" bound:"free"`
	TopP              jsontext.Value `json:"top_p" bound:"free"`
	TopK              jsontext.Value `json:"top_k" bound:"free"`
	ContextManagement jsontext.Value `json:"context_management" bound:"free"`
	// OutputConfig's effort is spent within max_tokens; its format's
	// schema, like OutputFormat's, is shown to the model: counted.
	OutputConfig *outputConfig `json:"output_config" bound:"bounded"`
	OutputFormat *outputFormat `json:"output_format" bound:"bounded"`
}

type outputConfig struct {
	Effort     jsontext.Value `json:"effort"`
	TaskBudget jsontext.Value `json:"task_budget"`
	Format     *outputFormat  `json:"format"`
}

type outputFormat struct {
	Type   string         `json:"type"`
	Schema jsontext.Value `json:"schema"`
}

type anthropicMessage struct {
	Role    string `json:"role"`
	Content blocks `json:"content"`
}

// blocks is content: a string, or content blocks.
type blocks struct{ textOr[block] }

// block is one content block; its type says which of its fields it has.
type block struct {
	Type         string         `json:"type"`
	CacheControl *cacheControl  `json:"cache_control"`
	Citations    jsontext.Value `json:"citations"`
	// text
	Text *string `json:"text"`
	// image, document, search_result
	Source  *source `json:"source"`
	Title   *string `json:"title"`
	Context *string `json:"context"`
	// tool_use
	ID    string         `json:"id"`
	Name  string         `json:"name"`
	Input jsontext.Value `json:"input"`
	// tool_reference (a deferred tool a tool result loads: its definition
	// is among the tools, counted there)
	ToolName string `json:"tool_name"`
	// tool_result, search_result
	ToolUseID string         `json:"tool_use_id"`
	Content   blocks         `json:"content"`
	IsError   jsontext.Value `json:"is_error"`
	// thinking, redacted_thinking
	Thinking  *string `json:"thinking"`
	Signature string  `json:"signature"`
	Data      *string `json:"data"`
}

type source struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
	URL       string `json:"url"`
	FileID    string `json:"file_id"`
	Content   blocks `json:"content"`
}

// cacheControl marks a prefix for the provider's cache. Its writes bill
// at the model's cache_write price for five minutes (the default TTL),
// at cache_write_1h for an hour.
type cacheControl struct {
	Type string `json:"type"`
	TTL  string `json:"ttl"`
}

type thinking struct {
	Type         string `json:"type"`
	BudgetTokens *int64 `json:"budget_tokens"`
}

// anthropicTool is a tool definition: a client's tool (custom, or one of
// Anthropic's schema-less client tools: bash, text editor, computer,
// memory) or a server tool, which runs at the provider and is refused.
// The fields of every kind are known, so that a server tool is refused
// for what it is. It is counted as its JSON text.
type anthropicTool struct {
	Type          string         `json:"type"`
	Name          string         `json:"name"`
	Description   *string        `json:"description"`
	InputSchema   jsontext.Value `json:"input_schema"`
	InputExamples jsontext.Value `json:"input_examples"`
	CacheControl  *cacheControl  `json:"cache_control"`
	// how the provider loads, checks and streams it
	Strict              jsontext.Value `json:"strict"`
	DeferLoading        jsontext.Value `json:"defer_loading"`
	EagerInputStreaming jsontext.Value `json:"eager_input_streaming"`
	AllowedCallers      jsontext.Value `json:"allowed_callers"`
	// the computer tool's
	DisplayWidthPx  jsontext.Value `json:"display_width_px"`
	DisplayHeightPx jsontext.Value `json:"display_height_px"`
	DisplayNumber   jsontext.Value `json:"display_number"`
	EnableZoom      jsontext.Value `json:"enable_zoom"`
	// the text editor's
	MaxCharacters jsontext.Value `json:"max_characters"`
	// the web search's (the one server tool the gateway prices: WebSearch)
	MaxUses        *int64         `json:"max_uses"`
	AllowedDomains jsontext.Value `json:"allowed_domains"`
	BlockedDomains jsontext.Value `json:"blocked_domains"`
	UserLocation   jsontext.Value `json:"user_location"`

	text string // the definition's JSON text
}

func (t *anthropicTool) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	type plain anthropicTool
	text, typ, err := readTool(d, (*plain)(t), func(typ string) bool { return !serverTool(typ) || webSearchTool(typ) })
	t.Type, t.text = typ, text
	return err
}

// readTool reads the next value, a tool definition, and returns its JSON
// text without white space — what the model is shown of it is no longer —
// and its type. A tool of a type client says the client runs is read into
// v the strict way; another is read no further than its type, for which
// it is refused (its other fields are the provider's, and no matter); one
// without a type is read strictly too, so that a misspelt "type" is named.
func readTool(d *jsontext.Decoder, v any, client func(typ string) bool) (text, typ string, err error) {
	at := nextParam(d)
	raw, err := d.ReadValue()
	if err != nil {
		return "", "", err
	}
	var kind struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &kind); err != nil {
		return "", "", readError(err).under(at)
	}
	if kind.Type == "" || client(kind.Type) {
		if err := json.Unmarshal(raw, v, strict); err != nil {
			return "", "", readError(err).under(at)
		}
	}
	return compact(raw), kind.Type, nil
}

func init() { register[messagesRequest]() }

// Anthropic adds a system prompt when a request has tools (346 tokens on
// Claude 4 with tool_choice auto, fewer otherwise), and expands each
// schema-less client tool: bash 245 tokens, the text editor 700, computer
// use 735 plus a system prompt of up to 499. Both are bounded from above.
const (
	anthropicToolPromptTokens = 400
	anthropicClientToolTokens = 1300
)

func (r *messagesRequest) head() (string, bool, string) {
	user := ""
	if r.Metadata != nil {
		user = deref(r.Metadata.UserID)
	}
	return r.Model, r.Stream, user
}

// input counts the system prompt, every message's blocks and the tool
// definitions as if they were an OpenAI chat (Prepare scales the count by
// the model's token ratio), and what Anthropic adds for tools.
func (r *messagesRequest) input(m *Model) (int64, int64, error) {
	if len(r.Messages) == 0 {
		return 0, 0, badRequest("messages", "is required and must not be empty")
	}
	counted := make([]tokenizer.ChatMessage, 0, len(r.Messages)+1)
	if r.System.set {
		cm := tokenizer.ChatMessage{Role: "system"}
		if err := r.System.count(&cm, m, "system"); err != nil {
			return 0, 0, err
		}
		counted = append(counted, cm)
	}
	texts := make([]string, len(r.Messages)) // one text a message, from one array
	for i := range r.Messages {
		msg := &r.Messages[i]
		at := "messages[" + strconv.Itoa(i) + "]"
		if msg.Role != "user" && msg.Role != "assistant" && msg.Role != "system" {
			return 0, 0, badRequest(at+".role", "must be user, assistant or system")
		}
		cm := tokenizer.ChatMessage{Role: msg.Role, Texts: texts[i : i : i+1]}
		if err := msg.Content.count(&cm, m, at+".content"); err != nil {
			return 0, 0, err
		}
		counted = append(counted, cm)
	}
	var tools []string
	var extra int64
	for i := range r.Tools {
		t := &r.Tools[i]
		if err := t.check("tools["+strconv.Itoa(i)+"]", m); err != nil {
			return 0, 0, err
		}
		tools = append(tools, t.text)
		if t.Type != "" && t.Type != "custom" {
			extra += anthropicClientToolTokens // expanded at the provider
		}
	}
	if len(r.Tools) > 0 {
		extra += anthropicToolPromptTokens
	}
	for _, f := range []*outputFormat{r.OutputFormat, r.outputConfigFormat()} {
		if f != nil {
			tools = append(tools, compact(f.Schema))
		}
	}
	return m.Counter.Chat(counted, tools) + extra, 0, nil
}

// check refuses a tool that runs at the provider, or of a type the
// gateway does not know.
func (t *anthropicTool) check(at string, m *Model) error {
	if t.CacheControl != nil {
		if err := t.CacheControl.check(at + ".cache_control"); err != nil {
			return err
		}
	}
	typ := t.Type
	switch {
	case typ == "" || typ == "custom":
		return nil
	case clientTool(typ):
		return nil
	case webSearchTool(typ) && m.WebSearch.MaxUses > 0:
		return nil
	case webSearchTool(typ):
		return badRequest(at+".type", "%s.type: %q is Anthropic's web search, billed per search with its results read as input, and the model %s has no web search bound: its operator can price it (models.%s.web_search)", at, typ, m.Name, m.Name)
	case serverTool(typ):
		return badRequest(at+".type", "%s.type: %q is a server tool billed by its own rules (searches, fetched pages, execution time); the gateway cannot bound it", at, typ)
	}
	return badRequest(at+".type", "tool type %q is not one the gateway knows", typ)
}

// clientTool reports whether an Anthropic tool type is a schema-less
// client tool: it runs at the client, and the provider expands its
// definition (anthropicClientToolTokens).
func clientTool(t string) bool {
	for _, prefix := range []string{"bash_", "text_editor_", "computer_", "memory_"} {
		if strings.HasPrefix(t, prefix) {
			return true
		}
	}
	return false
}

// serverTool reports whether an Anthropic tool type runs at the provider.
func serverTool(t string) bool {
	for _, prefix := range []string{"web_search_", "web_fetch_", "code_execution_", "mcp", "tool_search_"} {
		if strings.HasPrefix(t, prefix) {
			return true
		}
	}
	return false
}

func (c *cacheControl) check(at string) error {
	if c.Type != "ephemeral" {
		return badRequest(at+".type", "must be %q", "ephemeral")
	}
	switch c.TTL {
	case "", "5m", "1h":
		return nil
	}
	return badRequest(at+".ttl", "must be %q or %q", "5m", "1h")
}

// count adds content to cm: a string, or blocks. Blocks the gateway
// cannot bound (documents by URL or file, server tools' results) are
// refused.
func (b *blocks) count(cm *tokenizer.ChatMessage, m *Model, at string) error {
	if b.list == nil {
		if b.text != "" {
			cm.Texts = append(cm.Texts, b.text)
		}
		return nil
	}
	for i := range b.list {
		blk := &b.list[i]
		param := at + "[" + strconv.Itoa(i) + "]"
		if blk.CacheControl != nil {
			if err := blk.CacheControl.check(param + ".cache_control"); err != nil {
				return err
			}
		}
		if allowed, ok := blockFields[blk.Type]; ok {
			if err := onlyFields(param, blk.Type, blk.fields(), allowed...); err != nil {
				return err
			}
		}
		if blk.Source != nil {
			if err := blk.Source.check(param + ".source"); err != nil {
				return err
			}
		}
		switch blk.Type {
		case "text":
			if blk.Text == nil {
				return badRequest(param+".text", "is required")
			}
			cm.Texts = append(cm.Texts, *blk.Text)
		case "image":
			n, err := m.image("", param)
			if err != nil {
				return err
			}
			cm.ImageTokens += n
		case "document", "search_result":
			if err := blk.document(cm, m, param); err != nil {
				return err
			}
		case "tool_use":
			cm.Extra = append(cm.Extra, blk.ID, blk.Name, compact(blk.Input))
		case "tool_result":
			cm.Extra = append(cm.Extra, blk.ToolUseID)
			if err := blk.Content.count(cm, m, param+".content"); err != nil {
				return err
			}
		case "thinking":
			cm.Texts = append(cm.Texts, deref(blk.Thinking))
			cm.Extra = append(cm.Extra, blk.Signature)
		case "redacted_thinking":
			cm.Extra = append(cm.Extra, deref(blk.Data))
		case "tool_reference":
			cm.Extra = append(cm.Extra, blk.ToolName)
		default:
			return badRequest(param+".type", "content block type %q is not one the gateway can bound", blk.Type)
		}
	}
	return nil
}

// document bounds a document block (or a search result): a PDF inline
// (base64), plain text, or content blocks, and its title and context. A
// document by URL or file id is refused: its page count cannot be known.
func (blk *block) document(cm *tokenizer.ChatMessage, m *Model, param string) error {
	cm.Texts = append(cm.Texts, deref(blk.Title), deref(blk.Context))
	if blk.Type == "search_result" {
		cm.Extra = append(cm.Extra, compact(blk.Citations))
		if blk.Source != nil {
			cm.Texts = append(cm.Texts, blk.Source.URL)
		}
		return blk.Content.count(cm, m, param+".content")
	}
	s := blk.Source
	switch {
	case s == nil:
		return badRequest(param+".source", "is required")
	case s.Type == "base64" && s.MediaType == "application/pdf":
		n, err := m.pdf(s.Data, param)
		cm.ImageTokens += n
		return err
	case s.Type == "text":
		cm.Texts = append(cm.Texts, s.Data)
		return nil
	case s.Type == "content":
		return s.Content.count(cm, m, param+".source.content")
	case s.Type == "url" || s.Type == "file":
		return badRequest(param+".source", "a document by %s: the gateway cannot know its page count; send the PDF inline (base64)", s.Type)
	}
	return badRequest(param+".source", "source type %q with media type %q is not one the gateway can bound", s.Type, s.MediaType)
}

func (r *messagesRequest) output(m *Model, p *Prepared) error {
	if r.MaxTokens == nil {
		return badRequest("max_tokens", "is required")
	}
	if err := p.capOutput(m, "max_tokens", r.MaxTokens, 0, false); err != nil {
		return err
	}
	p.Choices, p.ClientWantsUsage = 1, true // its streams always carry usage
	if err := r.modes(m, p); err != nil {
		return err
	}
	return r.searches(m, p)
}

func (r *messagesRequest) refused(*Model) error {
	if err := serviceTier(r.ServiceTier); err != nil {
		return err
	}
	if present(r.MCPServers) {
		return badRequest("mcp_servers", "mcp_servers run tools at the provider, whose results the gateway cannot bound")
	}
	if present(r.Container) {
		return badRequest("container", "container bills code execution time, which the gateway cannot bound")
	}
	return nil
}

func (r *messagesRequest) outputConfigFormat() *outputFormat {
	if r.OutputConfig == nil {
		return nil
	}
	return r.OutputConfig.Format
}

// caches reports whether the request marks anything for the provider's
// cache — a tool, the system prompt or a block with cache_control — or,
// with hour, anything for an hour (ttl "1h").
func (r *messagesRequest) caches(hour bool) bool {
	for i := range r.Tools {
		if r.Tools[i].CacheControl.marks(hour) {
			return true
		}
	}
	if r.System.caches(hour) {
		return true
	}
	for i := range r.Messages {
		if r.Messages[i].Content.caches(hour) {
			return true
		}
	}
	return false
}

func (b *blocks) caches(hour bool) bool {
	for i := range b.list {
		if b.list[i].CacheControl.marks(hour) || b.list[i].Content.caches(hour) {
			return true
		}
	}
	return false
}

// marks reports whether c marks a prefix for the cache (for an hour, with
// hour).
func (c *cacheControl) marks(hour bool) bool { return c != nil && (!hour || c.TTL == "1h") }

// present reports whether a field is set: not missing, not null.
func present(v jsontext.Value) bool { return len(v) > 0 && v.Kind() != 'n' }
