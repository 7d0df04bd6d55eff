package upstream

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/tokenizer"
)

func gjsonString(raw json.RawMessage, path string) string {
	if len(raw) == 0 {
		return ""
	}
	return gjson.GetBytes(raw, path).String()
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type anthropicBlock struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	Name     string          `json:"name"`
	Input    json.RawMessage `json:"input"`
	Content  json.RawMessage `json:"content"`
	Thinking string          `json:"thinking"`
	Data     string          `json:"data"`
	// Source, Title and Context are a document's.
	Source  *anthropicSource `json:"source"`
	Title   string           `json:"title"`
	Context string           `json:"context"`
}

type anthropicSource struct {
	Type      string          `json:"type"`
	MediaType string          `json:"media_type"`
	Data      string          `json:"data"`
	Content   json.RawMessage `json:"content"`
}

// document bounds a document block: a PDF inline (base64), plain text,
// or content blocks. A document by URL or file id is refused: its page
// count cannot be known.
func (b *anthropicBlock) document(cm *tokenizer.ChatMessage, m *Model, param string) error {
	cm.Texts = append(cm.Texts, b.Title, b.Context)
	s := b.Source
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
		return addBlocks(cm, m, s.Content, blocksName{at: param + ".source.content"})
	case s.Type == "url" || s.Type == "file":
		return badRequest(param+".source", "a document by %s: the gateway cannot know its page count; send the PDF inline (base64)", s.Type)
	}
	return badRequest(param+".source", "source type %q with media type %q cannot be estimated by the gateway", s.Type, s.MediaType)
}

// Anthropic adds a system prompt when a request has tools (346 tokens on
// Claude 4 with tool_choice auto, fewer otherwise), and expands each
// schema-less client tool: bash 245 tokens, the text editor 700, computer
// use 735 plus a system prompt of up to 499. Both are bounded from above.
const (
	anthropicToolPromptTokens = 400
	anthropicClientToolTokens = 1300
)

// messagesInput counts an Anthropic Messages request: the system prompt,
// every message's blocks, and the tool definitions, as if they were an
// OpenAI chat (the caller scales the count by the model's TokenRatio).
func (r *Request) messagesInput(m *Model) (int64, error) {
	raw, ok := r.fields.get("messages")
	if !ok {
		return 0, badRequest("messages", "is required")
	}
	msgs, ok := decodeAnthropicMessages(raw)
	if !ok {
		var err error
		if msgs, err = unmarshalJSON[[]anthropicMessage](raw); err != nil {
			return 0, badRequest("messages", "must be an array of message objects")
		}
	}
	if len(msgs) == 0 {
		return 0, badRequest("messages", "must not be empty")
	}
	counted := make([]tokenizer.ChatMessage, 0, len(msgs)+1)
	if sys, ok := r.fields.get("system"); ok && !isNull(sys) {
		cm := tokenizer.ChatMessage{Role: "system"}
		if err := addBlocks(&cm, m, sys, blocksName{at: "system"}); err != nil {
			return 0, err
		}
		counted = append(counted, cm)
	}
	// One text a message, the common case, from one array (as chatInput).
	texts := make([]string, len(msgs))
	for i, msg := range msgs {
		if msg.Role != "user" && msg.Role != "assistant" {
			return 0, badRequest("messages["+strconv.Itoa(i)+"].role", "must be user or assistant")
		}
		cm := tokenizer.ChatMessage{Role: msg.Role, Texts: texts[i : i : i+1]}
		if err := addBlocks(&cm, m, msg.Content, blocksName{index: i}); err != nil {
			return 0, err
		}
		counted = append(counted, cm)
	}
	var tools []string
	var extra int64
	if raw, ok := r.fields.get("tools"); ok && !isNull(raw) {
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return 0, badRequest("tools", "must be an array")
		}
		for _, t := range list {
			tools = append(tools, string(compact(t)))
			if typ := gjson.GetBytes(t, "type").String(); typ != "" && typ != "custom" {
				// Anthropic's schema-less client tools (bash, text editor,
				// computer) are expanded at the provider.
				extra += anthropicClientToolTokens
			}
		}
		if len(list) > 0 {
			extra += anthropicToolPromptTokens
		}
	}
	return m.Counter.Chat(counted, tools) + extra, nil
}

// blocksName names content for errors, made only when one needs it: at,
// where set, is the whole name; else the content of message index.
// (Made for every message, the name was an allocation each.)
type blocksName struct {
	at    string
	index int
}

func (n blocksName) String() string {
	if n.at != "" {
		return n.at
	}
	return "messages[" + strconv.Itoa(n.index) + "].content"
}

// addBlocks counts Anthropic content: a string or an array of blocks. Blocks
// the gateway cannot bound (documents, files) are refused.
func addBlocks(cm *tokenizer.ChatMessage, m *Model, raw json.RawMessage, param blocksName) error {
	if len(raw) == 0 || isNull(raw) {
		return nil
	}
	if raw[0] == '"' {
		s, ok := jsonStr(raw)
		if !ok {
			return badRequest(param.String(), "must be a string or an array of content blocks")
		}
		cm.Texts = append(cm.Texts, s)
		return nil
	}
	blocks, ok := decodeBlocks(raw)
	if !ok {
		var err error
		if blocks, err = unmarshalJSON[[]anthropicBlock](raw); err != nil {
			return badRequest(param.String(), "must be a string or an array of content blocks")
		}
	}
	for i, b := range blocks {
		switch b.Type {
		case "text":
			cm.Texts = append(cm.Texts, b.Text)
		case "image":
			n, err := m.image("", fmt.Sprintf("%s[%d]", param, i))
			if err != nil {
				return err
			}
			cm.ImageTokens += n
		case "tool_use":
			cm.Extra = append(cm.Extra, b.Name, string(compact(b.Input)))
		case "tool_result":
			if err := addBlocks(cm, m, b.Content, blocksName{at: fmt.Sprintf("%s[%d].content", param, i)}); err != nil {
				return err
			}
		case "document":
			if err := b.document(cm, m, fmt.Sprintf("%s[%d]", param, i)); err != nil {
				return err
			}
		case "thinking":
			cm.Texts = append(cm.Texts, b.Thinking)
		case "redacted_thinking":
			cm.Extra = append(cm.Extra, b.Data)
		default:
			return badRequest(fmt.Sprintf("%s[%d].type", param, i), "content block type %q cannot be estimated by the gateway", b.Type)
		}
	}
	return nil
}

// anthropicUsage is Anthropic's usage block: input_tokens excludes the
// tokens read from or written to the cache.
type anthropicUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
}

func val(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func (a *anthropicUsage) usage() (budget.Usage, error) {
	if a == nil || a.InputTokens == nil || a.OutputTokens == nil {
		return budget.Usage{}, errNoUsage
	}
	in, cw, cr := val(a.InputTokens), val(a.CacheCreationInputTokens), val(a.CacheReadInputTokens)
	for _, v := range []int64{in, cw, cr} {
		if v < 0 || v > 1<<40 {
			return budget.Usage{}, fmt.Errorf("upstream: usage figure %d out of range", v)
		}
	}
	u := budget.Usage{InputTokens: in + cw + cr, CacheWriteTokens: cw, CachedInputTokens: cr, OutputTokens: val(a.OutputTokens)}
	return u, u.Validate()
}

// UsageFromAnthropicJSON extracts the usage of a non-streaming Messages
// response, read as UsageFromJSON reads OpenAI's.
func UsageFromAnthropicJSON(body []byte) (budget.Usage, bool) {
	raw, ok := usageObject(body)
	if !ok {
		return budget.Usage{}, false
	}
	var a anthropicUsage
	if err := json.Unmarshal([]byte(raw.raw), &a); err != nil {
		return budget.Usage{}, false
	}
	u, err := a.usage()
	return u, err == nil
}
